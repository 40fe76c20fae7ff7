"""What every tab shares: the app's context (created once in build_app) and readable errors.

Handlers are plain functions; ``friendly`` turns the core's exceptions into ``gr.Error`` messages so
neither the browser nor the API ever sees a traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import os
import re
import threading
import weakref
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import gradio as gr
import numpy as np
import torch

from playground.budget import MemoryBudget, tokenizer_cost
from playground.checkpoints import loading
from playground.checkpoints import store as checkpoints
from playground.config import Limits
from playground.lens.walkthrough import lessons
from playground.server import admission, temp_space, tenancy
from playground.server.admission import LongWork, TrainingClock
from playground.server.fast_lane import FastLane
from playground.server.jobs import JobBusyError, NotYourRunError, TrainingJobs
from playground.server.uploads import UploadLedger
from playground.text.data import Corpus, load_corpus

logger = logging.getLogger(__name__)

TAP_PX = 44  # px: on a touch screen every tab, option, tick box, fold and arrow is a finger's target this tall
# the elements page/app.css makes TAP_PX tall (button.sm: a small button, as "Step through this head", is 26 px)
TAP_TARGETS = ('[role="tab"], [data-testid$="-radio-label"], label.checkbox-container, button.label-wrap, button.sm')
FAST_SLOTS = 4  # quick views served at once (server/fast_lane.py's places)
FAST_LANE = "fast"  # its concurrency_id
FAST_PER_CLIENT = 1  # of them one client holds at once: beside one client's four Why loops another visitor's
# tokenize took 3.25 s median with four, 2.18 s with two, 1.52 s with one (alone 0.47-0.83 s, a loaded machine):
# each view's small tensor operations hold the GIL between them, so two at once starve the rest
FAST_WORKERS = 3 * FAST_SLOTS  # Gradio's workers for the lane: more than its places, so a client's calls waiting
# for their share never hold the others' place in Gradio's queue
FAST_CALL_SECONDS = 10.0  # a quick view running longer stops holding one of the lane's places
FAST_WAIT_SECONDS = 30.0  # a quick view waiting longer than this for a place is refused as busy
CHECKPOINT_CACHE_SIZE = 4  # loaded checkpoints kept in memory, least recently used dropped first
CHECKPOINT_CACHE_SHARE = 0.5  # and their weights' bytes together at most this share of the memory budget
SHORT_SECONDS = 2.0  # a sample estimated to take at most this long is short: it never waits behind long ones
LONG_PER_CLIENT = 2  # long samples one client may have running or waiting at once
TEMP_MAX_AGE_SECONDS = 3600  # files in Gradio's temp space older than this go at the next sweep


def upload_ledger(limits: Limits) -> UploadLedger:
    """The temp space's uploads under limits.max_temp_bytes, a quarter of it per client (at least one upload of
    Gradio's largest file and its form's overhead)."""
    largest = max(limits.max_upload_bytes, limits.max_model_upload_bytes) + 2**20
    return UploadLedger(root_of=lambda: Path(gr.utils.get_upload_folder()), max_bytes=limits.max_temp_bytes,
                        max_age_seconds=TEMP_MAX_AGE_SECONDS, per_client=max(limits.max_temp_bytes // 4, largest),
                        largest=largest)


def kept_bytes(checkpoint: checkpoints.Checkpoint) -> int:
    """What a loaded checkpoint keeps in memory: its weights and its tokenizer (budget.tokenizer_cost)."""
    return checkpoint.model.weights_bytes() + tokenizer_cost(checkpoint.config.vocabulary_size).bytes


@dataclass
class AppContext:
    """Server-wide objects: made inside build_app(), never at import time."""

    limits: Limits
    weights: Path
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))  # where loaded checkpoints run
    jobs: TrainingJobs | None = None  # made in __post_init__ so runs are capped by these limits
    training_clock: TrainingClock = field(default_factory=TrainingClock)  # each client's hour of the training slot
    long_work: LongWork | None = None  # the long samples' places (made in __post_init__, sized by the device)
    uploads: UploadLedger | None = None  # what uploads in flight reserve in the temp space (made in __post_init__)
    fast_places: FastLane = field(default_factory=lambda: FastLane(  # the fast lane's places, shared by client
        FAST_SLOTS, FAST_PER_CLIENT, FAST_CALL_SECONDS, FAST_WAIT_SECONDS))
    trust_forwarded: int = field(default_factory=tenancy.trusts_forwarded)  # proxies appending X-Forwarded-For
    budget: MemoryBudget = field(default_factory=MemoryBudget)  # the bytes every request reserves before it runs
    # PLAYGROUND_ADMIN_TOKEN: the Space owner's token, which may stop, resume or replace any visitor's run
    admin_token: str = field(default_factory=lambda: os.environ.get("PLAYGROUND_ADMIN_TOKEN", "").strip(),
                             repr=False)
    _cache: dict = field(default_factory=dict)
    _checkpoints: OrderedDict = field(default_factory=OrderedDict)  # SourceKey -> (weights stamp, Checkpoint)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.uploads is None:  # the launch's middleware shares it (app.py gives it to launch_options)
            self.uploads = upload_ledger(self.limits)
        if self.long_work is None:
            self.long_work = LongWork(places=self.model_concurrency, waiting=self.model_concurrency,
                                      per_client=LONG_PER_CLIENT, short_seconds=SHORT_SECONDS,
                                      wait_seconds=float(self.limits.max_request_seconds))
        if self.jobs is None:
            # each run reserves its estimated peak from the server's budget for as long as it runs
            self.jobs = TrainingJobs(prepare=functools.partial(admission.prepare, limits=self.limits,
                                                              budget=self.budget, clock=self.training_clock),
                                     clock=self.training_clock)

    def checkpoint_names(self) -> list[str]:
        """The checkpoints this server can load: those over its parameter cap are hidden (see hidden_note)."""
        return [name for name in checkpoints.list_checkpoints(self.weights) if self._too_big(name) is None]

    def hidden_note(self) -> str:
        """A sentence naming the checkpoints hidden by the parameter cap, or "" when none is."""
        hidden = [note for name in checkpoints.list_checkpoints(self.weights) if (note := self._too_big(name))]
        if not hidden:
            return ""
        return (f"Hidden: {'; '.join(hidden)}: over this server's limit of {self.limits.max_parameters:,} parameters "
                "(PLAYGROUND_MAX_PARAMETERS).")

    def _too_big(self, name: str) -> str | None:
        try:
            count = checkpoints.read_config(checkpoints.resolve(name, self.weights)).parameter_count()
        except checkpoints.CheckpointError:
            return None  # a broken config is reported when someone opens it
        return f"{name} ({count:,} parameters)" if count > self.limits.max_parameters else None

    def checkpoint(self, name: str) -> checkpoints.Checkpoint:
        """A local checkpoint (reloaded when its files change) or a Hub repo id ``owner/name`` (downloaded
        once), loaded onto this server's device. The last ``CHECKPOINT_CACHE_SIZE`` stay loaded, keyed by
        their canonical form, so "big" and "big " are one entry; fewer when their weights' bytes together
        (a GPT-2 holds 0.5 GB) and tokenizers pass CHECKPOINT_CACHE_SHARE of the memory budget, the last one loaded
        always kept. What is kept is held from the budget (``MemoryBudget.keep``)."""
        key = loading.source_key(name)  # never a folder path: the API only reads this server's weights folder
        stamp = loading.weights_stamp(key, self.weights)
        with self._lock:
            cached = self._checkpoints.get(key)
            if cached is not None and cached[0] == stamp:
                self._checkpoints.move_to_end(key)
                return cached[1]
        loaded = loading.open_checkpoint(key, directory=self.weights, device=self.device,
                                         max_parameters=self.limits.max_parameters, memory_budget=self.budget,
                                         max_context=self.limits.max_context_size)
        with self._lock:
            self._checkpoints[key] = (stamp, loaded)
            self._checkpoints.move_to_end(key)
            room = CHECKPOINT_CACHE_SHARE * self.budget.total
            while len(self._checkpoints) > CHECKPOINT_CACHE_SIZE or len(self._checkpoints) > 1 and sum(
                    kept_bytes(entry) for _, entry in self._checkpoints.values()) > room:
                self._checkpoints.popitem(last=False)
            # the models kept stay in memory between requests: held from the budget, so requests see what is left
            self.budget.keep("loaded checkpoints", sum(kept_bytes(entry) for _, entry in self._checkpoints.values()))
        return loaded

    def remembered(self, key: tuple, compute):
        """``compute()``'s result, computed once per server for ``key`` and then served from memory (callers pass a
        fixed set of keys, such as a tab's defaults, never a visitor's values, and do not change the result)."""
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        value = compute()
        with self._lock:
            return self._cache.setdefault(key, value)

    def corpus(self) -> Corpus:
        """The default corpus (Tiny Shakespeare, or the built-in one offline), read once."""
        with self._lock:
            if "corpus" not in self._cache:
                self._cache["corpus"] = load_corpus()
            return self._cache["corpus"]

    def corpus_counts(self) -> Counter:
        corpus = self.corpus()
        with self._lock:
            if "corpus_counts" not in self._cache:
                self._cache["corpus_counts"] = Counter(corpus.text)
            return self._cache["corpus_counts"]

    @property
    def fast_lane(self) -> dict:
        """Event options for quick views (tokenize, attention steps, inspect): their own slots, never queued
        behind long jobs; each call takes one of fast_places' places, a share per client (events.share_fast_lane)."""
        return dict(concurrency_id=FAST_LANE, concurrency_limit=FAST_WORKERS)

    @property
    def long_lane(self) -> dict:
        """Event options for long jobs (sampling, comparisons, timing sweeps): their own, fewer slots."""
        return dict(concurrency_id="long", concurrency_limit=self.model_concurrency)

    @property
    def sample_lane(self) -> dict:
        """Event options for sampling: its own workers, as many as the long samples' places and waiters (long_work)
        and as many again for short samples, so a short one never queues behind two long ones."""
        return dict(concurrency_id="sample", concurrency_limit=self.long_work.workers)

    def sweep_temp_space(self, incoming: int = 0, keep=()) -> None:
        """Bring Gradio's temp space (uploads, exports) within limits.max_temp_bytes, ``incoming`` bytes about to be
        written and what uploads in flight reserve included, keeping ``keep`` (the upload a handler reads):
        server/temp_space.py."""
        temp_space.sweep(Path(gr.utils.get_upload_folder()), self.limits.max_temp_bytes, TEMP_MAX_AGE_SECONDS,
                         incoming=incoming + self.uploads.reserved, keep=[Path(path) for path in keep if path])

    def client_of(self, request) -> str:
        """The share a request counts against: tenancy.client_hash of its client's address."""
        host = getattr(getattr(request, "client", None), "host", None)
        return tenancy.client_hash(tenancy.client_address(getattr(request, "headers", None),
                                                          host if isinstance(host, str) else None,
                                                          self.trust_forwarded))

    @property
    def model_concurrency(self) -> int:
        """How many model-running requests share the device at once (the queue holds the rest)."""
        return 4 if self.device.type == "cuda" else 2

    def default_checkpoint_name(self) -> str | None:
        names = self.checkpoint_names()
        return names[0] if names else None


def default_corpus_name(corpus: Corpus) -> str:
    """What the server's default corpus is, in words: "Tiny Shakespeare", or offline "the built-in Sonnets"."""
    return ("Tiny Shakespeare" if corpus.is_tiny_shakespeare else
            "the built-in Sonnets" if corpus.source == "builtin" else corpus.label)


def default_corpus_choice(corpus: Corpus) -> str:
    """A choice's label for the default corpus (the Train tab's corpus, the Tokenize tab's vocabulary), set as the
    page opens: a server without Tiny Shakespeare does not offer "Tiny Shakespeare" while it reads the Sonnets."""
    return "Tiny Shakespeare" if corpus.is_tiny_shakespeare else f"{default_corpus_name(corpus)} (no Tiny Shakespeare)"


def scroll_to_js(elem_id: str) -> str:
    """A JavaScript statement that scrolls the page to where element ``elem_id`` starts in it: for an element that
    sticks to the top of the screen (the Attention tab's stage heading, on a wide screen) its own place in the page,
    not where it sticks, which ``scrollIntoView`` takes for already in view (page/common.js's scrollToStart)."""
    return f"window.playgroundPage.scrollToStart({json.dumps(elem_id)});"


def fold(text: str, what: str = "") -> str:
    """``text`` behind a closed "more" fold (empty text, no fold): a view shows its picture and one line, the rest on
    request."""
    summary = f"{lessons.FOLD}: {what}" if what else lessons.FOLD
    return f"<details><summary>{summary}</summary>\n\n{text}\n\n</details>" if text else ""


# an absolute path on this server, as an exception's message quotes it (never a URL's "//" or "and/or")
ABSOLUTE_PATH = re.compile(r"(?<![\w.:/~])/(?:[^\s'\"`:;,()<>/]+/)*[^\s'\"`:;,()<>/]*")


def hide_paths(text: str) -> str:
    """``text`` with the server's absolute paths shown as a visitor may see them: inside the weights folder as
    ``weights/<run>/...``, anywhere else by the file's name alone.

        "no config.json in /srv/app/weights/my-run" -> "no config.json in weights/my-run"
    """
    weights = checkpoints.weights_dir().resolve()

    def shown(found: re.Match) -> str:
        path = Path(found.group(0))
        try:
            return str(Path("weights") / path.resolve().relative_to(weights))
        except (ValueError, OSError):
            return path.name or found.group(0)

    return ABSOLUTE_PATH.sub(shown, text)


def message_for(exc: BaseException) -> str:
    """An exception's message as a sentence: its first letter capitalised, unless its first word is a name that
    keeps its spelling: a field's as the page shows it (``embedding_dim must be at most 1024``) or one with digits
    (``fp16 is not supported on CPU``). The server's paths are hidden (hide_paths)."""
    text = hide_paths(str(exc).strip()) or exc.__class__.__name__
    if any(character == "_" or character.isdigit() for character in text.split(" ", 1)[0]):
        return text
    return text[0].upper() + text[1:]


# a request the handler declined (its message says why), and work that failed (a disk, torch: the log keeps where)
REFUSALS = (ValueError, TypeError, JobBusyError, NotYourRunError, KeyError)  # TempSpaceError, BusyError too
FAILURES = (OSError, RuntimeError)


def friendly(fn):
    """Run a handler; expected errors become gr.Error with their message, others a short apology.

    The server's log gets one line per refusal and one traceback per failure (never Gradio's second copy: every
    gr.Error here has ``print_exception=False``), so a public Space's log is not a wall of tracebacks for
    visitors' typos.
    """

    def convert(exc: Exception) -> gr.Error:
        if isinstance(exc, gr.Error):
            return exc
        if isinstance(exc, REFUSALS):
            logger.info("handler %s refused: %s", fn.__name__, exc)
            return gr.Error(message_for(exc), print_exception=False)
        if isinstance(exc, FAILURES):
            logger.warning("handler %s failed: %s", fn.__name__, exc, exc_info=exc)
            return gr.Error(message_for(exc), print_exception=False)
        logger.exception("handler %s failed", fn.__name__)
        return gr.Error(f"Something went wrong ({exc.__class__.__name__}); the server logged the details.",
                        print_exception=False)

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator_wrapper(*args, **kwargs):
            try:
                yield from fn(*args, **kwargs)
            except Exception as exc:
                raise convert(exc) from None
        return generator_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise convert(exc) from None
    return wrapper


def keep_on_refusal(event, outputs: list, api_name: str):
    """After ``event`` fails (a refusal: its toast says why), its ``outputs`` keep what they showed, without a badge.

    Gradio marks each output of a failed event with a red "Error" that says nothing; the toast that does fades after
    a few seconds, and the badge stayed over an emptied box. A no-op answer to the same outputs puts them back to
    done. Returns the follow-up event.
    """
    def unchanged():
        return gr.skip() if len(outputs) == 1 else tuple(gr.skip() for _ in outputs)

    return event.failure(unchanged, None, outputs, api_name=api_name, api_visibility="private",
                         show_progress="hidden", concurrency_limit=None)


def checkpoint_dropdown(ctx: AppContext, tab: str, **kwargs) -> gr.Dropdown:
    """A checkpoint picker whose list refreshes on focus, so runs trained since the page loaded appear.

    The refresh sets the choices only: a value sent back with them would undo a name typed while it was on its way.
    """
    names = ctx.checkpoint_names()
    dropdown = gr.Dropdown(names, value=names[0] if names else None, label="Checkpoint", allow_custom_value=True,
                           info="a run in weights/, or type a Hugging Face Hub repo id (owner/name)", **kwargs)
    dropdown.focus(lambda: gr.Dropdown(choices=ctx.checkpoint_names()), None, dropdown,
                   api_name=f"{tab}_checkpoints", api_visibility="private", show_progress="hidden")
    return dropdown


def checkpoint_loaded(ctx: AppContext, checkpoint: gr.Dropdown, tab: str) -> gr.Textbox:
    """The checkpoint a tab's views follow: ``checkpoint``'s name once it has loaded, in a hidden box whose change the
    views listen to instead of the picker's. A name that fails to load (`gpt2` offline) is refused in a toast that
    names no server folder (friendly), and the picker goes back to the name that last loaded: the box keeps it, so
    nothing that follows it runs, and the views on screen stay as they were under their own name (a learner saw the
    old model's charts under "gpt2", and the server's folder in the toast). A tab that follows its picker's change
    keeps that name above another model's views; this is the one place that tells the two apart.
    """
    loaded = gr.Textbox(checkpoint.value, visible=False, label=f"{tab} checkpoint loaded")

    def loads(name: str | None) -> str:
        ctx.checkpoint(name or "")  # held in its cache for the views that follow
        return name or ""

    check = checkpoint.change(friendly(loads), checkpoint, loaded, api_name=f"{tab}_checkpoint_loads",
                              api_visibility="private", show_progress="hidden", trigger_mode="always_last",
                              **ctx.fast_lane)
    check.failure(lambda name: name, loaded, checkpoint, api_name=f"{tab}_checkpoint_back", api_visibility="private",
                  show_progress="hidden", queue=False)
    return loaded


def held_bytes(value) -> int:
    """About the bytes ``value`` holds: its tensors' storages (each once: a view counts the storage it keeps alive),
    numpy arrays, strings and bytes, walked through lists, tuples, sets, dicts and dataclasses' fields, plus 64 bytes
    per object; a model (``torch.nn.Module``) counts nothing here, its checkpoint holds it."""
    total, seen, stack = 0, set(), [value]
    while stack:
        item = stack.pop()
        if id(item) in seen or item is None or isinstance(item, (bool, int, float, torch.nn.Module)):
            continue
        seen.add(id(item))
        total += 64
        if isinstance(item, torch.Tensor):
            storage = item.untyped_storage()
            if ("storage", storage.data_ptr()) not in seen:
                seen.add(("storage", storage.data_ptr()))
                total += storage.nbytes()
        elif isinstance(item, (str, bytes, bytearray)):
            total += len(item)
        elif isinstance(item, np.ndarray):
            total += int(item.nbytes)
        elif isinstance(item, dict):
            stack.extend(_settled(lambda d=item: [part for pair in d.items() for part in pair]))
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(_settled(lambda c=item: list(c)))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack.extend(_settled(lambda d=item: list(vars(d).values())))
    return total


def _settled(read) -> list:
    """``read()`` of a container another thread may be filling (a reading's dict of heads): tried again when it
    changed size under the read."""
    for _ in range(8):
        try:
            return read()
        except RuntimeError:
            continue
    return []


def _weak(model):
    """A weak reference to ``model`` (a plain one where it takes none): a reading never keeps a model loaded."""
    try:
        return weakref.ref(model)
    except TypeError:
        return lambda: model


class RecentReadings:
    """The last ``size`` values a tab read from a loaded model, keyed by what they read and kept only for the model
    object they were read from (a checkpoint reloaded, or dropped from the loaded ones, is read afresh): a click that
    needs what the last click read does not run the model again. Thread-safe; ``compute`` runs outside the lock.

    Given the server's ``budget``, what is kept is held from it as ``what`` (``MemoryBudget.keep``, re-measured with
    ``measure`` once a reading's pieces are filled in), at most ``share`` of its total, and given back, the least
    recently used first, when a request needs the room: the Why tab's readings kept +625 MiB between requests
    outside the budget."""

    def __init__(self, size: int, budget: MemoryBudget | None = None, what: str = "readings kept",
                 share: float = 0.25) -> None:
        self.size = size
        self.budget = budget
        self.what = what
        self.share = share
        self._entries: OrderedDict = OrderedDict()  # key -> (weak reference to the model, value, bytes)
        self._lock = threading.Lock()

    def get(self, key, model, compute):
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0]() is model:
                self._entries.move_to_end(key)
                return hit[1]
        value = compute()
        with self._lock:
            self._entries[key] = (_weak(model), value, held_bytes(value))
            self._entries.move_to_end(key)
            self._settle()
        return value

    @property
    def held(self) -> int:
        """The bytes of what is kept, as last measured."""
        with self._lock:
            return sum(entry[2] for entry in self._entries.values())

    def measure(self) -> int:
        """Measure every kept value again (a reading's dict of heads grows after it is kept), drop those of models no
        longer loaded, and hold the total from the budget; returns it."""
        with self._lock:
            for key, (model, value, _) in list(self._entries.items()):
                self._entries[key] = (model, value, held_bytes(value))
            return self._settle()

    def shrink(self, short: int) -> None:
        """Give back at least ``short`` bytes, the least recently used first (the budget asks when a request needs
        them)."""
        with self._lock:
            freed = 0
            while self._entries and freed < short:
                freed += self._entries.popitem(last=False)[1][2]
            self._settle()

    def _settle(self) -> int:
        """Under the lock: drop what passes the size, the share of the budget or outlived its model; hold the rest."""
        for key in [key for key, entry in self._entries.items() if entry[0]() is None]:
            del self._entries[key]
        room = self.share * self.budget.total if self.budget is not None else float("inf")
        held = sum(entry[2] for entry in self._entries.values())
        while self._entries and (len(self._entries) > self.size or held > room):
            held -= self._entries.popitem(last=False)[1][2]
        if self.budget is not None:
            self.budget.keep(self.what, held, shrink=self.shrink)
        return held
