"""A training run: what it needs (RunRequest), checking it all before the first step (prepare_run), the run
around the loop (run_training) and what it leaves behind (training.json, the model card).

Owns the corpus -> tokenizer -> model preparation, what a run costs before it starts (memory through
budget.py's model, time through ``step_seconds``), who may write a run's folder (``Visitor``), the periodic
checkpoints (with the optimizer's state) through checkpoints.py, the samples and the probe sentence's attention a
run reports as it goes. Knows nothing about threads or the UI: the job manager (jobs.py) and the CLI
(cli/train.py) both call ``run_training`` with their own callbacks. The loop itself is train.py's ``train``; the
record a checkpoint keeps is built from that loop's own TrainResult.

A visitor's request (``RunRequest.visitor`` set: the app) meets the public server's rules; the command line's
(no visitor) is the operator's and meets only the size caps:

    shipped checkpoint           read-only                     (checkpoints.SHIPPED_CHECKPOINTS)
    a name that exists           replaced only on purpose (``replace``) and only by its owner or the admin
    resume                       your own run; one without an owner record only with the admin token
    time                         estimate <= limits.max_train_seconds, and stopped there while it runs
    disk                         make_room_for: a visitor's own oldest past their share, then others' runs
                                 unsaved for run_keep_seconds; never another visitor's recent run
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from playground import checkpoints, checks
from playground.architectures import build_model, describe_architecture
from playground.budget import (
    BudgetError,
    Cost,
    MemoryBudget,
    attention_is_explicit,
    available_memory,
    human,
    largest_batch,
    training_cost,
)
from playground.config import ConfigError, Limits, ModelConfig, TrainConfig
from playground.data import Corpus, CorpusError, TokenIdsDataset, load_corpus, split_train_val
from playground.device import describe, describe_training, pick_device, training_dtype
from playground.distributed import SINGLE, World
from playground.model import GPT
from playground.optim_state import OptimizerStateError, flatten_optimizer_state, restore_optimizer_state
from playground.optimizers import Optimizer, optimizer_name
from playground.presets import MODEL_FIELDS
from playground.sampling import generate
from playground.tokenizer import CharTokenizer
from playground.train import StepMetrics, TrainResult, configure_optimizer, train

PROBE_TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?"
SAMPLE_CHARACTERS = 120  # the length of each sample a run reports
# The time estimate, calibrated on a 2-core CPU with torch 2.13 (python benchmarks/train_speed.py and small runs):
# training sustains about 1.0e11 FLOP/s (6 per parameter per token, plus attention; the small preset's forward and
# backward, 49.6 GFLOP, take 0.50 s), and every step also pays a
# fixed cost for Python, kernel launches and the optimizer, about 0.6 ms plus 0.5 ms per layer. Muon adds its
# Newton–Schulz products (5 iterations on each block matrix, at the same FLOP/s); dropout adds its random masks: with
# torch's F.dropout about 14 ns per element masked on that machine (the shipped model's 0.82 s steps against 0.60 s
# without dropout), and dropout.py's masks cost two thirds of F.dropout's in a step (benchmarks/dropout_cost.py, same
# run: 3.7 against 5.6 ns per element), so 9 ns. The CUDA figures are a guess for a small GPU (T4-class, fp32), not a
# measurement: the cap is also enforced while a run goes.
CPU_FLOPS, CPU_STEP_OVERHEAD_S, CPU_LAYER_OVERHEAD_S = 1.0e11, 6e-4, 5e-4
CPU_DROPOUT_S_PER_ELEMENT = 9e-9
NEWTON_SCHULZ_STEPS = 5  # torch.optim.Muon's default, which configure_optimizer keeps
CUDA_FLOPS, CUDA_STEP_OVERHEAD_S, CUDA_LAYER_OVERHEAD_S = 4e12, 3e-3, 1e-3
STOPPED_BY_VISITOR, STOPPED_BY_TIME_LIMIT = "asked", "time limit"


CURVE_FIELDS = ("train_loss", "val_loss", "val_seconds")  # training.json's curves, carried on by a resumed run
SECONDS_FIELD = "seconds_before"  # in PreparedRun.history: [a resumed run's earlier wall_seconds]

def format_seconds(seconds: float | None) -> str:
    """42 -> '42s', 125 -> '2m 05s', 7260 -> '2h 01m'; None -> '–'."""
    if seconds is None:
        return "–"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def format_budget(seconds: float) -> str:
    """A time budget as the Train tab says it: 8 -> '8s', 0.5 -> '0.5s' (not format_seconds' '0s'), 150 -> '2m 30s'."""
    return f"{seconds:g}s" if seconds < 60 else format_seconds(seconds)


def step_seconds(config: ModelConfig, batch_size: int, device_type: str = "cpu", optimizer: str = "adamw") -> float:
    """A rough wall time of one training step (forward, backward, the optimizer; dropout if the config has it) for
    these shapes on this kind of device."""
    if device_type == "cuda":
        flops, fixed, per_layer = CUDA_FLOPS, CUDA_STEP_OVERHEAD_S, CUDA_LAYER_OVERHEAD_S
    else:  # MPS gets the CPU's figures: slower than it is, never faster
        flops, fixed, per_layer = CPU_FLOPS, CPU_STEP_OVERHEAD_S, CPU_LAYER_OVERHEAD_S
    tokens = batch_size * config.context_size
    flops_per_token = 6 * config.parameter_count() + 12 * config.layers_num * config.context_size * config.embedding_dim
    seconds = tokens * flops_per_token / flops + fixed + per_layer * config.layers_num
    if optimizer == "muon":
        seconds += _newton_schulz_flops(config) / flops
    if config.dropout_rate > 0 and device_type != "cuda":
        seconds += _dropout_elements(config, batch_size) * CPU_DROPOUT_S_PER_ELEMENT
    return seconds


def _newton_schulz_flops(config: ModelConfig) -> float:
    """Muon's orthogonalisation per step: per block matrix (m x n, m <= n) and iteration, 2m²n + m³ multiply-adds."""
    width = config.embedding_dim
    shapes = ((width, 3 * width), (width, width), (width, 4 * width), (width, 4 * width))  # qkv, proj, fc, proj
    per_block = sum(2 * m * m * n + m**3 for m, n in shapes)
    return 2 * NEWTON_SCHULZ_STEPS * per_block * config.layers_num


def _dropout_elements(config: ModelConfig, batch_size: int) -> int:
    """Elements masked per step: the embeddings, then in each block the attention weights, attention's output
    and the MLP's output."""
    tokens = batch_size * config.context_size
    per_block = batch_size * config.heads_num * config.context_size**2 + 2 * tokens * config.embedding_dim
    return tokens * config.embedding_dim + config.layers_num * per_block


def estimate_seconds(config: ModelConfig, batch_size: int, steps: int, device_type: str = "cpu",
                     optimizer: str = "adamw", time_budget_seconds: float = 0.0) -> float:
    """``steps`` of ``step_seconds``: the tiny preset's shape (2 layers, 128 wide, context 64, batch 32), 1200
    AdamW steps on a CPU -> about 70 s. A time budget (the seconds a run's steps have left of it) caps it."""
    seconds = steps * step_seconds(config, batch_size, device_type, optimizer)
    return min(seconds, time_budget_seconds) if time_budget_seconds > 0 else seconds


def where(device_type: str) -> str:
    """The device an estimate is for, in a sentence."""
    return "a 2-core CPU" if device_type != "cuda" else "a small GPU"


def _shapes(config: ModelConfig, device_type: str) -> dict[str, Any]:
    # notebook 004's heads always compute their (B, T, T) weights explicitly, as the notebook writes them
    return dict(parameters=config.parameter_count(), layers_num=config.layers_num, heads_num=config.heads_num,
                embedding_dim=config.embedding_dim, context_size=config.context_size,
                vocabulary_size=config.vocabulary_size,
                explicit_attention=attention_is_explicit(config.dropout_rate, device_type) or not config.is_gpt)


def memory_cost(config: ModelConfig, batch_size: int, device_type: str = "cpu") -> Cost:
    """budget.training_cost for a model of this shape trained ``batch_size`` windows at a time on ``device_type``
    (with dropout on a CPU its attention keeps (B, h, T, T) tensors)."""
    return training_cost(batch_size=batch_size, **_shapes(config, device_type))


def memory_advice(config: ModelConfig, batch_size: int, fits_bytes: int, device_type: str = "cpu") -> str:
    """What to lower, and to what, so a run fits ``fits_bytes``: 'lower batch_size to at most 87 (now 1024)'."""
    shapes = _shapes(config, device_type)
    largest = largest_batch(fits_bytes, **shapes)
    if largest >= 1:
        return f"lower batch_size to at most {largest:,} (now {batch_size:,})"
    if shapes["explicit_attention"]:
        return ("even batch_size 1 does not fit: lower context_size or heads_num, or set dropout_rate to 0 (with "
                "dropout a CPU keeps every layer's (batch, heads, context, context) attention for backward)")
    return "even batch_size 1 does not fit: lower context_size or embedding_dim"


def free_device_memory(device: torch.device) -> int | None:
    """Bytes free on a CUDA device now, or in the machine's memory for the CPU (budget.available_memory: a command
    line run has no server budget, and ``--batch-size 100000`` grew to 24 GB until the kernel killed it); None for MPS
    and where it cannot be read."""
    if device.type == "cpu":
        return available_memory()
    if device.type != "cuda":
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)


@dataclass(frozen=True)
class Visitor:
    """Who asks for a run, or to stop one, through the app (the command line asks as the operator: no Visitor).

    ``owner`` is ``checkpoints.owner_hash`` of their token: what training.json records and the job manager
    compares, never the token itself. ``admin``: the token was the Space owner's PLAYGROUND_ADMIN_TOKEN, which may
    stop, resume or replace any visitor's run (never a shipped checkpoint).
    """

    owner: str
    admin: bool = False

    def may_change(self, recorded_owner: str | None) -> bool:
        """Whether this visitor may resume, replace or stop what ``recorded_owner`` started."""
        return self.admin or (recorded_owner is not None and hmac.compare_digest(recorded_owner, self.owner))


@dataclass(frozen=True)
class RunRequest:
    """Everything a training run needs, as plain values (what the Train tab and the CLI collect)."""

    run_name: str
    model: dict[str, Any]  # MODEL_FIELDS by name, e.g. TRAIN_PRESETS["tiny"].model.to_dict()
    train: TrainConfig
    corpus_path: str | None = None
    corpus_text: str | None = None
    resume: bool = False
    weights_dir: Path | None = None
    uploaded: bool = False  # corpus_text is a visitor's uploaded file (its label says so)
    corpus_name: str | None = None  # what to call the corpus (an upload's file name)
    visitor: Visitor | None = None  # None: the operator (the CLI), to whom only the size caps apply
    replace: bool = False  # a visitor starting a run whose name exists means to replace it
    command: str | None = None  # the command line that trains it: each checkpoint then carries a model card


@dataclass
class PreparedRun:
    """A run checked and ready for its first step; ``history`` holds a resumed checkpoint's loss curves.

    ``memory`` bytes are held in ``budget`` from prepare_run until ``release_memory`` (the job manager calls it
    when the run ends, however it ends).
    """

    request: RunRequest
    corpus: Corpus
    tokenizer: CharTokenizer
    model: GPT  # or architectures.NotebookLanguageModel (config.architecture "notebook_004")
    train_data: TokenIdsDataset
    val_data: TokenIdsDataset
    device: torch.device
    start_step: int
    history: dict[str, list] = field(default_factory=dict)
    step_seconds_before: float = 0.0  # a resumed run's earlier seconds of training steps: its time budget's clock
    optimizer: Optimizer | None = None  # restored from the checkpoint on resume when it has one
    notes: list[str] = field(default_factory=list)  # what a learner should know before it starts (a cold resume)
    cost: Cost | None = None
    estimated_seconds: float = 0.0
    max_seconds: float | None = None  # the run stops and saves when its wall time passes this
    owner: str | None = None  # the owner hash training.json records
    memory: int = 0
    budget: MemoryBudget | None = None
    held_out: bool = True  # False: a text too short to hold out validation trains and validates on all of it

    def release_memory(self) -> None:
        """Give the run's reserved bytes back to the budget (once; later calls do nothing)."""
        held, self.memory = self.memory, 0
        if held and self.budget is not None:
            self.budget.release(held)


def check_size(config: ModelConfig, limits: Limits, what: str) -> None:
    """Refuse a model over the server's parameter or context limit (a ConfigError naming ``what``)."""
    if config.parameter_count() > limits.max_parameters:
        raise ConfigError(f"{what} would have {config.parameter_count():,} parameters; this server's limit is "
                          f"{limits.max_parameters:,} (PLAYGROUND_MAX_PARAMETERS)")
    if config.context_size > limits.max_context_size:
        raise ConfigError(f"context_size {config.context_size} is above this server's limit of "
                          f"{limits.max_context_size} (PLAYGROUND_MAX_CONTEXT_SIZE)")


def check_steps(steps: int, limits: Limits) -> None:
    """Refuse more steps than the server allows a run."""
    if steps > limits.max_steps:
        raise ConfigError(f"steps {steps} is above this server's limit of {limits.max_steps} (PLAYGROUND_MAX_STEPS)")


def _owner_to_record(request: RunRequest, name: str) -> str | None:
    """Apply the visitor rules of the module docstring; return the owner hash training.json will record."""
    directory, visitor = request.weights_dir, request.visitor
    recorded = checkpoints.recorded_owner(name, directory)
    if visitor is None:  # the operator: a resumed run keeps its owner, a new one has none
        return recorded if request.resume else None
    verb = "resume" if request.resume else "replace"
    if checkpoints.is_shipped(name):
        raise checkpoints.CheckpointError(
            f"{name!r} came with the app and is read-only for everyone: pick another run name, such as "
            f"{checkpoints.fresh_run_name(directory)}")
    if request.resume:
        if not checkpoints.exists(name, directory):
            raise checkpoints.MissingCheckpointError(f"no checkpoint named {name!r} to resume")
    elif not checkpoints.exists(name, directory):
        return visitor.owner
    elif not request.replace:
        raise checkpoints.CheckpointError(
            f"a run named {name!r} already exists: tick \"replace it\" to start it over (only its owner can), or pick "
            f"a new name such as {checkpoints.fresh_run_name(directory)}")
    if not visitor.may_change(recorded):
        if recorded is None:
            raise checkpoints.CheckpointError(
                f"{name!r} was not started by a visitor of this server (it has no owner record): only the Space "
                f"owner's admin token can {verb} it; pick another run name, such as "
                f"{checkpoints.fresh_run_name(directory)}")
        raise checkpoints.CheckpointError(
            f"{name!r} belongs to another visitor: only its owner can {verb} it; pick another run name, such as "
            f"{checkpoints.fresh_run_name(directory)}")
    return recorded if request.resume else visitor.owner  # a resumed run stays its owner's (an operator's: none)


def budget_left(train_config: TrainConfig, step_seconds_before: float) -> float:
    """The seconds of training steps a run's time budget has left after ``step_seconds_before``; 0: no budget."""
    if train_config.time_budget_seconds <= 0:
        return 0.0
    return max(0.0, train_config.time_budget_seconds - step_seconds_before)


def _check_time(config: ModelConfig, train_config: TrainConfig, start_step: int, device: torch.device,
                max_seconds: int, step_seconds_before: float = 0.0) -> float:
    """The estimated seconds of the steps to go (a time budget caps them); refuse, saying to what to lower steps or
    the time budget, past ``max_seconds``."""
    per_step = step_seconds(config, train_config.batch_size, device.type, train_config.optimizer)
    to_go = train_config.steps - start_step
    seconds = estimate_seconds(config, train_config.batch_size, to_go, device.type, train_config.optimizer,
                               budget_left(train_config, step_seconds_before))
    if seconds <= max_seconds:
        return seconds
    fit = int(max_seconds // per_step)
    advice = (f"lower steps to at most {start_step + fit:,} (now {train_config.steps:,}), set a time budget of at "
              f"most {max_seconds:,} s, or make the model or the batch smaller" if fit >= 1 else
              "one step alone takes longer: lower batch_size, context_size or the model's size")
    raise ConfigError(f"this run would take about {format_seconds(seconds)} ({to_go:,} steps at about "
                      f"{per_step:.2g} s each on {where(device.type)}, a rough estimate); this server stops a run "
                      f"after {format_seconds(max_seconds)}: {advice}")


def _reserve_memory(config: ModelConfig, batch_size: int, device: torch.device,
                    budget: MemoryBudget | None) -> tuple[Cost, int]:
    """Check the run's peak against the device's free memory (CUDA; the CPU's where no server budget covers it: the
    command line) and reserve it from ``budget``."""
    cost = memory_cost(config, batch_size, device.type)
    free = free_device_memory(device) if budget is None or device.type != "cpu" else None
    if free is not None and cost.bytes > free:
        raise BudgetError(f"{cost.describe()}, more than the {human(free)} free on {describe(device)} now; "
                          f"{memory_advice(config, batch_size, free, device.type)}")
    if budget is None:
        return cost, 0
    try:
        return cost, budget.acquire(cost, hint=memory_advice(config, batch_size, budget.total, device.type))
    except BudgetError as exc:
        if cost.bytes > budget.total:
            raise
        free_now = max(0, budget.total - budget.reserved)
        raise BudgetError(f"{exc}; to fit now, {memory_advice(config, batch_size, free_now, device.type)}") from None


def prepare_run(request: RunRequest, limits: Limits | None = None, budget: MemoryBudget | None = None) -> PreparedRun:
    """Check everything before the first step: name, who asks, sizes, caps, corpus, time, memory, disk, device.

    With a ``budget`` the run's estimated peak is reserved there and held by the returned run until its
    ``release_memory`` (a refusal after the reservation gives it back). Raises a ValueError whose message says
    what to change.
    """
    limits = limits or Limits.from_env()
    name = checkpoints.validate_name(request.run_name)
    train_config = request.train
    check_steps(train_config.steps, limits)
    unknown = sorted(set(request.model) - set(MODEL_FIELDS))
    if unknown:
        raise ConfigError(f"unknown model setting(s): {', '.join(unknown)}")
    context_size = request.model.get("context_size", 64)
    if isinstance(context_size, int) and context_size > limits.max_context_size:
        raise ConfigError(f"context_size {context_size} is above this server's limit of {limits.max_context_size}")
    owner = _owner_to_record(request, name)
    device = pick_device(train_config.device)
    if device.type == "cuda" and device.index is None:  # the current GPU by number: a torchrun rank's own
        device = torch.device("cuda", torch.cuda.current_device())
    training_dtype(device, train_config.precision)  # bfloat16 asked for where it cannot run: refused now, not mid-run
    corpus = load_corpus(request.corpus_path, request.corpus_text, name=request.corpus_name,
                         uploaded=request.uploaded)
    if corpus.from_visitor and len(corpus.text.encode("utf-8", "surrogatepass")) > limits.max_upload_bytes:
        raise CorpusError(f"{corpus.label} is larger than this server's limit of {limits.max_upload_bytes:,} bytes")
    start_step, history, step_seconds_before = 0, {}, 0.0
    if request.resume:
        config = checkpoints.read_config(checkpoints.resolve(name, request.weights_dir))
        check_size(config, limits, name)  # before its weights are read
        previous = checkpoints.load_checkpoint(name, directory=request.weights_dir,
                                               max_parameters=limits.max_parameters)
        tokenizer = previous.tokenizer
        unknown_chars = tokenizer.find_unknown(corpus.text)
        if unknown_chars:
            missing = "".join(sorted({u.character for u in unknown_chars}))
            raise CorpusError(
                f"the corpus has {len(set(missing))} character(s) the resumed model lacks: {missing!r}"
            )
        _check_same_optimizer(name, previous.training, train_config.optimizer)
        shape_notes = _shape_from_checkpoint(name, config, request.model) + _corpus_change(
            name, previous.training, corpus, previous.steps)
        start_step = previous.steps
        history = {k: list((previous.training or {}).get(k, [])) for k in CURVE_FIELDS}
        history[SECONDS_FIELD] = [float((previous.training or {}).get("wall_seconds", 0.0))]
        step_seconds_before = recorded_step_seconds(previous.training)
        if start_step >= train_config.steps:
            raise ConfigError(
                f"the run {name} has already done {start_step} steps; set steps above {start_step} to continue"
            )
        if 0 < train_config.time_budget_seconds <= step_seconds_before:  # its budget is spent
            raise ConfigError(
                f"the run {name} has already trained for {step_seconds_before:.1f} s, its whole time budget of "
                f"{train_config.time_budget_seconds:g} s; raise the time budget above {step_seconds_before:.1f} s "
                "(or set it to 0, for none) to continue"
            )
    else:
        shape_notes = []
        tokenizer = CharTokenizer.train_from_text(corpus.text)
        config = ModelConfig(vocabulary_size=tokenizer.vocabulary_size, **request.model)
        check_size(config, limits, "the model")
    if train_config.optimizer == "muon" and not config.is_gpt:  # it would find no block matrices to train
        raise ConfigError("notebook 004's model has no transformer blocks, whose matrices are what Muon trains: "
                          "pick the optimizer adamw")
    train_ids, val_ids, split_notes = split_for_context(tokenizer.encode(corpus.text), config.context_size)
    cost, held = _reserve_memory(config, train_config.batch_size, device, budget)  # first: what kills a server
    run = None
    try:
        max_seconds, room_notes = None, []
        estimated = estimate_seconds(config, train_config.batch_size, train_config.steps - start_step, device.type,
                                     train_config.optimizer, budget_left(train_config, step_seconds_before))
        if request.visitor is not None:
            estimated = _check_time(config, train_config, start_step, device, limits.max_train_seconds,
                                    step_seconds_before)
            max_seconds = float(limits.max_train_seconds)
            removed = make_room_for(request.visitor, request.weights_dir,
                                    checkpoints.estimated_bytes(config.parameter_count(), train_config.steps), limits,
                                    keep={name},
                                    replacing=name if checkpoints.exists(name, request.weights_dir) else None)
            room_notes = [_removed_note(removed, limits)] if removed else []
        if request.resume:
            model = previous.model
        else:
            torch.manual_seed(train_config.seed)
            model = build_model(config)
        model.to(device)
        optimizer = configure_optimizer(model, train_config, device)
        restored = _restore_optimizer(optimizer, model, name, request) if request.resume else []
        notes = split_notes + shape_notes + room_notes + restored
        run = PreparedRun(request, corpus, tokenizer, model, TokenIdsDataset(train_ids, config.context_size),
                          TokenIdsDataset(val_ids, config.context_size), device, start_step, history,
                          step_seconds_before=step_seconds_before, optimizer=optimizer, notes=notes, cost=cost,
                          estimated_seconds=estimated, max_seconds=max_seconds, owner=owner, memory=held, budget=budget,
                          held_out=not split_notes)
        return run
    finally:
        if run is None and budget is not None:
            budget.release(held)


def make_room_for(visitor: Visitor, directory: Path | None, incoming_bytes: int, limits: Limits,
                  keep=frozenset(), replacing: str | None = None) -> list[str]:
    """checkpoints.make_room under this server's limits, for a visitor's new run or converted checkpoint: the names
    of the runs removed (their own oldest past ``max_runs_per_visitor``; others' only when saved more than
    ``run_keep_seconds`` ago)."""
    return checkpoints.make_room(directory, incoming_bytes, max_runs=limits.max_runs, max_bytes=limits.max_runs_bytes,
                                 keep=keep, replacing=replacing, owner=visitor.owner,
                                 max_per_owner=limits.max_runs_per_visitor, protect_seconds=limits.run_keep_seconds)


def _removed_note(removed: list[str], limits: Limits) -> str:
    """What a visitor's new run cost: 'to make room, this server removed the run my-run-1 (...)'."""
    return (f"to make room, this server removed the run{'s' * (len(removed) > 1)} {', '.join(removed)} (a visitor "
            f"keeps at most {limits.max_runs_per_visitor} runs and their oldest go first; other visitors' runs are "
            f"kept for at least {format_seconds(limits.run_keep_seconds)} after their last save)")


def _shape_from_checkpoint(name: str, config: ModelConfig, asked: dict[str, Any]) -> list[str]:
    """A resumed run keeps its checkpoint's shape: a note when the request (a preset, the form) asked for another."""
    differing = [f"{field} {getattr(config, field)} (not {asked[field]})" for field in MODEL_FIELDS
                 if field in asked and asked[field] != getattr(config, field)]
    if not differing:
        return []
    return [f"resuming {name} keeps its own shape: {', '.join(differing)}; the settings asked for apply to how it "
            "trains on"]


def _corpus_change(name: str, training: dict[str, Any] | None, corpus: Corpus, steps: int) -> list[str]:
    """A note when a run resumes on another text than the one its checkpoint records (a reloaded page's corpus box
    back at Tiny Shakespeare after a run on pasted text): its losses from here on measure the new text."""
    recorded = (training or {}).get("corpus")
    if not isinstance(recorded, dict) or (recorded.get("name"), recorded.get("characters")) == (
            corpus.name, len(corpus.text)):
        return []
    was = f"{recorded.get('name')!s} ({recorded.get('characters', 0):,} characters)"
    return [f"{name!r} trained on {was} until step {steps}: it goes on with {corpus.label} ({len(corpus.text):,} "
            "characters), so its losses from here on measure another text"]


def _check_same_optimizer(name: str, training: dict[str, Any] | None, optimizer: str) -> None:
    """A run resumes with the optimizer it was trained with (an older run's, with none recorded, was adamw).

    Switching would throw its optimizer state away and change the method mid-run; a new run is the honest way.
    """
    recorded = (training or {}).get("train_config")
    trained_with = recorded.get("optimizer", "adamw") if isinstance(recorded, dict) else "adamw"
    if trained_with != optimizer:
        raise ConfigError(f"the run {name!r} was trained with the optimizer {trained_with}, not {optimizer}: resume it "
                          f"with optimizer {trained_with}, or start a new run to train with {optimizer}")


def _restore_optimizer(optimizer: Optimizer, model: GPT, name: str, request: RunRequest) -> list[str]:
    """Put the saved optimizer state back so the run goes on warm; the notes say when it cannot."""
    cold = f"so {optimizer_name(optimizer)} starts cold: expect the loss to bump up for a few steps"
    try:
        state = checkpoints.load_optimizer_state(name, request.weights_dir)
    except checkpoints.CheckpointError as exc:
        return [f"its optimizer state is unreadable ({exc}), {cold}"]
    if state is None:
        return [f"this checkpoint was saved without its optimizer state (an older one), {cold}"]
    try:
        restore_optimizer_state(optimizer, model, *state)
    except OptimizerStateError as exc:
        return [f"its optimizer state does not fit ({exc}), {cold}"]
    return []


def recorded_step_seconds(training: dict[str, Any] | None) -> float:
    """The seconds of training steps a checkpoint's training.json records (all its sessions); a record from before
    they were kept: its wall time less the last session's evaluation, the closest figure it has."""
    training = training or {}
    if "step_seconds" in training:
        return float(training["step_seconds"])
    return max(0.0, float(training.get("wall_seconds", 0.0)) - float(training.get("eval_seconds", 0.0)))


def seconds_before(run: PreparedRun) -> float:
    """The wall seconds a resumed run had trained before this session: where its time axis goes on."""
    return float(run.history.get(SECONDS_FIELD, [0.0])[0]) if run.history.get(SECONDS_FIELD) else 0.0


def training_record(run: PreparedRun, result: TrainResult) -> dict[str, Any]:
    """What training.json holds; a visitor's run also records its owner's hash (checkpoints.OWNER_FIELD).

    The curves: ``train_loss`` and ``val_loss`` as [step, loss], ``val_seconds`` as [step, wall seconds since the
    run first started] at each evaluation (a resumed run's go on from its earlier ``wall_seconds``), so a later run
    can be drawn against it by step or by time.
    """
    before = seconds_before(run)
    record = {
        "steps_done": result.steps_done,
        "steps_planned": run.request.train.steps,
        "train_loss": run.history.get("train_loss", []) + result.train_loss,
        "val_loss": run.history.get("val_loss", []) + result.val_loss,
        "val_seconds": run.history.get("val_seconds", []) + [[step, round(before + seconds, 2)]
                                                             for step, seconds in result.val_seconds],
        "tokens_per_second": round(result.tokens_per_second, 1),
        "wall_seconds": round(before + result.wall_seconds, 2),
        "eval_seconds": round(result.eval_seconds, 2),
        "step_seconds": round(result.step_seconds, 2),  # every session's: the time budget's clock
        "corpus": {"name": run.corpus.name, "characters": len(run.corpus.text), "source": run.corpus.source},
        "device": describe_training(run.device, run.request.train.precision),
        "seed": run.request.train.seed,
        "train_config": run.request.train.to_dict(),
        "stopped_early": result.stopped,
        "budget_reached": result.budget_reached,
    }
    if result.processes > 1:
        record["processes"] = result.processes  # a distributed run: batch_size windows per rank and step
    if run.owner is not None:
        record[checkpoints.OWNER_FIELD] = run.owner
    return record


@dataclass(frozen=True)
class ProbeSnapshot:
    """What a fixed probe sentence attended to at one step of a run."""

    step: int
    tokens: list[str]
    weights: torch.Tensor  # (layers, heads, T, T) on the CPU
    left_out: str = ""  # the probe's characters the run's vocabulary lacks, each once, in the order they came


def probe_attention(run: PreparedRun, text: str, step: int) -> ProbeSnapshot | None:
    """Every head's attention over ``text`` (the characters the vocabulary knows, cut to the context) now; the
    snapshot names the characters it left out.

    None when the vocabulary knows none of them. The model's train/eval mode is left as it was.
    """
    left_out = "".join(dict.fromkeys(u.character for u in run.tokenizer.find_unknown(text)))
    text = "".join(c for c in text if c not in left_out)[: run.model.config.context_size]
    if not text:
        return None
    was_training = run.model.training
    run.model.eval()
    try:
        with torch.no_grad():
            ids = run.tokenizer.encode(text)[None].to(run.device)
            weights = run.model(ids, return_attention=True).attention_weights
    finally:
        run.model.train(was_training)
    return ProbeSnapshot(step, list(text), torch.stack([w[0] for w in weights]).float().cpu(), left_out)


def probe_text_for(run: PreparedRun) -> str:
    """The sentence a run's attention is probed on: PROBE_TEXT, unless the run's vocabulary lacks most of its
    characters (notebook 004's "hello world" knows none of "ROMEO:" and few of the rest), then the opening
    ``context_size`` characters of the run's own text ("hello wo")."""
    if 2 * len(run.tokenizer.find_unknown(PROBE_TEXT)) <= len(PROBE_TEXT):
        return PROBE_TEXT
    return run.corpus.text[: run.model.config.context_size]


def split_for_context(ids: torch.Tensor, context_size: int) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """(train ids, validation ids, notes): the first 90% trains and the last 10% validates when that 10% holds a
    window of ``context_size + 1``; a shorter text (notebook 004's "hello world") trains and validates on the whole
    text, and the note says the validation loss then measures memorising. CorpusError when no window fits at all.
    """
    train_ids, val_ids = split_train_val(ids)
    if len(val_ids) > context_size:
        return train_ids, val_ids, []
    if len(ids) <= context_size:
        size = checks.count(len(ids), "character")
        if len(ids) < 2:
            raise CorpusError(f"the corpus ({size}) is too short to train on: a training window is context_size "
                              "characters and the one after them, so even context_size 1 needs 2 characters")
        raise CorpusError(f"the corpus ({size}) is too short for context_size {context_size}: a window of "
                          f"context_size + 1 characters must fit in it; lower context_size to at most {len(ids) - 1}")
    return ids, ids, [f"the corpus ({len(ids):,} characters) is too short to hold out its last 10% for context_size "
                      f"{context_size} (that needs {10 * (context_size + 1):,}), so the model trains and validates "
                      "on the whole text: the validation loss measures memorising, not generalising"]


def run_training(run: PreparedRun, *, on_step: Callable[[int, StepMetrics], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 on_sample: Callable[[int, str], None] | None = None,
                 on_probe: Callable[[ProbeSnapshot], None] | None = None,
                 probe_text: str | None = None, world: World = SINGLE) -> TrainResult:
    """Train a prepared run, saving a checkpoint (weights and optimizer state) every ``checkpoint_interval`` steps
    and at the end.

    Reports through optional callbacks: ``on_step(step, metrics)`` after every step; ``on_sample(step, text)``
    every ``sample_interval`` steps and at the last step (SAMPLE_CHARACTERS generated from the start text, seeded
    by the step);
    ``on_probe(snapshot)`` before the first step and after every evaluation (``probe_text``'s attention; by default
    ``probe_text_for(run)``).
    Stops early, saving, when ``should_stop()`` is true or the run's ``max_seconds`` have passed;
    ``result.stop_reason`` says which (STOPPED_BY_VISITOR, STOPPED_BY_TIME_LIMIT).

    In a distributed ``world`` (torchrun, distributed.py) every rank calls this with the same run; only rank 0
    evaluates, samples, probes, saves and calls the callbacks, the other ranks only train.
    """
    config = run.request.train
    name = checkpoints.validate_name(run.request.run_name)
    optimizer = run.optimizer or configure_optimizer(run.model, config, run.device)
    result = TrainResult(steps_done=run.start_step, stopped=False,  # train() keeps it up to date
                         step_seconds=run.step_seconds_before)
    if not world.is_main:
        return train(run.model, config, run.train_data, start_step=run.start_step, result=result,
                     optimizer=optimizer, world=world)
    deadline = None if run.max_seconds is None else time.monotonic() + run.max_seconds
    probe_text = probe_text_for(run) if probe_text is None else probe_text

    def save() -> None:  # with its model card where a command trains it: a card never falls behind its weights
        card = model_card(run, result, run.request.command) if run.request.command else None
        checkpoints.save_checkpoint(run.model, run.tokenizer, name, directory=run.request.weights_dir,
                                    training=training_record(run, result), card=card,
                                    optimizer_state=flatten_optimizer_state(optimizer, run.model))

    def stop_now() -> bool:
        if should_stop is not None and should_stop():
            result.stop_reason = STOPPED_BY_VISITOR
        elif deadline is not None and time.monotonic() >= deadline:
            result.stop_reason = STOPPED_BY_TIME_LIMIT
        return bool(result.stop_reason)

    def probe(step: int) -> None:
        if on_probe is None:
            return
        snapshot = probe_attention(run, probe_text, step)
        if snapshot is not None:
            on_probe(snapshot)

    def sample(step: int) -> None:
        if on_sample is not None:
            on_sample(step, generate(run.model, run.tokenizer, "", max_new_tokens=SAMPLE_CHARACTERS, seed=step,
                                     top_k=None))

    def step_callback(step: int, metrics: StepMetrics) -> None:
        if on_step is not None:
            on_step(step, metrics)
        if step % config.sample_interval == 0:
            sample(step)
        if metrics.val_loss is not None:
            probe(step)
        if step % config.checkpoint_interval == 0 and step < config.steps:
            save()

    probe(run.start_step)
    train(run.model, config, run.train_data, run.val_data, on_step=step_callback, should_stop=stop_now,
          start_step=run.start_step, result=result, optimizer=optimizer, world=world)
    if result.steps_done > run.start_step:
        if result.steps_done % config.sample_interval:  # stopped (or ended) between samples: show where it got to
            sample(result.steps_done)
        save()
    return result


def model_card(run: PreparedRun, result: TrainResult, command: str) -> str:
    """A model card (README.md) for a checkpoint trained by the CLI: what, how, how well."""
    config, train_config = run.model.config, run.request.train
    record = training_record(run, result)
    val = f"{result.val_loss[-1][1]:.4f}" if result.val_loss else "not measured"
    shape = (f"{checks.count(config.layers_num, 'layer')}, {checks.count(config.heads_num, 'head')}, embedding "
             f"{config.embedding_dim}, context "
             f"{config.context_size}, vocabulary {config.vocabulary_size}, dropout {config.dropout_rate}, "
             f"bias {config.use_bias}")
    schedule = (f"batch {train_config.batch_size}, learning rate {train_config.learning_rate}, warm-up "
                f"{train_config.warmup_steps}, {train_config.learning_rate_decay} decay to "
                f"{train_config.min_learning_rate_ratio:g}x")
    if train_config.time_budget_seconds > 0:
        schedule += (f", sized to a time budget of {train_config.time_budget_seconds:g} s of training steps"
                     + (", which ended the run" if result.budget_reached else ""))
    optimizer = ("AdamW on every parameter" if train_config.optimizer == "adamw" else
                 "Muon on the blocks' weight matrices, AdamW on the embeddings, the head, the norms and the biases")
    split = ("first 90% trains, last 10% validates" if run.held_out else
             "too short to hold out 10%: it trains and validates on the whole text, so the validation loss measures "
             "memorising")
    rows = [
        ("parameters", f"{run.model.parameter_count():,}"),
        ("shape", shape),
        ("corpus", f"{run.corpus.name}, {len(run.corpus.text):,} characters ({split})"),
        ("steps", f"{result.steps_done} of {train_config.steps} ({schedule})"),
        ("optimizer", f"{train_config.optimizer}: {optimizer}"),
        ("validation loss", f"**{val}** (cross-entropy in nats, mean of {train_config.eval_batches} fixed batches "
                            f"of {'the last-10% split' if run.held_out else 'the whole text'})"),
        ("wall time", f"{record['wall_seconds']:.0f} s ({record['eval_seconds']:.0f} s of it evaluation)"),
        ("speed", f"{record['tokens_per_second']:,.0f} tokens/s"),
        ("device", record["device"] if result.processes == 1 else
         f"{record['device']} × {result.processes} processes (DistributedDataParallel, batch "
         f"{train_config.batch_size} each)"),
        ("seed", str(train_config.seed)),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    kind = "A character-level GPT" if config.is_gpt else "N" + describe_architecture(config)[1:]
    return (
        f"---\nlibrary_name: attention-playground\ntags: [character-level, gpt, attention-playground]\n---\n\n"
        f"# {run.request.run_name}\n\n{kind} trained with Attention Playground's own CLI.\n\n"
        f"| | |\n| --- | --- |\n{table}\n\nTrained with:\n\n```bash\n{command}\n```\n\n"
        "Files: `config.json` (ModelConfig), `model.safetensors` (weights), `vocabulary.json` (the characters in ID "
        "order), `training.json` (loss curves and the figures above). Load with "
        "`playground.checkpoints.load_checkpoint`.\n"
    )
