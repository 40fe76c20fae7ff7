"""Training speed and quality against a nanoGPT-style baseline, measured in the same run.

The baseline re-implements nanoGPT's model.py and train.py loop for its CPU "baby" Shakespeare-char
config (4 layers, 4 heads, embedding 128, context 64, batch 12, learning rate 1e-3 with 100 warm-up steps
and cosine decay to 1e-4, AdamW betas (0.9, 0.99), weight decay 0.1, grad clip 1, dropout 0, bias off, tied
input/output embeddings, no torch.compile). Ours runs the same config through playground.train.train().

    python benchmarks/train_speed.py                       # the train command against the baseline's loop, each
                                                           #   in its own process, alternating: ratio per pair
    python benchmarks/train_speed.py --in-process          # + both loops in this process: medians per step
    python benchmarks/train_speed.py --interleaved         # + the command's run with a baseline step after each of
                                                           #   its steps: both timed under the same load
    python benchmarks/train_speed.py --full                # + ours for 2000 steps, val loss at 2000
    python benchmarks/train_speed.py --tiny-preset         # the "tiny" preset: val loss reached in 60 s
    python benchmarks/train_speed.py --compile             # + the baseline through torch.compile (nanoGPT's
                                                           #   compile=True), its compile time and break-even

Reference on this project's 2-core machines (nanoGPT itself): 49.7 ms/step median, about 15,400 tokens/s,
val loss 1.886 at step 2000 in about 1 min 50 s.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from playground.config import ModelConfig, TrainConfig
from playground.device import describe
from playground.model.gpt import GPT
from playground.settings import PROCESS_DEFAULTS, TRAINING_DEFAULTS
from playground.text.data import Corpus, TokenIdsDataset, load_corpus, split_train_val
from playground.text.tokenizer import CharTokenizer
from playground.training.loop import evaluate, train
from playground.training.presets import TRAIN_PRESETS

BABY = dict(layers_num=4, heads_num=4, embedding_dim=128, context_size=64)
BABY_BATCH, BABY_LR, BABY_STEPS = 12, 1e-3, 2000


# ----------------------------------------------------------------------------- the nanoGPT-style baseline
class _NanoAttention(nn.Module):
    def __init__(self, c: int, h: int):
        super().__init__()
        self.c_attn, self.c_proj, self.h = nn.Linear(c, 3 * c, bias=False), nn.Linear(c, c, bias=False), h

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class _NanoBlock(nn.Module):
    def __init__(self, c: int, h: int):
        super().__init__()
        self.ln_1, self.attn = nn.LayerNorm(c, bias=False), _NanoAttention(c, h)
        self.ln_2 = nn.LayerNorm(c, bias=False)
        self.c_fc, self.c_proj = nn.Linear(c, 4 * c, bias=False), nn.Linear(4 * c, c, bias=False)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class NanoGPTBaseline(nn.Module):
    """nanoGPT's GPT (model.py) without dropout, bias off, tied token embedding and LM head."""

    def __init__(self, vocab: int, context: int, c: int, h: int, layers: int):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(context, c)
        self.blocks = nn.ModuleList(_NanoBlock(c, h) for _ in range(layers))
        self.ln_f, self.lm_head = nn.LayerNorm(c, bias=False), nn.Linear(c, vocab, bias=False)
        self.wte.weight = self.lm_head.weight
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, 0.0, 0.02)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))



def shakespeare(path: str | Path | None = None) -> Corpus:
    """Tiny Shakespeare from ``path``, or wherever load_corpus finds it (PLAYGROUND_TINY_SHAKESPEARE, the cache, a
    download); never the built-in fallback: figures measured on its 20,400 characters would compare with nothing."""
    corpus = load_corpus(str(path) if path else None)
    if corpus.source == "builtin":
        raise SystemExit(f"Tiny Shakespeare is not here ({corpus.reason}): pass --data path/to/tinyshakespeare.txt "
                         "or set PLAYGROUND_TINY_SHAKESPEARE")
    return corpus

def _nanogpt_lr(step: int) -> float:
    warmup, decay, lr, min_lr = 100, BABY_STEPS, BABY_LR, 1e-4
    if step < warmup:
        return lr * (step + 1) / (warmup + 1)
    ratio = (step - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * min(ratio, 1.0))) * (lr - min_lr)


def nanogpt_baseline(vocab: int) -> tuple[NanoGPTBaseline, torch.optim.Optimizer]:
    """nanoGPT's baby model (seed 1337) and its AdamW: decay on matrices only, betas (0.9, 0.99)."""
    torch.manual_seed(1337)
    model = NanoGPTBaseline(vocab, BABY["context_size"], BABY["embedding_dim"], BABY["heads_num"],
                            BABY["layers_num"])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                                  lr=BABY_LR, betas=(0.9, 0.99))  # nanoGPT uses fused only on CUDA
    return model, optimizer


def nanogpt_step(model: NanoGPTBaseline, optimizer: torch.optim.Optimizer, data: TokenIdsDataset,
                 generator: torch.Generator, step: int) -> float:
    """One step of nanoGPT's loop: its learning rate, a batch of 12, backward, clip 1, AdamW; the loss."""
    for group in optimizer.param_groups:
        group["lr"] = _nanogpt_lr(step)
    x, y = data.random_batch(BABY_BATCH, generator)
    loss = model(x, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def time_baseline(data: TokenIdsDataset, vocab: int, steps: int) -> list[float]:
    model, optimizer = nanogpt_baseline(vocab)
    generator = torch.Generator().manual_seed(1337)
    times = []
    for step in range(steps):
        started = time.perf_counter()
        nanogpt_step(model, optimizer, data, generator, step)
        times.append(time.perf_counter() - started)
    return times


def _median_seconds(fn, repeats: int) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def matmul_floor(model: nn.Module, tokens: int, repeats: int = 50) -> float:
    """Seconds a training step of ``model`` on ``tokens`` tokens spends in its Linear layers' matrix products alone,
    each timed apart at the step's shapes (median of ``repeats``): the forward ``x @ W.T`` and the backward's two,
    the input's gradient ``dy @ W`` and the weight's ``dy.T @ x``. Attention's own products (context x context per
    head) are left out, so no implementation of the same model can take a step in less."""
    total = 0.0
    for module in model.modules():
        if isinstance(module, nn.Linear):
            x, dy = torch.randn(tokens, module.in_features), torch.randn(tokens, module.out_features)
            weight = torch.randn(module.out_features, module.in_features)
            for left, right in ((x, weight.T), (dy, weight), (dy.T, x)):
                total += _median_seconds(functools.partial(torch.matmul, left, right), repeats)
    return total


def time_compiled(data: TokenIdsDataset, vocab: int, steps: int) -> tuple[float, list[float]]:
    """The baseline as nanoGPT's ``compile=True`` runs it (torch.compile, inductor), compiled from nothing: inductor's
    caches are off, so the first steps pay the whole compilation as a fresh machine would. Returns the seconds the
    first three steps took (compilation included) and every later step's time."""
    import torch._inductor.config as inductor_config

    inductor_config.force_disable_caches = True
    model, optimizer = nanogpt_baseline(vocab)
    compiled = torch.compile(model)
    generator = torch.Generator().manual_seed(1337)
    started = time.perf_counter()
    for step in range(3):
        nanogpt_step(compiled, optimizer, data, generator, step)
    first = time.perf_counter() - started
    times = []
    for step in range(3, steps):
        started = time.perf_counter()
        nanogpt_step(compiled, optimizer, data, generator, step)
        times.append(time.perf_counter() - started)
    return first, times


def time_ours(data: TokenIdsDataset, vocab: int, steps: int, model_fields: dict, config: TrainConfig) -> list[float]:
    torch.manual_seed(config.seed)
    model = GPT(ModelConfig(vocabulary_size=vocab, **model_fields))
    times, last = [], [time.perf_counter()]

    def on_step(step, metrics):
        now = time.perf_counter()
        times.append(now - last[0])
        last[0] = now

    train(model, replace(config, steps=steps), data, None, on_step=on_step)
    return times


def baseline_tokens_per_second(data: TokenIdsDataset, vocab: int, steps: int) -> float:
    """The baseline's loop for ``steps`` steps from a fresh model: tokens over the loop's whole wall time (its first
    steps included, as the train command's figure includes its own)."""
    model, optimizer = nanogpt_baseline(vocab)
    generator = torch.Generator().manual_seed(1337)
    started = time.perf_counter()
    for step in range(steps):
        nanogpt_step(model, optimizer, data, generator, step)
    return steps * BABY_BATCH * BABY["context_size"] / (time.perf_counter() - started)


def time_interleaved(steps: int, corpus: Path, extra: list[str]) -> None:
    """The train command's run, prepared from its flags as the command prepares it (precision probe, probes every
    probe_interval steps, the progress bar's callback), with one step of the baseline's loop inside each of its
    on_step calls: step k of each runs right after step k of the other, so a machine shared with other work slows
    both alike. Prints each loop's median and mean wall and CPU ms a step (the first 10 and each evaluation's step
    dropped: the command's tokens/s leaves its evaluations out) and the ratios."""
    from playground.cli.train import Progress, build_parser, request_from_args
    from playground.training.run import prepare_run, run_training

    with tempfile.TemporaryDirectory() as weights:
        run = prepare_run(request_from_args(build_parser().parse_args([*command_flags(steps, corpus, Path(weights)),
                                                                         *extra])))
        model, optimizer = nanogpt_baseline(run.tokenizer.vocabulary_size)
        generator = torch.Generator().manual_seed(1337)
        ours, baseline = {"wall": [], "cpu": []}, {"wall": [], "cpu": []}
        mark, evaluated = [time.perf_counter(), time.process_time()], set()
        with Progress(steps, 0) as progress:
            progress.bar.disable = True  # its callback runs, its drawing would only fill this script's output

            def on_step(step, metrics):
                progress(step, metrics)
                if metrics.val_loss is not None:
                    evaluated.add(step - 1)
                started = time.perf_counter(), time.process_time()
                nanogpt_step(model, optimizer, run.train_data, generator, step - 1)
                ended = time.perf_counter(), time.process_time()
                for times, first, last in ((ours, mark, started), (baseline, started, ended)):
                    times["wall"].append(last[0] - first[0])
                    times["cpu"].append(last[1] - first[1])
                mark[:] = ended

            run_training(run, on_step=on_step)
    print(f"\nthe train command's run interleaved with the baseline's loop, a step of each in turn, {steps} steps "
          f"(the first 10 and evaluations' dropped; {run.precision.reason}; probes every "
          f"{run.request.train.probe_interval} steps):")
    for clock in ("wall", "cpu"):
        a, b = ([t for index, t in enumerate(times[clock]) if index >= 10 and index not in evaluated]
                for times in (ours, baseline))
        print(f"  {clock:4s} ms/step: ours median {statistics.median(a) * 1000:7.2f} mean "
              f"{statistics.mean(a) * 1000:7.2f}, baseline median {statistics.median(b) * 1000:7.2f} mean "
              f"{statistics.mean(b) * 1000:7.2f}; tokens/s "
              f"ratio ours / baseline: median {statistics.median(b) / statistics.median(a):.3f}, mean "
              f"{statistics.mean(b) / statistics.mean(a):.3f}")


def command_flags(steps: int, corpus: Path, weights: Path) -> list[str]:
    """``python -m playground.train``'s flags for the baby config: nanoGPT's shape, batch, schedule and AdamW, one
    evaluation (at the end, outside the tokens/s), no checkpoint before the last."""
    return ["--layers-num", "4", "--heads-num", "4", "--embedding-dim", "128", "--context-size", "64",
            "--dropout-rate", "0", "--no-use-bias", "--batch-size", str(BABY_BATCH), "--steps", str(steps),
            "--learning-rate", str(BABY_LR), "--warmup-steps", "100", "--learning-rate-decay", "cosine",
            "--min-learning-rate-ratio", "0.1", "--optimizer", "adamw", "--time-budget-seconds", "0",
            "--eval-interval", str(steps), "--eval-batches", "20", "--checkpoint-interval", str(steps),
            "--seed", "1337", "--device", "cpu", "--corpus", str(corpus), "--run-name", "baby",
            "--weights-dir", str(weights), "--replace"]


def run_command(steps: int, corpus: Path, extra: list[str]) -> tuple[float, str]:
    """The train command in a fresh process as a user runs it: (its "done:" line's tokens/s, the precision line)."""
    with tempfile.TemporaryDirectory() as weights:
        done = subprocess.run([sys.executable, "-m", "playground.train", *command_flags(steps, corpus, Path(weights)),
                               *extra], capture_output=True, text=True, timeout=3600)
    found = re.search(r"done: .*?, ([\d,]+) tok/s", done.stderr)
    if done.returncode or not found:
        raise SystemExit(f"the train command failed ({done.returncode}):\n{done.stderr[-3000:]}")
    precision = next((line for line in done.stderr.splitlines() if line.startswith("precision:")), "")
    return float(found.group(1).replace(",", "")), precision


def run_baseline(steps: int, corpus: Path, threads: int | None, same_environment: bool) -> float:
    """The baseline's loop in a fresh process with the environment nanoGPT's train.py gets: none of the app's
    process defaults (PROCESS_DEFAULTS, TRAINING_DEFAULTS) set; or, ``same_environment``, the train command's (its
    OpenMP threads' short spin), so that only the loops differ."""
    env = {key: value for key, value in os.environ.items() if key not in {**PROCESS_DEFAULTS, **TRAINING_DEFAULTS}}
    if same_environment:
        env.update(TRAINING_DEFAULTS)
    threads_flag = ["--threads", str(threads)] if threads else []
    done = subprocess.run([sys.executable, __file__, "--baseline-worker", "--steps", str(steps), "--data",
                           str(corpus), *threads_flag], capture_output=True, text=True, env=env, timeout=3600)
    found = re.search(r"tokens/s ([\d.]+)", done.stdout)
    if done.returncode or not found:
        raise SystemExit(f"the baseline failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return float(found.group(1))


def compare_command(pairs: int, steps: int, corpus: Path, threads: int | None, extra: list[str],
                    same_environment: bool = False) -> None:
    """``pairs`` rounds of the baseline then the train command (the order swapping each round), each a fresh
    process of ``steps`` steps; prints each pair's ratio, then the median and range of the ratios."""
    if threads:
        extra = [*extra, "--threads", str(threads)]
    print(f"\nthe train command against the baseline's loop, baby config, {steps} steps each, {pairs} alternating "
          f"pairs (fresh processes; tokens/s over each loop's wall time, evaluation left out; the baseline with "
          f"{'the command' if same_environment else 'nanoGPT'}'s environment):")
    print(f"  python -m playground.train {' '.join(command_flags(steps, corpus, Path('WEIGHTS')))} {' '.join(extra)}")
    ratios = []
    for pair in range(pairs):
        if pair % 2:
            ours, precision = run_command(steps, corpus, extra)
            baseline = run_baseline(steps, corpus, threads, same_environment)
        else:
            baseline = run_baseline(steps, corpus, threads, same_environment)
            ours, precision = run_command(steps, corpus, extra)
        ratios.append(ours / baseline)
        print(f"  pair {pair + 1}: baseline {baseline:9,.0f} tokens/s, train command {ours:9,.0f} tokens/s, "
              f"ratio {ratios[-1]:.3f}  ({precision or 'precision not printed'})", flush=True)
    print(f"  ratio train command / baseline: median {statistics.median(ratios):.3f}, range {min(ratios):.3f}-"
          f"{max(ratios):.3f} over {pairs} pairs (goal >= 1.00)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200, help="timed steps per implementation")
    parser.add_argument("--pairs", type=int, default=5, help="alternating pairs of the train command and the baseline")
    parser.add_argument("--in-process", action="store_true",
                        help="also time both loops in this process, step by step, with the matrix products' floor")
    parser.add_argument("--interleaved", action="store_true",
                        help="also run the command's run (as it prepares it) with a baseline step after each of its "
                             "steps, in this process")
    parser.add_argument("--command-flag", action="append", default=[], dest="command_flags", metavar="FLAG",
                        help="a flag added to the train command's (repeatable), e.g. --command-flag=--precision="
                             "float32")
    parser.add_argument("--same-environment", action="store_true",
                        help="run the baseline with the train command's process defaults (OMP_WAIT_POLICY=PASSIVE...) "
                             "rather than none, as nanoGPT runs")
    parser.add_argument("--baseline-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--full", action="store_true", help="also train ours 2000 steps and report val loss")
    parser.add_argument("--tiny-preset", action="store_true", help="train the tiny preset, report val loss vs time")
    parser.add_argument("--compile", action="store_true",
                        help="also time the baseline through torch.compile, its compilation included")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--data", type=Path, default=None,
                        help="Tiny Shakespeare's path (default: found as the app finds it)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    corpus = shakespeare(args.data)
    tokenizer = CharTokenizer.train_from_text(corpus.text)
    train_ids, val_ids = split_train_val(tokenizer.encode(corpus.text))
    vocab = tokenizer.vocabulary_size
    baby_data = TokenIdsDataset(train_ids, BABY["context_size"])
    if args.baseline_worker:
        print(f"tokens/s {baseline_tokens_per_second(baby_data, vocab, args.steps):.1f}")
        return
    print(f"corpus {corpus.name} ({len(corpus.text):,} characters, {corpus.source}); {describe('cpu')}; "
          f"torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tinyshakespeare.txt"  # the text just loaded, wherever it came from
        path.write_text(corpus.text, encoding="utf-8")
        if args.pairs:
            compare_command(args.pairs, args.steps, path, args.threads, args.command_flags, args.same_environment)
        if args.interleaved:
            time_interleaved(args.steps, path, args.command_flags)
    baby_config = TrainConfig(batch_size=BABY_BATCH, steps=BABY_STEPS, learning_rate=BABY_LR, warmup_steps=100,
                              min_learning_rate_ratio=0.1, weight_decay=0.1, grad_clip=1.0, eval_interval=250,
                              eval_batches=20, seed=1337, device="cpu")
    tokens_per_step = BABY_BATCH * BABY["context_size"]
    rows = []
    if args.in_process:
        loops = (("nanoGPT-style baseline", lambda: time_baseline(baby_data, vocab, args.steps)),
                 ("ours (playground.train)", lambda: time_ours(baby_data, vocab, args.steps, BABY, baby_config)))
        for name, fn in loops:
            times = fn()[10:]  # drop warm-up steps
            median = statistics.median(times)
            rows.append((name, median * 1000, tokens_per_step / median))
        print(f"\nbaby config, {args.steps} steps each (first 10 dropped), medians:")
        for name, ms, tps in rows:
            print(f"  {name:26s} {ms:7.2f} ms/step  {tps:10,.0f} tokens/s")
        print(f"  ratio ours / baseline: {rows[1][2] / rows[0][2]:.2f}x tokens/s "
              f"(goal >= 1.00, stretch 1.25; reference nanoGPT on these machines: 15,400 tokens/s)")
        floor = matmul_floor(nanogpt_baseline(vocab)[0], tokens_per_step) * 1000
        baseline_ms = rows[0][1]
        print(f"  the matrix products alone (the model's Linear shapes timed apart, attention's left out): "
              f"{floor:.2f} ms/step; a step that did nothing else would be {baseline_ms / floor:.2f}x the baseline. "
              f"1.25x needs {baseline_ms / 1.25:.2f} ms/step: {baseline_ms / 1.25 - floor:.2f} ms for attention, GELU, "
              f"LayerNorm, the loss, the optimizer and autograd, on which the baseline spends "
              f"{baseline_ms - floor:.2f} ms")

    if args.compile:
        first, times = time_compiled(baby_data, vocab, args.steps)
        eager = rows[0][1] / 1000 if rows else statistics.median(time_baseline(baby_data, vocab, args.steps)[10:])
        median = statistics.median(times[7:])  # the first 10 dropped, as above
        saved = eager - median
        print(f"\nthe baseline through torch.compile: first 3 steps {first:.1f} s (compilation), then "
              f"{median * 1000:.2f} ms/step, {tokens_per_step / median:,.0f} tokens/s: "
              f"{eager / median:.2f}x the eager baseline")
        if saved > 0:
            print(f"  compilation pays back after about {(first - 3 * median) / saved:,.0f} steps "
                  f"(nanoGPT's baby recipe runs {BABY_STEPS:,})")
        else:
            print("  no faster per step: compilation never pays back")

    if args.full:
        torch.manual_seed(1337)
        model = GPT(ModelConfig(vocabulary_size=vocab, **BABY))
        val_data = TokenIdsDataset(val_ids, BABY["context_size"])
        result = train(model, baby_config, baby_data, val_data)
        final = evaluate(model, val_data, 200, BABY_BATCH)
        print(f"\nours, baby config, {BABY_STEPS} steps: val loss {final:.4f} (200 batches; in-run "
              f"{result.val_loss[-1][1]:.4f}), {result.tokens_per_second:,.0f} tokens/s, training "
              f"{result.wall_seconds - result.eval_seconds:.1f} s + evaluation {result.eval_seconds:.1f} s "
              f"(reference: nanoGPT 1.886 in about 110 s)")

    if args.tiny_preset:
        preset = TRAIN_PRESETS["tiny"]
        config = preset.train
        torch.manual_seed(config.seed)
        model = GPT(ModelConfig(vocabulary_size=vocab, **preset.model.to_dict()))
        val_data = TokenIdsDataset(val_ids, preset.model.context_size)
        data = TokenIdsDataset(train_ids, preset.model.context_size)
        started = time.perf_counter()
        reached = []

        def on_step(step, metrics):
            if metrics.val_loss is not None:
                reached.append((step, metrics.val_loss, time.perf_counter() - started))

        result = train(model, config, data, val_data, on_step=on_step)
        print(f"\ntiny preset ({model.parameter_count():,} parameters, {config.steps} steps, batch "
              f"{config.batch_size}, lr {config.learning_rate}):")
        for step, loss, seconds in reached:
            print(f"  step {step:5d}  val loss {loss:.4f}  at {seconds:6.1f} s wall (evaluation included)")
        final = evaluate(model, val_data, 200, config.batch_size)
        print(f"  final val loss {final:.4f} (200 batches) after {result.wall_seconds:.1f} s wall; "
              f"target <= 1.886 within 60 s")


if __name__ == "__main__":
    main()
