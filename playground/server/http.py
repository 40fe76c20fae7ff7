"""What the web server refuses before Gradio reads a request: bodies over a size cap, and routes it does not use.

Gradio parses a JSON body whole before any handler can refuse it, so this ASGI middleware answers 413 as soon as
the declared Content-Length, or the bytes actually received (for a chunked body), pass the cap. File uploads have
their own cap (Gradio's ``max_file_size``), so the upload route is left to it.

Before answering, the rest of a body up to the cap again is read and thrown away (never kept): a server that
answers and closes while a client is still sending makes the client's TCP stack see a reset instead of the 413
and its message. A body declared larger than that is answered at once without reading it.

Gradio's ``/gradio_api/deep_link`` writes a session's components (figures included) to a new file under its upload
folder on every call whose state differs, for the DeepLinkButton; Gradio has no switch to turn the route off and
the playground has no such button, so ``UnusedRoutes`` answers it 404 before Gradio sees it, and so every route
server/routes.py closes (the recording route, the component server, streaming, ...), before a byte of its body
is read.

Gradio's queue holds at most ``max_size`` events for everyone together, so one client sending calls faster than
they are served filled it and every other visitor was told "the queue is full". ``QueueShare`` counts, when a
client asks to join the queue, the events of that client Gradio holds (waiting or running: the queue's
``event_ids_to_events``, read, never changed) and the joins of that client still under way, and answers 429 past
``per_client``; an event counts until Gradio drops it, when it completes or its client goes, so nothing is released
by hand. A client is tenancy.client_address: the Space proxy's X-Forwarded-For where trusted, else the connection.

Gradio keeps, for each of its last ``state_session_capacity`` sessions, a copy of every component's config with the
last value the session sent or received (a figure, a pasted corpus): 200 sessions of three attention views grew the
idle server by 500 MiB. Only the deep-link route reads those copies, and it is closed here, so ``KeptValues``
empties them after every request (on the event loop, where Gradio writes them: never half-way through a write).
What a session keeps besides (its gr.State values, the components its events updated) is small and is set aside
from the memory budget (budget.sessions_cost, set aside by ui/__init__.py).
"""

from __future__ import annotations

import json
import logging
from collections import Counter

from starlette.datastructures import Headers

from playground.server import routes, tenancy

logger = logging.getLogger(__name__)

UPLOAD_PATH_SUFFIX = "/upload"
# the routes that put an event in Gradio's queue: the page's join, and the simple API's POST /call/<api_name>
QUEUE_JOIN_SUFFIX = "/gradio_api/queue/join"
QUEUE_CALL_PART = "/gradio_api/call/"


def body_cap(max_upload_bytes: int) -> int:
    """The largest request body any endpoint needs: a pasted corpus (JSON-escaped, so up to 2x) plus the rest."""
    return 2 * max_upload_bytes + 2**20


class BodySizeLimit:
    """Pure ASGI middleware: 413 for a body over ``max_bytes`` on any route but uploads."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("path", "").rstrip("/").endswith(UPLOAD_PATH_SUFFIX):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            if int(declared) <= 2 * self.max_bytes:
                await _discard_rest(receive, 0, 2 * self.max_bytes)
            await self._refuse(send)
            return
        received = 0
        refused = False
        complete = False  # the client has sent its whole body

        async def counted_receive():
            nonlocal received, refused, complete
            message = await receive()
            if message["type"] == "http.request":
                complete = not message.get("more_body", False)
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    refused = True
                    raise _BodyTooLargeError
            return message

        started = False

        async def tracked_send(message):
            nonlocal started
            if refused:  # the app answering its failed read (FastAPI's 400): the 413 goes instead
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except Exception:
            if not refused:
                raise
        if refused and not started:
            if not complete:
                await _discard_rest(receive, received, 2 * self.max_bytes)
            await self._refuse(send)

    async def _refuse(self, send):
        body = json.dumps({"error": f"The request is larger than this server's limit of {self.max_bytes:,} bytes; "
                                    "send less text (PLAYGROUND_MAX_UPLOAD_BYTES sets the limit)."}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class UnusedRoutes:
    """Pure ASGI middleware: 404 for Gradio routes the playground does not use (routes.closed), its body unread."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not routes.closed(scope.get("path", "")):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "This route is not used by Attention Playground."}).encode()
        await send({"type": "http.response.start", "status": 404,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


_WARNED: set[str] = set()


def _read_gradio(read, consequence: str) -> list:
    """``list(read())`` of Gradio's own state, read-only; [] with one warning per process (``consequence``) where this
    Gradio keeps it elsewhere or has none yet (not launched, no queue)."""
    try:
        return list(read())
    except AttributeError:
        if consequence not in _WARNED:
            logger.warning(consequence)
            _WARNED.add(consequence)
        return []


QUEUE_UNIT_BYTES = 2**20  # an event weighs one unit, plus one per MiB its inputs carry (a pasted corpus)


def payload_bytes(value, depth: int = 4) -> int:
    """About the bytes an event's inputs hold: the length of every string and bytes value in them, walked ``depth``
    levels into lists and dicts (deeper, or anything else, counts 16 bytes): cheap, and never builds anything."""
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if depth and isinstance(value, dict):
        return sum(payload_bytes(k, depth - 1) + payload_bytes(v, depth - 1) for k, v in value.items())
    if depth and isinstance(value, (list, tuple)):
        return sum(payload_bytes(item, depth - 1) for item in value)
    return 16


def units(size: int) -> int:
    """What an event of ``size`` bytes weighs in the queue's shares: 1, plus 1 per QUEUE_UNIT_BYTES."""
    return 1 + max(0, int(size)) // QUEUE_UNIT_BYTES


class QueueShare:
    """Pure ASGI middleware: 429 for a client's join past ``per_client`` units of theirs in Gradio's queue, or past
    ``total`` units of everyone's. An event weighs one unit plus one per MiB of its inputs (``units``), so the bodies
    the queue holds are bounded in bytes, not only in number: 64 events of the 11 MB body cap would hold some 700 MB
    outside the memory budget; 64 units hold 64 MiB at most. A join that declares no length (chunked) weighs the
    bytes that have arrived, and is refused part-way once they pass a share."""

    def __init__(self, app, per_client: int, trust_forwarded: int, total: int | None = None):
        self.app = app
        self.per_client = per_client
        self.total = total
        self.trust_forwarded = trust_forwarded
        self._joining: Counter[str] = Counter()  # units of joins under way per client, not yet in Gradio's queue

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "").rstrip("/") if scope["type"] == "http" else ""
        if scope.get("method") != "POST" or not (path.endswith(QUEUE_JOIN_SUFFIX) or QUEUE_CALL_PART in path):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        client = self._address(headers, (scope.get("client") or (None,))[0])
        declared = headers.get("content-length", "")
        weight = units(int(declared) if declared.isdigit() else 0)
        queued = self._queued(scope.get("app"))
        refusal = self._refusal(client, queued, weight)
        if refusal:
            await _refuse(receive, send, refusal)
            return
        self._joining[client] += weight
        received, refused, started = 0, "", False

        async def weighed_receive():
            """A chunked join (no Content-Length) weighs what has arrived: it was 1 unit for 10 MB."""
            nonlocal received, weight, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                grown = units(received) - weight
                if grown > 0:
                    refused = self._refusal(client, queued, grown)
                    if refused:
                        raise _QueueShareError
                    self._joining[client] += grown
                    weight += grown
            return message

        async def guarded_send(message):
            nonlocal started
            if refused:  # the app answering its failed read (FastAPI's 400): the refusal goes instead
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, weighed_receive, guarded_send)
        except Exception:
            if not refused:
                raise
        finally:
            self._joining[client] -= weight
            if self._joining[client] <= 0:
                del self._joining[client]
        if refused and not started:
            await _refuse(receive, send, refused)

    def _refusal(self, client: str, queued: Counter[str], weight: int) -> str:
        """Why ``weight`` more units for ``client`` would pass a share ("" where it would not)."""
        held = self._joining[client] + queued.get(client, 0)
        if held + weight > self.per_client:
            return (f"You have {held} requests' worth waiting or running on this server (large inputs count more), "
                    f"its limit for one visitor is {self.per_client}: wait for them to finish, then ask again.")
        if self.total is not None and sum(self._joining.values()) + sum(queued.values()) + weight > self.total:
            return "This server's queue is full of large requests: wait a moment, then ask again."
        return ""

    def _address(self, headers, host) -> str:
        return tenancy.client_address(headers, host if isinstance(host, str) else None, self.trust_forwarded)

    def _queued(self, server_app) -> Counter[str]:
        """The units of each client's events that Gradio's queue holds now, waiting or running (none where it
        cannot be read)."""
        events = _read_gradio(lambda: server_app.get_blocks()._queue.event_ids_to_events.values(),
                              "cannot read Gradio's queue: the per-client queue cap counts only joins under way")
        held: Counter[str] = Counter()
        for event in events:
            request = getattr(event, "request", None)
            host = getattr(getattr(request, "client", None), "host", None)
            data = getattr(getattr(event, "data", None), "data", None)
            held[self._address(getattr(request, "headers", None), host)] += units(payload_bytes(data))
        return held


class KeptValues:
    """Pure ASGI middleware: after each request, empty the config copies (and the values in them) that Gradio keeps
    per session for deep links."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        try:
            await self.app(scope, receive, send)
        finally:
            if scope["type"] == "http":
                self.drop(scope.get("app"))

    def drop(self, server_app) -> int:
        """Empty every kept session's config copies; returns how many sessions had any."""
        sessions = _read_gradio(lambda: server_app.get_blocks().state_holder.session_data.values(),
                                "cannot read Gradio's sessions: the values it keeps per session are not dropped")
        emptied = 0
        for session in sessions:
            kept = getattr(session, "config_values", None)
            if kept:
                kept.clear()
                emptied += 1
        return emptied


async def _refuse(receive, send, message: str) -> None:
    """429 with ``message``, after reading what the client is still sending, chunk by chunk, keeping none of it (up to
    the body cap, which BodySizeLimit enforces around this): a client answered mid-upload saw its connection reset,
    not the message."""
    await _discard_rest(receive)
    await _answer(send, 429, message)


async def _discard_rest(receive, received: int = 0, limit: int | None = None) -> None:
    """Read what the client is still sending, chunk by chunk, keeping none of it, until its last chunk or past
    ``limit`` bytes (``received`` counts what was already read), so that it reads the answer instead of a reset."""
    while limit is None or received <= limit:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        received += len(message.get("body", b""))


async def _answer(send, status: int, message: str) -> None:
    """A JSON error the page shows (Gradio's client reads ``detail``) and API clients can read."""
    body = json.dumps({"detail": message, "error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class _BodyTooLargeError(Exception):
    pass


class _QueueShareError(Exception):
    """Raised into Gradio's read of a chunked join that grew past a share."""
