"""Shared fixtures: offline, seeded, tiny. Tiny Shakespeare comes from ../shared (never from the network)."""

from __future__ import annotations

import os
from pathlib import Path

# As app.py does, before torch loads OpenMP: the tests run a server, a browser and the test process on a few cores,
# and spinning OpenMP threads made small torch calls up to 50x slower there.
from playground.settings import apply_process_defaults  # noqa: E402 (imports no torch)

apply_process_defaults()

import pytest  # noqa: E402
import torch  # noqa: E402

# the browser tests' fixtures; the Docker build; --cpu-times=N (CPU seconds per file and test)
pytest_plugins = ["browser_support", "docker_support", "cpu_times"]

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = Path(os.environ.get("PLAYGROUND_TINY_SHAKESPEARE", REPO.parent / "shared" / "data" /
                                    "tinyshakespeare.txt"))

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ["PLAYGROUND_OFFLINE"] = "1"


def local_client(url: str, **options):
    """A gradio_client Client for an app on 127.0.0.1, which answers plain HTTP: no certificate is ever shown, so
    none is checked (``ssl_verify=False``). Checking would not check anything here, but it has httpx load certifi's
    CA bundle for every request the client sends (two or three per call): about 80 ms of CPU per call, most of what
    a refused call cost the tests (test_limits sent its 258 calls in 37 s)."""
    from gradio_client import Client

    return Client(url, verbose=False, ssl_verify=False, **options)


@pytest.fixture(autouse=True)
def _isolated(tmp_path_factory, monkeypatch):
    """Every test: offline, a private cache, Tiny Shakespeare from ../shared, fixed seeds."""
    monkeypatch.setenv("PLAYGROUND_OFFLINE", "1")
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("PLAYGROUND_TINY_SHAKESPEARE", str(SHARED_CORPUS))
    torch.manual_seed(0)


@pytest.fixture(scope="session")
def shakespeare_text() -> str:
    if not SHARED_CORPUS.is_file():
        pytest.fail(f"Tiny Shakespeare not found at {SHARED_CORPUS}: the tests expect ../shared beside the repo")
    return SHARED_CORPUS.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def tiny_weights(tmp_path_factory, shakespeare_text) -> Path:
    """A weights folder with one small checkpoint, 'shakespeare-char', trained for a few steps."""
    from playground.config import TrainConfig
    from playground.training.run import RunRequest, prepare_run, run_training

    folder = tmp_path_factory.mktemp("weights")
    request = RunRequest(
        run_name="shakespeare-char",
        model=dict(layers_num=2, heads_num=2, embedding_dim=32, context_size=32, dropout_rate=0.0, use_bias=False),
        train=TrainConfig(batch_size=8, steps=30, learning_rate=3e-3, warmup_steps=5, eval_interval=15,
                          eval_batches=2, checkpoint_interval=100, sample_interval=100, seed=1),
        corpus_path=str(SHARED_CORPUS), weights_dir=folder,
    )
    os.environ["PLAYGROUND_OFFLINE"] = "1"
    run_training(prepare_run(request))
    return folder


def pytest_xdist_make_scheduler(config, log):
    """Under ``--dist loadfile`` (tests/run.sh's two workers): every browser file and the Docker tests as one unit, so
    one worker runs them all on one app.py and one Chromium while the other runs every other file, a file at a time
    (its module fixtures start once). The Docker build waits for the last browser test (docker_support.py), which
    only the worker running the browser files sees. (xdist's own ``xdist_group`` marks group nothing under pytest
    9.2: they work by renaming the tests' node ids, which pytest no longer takes; pytest-xdist issue 1386.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class BrowserFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = super()._split_scope(nodeid)
            name = file.rsplit("/", 1)[-1]
            return "browser files" if name.startswith("test_browser_") or name == "test_docker.py" else file

    return BrowserFilesTogether(config, log)


def pytest_collection_modifyitems(config, items):
    """Drop an endpoint's quick fuzz run when its full run is selected too: the quick run's 20 inputs are the full
    run's first 20 (the same seeded generator), so it would only repeat them."""
    def api_of(item, name):
        return item.callspec.params.get("api") if getattr(item, "originalname", "") == name else None

    full = {api_of(item, "test_fuzz_endpoint") for item in items} - {None}
    repeated = [item for item in items if api_of(item, "test_fuzz_endpoint_quick") in full]
    if repeated:
        config.hook.pytest_deselected(items=repeated)
        items[:] = [item for item in items if item not in repeated]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A browser test that fails shows the end of the shared app.py's log beside its own output (the page's side
    alone left a flaky test's cause unknown: were the server's answers made, late, or refused?)."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("call", "teardown"):  # any app.py the test used: the shared one, the Hub's...
        servers = {id(value): value for value in getattr(item, "funcargs", {}).values() if hasattr(value, "log_tail")}
        for server in servers.values():
            report.sections.append(("app.py's log, its end", server.log_tail(4000)))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """name -> (transformers' reference model, its tokenizer, the folder it saved), a tiny Llama-family model of
    test_llama.SHAPES built once for the module (a module may define its own ``tiny`` instead)."""
    from test_llama import make_tiny

    built = {}

    def get(name: str):
        if name not in built:
            built[name] = make_tiny(tmp_path_factory.mktemp(name), name)
        return built[name]
    return get
