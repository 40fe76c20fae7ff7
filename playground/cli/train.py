"""The training command line: ``python -m playground.train --preset tiny --run-name my-run ...``.

Owns the flags, turning them into a RunRequest, the tqdm progress bar and the lines printed on stderr
(``training ...`` before the first step, ``done: ...`` at the end, ``error: ...`` with exit code 2 for bad
input). The run itself is run.py's ``run_training``, the same code path the Train tab's job manager uses.
"""

from __future__ import annotations

if __name__ == "__main__":  # python -m playground.cli.train: torch's native libraries read these once, as torch loads
    from playground.settings import apply_process_defaults, training_defaults

    apply_process_defaults(training_defaults())

import argparse
import contextlib
import functools
import logging
import os
import shlex
import signal
import sys
import threading
from dataclasses import replace
from pathlib import Path

import torch
from tqdm import tqdm

from playground.checkpoints import store as checkpoints
from playground.cli.usage import UsageError, refuse_to_overwrite
from playground.config import ARCHITECTURE_CHOICES, DECAY_CHOICES, FAMILY_CHOICES, OPTIMIZER_CHOICES, PRECISION_CHOICES
from playground.device import describe_training, pick_device
from playground.text.data import TINY_SHAKESPEARE_CHARS, Corpus
from playground.training import distributed
from playground.training.loop import StepMetrics, TrainingError
from playground.training.presets import DECAY_FLOORS, MODEL_FIELDS, TRAIN_PRESETS
from playground.training.record import run_precision
from playground.training.run import RunRequest, prepare_run, run_training

TRAIN_FIELDS = ("batch_size", "steps", "learning_rate", "warmup_steps", "eval_interval", "eval_batches",
                "checkpoint_interval", "seed", "device", "optimizer", "precision", "time_budget_seconds",
                "learning_rate_decay", "min_learning_rate_ratio")
POSTFIX_EVERY = 10  # steps between updates of the bar's loss and speed figures
PERCENT_BAR = "{l_bar}{bar}| {n:.0f}/100% [{elapsed}<{remaining}{postfix}]"  # a time-budgeted run's bar


def _add_bool(parser: argparse.ArgumentParser, name: str, help_text: str) -> None:
    parser.add_argument(name, action=argparse.BooleanOptionalAction, default=None, help=help_text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m playground.train",
                                     description="Train a character-level GPT and save it to weights/<run-name>/.")
    parser.add_argument("--preset", choices=sorted(TRAIN_PRESETS), default="tiny",
                        help="starting values (default tiny)")
    parser.add_argument("--architecture", choices=ARCHITECTURE_CHOICES,
                        help="the model: gpt, or notebook_004, notebook 004's attention-only model (default: the "
                             "preset's: notebook_004 for toy, gpt for the others)")
    parser.add_argument("--family", choices=FAMILY_CHOICES,
                        help="the blocks of a gpt model: gpt (learned positions, LayerNorm, GELU MLP) or llama (rotary "
                             "positions, RMSNorm, SwiGLU, --kv-heads-num key/value heads) (default: the preset's: "
                             "llama for modern, gpt for the others)")
    parser.add_argument("--kv-heads-num", type=int,
                        help="the llama family's key/value heads, each shared by heads-num / kv-heads-num query heads")
    parser.add_argument("--layers-num", type=int)
    parser.add_argument("--heads-num", type=int)
    parser.add_argument("--embedding-dim", type=int)
    parser.add_argument("--context-size", type=int)
    parser.add_argument("--dropout-rate", type=float)
    _add_bool(parser, "--use-bias", "biases in the blocks' Linear and LayerNorm layers, none on the LM head "
                                    "(nanoGPT's bias=True: the run exports in GPT-2's layout)")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--steps", type=int)
    parser.add_argument("--learning-rate", type=float)
    parser.add_argument("--warmup-steps", type=int)
    parser.add_argument("--learning-rate-decay", choices=DECAY_CHOICES,
                        help="how the learning rate falls after the warm-up: cosine (nanoGPT's) or linear (default: "
                             "the preset's: linear for tiny, cosine for the others)")
    parser.add_argument("--min-learning-rate-ratio", type=float,
                        help="where the decay ends, as a share of the learning rate (default: the decay's floor "
                             "when --learning-rate-decay is given, 0 for linear and 0.1 for cosine; else the "
                             "preset's)")
    parser.add_argument("--eval-interval", type=int)
    parser.add_argument("--eval-batches", type=int)
    parser.add_argument("--checkpoint-interval", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"])
    parser.add_argument("--optimizer", choices=OPTIMIZER_CHOICES,
                        help="adamw: AdamW trains every weight; muon: Muon orthogonalises the update of each weight "
                             "matrix inside the blocks, AdamW trains the embeddings, head and norms (default: the "
                             "preset's: muon for tiny and small, adamw for toy and gpu)")
    parser.add_argument("--precision", choices=PRECISION_CHOICES,
                        help="the forward pass's dtype: auto (default) times a few forward and backward passes of "
                             "the model in float32 and in bfloat16 autocast and takes the faster (float32 on MPS); "
                             "the weights stay float32")
    parser.add_argument("--time-budget-seconds", type=float,
                        help="end the run once its training steps have taken this many seconds (evaluations and "
                             "checkpoints not counted), the learning rate's decay sized to end then; 0: none "
                             "(default: the preset's: 50 for tiny, 0 for the others)")
    parser.add_argument("--corpus", help="a UTF-8 text file (default: Tiny Shakespeare, cached or downloaded)")
    parser.add_argument("--run-name", default=None, help="the checkpoint folder name (default: the preset's name)")
    parser.add_argument("--weights-dir", type=Path, default=None,
                        help="where checkpoints go (default PLAYGROUND_WEIGHTS_DIR or weights/)")
    existing = parser.add_mutually_exclusive_group()
    existing.add_argument("--resume", action="store_true", help="continue the run named --run-name from its step")
    existing.add_argument("--replace", action="store_true",
                          help="start the run named --run-name over (without it, an existing name is refused)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's)")
    return parser


def threads_flag(value: int) -> int:
    """--threads: 1 to this machine's cores (-2 raised torch's own error; 999 ran 100x slower on 2 cores)."""
    cores = os.cpu_count() or 1
    if not 1 <= value <= cores:
        raise UsageError(f"--threads must be from 1 to this machine's {cores} cores, got {value}")
    return value


def fallback_note(corpus: Corpus) -> str:
    """What happened when Tiny Shakespeare could not be had and the built-in Sonnets stand in, and what to do."""
    return (f"note: {corpus.reason} ({len(corpus.text):,} characters; Tiny Shakespeare has "
            f"{TINY_SHAKESPEARE_CHARS:,}): a model overfits it within a few hundred steps (validation loss climbs "
            "while training loss falls). For Tiny Shakespeare, run this once online (it is downloaded and cached), "
            "or point PLAYGROUND_TINY_SHAKESPEARE at a copy of tinyshakespeare.txt, or pass --corpus FILE")


def request_from_args(args: argparse.Namespace) -> RunRequest:
    """The preset named by ``--preset`` with every flag given laid over it."""
    preset = TRAIN_PRESETS[args.preset]
    model = preset.model.to_dict()
    model.update({name: getattr(args, name) for name in MODEL_FIELDS if getattr(args, name) is not None})
    overrides = {name: getattr(args, name) for name in TRAIN_FIELDS if getattr(args, name) is not None}
    if args.learning_rate_decay is not None and args.min_learning_rate_ratio is None:  # as the Train tab does
        overrides["min_learning_rate_ratio"] = DECAY_FLOORS[args.learning_rate_decay]
    train_config = replace(preset.train, **overrides)
    if args.device is None and preset.train.device != "auto":
        train_config = replace(train_config, device="auto")
    return RunRequest(run_name=args.run_name or args.preset, model=model, train=train_config,
                      corpus_path=args.corpus, resume=args.resume, weights_dir=args.weights_dir)


class Progress:
    """A tqdm bar on stderr with the loss and speed; each evaluation also leaves a line above it.

    It counts steps, or with a time budget (``budgeted``) the percent of the schedule done, which the budget may end
    long before the last step; the step is then among the figures.
    """

    def __init__(self, total: int, start: int, budgeted: bool = False, start_progress: float = 0.0):
        self.budgeted = budgeted
        if budgeted:
            self.bar = tqdm(total=100, initial=round(100 * start_progress, 1), unit="%", file=sys.stderr,
                            dynamic_ncols=True, bar_format=PERCENT_BAR)
        else:
            self.bar = tqdm(total=total, initial=start, unit="step", file=sys.stderr, dynamic_ncols=True)
        self.val_loss: float | None = None

    def __call__(self, step: int, metrics: StepMetrics) -> None:
        if metrics.val_loss is not None:
            self.val_loss = metrics.val_loss
            self.bar.write(f"step {step}/{metrics.steps}: train loss {metrics.train_loss:.3f}, "
                           f"val loss {metrics.val_loss:.3f}", file=sys.stderr)
        if step % POSTFIX_EVERY == 0 or step == metrics.steps or metrics.val_loss is not None:
            figures = {"step": str(step)} if self.budgeted else {}
            figures["loss"] = f"{metrics.train_loss:.3f}"
            if self.val_loss is not None:
                figures["val"] = f"{self.val_loss:.3f}"
            figures["tok/s"] = f"{metrics.tokens_per_second:,.0f}"
            self.bar.set_postfix(figures, refresh=False)
        self.bar.update((round(100 * metrics.progress, 1) if self.budgeted else step) - self.bar.n)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc_info) -> None:
        self.bar.close()


@contextlib.contextmanager
def _stop_on_signals(asked: threading.Event, say):
    """Ctrl-C or SIGTERM (a terminal, ``timeout``, a container stopping) ends the run after its current step, with a
    checkpoint and its card; a second Ctrl-C stops at once (KeyboardInterrupt: the last periodic checkpoint stays)."""
    def on_signal(signum, _frame):
        if asked.is_set():
            raise KeyboardInterrupt
        asked.set()
        say(f"\n{signal.Signals(signum).name}: stopping after this step and saving a checkpoint (Ctrl-C again to "
            "stop at once, keeping only the last periodic checkpoint)")

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def main(argv: list[str] | None = None) -> int:
    """Train as the flags say. Under torchrun (WORLD_SIZE > 1) every rank runs this; see distributed.py."""
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = build_parser().parse_args(argv)
    try:
        if args.threads is not None:
            torch.set_num_threads(threads_flag(args.threads))
        world = distributed.World.from_env()
        request = request_from_args(args)
        if not (args.resume or args.replace):
            refuse_to_overwrite(checkpoints.validate_name(request.run_name), args.weights_dir, "--run-name",
                                "--resume to continue it")
        if world.distributed:
            distributed.start(world, pick_device(request.train.device).type)
    except (ValueError, UsageError, distributed.DistributedError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    code = 2
    try:
        code = _train(args, argv, request, world)
        return code
    finally:
        distributed.finish(world, together=code == 0)


def _train(args: argparse.Namespace, argv: list[str] | None, request: RunRequest, world: distributed.World) -> int:
    """Prepare, train and report; only rank 0 prints (other ranks' errors too, each under its rank)."""
    say = functools.partial(print, file=sys.stderr) if world.is_main else (lambda *_args, **_kwargs: None)
    where = "" if world.is_main else f"rank {world.rank}: "
    try:
        run = prepare_run(request)
    except (ValueError, TrainingError) as exc:
        print(f"{where}error: {exc}", file=sys.stderr)
        return 2
    processes = f" × {world.world_size} processes" if world.distributed else ""
    precision = run_precision(run)
    device = describe_training(run.device, precision.dtype)
    say(f"training {run.request.run_name}: {run.model.parameter_count():,} parameters on {device}"
        f"{processes}, corpus {run.corpus.name} ({len(run.corpus.text):,} characters, {run.corpus.source})")
    say(f"precision: {precision.reason}")
    if run.corpus.source == "builtin" and request.corpus_path is None:
        say(fallback_note(run.corpus))
    for note in run.notes:  # a resumed run whose optimizer state could not come back, say
        say(f"note: {note}")
    flags = " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    run.request = replace(run.request, command=f"{world.launcher()} -m playground.train {flags}")
    asked = threading.Event()
    try:
        with _stop_on_signals(asked, say):
            if world.is_main:
                config = run.request.train
                with Progress(config.steps, run.start_step, config.time_budget_seconds > 0,
                              config.progress(run.start_step, run.step_seconds_before)) as progress:  # closed first
                    result = run_training(run, on_step=progress, should_stop=asked.is_set, world=world)
            else:
                result = run_training(run, should_stop=asked.is_set, world=world)
    except KeyboardInterrupt:
        say("interrupted; the last periodic checkpoint is kept")
        return 130
    except TrainingError as exc:
        print(f"{where}error: {exc}", file=sys.stderr)
        return 1
    if world.distributed:  # DDP keeps the ranks' weights equal; say so, or say that it did not
        digests = distributed.gather_digests(run.model, world, run.device)
        say("weights after the last step: " + ", ".join(f"rank {rank} sha256 {digest}"
                                                          for rank, digest in enumerate(digests)))
        if len(set(digests)) > 1:
            say("error: the ranks' weights differ; the checkpoint holds rank 0's")
            return 1
    if not world.is_main:
        return 0
    last_val = result.val_loss[-1][1] if result.val_loss else float("nan")
    target = checkpoints.weights_dir(run.request.weights_dir) / run.request.run_name
    budget = (f" (its {run.request.train.time_budget_seconds:g} s time budget ended it)" if result.budget_reached
              else " (stopped as asked)" if result.stopped else "")
    say(f"done: {result.steps_done} steps{budget}, val loss {last_val:.4f}, {result.tokens_per_second:,.0f} tok/s, "
        f"{result.wall_seconds:.1f}s (eval {result.eval_seconds:.1f}s); saved {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
