"""Training: the plain loop, the run around it (data, checkpoints), presets and the CLI.

``train(...)`` knows nothing about the UI or files: it calls ``on_step(step, metrics)`` and checks
``should_stop()`` (minGPT's callbacks). ``run_training(...)`` prepares corpus, tokenizer and model,
validates everything before the first step, and saves atomic checkpoints through checkpoints.py.
The job manager (jobs.py) and the CLI (``python -m playground.train``) share that one code path.
"""

from __future__ import annotations

import argparse
import logging
import math
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from playground import checkpoints
from playground.config import ConfigError, Limits, ModelConfig, TrainConfig
from playground.data import Corpus, CorpusError, TokenIdsDataset, load_corpus, split_train_val
from playground.device import describe, pick_device
from playground.model import GPT
from playground.sampling import generate
from playground.tokenizer import CharTokenizer

logger = logging.getLogger(__name__)

MODEL_FIELDS = ("layers_num", "heads_num", "embedding_dim", "context_size", "dropout_rate", "use_bias")


class TrainingError(RuntimeError):
    """Training cannot start or cannot go on; the message says why."""


@dataclass(frozen=True)
class Preset:
    description: str
    model: dict[str, Any]
    train: TrainConfig


PRESETS: dict[str, Preset] = {
    "tiny": Preset(
        "about a minute on a laptop CPU",
        dict(layers_num=2, heads_num=4, embedding_dim=128, context_size=64, dropout_rate=0.0, use_bias=False),
        TrainConfig(batch_size=32, steps=1200, learning_rate=4e-3, warmup_steps=50, eval_interval=200,
                    eval_batches=10, checkpoint_interval=600, sample_interval=200),
    ),
    "small": Preset(
        "the shipped model's shape: about half an hour on a 2-core CPU",
        dict(layers_num=4, heads_num=4, embedding_dim=192, context_size=128, dropout_rate=0.0, use_bias=False),
        TrainConfig(batch_size=32, steps=5000, learning_rate=2e-3, warmup_steps=100, eval_interval=250,
                    eval_batches=20, checkpoint_interval=1000, sample_interval=500),
    ),
    "gpu": Preset(
        "nanoGPT's Shakespeare-char shape, for a CUDA GPU",
        dict(layers_num=6, heads_num=6, embedding_dim=384, context_size=256, dropout_rate=0.2, use_bias=False),
        TrainConfig(batch_size=64, steps=5000, learning_rate=1e-3, warmup_steps=100, eval_interval=250,
                    eval_batches=20, checkpoint_interval=1000, sample_interval=500, device="cuda"),
    ),
}


@dataclass
class StepMetrics:
    step: int  # steps done so far, counting from 1
    steps: int
    train_loss: float
    learning_rate: float
    tokens_per_second: float
    elapsed_seconds: float
    val_loss: float | None = None


@dataclass
class TrainResult:
    steps_done: int
    stopped: bool
    train_loss: list[list[float]] = field(default_factory=list)  # [step, loss]
    val_loss: list[list[float]] = field(default_factory=list)
    tokens_per_second: float = 0.0
    wall_seconds: float = 0.0
    eval_seconds: float = 0.0


def configure_optimizer(model: GPT, config: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW; weight decay on matrices only (not biases, LayerNorms)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    fused = device.type in ("cuda", "cpu")
    return torch.optim.AdamW(groups, lr=config.learning_rate, betas=(0.9, 0.99), fused=fused)


@torch.no_grad()
def evaluate(model: GPT, dataset: TokenIdsDataset, batches: int, batch_size: int, seed: int = 0) -> float:
    """Mean loss over ``batches`` fixed, seeded batches (the same windows every call)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(batches):
        x, y = dataset.random_batch(batch_size, generator)
        total += float(model(x.to(device), y.to(device)).loss)
    model.train(was_training)
    return total / batches


def train(model: GPT, config: TrainConfig, train_data: TokenIdsDataset, val_data: TokenIdsDataset | None = None,
          *, on_step: Callable[[int, StepMetrics], None] | None = None,
          should_stop: Callable[[], bool] | None = None, start_step: int = 0) -> TrainResult:
    """Train ``model`` in place from ``start_step`` to ``config.steps``.

    Calls ``on_step(step, metrics)`` after every step (with ``val_loss`` set on evaluation steps) and
    stops early when ``should_stop()`` is true. Raises TrainingError if the loss stops being finite.
    """
    device = next(model.parameters()).device
    optimizer = configure_optimizer(model, config, device)
    generator = torch.Generator().manual_seed(config.seed + start_step)
    result = TrainResult(steps_done=start_step, stopped=False)
    tokens_per_step = config.batch_size * train_data.block_size
    model.train()
    started = time.perf_counter()
    for step in range(start_step, config.steps):
        if should_stop is not None and should_stop():
            result.stopped = True
            break
        lr = config.learning_rate_at(step)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = train_data.random_batch(config.batch_size, generator)
        loss = model(x.to(device, non_blocking=True), y.to(device, non_blocking=True)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        loss_value = loss.item()
        done = step + 1
        if not math.isfinite(loss_value):
            raise TrainingError(
                f"the loss became {loss_value} at step {done}; try a lower learning_rate "
                f"(now {config.learning_rate})"
            )
        result.steps_done = done
        result.train_loss.append([done, loss_value])
        train_seconds = time.perf_counter() - started - result.eval_seconds
        metrics = StepMetrics(done, config.steps, loss_value, lr,
                              (done - start_step) * tokens_per_step / max(train_seconds, 1e-9),
                              time.perf_counter() - started)
        if val_data is not None and (done % config.eval_interval == 0 or done == config.steps):
            eval_started = time.perf_counter()
            metrics.val_loss = evaluate(model, val_data, config.eval_batches, config.batch_size)
            result.eval_seconds += time.perf_counter() - eval_started
            result.val_loss.append([done, metrics.val_loss])
        if on_step is not None:
            on_step(done, metrics)
    result.wall_seconds = time.perf_counter() - started
    train_seconds = max(result.wall_seconds - result.eval_seconds, 1e-9)
    result.tokens_per_second = (result.steps_done - start_step) * tokens_per_step / train_seconds
    model.eval()
    return result


@dataclass(frozen=True)
class RunRequest:
    """Everything a training run needs, as plain values (what the Train tab and the CLI collect)."""

    run_name: str
    model: dict[str, Any]
    train: TrainConfig
    corpus_path: str | None = None
    corpus_text: str | None = None
    resume: bool = False
    weights_dir: Path | None = None


@dataclass
class PreparedRun:
    request: RunRequest
    corpus: Corpus
    tokenizer: CharTokenizer
    model: GPT
    train_data: TokenIdsDataset
    val_data: TokenIdsDataset
    device: torch.device
    start_step: int
    history: dict[str, list] = field(default_factory=dict)


def prepare_run(request: RunRequest, limits: Limits | None = None) -> PreparedRun:
    """Check everything before the first step: name, sizes, caps, corpus, device, resume target."""
    limits = limits or Limits.from_env()
    name = checkpoints.validate_name(request.run_name)
    train_config = request.train
    if train_config.steps > limits.max_steps:
        raise ConfigError(f"steps {train_config.steps} is above this server's limit of {limits.max_steps}")
    unknown = sorted(set(request.model) - set(MODEL_FIELDS))
    if unknown:
        raise ConfigError(f"unknown model setting(s): {', '.join(unknown)}")
    context_size = request.model.get("context_size", 64)
    if isinstance(context_size, int) and context_size > limits.max_context_size:
        raise ConfigError(f"context_size {context_size} is above this server's limit of {limits.max_context_size}")
    device = pick_device(train_config.device)
    corpus = load_corpus(request.corpus_path, request.corpus_text)
    if len(corpus.text.encode("utf-8")) > limits.max_upload_bytes and corpus.source in ("text", "path") \
            and request.corpus_path and "tinyshakespeare" not in str(request.corpus_path):
        raise CorpusError(f"the corpus is larger than this server's limit of {limits.max_upload_bytes:,} bytes")
    start_step, history = 0, {}
    if request.resume:
        previous = checkpoints.load_checkpoint(name, directory=request.weights_dir)
        tokenizer = previous.tokenizer
        unknown_chars = tokenizer.find_unknown(corpus.text)
        if unknown_chars:
            missing = "".join(sorted({u.character for u in unknown_chars}))
            raise CorpusError(
                f"the corpus has {len(set(missing))} character(s) the resumed model lacks: {missing!r}"
            )
        model = previous.model
        config = previous.config
        start_step = previous.steps
        history = {k: list((previous.training or {}).get(k, [])) for k in ("train_loss", "val_loss")}
        if start_step >= train_config.steps:
            raise ConfigError(
                f"{name} has already done {start_step} steps; set steps above {start_step} to continue"
            )
    else:
        tokenizer = CharTokenizer.train_from_text(corpus.text)
        config = ModelConfig(vocabulary_size=tokenizer.vocabulary_size, **request.model)
        if config.parameter_count() > limits.max_parameters:
            raise ConfigError(
                f"the model would have {config.parameter_count():,} parameters; this server's limit is "
                f"{limits.max_parameters:,}"
            )
        torch.manual_seed(train_config.seed)
        model = GPT(config)
    ids = tokenizer.encode(corpus.text)
    train_ids, val_ids = split_train_val(ids)
    if len(val_ids) <= config.context_size:
        raise CorpusError(
            f"the corpus ({len(corpus.text):,} characters) is too short for context_size {config.context_size}: "
            f"its last 10% must hold more than {config.context_size} characters, so it needs at least "
            f"{10 * (config.context_size + 1):,}"
        )
    model.to(device)
    return PreparedRun(request, corpus, tokenizer, model, TokenIdsDataset(train_ids, config.context_size),
                       TokenIdsDataset(val_ids, config.context_size), device, start_step, history)


def training_record(run: PreparedRun, result: TrainResult, seconds_before: float = 0.0) -> dict[str, Any]:
    """What training.json holds."""
    return {
        "steps_done": result.steps_done,
        "steps_planned": run.request.train.steps,
        "train_loss": run.history.get("train_loss", []) + result.train_loss,
        "val_loss": run.history.get("val_loss", []) + result.val_loss,
        "tokens_per_second": round(result.tokens_per_second, 1),
        "wall_seconds": round(seconds_before + result.wall_seconds, 2),
        "eval_seconds": round(result.eval_seconds, 2),
        "corpus": {"name": run.corpus.name, "characters": len(run.corpus.text), "source": run.corpus.source},
        "device": describe(run.device),
        "seed": run.request.train.seed,
        "train_config": run.request.train.to_dict(),
        "stopped_early": result.stopped,
    }


def run_training(run: PreparedRun, *, on_step: Callable[[int, StepMetrics], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 on_sample: Callable[[int, str], None] | None = None) -> TrainResult:
    """Train a prepared run, saving a checkpoint every ``checkpoint_interval`` steps and at the end."""
    config = run.request.train
    name = checkpoints.validate_name(run.request.run_name)
    partial = TrainResult(steps_done=run.start_step, stopped=False)
    # Samples start from a newline, or from the corpus's first character when it has none.
    prompt = "\n" if not run.tokenizer.find_unknown("\n") else run.corpus.text[0]

    def save(result: TrainResult) -> None:
        checkpoints.save_checkpoint(run.model, run.tokenizer, name, directory=run.request.weights_dir,
                                    training=training_record(run, result))

    def step_callback(step: int, metrics: StepMetrics) -> None:
        partial.steps_done = step
        partial.train_loss.append([step, metrics.train_loss])
        if metrics.val_loss is not None:
            partial.val_loss.append([step, metrics.val_loss])
        partial.tokens_per_second = metrics.tokens_per_second
        partial.wall_seconds = metrics.elapsed_seconds
        if on_step is not None:
            on_step(step, metrics)
        if on_sample is not None and step % config.sample_interval == 0:
            on_sample(step, generate(run.model, run.tokenizer, prompt, max_new_tokens=120, seed=step, top_k=None))
            run.model.train()
        if step % config.checkpoint_interval == 0 and step < config.steps:
            save(partial)
            run.model.train()

    result = train(run.model, config, run.train_data, run.val_data, on_step=step_callback,
                   should_stop=should_stop, start_step=run.start_step)
    if result.steps_done > run.start_step:
        save(result)
    return result


def model_card(run: PreparedRun, result: TrainResult, command: str) -> str:
    """A model card (README.md) for a checkpoint trained by the CLI: what, how, how well."""
    config, train_config = run.model.config, run.request.train
    record = training_record(run, result)
    val = f"{result.val_loss[-1][1]:.4f}" if result.val_loss else "not measured"
    shape = (f"{config.layers_num} layers, {config.heads_num} heads, embedding {config.embedding_dim}, context "
             f"{config.context_size}, vocabulary {config.vocabulary_size}, dropout {config.dropout_rate}, "
             f"bias {config.use_bias}")
    schedule = (f"batch {train_config.batch_size}, learning rate {train_config.learning_rate}, warm-up "
                f"{train_config.warmup_steps}, cosine decay to {train_config.min_learning_rate_ratio}x")
    rows = [
        ("parameters", f"{run.model.parameter_count():,}"),
        ("shape", shape),
        ("corpus", f"{run.corpus.name}, {len(run.corpus.text):,} characters (first 90% trains, last 10% validates)"),
        ("steps", f"{result.steps_done} of {train_config.steps} ({schedule})"),
        ("validation loss", f"**{val}** (cross-entropy in nats, mean of {train_config.eval_batches} fixed batches "
                            "of the last-10% split)"),
        ("wall time", f"{record['wall_seconds']:.0f} s ({record['eval_seconds']:.0f} s of it evaluation)"),
        ("speed", f"{record['tokens_per_second']:,.0f} tokens/s"),
        ("device", record["device"]),
        ("seed", str(train_config.seed)),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return (
        f"---\nlibrary_name: attention-playground\ntags: [character-level, gpt, attention-playground]\n---\n\n"
        f"# {run.request.run_name}\n\nA character-level GPT trained with Attention Playground's own CLI.\n\n"
        f"| | |\n| --- | --- |\n{table}\n\nTrained with:\n\n```bash\n{command}\n```\n\n"
        "Files: `config.json` (ModelConfig), `model.safetensors` (weights), `vocabulary.json` (the characters in ID "
        "order), `training.json` (loss curves and the figures above). Load with "
        "`playground.checkpoints.load_checkpoint`.\n"
    )


def _add_bool(parser: argparse.ArgumentParser, name: str, help_text: str) -> None:
    parser.add_argument(name, action=argparse.BooleanOptionalAction, default=None, help=help_text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground.train",
                                     description="Train a character-level GPT and save it to weights/<run-name>/.")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="tiny", help="starting values (default tiny)")
    parser.add_argument("--layers-num", type=int)
    parser.add_argument("--heads-num", type=int)
    parser.add_argument("--embedding-dim", type=int)
    parser.add_argument("--context-size", type=int)
    parser.add_argument("--dropout-rate", type=float)
    _add_bool(parser, "--use-bias", "biases in Linear and LayerNorm layers")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--warmup-steps", type=int)
    parser.add_argument("--eval-interval", type=int)
    parser.add_argument("--eval-batches", type=int)
    parser.add_argument("--checkpoint-interval", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"])
    parser.add_argument("--corpus", help="a UTF-8 text file (default: Tiny Shakespeare, cached or downloaded)")
    parser.add_argument("--run-name", default=None, help="the checkpoint folder name (default: the preset's name)")
    parser.add_argument("--weights-dir", type=Path, default=None, help="where checkpoints go (default weights/)")
    parser.add_argument("--resume", action="store_true", help="continue the run named --run-name from its step")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's)")
    return parser


def request_from_args(args: argparse.Namespace) -> RunRequest:
    preset = PRESETS[args.preset]
    model = dict(preset.model)
    for name in MODEL_FIELDS:
        value = getattr(args, name)
        if value is not None:
            model[name] = value
    overrides = {name: getattr(args, name) for name in
                 ("batch_size", "steps", "learning_rate", "warmup_steps", "eval_interval", "eval_batches",
                  "checkpoint_interval", "seed", "device") if getattr(args, name) is not None}
    train_config = replace(preset.train, **overrides)
    if args.device is None and preset.train.device != "auto":
        train_config = replace(train_config, device="auto")
    return RunRequest(run_name=args.run_name or args.preset, model=model, train=train_config,
                      corpus_path=args.corpus, resume=args.resume, weights_dir=args.weights_dir)


class _ProgressBar:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, start: int):
        self.total, self.start, self.val_loss = total, start, None

    def __call__(self, step: int, metrics: StepMetrics) -> None:
        if metrics.val_loss is not None:
            self.val_loss = metrics.val_loss
        if step % 10 and step != self.total and metrics.val_loss is None:
            return
        width = 30
        filled = int(width * step / self.total)
        remaining = (self.total - step) * metrics.elapsed_seconds / max(step - self.start, 1)
        val = f" val {self.val_loss:.3f}" if self.val_loss is not None else ""
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {step}/{self.total} "
                         f"loss {metrics.train_loss:.3f}{val} {metrics.tokens_per_second:,.0f} tok/s "
                         f"ETA {remaining:.0f}s ")
        sys.stderr.flush()
        if step == self.total or metrics.val_loss is not None:
            sys.stderr.write("\n")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = build_parser().parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        run = prepare_run(request_from_args(args))
    except (ValueError, TrainingError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"training {run.request.run_name}: {run.model.parameter_count():,} parameters on {describe(run.device)}, "
          f"corpus {run.corpus.name} ({len(run.corpus.text):,} characters, {run.corpus.source})", file=sys.stderr)
    try:
        result = run_training(run, on_step=_ProgressBar(run.request.train.steps, run.start_step))
    except KeyboardInterrupt:
        print("\ninterrupted; the last periodic checkpoint is kept", file=sys.stderr)
        return 130
    except TrainingError as exc:
        print(f"\nerror: {exc}", file=sys.stderr)
        return 1
    last_val = result.val_loss[-1][1] if result.val_loss else float("nan")
    target = (run.request.weights_dir or checkpoints.weights_dir()) / run.request.run_name
    if result.steps_done > run.start_step:
        command = "python -m playground.train " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        checkpoints.write_card(run.request.run_name, model_card(run, result, command),
                               directory=run.request.weights_dir)
    print(f"done: {result.steps_done} steps, val loss {last_val:.4f}, {result.tokens_per_second:,.0f} tok/s, "
          f"{result.wall_seconds:.1f}s (eval {result.eval_seconds:.1f}s); saved {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
