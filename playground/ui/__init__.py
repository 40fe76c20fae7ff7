"""The Gradio app: build_app() assembles the seven tabs. The only package that imports gradio or plotly (plots.py).

Owns the app-wide layout: the tab bar (all seven tabs stay visible on a phone: it wraps instead of hiding tabs
behind an overflow menu), the stylesheet every tab shares (page/app.css, read and filled by page_scripts when the
app is built), and the launch options.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import gradio as gr

from playground import checks
from playground.budget import bodies_cost, sessions_cost
from playground.checkpoints import store as checkpoints
from playground.config import Limits
from playground.device import pick_device
from playground.lens.walkthrough import STEP_TITLES
from playground.model.families import require_gpt
from playground.server import tenancy
from playground.server.bodies import BodiesInFlight
from playground.server.http import BodySizeLimit, KeptValues, QueueShare, UnusedRoutes, body_cap
from playground.server.routes import DirectCalls
from playground.server.uploads import UploadLedger, Uploads
from playground.ui import (
    attention_tab,
    chart_deck,
    compare_tab,
    events,
    model_tab,
    page_scripts,
    sample_tab,
    tokenize_tab,
    train_tab,
    why_tab,
)
from playground.ui.common import TAP_PX as TAP_PX  # the tests' tap size
from playground.ui.common import TAP_TARGETS as TAP_TARGETS
from playground.ui.common import AppContext, friendly, upload_ledger

TITLE = "Attention Playground"
# Gradio's default theme draws weight 600 (headings, labels, buttons) from a SemiBold Source Sans Pro that holds a few
# glyphs (5 KB): every other letter fell back to the system's bold and the title's "A" stood thinner and shorter
# than the rest (its IBM Plex Mono SemiBold is as short). Their Bold files are whole, so the same families at 400 and
# 700: 600 is drawn from the 700.
FONT_WEIGHTS = (400, 700)
SESSION_CAPACITY = 200  # sessions whose inputs and outputs Gradio keeps in memory
QUEUE_SIZE = 64  # events waiting for a worker; past it Gradio answers "the queue is full" at once, holding nothing
QUEUE_PER_CLIENT = 16  # units (an event, plus one per MiB of inputs) one client may have waiting or running: 429
BODIES_IN_FLIGHT = 4  # the largest request bodies the server reads at once, for everyone together (BodiesInFlight)
QUEUE_UNITS = 64  # units everyone's events may hold at once: a bound on the bytes of queued inputs (64 MiB or so)
CACHE_SWEEP = (600, 3600)  # every 10 minutes, delete files Gradio served more than an hour ago


def build_app(weights: Path | None = None, limits: Limits | None = None, device: str | None = None) -> gr.Blocks:
    """Build the seven tabs: Tokenize · Attention · Model · Why · Compare · Train · Sample.

    Checkpoints run on ``device`` (default ``PLAYGROUND_DEVICE``, else CUDA, then MPS, then CPU).
    """
    ctx = AppContext(limits=limits or Limits.from_env(),
                     weights=checkpoints.weights_dir(weights or None),
                     device=pick_device(device or os.environ.get("PLAYGROUND_DEVICE") or "auto"))
    # what Gradio keeps per session between requests (its config copies are emptied: server/http.py's KeptValues)
    ctx.budget.set_aside(sessions_cost(sessions=SESSION_CAPACITY, max_new_tokens=ctx.limits.max_new_tokens))
    # the request bodies Gradio may hold at once (BodiesInFlight's total), each parsed into a copy or two
    ctx.budget.set_aside(bodies_cost(bodies_in_flight(ctx.limits)["total"]))
    checkpoints.recover(ctx.weights)  # once, at start-up: what saves killed mid-way left (listing only reads)
    page_scripts.head()  # the page's scripts read once, here: a missing file fails the build, not a visitor's page
    page_scripts.stylesheet()  # and its stylesheet, filled: a name it reads that Python lacks fails here too
    with gr.Blocks(title=TITLE, analytics_enabled=False, delete_cache=CACHE_SWEEP) as app:
        gr.Markdown(f"# {TITLE}\nLearn attention by doing it: on your own text, with real trained weights.")
        if ctx.hidden_note():
            gr.Markdown(ctx.hidden_note())
        with gr.Tabs(overflow_behavior="wrap") as tabs:  # on a phone the bar wraps: every tab's name stays visible
            with gr.Tab("Tokenize", id="tokenize"):
                tokenize_tab.build(ctx)
            with gr.Tab("Attention", id="attention"):
                attention = attention_tab.build(ctx)
            with gr.Tab("Model", id="model"):
                model_tab.build(ctx)
            with gr.Tab("Why", id="why"):
                why = why_tab.build(ctx)
            with gr.Tab("Compare", id="compare"):
                compare_tab.build(ctx)
            with gr.Tab("Train", id="train"):
                finished_run = train_tab.build(ctx)
            with gr.Tab("Sample", id="sample"):
                sample_checkpoint = sample_tab.build(ctx)
        # the head on the Why tab's screen, stepped through in the Attention tab at its softmax weights
        # (the tab first: the controls of a tab not yet drawn take the values, but its query box keeps its own)
        on_screen = [why.checkpoint, why.text, why.head_heading]
        # through the queue (its fast lane): a refusal of an event that skips it reaches the page as a failed request
        # and no toast, so the click would seem to do nothing
        # (marked under way in the page: the Attention tab's first view, made once the tab is shown, waits for it)
        opening = why.button.click(functools.partial(_attention_tab, ctx), on_screen, tabs,
                                   js=why_tab.STEP_THROUGH_JS,
                                   api_name="why_to_attention_tab", api_visibility="private", show_progress="hidden",
                                   **ctx.fast_lane)
        opening.failure(None, js=attention_tab.OPENED_JS, api_name="why_to_attention_refused", api_visibility="private",
                        show_progress="hidden", queue=False)
        opening.success(
            functools.partial(_open_in_attention, ctx), on_screen, list(attention), preprocess=False,
            js=why_tab.HEAD_ON_SCREEN_JS, api_name="why_to_attention", api_visibility="private",
            show_progress="hidden", queue=False).then(
            None, None, None, js=attention_tab.QUERY_SHOWN_JS, api_name="why_to_attention_query",
            api_visibility="private", show_progress="hidden", queue=False)
        # Plotly for the chart decks (Attention, Model, Why, Sample), once the first tab is drawn
        chart_deck.plotly_loader(tokenize_tab.DRAWN_JS)
        # the page's run, once finished or stopped with a checkpoint, is what Sample offers next (its prompt follows)
        finished_run.change(lambda name: gr.Dropdown(choices=ctx.checkpoint_names(), value=name) if name else gr.skip(),
                            finished_run, sample_checkpoint, api_name="sample_follow_run", api_visibility="private",
                            show_progress="hidden")
    events.share_fast_lane(app, ctx)  # after every event is registered
    # api_open=False: no call skips the queue (Gradio opens /gradio_api/run/<api_name> everywhere but on a Space)
    app.queue(default_concurrency_limit=4, max_size=QUEUE_SIZE, api_open=False)
    app.playground_context = ctx  # for tests and app.py; not looked up by the UI itself
    return app


@friendly
def _attention_tab(ctx: AppContext, checkpoint: str, text: str, heading: str):
    """The Attention tab selected, where a head is on the Why tab's screen and the tab's step-by-step view reads its
    checkpoint; a clear error otherwise, before the tab changes (notebook 004's model, which the Why tab explains,
    left the Attention tab showing the last model's head under the new one's name, beside four refusals)."""
    why_tab.head_on_screen(heading)
    loaded = ctx.checkpoint(checkpoint or "")  # the one the Why tab has just read: held in the cache
    if not loaded.config.is_llama:  # the step-by-step view reads the Llama family's heads as GPT's
        require_gpt(loaded.config, loaded.name, "the Attention tab's step-by-step view")
    return gr.Tabs(selected="attention")


def _open_in_attention(ctx: AppContext, checkpoint, text, heading) -> tuple:
    """The Attention tab's controls for the Why tab's head: its checkpoint, text, layer, head and position, at step 6
    (the weights its chain starts from), in attention_tab.Opened's order. It skips the queue, so its values are
    checked here (Gradio's own checks of a Dropdown's value printed a traceback per call)."""
    try:
        checkpoint = checks.text(checkpoint, "the checkpoint", 200)
        text = checks.text(text, "the text", ctx.limits.max_text_chars)
        heading = checks.text(heading, "the head's heading", 1000)
    except ValueError as exc:
        raise gr.Error(str(exc), print_exception=False) from None
    layer, head, position = why_tab.head_on_screen(heading)
    return attention_tab.SOURCES[0], checkpoint, text, layer, head, position, STEP_TITLES[5]


def bodies_in_flight(limits: Limits, client_of=None) -> dict:
    """BodiesInFlight's shares: one visitor, the largest body and a few small calls beside it; everyone,
    BODIES_IN_FLIGHT of the largest. What they hold is set aside from the memory budget (build_app)."""
    largest = body_cap(limits.max_upload_bytes)
    return dict(per_client=largest + 2**20, total=BODIES_IN_FLIGHT * largest, client_of=client_of)


def launch_options(limits: Limits | None = None, uploads: UploadLedger | None = None) -> dict:
    """The keyword arguments every launch uses (app.py and the tests alike).

    ``css``: its stylesheet (page_scripts: playground/ui/page/app.css filled). ``head``: the page's own scripts
    (page_scripts: playground/ui/page/*.js after their constants).
    ``theme``: Gradio's default, its fonts drawn from whole files (FONT_WEIGHTS).
    ``show_error``: a payload Gradio's own components refuse before a handler runs (text in a number slot,
    an unknown choice sent to the API) reaches the client with Gradio's message instead of an empty error.
    ``state_session_capacity``: Gradio keeps each session's inputs and outputs, and every API call is a new
    session, so it keeps the last SESSION_CAPACITY (its default, 10,000, held gigabytes of figures).
    The body cap answers 413 before Gradio parses an oversized request; UnusedRoutes answers 404 for Gradio's
    deep-link route, which writes a file per call and which no component here uses. QueueShare answers 429 to a
    client with QUEUE_PER_CLIENT units in the queue already (an event, plus one per MiB of its inputs), so one client
    cannot fill the queue for everyone, and to anyone once everyone's make QUEUE_UNITS, so queued inputs stay small.
    Uploads reserves each upload in the temp space's quota (``uploads``, the app's AppContext.uploads, so exports
    count what uploads reserve) before Gradio writes it, a share per client inside it (server/uploads.py).
    BodiesInFlight holds every body Gradio reads against its client's share and everyone's (bodies_in_flight), and
    answers 408 to one that stops coming.
    ``_frontend=False`` skips launch()'s probe of its own page (one HEAD request, 3 s, no retry after a timeout),
    which shut the server down with "a shareable link must be created" whenever a busy machine rendered the first
    page more slowly; the server is up before launch() returns either way.
    """
    from starlette.middleware import Middleware

    limits = limits or Limits.from_env()
    # Gradio has one cap for every file; each handler enforces its own (a corpus max_upload_bytes, a model
    # max_model_upload_bytes) before reading a byte more
    max_file_size = max(limits.max_upload_bytes, limits.max_model_upload_bytes)

    uploads = uploads or upload_ledger(limits)
    trusted = tenancy.trusts_forwarded()

    def client_of(scope: dict) -> str:  # the HTTP middleware's view of who asks (tenancy's rule)
        return tenancy.scope_client(scope, trusted)

    theme = gr.themes.Default(font=(gr.themes.LocalFont("Source Sans Pro", weights=FONT_WEIGHTS),
                                    "ui-sans-serif", "system-ui", "sans-serif"),
                              font_mono=(gr.themes.LocalFont("IBM Plex Mono", weights=FONT_WEIGHTS),
                                         "ui-monospace", "Consolas", "monospace"))
    return dict(css=page_scripts.stylesheet(), head=page_scripts.head(), theme=theme, max_file_size=max_file_size,
                show_error=True,
                state_session_capacity=SESSION_CAPACITY, _frontend=False,
                app_kwargs={"middleware": [Middleware(KeptValues), Middleware(UnusedRoutes),
                                           Middleware(BodySizeLimit, max_bytes=body_cap(limits.max_upload_bytes)),
                                           Middleware(BodiesInFlight, **bodies_in_flight(limits, client_of)),
                                           Middleware(Uploads, ledger=uploads, client_of=client_of),
                                           Middleware(QueueShare, per_client=QUEUE_PER_CLIENT, total=QUEUE_UNITS,
                                                      trust_forwarded=trusted),
                                           Middleware(DirectCalls)]})
