"""A stranger on the public Space: the real app.py under a 3 GiB memory limit, every finding replayed.

The server runs as a user runs it (a copy of the project, HOME moved) inside a memory cgroup (or, where none can
be made, under an RSS watchdog); its memory budget is its own default, a share of the limit it finds. Each
scenario replays what once killed, filled or vandalised the server, then asserts that the server still answers,
that its peak stayed under the limit, that the temp space and the visitor runs are within their quotas and the
shipped checkpoint byte-identical (``_unharmed``), and the scenario's own promise (another visitor's run untouched,
a fast view answering in under a second while long jobs run).
Sixty randomised requests at the caps from 8 concurrent clients close the suite. ``pytest -s`` prints
each scenario's peak memory and the disk figures.

"Still answers" means a fast view (tokenize, through the queue) answers within HEALTHY_SECONDS, polled: a scenario's
own work may still be ending, and on a busy machine one call may be slow, so the check waits up to
HEALTHY_PATIENCE for a call that answers in time. A server that is dead, stuck or queued behind a scenario's work
never does. The stub Hub on 127.0.0.1 (HF_ENDPOINT) stands in for the Hugging Face Hub.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from browser_support import start_app
from gradio_client import Client
from gradio_client.exceptions import AppError
from hostile_support import MemoryGroup, disk_bytes
from test_hub import StubHub, make_tiny_checkpoint

from playground.server.tenancy import stored_runs

pytestmark = pytest.mark.slow

GIB = 2**30
LIMIT = 3 * GIB
ADMIN_TOKEN = "admin-" + "7" * 24
SHIPPED = "shakespeare-char"
REPORT: dict[str, str] = {}
GENERIC_ERROR = "has not enabled verbose error reporting"
TEMP_QUOTA = 100 * 2**20  # PLAYGROUND_MAX_TEMP_BYTES for this server: uploads and exports together
# PLAYGROUND_MAX_RUNS_BYTES for this server: room for one checkpoint of about 19M parameters (76 MB), not two
RUNS_QUOTA = 120_000_000
HUB_CACHE_QUOTA = 20_000  # PLAYGROUND_MAX_HUB_CACHE_BYTES: less than one stub repo, so every download prunes
HEALTHY_SECONDS = 1.0  # the server answers a fast view this fast after every scenario...
HEALTHY_PATIENCE = 30.0  # ...within this long of the scenario's end
HEALTH_ADDRESS = "192.0.2.250"  # the health check's own client address: a scenario's share never refuses it
# Requests at the caps, and how long they may take (those not started by then are skipped). The defaults fit CI
# (40 draw every kind of request: 3 to 11 each);
# a longer run: PLAYGROUND_HOSTILE_REQUESTS=400 PLAYGROUND_HOSTILE_SECONDS=600 pytest -s tests/test_hostile.py
RANDOMISED_REQUESTS = int(os.environ.get("PLAYGROUND_HOSTILE_REQUESTS", "40"))
RANDOMISED_SECONDS = float(os.environ.get("PLAYGROUND_HOSTILE_SECONDS", "30"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    group = MemoryGroup(LIMIT)
    _, _, files = make_tiny_checkpoint(tmp_path_factory.mktemp("hub-repo"))
    no_weights = {k: v for k, v in files.items() if k != "model.safetensors"}
    # a repo refused once its config.json is in: its weights file is 8 MiB, far more than that config implies
    stub = StubHub({"learner/tiny-char": files, "learner/padded-weights": no_weights},
                   claimed={"learner/padded-weights": {"model.safetensors": 8 * 2**20}})
    stub.thread.start()
    # the proxy a Space has in front, as these tests' clients say it (X-Forwarded-For): several clients from one machine
    env = {"PLAYGROUND_ADMIN_TOKEN": ADMIN_TOKEN, "GRADIO_TEMP_DIR": str(root / "gradio-tmp"),
           "PLAYGROUND_TRUST_FORWARDED_FOR": "1", "PLAYGROUND_MAX_TEMP_BYTES": str(TEMP_QUOTA),
           "PLAYGROUND_MAX_RUNS_BYTES": str(RUNS_QUOTA), "PLAYGROUND_MAX_HUB_CACHE_BYTES": str(HUB_CACHE_QUOTA),
           "HF_ENDPOINT": stub.url}
    server_iter = start_app(root, env, preexec_fn=group.enter)
    try:
        server = next(server_iter)
    except BaseException:
        stub.server.shutdown()
        raise
    group.watch(server.process.pid)
    server.group = group
    server.stub = stub
    server.gradio_tmp = root / "gradio-tmp"
    server.shipped_hash = _tree_hash(server.weights / SHIPPED)
    print(f"\nhostile server under {group.kind}, limit {LIMIT / GIB:.1f} GiB")
    try:
        yield server
    finally:
        try:
            next(server_iter)
        except StopIteration:
            pass
        stub.server.shutdown()
        stub.server.server_close()
        group.close()
        if REPORT:
            print("\nhostile-visitor figures:\n" + "\n".join(f"  {k}: {v}" for k, v in REPORT.items()))


def _tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(file.name.encode() + file.read_bytes())
    return digest.hexdigest()


def _client(server, address: str | None = None) -> Client:
    """A visitor; ``address``: the client address the Space's proxy would forward for them."""
    headers = {"X-Forwarded-For": address} if address else None
    return Client(server.url, verbose=False, download_files=False, headers=headers)


def _refusal(call) -> str | None:
    """None when the call succeeded, else the refusal's message (which must be readable)."""
    try:
        call()
    except AppError as error:
        message = str(error)
        assert message.strip() and GENERIC_ERROR not in message and "Traceback" not in message, message
        return message
    return None


def _answers_in_time(server) -> float | None:
    """Seconds a fast view (tokenize, through the queue) took to answer, or None when it did not answer within
    HEALTHY_SECONDS (or answered with an error)."""
    base = server.url.rstrip("/") + "/gradio_api/call/tokenize"
    started = time.monotonic()
    try:
        with httpx.Client(timeout=HEALTHY_SECONDS, headers={"X-Forwarded-For": HEALTH_ADDRESS}) as http:
            posted = http.post(base, json={"data": ["Hello world", "this text", None]})
            if posted.status_code != 200:
                return None
            answer = http.get(f"{base}/{posted.json()['event_id']}").text
    except httpx.HTTPError:
        return None
    took = time.monotonic() - started
    return took if answer.startswith("event: complete") and took <= HEALTHY_SECONDS else None


def _healthy(server, scenario: str) -> None:
    """The server is alive, answers a fast view within HEALTHY_SECONDS (polled for up to HEALTHY_PATIENCE), and
    stayed under its memory limit."""
    deadline, tries = time.monotonic() + HEALTHY_PATIENCE, 0
    while (took := _answers_in_time(server)) is None:
        tries += 1
        assert server.process.poll() is None, f"the server died during {scenario}:\n{server.log_tail()}"
        assert time.monotonic() < deadline, \
            f"after {scenario} no fast view answered within {HEALTHY_SECONDS:g} s in {HEALTHY_PATIENCE:g} s"
        time.sleep(0.2)
    assert server.process.poll() is None, f"the server died during {scenario}:\n{server.log_tail()}"
    assert not server.group.over_limit(), f"{scenario} hit the memory limit"
    peak = server.group.peak_bytes()
    REPORT[scenario] = f"peak {peak / GIB:.2f} GiB of {LIMIT / GIB:.1f}; answered in {took:.2f} s" + \
        (f" after {tries} slower tries" if tries else "")
    assert peak < LIMIT


def _unharmed(server, scenario: str) -> None:
    """``_healthy``, and the files within their quotas: Gradio's temp space, the visitor runs, the shipped checkpoint
    byte-identical."""
    _healthy(server, scenario)
    assert disk_bytes(server.gradio_tmp) <= TEMP_QUOTA
    visitor_runs = sum(run.size for run in stored_runs(server.weights))
    assert visitor_runs <= RUNS_QUOTA, f"visitor runs take {visitor_runs:,} bytes after {scenario}"
    assert _tree_hash(server.weights / SHIPPED) == server.shipped_hash


def _call(server, api: str, data: list, address: str, timeout: float = 120) -> tuple[str, str]:
    """POST /gradio_api/call/<api> as a stranger's script would (the page's private events answer there too), then
    read the answer: ("complete" or "error", what came with it)."""
    base = server.url.rstrip("/") + f"/gradio_api/call/{api}"
    with httpx.Client(timeout=timeout, headers={"X-Forwarded-For": address}) as http:
        posted = http.post(base, json={"data": data})
        assert posted.status_code == 200, f"{api}: {posted.status_code} {posted.text[:300]}"
        answer = http.get(f"{base}/{posted.json()['event_id']}").text
    event, _, rest = answer.partition("\n")
    return event.removeprefix("event: ").strip(), rest.removeprefix("data: ").strip()


def _uploaded(server, path: Path, address: str) -> dict:
    """``path`` sent through Gradio's upload route, as the page sends a file: the FileData a call names it by."""
    with httpx.Client(timeout=60, headers={"X-Forwarded-For": address}) as http:
        answer = http.post(server.url.rstrip("/") + "/gradio_api/upload",
                           files=[("files", (path.name, path.read_bytes(), "application/octet-stream"))])
    assert answer.status_code == 200, answer.text[:300]
    return {"path": answer.json()[0], "orig_name": path.name, "meta": {"_type": "gradio.FileData"}}


def _train(client, **changes):
    args = dict(layers_num=1, heads_num=2, embedding_dim=32, context_size=32, batch_size=8, steps=20,
                learning_rate=3e-3, warmup_steps=0, dropout_rate=0.0, seed=0, device="cpu",
                corpus_choice="Tiny Shakespeare", upload=None, pasted="", run_name="visitor-run")
    args.update(changes)
    return client.predict(**args, api_name="/train_start")


def test_a_huge_value_gradio_refuses_does_not_flood_the_log(hostile):
    """Gradio's own input checks (a Radio given a value outside its choices) print a traceback whose last line quotes
    the value: a 10 MB value wrote 10 MB of log per call. app.py's stderr cuts every line to MAX_LOG_LINE."""
    import httpx

    from playground.server.logs import MAX_LOG_LINE

    before = hostile.log.stat().st_size
    base = hostile.url.rstrip("/") + "/gradio_api/call/tokenize"
    posted = httpx.post(base, json={"data": ["hello", "x" * 1_000_000, None]}, timeout=60)
    assert posted.status_code == 200, posted.text[:300]
    answer = httpx.get(f"{base}/{posted.json()['event_id']}", timeout=60).text
    assert answer.startswith("event: error"), answer[:300]
    time.sleep(0.5)  # the log is written by the server process
    with hostile.log.open("rb") as log:
        log.seek(before)
        written = log.read().decode("utf-8", errors="replace")
    assert len(written) < 50_000, f"{len(written):,} characters logged for one refused call"
    assert max(map(len, written.splitlines()), default=0) <= MAX_LOG_LINE + 40
    _unharmed(hostile, "a 1 MB value for a Radio")


def test_the_killer_training_request_is_refused_with_what_to_lower(hostile):
    client = _client(hostile)
    message = _refusal(lambda: _train(client, layers_num=1, heads_num=1, embedding_dim=1024, context_size=1024,
                                      batch_size=1024, run_name="killer"))
    assert message and "batch_size" in message, message
    _unharmed(hostile, "train batch 1024 x context 1024")


def test_runs_with_dropout_are_priced_by_their_attention_maps_and_the_batch_advised_runs(hostile):
    """With dropout on a CPU, attention keeps explicit (B, h, T, T) tensors: a 123k-parameter run (64 heads, context
    1024, batch 8, dropout 0.5) once estimated at 214 MiB killed the server in 7 s, and the small preset's shape at
    context 1024 with dropout 0.1, at the very batch the server's refusal advised, in 9 s. The first is refused; the
    second, at the advised batch, trains a step and the server stays within its limit."""
    import re

    client = _client(hostile, "192.0.2.77")
    message = _refusal(lambda: _train(client, layers_num=1, heads_num=64, embedding_dim=64, context_size=1024,
                                      batch_size=8, dropout_rate=0.5, run_name="many-heads"))
    assert message and "batch_size" in message, message
    small = dict(layers_num=4, heads_num=4, embedding_dim=192, context_size=1024, dropout_rate=0.1, steps=1,
                 run_name="advised-batch")
    message = _refusal(lambda: _train(client, batch_size=32, **small))
    advised = re.search(r"lower batch_size to at most ([\d,]+)", message or "")
    assert advised, message
    batch = int(advised.group(1).replace(",", ""))
    REPORT["small shape, context 1024, dropout 0.1"] = f"batch 32 refused, {batch} advised"
    if batch >= 1:
        assert _refusal(lambda: _train(client, batch_size=batch, **small)) is None

        def status(shown: str) -> str:
            """The train tab's status text now, or ``shown`` when it has not changed (the poll sends only changes)."""
            text = json.dumps(client.predict(api_name="/train_status"))
            return text if "step **" in text else shown

        stepped = "step **1 / 1**"  # the status once the step (the run's peak) is done
        shown, deadline = "", time.monotonic() + 120
        while time.monotonic() < deadline and stepped not in (shown := status(shown)):
            time.sleep(0.5)
        assert stepped in shown, f"the run's one step did not finish in 2 minutes: {shown[:300]}"
        _refusal(lambda: client.predict(api_name="/train_stop"))  # its evaluation and sample need not run here
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(state in shown.upper() for state in ("**RUNNING**", "**STOPPING**")):
            time.sleep(0.5)
            shown = status(shown)
        assert "**RUNNING**" not in shown.upper(), f"the run did not stop: {shown[:300]}"
    _unharmed(hostile, "runs with dropout at context 1024")


def test_big_compares_at_once_fit_or_are_refused(hostile):
    args = dict(embedding_dim=1024, heads_num=64, seq_len=1024, batch=2, seed=0, qkv_bias=False, dtype="fp32",
                device="cpu")

    def one(_):
        return _refusal(lambda: _client(hostile).predict(**args, api_name="/compare"))

    with ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(one, range(4)))
    for message in outcomes:
        assert message is None or any(w in message for w in ("memory", "budget", "try again", "lower")), message
    REPORT["4 compares (1024 wide, 64 heads, T 1024, batch 2)"] = \
        f"{sum(m is None for m in outcomes)} ran, {sum(m is not None for m in outcomes)} refused"
    _unharmed(hostile, "4 big compares at once")


def test_name_variants_share_one_cached_checkpoint(hostile):
    client = _client(hostile)
    hostile.group.reset_peak()
    before = hostile.group.peak_bytes()
    for i in range(75):
        _refusal(lambda i=i: client.predict(name=SHIPPED + " " * (i % 8), api_name="/checkpoint_info"))
    growth = hostile.group.peak_bytes() - before
    REPORT["75 checkpoint_info name variants"] = f"memory grew {growth / 2**20:.0f} MiB"
    assert growth < 300 * 2**20
    _unharmed(hostile, "75 checkpoint_info variants")


def test_the_shipped_model_is_read_only_and_runs_belong_to_their_starter(hostile):
    owner, stranger = _client(hostile), _client(hostile)
    message = _refusal(lambda: _train(owner, run_name=SHIPPED, steps=1))
    assert message and ("read-only" in message.lower() or "shipped" in message.lower()), message
    assert _tree_hash(hostile.weights / SHIPPED) == hostile.shipped_hash

    _train(owner, run_name="owners-run", steps=20000, batch_size=4, context_size=16, embedding_dim=16)
    try:
        stopped = _refusal(lambda: stranger.predict(api_name="/train_stop"))
        status = json.dumps(owner.predict(api_name="/train_status"), default=str)
        assert stopped is not None or "RUNNING" in status.upper(), "a stranger stopped another visitor's run"
        assert "RUNNING" in status.upper(), status[:300]
        assert _refusal(lambda: _train(stranger, run_name="strangers-run")) is not None  # the one slot is taken
    finally:
        owner.predict(api_name="/train_stop")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "RUNNING" in json.dumps(owner.predict(api_name="/train_status")).upper():
        time.sleep(1)
    assert _tree_hash(hostile.weights / SHIPPED) == hostile.shipped_hash

    hog = _refusal(lambda: _train(owner, run_name="hog", layers_num=12, heads_num=8, embedding_dim=352,
                                  context_size=256, batch_size=64, steps=20000))
    assert hog is not None, "a run for days took the only training slot"
    _unharmed(hostile, "ownership and the shipped model")


def test_attention_at_the_largest_context_returns_bounded_figures(hostile):
    client = _client(hostile)
    text = ("To be, or not to be: that is the question. " * 30)[:1024]
    sizes = []
    for step in ("2. Q, K, V", "6. Softmax weights", "3. Raw scores QKᵀ"):
        started = time.monotonic()
        result = client.predict(source="random weights", checkpoint=SHIPPED, layer=0, head=0, seed=0,
                                embedding_dim=1024, head_size=64, preset="journey", text=text, scale=True,
                                mask=True, temperature=1.0, mask_before_scaling=False, step=step, query=-1,
                                api_name="/attention_step")
        sizes.append(len(json.dumps(result, default=str)))
        assert time.monotonic() - started < 30
    REPORT["attention_step at T 1024, embedding 1024"] = f"largest response {max(sizes) / 2**20:.1f} MiB"
    assert max(sizes) < 30 * 2**20
    _unharmed(hostile, "attention at T 1024")


def test_exports_stay_under_the_disk_quota(hostile):
    client = _client(hostile)
    text = ("abcdefghij" * 103)[:1024]
    for _ in range(6):
        _refusal(lambda: client.predict(source="random weights", checkpoint=SHIPPED, layer=0, head=0, seed=0,
                                        embedding_dim=64, head_size=16, preset="journey", text=text, scale=True,
                                        mask=True, temperature=1.0, mask_before_scaling=False,
                                        step="6. Softmax weights", api_name="/attention_export"))
    used = disk_bytes(hostile.gradio_tmp)
    REPORT["6 exports at T 1024"] = f"Gradio temp space {used / 2**20:.0f} MiB of {TEMP_QUOTA / 2**20:.0f} MiB"
    assert used <= TEMP_QUOTA
    _unharmed(hostile, "exports at T 1024")


def test_fast_views_answer_while_long_jobs_run(hostile):
    """Two 2000-character samples (with the KV cache: without it the per-request time cap refuses them at once) and a
    timing sweep, from three addresses, all running before the fast views are timed."""
    from gradio_client.utils import Status

    sample = dict(checkpoint=SHIPPED, max_new_tokens=2000, temperature=1.0, top_k=0, top_p=1.0, greedy=False,
                  use_cache=True, drop_unknown=False, api_name="/sample")
    client = _client(hostile)

    def tokenize() -> float:
        started = time.monotonic()
        client.predict(text="Hello world", source="loaded checkpoint", checkpoint=SHIPPED, api_name="/tokenize")
        return time.monotonic() - started

    tokenize()  # the first call opens the checkpoint
    alone = sorted(tokenize() for _ in range(5))[2]  # this machine's pace now, with nothing else running
    long_jobs = [_client(hostile, "192.0.2.31").submit(prompt="ROMEO:", seed=1, **sample),
                 _client(hostile, "192.0.2.32").submit(prompt="JULIET:", seed=2, **sample),
                 _client(hostile, "192.0.2.33").submit(embedding_dim=256, heads_num=8, batch=2, dtype="fp32",
                                                       device="cpu", max_len=512, api_name="/compare_timing")]
    running, deadline = (Status.PROCESSING, Status.PROGRESS, Status.ITERATING), time.monotonic() + 60
    while not all(job.status().code in running for job in long_jobs):  # all three running, none waiting
        assert time.monotonic() < deadline and not any(job.done() for job in long_jobs), \
            [job.status().code for job in long_jobs]
        time.sleep(0.1)
    latencies = []
    while not all(job.done() for job in long_jobs) and len(latencies) < 20:
        latencies.append(tokenize())
        time.sleep(0.3)
    for job in long_jobs:
        _refusal(lambda job=job: job.result(timeout=180))
    ordered = sorted(latencies)
    median, p90 = ordered[len(ordered) // 2], ordered[int(0.9 * (len(ordered) - 1))]
    REPORT["tokenize while 2 samples and a timing sweep run"] = \
        f"{len(latencies)} calls: median {median:.2f} s, 90th percentile {p90:.2f} s, slowest {ordered[-1]:.2f} s " \
        f"(alone: {alone:.2f} s)"
    # Under a second, the median and nine calls in ten, or on a machine so busy that a call alone takes more than a
    # fifth of that, within 5 times its pace alone (measured here: alone 0.05 s; beside the long jobs median 0.18 s,
    # 90th percentile 0.21 s, on a busy CI machine 1.02 s). A fast view queued behind the long jobs waits for a
    # 2000-token sample: tens of seconds.
    allowed = max(1.0, 5 * alone)
    assert len(latencies) >= 3 and median < allowed and p90 < allowed, (alone, latencies)
    _unharmed(hostile, "fast views beside long jobs")


def _tokenizer(server):
    """A visitor of its own timing tokenize: a function answering the seconds one call took."""
    client = _client(server, "192.0.2.60")

    def tokenize() -> float:
        started = time.monotonic()
        client.predict(text="Hello world", source="loaded checkpoint", checkpoint=SHIPPED, api_name="/tokenize")
        return time.monotonic() - started

    tokenize()  # the first call opens the checkpoint
    return tokenize


def _median_and_p90(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return ordered[len(ordered) // 2], ordered[int(0.9 * (len(ordered) - 1))]


def test_four_why_loops_from_one_client_leave_the_fast_lane_to_others(hostile):
    """Four Why loops from one client held the fast lane's four places: another visitor's tokenize went from 0.25 s
    to 2.0 s median. A client holds one place at a time (server/fast_lane.py): the others' tokenize answers within
    a second, median and nine in ten (on a machine so busy that it takes a fifth of that alone, within 5 times its
    pace alone)."""
    text = ("ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet is the sun. "
            * 3)[:256]
    stop, errors, done = threading.Event(), [], []

    def loop(index: int):
        client = _client(hostile, "192.0.2.70")
        while not stop.is_set():
            try:
                client.predict(checkpoint=SHIPPED, text=text, position=-1 - index, target="", head="", knocked=[],
                               mode="mean over the text", api_name="/why")
                done.append(index)
            except Exception as exc:  # a busy refusal is the lane's to give; anything else is a failure
                if "busy" not in str(exc):
                    errors.append(repr(exc))
                    return

    tokenize = _tokenizer(hostile)
    alone = _median_and_p90([tokenize() for _ in range(5)])[0]  # this machine's pace now, nothing else running
    loops = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(4)]
    for thread in loops:
        thread.start()
    latencies = []
    try:
        deadline = time.monotonic() + 60
        while len(done) < 4:  # the loops are going
            assert time.monotonic() < deadline and not errors, errors
            time.sleep(0.1)
        while not errors and len(latencies) < 12:
            latencies.append(tokenize())
            time.sleep(0.2)
    finally:
        stop.set()
        for thread in loops:
            thread.join(120)
    assert not errors, errors
    median, p90 = _median_and_p90(latencies)
    REPORT["tokenize beside 4 Why loops from one client"] = \
        f"{len(latencies)} calls: median {median:.2f} s, 90th percentile {p90:.2f} s, slowest {max(latencies):.2f} s " \
        f"(alone: {alone:.2f} s; {len(done)} Why views answered)"
    allowed = max(1.0, 5 * alone)
    assert len(latencies) >= 5 and median < allowed and p90 < allowed, (alone, latencies)
    _unharmed(hostile, "four Why loops from one client")


def _wait_for_the_slot(client, seconds=120):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and "RUNNING" in json.dumps(client.predict(api_name="/train_status")).upper():
        time.sleep(0.5)


def test_a_client_changing_session_id_keeps_to_one_share_of_the_runs(hostile):
    """A visitor changing session id every few runs filled the 20-run limit in 27 s and everyone else's runs and
    imports were refused for an hour: runs count against the client's address, so its own oldest go instead."""
    someone = _client(hostile, "198.51.100.1")
    _train(someone, run_name="someone-elses", steps=1)
    _wait_for_the_slot(someone)
    for index in range(7):  # a new session (a new Client) for every run, one address
        client = _client(hostile, "203.0.113.66")
        _train(client, run_name=f"churn-{index}", steps=1)
        _wait_for_the_slot(client)
    left = sorted(p.name for p in hostile.weights.iterdir() if p.name.startswith("churn-"))
    REPORT["7 runs from new sessions of one address"] = f"{len(left)} kept: {', '.join(left)}"
    assert len(left) == 5 and "churn-6" in left  # PLAYGROUND_MAX_RUNS_PER_VISITOR, the newest kept
    assert (hostile.weights / "someone-elses" / "model.safetensors").is_file()
    _unharmed(hostile, "session churn from one address")


def test_a_short_sample_answers_while_two_long_jobs_run(hostile):
    """Two long jobs held the long lane, so a 200-character sample waited 33 s instead of 0.6 s: samples have their
    own lane now, where a short one takes no long place."""
    from gradio_client.utils import Status

    sweeps = [_client(hostile, f"192.0.2.{i}").submit(embedding_dim=256, heads_num=8, batch=2, dtype="fp32",
                                                       device="cpu", max_len=512, api_name="/compare_timing")
              for i in (1, 2)]
    deadline = time.monotonic() + 60
    running = (Status.PROCESSING, Status.PROGRESS)  # a sweep reports its progress as it goes
    while not all(job.status().code in running for job in sweeps):  # both running, none waiting in the queue
        assert time.monotonic() < deadline and not any(job.done() for job in sweeps), \
            [job.status().code for job in sweeps]
        time.sleep(0.1)
    started = time.monotonic()
    _client(hostile, "192.0.2.3").predict(checkpoint=SHIPPED, prompt="ROMEO:", max_new_tokens=200, temperature=1.0,
                                          top_k=0, top_p=1.0, seed=3, greedy=False, use_cache=True,
                                          drop_unknown=False, api_name="/sample")
    waited = time.monotonic() - started
    still_long = sum(not job.done() for job in sweeps)
    for job in sweeps:
        _refusal(lambda job=job: job.result(timeout=180))
    REPORT["a 200-character sample beside two timing sweeps"] = f"{waited:.1f} s, {still_long} still running after it"
    assert still_long, "the long jobs ended before the short sample did: nothing was measured"
    assert waited < 10, waited
    _unharmed(hostile, "a short sample beside two long jobs")


def test_one_client_flooding_the_queue_leaves_room_for_others(hostile):
    """Gradio's queue holds 64 events for everyone: one client posting 80 timing sweeps filled it, and every other
    visitor was told "the queue is full". A client now has at most QUEUE_PER_CLIENT events waiting or running; the
    rest of its joins are answered 429 with a message, another client's call gets in and answers, and the flooder's
    share comes back once its events are gone."""
    import uuid

    import httpx

    from playground.ui import QUEUE_PER_CLIENT, QUEUE_SIZE

    base = hostile.url.rstrip("/") + "/gradio_api"
    session = uuid.uuid4().hex  # one page of the flooder's: leaving it drops its waiting events
    sweep = [256, 8, 2, "fp32", "cpu", 512]  # a timing sweep: seconds each, two at a time in the long lane
    flooder, other = {"X-Forwarded-For": "203.0.113.99"}, {"X-Forwarded-For": "198.51.100.42"}
    with httpx.Client(timeout=60) as http:
        answers_ = [http.post(f"{base}/call/compare_timing", json={"data": sweep, "session_hash": session},
                              headers=flooder) for _ in range(QUEUE_SIZE + 16)]
        accepted = [a for a in answers_ if a.status_code == 200]
        refused = [a for a in answers_ if a.status_code == 429]
        started = time.monotonic()
        joined = http.post(f"{base}/call/tokenize", json={"data": ["Hello world", "this text", None]}, headers=other)
        assert joined.status_code == 200, f"another client was refused: {joined.status_code} {joined.text[:300]}"
        answer = http.get(f"{base}/call/tokenize/{joined.json()['event_id']}").text
        waited = time.monotonic() - started
        with http.stream("GET", f"{base}/queue/data", params={"session_hash": session}) as stream:
            next(stream.iter_lines(), None)  # the flooder's page opens and closes: Gradio drops what still waits
    REPORT[f"{len(answers_)} timing sweeps from one client"] = \
        f"{len(accepted)} queued, {len(refused)} refused; another client's tokenize answered in {waited:.2f} s"
    assert len(accepted) <= QUEUE_PER_CLIENT < len(answers_) and len(accepted) + len(refused) == len(answers_)
    assert "limit for one visitor" in refused[0].json()["detail"]
    assert answer.startswith("event: complete"), answer[:300]
    assert waited < 1.0, waited
    # the flooder's share comes back: a small sweep queues behind its two running ones and answers
    _client(hostile, flooder["X-Forwarded-For"]).predict(16, 2, 1, "fp32", "cpu", 16, api_name="/compare_timing")
    _unharmed(hostile, "one client flooding the queue")


# ----------------------------------------------------------------------------- uploads, bodies, the Hub cache


def _nanogpt_files(folder: Path) -> tuple[Path, Path]:
    """A real nanoGPT ckpt.pt (tests/test_convert.py's reference model, in train.py's layout) and its meta.pkl."""
    from test_convert import reference_model, save_nanogpt, write_meta

    save_nanogpt(folder / "ckpt.pt", reference_model(bias=True), bias=True)
    write_meta(folder / "meta.pkl")
    return folder / "ckpt.pt", folder / "meta.pkl"


def test_a_small_upload_sharing_a_nested_list_is_refused_at_once(hostile, tmp_path):
    """A few hundred bytes of meta.pkl (or model_args inside ckpt.pt) holding a shared nested list ([a, a] 60 deep)
    has a repr of 2**60 leaves: formatted into an error message, it held the GIL (every visitor's call stalled) until
    memory ran out. Both uploads are refused at once, with a short message, and nothing is written."""
    import pickle

    from test_convert import PLACEHOLDER, _edit_model_args, _hostile_ckpt, _with_payload

    ckpt, meta = _nanogpt_files(tmp_path)
    nested_meta = tmp_path / "nested-meta.pkl"
    nested_meta.write_bytes(_with_payload(pickle.dumps({"itos": {0: PLACEHOLDER}}), 60, "list"))
    nested_ckpt = tmp_path / "nested-args.pt"
    _hostile_ckpt(ckpt, nested_ckpt, 60, "list", _edit_model_args("bias"))
    address = "203.0.113.60"
    outcomes = {}
    for what, upload, vocabulary, name in (("meta.pkl", ckpt, nested_meta, "nested-meta"),
                                           ("model_args", nested_ckpt, meta, "nested-args")):
        started = time.monotonic()
        event, message = _call(hostile, "convert_nanogpt", [_uploaded(hostile, upload, address),
                                                           _uploaded(hostile, vocabulary, address), "", name], address)
        outcomes[what] = f"{event} in {time.monotonic() - started:.2f} s, {len(message)} characters"
        assert event == "error" and len(message) < 2000, (what, event, message[:2000])
        assert GENERIC_ERROR not in message and "Traceback" not in message, message
        assert not (hostile.weights / name).exists()
    REPORT["a nested shared list in meta.pkl and in model_args"] = "; ".join(f"{k}: {v}" for k, v in outcomes.items())
    _unharmed(hostile, "nested shared lists in uploads")


def test_ten_megabyte_bodies_queued_in_numbers_stay_a_bounded_few(hostile):
    """With the long lane busy, 150 calls of 10 MB each queued until memory ran out (about 1.4 GB sent). An event
    weighs one unit of the queue's share plus one per MiB it carries: one client has one such call queued at most,
    everyone together a few; the rest are refused at once (429) and nothing they sent is kept."""
    import uuid

    from playground.server.http import QUEUE_UNIT_BYTES
    from playground.ui import QUEUE_PER_CLIENT, QUEUE_UNITS

    base = hostile.url.rstrip("/") + "/gradio_api"
    holding, sending = uuid.uuid4().hex, uuid.uuid4().hex  # two pages: leaving one drops its events still waiting
    sweep = [64, 4, 1, "fp32", "cpu", 256]  # a small timing sweep (seconds); two run in the long lane, four wait
    with httpx.Client(timeout=60, headers={"X-Forwarded-For": "198.51.100.71"}) as http:
        for _ in range(6):
            queued = http.post(f"{base}/call/compare_timing", json={"data": sweep, "session_hash": holding})
            assert queued.status_code == 200, queued.text[:300]
    body = {"data": ["7" * 10_000_000, 4, 1, "fp32", "cpu", 256], "session_hash": sending}  # 10 MB where a number goes
    hostile.group.reset_peak()

    def post(index: int) -> int:
        headers = {"X-Forwarded-For": f"203.0.113.{100 + index % 10}"}
        try:
            with httpx.Client(timeout=60, headers=headers) as http:
                return http.post(f"{base}/call/compare_timing", json=body).status_code
        except httpx.TransportError as error:  # answered before the client finished sending: the message was lost
            return f"reset: {error!r}"[:200]

    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(post, range(20)))
    sent_in = time.monotonic() - started
    peak = hostile.group.peak_bytes()
    with httpx.Client(timeout=60) as http:
        for session in (sending, holding):  # both pages open and close: Gradio drops what still waits
            with http.stream("GET", f"{base}/queue/data", params={"session_hash": session}) as stream:
                next(stream.iter_lines(), None)
    accepted, refused = statuses.count(200), statuses.count(429)
    weight = 1 + 10_000_000 // QUEUE_UNIT_BYTES
    REPORT["20 calls of 10 MB from 10 addresses, the long lane busy"] = \
        f"{accepted} queued, {refused} refused in {sent_in:.1f} s; peak while they came {peak / GIB:.2f} GiB"
    assert accepted + refused == len(statuses), statuses  # no reset: a refusal reads the rest of the body first
    # one a client; the total, whatever of the sweeps' six units came free meanwhile (the 10 MB events wait behind
    # them, so none of theirs does)
    assert 1 <= accepted <= min(10 * (QUEUE_PER_CLIENT // weight), QUEUE_UNITS // weight), statuses
    _unharmed(hostile, "10 MB bodies queued in numbers")


def test_a_refused_hub_repo_leaves_the_users_own_cache_and_the_playgrounds_is_pruned(hostile):
    """A repo refused after its config.json came deleted that snapshot and its blobs from the shared
    ~/.cache/huggingface: typing the id of a model you already use lost your offline copy. Downloads now go to the
    playground's own cache, pruned by size (PLAYGROUND_MAX_HUB_CACHE_BYTES) least recently used first; the user's
    cache, holding that very repo, is left as it was."""
    from test_hub import SHA

    shared = hostile.home / ".cache" / "huggingface" / "hub"  # the user's own, where huggingface_hub puts it
    repo = shared / "models--learner--padded-weights"
    (repo / "blobs").mkdir(parents=True)
    (repo / "snapshots" / SHA).mkdir(parents=True)
    (repo / "blobs" / "abc").write_text("my offline copy")
    (repo / "snapshots" / SHA / "config.json").symlink_to(repo / "blobs" / "abc")
    before = {path.relative_to(shared): path.read_bytes() for path in shared.rglob("*") if path.is_file()}
    own = hostile.home / ".cache" / "attention-playground" / "hub"
    stale = own / "models--learner--stale"
    stale.mkdir(parents=True)
    (stale / "blob").write_bytes(b"s" * 50_000)
    os.utime(stale, (1, 1))  # used long ago
    address = "203.0.113.70"
    refused = _refusal(lambda: _client(hostile, address).predict(name="learner/padded-weights",
                                                                  api_name="/checkpoint_info"))
    assert refused and "padded-weights" in refused, refused
    assert {path.relative_to(shared): path.read_bytes() for path in shared.rglob("*") if path.is_file()} == before
    assert _refusal(lambda: _client(hostile, address).predict(name="learner/tiny-char",
                                                              api_name="/checkpoint_info")) is None
    in_use = own / "models--learner--tiny-char"
    refused_files = [p for p in (own / "models--learner--padded-weights").rglob("*") if p.is_file()
                     and p.relative_to(own).parts[1] in ("snapshots", "blobs")]
    REPORT["a refused Hub repo, then one that loads"] = \
        f"the playground's Hub cache {disk_bytes(own):,} bytes ({disk_bytes(in_use):,} the repo in use), " \
        f"{len(refused_files)} files of the refused one; the user's cache unchanged"
    assert not stale.exists() and in_use.is_dir() and not refused_files, sorted(own.rglob("*"))
    assert disk_bytes(own) - disk_bytes(in_use) <= HUB_CACHE_QUOTA  # the repo just used is never pruned
    assert {path.relative_to(shared): path.read_bytes() for path in shared.rglob("*") if path.is_file()} == before
    _unharmed(hostile, "a refused Hub repo")


def test_a_stride_0_checkpoint_is_charged_by_what_it_writes(hostile, tmp_path):
    """A 2.5 KB ckpt.pt of stride-0 tensors declaring 19M parameters became a 73 MB checkpoint charged 2.5 KB against
    the disk quota. Charged by the shape it declares, two of them from one visitor keep within the quota (room for
    one): the second replaces the first."""
    import torch
    from test_convert import NanoGPT, model_args

    _, meta = _nanogpt_files(tmp_path)
    args = {**model_args(True), "n_layer": 6, "n_head": 8, "n_embd": 512, "block_size": 256}
    with torch.device("meta"):
        shapes = {key: tensor.shape for key, tensor in NanoGPT(**args).state_dict().items()}
    flat, zero = tmp_path / "flat.pt", torch.zeros(())  # every tensor a view of one stored number
    torch.save({"model": {key: zero.expand(shape) for key, shape in shapes.items()}, "model_args": args,
                "iter_num": 1, "best_val_loss": torch.tensor(2.0), "config": {}}, flat)
    declared = sum(torch.Size(shape).numel() for shape in shapes.values())
    assert flat.stat().st_size < 10_000 and declared > 18_000_000
    address = "203.0.113.80"
    written = []
    for name in ("flat-1", "flat-2"):
        event, message = _call(hostile, "convert_nanogpt", [_uploaded(hostile, flat, address),
                                                           _uploaded(hostile, meta, address), "", name], address)
        assert event == "complete", message[:1000]
        written.append(disk_bytes(hostile.weights / name))
    left = sorted(run.name for run in stored_runs(hostile.weights) if run.name.startswith("flat-"))
    REPORT["two stride-0 ckpt.pt of 19M parameters"] = \
        f"{flat.stat().st_size:,} bytes each, {written[-1]:,} bytes written each; kept {', '.join(left)}"
    assert left == ["flat-2"], left  # the first went to make room: the quota holds one
    assert written[-1] > 1000 * flat.stat().st_size
    _unharmed(hostile, "stride-0 checkpoints")


def test_uploads_alone_keep_the_temp_space_within_its_quota(hostile, tmp_path):
    """The temp space was swept only when a call read an upload (a conversion, a corpus), so uploads never followed
    by a call stayed until Gradio's hourly clean-up: at the rate they came, any size. Each upload now makes room for
    itself first (server/uploads.py): five of 30 MB into a 100 MiB quota leave it within the quota, the
    newest kept."""
    blob = tmp_path / "upload.bin"
    kept = []
    for _ in range(5):
        blob.write_bytes(os.urandom(30_000_000))  # a new file each time: Gradio stores equal contents once
        kept.append(_uploaded(hostile, blob, "203.0.113.90")["path"])
        assert disk_bytes(hostile.gradio_tmp) <= TEMP_QUOTA
    REPORT["5 uploads of 30 MB, no call"] = \
        f"Gradio temp space {disk_bytes(hostile.gradio_tmp) / 2**20:.0f} MiB of {TEMP_QUOTA / 2**20:.0f} MiB"
    assert Path(kept[-1]).is_file()
    _unharmed(hostile, "uploads alone")


def _open_bodies(server, path: str, count: int, declared: int, sent: int, address=lambda i: f"198.51.100.{i}",
                 content_type: str = "application/json") -> list:
    """``count`` connections to ``path``, each declaring ``declared`` bytes and sending ``sent`` of them, then
    stalling; returns their sockets (the caller closes them). X-Forwarded-For: ``address(i)``."""
    import socket

    host, port = server.url.split("//")[1].rstrip("/").split(":")
    opened = []
    for i in range(count):
        connection = socket.create_connection((host, int(port)), timeout=10)
        connection.sendall((f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {content_type}\r\n"
                            f"Content-Length: {declared}\r\nX-Forwarded-For: {address(i)}\r\n\r\n").encode())
        try:
            connection.sendall(b"[" + b"1" * (sent - 1))
        except OSError:  # answered and closed while it was sending: refused, as it should be
            pass
        opened.append(connection)
    return opened


def _status(connection) -> int | None:
    """The HTTP status the server answers on ``connection`` within 5 s (None: none)."""
    connection.settimeout(5)
    try:
        head = connection.recv(200)
    except OSError:
        return None
    return int(head.split()[1]) if head.startswith(b"HTTP/1.1") else None


def test_slow_bodies_on_the_queue_skipping_routes_are_bounded_and_dropped(hostile):
    """245 connections to /gradio_api/run/why_to_attention, each declaring 11 MB and sending all but its last bytes,
    were held whole until the server was OOM-killed; /gradio_api/cancel and /gradio_api/component_server did the
    same. Bodies in flight are held against each client's share and everyone's: 30 such connections from 30
    addresses leave the server answering and within its memory, most refused 429; those let in are dropped 408
    once they stall; the component server is closed (404)."""
    hostile.group.reset_peak()
    declared, sent = 11_000_000, 1_000_000
    opened = []
    try:
        for path in ("/gradio_api/run/why_to_attention", "/gradio_api/cancel"):
            opened += _open_bodies(hostile, path, 15, declared, sent)
        _healthy(hostile, "30 stalled 11 MB bodies open")
        closed = _open_bodies(hostile, "/gradio_api/component_server", 1, declared, 1000)
        assert _status(closed[0]) == 404
        opened += closed
        statuses = [_status(connection) for connection in opened[:-1]]
        REPORT["30 stalled 11 MB bodies (run, cancel)"] = \
            f"answered {sorted(set(map(str, statuses)))}; peak {hostile.group.peak_bytes() / GIB:.2f} GiB"
        assert statuses.count(429) >= 20, statuses  # the total holds four such bodies at once
    finally:
        for connection in opened:
            connection.close()
    _unharmed(hostile, "slow bodies")


def _rss(server) -> int:
    """The server process's resident bytes now (VmRSS)."""
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _stall_and_close(server, declared: int = 11_000_000) -> tuple[int, int]:
    """Four 11 MB bodies let in (the total's room) send all but their last 100 KB and stall beside two to a closed
    route, then all close: (the server's RSS while they are open, once they have closed and it settled)."""
    opened = _open_bodies(server, "/gradio_api/cancel", 2, declared, declared - 100_000,
                          address=lambda i: f"198.51.100.{60 + i}")
    opened += _open_bodies(server, "/gradio_api/run/why_to_attention", 2, declared, declared - 100_000,
                           address=lambda i: f"198.51.100.{70 + i}")
    opened += _open_bodies(server, "/gradio_api/component_server", 2, declared, 1000,
                           address=lambda i: f"198.51.100.{80 + i}")
    time.sleep(2)
    held = _rss(server)
    for connection in opened:
        connection.close()
    time.sleep(3)
    return held, _rss(server)


def test_the_memory_of_slow_bodies_is_given_back_after_they_close(hostile):
    """Gradio's cancel and component-server routes held +630 MiB for 60 stalled connections, and the memory was not
    given back after they closed. Stalled bodies opened and closed three times: the server's resident memory after
    each time stays within 16 MiB of where the first left it (the first time warms up what these routes load once)."""
    _healthy(hostile, "before slow bodies")
    time.sleep(1)
    before = _rss(hostile)
    rounds = [_stall_and_close(hostile) for _ in range(3)]
    REPORT["4 stalled 11 MB bodies, opened and closed 3 times"] = \
        f"RSS {before / 2**20:.0f} MiB before; open, then closed: " + \
        ", ".join(f"{held / 2**20:.0f}/{after / 2**20:.0f}" for held, after in rounds) + " MiB"
    settled = rounds[0][1]
    assert all(after <= settled + 16 * 2**20 for _, after in rounds[1:]), (before, rounds)
    _unharmed(hostile, "slow bodies closed")


def test_a_forged_forwarded_hop_is_not_a_fresh_share(hostile):
    """With forwarding trusted, the first X-Forwarded-For hop as the client sent it was the client: each forged value
    a fresh share. Only the hop the proxy appends (the last) counts: two stalled 11 MB bodies whose forged first hops
    differ but whose last hop is one address are one client's, and the second is refused."""
    opened = _open_bodies(hostile, "/gradio_api/run/why_to_attention", 2, 11_000_000, 1_000_000,
                          address=lambda i: f"10.66.{i}.{i}, 203.0.113.44")
    try:
        assert _status(opened[1]) == 429
    finally:
        for connection in opened:
            connection.close()
    _unharmed(hostile, "forged forwarding")


def test_chunked_queue_joins_are_weighed_by_their_bytes(hostile):
    """A chunked join was weighed 1 unit whatever it carried: one address got 16 x 10 MB into the queue. Three
    chunked joins of 10 MB at once from one address: one at most gets in, the others are refused. Each holds its
    last bytes until all three have sent the rest (or 5 s pass: a refused one stops sending), so they are in flight
    together: on a quiet machine a join sent whole and answered before the next began was rightly let in."""
    base = hostile.url.rstrip("/") + "/gradio_api/queue/join"
    together = threading.Barrier(3, timeout=5)

    def join(i):
        def body():
            yield b'{"data": ["'
            for _ in range(100):
                yield b"a" * 100_000
            with contextlib.suppress(threading.BrokenBarrierError):
                together.wait()
            yield b'", "this text", null], "fn_index": 0, "session_hash": "chunked%d"}' % i

        try:
            return httpx.post(base, content=body(), timeout=60, headers={"X-Forwarded-For": "203.0.113.45",
                                                                        "Content-Type": "application/json"}).status_code
        except httpx.HTTPError:
            return None  # answered before it finished sending: refused

    hostile.group.reset_peak()
    with ThreadPoolExecutor(3) as pool:
        statuses = list(pool.map(join, range(3)))
    REPORT["3 chunked 10 MB joins from one address"] = f"statuses {statuses}"
    assert statuses.count(200) <= 1, statuses
    _unharmed(hostile, "chunked joins")


def test_uploads_in_flight_are_reserved_and_dropped_ones_leave_nothing(hostile):
    """100 uploads held open put 3.1 GB on disk against a 500 MB quota, and 740 MB of partial files stayed after the
    connections dropped. Ten uploads declaring 30 MB from ten addresses, each sending 2 MB and stalling: those past
    the 100 MiB quota are refused 413 before their bytes land; once they drop, no partial file is left."""
    boundary = "hostileboundary"
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.bin\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode()
    import socket

    host, port = hostile.url.split("//")[1].rstrip("/").split(":")
    opened, statuses = [], []
    try:
        for i in range(10):
            connection = socket.create_connection((host, int(port)), timeout=10)
            connection.sendall((f"POST /gradio_api/upload HTTP/1.1\r\nHost: {host}\r\nContent-Type: multipart/"
                                f"form-data; boundary={boundary}\r\nContent-Length: 30000000\r\n"
                                f"X-Forwarded-For: 198.51.100.{100 + i}\r\n\r\n").encode() + head)
            opened.append(connection)
            connection.settimeout(1)
            try:  # a refusal comes at once, before a byte of the file is read
                statuses.append(int(connection.recv(200).split()[1]))
            except OSError:
                statuses.append(None)
                connection.sendall(os.urandom(2_000_000))  # let in: 2 MB of it, then it stalls
        on_disk = disk_bytes(hostile.gradio_tmp)
        REPORT["10 uploads of 30 MB held open"] = f"answered {statuses}; temp space {on_disk / 2**20:.0f} MiB"
        assert statuses.count(413) >= 7 and on_disk <= TEMP_QUOTA, statuses
    finally:
        for connection in opened:
            connection.close()
    deadline = time.monotonic() + 30  # the server sees the drops as it next reads
    while time.monotonic() < deadline and list(hostile.gradio_tmp.glob("tmp*")):
        time.sleep(0.5)
    assert not list(hostile.gradio_tmp.glob("tmp*")), sorted(hostile.gradio_tmp.glob("tmp*"))
    _unharmed(hostile, "uploads in flight")


def test_a_tokenizer_bomb_loaded_again_and_again_is_refused_at_once(hostile):
    """A Hub repo with a 15 MB vocab.json (791,900 tokens, 12.7M parameters, under the cap) loaded, its tokenizer kept
    with each of the 4 kept checkpoints (+550 MiB each); the fifth such id OOM-killed a fresh server, and each load
    froze every visitor's calls for 2-6 s (here it held the GIL 10 s at a time). Five such ids (one whose config
    claims GPT-2's vocabulary beside the large vocab.json), each asked for twice: each refused at once, in words,
    before its tokenizer or weights are fetched; another visitor's tokenize answers meanwhile."""
    repos = []
    for index, vocab_size in enumerate([791_900] * 4 + [50_257]):
        repo = f"stranger/vocab-bomb-{index}"
        config = {"model_type": "gpt2", "vocab_size": vocab_size, "n_positions": 64, "n_embd": 16, "n_layer": 1,
                  "n_head": 2, "architectures": ["GPT2LMHeadModel"]}
        hostile.stub.repos[repo] = {"config.json": json.dumps(config).encode()}
        hostile.stub.claimed[repo] = {"vocab.json": 14_824_034, "merges.txt": 14,
                                      "model.safetensors": 4 * 16 * vocab_size + 4 * 16 * 64}
        repos.append(repo)
    hostile.group.reset_peak()
    tokenize = _tokenizer(hostile)
    alone = _median_and_p90([tokenize() for _ in range(3)])[0]
    client, refusals, took = _client(hostile, "192.0.2.80"), [], []
    for repo in repos * 2:
        started = time.monotonic()
        refusals.append(_refusal(lambda repo=repo: client.predict(
            text="Hello world", source="loaded checkpoint", checkpoint=repo, api_name="/tokenize")))
        took.append(time.monotonic() - started)
        took.append(tokenize())
    assert all(refusal and "not downloaded" in refusal for refusal in refusals), refusals
    assert sum("262,144" in refusal for refusal in refusals) == 8, refusals
    fetched = [path for method, path in hostile.stub.requests if "vocab-bomb" in path and "/resolve/" in path]
    assert all(path.endswith("config.json") for path in fetched), fetched  # neither the tokenizer nor the weights
    median = _median_and_p90(took)[0]
    REPORT["5 tokenizer bombs, twice each"] = \
        f"refused in {median:.2f} s median, slowest {max(took):.2f} s (tokenize alone {alone:.2f} s); peak " \
        f"{hostile.group.peak_bytes() / GIB:.2f} GiB"
    assert median < max(1.0, 5 * alone), took
    _unharmed(hostile, "tokenizer bombs")


def test_the_recording_route_is_closed(hostile):
    """Gradio's /gradio_api/process_recording wrote each anonymous 10 MB part to the system temp folder and never
    removed it (142 MB/s): it is closed, answered 404 before its body is read."""
    answer = httpx.post(hostile.url.rstrip("/") + "/gradio_api/process_recording", timeout=30,
                        files=[("files", ("part.webm", os.urandom(1_000_000), "video/webm"))],
                        headers={"X-Forwarded-For": "203.0.113.46"})
    assert answer.status_code == 404
    _unharmed(hostile, "the recording route")


def test_export_replace_never_deletes_what_is_not_an_export(hostile, tmp_path):
    """``python -m playground.export RUN FOLDER --replace`` deleted whatever folder it was given. Against the server's
    own weights folder, a home folder with .ssh and '.', it refuses (exit 2, no traceback) and deletes nothing."""
    import subprocess
    import sys

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key")
    env = {**os.environ, "HOME": str(home), "PLAYGROUND_WEIGHTS_DIR": str(hostile.weights)}
    for folder in (str(hostile.weights), str(home), "."):
        done = subprocess.run([sys.executable, "-m", "playground.export", SHIPPED, folder, "--replace"], cwd=home,
                              env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert (home / ".ssh" / "id_ed25519").read_text() == "key"
    _unharmed(hostile, "export --replace")


def test_randomised_requests_at_the_caps_from_8_clients(hostile):
    rng = random.Random(20261123)
    requests = []
    for _ in range(RANDOMISED_REQUESTS):
        kind = rng.choice(["tokenize", "attention", "checkpoint", "compare", "sample", "train", "stop"])
        if kind == "tokenize":
            requests.append(("/tokenize", dict(text="x" * rng.choice([1, 2000]), source="this text",
                                               checkpoint=SHIPPED)))
        elif kind == "attention":
            requests.append(("/attention_step", dict(
                source="random weights", checkpoint=SHIPPED, layer=0, head=0, seed=rng.randrange(100),
                embedding_dim=rng.choice([16, 1024]), head_size=rng.choice([8, 1024]), preset="journey",
                text="y" * rng.choice([8, 1024]), scale=True, mask=rng.random() < 0.5, temperature=1.0,
                mask_before_scaling=False, step=rng.choice(["2. Q, K, V", "6. Softmax weights"]), query=-1)))
        elif kind == "checkpoint":
            requests.append(("/checkpoint_info", dict(name=rng.choice([SHIPPED, "nope", "a/b", " " * 50]))))
        elif kind == "compare":
            requests.append(("/compare", dict(embedding_dim=rng.choice([64, 4096]), heads_num=rng.choice([4, 64]),
                                              seq_len=rng.choice([16, 1024]), batch=rng.choice([1, 64]), seed=0,
                                              qkv_bias=False, dtype="fp32", device="cpu")))
        elif kind == "sample":
            requests.append(("/sample", dict(checkpoint=SHIPPED, prompt="A", max_new_tokens=rng.choice([10, 2000]),
                                             temperature=1.0, top_k=0, top_p=1.0, seed=1, greedy=False,
                                             use_cache=rng.random() < 0.5, drop_unknown=False)))
        elif kind == "train":
            requests.append(("/train_start", dict(
                layers_num=rng.choice([1, 64]), heads_num=1, embedding_dim=rng.choice([16, 1024]),
                context_size=rng.choice([16, 1024]), batch_size=rng.choice([1, 1024]), steps=rng.choice([5, 20000]),
                learning_rate=3e-3, warmup_steps=0, dropout_rate=0.0, seed=0, device="cpu",
                corpus_choice="Tiny Shakespeare", upload=None, pasted="", run_name=f"r{rng.randrange(10**6)}")))
        else:
            requests.append(("/train_stop", {}))
    # one Client per worker thread: a visitor waits for one answer before asking again (a Client shares one event
    # stream between its calls, and concurrent calls on one Client race in gradio_client itself)
    local = threading.local()
    outcomes = {"answered": 0, "refused": 0}
    deadline = time.monotonic() + RANDOMISED_SECONDS

    def work(index):
        if not hasattr(local, "client"):
            local.client = _client(hostile)
        client = local.client
        api, kwargs = requests[index]
        if time.monotonic() > deadline:
            return "skipped"
        message = _refusal(lambda: client.predict(**kwargs, api_name=api))
        return "answered" if message is None else "refused"

    with ThreadPoolExecutor(8) as pool:
        for outcome in pool.map(work, range(len(requests))):
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    try:
        _client(hostile).predict(token=ADMIN_TOKEN, api_name="/train_stop")
    except (AppError, TypeError, ValueError):
        pass
    REPORT[f"{RANDOMISED_REQUESTS} randomised requests, 8 clients"] = ", ".join(f"{k} {v}" for k, v in outcomes.items())
    REPORT["weights/ after the run"] = f"{disk_bytes(hostile.weights) / 2**20:.0f} MiB"
    assert _tree_hash(hostile.weights / SHIPPED) == hostile.shipped_hash
    _unharmed(hostile, "randomised requests at the caps")




def test_the_server_stops_at_once_on_sigterm_with_a_stream_open(hostile):
    """Last, as it stops the server. uvicorn waits, without end, for every response still open before it stops, and
    Gradio gave it 5 s, twice: with a visitor's event stream open (a long sample streaming) the server took 10 to
    11 s to exit on SIGTERM, past docker stop's 10 s, and this suite's teardown 7 to 15 s. app.py's ``stop_serving``
    drops the open responses instead: the server exits by itself, with code 0, and logs no traceback for them."""
    client = _client(hostile, "192.0.2.91")
    job = client.submit(checkpoint=SHIPPED, prompt="ROMEO:", max_new_tokens=2000, temperature=1.0, top_k=0,
                        top_p=1.0, seed=4, greedy=False, use_cache=True, drop_unknown=False, api_name="/sample")
    deadline = time.monotonic() + 60
    while not job.outputs() and not job.done():  # streaming: its first characters have come
        assert time.monotonic() < deadline, "the sample streamed nothing in 60 s"
        time.sleep(0.1)
    assert not job.done(), "the sample ended before the server was stopped: no stream was open"
    logged = hostile.log.stat().st_size
    started = time.monotonic()
    hostile.process.terminate()
    code = hostile.process.wait(30)
    took = time.monotonic() - started
    with hostile.log.open("rb") as log:
        log.seek(logged)
        tail = log.read().decode("utf-8", errors="replace")
    REPORT["SIGTERM with a sample streaming"] = f"exited with {code} in {took:.1f} s"
    assert code == 0, tail[-3000:]
    assert "Traceback" not in tail and "Exception in ASGI" not in tail, tail[-3000:]
    assert took < 10, f"{took:.1f} s: past docker stop's 10 s the container is killed"
