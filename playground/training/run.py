"""A training run: what it needs (RunRequest), checking it before the first step (plan_run, then build_run; the
command line's prepare_run does both), the run around the loop (run_training) and what it leaves behind
(training.json, the model card).

Owns the corpus -> tokenizer -> model preparation, the size caps every run meets (``check_size``, ``check_steps``),
the periodic checkpoints (with the optimizer's state) through checkpoints.py, the samples and the probe sentence's
attention a run reports as it goes. What a run costs is estimates.py's; who may start it and whether the server has
room for it now is the server's (server/admission.py calls plan_run, admits the plan, then calls build_run). Knows
nothing about threads or the UI: the job manager (server/jobs.py) and the CLI (cli/train.py) both call
``run_training`` with their own callbacks. The loop itself is train.py's ``train``; the record a checkpoint keeps
(run_record.py) is built from that loop's own TrainResult.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from playground import checks
from playground.budget import BudgetError, Cost, MemoryBudget, human
from playground.checkpoints import store as checkpoints
from playground.config import ConfigError, Limits, ModelConfig
from playground.device import describe, pick_device, training_dtype
from playground.lens.head_forming import snapshot_scores
from playground.model.families import build_model, family_settings, optimizer_refusal
from playground.model.gpt import GPT
from playground.model.sampling import generate
from playground.text.data import Corpus, CorpusError, TokenIdsDataset, load_corpus, split_train_val
from playground.text.tokenizer import CharTokenizer
from playground.training.distributed import SINGLE, World
from playground.training.estimates import (
    budget_left,
    estimate_seconds,
    free_device_memory,
    memory_advice,
    memory_cost,
)
from playground.training.loop import StepMetrics, TrainResult, configure_optimizer, train
from playground.training.optimizer_state import OptimizerStateError, flatten_optimizer_state, restore_optimizer_state
from playground.training.optimizers import Optimizer, optimizer_name
from playground.training.precision import resolve_precision
from playground.training.presets import MODEL_FIELDS
from playground.training.probes import ProbeSnapshot, probe_attention, probe_text_for
from playground.training.record import (
    CURVE_FIELDS,
    RUN_RECORD_FIELDS,
    SECONDS_FIELD,
    model_card,
    recorded_step_seconds,
    training_record,
)
from playground.training.requests import PreparedRun, RunRequest

SAMPLE_CHARACTERS = 120  # the length of each sample a run reports
# probe snapshots a run takes between evaluations, at most: a long run's probe_interval is widened to keep to it (the
# job manager keeps every snapshot's weights in memory for the Train tab's slider)
MAX_PROBE_SNAPSHOTS = 200
STOPPED_ON_REQUEST, STOPPED_BY_TIME_LIMIT = "asked", "time limit"


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


@dataclass
class RunPlan:
    """A run checked up to everything that needs its model: ``plan_run``'s answer, priced before anything is built.

    ``previous`` is a resumed checkpoint's training.json (None for a new run); ``cost`` the training's peak memory on
    ``device`` and ``estimated_seconds`` the steps to go (a time budget caps them).
    """

    request: RunRequest
    name: str
    corpus: Corpus
    tokenizer: CharTokenizer
    config: ModelConfig
    device: torch.device
    train_ids: torch.Tensor
    val_ids: torch.Tensor
    start_step: int = 0
    history: dict[str, list] = field(default_factory=dict)
    step_seconds_before: float = 0.0
    previous: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    held_out: bool = True
    cost: Cost | None = None
    estimated_seconds: float = 0.0


def plan_run(request: RunRequest, limits: Limits | None = None) -> RunPlan:
    """Check everything about a run that needs no model: its name, the size caps, the corpus, a resumed checkpoint's
    config, tokenizer and record (not its weights), the device; price its memory and time.

    Raises a ValueError whose message says what to change.
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
    device = pick_device(train_config.device)
    if device.type == "cuda" and device.index is None:  # the current GPU by number: a torchrun rank's own
        device = torch.device("cuda", torch.cuda.current_device())
    training_dtype(device, train_config.precision)  # bfloat16 asked for where it cannot run: refused now, not mid-run
    corpus = load_corpus(request.corpus_path, request.corpus_text, name=request.corpus_name,
                         uploaded=request.uploaded)
    start_step, history, step_seconds_before, previous, notes = 0, {}, 0.0, None, []
    if request.resume:
        if not checkpoints.exists(name, request.weights_dir):
            raise checkpoints.MissingCheckpointError(f"no checkpoint named {name!r} to resume")
        folder = checkpoints.resolve(name, request.weights_dir)
        layout, config = checkpoints.read_layout(folder)
        check_size(config, limits, name)  # before anything else of it is read
        tokenizer = checkpoints.read_tokenizer(folder, layout)
        previous = checkpoints.read_training(name, request.weights_dir) or {}
        unknown_chars = tokenizer.find_unknown(corpus.text)
        if unknown_chars:
            missing = "".join(sorted({u.character for u in unknown_chars}))  # a visitor's corpus: shown bounded
            raise CorpusError(
                f"the corpus has {len(missing)} character(s) the resumed model lacks: {checks.shown(missing)}"
            )
        _check_same_optimizer(name, previous, train_config.optimizer)
        start_step = int(previous.get("steps_done", 0))
        notes = _shape_from_checkpoint(name, config, request.model) + _corpus_change(name, previous, corpus,
                                                                                     start_step)
        history = {k: list(previous.get(k, [])) for k in CURVE_FIELDS}
        history[SECONDS_FIELD] = [float(previous.get("wall_seconds", 0.0))]
        step_seconds_before = recorded_step_seconds(previous)
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
        tokenizer = CharTokenizer.train_from_text(corpus.text)
        config = ModelConfig(vocabulary_size=tokenizer.vocabulary_size, **family_settings(request.model))
        check_size(config, limits, "the model")
    if refusal := optimizer_refusal(config, train_config.optimizer):
        raise ConfigError(refusal)
    train_ids, val_ids, split_notes = split_for_context(tokenizer.encode(corpus.text), config.context_size)
    estimated = estimate_seconds(config, train_config.batch_size, train_config.steps - start_step, device.type,
                                 train_config.optimizer, budget_left(train_config, step_seconds_before))
    return RunPlan(request, name, corpus, tokenizer, config, device, train_ids, val_ids, start_step, history,
                   step_seconds_before, previous, split_notes + notes, held_out=not split_notes,
                   cost=memory_cost(config, train_config.batch_size, device.type), estimated_seconds=estimated)


def check_free_memory(plan: RunPlan) -> None:
    """Refuse a run whose peak is more than its device has free now (CUDA's memory; the machine's for the CPU)."""
    free = free_device_memory(plan.device)
    if free is not None and plan.cost.bytes > free:
        raise BudgetError(f"{plan.cost.describe()}, more than the {human(free)} free on {describe(plan.device)} now; "
                          f"{memory_advice(plan.config, plan.request.train.batch_size, free, plan.device.type)}")


def build_run(plan: RunPlan, *, max_seconds: float | None = None, notes: list[str] = (),
              record: dict[str, Any] | None = None, memory: int = 0, budget: MemoryBudget | None = None,
              limits: Limits | None = None) -> PreparedRun:
    """The model (a resumed checkpoint's weights, or fresh ones from the seed) and its optimizer, on the device, and
    the forward's precision (precision "auto" is measured on the model: a few forward and backward passes).

    ``max_seconds``: the run stops and saves when its wall time passes this. ``notes`` go after the plan's;
    ``record`` goes into training.json; ``memory`` bytes held in ``budget`` stay with the run until its
    ``release_memory``.
    """
    request, train_config = plan.request, plan.request.train
    limits = limits or Limits.from_env()
    carried = {k: v for k, v in (plan.previous or {}).items() if k not in RUN_RECORD_FIELDS}
    if request.resume:
        model = checkpoints.load_checkpoint(plan.name, directory=request.weights_dir,
                                            max_parameters=limits.max_parameters).model
    else:
        torch.manual_seed(train_config.seed)
        model = build_model(plan.config)
    model.to(plan.device)
    precision = resolve_precision(model, plan.device, train_config.precision, train_config.batch_size)
    optimizer = configure_optimizer(model, train_config, plan.device)
    restored = _restore_optimizer(optimizer, model, plan.name, request) if request.resume else []
    return PreparedRun(request, plan.corpus, plan.tokenizer, model,
                       TokenIdsDataset(plan.train_ids, plan.config.context_size),
                       TokenIdsDataset(plan.val_ids, plan.config.context_size), plan.device, plan.start_step,
                       plan.history, step_seconds_before=plan.step_seconds_before, optimizer=optimizer,
                       notes=plan.notes + list(notes) + restored, cost=plan.cost,
                       estimated_seconds=plan.estimated_seconds, max_seconds=max_seconds,
                       record={**carried, **(record or {})}, memory=memory, budget=budget, held_out=plan.held_out,
                       precision=precision)


def prepare_run(request: RunRequest, limits: Limits | None = None) -> PreparedRun:
    """The command line's preparation: ``plan_run``, the device's free memory (a command-line run has no server
    budget, so a batch too big for the machine is refused here), then ``build_run``."""
    limits = limits or Limits.from_env()
    plan = plan_run(request, limits)
    check_free_memory(plan)
    return build_run(plan, limits=limits)


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
    windows = len(ids) - context_size  # a window starts at each position that leaves context_size + 1 characters
    return ids, ids, [f"the corpus ({len(ids):,} characters) is too short to hold out its last 10% for context_size "
                      f"{context_size} (that needs {10 * (context_size + 1):,}), so the model trains and validates "
                      "on the whole text: the validation loss measures memorising, not generalising",
                      f"{len(ids):,} characters give {checks.count(windows, 'window')} of {context_size} to learn "
                      f"from (one starting at each of the first {windows:,} characters): the model learns to go "
                      "on from those and nothing else, so a sample from an empty prompt, which starts elsewhere, "
                      f"seldom writes the text back; a prompt of the text's first {context_size} characters does"]


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
    ``on_probe(snapshot)`` before the first step, after every evaluation and every ``probe_interval`` steps
    (``probe_text``'s attention, by default ``probe_text_for(run)``'s, and every head's pattern scores, which
    training.json keeps as ``head_scores`` whether or not anyone watches).
    Stops early, saving, when ``should_stop()`` is true or the run's ``max_seconds`` have passed;
    ``result.stop_reason`` says which (STOPPED_ON_REQUEST, STOPPED_BY_TIME_LIMIT).

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
    probe_every = config.probe_interval and max(config.probe_interval, -(-config.steps // MAX_PROBE_SNAPSHOTS))

    def save() -> None:  # with its model card where a command trains it: a card never falls behind its weights
        card = model_card(run, result, run.request.command) if run.request.command else None
        checkpoints.save_checkpoint(run.model, run.tokenizer, name, directory=run.request.weights_dir,
                                    training=training_record(run, result), card=card,
                                    optimizer_state=flatten_optimizer_state(optimizer, run.model))

    def stop_now() -> bool:
        if should_stop is not None and should_stop():
            result.stop_reason = STOPPED_ON_REQUEST
        elif deadline is not None and time.monotonic() >= deadline:
            result.stop_reason = STOPPED_BY_TIME_LIMIT
        return bool(result.stop_reason)

    def probe(step: int) -> None:  # the snapshot's scores go into training.json whoever watches
        snapshot = probe_attention(run, probe_text, step)
        if snapshot is None:
            return
        ids = run.tokenizer.encode("".join(snapshot.tokens))
        scores = snapshot_scores(run.model, ids, snapshot.weights, step, seed=config.seed)
        run.head_scores.append(scores)
        if on_probe is not None:
            on_probe(dataclasses.replace(snapshot, scores=scores))

    def sample(step: int) -> None:
        if on_sample is not None:
            on_sample(step, generate(run.model, run.tokenizer, "", max_new_tokens=SAMPLE_CHARACTERS, seed=step,
                                     top_k=None))

    def step_callback(step: int, metrics: StepMetrics) -> None:
        if on_step is not None:
            on_step(step, metrics)
        if step % config.sample_interval == 0:
            sample(step)
        if metrics.val_loss is not None or (probe_every and step % probe_every == 0):
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
