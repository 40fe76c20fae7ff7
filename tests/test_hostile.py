"""A stranger on the public Space: the real app.py under a 3 GiB memory limit, every finding replayed.

The server runs as a user runs it (a copy of the project, HOME moved) inside a memory cgroup (or, where none can
be made, under an RSS watchdog); its memory budget is its own default, a share of the limit it finds. Each
scenario replays what once killed, filled or vandalised the server, then asserts that the server still answers,
that its peak stayed under the limit, and the scenario's own promise (disk under quota, the shipped checkpoint
byte-identical, another visitor's run untouched, a fast view answering in under a second while long jobs run).
Sixty randomised requests at the caps from 8 concurrent clients close the suite. ``pytest -s`` prints
each scenario's peak memory and the disk figures.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from browser_support import answers, start_app
from gradio_client import Client
from gradio_client.exceptions import AppError
from hostile_support import MemoryGroup, disk_bytes

pytestmark = pytest.mark.slow

GIB = 2**30
LIMIT = 3 * GIB
ADMIN_TOKEN = "admin-" + "7" * 24
SHIPPED = "shakespeare-char"
REPORT: dict[str, str] = {}
GENERIC_ERROR = "has not enabled verbose error reporting"
TEMP_QUOTA = 100 * 2**20  # PLAYGROUND_MAX_TEMP_BYTES for this server: uploads and exports together
# Requests at the caps, and how long they may take (those not started by then are skipped). The defaults fit CI;
# a longer run: PLAYGROUND_HOSTILE_REQUESTS=400 PLAYGROUND_HOSTILE_SECONDS=600 pytest -s tests/test_hostile.py
RANDOMISED_REQUESTS = int(os.environ.get("PLAYGROUND_HOSTILE_REQUESTS", "60"))
RANDOMISED_SECONDS = float(os.environ.get("PLAYGROUND_HOSTILE_SECONDS", "45"))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    group = MemoryGroup(LIMIT)
    # the proxy a Space has in front, as these tests' clients say it (X-Forwarded-For): several clients from one machine
    env = {"PLAYGROUND_ADMIN_TOKEN": ADMIN_TOKEN, "GRADIO_TEMP_DIR": str(root / "gradio-tmp"),
           "PLAYGROUND_TRUST_FORWARDED_FOR": "1", "PLAYGROUND_MAX_TEMP_BYTES": str(TEMP_QUOTA)}
    server_iter = start_app(root, env, preexec_fn=group.enter)
    server = next(server_iter)
    group.watch(server.process.pid)
    server.group = group
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


def _healthy(server, scenario: str) -> None:
    assert server.process.poll() is None, f"the server died during {scenario}:\n{server.log_tail()}"
    assert answers(server.url), f"the server stopped answering during {scenario}"
    assert not server.group.over_limit(), f"{scenario} hit the memory limit"
    peak = server.group.peak_bytes()
    REPORT[scenario] = f"peak {peak / GIB:.2f} GiB of {LIMIT / GIB:.1f}"
    assert peak < LIMIT


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

    from playground.ui.logs import MAX_LOG_LINE

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
    _healthy(hostile, "a 1 MB value for a Radio")


def test_the_killer_training_request_is_refused_with_what_to_lower(hostile):
    client = _client(hostile)
    message = _refusal(lambda: _train(client, layers_num=1, heads_num=1, embedding_dim=1024, context_size=1024,
                                      batch_size=1024, run_name="killer"))
    assert message and "batch_size" in message, message
    _healthy(hostile, "train batch 1024 x context 1024")


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
    _healthy(hostile, "runs with dropout at context 1024")


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
    _healthy(hostile, "4 big compares at once")


def test_name_variants_share_one_cached_checkpoint(hostile):
    client = _client(hostile)
    hostile.group.reset_peak()
    before = hostile.group.peak_bytes()
    for i in range(75):
        _refusal(lambda i=i: client.predict(name=SHIPPED + " " * (i % 8), api_name="/checkpoint_info"))
    growth = hostile.group.peak_bytes() - before
    REPORT["75 checkpoint_info name variants"] = f"memory grew {growth / 2**20:.0f} MiB"
    assert growth < 300 * 2**20
    _healthy(hostile, "75 checkpoint_info variants")


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
    _healthy(hostile, "ownership and the shipped model")


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
    _healthy(hostile, "attention at T 1024")


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
    _healthy(hostile, "exports at T 1024")


def test_fast_views_answer_while_long_jobs_run(hostile):
    long_jobs = [
        lambda: _client(hostile).predict(checkpoint=SHIPPED, prompt="ROMEO:", max_new_tokens=2000, temperature=1.0,
                                         top_k=0, top_p=1.0, seed=1, greedy=False, use_cache=False,
                                         drop_unknown=False, api_name="/sample"),
        lambda: _client(hostile).predict(checkpoint=SHIPPED, prompt="JULIET:", max_new_tokens=2000,
                                         temperature=1.0, top_k=0, top_p=1.0, seed=2, greedy=False,
                                         use_cache=False, drop_unknown=False, api_name="/sample"),
        lambda: _client(hostile).predict(embedding_dim=256, heads_num=8, batch=2, dtype="fp32", device="cpu",
                                         max_len=512, api_name="/compare_timing"),
    ]
    client = _client(hostile)

    def tokenize() -> float:
        started = time.monotonic()
        client.predict(text="Hello world", source="loaded checkpoint", checkpoint=SHIPPED, api_name="/tokenize")
        return time.monotonic() - started

    tokenize()  # the first call opens the checkpoint
    alone = sorted(tokenize() for _ in range(5))[2]  # this machine's pace now, with nothing else running
    threads = [threading.Thread(target=lambda job=job: _refusal(job), daemon=True) for job in long_jobs]
    for thread in threads:
        thread.start()
    time.sleep(2)
    latencies = []
    while any(t.is_alive() for t in threads) and len(latencies) < 20:
        latencies.append(tokenize())
        time.sleep(0.3)
    for thread in threads:
        thread.join(180)
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
    _healthy(hostile, "fast views beside long jobs")


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
    _healthy(hostile, "session churn from one address")


def test_a_short_sample_answers_while_two_long_jobs_run(hostile):
    """Two long jobs held the long lane, so a 200-character sample waited 33 s instead of 0.6 s: samples have their
    own lane now, where a short one takes no long place."""
    def sweep(address):
        return _refusal(lambda: _client(hostile, address).predict(
            embedding_dim=256, heads_num=8, batch=2, dtype="fp32", device="cpu", max_len=512,
            api_name="/compare_timing"))

    threads = [threading.Thread(target=sweep, args=(f"192.0.2.{i}",), daemon=True) for i in (1, 2)]
    for thread in threads:
        thread.start()
    time.sleep(2)
    assert all(thread.is_alive() for thread in threads)
    started = time.monotonic()
    _client(hostile, "192.0.2.3").predict(checkpoint=SHIPPED, prompt="ROMEO:", max_new_tokens=200, temperature=1.0,
                                          top_k=0, top_p=1.0, seed=3, greedy=False, use_cache=True,
                                          drop_unknown=False, api_name="/sample")
    waited = time.monotonic() - started
    still_long = sum(thread.is_alive() for thread in threads)
    for thread in threads:
        thread.join(180)
    REPORT["a 200-character sample beside two timing sweeps"] = f"{waited:.1f} s, {still_long} still running after it"
    assert still_long, "the long jobs ended before the short sample did: nothing was measured"
    assert waited < 10, waited
    _healthy(hostile, "a short sample beside two long jobs")


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
    _healthy(hostile, "one client flooding the queue")


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
    _healthy(hostile, "randomised requests at the caps")


