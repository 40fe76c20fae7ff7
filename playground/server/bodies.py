"""Request bodies in flight, bounded: per client and in all, counted as their bytes arrive, with a read timeout.

Gradio reads a request's whole body into memory before its route runs (a queue join, a queue-skipping
``/gradio_api/run/<api>``, ``/gradio_api/cancel``, ``/gradio_api/component_server``), and nothing bounded how many
bodies were open at once: 245 connections each declaring 11 MB and sending all but its last 100 bytes held 2.7 GB
until the server was killed. ``BodiesInFlight`` wraps every HTTP request:

- a body is held against its client's share (``per_client`` bytes) and everyone's (``total``) from its first byte
  until its request ends: the declared Content-Length up front, a chunked body by the bytes that have arrived;
  past either, the request is answered 429 before Gradio reads more (what the client still sends is read and
  dropped, never kept, so it reads the answer, not a reset);
- a body that stops coming for ``read_timeout`` seconds is answered 408 and its request dropped;
- uploads (``/gradio_api/upload``) are streamed to disk by Gradio, not held: they meet the read timeout here and
  the temp space's quota in server/uploads.py, not the memory caps.

    per_client 12 MB, total 48 MB: one visitor's 11 MB corpus passes; their second at once is refused, and five
    visitors' 11 MB bodies at once leave the fifth refused until one ends.

Knows nothing of Gradio's objects: the ASGI messages only. ``client_of(scope)`` names the client (tenancy's rule).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable

import anyio

from playground.budget import trim_heap

logger = logging.getLogger(__name__)

READ_TIMEOUT_SECONDS = 20.0  # a body that sends nothing for this long is answered 408 (a phone on a slow link
# sends a 10 MB corpus in chunks far more often than this)
UPLOAD_SUFFIX = "/upload"
TRIM_AFTER_BYTES = 2**20  # a body this large, once its request ends, has the heap handed back (budget.trim_heap)
DISCARD_SECONDS = 2.0  # a refused body's rest is read and dropped while it keeps coming, at most this long a pause


class _RefusedError(Exception):
    """Raised into Gradio's read of a body this middleware refuses (over a share, or stalled)."""


class BodiesInFlight:
    """Pure ASGI middleware: every request body held against its client's and everyone's share of bytes in flight,
    and read with a timeout (module docstring)."""

    def __init__(self, app, per_client: int, total: int, client_of: Callable[[dict], str],
                 read_timeout: float = READ_TIMEOUT_SECONDS):
        self.app = app
        self.per_client, self.total, self.read_timeout = int(per_client), int(total), float(read_timeout)
        self.client_of = client_of
        self.held: Counter[str] = Counter()  # bytes of bodies in flight, per client

    @property
    def held_total(self) -> int:
        return sum(self.held.values())

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = self.client_of(scope)
        upload = scope.get("path", "").rstrip("/").endswith(UPLOAD_SUFFIX)
        declared = _declared(scope)
        holding = arrived = 0  # what this request holds in self.held; the bytes of its body read so far
        complete = False  # the whole body has arrived (a GET's empty one comes first)
        refusal: tuple[int, str] | None = None
        started = False

        def take(num_bytes: int) -> None:
            """Hold ``num_bytes`` more for this request, or raise _RefusedError past a share."""
            nonlocal holding, refusal
            if upload or num_bytes <= 0:
                return
            if self.held[client] + num_bytes > self.per_client:
                refusal = (429, f"You are sending {human(self.held[client] + num_bytes)} of requests at once; this "
                                f"server reads at most {human(self.per_client)} at a time from one visitor: wait for "
                                "your other requests to finish, then ask again.")
                raise _RefusedError
            if self.held_total + num_bytes > self.total:
                refusal = (429, "This server is reading too many large requests at once: wait a moment, then ask "
                                "again.")
                raise _RefusedError
            self.held[client] += num_bytes
            holding += num_bytes

        async def counted_receive():
            nonlocal complete, refusal, arrived
            if refusal is not None:
                raise _RefusedError
            if complete:  # only http.disconnect is left to come: no timeout on waiting for it
                return await receive()
            try:
                with anyio.fail_after(self.read_timeout):
                    message = await receive()
            except TimeoutError:
                refusal = (408, f"The request's body stopped arriving for {self.read_timeout:g} s; send it again.")
                raise _RefusedError from None
            if message["type"] == "http.request":
                complete = not message.get("more_body", False)
                arrived += len(message.get("body", b""))
                take(arrived - holding)  # beyond what was declared (and held) already
            return message

        async def guarded_send(message):
            nonlocal started
            if refusal is not None:  # the app answering its own read error (FastAPI's 400): ours goes instead
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            if declared:
                take(declared)  # a declared body is held whole before a byte of it is read
            await self.app(scope, counted_receive, guarded_send)
        except _RefusedError:
            pass
        except Exception:
            if refusal is None:
                raise
        finally:
            if holding:
                self.held[client] -= holding
                if self.held[client] <= 0:
                    del self.held[client]
            if arrived >= TRIM_AFTER_BYTES:  # its chunks, freed, stayed in glibc's heap: 26 of 43 MiB for 4 bodies
                trim_heap()
        if refusal is not None and not started:
            status, message = refusal
            if status == 408:
                logger.info("a request to %s stopped sending its body: answered 408", scope.get("path", ""))
            else:
                await _discard_rest(receive, complete, min(self.read_timeout, DISCARD_SECONDS), self.per_client)
            await answer(send, status, message)


def _declared(scope) -> int:
    """The Content-Length a request declares, 0 where it declares none (chunked, or a GET)."""
    for name, value in scope.get("headers") or ():
        if name.lower() == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


async def _discard_rest(receive, complete: bool, timeout: float, limit: int) -> None:
    """Read what the client is still sending (up to ``limit`` bytes, none of it kept, each chunk within ``timeout``),
    so it reads the answer instead of a reset."""
    received = 0
    while not complete and received <= limit:
        try:
            with anyio.fail_after(timeout):
                message = await receive()
        except TimeoutError:
            return
        if message["type"] != "http.request":
            return
        complete = not message.get("more_body", False)
        received += len(message.get("body", b""))


async def answer(send, status: int, message: str) -> None:
    """A JSON error the page shows (Gradio's client reads ``detail``) and API clients can read."""
    body = json.dumps({"detail": message, "error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def human(num_bytes: int) -> str:
    """1.0 MB, 11.5 MB: a size as a visitor reads it."""
    return f"{num_bytes / 1e6:.1f} MB" if num_bytes >= 100_000 else f"{num_bytes:,} bytes"
