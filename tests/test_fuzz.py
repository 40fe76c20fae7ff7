"""Fuzz every public api_name through gradio_client and check the server survives it.

Each endpoint gets ``FUZZ_INPUTS`` (60; PLAYGROUND_FUZZ_INPUTS=300 for a deeper run) inputs from a seeded
``random.Random``: a cheap valid call with one or more slots swapped for something hostile (empty, 100k-character,
emoji/CJK/combining/RTL and control-character strings; negative, zero, 1e308, NaN/inf numbers; wrong types; bad
choices; path-traversal names; broken uploads). The slot kinds come from ``view_api``, so a new input on an old
endpoint is fuzzed without a change here, and a new endpoint without an entry in ``BASE_ARGS`` fails
``test_every_endpoint_is_fuzzed``.

Per endpoint it asserts:
  * every refusal reaches the client as ``AppError`` with a readable message: no traceback, not Gradio's
    generic "has not enabled verbose error reporting" text (that means an unhandled exception);
  * the server stays up: a known-good call still works after the batch;
  * nothing is written outside the weights folder and the cache folders (``PLAYGROUND_CACHE_DIR`` and
    ``GRADIO_TEMP_DIR``): an audit hook records every write-open, mkdir, rename and delete the process makes
    during the batch, and the test's tmp tree and the repository are snapshotted before and after.
Bugs the fuzzing found (wrong types in number/upload slots, long bad choices echoed whole, a corpus without a
newline, folder paths as checkpoint names) each have a regression test below.

``pytest -s tests/test_fuzz.py`` prints the counts per endpoint. NaN and infinities travel as strings
("NaN", "inf"): gradio_client's JSON encoder refuses float NaN before anything is sent.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import sys
import threading
import time
from collections import Counter
from concurrent.futures import CancelledError, ThreadPoolExecutor
from pathlib import Path

import pytest
from conftest import local_client
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from playground.config import Limits
from playground.ui import build_app, launch_options

REPO = Path(__file__).resolve().parents[1]
SEED = 20261122
FUZZ_INPUTS = int(os.environ.get("PLAYGROUND_FUZZ_INPUTS", "60"))  # 300 or more for a deeper run
THREADS = 4
GENERIC_ERROR = "has not enabled verbose error reporting"
MAX_MESSAGE_CHARS = 1000
LIMITS = Limits(max_text_chars=2000, max_upload_bytes=20_000, max_parameters=300_000, max_steps=60,
                max_new_tokens=40, max_context_size=64)

PASTED = "the quick brown fox\njumps over the lazy dog.\n" * 12
# The fuzzing server's PLAYGROUND_ADMIN_TOKEN: the valid training calls send it, so a fuzzed input that started a run
# under another owner (a fuzzed token) never locks the base call out of replacing, resuming or stopping it.
ADMIN_TOKEN = "fuzz-admin-token"
RESUMED_RUN = "fuzz-resume"  # a copy of the tiny checkpoint with no owner record: only the admin may resume it
# Cheap, valid arguments per public endpoint; fuzzing swaps some of them for hostile values.
BASE_ARGS: dict[str, list] = {
    "/tokenize": ["Hello world", "loaded checkpoint", "shakespeare-char"],
    "/attention_step": ["random weights", "shakespeare-char", 0, 0, 0, 8, 4, "journey", "To be", True, True, 1.0,
                        False, "6. Softmax weights", None],
    "/attention_export": ["textbook preset", "shakespeare-char", 0, 0, 0, 8, 4, "journey", "To be", True, True, 1.0,
                          False, "2. Q, K, V"],
    "/model_view": ["trained checkpoint", "shakespeare-char", "To be", "4. The block", 0, 0, -1, 0, "pre", "decoder",
                    "gelu", 0.1, 0, False, "your text"],
    "/why": ["shakespeare-char", "To be, or not", -1, "", "the head that pushed most", ["L0 H1"], "mean over the text",
             "the guess against the runner-up", 1],
    "/compare": [8, 2, 4, 1, 0, False, "fp32", "cpu"],
    "/compare_timing": [8, 2, 1, "fp32", "cpu", 16],
    "/compare_source": ["batched"],
    "/train_preset": ["tiny"],
    "/train_start": [1, 1, 8, 8, 2, 3, 3e-3, 0, 0.0, 0, "cpu", "pasted text", None, PASTED, "fuzz-run", True,
                     ADMIN_TOKEN, None, "adamw", 0, "cosine", "gpt", "gpt", 0],
    "/train_resume": [2, 2, 32, 32, 2, 45, 3e-3, 0, 0.0, 0, "cpu", "pasted text", None, PASTED, RESUMED_RUN, False,
                      ADMIN_TOKEN, None, "adamw", 0, "cosine", "gpt", "gpt", 0],
    "/train_stop": [ADMIN_TOKEN, None],
    "/train_status": [0, 0, 0, "", None],
    "/checkpoint_info": ["shakespeare-char"],
    "/sample": ["shakespeare-char", "ROMEO:", 8, 0.8, 0, 1.0, 7, False, True, False],
}
TRAINING = {"/train_start", "/train_resume"}
# How many slots an input mutates, drawn uniformly; costly endpoints mutate more, so fewer inputs are valid.
MUTATIONS = {"/compare_timing": (1, 2, 3, 4), "/train_start": (1, 2, 3), "/train_resume": (1, 2, 3)}

# ---------------------------------------------------------------------------------------------- the pools
HUGE_MIXED = ("Ab😀中\u0301\u202e\x00 " * 12_500)[:100_000]
TEXTS = [
    "", " ", "\n", HUGE_MIXED, "a" * 100_000, "x" * 2001, "😀🤖👍🏽", "中文字符测试", "e\u0301\u0302\u0303",
    "\u202eevil\u202c", "مرحبا بالعالم", "שלום", "\x00", "\x00abc\x00", "\x1b[31mred\x1b[0m", "\r\n\r", "\t\v\f",
    "\ufeffBOM", "\u200b\u200d", "To be, or not to be", "ROMEO:\n", "A", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\U0010ffff",
    "<script>alert(1)</script>", "{{7*7}}", "%s%n%x", "' OR 1=1 --", "é" * 1000, "\\", "\"quoted\"",
]
NUMBERS = [0, -1, 1, 2, 3, -0.0, 0.5, 1.5, -7, 1e308, -1e308, 1e-308, 2**31, 2**63, -(2**63), 2**64, 10**30,
           "NaN", "nan", "inf", "-inf", "Infinity", "1e309", "3", "0x10"]
WRONG_TYPES = [None, True, False, [], [1, 2], {}, {"a": 1}, "abc", "", "[1]"]
TRAVERSAL = [
    "../../etc/passwd", "..", ".", "/abs", "/etc", "/", "a/b", "%2e%2e", "%2e%2e%2fetc%2fpasswd", "..\\..\\windows",
    "~root", "~", ".hidden", "x\x00", "\u2024\u2024", "．．", "..%00", "a" * 65, "shakespeare-char/../../x",
    "shakespeare-char/", "owner/repo", "C:\\Windows", "\\\\server\\share", "file:///etc/passwd", "-rf", " ",
]
BAD_CHOICES = ["bogus", "", " ", "LOADED CHECKPOINT", 0, -1, ["x"], {"x": 1}, None, True, "fp64", "tpu"]
BOOLS = [True, False, None, 0, 1, "yes", "", [], {}]


def _is_number(value) -> bool:
    return isinstance(value, (int, float))


class Slot:
    """One input of an endpoint, as view_api describes it."""

    def __init__(self, parameter: dict):
        self.component = parameter["component"]
        self.choices = list(parameter["type"].get("enum") or []) if isinstance(parameter["type"], dict) else []
        self.label = parameter["label"]

    def pool(self, files: list) -> list:
        if self.component in ("Number", "Slider"):
            return NUMBERS + WRONG_TYPES
        if self.component == "Checkbox":
            return BOOLS + WRONG_TYPES
        if self.component in ("Radio", "Dropdown"):
            return self.choices * 3 + BAD_CHOICES + TRAVERSAL + TEXTS[:8]
        if self.component == "File":
            return files
        return TEXTS + TRAVERSAL + WRONG_TYPES  # Textbox and anything new


def generate_inputs(api: str, slots: list[Slot], files: list, count: int) -> list[list]:
    """``count`` argument lists for ``api``: the base call with 1..n slots replaced, seeded by the name."""
    rng = random.Random(f"{SEED}:{api}")
    base = BASE_ARGS[api]
    inputs = []
    for _ in range(count):
        args = list(base)
        if slots:
            how_many = min(len(slots), rng.choice(MUTATIONS.get(api, (1, 1, 2, 3, len(slots)))))
            for index in rng.sample(range(len(slots)), how_many):
                args[index] = rng.choice(slots[index].pool(files))
        inputs.append(args)
    return inputs


def upload_pool(folder: Path) -> list:
    """Upload-slot values: good, binary, empty, non-UTF-8, NUL-laden and oversized files, and wrong types."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "ok.txt": ("to be or not to be, that is the question. " * 20).encode(),
        "binary.txt": bytes(range(256)) * 8,
        "empty.txt": b"",
        "latin1.txt": ("café crème brûlée " * 30).encode("latin-1"),
        "nul.txt": b"text\x00" * 200,
        "big.txt": b"a" * (LIMITS.max_upload_bytes + 10),
        "emoji.txt": ("😀 hello 中文 " * 50).encode(),
        "script.exe": b"MZ" + bytes(100),
    }
    for name, data in files.items():
        (folder / name).write_bytes(data)
    good = [handle_file(str(folder / name)) for name in files]
    return [None, *good, *good[:1] * 3, "/etc/passwd", "x.txt", 5, True, ["x"], {}, {"nope": 1},
            {"path": "/etc/hostname"}]


# ---------------------------------------------------------------------------------------- the write guard
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# event -> (indexes of its path arguments, index of its dir_fd argument or None)
_PATH_EVENTS = {"os.mkdir": ((0,), 2), "os.rename": ((0, 1), 2), "os.remove": ((0,), 1), "os.rmdir": ((0,), 1),
                "shutil.rmtree": ((0,), 1), "os.truncate": ((0,), None), "os.symlink": ((0, 1), 2),
                "os.link": ((0, 1), 2), "os.chmod": ((0,), 2), "os.chown": ((0,), 3), "shutil.copyfile": ((1,), None),
                "shutil.move": ((0, 1), None), "tempfile.mkdtemp": ((0,), None), "tempfile.mkstemp": ((0,), None),
                "os.utime": ((0,), 3)}


def _full_path(path, dir_fd) -> str | None:
    if isinstance(path, int) or not isinstance(path, (str, bytes, os.PathLike)):
        return None
    path = os.fsdecode(path)
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(path):  # shutil.rmtree works through fds
        try:
            return os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), path)
        except OSError:
            return f"<fd {dir_fd}>/{path}"
    return path


class WriteLog:
    """Records every path this process writes, renames or deletes while ``recording`` (an audit hook)."""

    _installed: WriteLog | None = None

    def __init__(self):
        self.recording = False
        self.paths: list[tuple[str, str]] = []

    @classmethod
    def install(cls) -> WriteLog:
        if cls._installed is None:  # audit hooks cannot be removed: one per session, idle unless recording
            cls._installed = cls()
            sys.addaudithook(cls._installed._hook)
        return cls._installed

    def _hook(self, event: str, args: tuple) -> None:
        if not self.recording:
            return
        if event == "open":
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & _WRITE_FLAGS)
            full = _full_path(path, None)
            if writes and full is not None:
                self.paths.append((event, os.path.abspath(full)))
        elif event in _PATH_EVENTS:
            indexes, fd_index = _PATH_EVENTS[event]
            dir_fd = args[fd_index] if fd_index is not None and fd_index < len(args) else None
            for index in indexes:
                full = _full_path(args[index], dir_fd) if index < len(args) else None
                if full is not None:
                    self.paths.append((event, os.path.abspath(full)))

    def outside(self, allowed: list[Path]) -> list[tuple[str, str]]:
        roots = [os.path.realpath(root) for root in allowed]
        bad = []
        for event, path in self.paths:
            real = os.path.realpath(path)
            if any(real == root or real.startswith(root + os.sep) for root in roots):
                continue
            if "__pycache__" in Path(real).parts or real == os.devnull:
                continue
            bad.append((event, path))
        return sorted(set(bad))


def tree(root: Path, skip_dirs: set[str] = frozenset(), skip_paths: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """{relative path: (size, mtime_ns)} for every file and folder under ``root``, skipping some."""
    skipped = {os.path.realpath(p) for p in skip_paths}
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in skip_dirs and os.path.realpath(os.path.join(folder, d)) not in skipped]
        for name in dirs + files:
            path = os.path.join(folder, name)
            try:
                stat = os.lstat(path)
            except FileNotFoundError:
                continue
            is_dir = os.path.isdir(path) and not os.path.islink(path)  # a folder's mtime moves with its children
            found[os.path.relpath(path, root)] = ("folder",) if is_dir else (stat.st_size, stat.st_mtime_ns)
    return found


REPO_SKIP_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", "test-artifacts", "weights",
                  "node_modules"}


def repo_tree() -> dict[str, tuple]:
    """The repository's files, minus what other people's concurrent work touches (VCS, caches, the repo's
    weights/ that a CLI training run may be writing, source and docs); the audit hook covers those paths."""
    return {path: stat for path, stat in tree(REPO, REPO_SKIP_DIRS).items()
            if not path.endswith((".py", ".md"))}


# ------------------------------------------------------------------------------------------- the server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, app, client: Client, weights: Path, gradio_tmp: Path, root: Path, files: list, source: Path):
        self.app, self.client, self.weights, self.gradio_tmp, self.root, self.files = \
            app, client, weights, gradio_tmp, root, files
        self.source = source  # the tiny checkpoints, to put shakespeare-char back at 30 steps
        self.slots = {
            name: [Slot(p) for p in endpoint["parameters"]]
            for name, endpoint in client.view_api(print_info=False, return_format="dict")["named_endpoints"].items()
        }

    def reset_checkpoint(self) -> None:
        """Put the resumed run back as the fixture made shakespeare-char (30 steps), so /train_resume has steps to do
        (shakespeare-char itself is shipped: read-only)."""
        self.stop_training()
        target = self.weights / RESUMED_RUN
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(self.source / "shakespeare-char", target, copy_function=shutil.copyfile)

    @property
    def jobs(self):
        return self.app.playground_context.jobs

    def stop_training(self) -> None:
        if self.jobs.status().active:
            self.jobs.stop()
            self.jobs.wait(120)
        assert not self.jobs.status().active, "a fuzzed training run did not stop within 120 s"


@pytest.fixture(scope="module")
def served(tiny_weights, tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    weights = root / "weights"
    shutil.copytree(tiny_weights, weights, ignore=shutil.ignore_patterns(".*"))
    gradio_tmp = root / "gradio-tmp"
    previous = os.environ.get("GRADIO_TEMP_DIR")
    os.environ["GRADIO_TEMP_DIR"] = str(gradio_tmp)  # Gradio's uploads and served files: counted as cache
    files = upload_pool(root / "uploads")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLAYGROUND_ADMIN_TOKEN", ADMIN_TOKEN)  # read once, when build_app makes the app's context
        app = build_app(weights=weights, limits=LIMITS)
    app.launch(server_name="127.0.0.1", server_port=_free_port(), prevent_thread_lock=True, quiet=True,
               **launch_options(LIMITS))
    client = local_client(app.local_url, download_files=False)
    served = Served(app, client, weights, gradio_tmp, root, files, tiny_weights)
    yield served
    served.stop_training()
    app.close()
    if previous is None:
        os.environ.pop("GRADIO_TEMP_DIR", None)
    else:
        os.environ["GRADIO_TEMP_DIR"] = previous


# ------------------------------------------------------------------------------------------ one batch
class Tally:
    def __init__(self, api: str):
        self.api = api
        self.counts = Counter()
        self.failures: list[str] = []
        self.messages: Counter = Counter()
        self.lock = threading.Lock()

    def add(self, kind: str, args: list, detail: str = "") -> None:
        with self.lock:
            self.counts[kind] += 1
            if kind == "refused":
                self.messages[detail[:70]] += 1
            if kind == "FAILED":
                self.failures.append(f"{_short(args)} -> {detail[:400]}")

    def line(self) -> str:
        return (f"{self.api:18s} tried {sum(self.counts.values()):4d} · accepted {self.counts['accepted']:4d} · "
                f"refused with a message {self.counts['refused']:4d} · failed {self.counts['FAILED']}")


def _short(args: list) -> str:
    return repr([a[:40] + f"...({len(a)} chars)" if isinstance(a, str) and len(a) > 40 else a for a in args])


def readable(message: str) -> bool:
    """A refusal a person can read: not empty, no traceback, not Gradio's generic text, not a wall of text (Gradio's
    own checks of choices quoted a value however long; playground/ui/inputs.py cuts it short like every refusal)."""
    return bool(message.strip()) and GENERIC_ERROR not in message and "Traceback" not in message \
        and 'File "' not in message and len(message) <= MAX_MESSAGE_CHARS


def _predict(served: Served, api: str, args: list):
    """One call; a CancelledError is retried once. It is gradio_client 2.7's, not the server's answer: a race
    between a call and the closing of the event stream it shares with the calls before it (stream_sse_v1plus
    gets None), about 1 call in 4,000 here, with one Client per thread as well as with one shared Client."""
    try:
        return served.client.predict(*args, api_name=api)
    except CancelledError:
        return served.client.predict(*args, api_name=api)


def call_once(served: Served, api: str, args: list, tally: Tally) -> None:
    try:
        result = _predict(served, api, args)
    except AppError as exc:
        message = str(exc)
        if readable(message):
            tally.add("refused", args, message)
        else:
            tally.add("FAILED", args, f"unreadable error: {message[:300]!r}")
        return
    except ValueError as exc:
        if "exceeds the maximum file size" in str(exc):  # gradio_client checks max_file_size before uploading
            tally.add("refused", args, f"(by the client) {exc}")
        else:
            tally.add("FAILED", args, f"{type(exc).__name__}: {exc}")
        return
    except Exception as exc:  # anything but AppError means the request itself broke
        tally.add("FAILED", args, f"{type(exc).__name__}: {exc}")
        return
    text = repr(result)
    if "Traceback (most recent call last)" in text:
        tally.add("FAILED", args, "a traceback in the output")
    else:
        tally.add("accepted", args)


def run_batch(served: Served, api: str, inputs: list[list]) -> Tally:
    tally = Tally(api)
    if api in TRAINING:
        for args in inputs:  # one at a time: a run that starts is stopped before the next input
            call_once(served, api, args, tally)
            served.stop_training()
    else:
        with ThreadPoolExecutor(THREADS) as pool:
            list(pool.map(lambda args: call_once(served, api, args, tally), inputs))
    return tally


def fuzz_train_stop(served: Served, count: int) -> Tally:
    """/train_stop takes no input; fuzz the state it is called in: idle, mid-run, stopping, twice in a row."""
    rng = random.Random(f"{SEED}:/train_stop")
    tally = Tally("/train_stop")
    start = BASE_ARGS["/train_start"]
    for _ in range(count):
        roll = rng.random()
        if roll < 0.05:
            served.client.predict(*start[:5], rng.choice([3, 20, 60]), *start[6:], api_name="/train_start")
        call_once(served, "/train_stop", BASE_ARGS["/train_stop"], tally)
        if roll < 0.1:
            call_once(served, "/train_stop", BASE_ARGS["/train_stop"], tally)
        if roll < 0.05:
            served.jobs.wait(120)
    served.stop_training()
    return tally


SUMMARY: dict[str, str] = {}


@pytest.fixture(scope="module", autouse=True)
def _print_summary():
    yield
    if SUMMARY:
        print(f"\nfuzz summary (endpoint (generated inputs), seed {SEED}):")
        for api in sorted(SUMMARY):
            print("  " + SUMMARY[api])


# -------------------------------------------------------------------------------------------- the tests
def test_every_endpoint_is_fuzzed(served):
    named = set(served.slots)
    assert named == set(BASE_ARGS), (f"endpoints without fuzz coverage: {sorted(named - set(BASE_ARGS))}; "
                                     f"stale entries: {sorted(set(BASE_ARGS) - named)}")
    for api, slots in served.slots.items():
        assert len(BASE_ARGS[api]) == len(slots), f"{api} takes {len(slots)} inputs now; update BASE_ARGS"


def fuzz_and_check(served: Served, api: str, count: int) -> None:
    """Fuzz ``api`` with ``count`` inputs, print the counts, and assert everything the module docstring lists."""
    if api not in served.slots:
        pytest.fail(f"{api} is no longer a public endpoint; drop it from BASE_ARGS")
    if api == "/train_resume":
        served.reset_checkpoint()
    cache = Path(os.environ["PLAYGROUND_CACHE_DIR"])
    allowed = [served.weights, cache, served.gradio_tmp]
    basetemp = served.root.parent
    before_tmp = tree(basetemp, skip_paths=(served.weights, cache, served.gradio_tmp))
    before_repo = repo_tree()
    log = WriteLog.install()
    log.paths.clear()
    started = time.perf_counter()
    log.recording = True
    try:
        if api == "/train_stop":
            tally = fuzz_train_stop(served, count)
        else:
            tally = run_batch(served, api, generate_inputs(api, served.slots[api], served.files, count))
    finally:
        log.recording = False
        served.stop_training()
    seconds = time.perf_counter() - started
    SUMMARY[f"{api} ({count})"] = f"{tally.line()} · {seconds:.0f}s"
    print(f"\n{tally.line()} · {seconds:.1f}s")
    for message, times in tally.messages.most_common(3):
        print(f"    {times:4d} × {message}")

    assert not tally.failures, f"{len(tally.failures)} bad answers from {api}, e.g.:\n" + "\n".join(tally.failures[:8])
    assert sum(tally.counts.values()) >= count
    # the server is still up and still right
    _, ids, decoded, _, _ = served.client.predict("Hello", "this text", None, api_name="/tokenize")
    assert decoded == "Hello" and ids == "[0, 1, 2, 2, 3]"
    if api == "/train_resume":
        served.reset_checkpoint()
    if api != "/train_stop":
        served.client.predict(*BASE_ARGS[api], api_name=api)
        served.stop_training()
    # nothing written outside the weights and cache folders
    assert not log.outside(allowed), f"{api} wrote outside weights/ and the caches: {log.outside(allowed)[:10]}"
    after_tmp = tree(basetemp, skip_paths=(served.weights, cache, served.gradio_tmp))
    changed_tmp = sorted(p for p in set(before_tmp) | set(after_tmp) if before_tmp.get(p) != after_tmp.get(p))
    assert not changed_tmp, f"{api} changed files in the test's tmp tree outside the allowed folders: {changed_tmp}"
    new_in_repo = sorted(set(repo_tree()) - set(before_repo))
    assert not new_in_repo, f"{api} created files in the repository: {new_in_repo}"


def test_the_write_guard_sees_writes_renames_and_deletes(tmp_path):
    allowed, elsewhere = tmp_path / "allowed", tmp_path / "elsewhere"
    allowed.mkdir()
    log = WriteLog.install()
    log.paths.clear()
    log.recording = True
    try:
        (allowed / "fine.txt").write_text("ok")
        elsewhere.mkdir()
        (elsewhere / "a.txt").write_text("not ok")
        os.rename(elsewhere / "a.txt", elsewhere / "b.txt")
        shutil.rmtree(elsewhere)  # deletes through directory fds: resolved via /proc/self/fd
    finally:
        log.recording = False
    flagged = {path for _, path in log.outside([allowed])}
    assert str(allowed / "fine.txt") not in flagged
    assert {str(elsewhere), str(elsewhere / "a.txt"), str(elsewhere / "b.txt")} <= flagged


@pytest.mark.parametrize("api", sorted(BASE_ARGS))
def test_fuzz_endpoint_quick(served, api):
    """A 20-input smoke run of every endpoint, for runs that deselect the slow ones."""
    fuzz_and_check(served, api, 20)


@pytest.mark.slow
@pytest.mark.parametrize("api", sorted(BASE_ARGS))
def test_fuzz_endpoint(served, api):
    """The full run: FUZZ_INPUTS (60 unless PLAYGROUND_FUZZ_INPUTS says more) generated inputs per endpoint."""
    fuzz_and_check(served, api, FUZZ_INPUTS)


# ------------------------------------------------------------- regression tests for bugs the fuzzing found
NUMBER_SLOTS = [
    ("/attention_step", 4, "abc"), ("/attention_step", 11, None), ("/compare", 0, [64]),
    ("/compare_timing", 5, "NaN"), ("/train_start", 0, "two"), ("/train_status", 2, None),
    ("/sample", 2, {"n": 5}),
]


@pytest.mark.parametrize("api,index,value", NUMBER_SLOTS)
def test_wrong_type_in_a_number_field_gets_a_readable_message(served, api, index, value):
    args = list(BASE_ARGS[api])
    args[index] = value
    with pytest.raises(AppError) as caught:
        served.client.predict(*args, api_name=api)
    served.stop_training()
    assert readable(str(caught.value)), str(caught.value)


@pytest.mark.parametrize("value", ["/etc/passwd", 5, {"nope": 1}])
def test_wrong_type_in_the_upload_gets_a_readable_message(served, value):
    args = list(BASE_ARGS["/train_start"])
    args[11], args[12] = "uploaded .txt", value
    with pytest.raises(AppError) as caught:
        served.client.predict(*args, api_name="/train_start")
    served.stop_training()
    assert readable(str(caught.value)), str(caught.value)


@pytest.mark.parametrize("api,index", [("/compare_source", 0), ("/tokenize", 1), ("/train_preset", 0)])
def test_a_long_bad_choice_gets_a_short_message(served, api, index):
    args = list(BASE_ARGS[api])
    args[index] = "x" * 100_000
    with pytest.raises(AppError) as caught:
        served.client.predict(*args, api_name=api)
    assert readable(str(caught.value)), f"{len(str(caught.value)):,} characters"


def test_a_run_on_text_without_a_newline_finishes(served):
    args = list(BASE_ARGS["/train_start"])
    args[5], args[13], args[14] = 4, "no newline in this corpus at all. " * 20, "one-line"
    served.client.predict(*args, api_name="/train_start")
    status = served.jobs.wait(120)
    assert status.state == "finished", status.message
