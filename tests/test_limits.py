"""Safe loading and server limits: traversal names, uploads, PLAYGROUND_MAX_* caps, pickles.

  * Run and checkpoint names that try to leave weights/ are refused with a message by the core
    (``validate_name``), by the handlers and through the API, and nothing is created anywhere.
  * Uploads are capped (PLAYGROUND_MAX_UPLOAD_BYTES; Gradio's max_file_size as app.py sets it) and must be
    UTF-8 text: binary and Latin-1 files get a message.
  * The caps on model size, steps, context, new tokens and text length come from the environment and hold
    on the server: through the API (values past a component's maximum) and in the handlers themselves (no
    Gradio in between, as a client that skips the UI's checks would be).
  * A pickle (``torch.save`` output, or a hostile raw pickle) saved as ``model.safetensors`` is refused and
    never unpickled: ``pickle`` and ``torch.load`` are patched to record any call.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import socket
from pathlib import Path

import httpx
import pytest
import torch
from conftest import local_client
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from playground.checkpoints import store as checkpoints
from playground.config import ConfigError, Limits
from playground.server import tenancy
from playground.ui import build_app, launch_options
from playground.ui.common import AppContext
from playground.ui.sample_tab import sample
from playground.ui.tokenize_tab import tokenize
from playground.ui.train_tab import start_run

GENERIC_ERROR = "has not enabled verbose error reporting"
ENV_LIMITS = {"PLAYGROUND_MAX_TEXT_CHARS": "100", "PLAYGROUND_MAX_UPLOAD_BYTES": "3000",
              "PLAYGROUND_MAX_PARAMETERS": "60000", "PLAYGROUND_MAX_STEPS": "40", "PLAYGROUND_MAX_NEW_TOKENS": "12",
              "PLAYGROUND_MAX_CONTEXT_SIZE": "32", "PLAYGROUND_MAX_MODEL_UPLOAD_BYTES": "4000"}

TRAVERSAL_NAMES = [
    "../x", "..\\x", "/etc", "/etc/passwd", "a/../b", "~root", "~", "x\x00", "%2e%2e", "%2e%2e%2fx", "..%2fx",
    "\u2024\u2024", "\u2025x", "．．／x", "..", ".", ".hidden", ".tmp-x", ".old-shakespeare-char-1234abcd", "a" * 65,
    "a/b", "a\\b", "x/", "/", "", " ", "\t", "x\n\n\x00", "x y", "-rf", "C:\\x", "\\\\server\\share", "$HOME", "`id`",
    "x;rm -rf .", "a\nb", "ü", "😀", "shakespeare-char/../../x", "file:///etc/passwd", "\u202eevil",
]
assert len(TRAVERSAL_NAMES) >= 20


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_checkpoint(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for file in source.iterdir():
        shutil.copy2(file, target / file.name)
    return target


def _files_under(root: Path, skip: tuple[Path, ...] = ()) -> set[str]:
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if Path(folder, d) not in skip]
        found.update(os.path.relpath(os.path.join(folder, name), root) for name in dirs + files)
    return found


def _readable(message: str) -> bool:
    return bool(message.strip()) and GENERIC_ERROR not in message and "Traceback" not in message


class Served:
    def __init__(self, app, client: Client, root: Path, weights: Path, gradio_tmp: Path):
        self.app, self.client, self.root, self.weights, self.gradio_tmp = app, client, root, weights, gradio_tmp

    def refused(self, api: str, *args) -> str:
        """Call ``api``; it must refuse with a readable AppError, whose message is returned."""
        with pytest.raises(AppError) as caught:
            self.client.predict(*args, api_name=api)
        message = str(caught.value)
        assert _readable(message), f"{api}{args!r:.200} -> unreadable: {message[:300]}"
        return message

    def all_refused(self, *calls) -> list[str]:
        """``refused`` for each ``(api, *args)``, submitted together as several visitors' calls would come: each call
        must refuse with a readable AppError; the messages come back in the order of ``calls``. (One after another,
        each call waited out gradio_client's 50 ms polls in turn.)"""
        jobs = [(api, args, self.client.submit(*args, api_name=api)) for api, *args in calls]
        messages = []
        for api, args, job in jobs:
            with pytest.raises(AppError) as caught:
                job.result(timeout=120)
            message = str(caught.value)
            assert _readable(message), f"{api}{args!r:.200} -> unreadable: {message[:300]}"
            messages.append(message)
        return messages

    def stop_training(self):
        jobs = self.app.playground_context.jobs
        jobs.stop()
        jobs.wait(60)


@pytest.fixture(scope="module")
def served(tiny_weights, tmp_path_factory):
    """The app built with PLAYGROUND_MAX_* set in the environment and launched as app.py launches it."""
    root = tmp_path_factory.mktemp("limits")
    weights = root / "weights"
    _copy_checkpoint(tiny_weights / "shakespeare-char", weights / "shakespeare-char")
    gradio_tmp = root / "gradio-tmp"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in ENV_LIMITS.items():
            patch.setenv(name, value)
        patch.setenv("GRADIO_TEMP_DIR", str(gradio_tmp))
        patch.setenv("HF_HOME", str(root / "hf-cache"))
        app = build_app(weights=weights)
        app.launch(server_name="127.0.0.1", server_port=_free_port(), prevent_thread_lock=True, quiet=True,
                   **launch_options())
        client = local_client(app.local_url, download_files=False)
        served = Served(app, client, root, weights, gradio_tmp)
        yield served
        served.stop_training()
        app.close()


@pytest.fixture
def limited_context(tiny_weights, tmp_path, monkeypatch):
    """Handlers called directly, with the limits read from the environment: no Gradio checks in between."""
    for name, value in ENV_LIMITS.items():
        monkeypatch.setenv(name, value)
    weights = tmp_path / "weights"
    _copy_checkpoint(tiny_weights / "shakespeare-char", weights / "shakespeare-char")
    context = AppContext(limits=Limits.from_env(), weights=weights)
    yield context
    context.jobs.stop()
    context.jobs.wait(60)


TRAIN = dict(layers_num=1, heads_num=1, embedding_dim=8, context_size=8, batch_size=2, steps=3, learning_rate=3e-3,
             warmup_steps=0, dropout_rate=0.0, seed=0, device="cpu", corpus_choice="pasted text", upload=None,
             pasted="to be or not to be\n" * 20, run_name="limits-run")


def _train_args(**changes) -> dict:
    """The Train form's fields as start_run takes them, ``changes`` applied (``corpus`` is the corpus choice)."""
    if "corpus" in changes:
        changes["corpus_choice"] = changes.pop("corpus")
    return {**TRAIN, **changes}


def _train_values(**changes) -> list:
    """The same, in the order the /train_start endpoint takes them."""
    return list(_train_args(**changes).values())


# ------------------------------------------------------------------------------------------- names
@pytest.mark.parametrize("name", TRAVERSAL_NAMES)
def test_validate_name_refuses_names_that_leave_the_folder(name, tmp_path):
    before = _files_under(tmp_path)
    with pytest.raises(checkpoints.CheckpointError) as caught:
        checkpoints.validate_name(name)
    assert str(caught.value).strip()
    with pytest.raises(checkpoints.CheckpointError):
        checkpoints.resolve(name, tmp_path)
    assert _files_under(tmp_path) == before


def test_traversal_names_are_refused_by_the_handlers(limited_context):
    ctx = limited_context
    before = _files_under(ctx.weights.parent)
    for name in TRAVERSAL_NAMES:
        with pytest.raises(ValueError) as caught:  # CheckpointError, HubError and ConfigError are ValueErrors
            ctx.checkpoint(name)
        assert str(caught.value).strip(), name
        with pytest.raises(ValueError) as caught:
            start_run(ctx, **_train_args(run_name=name))
        assert str(caught.value).strip(), name
        assert not ctx.jobs.status().active
    assert _files_under(ctx.weights.parent) == before


def test_traversal_names_are_refused_through_the_api(served):
    before_weights = _files_under(served.weights)
    before_root = _files_under(served.root, skip=(served.gradio_tmp, served.weights))
    messages = []
    for name in TRAVERSAL_NAMES:  # each name's six calls at once (16 may wait per client)
        info, run_message, *_ = served.all_refused(
            ("/checkpoint_info", name),
            ("/train_start", *_train_values(run_name=name)),
            ("/train_resume", *_train_values(run_name=name, steps=40)),
            ("/sample", name, "ROMEO:", 5, 0.8, 0, 1.0, 7, False, True, False),
            ("/attention_step", "trained checkpoint", name, 0, 0, 0, 16, 8, "journey", "To be", True, True, 1.0,
             False, "1. Input X", None),
            *([("/tokenize", "hello", "loaded checkpoint", name)] if name else []),  # empty: the default checkpoint
        )
        messages.append(info)
        assert any(words in run_message for words in ("not allowed", "limit is 64", "is empty")), run_message
        assert not served.app.playground_context.jobs.status().active
    assert _files_under(served.weights) == before_weights, "a refused name created something in weights/"
    assert _files_under(served.root, skip=(served.gradio_tmp, served.weights)) == before_root
    expected = ("not allowed", "limit is 64", "Hub", "Pick a checkpoint", "name is empty")
    assert all(any(words in m for words in expected) for m in messages), messages


@pytest.mark.parametrize("form", ["absolute", "relative"])
def test_a_checkpoint_outside_the_weights_folder_is_refused(served, tiny_weights, form):
    outside = served.root / "outside" / "stolen"
    if not outside.exists():
        _copy_checkpoint(tiny_weights / "shakespeare-char", outside)
    path = str(outside) if form == "absolute" else os.path.relpath(outside, Path.cwd())
    assert ".." in path or form == "absolute"
    served.refused("/checkpoint_info", path)


# ----------------------------------------------------------------------------------------- uploads
@pytest.fixture(scope="module")
def uploads(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("uploads")
    contents = {
        "ok.txt": ("to be or not to be,\nthat is the question.\n" * 30).encode(),
        "big.txt": b"a" * 3500,  # under Gradio's cap of 4,000, over the corpus cap
        "binary.txt": bytes(range(256)) * 4,
        "latin1.txt": ("café crème brûlée, déjà vu. " * 30).encode("latin-1"),
        "empty.txt": b"",
    }
    for name, data in contents.items():
        (folder / name).write_bytes(data)
    return {name: folder / name for name in contents}


@pytest.mark.parametrize("file,message", [
    ("big.txt", "'big.txt' is 3,500 bytes; the limit is 3,000 bytes"), ("binary.txt", "looks binary"),
    ("latin1.txt", "is not UTF-8 text"), ("empty.txt", "is empty"),
])
def test_uploads_are_capped_and_must_be_utf8_in_the_handler(limited_context, uploads, file, message):
    with pytest.raises(ValueError, match=message):
        start_run(limited_context, **_train_args(corpus="uploaded .txt", upload=str(uploads[file])))
    assert not limited_context.jobs.status().active


@pytest.mark.parametrize("file,message", [("binary.txt", "looks binary"), ("latin1.txt", "not UTF-8 text"),
                                          ("empty.txt", "is empty")])
def test_bad_uploads_get_a_message_through_the_api(served, uploads, file, message):
    text = served.refused("/train_start",
                          *_train_values(corpus="uploaded .txt", upload=handle_file(str(uploads[file]))))
    assert message in text


def test_an_upload_over_the_cap_is_refused_by_the_server(served, uploads, tmp_path):
    # Gradio's one file cap is the larger of the corpus and model caps (4,000 bytes here): gradio_client reads it
    # from the app and refuses a bigger file before sending ...
    huge = tmp_path / "huge.txt"
    huge.write_bytes(b"a" * 4001)
    with pytest.raises(ValueError, match="exceeds the maximum file size"):
        served.client.predict(*_train_values(corpus="uploaded .txt", upload=handle_file(str(huge))),
                              api_name="/train_start")
    # ... a client that sends it anyway is refused by the server's upload route ...
    before = _files_under(served.gradio_tmp) if served.gradio_tmp.exists() else set()
    with open(huge, "rb") as handle:
        answer = httpx.post(f"{served.app.local_url.rstrip('/')}/gradio_api/upload",
                            files={"files": ("huge.txt", handle, "text/plain")}, timeout=30)
    assert answer.status_code == 413, (answer.status_code, answer.text[:300])
    after = _files_under(served.gradio_tmp) if served.gradio_tmp.exists() else set()
    assert not {p for p in after - before if p.endswith("huge.txt")}
    # ... and a corpus under that but over the corpus cap (3,000 bytes) is refused by the handler, with its size
    with pytest.raises(AppError, match="'big.txt' is 3,500 bytes; the limit is 3,000 bytes"):
        served.client.predict(*_train_values(corpus="uploaded .txt", upload=handle_file(str(uploads["big.txt"]))),
                              api_name="/train_start")
    # a file under the cap goes through and trains
    served.client.predict(*_train_values(corpus="uploaded .txt", upload=handle_file(str(uploads["ok.txt"])),
                                       run_name="upload-ok"), api_name="/train_start")
    status = served.app.playground_context.jobs.wait(120)
    assert status.state == "finished", status.message
    assert (served.weights / "upload-ok" / "model.safetensors").is_file()


# ------------------------------------------------------------------------------------ limits from env
def test_limits_come_from_the_environment(monkeypatch):
    for name, value in ENV_LIMITS.items():
        monkeypatch.setenv(name, value)
    assert Limits.from_env() == Limits(max_text_chars=100, max_upload_bytes=3000, max_parameters=60000,
                                       max_steps=40, max_new_tokens=12, max_context_size=32,
                                       max_model_upload_bytes=4000)
    for bad in ("abc", "-5", "0", "1e3"):
        monkeypatch.setenv("PLAYGROUND_MAX_STEPS", bad)
        with pytest.raises(ConfigError, match="PLAYGROUND_MAX_STEPS"):
            Limits.from_env()


@pytest.mark.parametrize("api,args,message", [
    ("/train_start", _train_values(steps=41), "40"),
    ("/train_start", _train_values(steps=10**9), "40"),
    ("/train_start", _train_values(context_size=33), "32"),
    ("/train_start", _train_values(layers_num=4, heads_num=4, embedding_dim=128, context_size=32), "60,000"),
    ("/train_start", _train_values(pasted="x" * 3001), "3,000"),
    ("/train_start", _train_values(pasted="é" * 1501), "3,002 bytes of UTF-8; this server's limit is 3,000 bytes"),
    ("/train_resume", _train_values(run_name="shakespeare-char", steps=41), "40"),
    ("/sample", ["shakespeare-char", "ROMEO:", 13, 0.8, 0, 1.0, 7, False, True, False], "12"),
    ("/sample", ["shakespeare-char", "ROMEO:", 10**6, 0.8, 0, 1.0, 7, False, True, False], "12"),
    ("/sample", ["shakespeare-char", "x" * 101, 5, 0.8, 0, 1.0, 7, False, True, False], "100"),
    ("/tokenize", ["y" * 101, "this text", None], "100"),
    ("/attention_step", ["random weights", None, 0, 0, 0, 16, 8, "journey", "z" * 101, True, True, 1.0, False,
                         "1. Input X", None], "100"),
])
def test_env_limits_hold_through_the_api(served, api, args, message):
    text = served.refused(api, *args)
    assert message in text, text
    assert not served.app.playground_context.jobs.status().active


def test_values_at_the_limits_are_accepted_through_the_api(served):
    text = served.client.predict("shakespeare-char", "ROMEO:", 12, 0.8, 0, 1.0, 7, False, True, False,
                                 api_name="/sample")[0]
    assert len(text) == len("ROMEO:") + 12
    assert served.client.predict("y" * 100, "this text", None, api_name="/tokenize")[2] == "y" * 100
    served.client.predict(*_train_values(steps=40, context_size=32, run_name="at-limit"), api_name="/train_start")
    served.stop_training()


def test_a_checkpoint_above_the_parameter_cap_is_not_loaded(served, tiny_weights):
    big = served.weights / "too-big"
    if not big.exists():
        _copy_checkpoint(tiny_weights / "shakespeare-char", big)
        config = json.loads((big / "config.json").read_text())
        config.update(embedding_dim=128, layers_num=4)  # ~800k parameters, past the 60,000 cap
        (big / "config.json").write_text(json.dumps(config))
    assert "60,000" in served.refused("/checkpoint_info", "too-big")


def test_the_apps_own_parameter_cap_holds_for_training(tmp_path):
    context = AppContext(limits=Limits(max_parameters=5_000), weights=tmp_path)
    try:
        with pytest.raises(ValueError, match="5,000"):
            start_run(context, **_train_args(layers_num=2, heads_num=2, embedding_dim=32, context_size=16))
    finally:
        context.jobs.stop()
        context.jobs.wait(60)


def test_env_limits_hold_in_the_handlers_without_gradio(limited_context):
    ctx = limited_context
    for changes, message in [({"steps": 41}, "40"), ({"context_size": 33}, "32"), ({"pasted": "x" * 3001}, "3,000"),
                             ({"layers_num": 4, "heads_num": 4, "embedding_dim": 128, "context_size": 32}, "60,000")]:
        with pytest.raises(ValueError, match=message):
            start_run(ctx, **_train_args(**changes))
        assert not ctx.jobs.status().active
    with pytest.raises(ValueError, match="at most 12"):
        list(sample(ctx, "shakespeare-char", "ROMEO:", 13, 0.8, 0, 1.0, 7, False, True))
    with pytest.raises(ValueError, match="100"):
        list(sample(ctx, "shakespeare-char", "x" * 101, 5, 0.8, 0, 1.0, 7, False, True))
    with pytest.raises(ValueError, match="limit is 100"):
        tokenize(ctx, "y" * 101, "this text", None)
    assert not (ctx.weights / "limits-run").exists()


def _owned_copy(served, tiny_weights, name: str, **config_changes) -> None:
    """shakespeare-char under another name, owned by the test's client (its session), its config changed."""
    target = served.weights / name
    if target.exists():
        return
    _copy_checkpoint(tiny_weights / "shakespeare-char", target)
    config = json.loads((target / "config.json").read_text())
    (target / "config.json").write_text(json.dumps({**config, **config_changes}))
    training = json.loads((target / "training.json").read_text())
    training["owner"] = tenancy.owner_hash(served.client.session_hash)
    (target / "training.json").write_text(json.dumps(training))


def test_resume_meets_the_size_caps_through_the_api(served, tiny_weights):
    """train_resume used to skip PLAYGROUND_MAX_PARAMETERS and PLAYGROUND_MAX_CONTEXT_SIZE."""
    _owned_copy(served, tiny_weights, "resume-too-big", embedding_dim=128, layers_num=4)
    _owned_copy(served, tiny_weights, "resume-too-long", context_size=64)
    assert "this server's limit is 60,000" in served.refused("/train_resume",
                                                              *_train_values(run_name="resume-too-big", steps=40))
    assert "context_size 64 is above this server's limit of 32" in served.refused(
        "/train_resume", *_train_values(run_name="resume-too-long", steps=40))
    assert not served.app.playground_context.jobs.status().active


def test_the_time_limit_from_the_environment_holds_in_the_handler(tmp_path, monkeypatch):
    for name, value in {**ENV_LIMITS, "PLAYGROUND_MAX_TRAIN_SECONDS": "3"}.items():
        monkeypatch.setenv(name, value)
    context = AppContext(limits=Limits.from_env(), weights=tmp_path)
    with pytest.raises(ValueError, match=r"this server stops a run after 3s: lower steps to at most \d+ \(now 40\)"):
        start_run(context, **_train_args(layers_num=4, heads_num=2, embedding_dim=32, context_size=32, batch_size=1024,
                                        steps=40, pasted="to be or not to be\n" * 150))
    assert not context.jobs.status().active and not (tmp_path / "limits-run").exists()


# ------------------------------------------------------------------------------------------ pickles
class _Hostile:
    """Unpickling this creates a marker file: proof that something unpickled it."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.fixture
def unpickle_spy(monkeypatch):
    calls = []

    def spy(name, real):
        def wrapper(*args, **kwargs):
            calls.append(name)
            raise AssertionError(f"{name} was called while loading a checkpoint")
        return wrapper

    for module, name in [(pickle, "load"), (pickle, "loads"), (torch, "load"), (torch.serialization, "load")]:
        monkeypatch.setattr(module, name, spy(f"{module.__name__}.{name}", getattr(module, name)))

    class SpyUnpickler(pickle.Unpickler):
        def load(self):
            calls.append("pickle.Unpickler.load")
            raise AssertionError("pickle.Unpickler.load was called while loading a checkpoint")

    monkeypatch.setattr(pickle, "Unpickler", SpyUnpickler)
    return calls


def _pickle_checkpoints(source: Path, weights: Path, marker: Path) -> list[str]:
    """Two checkpoints whose model.safetensors is a pickle: torch.save output and a hostile raw pickle."""
    torch_saved = _copy_checkpoint(source, weights / "torch-pickle")
    state = {k: torch.zeros(2) for k in ("a", "b")}
    torch.save(state, torch_saved / "model.safetensors")
    raw = _copy_checkpoint(source, weights / "raw-pickle")
    (raw / "model.safetensors").write_bytes(pickle.dumps(_Hostile(marker)))
    beside = _copy_checkpoint(source, weights / "pt-beside")
    (beside / "model.safetensors").unlink()
    torch.save(state, beside / "model.pt")
    return ["torch-pickle", "raw-pickle", "pt-beside"]


def test_a_pickle_as_model_safetensors_is_refused_unread(tiny_weights, tmp_path, unpickle_spy):
    marker = tmp_path / "UNPICKLED"
    names = _pickle_checkpoints(tiny_weights / "shakespeare-char", tmp_path / "weights", marker)
    for name in names:
        with pytest.raises(checkpoints.CheckpointError, match="not safetensors|no model.safetensors"):
            checkpoints.load_checkpoint(name, directory=tmp_path / "weights")
    assert unpickle_spy == [] and not marker.exists()
    assert "pt-beside" not in checkpoints.list_checkpoints(tmp_path / "weights")


def test_a_pickle_as_model_safetensors_is_refused_through_the_api(served, tiny_weights, unpickle_spy):
    marker = served.root / "UNPICKLED"
    if not (served.weights / "raw-pickle").exists():
        _pickle_checkpoints(tiny_weights / "shakespeare-char", served.weights, marker)
    for name in ("torch-pickle", "raw-pickle", "pt-beside"):
        message = served.refused("/checkpoint_info", name)
        assert "not safetensors" in message or "no model.safetensors" in message, message
        served.refused("/sample", name, "ROMEO:", 5, 0.8, 0, 1.0, 7, False, True, False)
        served.refused("/train_resume", *_train_values(run_name=name, steps=40))
    assert unpickle_spy == [] and not marker.exists()


# ------------------------------------------------------------------ the Compare tab's time and memory
def test_compare_and_timing_know_their_cost_before_they_start(tmp_path, monkeypatch):
    """The issue's requests: a compare that peaked at 5.3 GB, a sweep that held the slot for 138 s."""
    from playground.attention import costs
    from playground.budget import GIB, MemoryBudget, compare_cost, human
    from playground.ui.compare_tab import run_comparison, run_timing

    started = []
    monkeypatch.setattr(costs, "time_implementations", lambda *a, **k: started.append(a))
    monkeypatch.setattr("playground.ui.compare_tab.time_implementations", costs.time_implementations)
    monkeypatch.setattr("playground.ui.compare_tab.compare", lambda *a, **k: started.append(a))
    ctx = AppContext(limits=Limits(), weights=tmp_path, budget=MemoryBudget(int(3.6 * GIB), "test"))
    with pytest.raises(ValueError, match=r"Timing 7 implementations at T 16 to 1024 \(batch 64, embedding 4096, "
                                         r"64 heads\) would take about \d+ s .* limit of 60 s a request "
                                         r"\(PLAYGROUND_MAX_REQUEST_SECONDS\): lower"):
        run_timing(ctx, 4096, 64, 64, "fp32", "cpu", 1024)
    with pytest.raises(ValueError, match=r"would take about \d+ s .*: lower the largest T to at most 512"):
        run_timing(ctx, 256, 16, 2, "fp32", "cpu", 1024)
    small = AppContext(limits=Limits(), weights=tmp_path, budget=MemoryBudget(2 * GIB, "test"))
    needs = human(compare_cost(embedding_dim=1024, heads_num=64, seq_len=1024, batch=2, itemsize=4).bytes)
    assert needs == "2.7 GiB"
    with pytest.raises(ValueError, match=rf"this comparison needs about {needs} .* over this server's memory budget "
                                         r"of 2.0 GiB \(test\); lower T to at most \d+ or the batch to at most 1"):
        run_comparison(small, 1024, 64, 1024, 2, 0, False, "fp32", "cpu")
    assert started == [] and ctx.budget.reserved == 0
    slow = AppContext(limits=Limits(max_request_seconds=5), weights=tmp_path, budget=ctx.budget)
    with pytest.raises(ValueError, match=r"limit of 5 s a request"):
        run_timing(slow, 64, 4, 2, "fp32", "cpu", 1024)  # the default sweep: about 34 s
    assert started == []


# ------------------------------------------------------------- refusals through raw HTTP, as any client sends
OUTSIDE_UPLOADS = {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}, "orig_name": "passwd"}
RAW_REFUSALS = [
    ("checkpoint_info", [], "needed: 1, got: 0"),
    ("checkpoint_info", [OUTSIDE_UPLOADS], "not uploaded by a user"),
    ("checkpoint_info", [{"path": "x"}], "chosen by its name or a Hub repo id"),
    ("checkpoint_info", [12], "chosen by its name or a Hub repo id"),
    ("tokenize", [], "needed: 3, got: 0"),
    ("tokenize", [OUTSIDE_UPLOADS, "this text", None], "not uploaded by a user"),
    ("tokenize", ["hi", "this text", OUTSIDE_UPLOADS], "not uploaded by a user"),
    ("tokenize", [None, None, None], "Unknown vocabulary source"),
    ("compare", [], "needed: 8, got: 0"),
    ("compare", [None] * 8, "embedding_dim is empty"),
    ("compare", [OUTSIDE_UPLOADS, 4, 8, 2, 0, False, "fp32", "cpu"], "not uploaded by a user"),
    ("compare_timing", [], "needed: 6, got: 0"),
    ("compare_timing", [4096, 64, 64, "fp32", "cpu", 1024], "PLAYGROUND_MAX_REQUEST_SECONDS"),
    ("compare_source", [], "needed: 1, got: 0"),
    ("compare_source", [None], "Unknown implementation"),
    ("compare_source", [{"path": "../../etc/passwd", "meta": {"_type": "gradio.FileData"}}], "not uploaded"),
]


def test_a_refusal_leaves_one_line_in_the_server_log_not_a_traceback(served, capfd, caplog):
    """Gradio prints a traceback for every gr.Error unless told not to: a public Space's visitors' typos must not
    fill its log with them. The refusal is logged once, as a line naming the handler."""
    caplog.set_level("INFO", logger="playground.ui.common")
    capfd.readouterr()
    base = served.app.local_url.rstrip("/") + "/gradio_api/call/compare"
    posted = httpx.post(base, json={"data": [None] * 8}, timeout=30)
    answer = httpx.get(f"{base}/{posted.json()['event_id']}", timeout=120).text
    assert "embedding_dim is empty" in answer, answer[:300]
    out, err = capfd.readouterr()
    assert "Traceback" not in out + err, (out + err)[-2000:]
    assert any(record.getMessage().endswith(" refused: embedding_dim is empty")
               for record in caplog.records), [record.getMessage() for record in caplog.records]


@pytest.mark.parametrize("api,data,message", RAW_REFUSALS, ids=[f"{a}-{i}" for i, (a, _, _) in
                                                                   enumerate(RAW_REFUSALS)])
def test_every_refusal_reaches_a_raw_http_client_as_a_message(served, api, data, message):
    """POST /gradio_api/call/<api> then read its events: an error event whose message is text, never null."""
    base = served.app.local_url.rstrip("/") + "/gradio_api/call/" + api
    posted = httpx.post(base, json={"data": data}, timeout=30)
    assert posted.status_code == 200, posted.text[:300]
    answer = httpx.get(f"{base}/{posted.json()['event_id']}", timeout=120).text
    event, _, payload = answer.strip().partition("\ndata: ")
    assert event == "event: error", answer[:300]
    error = json.loads(payload)["error"]
    assert isinstance(error, str) and _readable(error) and message in error, error[:300]
