"""The background training job manager: one run at a time per server, in its own thread.

Owns the thread, the lock and the stop Event, and the status copy the Train tab polls with ``status()``.
It runs no model itself: run.py's ``run_training`` does the work and reports steps, samples and probe
snapshots through callbacks, which only record them here. A run is prepared and admitted (admission.prepare: every
input checked, its memory reserved, its time capped, room made on disk) before ``start`` returns, so bad input fails
at once with a message; an error inside the thread is kept in the status and frees the slot and the memory.

A run belongs to whoever started it: ``stop(visitor)`` from anyone else is refused (NotYourRunError) unless
tenancy's ``Visitor.may_change`` allows it (the admin); ``stop()`` with no visitor is the server itself (shutting
down, tests). The status every viewer polls names no owner: ``owned_by(visitor)`` answers the one question a page
may ask.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import MappingProxyType
from typing import Any

from playground.checkpoints import store as checkpoints
from playground.device import describe_training
from playground.server import admission, tenancy
from playground.server.tenancy import Visitor
from playground.training import curves
from playground.training.estimates import format_budget, format_seconds
from playground.training.loop import StepMetrics, TrainResult
from playground.training.probes import ProbeSnapshot
from playground.training.record import run_precision, seconds_before
from playground.training.run import STOPPED_BY_TIME_LIMIT, PreparedRun, RunRequest, run_training

logger = logging.getLogger(__name__)

IDLE, RUNNING, STOPPING, FINISHED, STOPPED, FAILED = "idle", "running", "stopping", "finished", "stopped", "failed"


class JobBusyError(RuntimeError):
    """A second run was asked for while one is in progress."""


class NotYourRunError(RuntimeError):
    """Someone other than its owner (or the admin) asked to stop the run in progress."""


@dataclass(frozen=True)
class JobStatus:
    """A consistent copy of the job's state for one poll."""

    state: str = IDLE
    run_name: str = ""
    started_at: float | None = None
    step: int = 0
    start_step: int = 0
    steps: int = 0
    train_loss: tuple = ()
    val_loss: tuple = ()
    tokens_per_second: float = 0.0
    elapsed_seconds: float = 0.0  # this session's: since Start or Resume
    seconds_before: float = 0.0  # what a resumed run had trained before this session
    learning_rate: float = 0.0
    samples: tuple = ()  # (step, text)
    probes: tuple = ()  # ProbeSnapshot
    message: str = ""
    # what the preparation noted (room made by removing the owner's runs, a resumed shape, a cold optimizer...): for
    # the run's owner, after the message; another visitor sees the message alone
    notes: tuple[str, ...] = ()
    parameter_count: int = 0
    device: str = ""
    corpus: str = ""
    corpus_name: str = ""  # curves.corpus_name: which runs' validation losses compare with this one's
    time_limit_seconds: float | None = None  # the run stops and saves when its wall time passes this
    time_budget_seconds: float = 0.0  # the run's own TrainConfig.time_budget_seconds (0: none)
    progress: float = 0.0  # how far through its schedule, in [0, 1]: by steps, or by its time budget if further
    held_out: bool = True  # its validation text is not its training text (PreparedRun.held_out)
    recipe: str = ""  # its optimizer, learning rate and decay, batch, as curve legends say them (curves.recipe)
    # what it was started with, by field name: RunRequest.model's settings and TrainConfig's (a reloaded page shows
    # its owner these, so Resume goes on with them); read-only, shared by every snapshot
    settings: Mapping[str, Any] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.state in (RUNNING, STOPPING)

    @property
    def total_seconds(self) -> float:
        """The run's wall time over all its sessions, as its curve's time axis counts it."""
        return self.seconds_before + self.elapsed_seconds

    @property
    def eta_seconds(self) -> float | None:
        done = self.step - self.start_step
        if not self.active or done <= 0:
            return None
        eta = (self.steps - self.step) * self.elapsed_seconds / done
        if self.time_budget_seconds > 0:  # the budget's seconds left (evaluations and samples come on top)
            eta = min(eta, (1.0 - self.progress) * self.time_budget_seconds)
        return eta

    def how_it_ends(self) -> str:
        """'it ends by itself at step 1200 (or after 1h 00m, this server's time limit) or when its owner stops it';
        with a time budget, 'it ends by itself at step 3000 or once its training steps have taken 50 s (its time
        budget), after 1h 00m at the latest (this server's time limit), or when its owner stops it'."""
        limit = format_seconds(self.time_limit_seconds) if self.time_limit_seconds else ""
        if self.time_budget_seconds > 0:
            return (f"it ends by itself at step {self.steps} or once its training steps have taken "
                    f"{format_budget(self.time_budget_seconds)} (its time budget), "
                    + (f"after {limit} at the latest (this server's time limit), " if limit else "")
                    + "or when its owner stops it")
        return (f"it ends by itself at step {self.steps}"
                + (f" (or after {limit}, this server's time limit)" if limit else "") + " or when its owner stops it")

    def busy_message(self) -> str:
        started = datetime.fromtimestamp(self.started_at).strftime("%H:%M:%S") if self.started_at else "?"
        return (f"a run is in progress ({self.run_name}, started {started}, step {self.step} of {self.steps}); "
                f"one run at a time: {self.how_it_ends()}")


@dataclass
class _Job:
    status: JobStatus  # scalar fields; the growing histories live in the lists below
    stop_event: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    train_loss: list = field(default_factory=list)
    val_loss: list = field(default_factory=list)
    samples: list = field(default_factory=list)
    probes: list = field(default_factory=list)
    owners: frozenset = frozenset()  # owner hashes that may stop it: who started it, and the run's recorded owner

    def snapshot(self) -> JobStatus:
        return replace(self.status, train_loss=tuple(self.train_loss), val_loss=tuple(self.val_loss),
                       samples=tuple(self.samples), probes=tuple(self.probes))


class TrainingJobs:
    """Start, stop and watch the server's single training run."""

    def __init__(self, prepare: Callable[..., PreparedRun] = admission.prepare,
                 execute: Callable[..., TrainResult] = run_training, clock: admission.TrainingClock | None = None):
        self._prepare = prepare
        self._execute = execute
        self._clock = clock  # how long each client has held the slot this hour (admission reads it)
        self._lock = threading.Lock()
        self._job = _Job(JobStatus())

    def status(self) -> JobStatus:
        with self._lock:
            return self._job.snapshot()

    def start(self, request: RunRequest, visitor: Visitor | None = None, *, replace: bool = False) -> JobStatus:
        """Prepare, admit and launch ``visitor``'s run (None: the server itself); raises JobBusyError, or the
        preparation's own clear error. ``replace``: the visitor means to replace a run of that name.

        A refused run leaves the last run's status (its curve, its samples) as it was.
        """
        with self._lock:
            if self._job.status.active:
                raise JobBusyError(self._job.status.busy_message())
            previous = self._job
            started_by = visitor.owner if visitor is not None else None
            self._job = _Job(JobStatus(state=RUNNING, run_name=request.run_name, started_at=time.time(),
                                       steps=request.train.steps,
                                       time_budget_seconds=request.train.time_budget_seconds,
                                       recipe=curves.recipe(request.train.to_dict()),
                                       settings=MappingProxyType({**request.model, **request.train.to_dict()}),
                                       message="preparing the corpus and model"),
                             owners=frozenset({started_by} - {None}))
            job = self._job
        try:
            run = self._prepare(request, visitor, replace=replace)
        except BaseException:
            with self._lock:
                self._job = previous
            raise
        hold = None
        try:
            with self._lock:
                job.owners = job.owners | ({run.record.get(tenancy.OWNER_FIELD)} - {None})
            self._update(job, start_step=run.start_step, step=run.start_step,
                         parameter_count=run.model.parameter_count(),
                         device=describe_training(run.device, run_precision(run).dtype),
                         corpus=f"{run.corpus.label} ({len(run.corpus.text):,} characters)",
                         corpus_name=curves.corpus_name(run.corpus.name, len(run.corpus.text)),
                         time_limit_seconds=run.max_seconds, seconds_before=seconds_before(run),
                         progress=run.request.train.progress(run.start_step, run.step_seconds_before),
                         held_out=run.held_out, message=f"training on {run.corpus.label} on {run.device}",
                         notes=tuple(run.notes),
                         settings=MappingProxyType({**job.status.settings, **{  # a resumed run keeps its own shape
                             k: v for k, v in run.model.config.to_dict().items() if k in request.model}}))
            with self._lock:
                job.train_loss.extend(tuple(p) for p in run.history.get("train_loss", []))
                seconds = {step: t for step, t in run.history.get("val_seconds", [])}
                job.val_loss.extend((*p[:2], seconds[p[0]]) if p[0] in seconds else tuple(p)
                                    for p in run.history.get("val_loss", []))
            hold = self._clock.started(visitor.share) if self._clock is not None and visitor is not None else None
            job.thread = threading.Thread(target=self._work, args=(job, run, hold), name="training-run", daemon=True)
            job.thread.start()
        except BaseException:
            run.release_memory()
            if hold is not None:
                self._clock.ended(hold)
            with self._lock:
                self._job = previous
            raise
        return self.status()

    def owned_by(self, visitor: Visitor | None) -> bool:
        """Whether ``visitor`` may stop the current run (its owner, or the admin)."""
        if visitor is None:
            return False
        with self._lock:
            return _may_change(visitor, self._job.owners)

    def stop(self, visitor: Visitor | None = None) -> JobStatus:
        """Ask the run to end after its current step; it saves a checkpoint on the way out.

        ``visitor`` must be the run's owner or the admin (else NotYourRunError); None is the server itself.
        """
        with self._lock:
            job = self._job
            if job.status.state == RUNNING:
                if visitor is not None and not _may_change(visitor, job.owners):
                    raise NotYourRunError(f"this run belongs to another visitor; {job.status.how_it_ends()}")
                job.stop_event.set()
                job.status = replace(job.status, state=STOPPING, message="stopping after the current step")
            return job.snapshot()

    def wait(self, timeout: float | None = None) -> JobStatus:
        thread = self._job.thread
        if thread is not None:
            thread.join(timeout)
        return self.status()

    def _update(self, job: _Job, **changes) -> None:
        with self._lock:
            job.status = replace(job.status, **changes)

    def _work(self, job: _Job, run: PreparedRun, hold: list | None = None) -> None:
        before = seconds_before(run)
        def on_step(step: int, metrics: StepMetrics) -> None:
            with self._lock:
                job.train_loss.append((step, metrics.train_loss))
                if metrics.val_loss is not None:  # (step, loss, wall seconds since the run first started)
                    job.val_loss.append((step, metrics.val_loss, before + metrics.elapsed_seconds))
                job.status = replace(job.status, step=step, tokens_per_second=metrics.tokens_per_second,
                                     elapsed_seconds=metrics.elapsed_seconds, learning_rate=metrics.learning_rate,
                                     progress=metrics.progress)

        def on_sample(step: int, text: str) -> None:
            with self._lock:
                job.samples.append((step, text))

        def on_probe(snapshot: ProbeSnapshot) -> None:
            with self._lock:
                job.probes.append(snapshot)

        try:
            result = self._execute(run, on_step=on_step, should_stop=job.stop_event.is_set, on_sample=on_sample,
                                   on_probe=on_probe)
        except Exception as exc:  # the thread must never die silently: keep the message, free the slot
            logger.exception("training run %s failed", run.request.run_name)
            kept = ("The last good checkpoint is kept" if checkpoints.has_checkpoint(run.request.run_name,
                                                                                     run.request.weights_dir)
                    else "It failed before its first checkpoint, so it saved none")
            self._update(job, state=FAILED, message=f"training failed: {exc}. {kept}.")
            return
        finally:
            run.release_memory()  # however the run ended, its memory goes back to the server's budget
            if hold is not None:
                self._clock.ended(hold)
        state = STOPPED if result.stopped else FINISHED
        verb = "stopped" if result.stopped else "finished"
        if result.budget_reached:
            verb = f"finished: its time budget ({format_budget(run.request.train.time_budget_seconds)}) ended it"
        if result.stop_reason == STOPPED_BY_TIME_LIMIT:
            verb = f"stopped by this server's time limit ({format_seconds(run.max_seconds)})"
        self._update(job, state=state,  # its notes stay: still true of the finished run
                     message=f"{verb} at step {result.steps_done}; checkpoint saved as {run.request.run_name}")


def _may_change(visitor: Visitor, owners: frozenset) -> bool:
    """tenancy's one rule, for a run that answers to several owner hashes (who started it, the one it records)."""
    return visitor.admin or any(visitor.may_change(owner) for owner in owners)
