"""Every visitor's request priced and admitted before it runs: who asks (tenancy.py), memory, time, disk, places.

``admit(plan, visitor, limits, budget)`` decides on a training run that ``run.plan_run`` has checked and priced but
not yet built: the tenancy rules, the upload cap, the memory (reserved from the server's budget, and the device's
free memory on a GPU), the time (the estimate against PLAYGROUND_MAX_TRAIN_SECONDS, which is also what one client
may hold the training slot for in any hour: ``TrainingClock``; the run stops at what is left), the disk (room made
for its checkpoint). ``prepare`` is plan -> admit -> build, what the job manager calls. ``preview`` says the same
costs and refusals for the Train tab's estimate without reserving anything. ``LongWork`` hands out the places long
samples, comparisons and timing sweeps run in, so short requests never wait behind them and no client holds them
all; ``checkpoint_bytes`` prices a converted checkpoint by what it writes, and ``conversion_admitter`` admits an
uploaded nanoGPT checkpoint by the shape it declares, before a tensor of it is converted.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from playground.budget import BudgetError, MemoryBudget, converted_cost
from playground.checkpoints import store as checkpoints
from playground.config import ConfigError, Limits, ModelConfig, TrainConfig
from playground.model.families import optimizer_refusal
from playground.server import tenancy
from playground.server.tenancy import Visitor
from playground.text.data import Corpus, CorpusError
from playground.training.estimates import (
    budget_left,
    estimate_seconds,
    format_seconds,
    memory_advice,
    memory_cost,
    step_seconds,
    where,
)
from playground.training.run import (
    PreparedRun,
    RunPlan,
    RunRequest,
    build_run,
    check_free_memory,
    check_size,
    check_steps,
    plan_run,
)

HOUR = 3600.0


class TrainingClock:
    """How long each client has held the training slot in the last hour, so no one holds it for an hour and starts
    again at once: PLAYGROUND_MAX_TRAIN_SECONDS is what a client may hold in any hour, not per run.

    The job manager calls ``started`` when a run takes the slot and ``ended`` when it lets go; ``held`` counts the
    part of each hold inside the last hour (a run still going counts up to now). Holds older than an hour are
    dropped, so it keeps at most an hour's worth.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._holds: dict[str, list[list[float | None]]] = {}
        self._lock = threading.Lock()

    def started(self, share: str) -> list:
        hold = [self._clock(), None]
        with self._lock:
            self._holds.setdefault(share, []).append(hold)
        return hold

    def ended(self, hold: list) -> None:
        with self._lock:
            if hold[1] is None:
                hold[1] = self._clock()

    def _in_window(self, share: str, now: float) -> list[tuple[float, float]]:
        """``share``'s holds cut to the last hour, oldest first (a hold still going ends now)."""
        self._forget(now)
        return [(max(start, now - HOUR), now if end is None else end) for start, end in self._holds.get(share, [])]

    def held(self, share: str) -> float:
        """Seconds ``share`` has held the slot in the last hour."""
        now = self._clock()
        with self._lock:
            return sum(end - start for start, end in self._in_window(share, now))

    def free_in(self, share: str, allowed: float, needed: float) -> float:
        """Seconds until ``share`` has ``needed`` of its ``allowed`` an hour back, as its oldest holds leave the
        window: 50 minutes held until now, 60 allowed, 20 needed -> 20 minutes."""
        now = self._clock()
        with self._lock:
            holds = self._in_window(share, now)
        excess = sum(end - start for start, end in holds) - (allowed - needed)
        for start, end in holds:
            if end - start >= excess:
                return max(0.0, start + excess + HOUR - now)
            excess -= end - start
        return 0.0

    def _forget(self, now: float) -> None:
        for share in list(self._holds):
            kept = [hold for hold in self._holds[share] if hold[1] is None or hold[1] > now - HOUR]
            if kept:
                self._holds[share] = kept
            else:
                del self._holds[share]


def disk_bytes(parameters: int, steps: int) -> int:
    """About how much a run's folder takes on disk: fp32 weights, AdamW's two moments, the JSON loss curves."""
    return 12 * parameters + 64 * steps + 64 * 1024


def checkpoint_bytes(config: ModelConfig) -> int:
    """What a checkpoint folder without optimizer state takes on disk: float32 weights (a tied matrix once) and
    its JSON files and card."""
    return 4 * config.parameter_count() + 64 * 1024


def conversion_admitter(budget: MemoryBudget, held: contextlib.ExitStack, visitor: Visitor, weights, limits: Limits,
                        upload_bytes: int) -> Callable[[ModelConfig, int], None]:
    """What convert_nanogpt calls once an upload's declared shape is known (``before_converting``): reserve the memory
    that shape takes to convert (held in ``held`` until the conversion ends) and make room for the checkpoint it
    writes in the visitor-run quota. By the shape, not the upload's size: a few KB of stride-0 tensors can declare
    73 MB of weights."""
    def admit_shape(config: ModelConfig, read_bytes: int) -> None:
        cost = converted_cost(parameters=config.parameter_count(), read_bytes=read_bytes, upload_bytes=upload_bytes)
        held.enter_context(budget.reserve(cost, hint="its declared shape is too large for this server's memory now"))
        tenancy.make_room_for(visitor, weights, checkpoint_bytes(config), limits)

    return admit_shape


def check_time(config: ModelConfig, train_config: TrainConfig, start_step: int, device_type: str, max_seconds: int,
               step_seconds_before: float = 0.0) -> float:
    """The estimated seconds of the steps to go (a time budget caps them); refuse, saying to what to lower steps or
    the time budget, past ``max_seconds``."""
    per_step = step_seconds(config, train_config.batch_size, device_type, train_config.optimizer)
    to_go = train_config.steps - start_step
    seconds = estimate_seconds(config, train_config.batch_size, to_go, device_type, train_config.optimizer,
                               budget_left(train_config, step_seconds_before))
    if seconds <= max_seconds:
        return seconds
    fit = int(max_seconds // per_step)
    advice = (f"lower steps to at most {start_step + fit:,} (now {train_config.steps:,}), set a time budget of at "
              f"most {max_seconds:,} s, or make the model or the batch smaller" if fit >= 1 else
              "one step alone takes longer: lower batch_size, context_size or the model's size")
    raise ConfigError(f"this run would take about {format_seconds(seconds)} ({to_go:,} steps at about "
                      f"{per_step:.2g} s each on {where(device_type)}, a rough estimate); this server stops a run "
                      f"after {format_seconds(max_seconds)}: {advice}")


def check_upload(corpus: Corpus, limits: Limits) -> None:
    """A text that came with the request (pasted or uploaded) is at most ``max_upload_bytes`` of UTF-8."""
    if corpus.from_visitor and len(corpus.text.encode("utf-8", "surrogatepass")) > limits.max_upload_bytes:
        raise CorpusError(f"{corpus.label} is larger than this server's limit of {limits.max_upload_bytes:,} bytes")


def reserve_memory(plan: RunPlan, budget: MemoryBudget | None) -> int:
    """Check the run's peak against the device's free memory (a GPU's; the CPU's where no server budget covers it)
    and reserve it from ``budget``; return the bytes held."""
    if budget is None or plan.device.type != "cpu":
        check_free_memory(plan)
    if budget is None:
        return 0
    config, batch_size, device_type = plan.config, plan.request.train.batch_size, plan.device.type
    try:
        return budget.acquire(plan.cost, hint=memory_advice(config, batch_size, budget.total, device_type))
    except BudgetError as exc:
        if plan.cost.bytes > budget.total:
            raise
        free_now = budget.free
        raise BudgetError(f"{exc}; to fit now, {memory_advice(config, batch_size, free_now, device_type)}") from None


@dataclass
class Admission:
    """What ``admit`` decided for one run: whose it is, how long it may take, what it cost others.

    ``memory`` bytes stay reserved in ``budget`` until ``release`` (or until the built run's ``release_memory``, once
    ``prepare`` hands them to it).
    """

    owner: str | None = None  # the owner hash training.json records (None: an operator's run)
    max_seconds: float | None = None  # the run stops and saves when its wall time passes this
    estimated_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # room made by removing runs
    memory: int = 0
    budget: MemoryBudget | None = None

    client: str | None = None  # the client_hash it counts against (a visitor's new or replaced run)

    @property
    def record(self) -> dict[str, Any]:
        """What the run's training.json records for the server: its owner, and its client."""
        record = {} if self.owner is None else {tenancy.OWNER_FIELD: self.owner}
        return {**record, tenancy.CLIENT_FIELD: self.client} if self.client else record

    def release(self) -> None:
        held, self.memory = self.memory, 0
        if held and self.budget is not None:
            self.budget.release(held)


def time_left(visitor: Visitor, limits: Limits, clock: TrainingClock | None) -> float:
    """The seconds of training ``visitor``'s client may still hold the slot for this hour; a refusal, saying when
    to come back, once it is (nearly) spent."""
    if clock is None:
        return float(limits.max_train_seconds)
    held = clock.held(visitor.share)
    left = limits.max_train_seconds - held
    if left >= min(60.0, limits.max_train_seconds):
        return left
    wait = max(1, round(clock.free_in(visitor.share, limits.max_train_seconds,
                                      min(60.0, limits.max_train_seconds)) / 60))
    raise ConfigError(f"this address has held the training slot for {format_seconds(held)} in the last hour, and "
                      f"this server lets each hold it {format_seconds(limits.max_train_seconds)} an hour "
                      f"(PLAYGROUND_MAX_TRAIN_SECONDS), so others get their turn: try again in about {wait} "
                      f"minute{'s' * (wait != 1)}")


def admit(plan: RunPlan, visitor: Visitor | None, limits: Limits, budget: MemoryBudget | None, *,
          replace: bool = False, clock: TrainingClock | None = None) -> Admission:
    """Decide on a planned run before anything is built: the tenancy rules, the upload cap, memory (reserved first:
    it is what kills a server), then for a visitor the time cap (what is left of their client's hour on ``clock``)
    and room on disk. A refusal holds nothing.

    ``visitor`` None is the server itself (tests, a maintenance call): only the memory and the upload cap apply.
    """
    request = plan.request
    owner = tenancy.owner_to_record(visitor, plan.name, request.weights_dir, resume=request.resume, replace=replace)
    check_upload(plan.corpus, limits)
    left = time_left(visitor, limits, clock) if visitor is not None else None
    admission = Admission(owner=owner, estimated_seconds=plan.estimated_seconds,
                          memory=reserve_memory(plan, budget), budget=budget,
                          client=visitor.client or None if visitor is not None and not request.resume else None)
    try:
        if visitor is not None:
            try:
                admission.estimated_seconds = check_time(plan.config, request.train, plan.start_step,
                                                         plan.device.type, int(left), plan.step_seconds_before)
            except ConfigError as exc:
                if left >= limits.max_train_seconds:
                    raise
                raise ConfigError(f"{exc} (what is left of this address's {format_seconds(limits.max_train_seconds)}"
                                  " of training an hour, PLAYGROUND_MAX_TRAIN_SECONDS)") from None
            admission.max_seconds = float(int(left))
            removed = tenancy.make_room_for(
                visitor, request.weights_dir, disk_bytes(plan.config.parameter_count(), request.train.steps), limits,
                keep={plan.name}, replacing=plan.name if checkpoints.exists(plan.name, request.weights_dir) else None)
            admission.notes = [tenancy.removed_note(removed, limits)] if removed else []
    except BaseException:
        admission.release()
        raise
    return admission


def prepare(request: RunRequest, visitor: Visitor | None = None, limits: Limits | None = None,
            budget: MemoryBudget | None = None, *, replace: bool = False,
            clock: TrainingClock | None = None) -> PreparedRun:
    """A request through the server: ``run.plan_run``, ``admit``, ``run.build_run``; the built run holds the
    admitted memory until its ``release_memory``. ``replace``: a visitor starting a run whose name exists means to
    replace it."""
    limits = limits or Limits.from_env()
    name = checkpoints.validate_name(request.run_name)  # who may write it is decided before anything is read
    tenancy.owner_to_record(visitor, name, request.weights_dir, resume=request.resume, replace=replace)
    plan = plan_run(request, limits)
    admission = admit(plan, visitor, limits, budget, replace=replace, clock=clock)
    try:
        return build_run(plan, max_seconds=admission.max_seconds, notes=admission.notes, record=admission.record,
                         memory=admission.memory, budget=budget, limits=limits)
    except BaseException:
        admission.release()
        raise


@dataclass(frozen=True)
class Preview:
    """What a run of these settings would cost here and what Start would refuse, said before it is pressed."""

    seconds: float  # of training steps, a time budget's cap applied
    by_steps: float  # all the steps, whatever the time budget
    memory: int  # bytes at its peak
    refusals: tuple[str, ...]


def preview(config: ModelConfig, batch_size: int, steps: int, limits: Limits | None = None, *,
            optimizer: str = "adamw", time_budget_seconds: float = 0.0, budget: MemoryBudget | None = None,
            device_type: str = "cpu") -> Preview:
    """The estimate of a new run, with no side effect: nothing reserved, nothing removed, nothing read from disk.

    The refusals are admission's own checks (time, the size caps, the steps cap, the memory budget's total); what
    only Start can know (the server's load now, the disk's room, who owns a name) is left to it.
    """
    by_steps = estimate_seconds(config, batch_size, steps, device_type, optimizer)
    seconds = estimate_seconds(config, batch_size, steps, device_type, optimizer, time_budget_seconds)
    memory = memory_cost(config, batch_size, device_type)
    refusals = [refusal] if (refusal := optimizer_refusal(config, optimizer)) else []
    if limits is not None:
        if seconds > limits.max_train_seconds:
            refusals.append(f"over this server's {format_seconds(limits.max_train_seconds)} limit for a run")
        try:
            check_size(config, limits, "this model")
            check_steps(steps, limits)
        except ValueError as exc:
            refusals.append(str(exc))
    if budget is not None:
        try:
            budget.check(memory, hint=memory_advice(config, batch_size, budget.total, device_type))
        except BudgetError as exc:
            refusals.append(str(exc))
    return Preview(seconds, by_steps, memory.bytes, tuple(refusals))


class BusyError(ValueError):
    """A long request refused for now: its client already holds its share of the long lane, or the lane is full."""


class LongWork:
    """The places long requests take, so short ones never wait behind them and no client holds them all.

    A request estimated at ``short_seconds`` or less takes no place: it runs at once in its lane's spare workers
    (the Sample lane has ``places + waiting`` workers for long samples and more for short ones). A longer one takes
    one of ``places``, waiting up to ``wait_seconds`` beside at most ``waiting`` others; one client (tenancy's share)
    holds at most ``per_client`` places, running or waiting. Past any of these it is refused at once, with what to
    do, instead of sitting in the queue in front of everyone else's.
    """

    def __init__(self, places: int, waiting: int, per_client: int, short_seconds: float, wait_seconds: float):
        self.places, self.waiting, self.per_client = places, waiting, per_client
        self.short_seconds, self.wait_seconds = short_seconds, wait_seconds
        self._running = self._queued = 0
        self._clients: dict[str, int] = {}
        self._changed = threading.Condition()

    @property
    def workers(self) -> int:
        """How many requests the lane itself may run at once: every place, every waiter, and as many short ones."""
        return 2 * self.places + self.waiting

    def hold(self, share: str | None, seconds: float):
        """A context manager: a place for ``share``'s request of about ``seconds`` while it runs (none for a short
        one). ``share`` None counts against no client (the server's own work)."""
        return _nothing() if seconds <= self.short_seconds else self._place(share, seconds)

    @contextlib.contextmanager
    def _place(self, share: str | None, seconds: float):
        advice = f"or ask for less (a request of under {self.short_seconds:g} s runs at once)"
        with self._changed:
            mine = self._clients.get(share, 0) if share is not None else 0
            if share is not None and mine >= self.per_client:
                raise BusyError(f"this address already has {mine} long request{'s' * (mine != 1)} running or waiting "
                                f"(at most {self.per_client} each): wait for {'one' if mine != 1 else 'it'} to "
                                f"finish, {advice}")
            if self._running >= self.places and self._queued >= self.waiting:
                raise BusyError(f"{self._running} long requests are running and {self._queued} more wait for a "
                                f"place: try again in a few seconds, {advice}")
            self._count(share, +1)
            self._queued += 1
            try:
                placed = self._changed.wait_for(lambda: self._running < self.places, timeout=self.wait_seconds)
            finally:
                self._queued -= 1
            if not placed:
                self._count(share, -1)
                raise BusyError(f"no place for a long request came free in {self.wait_seconds:g} s: try again, "
                                f"{advice}")
            self._running += 1
        try:
            yield
        finally:
            with self._changed:
                self._running -= 1
                self._count(share, -1)
                self._changed.notify_all()

    def _count(self, share: str | None, change: int) -> None:
        if share is None:
            return
        held = self._clients.get(share, 0) + change
        if held > 0:
            self._clients[share] = held
        else:
            self._clients.pop(share, None)


@contextlib.contextmanager
def _nothing():
    yield
