"""Time to quality on this machine: validation loss against training seconds, nanoGPT's CPU recipe beside ours.

One process, one data split (nanoGPT's: the first 90% of Tiny Shakespeare's characters train, the last 10%
validate) and one fixed set of validation windows (``--val-windows`` windows of 64 characters at seeded offsets),
scored the same way for every run. Each run gets ``--seconds`` of training; evaluation is not counted (its clock
stops while it is scored, every ``--eval-every`` seconds of training), so a run that evaluates more often is not
slower for it. The runs:

  nanoGPT baby    nanoGPT's config/train_shakespeare_char.py with the README's CPU overrides (4 layers, 4 heads,
                  128 wide, context 64, batch 12, lr 1e-3, 100 warm-up steps, cosine to 1e-4 over 2000 steps,
                  AdamW betas (0.9, 0.99), weight decay 0.1, grad clip 1, no dropout), re-implemented as in
                  train_speed.py
  tiny before     the ``tiny`` preset until benchmarks/sweep.py tuned it: AdamW, lr 4e-3, 1200 steps, 2 layers x 128
  tiny 2x128      the ``tiny`` preset until the sweep tried smaller shapes: Muon at the sweep's learning rate, 2 layers
                  x 128 (4 heads), ended by its 50 s time budget
  tiny preset     our ``tiny`` preset as the Train tab and the CLI run it: the same, 2 layers x 96 (3 heads of 32), for
                  50 s of training steps (its time budget, which sizes the learning rate's decay) or 3,000 steps,
                  whichever ends first

Then the ``tiny`` preset the way a learner runs it: ``python -m playground.train --preset tiny`` in a fresh process,
each of its own evaluation lines timed from the command's start (imports, corpus, evaluation and checkpoints all
counted: the goal's "wall from the command's start").

Then tokens/s on nanoGPT's exact baby configuration, ours against the baseline, alternating ``--repeats`` times.
It prints the issue's goals beside the figures: the tiny preset at val <= 1.886 within 20 s and <= 1.55 at 60 s;
ours >= 1.25x nanoGPT's tokens/s.

    python benchmarks/time_to_quality.py                   # 60 s per run, 3 alternating speed repeats
    python benchmarks/time_to_quality.py --seconds 20 --repeats 1     # a quick look
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch
from train_speed import (
    BABY,
    BABY_BATCH,
    BABY_LR,
    BABY_STEPS,
    nanogpt_baseline,
    nanogpt_step,
    shakespeare,
    time_baseline,
    time_ours,
)

from playground.config import ModelConfig, TrainConfig
from playground.device import describe
from playground.model.gpt import GPT
from playground.text.data import TokenIdsDataset, split_train_val
from playground.text.tokenizer import CharTokenizer
from playground.training.loop import train
from playground.training.presets import TRAIN_PRESETS

TARGET_LOSS = 1.886  # nanoGPT's baby recipe after its 2000 steps
GOALS = {"time to 1.886": 20.0, "val at 60 s": 1.55, "tokens/s ratio": 1.25}
TINY_BEFORE = dict(optimizer="adamw", learning_rate=4e-3, steps=1200, time_budget_seconds=0.0)  # before the sweep
SHAPE_2X128 = dict(layers_num=2, heads_num=4, embedding_dim=128, context_size=64)  # the shape before the second sweep
CONTEXT = 64  # nanoGPT's baby context and the tiny preset's: one set of validation windows fits both


def warm_up() -> None:
    """Pay the process's one-off costs before any run's clock starts: torch 2.13's first optimizer imports
    torch._dynamo (about 1.1 s on 2 cores), which would otherwise count against whichever run came first."""
    torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))])


class Clock:
    """Training seconds: runs while the model trains, paused while it is scored."""

    def __init__(self):
        self.started, self.paused = time.perf_counter(), 0.0

    def seconds(self) -> float:
        return time.perf_counter() - self.started - self.paused


@torch.no_grad()
def score(model, x: torch.Tensor, y: torch.Tensor, batch: int = 64) -> float:
    """Mean cross-entropy over the fixed windows (x, y), in chunks; the model's mode is left as it was."""
    was_training = model.training
    model.eval()
    total = 0.0
    for start in range(0, len(x), batch):
        xb, yb = x[start:start + batch], y[start:start + batch]
        out = model(xb, yb)
        loss = out if isinstance(out, torch.Tensor) else out.loss
        total += float(loss) * len(xb)
    model.train(was_training)
    return total / len(x)


class Recorder:
    """Scores the model every ``every`` training seconds (clock paused) and stops the run at ``limit``."""

    def __init__(self, model, windows, every: float, limit: float):
        self.model, self.windows, self.every, self.limit = model, windows, every, limit
        self.clock, self.points, self.next_at, self.steps = Clock(), [], every, 0

    def after_step(self, step: int) -> None:
        self.steps = step
        now = self.clock.seconds()
        if now >= self.next_at or now >= self.limit:
            paused = time.perf_counter()
            self.points.append((now, step, score(self.model, *self.windows)))
            self.clock.paused += time.perf_counter() - paused
            self.next_at = now + self.every

    def finish(self) -> None:
        """Score the last step too, if its schedule ended the run between two scores."""
        if not self.points or self.points[-1][1] != self.steps:
            self.points.append((self.clock.seconds(), self.steps, score(self.model, *self.windows)))

    def done(self) -> bool:
        return self.clock.seconds() >= self.limit


def run_nanogpt(train_data: TokenIdsDataset, vocab: int, windows, every: float, limit: float) -> Recorder:
    model, optimizer = nanogpt_baseline(vocab)
    generator = torch.Generator().manual_seed(1337)
    recorder = Recorder(model, windows, every, limit)
    step = 0
    while not recorder.done() and step < BABY_STEPS:
        nanogpt_step(model, optimizer, train_data, generator, step)
        step += 1
        recorder.after_step(step)
    recorder.finish()
    return recorder


def run_ours(config: TrainConfig, model_fields: dict, train_data: TokenIdsDataset, vocab: int, windows,
             every: float, limit: float) -> Recorder:
    torch.manual_seed(config.seed)
    model = GPT(ModelConfig(vocabulary_size=vocab, **model_fields))
    recorder = Recorder(model, windows, every, limit)
    train(model, replace(config, device="cpu"), train_data, None,
          on_step=lambda step, metrics: recorder.after_step(step), should_stop=recorder.done)
    recorder.finish()
    return recorder


EVAL_LINE = re.compile(r"step (\d+)/\d+: train loss [\d.]+, val loss ([\d.]+)")


def run_cli(data: Path | None) -> tuple[list[tuple[float, int, float]], float]:
    """``python -m playground.train --preset tiny`` in a fresh process, into a throwaway weights folder.

    Returns its evaluations as (seconds since the command started, step, val loss) and the command's whole wall time.
    """
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as weights:
        command = [sys.executable, "-m", "playground.train", "--preset", "tiny", "--device", "cpu",
                   "--weights-dir", weights, "--run-name", "time-to-quality"]
        if data is not None:
            command += ["--corpus", str(data)]
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=root, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        points = []
        for line in process.stderr:  # the evaluation lines arrive as they are written (tqdm's bar aside)
            found = EVAL_LINE.search(line)
            if found:
                points.append((time.perf_counter() - started, int(found.group(1)), float(found.group(2))))
        if process.wait() != 0:
            raise SystemExit(f"{' '.join(command)} failed with exit code {process.returncode}")
        return points, time.perf_counter() - started


def first_below(points, target: float) -> float | None:
    return next((seconds for seconds, _, loss in points if loss <= target), None)


MARK_SLACK = 0.5  # a score is taken at the first step past its mark: one within this many seconds counts as the mark's


def loss_at(points, seconds: float) -> float | None:
    """The last score taken by ``seconds`` of training (a run that ended sooner: its last); None before the first."""
    taken = [loss for at, _, loss in points if at <= seconds + MARK_SLACK]
    return taken[-1] if taken else None


def shown(value: float | None, form: str, missing: str = "-") -> str:
    return missing if value is None else format(value, form)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="training seconds per run (evaluation excluded)")
    parser.add_argument("--eval-every", type=float, default=5.0, help="score every this many training seconds")
    parser.add_argument("--val-windows", type=int, default=512, help="fixed validation windows of 64 characters")
    parser.add_argument("--repeats", type=int, default=3, help="alternating tokens/s measurements of each")
    parser.add_argument("--speed-steps", type=int, default=150, help="steps per tokens/s measurement")
    parser.add_argument("--data", type=Path, default=None, help="a text file (default: Tiny Shakespeare)")
    parser.add_argument("--seed", type=int, default=0, help="where the validation windows start")
    args = parser.parse_args()

    corpus = shakespeare(args.data)
    tokenizer = CharTokenizer.train_from_text(corpus.text)
    train_ids, val_ids = split_train_val(tokenizer.encode(corpus.text))
    vocab = tokenizer.vocabulary_size
    val_data = TokenIdsDataset(val_ids, CONTEXT)
    windows = val_data.random_batch(args.val_windows, torch.Generator().manual_seed(args.seed))
    train_data = TokenIdsDataset(train_ids, CONTEXT)
    print(f"{corpus.name}: {len(corpus.text):,} characters, nanoGPT's 90/10 split; {args.val_windows} fixed "
          f"validation windows of {CONTEXT}; {describe('cpu')}, "
          f"torch {torch.__version__}; {args.seconds:g} s of training per run, scored every {args.eval_every:g} s")

    tiny = TRAIN_PRESETS["tiny"]
    warm_up()
    runs = {
        "nanoGPT baby": lambda: run_nanogpt(train_data, vocab, windows, args.eval_every, args.seconds),
        "tiny before": lambda: run_ours(replace(tiny.train, **TINY_BEFORE), SHAPE_2X128, train_data, vocab,
                                        windows, args.eval_every, args.seconds),
        "tiny 2x128": lambda: run_ours(tiny.train, SHAPE_2X128, train_data, vocab, windows, args.eval_every,
                                       args.seconds),
        "tiny preset": lambda: run_ours(tiny.train, tiny.model.to_dict(), train_data, vocab, windows,
                                        args.eval_every, args.seconds),
    }
    results = {}
    for name, fn in runs.items():
        recorder = fn()
        results[name] = recorder
        curve = ", ".join(f"{seconds:.0f}s {loss:.3f}" for seconds, _, loss in recorder.points)
        print(f"  {name:14s} {recorder.steps:5d} steps: {curve}")

    print(f"\n{'run':14s} {'to <= 1.886':>12s} {'val at 20 s':>12s} {'val at 60 s':>12s} {'last val':>9s}")
    for name, recorder in results.items():
        reached = first_below(recorder.points, TARGET_LOSS)
        at20, at60 = loss_at(recorder.points, 20.0), loss_at(recorder.points, 60.0)
        last = recorder.points[-1][2] if recorder.points else float("nan")
        print(f"{name:14s} {shown(reached, '.1f', 'not reached'):>12s} {shown(at20, '.3f'):>12s} "
              f"{shown(at60, '.3f'):>12s} {last:9.3f}")
    print(f"goals for the tiny preset: val <= {TARGET_LOSS} within {GOALS['time to 1.886']:g} s, "
          f"<= {GOALS['val at 60 s']} at 60 s")

    points, wall = run_cli(args.data)
    tiny_train = tiny.train
    budget = (f"{tiny_train.time_budget_seconds:g} s of steps or " if tiny_train.time_budget_seconds else "")
    print(f"\n`python -m playground.train --preset tiny` ({tiny_train.optimizer}, lr {tiny_train.learning_rate:g}, "
          f"batch {tiny_train.batch_size}, {budget}{tiny_train.steps} steps; its own {tiny_train.eval_batches} "
          f"validation batches), seconds from the command's start: "
          + ", ".join(f"{seconds:.1f}s {loss:.3f}" for seconds, _, loss in points)
          + f"; done after {wall:.1f} s")
    reached = first_below(points, TARGET_LOSS)
    print(f"  val <= {TARGET_LOSS} at {shown(reached, '.1f', 'never')} s from the command's start "
          f"(goal {GOALS['time to 1.886']:g} s); val at 60 s: {shown(loss_at(points, 60.0), '.3f')} "
          f"(goal {GOALS['val at 60 s']})")

    baby_config = TrainConfig(batch_size=BABY_BATCH, steps=args.speed_steps, learning_rate=BABY_LR, warmup_steps=100,
                              min_learning_rate_ratio=0.1, weight_decay=0.1, grad_clip=1.0, eval_interval=10**6,
                              seed=1337, device="cpu")
    tokens_per_step = BABY_BATCH * BABY["context_size"]
    theirs, ours = [], []
    for _ in range(args.repeats):  # alternating, so a busier moment hurts both
        theirs.append(tokens_per_step / statistics.median(time_baseline(train_data, vocab, args.speed_steps)[10:]))
        ours.append(tokens_per_step / statistics.median(time_ours(train_data, vocab, args.speed_steps, BABY,
                                                                  baby_config)[10:]))
    ratio = statistics.median(ours) / statistics.median(theirs)
    print(f"\nnanoGPT's baby config, {args.speed_steps} steps x {args.repeats} alternating: nanoGPT-style "
          f"{statistics.median(theirs):,.0f} tokens/s, ours {statistics.median(ours):,.0f} tokens/s: {ratio:.2f}x "
          f"(goal >= {GOALS['tokens/s ratio']}x)")


if __name__ == "__main__":
    main()
