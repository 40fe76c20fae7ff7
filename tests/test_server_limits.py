"""The server refuses oversized bodies before Gradio parses them, and bounds what it keeps per session."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request

import pytest
from conftest import local_client

from playground.config import Limits
from playground.server.http import body_cap
from playground.ui import SESSION_CAPACITY, build_app, launch_options

LIMITS = Limits(max_upload_bytes=1000)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_weights):
    app = build_app(weights=tiny_weights, limits=LIMITS)
    app.launch(server_name="127.0.0.1", server_port=_free_port(), prevent_thread_lock=True, quiet=True,
               **launch_options(LIMITS))
    yield app
    app.close()


def _post(app, body, headers=None):
    request = urllib.request.Request(f"{app.local_url}gradio_api/call/tokenize", data=body,
                                     headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_an_ordinary_call_passes(server):
    status, body = _post(server, json.dumps({"data": ["Hello", "this text", None]}).encode())
    assert status == 200 and b"event_id" in body


@pytest.mark.parametrize("attempt", range(5))
def test_a_declared_oversized_body_is_refused_before_parsing(server, attempt):
    """The client reads the 413 and its message, never a reset (the server reads the rest of the body first)."""
    status, body = _post(server, b'{"data": ["' + b"a" * (body_cap(LIMITS.max_upload_bytes) + 10) + b'"]}')
    assert status == 413 and "larger than this server's limit" in json.loads(body)["error"]


def test_a_body_declared_far_over_the_cap_is_answered_without_reading_it(server):
    host, port = server.local_url.split("//")[1].rstrip("/").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.putrequest("POST", "/gradio_api/call/tokenize")
    connection.putheader("Content-Type", "application/json")
    connection.putheader("Content-Length", str(10**10))  # 10 GB announced, not a byte of it sent
    connection.endheaders()
    response = connection.getresponse()
    assert response.status == 413 and "larger than this server's limit" in json.loads(response.read())["error"]
    connection.close()


def test_a_chunked_oversized_body_is_cut_off_and_the_server_stays_up(server):
    def chunks():
        yield b'{"data": ["'
        for _ in range(60):
            yield b"a" * 100_000
        yield b'"]}'

    try:
        status, _ = _post(server, chunks(), {"Transfer-Encoding": "chunked"})
        assert status == 413
    except (urllib.error.URLError, ConnectionError, http.client.HTTPException):
        # the server answered 413 and closed while the client was still sending: refused either way (urllib wraps
        # a reset while sending in URLError, but not one while reading the answer: a busy machine saw both)
        pass
    assert _post(server, json.dumps({"data": ["still up", "this text", None]}).encode())[0] == 200


def test_sessions_kept_are_bounded(server):
    assert server.state_session_capacity == SESSION_CAPACITY <= 1000
    assert server.delete_cache is not None


def test_the_deep_link_route_writes_no_file(server):
    """Gradio's /gradio_api/deep_link writes the session's components to a new file for every state it is asked
    about; the playground has no deep-link button, so the route is answered 404 and the disk is not touched."""
    from pathlib import Path

    client = local_client(server.local_url)
    client.predict("Hello", "this text", None, api_name="/tokenize")
    folder = Path(server.server_app.uploaded_file_dir) / "deep_links"
    before = sorted(folder.rglob("*")) if folder.exists() else []
    url = f"{server.local_url}gradio_api/deep_link?session_hash={client.session_hash}"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    after = sorted(folder.rglob("*")) if folder.exists() else []
    assert after == before, f"deep_link wrote {[str(path) for path in after if path not in before]}"
    assert status == 404 and "not used" in json.loads(body)["error"]


def test_the_queue_holds_a_bounded_number_of_events(server):
    assert server._queue.max_size is not None and server._queue.max_size <= 256


def test_no_route_skips_the_queue(server):
    """Gradio opens /gradio_api/run/<api_name> (a call that skips the queue, its concurrency limits and the
    per-client cap) everywhere but on a Space; the app closes it wherever it runs."""
    request = urllib.request.Request(f"{server.local_url}gradio_api/run/tokenize",
                                     data=json.dumps({"data": ["Hello", "this text", None]}).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status = response.status
    except urllib.error.HTTPError as error:
        status = error.code
    assert status == 404


def _rss_bytes() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))


def _call(app, api_name: str, data: list, session_hash: str) -> str:
    """A call in a session of its own, as a new visitor's page or API client makes; returns the event stream."""
    body = json.dumps({"data": data, "session_hash": session_hash}).encode()
    request = urllib.request.Request(f"{app.local_url}gradio_api/call/{api_name}", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:
        event_id = json.loads(response.read())["event_id"]
    with urllib.request.urlopen(f"{app.local_url}gradio_api/call/{api_name}/{event_id}", timeout=60) as response:
        return response.read().decode()


def test_sessions_keep_no_inputs_or_outputs(server):
    """Gradio keeps each session's last value of every component (for deep links, which are closed here): 200 sessions
    of three attention views grew the idle server by 500 MiB. After each request those copies are emptied, so a
    session keeps no figure and no text: 150 sessions that each send 0.9 MB of text leave the server's memory as it
    was (kept, they would hold 135 MB), and a session that drew an attention view keeps nothing of it."""
    import uuid

    text = "a" * 900_000
    _call(server, "tokenize", [text, "this text", None], "warm-up")
    before = _rss_bytes()
    for _ in range(150):
        _call(server, "tokenize", [text, "this text", None], uuid.uuid4().hex)
    grown = _rss_bytes() - before
    assert grown < 40 * 2**20, f"150 sessions grew the server by {grown / 2**20:.0f} MiB"

    session = uuid.uuid4().hex
    answer = _call(server, "attention_step", ["random weights", "shakespeare-char", 0, 0, 0, 64, 16, "journey",
                                              "To be, or not to be " * 10, True, True, 1.0, False,
                                              "6. Softmax weights", -1], session)
    assert answer.startswith("event: complete"), answer[:300]
    kept = server.state_holder.session_data[session]
    deadline = time.monotonic() + 10  # emptied as the request ends, which may be just after the client has read it
    while len(kept.config_values) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(kept.config_values) == 0, f"the session keeps {len(kept.config_values)} components' values"


def test_what_sessions_keep_is_set_aside_from_the_budget(server):
    """What Gradio keeps per session between requests (its states: the Sample tab's history at its longest) is
    taken out of the memory budget for every session it may keep, so requests are admitted against what is left;
    so are the request bodies it may be reading at once (server/bodies.py's total)."""
    from playground.budget import MemoryBudget, bodies_cost, sessions_cost
    from playground.ui import BODIES_IN_FLIGHT

    kept = sessions_cost(sessions=SESSION_CAPACITY, max_new_tokens=LIMITS.max_new_tokens)
    bodies = bodies_cost(BODIES_IN_FLIGHT * body_cap(LIMITS.max_upload_bytes))
    budget = server.playground_context.budget
    assert budget.total == MemoryBudget().total - kept.bytes - bodies.bytes
    assert f"{SESSION_CAPACITY} sessions kept" in budget.source and "request bodies in flight" in budget.source


def _share_call(share, server_app, client: str, body_bytes: int, chunks: int = 1) -> int:
    """The status QueueShare answers a /queue/join of ``body_bytes`` from ``client`` (200: passed to the app), its
    body sent in ``chunks``; a refusal must come after the whole body is read (asserted here)."""
    import asyncio
    import concurrent.futures

    statuses, left = [], [chunks]

    async def send(message):
        if message["type"] == "http.response.start":
            statuses.append(message["status"])
            assert message["status"] == 200 or left[0] == 0, f"answered {message['status']} mid-body: reset"

    async def receive():
        left[0] -= 1
        return {"type": "http.request", "body": b"x" * (body_bytes // chunks), "more_body": left[0] > 0}

    scope = {"type": "http", "method": "POST", "path": "/gradio_api/queue/join", "client": (client, 1),
             "headers": [(b"content-length", str(body_bytes).encode())], "app": server_app}
    # in a thread of its own: the module's server may leave an event loop running in this one
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, share(scope, receive, send)).result()
    return statuses[0]


def test_the_queue_is_shared_by_the_bytes_its_events_carry():
    """64 events of the 11 MB body cap would hold about 700 MB outside the memory budget: an event weighs one unit
    plus one per MiB of its inputs, a client may hold 16 units and everyone 64, so one large pasted corpus passes,
    a second from the same client does not, and large events from many clients stop at the total."""
    from types import SimpleNamespace

    from playground.server.http import QUEUE_UNIT_BYTES, QueueShare, payload_bytes, units

    events = {}

    def queued(client: str, body: list) -> None:  # an event Gradio's queue holds, as QueueShare reads it
        request = SimpleNamespace(client=SimpleNamespace(host=client), headers={})
        events[len(events)] = SimpleNamespace(request=request, data=SimpleNamespace(data=body))

    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    share = QueueShare(app, per_client=16, trust_forwarded=False, total=64)
    server_app = SimpleNamespace(get_blocks=lambda: SimpleNamespace(_queue=SimpleNamespace(event_ids_to_events=events)))
    corpus = "x" * (10 * QUEUE_UNIT_BYTES)  # a pasted corpus near the cap: 11 units
    assert payload_bytes([corpus, 3, {"a": [corpus]}]) == 2 * len(corpus) + 16 + 1 and units(len(corpus)) == 11
    assert _share_call(share, server_app, "10.0.0.1", len(corpus)) == 200  # nothing queued: one large call passes
    queued("10.0.0.1", [corpus, 64, 0.5])
    assert _share_call(share, server_app, "10.0.0.1", 100) == 200  # 11 + 1 <= 16
    assert _share_call(share, server_app, "10.0.0.1", len(corpus)) == 429  # 11 + 11 > 16
    # refused mid-upload, the client reads the message, not a reset: the rest of its body is read and dropped first
    assert _share_call(share, server_app, "10.0.0.1", len(corpus), chunks=40) == 429
    for address in ("10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"):  # 5 x 11 = 55 units queued
        queued(address, [corpus])
    assert _share_call(share, server_app, "10.0.0.6", 100) == 200  # 55 + 1 <= 64
    assert _share_call(share, server_app, "10.0.0.6", len(corpus)) == 429  # 55 + 11 > 64: the total
