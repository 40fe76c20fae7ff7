"""Every route Gradio serves, and what this server does with it: used (and priced by the HTTP middleware), or closed.

Gradio adds routes the playground never uses, and some write files or hold memory for anyone who asks: the
recording route wrote every anonymous 10 MB part to the system's temp folder and never removed it; the component
server read whole bodies for components this app does not have. ``closed(method, path)`` is what http.UnusedRoutes
answers 404 for, before Gradio reads a byte of the body. ``ROUTES`` lists them all, as Gradio 6 names them
(tests/test_server_limits.py fails when the installed Gradio serves one this table does not name, so a new route
is decided on, not inherited); docs/admission.md shows the same table with the reasons.

    closed("/gradio_api/process_recording")  -> True
    closed("/gradio_api/queue/join")         -> False  (BodiesInFlight and QueueShare price it)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

USED, CLOSED = "used", "closed"


@dataclass(frozen=True)
class Route:
    methods: str  # "GET", "POST", "GET,HEAD"
    path: str  # as Gradio declares it: "/gradio_api/stream/{event_id}"
    decision: str  # USED or CLOSED
    why: str

    @property
    def pattern(self) -> re.Pattern:
        """The whole path, its {parameters} any text but "/" (``{name:path}``: any text), a trailing "/" or not."""
        parts = re.split(r"(\{[^}]*\})", self.path)
        regex = "".join((".*" if part.endswith(":path}") else "[^/]*") if part.startswith("{") else re.escape(part)
                        for part in parts)
        return re.compile(f"{regex}/?")


API = "/gradio_api"
BODY = "its body is held against the sender's share while read (BodiesInFlight)"
ROUTES: tuple[Route, ...] = (
    # the page and what it loads
    Route("GET,HEAD", "/", USED, "the page"),
    Route("GET", "/config", USED, "the page's components"),
    Route("GET", "/static/{path:path}", USED, "the page's files"),
    Route("GET", "/assets/{path:path}", USED, "the page's files"),
    Route("GET", "/svelte/{path:path}", USED, "the page's files"),
    Route("GET", "/favicon.ico", USED, "the page's icon"),
    Route("GET", "/theme.css", USED, "the page's theme"),
    Route("GET", f"{API}/theme.css", USED, "the page's theme"),
    Route("GET", "/robots.txt", USED, "crawlers"),
    Route("GET", "/manifest.json", USED, "the page as an app"),
    Route("GET", "/pwa_icon", USED, "the page as an app"),
    Route("GET", "/pwa_icon/{size}", USED, "the page as an app"),
    Route("GET,HEAD", "/openapi.json", USED, "the API's description"),
    Route("GET", f"{API}/openapi.json", USED, "the API's description"),
    Route("GET", f"{API}/info", USED, "the API's description (gradio_client reads it)"),
    Route("GET", f"{API}/startup-events", USED, "the page waits on it"),
    Route("GET", f"{API}/user", USED, "the page asks who is logged in (no one: no login here)"),
    Route("GET", f"{API}/login_check", USED, "the page asks (no login here: always allowed)"),
    Route("GET", f"{API}/token", USED, "the page asks (no login here)"),
    Route("GET", f"{API}/app_id", USED, "gradio_client asks"),
    Route("GET", f"{API}/heartbeat/{{session_hash}}", USED, "the page's session stays alive"),
    # events
    Route("POST", f"{API}/queue/join", USED, f"the page's events; {BODY}, its events by QueueShare"),
    Route("GET", f"{API}/queue/data", USED, "the page's event stream"),
    Route("GET", f"{API}/queue/status", USED, "the queue's length"),
    Route("POST", f"{API}/call/{{api_name}}", USED, f"the API's calls; {BODY}, its events by QueueShare"),
    Route("POST", f"{API}/call/v2/{{api_name}}", USED, f"the API's calls; {BODY}, its events by QueueShare"),
    Route("GET", f"{API}/call/{{api_name}}/{{event_id}}", USED, "a call's answer"),
    Route("GET", f"{API}/call/v2/{{api_name}}/{{event_id}}", USED, "a call's answer"),
    Route("POST", f"{API}/run/{{api_name}}", USED, f"the queue-skipping events (queue=False); {BODY}"),
    Route("POST", f"{API}/api/{{api_name}}", USED, f"the same, by its older name; {BODY}"),
    Route("POST", f"{API}/cancel", USED, f"the page cancels an event; {BODY}"),
    Route("POST", f"{API}/reset", USED, f"the page resets an iterator; {BODY}"),
    # files
    Route("POST", f"{API}/upload", USED, "the File components; reserved in the temp space's quota before Gradio "
                                         "writes it (server/uploads.py), read with BodiesInFlight's timeout"),
    Route("GET", f"{API}/upload_progress", USED, "the page shows an upload's progress"),
    Route("GET,HEAD", f"{API}/file={{path_or_url:path}}", USED, "downloads of the temp space's files"),
    Route("GET", f"{API}/file/{{path:path}}", USED, "downloads of the temp space's files"),
    # closed: what this app has no use for
    Route("GET", f"{API}/deep_link", CLOSED, "wrote a session's components to a new file per call; no "
                                             "DeepLinkButton here"),
    Route("POST", f"{API}/process_recording", CLOSED, "wrote each anonymous part to the system's temp folder and "
                                                      "kept it; no recording Audio or Video here"),
    Route("POST", f"{API}/component_server", CLOSED, "read whole bodies for components with server functions "
                                                     "(FileExplorer, ImageEditor, Dialogue); none here"),
    Route("POST", f"{API}/stream/{{event_id}}", CLOSED, "streamed inputs (webcam, microphone); none here"),
    Route("POST", f"{API}/stream/{{event_id}}/close", CLOSED, "streamed inputs; none here"),
    Route("GET", f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/playlist.m3u8", CLOSED,
          "streamed audio or video outputs; none here"),
    Route("GET", f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/{{segment_id}}.{{ext}}", CLOSED,
          "streamed audio or video outputs; none here"),
    Route("GET", f"{API}/stream/{{session_hash}}/{{run}}/{{component_id}}/playlist-file", CLOSED,
          "streamed audio or video outputs; none here"),
    Route("GET,HEAD", f"{API}/proxy={{url_path:path}}", CLOSED, "fetches files of Spaces loaded with gr.load; none"),
    Route("GET", f"{API}/custom_component/{{id}}/{{environment}}/{{type}}/{{file_name}}", CLOSED,
          "custom components' files; none here"),
    Route("POST", "/login", CLOSED, "no login on this app"),
    Route("GET", "/logout", CLOSED, "no login on this app"),
    Route("GET", "/monitoring", CLOSED, "Gradio's monitoring dashboard, off"),
    Route("GET", "/monitoring/summary", CLOSED, "Gradio's monitoring dashboard, off"),
    Route("GET", "/monitoring/{key}", CLOSED, "Gradio's monitoring dashboard, off"),
    Route("GET", f"{API}/dev/reload", CLOSED, "Gradio's reload mode, off"),
    Route("GET", f"{API}/runs", CLOSED, "Gradio's run history, which this app does not keep"),
    Route("POST", f"{API}/run-history/connect", CLOSED, "Gradio's run history (writes to a Hub bucket)"),
    Route("GET", f"{API}/run-history/buckets", CLOSED, "Gradio's run history"),
    Route("GET", f"{API}/run-history/records", CLOSED, "Gradio's run history"),
    Route("GET", f"{API}/run-history/records/{{endpoint}}/{{record_id}}/assets/{{asset_id}}", CLOSED,
          "Gradio's run history"),
    Route("GET,POST", f"{API}/vibe-code", CLOSED, "Gradio's vibe editor, off"),
    Route("POST", f"{API}/vibe-edit", CLOSED, "Gradio's vibe editor, off"),
    Route("POST", f"{API}/undo-vibe-edit", CLOSED, "Gradio's vibe editor, off"),
    Route("POST", f"{API}/vibe-starter-queries", CLOSED, "Gradio's vibe editor, off"),
    Route("GET", f"{API}/profiling/traces", CLOSED, "Gradio's profiler, off"),
    Route("GET", f"{API}/profiling/summary", CLOSED, "Gradio's profiler, off"),
    Route("POST", f"{API}/profiling/clear", CLOSED, "Gradio's profiler, off"),
)
_CLOSED = tuple(route.pattern for route in ROUTES if route.decision == CLOSED)


def closed(path: str) -> bool:
    """Whether a request for ``path`` goes to a route this app closes (by any method)."""
    return any(pattern.fullmatch(path) for pattern in _CLOSED)


def table() -> str:
    """ROUTES as the Markdown table docs/admission.md shows."""
    rows = ["| Method | Route | Decision | Why |", "|---|---|---|---|"]
    rows += [f"| {route.methods} | `{route.path}` | {route.decision} | {route.why} |" for route in ROUTES]
    return "\n".join(rows)


DIRECT_CALL = re.compile(r".*/gradio_api/(?:run|api)/([^/]+)/?")


class DirectCalls:
    """Pure ASGI middleware for the queue-skipping routes (``/gradio_api/run/<api_name>``): a call to an event that
    runs in the browser only (no server function: a step's redraw, a query moved), or with the wrong number of
    inputs, or inputs that are not a list, is refused here in Gradio's own error form (``{"error": ...}``) before
    Gradio's pre-processing, which answered each with HTTP 500 and a traceback in the log (119 MB an hour from one
    client). The body is read whole (BodiesInFlight bounds it) and handed on as it came."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        found = DIRECT_CALL.fullmatch(scope.get("path", "")) if scope["type"] == "http" else None
        if found is None or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        refusal = self._refusal(scope.get("app"), found.group(1), body)
        if refusal:
            await _error(send, refusal)
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def _refusal(server_app, api_name: str, body: bytes) -> str:
        """Why a direct call of ``api_name`` with ``body`` is refused ("" where Gradio may run it)."""
        try:
            fns = server_app.get_blocks().fns
        except AttributeError:
            return ""  # not Gradio's app: nothing to check against
        try:
            payload = json.loads(body)
        except ValueError:
            return "The request is not JSON: send {\"data\": [...]} with one value per input."
        if not isinstance(payload, dict) or not isinstance(payload.get("data"), list):
            return "The request has no list of inputs: send {\"data\": [...]} with one value per input."
        index = payload.get("fn_index")
        if isinstance(index, int) and not isinstance(index, bool):
            fn = fns.get(index)
        else:
            fn = next((fn for fn in fns.values() if getattr(fn, "api_name", None) == api_name), None)
        if fn is None:
            return f"This app has no event named {api_name[:64]!r}."
        if getattr(fn, "fn", None) is None:
            return f"{api_name[:64]!r} runs in the browser only: there is nothing to call on the server."
        wanted = len(getattr(fn, "inputs", ()) or ())
        if len(payload["data"]) != wanted:
            return f"{api_name[:64]!r} takes {wanted} input{'s' * (wanted != 1)}, not {len(payload['data'])}."
        return ""


async def _error(send, message: str) -> None:
    """Gradio's own form for a refused call (utils.error_payload with show_error): the page shows ``error``."""
    body = json.dumps({"error": message, "visible": True, "title": "Error"}).encode()
    await send({"type": "http.response.start", "status": 400,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
