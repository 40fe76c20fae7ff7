"""What the web server refuses before Gradio reads a request: bodies over a size cap, and routes it does not use.

Gradio parses a JSON body whole before any handler can refuse it, so this ASGI middleware answers 413 as soon as
the declared Content-Length, or the bytes actually received (for a chunked body), pass the cap. File uploads have
their own cap (Gradio's ``max_file_size``), so the upload route is left to it.

Before answering, the rest of a body up to the cap again is read and thrown away (never kept): a server that
answers and closes while a client is still sending makes the client's TCP stack see a reset instead of the 413
and its message. A body declared larger than that is answered at once without reading it.

Gradio's ``/gradio_api/deep_link`` writes a session's components (figures included) to a new file under its upload
folder on every call whose state differs, for the DeepLinkButton; Gradio has no switch to turn the route off and
the playground has no such button, so ``UnusedRoutes`` answers it 404 before Gradio sees it.
"""

from __future__ import annotations

import json

UPLOAD_PATH_SUFFIX = "/upload"
UNUSED_PATH_SUFFIXES = ("/gradio_api/deep_link",)  # Gradio routes that write files and that no component here uses


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
                await self._discard_rest(receive, 0)
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
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _BodyTooLargeError:
            if not started:
                if not complete:
                    await self._discard_rest(receive, received)
                await self._refuse(send)
        except Exception:
            if not refused:
                raise
            if not started:
                if not complete:
                    await self._discard_rest(receive, received)
                await self._refuse(send)

    async def _discard_rest(self, receive, received: int) -> None:
        """Read what the client is still sending, chunk by chunk, keeping none of it, up to the cap again."""
        while received <= 2 * self.max_bytes:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                return
            received += len(message.get("body", b""))

    async def _refuse(self, send):
        body = json.dumps({"error": f"The request is larger than this server's limit of {self.max_bytes:,} bytes; "
                                    "send less text (PLAYGROUND_MAX_UPLOAD_BYTES sets the limit)."}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class UnusedRoutes:
    """Pure ASGI middleware: 404 for Gradio routes the playground does not use (UNUSED_PATH_SUFFIXES)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope.get("path", "").rstrip("/").endswith(UNUSED_PATH_SUFFIXES):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"error": "This route is not used by Attention Playground."}).encode()
        await send({"type": "http.response.start", "status": 404,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class _BodyTooLargeError(Exception):
    pass
