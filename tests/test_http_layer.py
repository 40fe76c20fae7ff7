"""The HTTP layer under the admission rules, driven as ASGI apps (no server): request bodies in flight per client and
in all, the read timeout, every Gradio route decided on, uploads reserved in the temp space's quota."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json

import pytest

from playground.server import routes, tenancy
from playground.server.bodies import BodiesInFlight
from playground.server.http import UnusedRoutes


def run(coroutine):
    """Run ``coroutine`` in a thread of its own (a browser test's event loop may be running in this one)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class Body:
    """A client's request body, sent in ``chunks``; the last one only once ``gate`` is set ("never": never)."""

    def __init__(self, chunks: list[bytes], gate=None):
        self.chunks, self.gate, self.sent = list(chunks), gate, 0

    async def receive(self):
        if self.sent == len(self.chunks):
            await asyncio.sleep(3600)  # the connection stays open: only a disconnect would come
        if self.sent == len(self.chunks) - 1 and self.gate is not None:
            await (asyncio.sleep(3600) if self.gate == "never" else self.gate.wait())
        self.sent += 1
        return {"type": "http.request", "body": self.chunks[self.sent - 1], "more_body": self.sent < len(self.chunks)}


def scope(path="/gradio_api/run/why_to_attention", client="10.0.0.1", declared: int | None = None, method="POST"):
    headers = [(b"content-type", b"application/json")]
    if declared is not None:
        headers.append((b"content-length", str(declared).encode()))
    return {"type": "http", "method": method, "path": path, "client": (client, 1234), "headers": headers}


async def gradio(scope, receive, send):
    """Gradio's way with a body: read it whole, then answer (FastAPI answers 400 when the read fails)."""
    try:
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
    except Exception:  # noqa: BLE001 (FastAPI's own catch-all around reading a body)
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b"There was an error parsing the body"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(len(body)).encode()})


async def call(app, request_scope, body: Body):
    sent = []

    async def send(message):
        sent.append(message)

    await app(request_scope, body.receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    answer = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, answer


def bodies(**options) -> BodiesInFlight:
    settings = dict(per_client=1000, total=2500, client_of=lambda scope: scope["client"][0], read_timeout=30)
    return BodiesInFlight(gradio, **{**settings, **options})


def test_a_body_within_the_shares_passes_and_holds_nothing_after():
    app = bodies()
    assert run(call(app, scope(declared=900), Body([b"x" * 450, b"x" * 450]))) == (200, b"900")
    assert run(call(app, scope(), Body([b"x" * 300] * 3))) == (200, b"900")  # chunked: no length declared
    assert app.held_total == 0 and not app.held


def test_bodies_in_flight_are_capped_per_client_and_in_all_as_they_arrive():
    """245 connections each sending all but the last bytes of 11 MB were held whole until the server died: a client's
    bodies in flight count against its share from their first byte (declared or chunked), everyone's against the
    total, and the one past either is answered 429 before more of it is read."""
    app = bodies()

    async def scenario():
        gate = asyncio.Event()
        stalled = [asyncio.create_task(call(app, scope(client=client, declared=800), Body([b"x" * 700, b"x" * 100],
                                                                                          gate)))
                   for client in ("10.0.0.1", "10.0.0.2", "10.0.0.3")]
        while sum(app.held.values()) < 2400:  # their first chunks are in: 3 x 800 held
            await asyncio.sleep(0)
        same_client = await call(app, scope(client="10.0.0.1"), Body([b"y" * 50, b"y" * 200]))  # chunked
        over_total = await call(app, scope(client="10.0.0.4", declared=200), Body([b"z" * 200]))
        held = dict(app.held)
        gate.set()
        return same_client, over_total, held, await asyncio.gather(*stalled)

    same_client, over_total, held, finished = run(scenario())
    assert same_client[0] == 429 and "at most 1,000 bytes at a time from one visitor" in json.loads(same_client[1])[
        "detail"]
    assert over_total[0] == 429 and "too many large requests at once" in json.loads(over_total[1])["detail"]
    assert held == {"10.0.0.1": 800, "10.0.0.2": 800, "10.0.0.3": 800}
    assert [status for status, _ in finished] == [200, 200, 200]
    assert app.held_total == 0  # every request let go of its bytes when it ended


def test_a_chunked_body_past_the_share_is_refused_as_its_bytes_arrive():
    app = bodies()
    status, answer = run(call(app, scope(), Body([b"x" * 400] * 4)))  # 1,600 bytes, none declared
    assert status == 429 and b"400" not in answer
    assert app.held_total == 0


def test_a_body_that_stops_coming_is_answered_408_and_let_go():
    app = bodies(read_timeout=0.2)
    status, answer = run(call(app, scope(declared=900), Body([b"x" * 800, b"x" * 100], "never")))
    assert status == 408 and "stopped arriving" in json.loads(answer)["detail"]
    assert app.held_total == 0


def test_an_upload_is_read_with_the_timeout_but_not_held_in_memory():
    app = bodies(read_timeout=0.2)
    assert run(call(app, scope("/gradio_api/upload", declared=5000), Body([b"x" * 2500] * 2)))[0] == 200
    assert run(call(app, scope("/gradio_api/upload"), Body([b"x" * 10, b"x"], "never")))[0] == 408


def test_every_route_gradio_serves_is_decided_on():
    """The table server/routes.py keeps (and docs/admission.md shows) names every route the installed Gradio serves:
    a route a new Gradio adds fails here until it is decided on."""
    import gradio as gr
    from gradio.routes import App

    with gr.Blocks() as blocks:
        text = gr.Textbox()
        text.change(lambda value: value, text, text)
    served = set()

    def walk(found):
        for route in found:
            if hasattr(route, "path"):
                for method in getattr(route, "methods", None) or ("GET",):
                    served.add((method, route.path.rstrip("/") or "/"))
            else:  # an included router: its routes carry the full path
                walk(route.original_router.routes)

    walk(App.create_app(blocks).routes)
    named = {(method, route.path) for route in routes.ROUTES for method in route.methods.split(",")}
    missing = sorted(served - named)
    assert not missing, f"Gradio serves routes server/routes.py does not decide on: {missing}"


@pytest.mark.parametrize("path", ["/gradio_api/process_recording", "/gradio_api/component_server",
                                  "/gradio_api/component_server/", "/gradio_api/stream/abc", "/gradio_api/deep_link",
                                  "/gradio_api/vibe-edit", "/gradio_api/run-history/connect", "/login"])
def test_a_closed_route_answers_404_without_reading_its_body(path):
    passed = []

    async def gradio_app(scope, receive, send):
        passed.append(scope["path"])

    async def receive():
        raise AssertionError("the body was read")

    sent = []

    async def send(message):
        sent.append(message)

    run(UnusedRoutes(gradio_app)(scope(path, declared=10_000_000), receive, send))
    assert not passed and sent[0]["status"] == 404


@pytest.mark.parametrize("path", ["/gradio_api/queue/join", "/gradio_api/run/why_to_attention", "/gradio_api/cancel",
                                  "/gradio_api/upload", "/gradio_api/file=/tmp/gradio/stream/x", "/"])
def test_a_used_route_is_not_closed(path):
    assert not routes.closed(path)


def test_the_docs_show_the_route_table():
    from conftest import REPO

    assert routes.table() in (REPO / "docs" / "admission.md").read_text(encoding="utf-8")


def test_only_the_hop_the_proxy_appends_names_the_client():
    """With forwarding trusted, the first X-Forwarded-For hop, as the client sent it, was taken as the client: each
    forged value a fresh share. A proxy appends the address it saw, so the client is the hop the last trusted proxy
    appended; what comes before it is the client's own claim."""
    forged = {"x-forwarded-for": "6.6.6.6, 7.7.7.7, 203.0.113.7"}
    assert tenancy.client_address(forged, "10.0.0.2", trust_forwarded=1) == "203.0.113.7"
    assert tenancy.client_address(forged, "10.0.0.2", trust_forwarded=2) == "7.7.7.7"  # two proxies in front
    assert tenancy.client_address({"x-forwarded-for": "203.0.113.7"}, "10.0.0.2", trust_forwarded=2) == "10.0.0.2"
    assert tenancy.client_address(forged, "10.0.0.2", trust_forwarded=0) == "10.0.0.2"
    request = scope(client="10.0.0.2")
    request["headers"].append((b"X-Forwarded-For", b"6.6.6.6, 203.0.113.8"))
    assert tenancy.scope_client(request, 1) == "203.0.113.8"


def test_the_number_of_proxies_is_a_setting(monkeypatch):
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("PLAYGROUND_TRUST_FORWARDED_FOR", raising=False)
    assert tenancy.trusts_forwarded() == 0
    monkeypatch.setenv("SPACE_ID", "someone/playground")
    assert tenancy.trusts_forwarded() == 1
    monkeypatch.setenv("PLAYGROUND_FORWARDED_PROXIES", "2")
    assert tenancy.trusts_forwarded() == 2


def test_a_chunked_queue_join_is_weighed_by_the_bytes_that_arrive():
    """A join without Content-Length was weighed 1 unit whatever it carried: one address got 16 x 10 MB into the
    queue against its 16 units. Its weight now grows with its bytes, and the join that passes the share is refused
    as they arrive."""
    from types import SimpleNamespace

    from playground.server.http import QUEUE_UNIT_BYTES, QueueShare

    share = QueueShare(gradio, per_client=16, trust_forwarded=0, total=64)
    server_app = SimpleNamespace(get_blocks=lambda: SimpleNamespace(_queue=SimpleNamespace(event_ids_to_events={})))
    join = {**scope("/gradio_api/queue/join"), "app": server_app}
    chunk = b"x" * QUEUE_UNIT_BYTES
    assert run(call(share, join, Body([chunk] * 10)))[0] == 200  # 11 units: within 16

    async def two_at_once():
        gate = asyncio.Event()
        first = asyncio.create_task(call(share, join, Body([chunk] * 10 + [b"]"], gate)))
        while share._joining.get("10.0.0.1", 0) < 11:
            await asyncio.sleep(0)
        second = await call(share, join, Body([chunk] * 10))  # 11 + 11 > 16: refused part-way
        gate.set()
        return await first, second

    first, second = run(two_at_once())
    assert first[0] == 200 and second[0] == 429 and "limit for one visitor is 16" in json.loads(second[1])["detail"]
    assert not share._joining


def ledger(root, **options):
    from playground.server.uploads import UploadLedger

    settings = dict(root_of=lambda: root, max_bytes=1000, max_age_seconds=3600, per_client=400, largest=300)
    return UploadLedger(**{**settings, **options})


def put(path, size: int, age: float = 0.0):
    import os
    import time

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (time.time() - age, time.time() - age))
    return path


def test_uploads_in_flight_are_reserved_in_the_quota_and_per_client(tmp_path):
    """100 uploads held open put 3.1 GB on disk against a 500 MB quota: each is now reserved before its bytes land,
    against its client's share and the quota, and one past either is refused."""
    from playground.server.uploads import UploadRefusedError

    uploads = ledger(tmp_path)
    first = uploads.reserve("a", 300)
    with pytest.raises(UploadRefusedError, match="one visitor at a time"):
        uploads.reserve("a", 200)  # 300 + 200 > 400 for one client
    held = [first, uploads.reserve("b", 300), uploads.reserve("c", 300)]
    with pytest.raises(UploadRefusedError, match="taken by uploads under way"):
        uploads.reserve("d", None)  # chunked: the largest, 300; 900 + 300 > 1000
    uploads.release(held.pop(), written=[])
    assert uploads.reserve("d", None).num_bytes == 300 and uploads.reserved == 900


def test_the_sweep_never_counts_or_removes_an_upload_still_being_written(tmp_path):
    """The sweep before each upload unlinked others still being written (their space stayed allocated)."""
    from playground.server import temp_space

    writing = put(tmp_path / "tmpabc123", 600)  # Gradio's file for an upload under way
    stored = put(tmp_path / "f00d" / "old.txt", 600, age=60)
    temp_space.sweep(tmp_path, 1000, 3600, incoming=600)
    assert writing.is_file() and not stored.exists()
    assert temp_space.usage(tmp_path, counted_only=True) == 0 and temp_space.usage(tmp_path) == 600


def test_a_clients_own_oldest_uploads_make_room_for_theirs_and_an_unfinished_one_leaves_nothing(tmp_path):
    """One client's uploads evicted everyone else's uploads and exports, and 740 MB of partial files stayed after
    their connections dropped: a client's own earlier uploads make room for theirs first, and what an upload that
    ended unwritten left half-written is removed."""
    uploads = ledger(tmp_path)
    theirs = put(tmp_path / "aa" / "theirs.txt", 300)
    first = uploads.reserve("b", 300)
    uploads.release(first, written=[str(theirs)])
    others = put(tmp_path / "bb" / "others.txt", 300)
    uploads.release(uploads.reserve("a", 300), written=[str(others)])
    second = uploads.reserve("b", 300)  # b's 300 stored + 300 > 400: b's own first upload goes, a's stays
    assert not theirs.exists() and others.is_file()
    partial = put(tmp_path / "tmpdropped", 120)
    uploads.release(second, written=None)  # the connection dropped: nothing else in flight, so it goes
    assert not partial.exists() and uploads.reserved == 0


def test_the_upload_route_reserves_before_gradio_reads_and_cleans_up_after_a_drop(tmp_path):
    from playground.server.uploads import Uploads

    async def gradio_upload(scope, receive, send):  # writes as it reads, like Gradio's multipart parser
        partial = tmp_path / "tmpwriting"
        with partial.open("wb") as file:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise OSError("client disconnected")
                file.write(message.get("body", b""))
                if not message.get("more_body"):
                    break
        stored = tmp_path / "cafe" / "upload.txt"
        stored.parent.mkdir()
        partial.rename(stored)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": json.dumps([str(stored)]).encode()})

    uploads = ledger(tmp_path)
    app = Uploads(gradio_upload, uploads, client_of=lambda scope: scope["client"][0])
    assert run(call(app, scope("/gradio_api/upload", declared=200), Body([b"x" * 100] * 2)))[0] == 200
    assert uploads._stored == {"10.0.0.1": [tmp_path / "cafe" / "upload.txt"]} and uploads.reserved == 0
    refused = run(call(app, scope("/gradio_api/upload", declared=5000), Body([b"x"])))
    assert refused[0] == 413 and "one visitor at a time" in json.loads(refused[1])["detail"]

    class Dropped(Body):
        async def receive(self):
            if self.sent == 1:
                return {"type": "http.disconnect"}
            return await super().receive()

    status, _ = run(call(app, scope("/gradio_api/upload", client="10.0.0.2", declared=200), Dropped([b"x" * 100] * 2)))
    assert status == 400 and not (tmp_path / "tmpwriting").exists() and uploads.reserved == 0


def test_a_direct_call_is_checked_before_gradio_reads_it():
    """The queue-skipping routes answered bad input with HTTP 500 and a traceback each (119 MB of log an hour from one
    client): an event that runs in the browser only, a wrong number of inputs, a body without a list of inputs are
    refused in Gradio's own error form; a good call reaches Gradio with its body as it came."""
    from types import SimpleNamespace

    from playground.server.routes import DirectCalls

    fns = {0: SimpleNamespace(api_name="why_to_attention", fn=print, inputs=[1, 2, 3]),
           1: SimpleNamespace(api_name="attention_next", fn=None, inputs=[1])}
    server_app = SimpleNamespace(get_blocks=lambda: SimpleNamespace(fns=fns))
    app = DirectCalls(gradio)

    def direct(api: str, body: bytes):
        return run(call(app, {**scope(f"/gradio_api/run/{api}"), "app": server_app}, Body([body[:5], body[5:]])))

    good = json.dumps({"data": ["a", "b", "c"]}).encode()
    assert direct("why_to_attention", good) == (200, str(len(good)).encode())
    for api, body, words in (("attention_next", b'{"data": [1]}', "runs in the browser only"),
                             ("why_to_attention", b'{"data": [1]}', "takes 3 inputs, not 1"),
                             ("why_to_attention", b'{"data": "abc"}', "no list of inputs"),
                             ("why_to_attention", b"not json", "not JSON"),
                             ("nothing_here", b'{"data": []}', "no event named"),
                             ("why_to_attention", b'{"data": [1], "fn_index": 1}', "runs in the browser only")):
        status, answer = direct(api, body)
        assert status == 400 and words in json.loads(answer)["error"], answer


def test_refusals_never_show_the_servers_paths(monkeypatch, tmp_path):
    """Refusals showed the server's absolute weights path: a handler's message shows a path inside the weights folder
    as weights/<run>, any other by its file's name, and leaves URLs and fractions alone."""
    from playground.ui.common import message_for

    monkeypatch.setenv("PLAYGROUND_WEIGHTS_DIR", str(tmp_path / "weights"))
    message = message_for(ValueError(f"no config.json in {tmp_path}/weights/my-run; see https://huggingface.co/a/b, "
                                     f"1/2 of /srv/secret/upload/ckpt.pt"))
    assert message == "No config.json in weights/my-run; see https://huggingface.co/a/b, 1/2 of ckpt.pt"


def test_a_chunked_body_past_the_size_cap_is_answered_413_even_where_the_app_answers_its_failed_read():
    """FastAPI answers 400 when reading a body fails, and the cap fails the read: the 413 must go instead. On a fresh
    clone (two workers) test_server_limits' chunked 6 MB body got FastAPI's 400 through."""
    from playground.server.http import BodySizeLimit

    app = BodySizeLimit(gradio, max_bytes=1000)
    status, answer = run(call(app, scope(), Body([b"x" * 400] * 4)))  # 1,600 bytes, none declared
    assert status == 413 and "larger than this server's limit" in json.loads(answer)["error"]
    assert run(call(app, scope(), Body([b"x" * 400] * 2))) == (200, b"800")
