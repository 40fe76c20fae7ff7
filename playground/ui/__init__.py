"""The Gradio app: build_app() assembles the seven tabs. The only package that imports gradio or plotly (plots.py).

Owns the app-wide layout: the tab bar (all seven tabs stay visible on a phone: it wraps instead of hiding tabs
behind an overflow menu), the CSS every tab shares (a Dataframe with ``elem_classes=["playground-table"]``
keeps TABLE_MIN_WIDTH on a phone and scrolls sideways instead of squeezing its columns to a letter each; on a phone
Plotly's toolbar is hidden, since it sat over the charts' titles and labels, and a checkpoint picker takes a row's
whole width, so its arrow leaves the name readable; Gradio
sizes the columns from that width, so percentages in ``column_widths`` still hold; on a narrow phone a chart's x axis
of many labels shows every k-th, NARROW_TICKS), and the launch options.
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
    model_tab,
    page_scripts,
    sample_tab,
    tokenize_tab,
    train_tab,
    why_page,
    why_tab,
)
from playground.ui.common import TAP_PX, AppContext, friendly, upload_ledger

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
PHONE_WIDTH = 640  # px: below this the layout is a phone's
TABLE_MIN_WIDTH = 600  # px: a table keeps this width on a phone and scrolls sideways
WIDE_TABLE_MIN_WIDTH = 1100  # px: the same for a table of many columns (class ``wide-table`` as well)
STICKY_MIN_WIDTH, STICKY_MIN_HEIGHT = 900, 600  # px: a screen where the Attention tab's stage heading stays in view
# the stage heading held at the top of the screen, its fold shut: above Gradio's labels (--layer-4), which showed
# through it
STAGE_STICKS = (f"#{attention_tab.STAGE_ELEM_ID}:not(:has(details[open])) {{ position: sticky; top: 0; "
                "z-index: calc(var(--layer-4) + 1); background: var(--body-background-fill); }")
NARROW_WIDTH = chart_deck.NARROW_WIDTH  # px: a phone held upright, where a heatmap's matrix is about 200 px wide
# (at least, at most, keep every k-th) x-axis tick labels on a narrow screen: a 42-token heatmap's labels were 4 px
# apart and ran into one smear; the server cannot know the width, so the page thins them, and the hover names each
NARROW_TICKS = ((23, 44, 2), (45, 66, 3), (67, 88, 4), (89, None, 6))

# button.sm: a small button ("Step through this head in the Attention tab") was 26 px tall on a phone
TAP_TARGETS = ('[role="tab"], [data-testid$="-radio-label"], label.checkbox-container, button.label-wrap, button.sm')
# A single-choice dropdown's arrow lies over the right end of its box (Gradio draws it absolutely, at --size-5 from
# the edge): its text stops before the arrow. On a phone the Why tab's Checkpoint box, sharing its row, was 106 px
# wide and its arrow covered "shakespeare-char"'s last letters: a checkpoint picker (common.checkpoint_dropdown's
# label) takes the row's whole width there.
DROPDOWN_TEXT = '.secondary-wrap > input[role="combobox"]:has(+ .icon-wrap)'
CHECKPOINT_PICKER = '.form > .block:has(input[role="combobox"][aria-label="Checkpoint"])'


def _narrow_tick_rules() -> str:
    """CSS quantity queries: an x axis with ``at least``..``at most`` tick labels shows only every k-th."""
    rules = []
    for low, high, keep in NARROW_TICKS:
        count = f":nth-last-child(n+{low})" + (f":nth-last-child(-n+{high})" if high else "")
        rules.append(f"  .js-plotly-plot:not(.{chart_deck.WIDE_CLASS}):not(.{chart_deck.TICKED_CLASS}) "
                     f".xaxislayer-above > .xtick:first-child{count} ~ "
                     f".xtick:not(:nth-child({keep}n+1)) text {{ display: none; }}")
    return "\n".join(rules)


CSS = f"""
.tok-chips {{ font-size: 1rem; }}
footer {{ visibility: hidden; }}
/* a chosen radio keeps its dot under the pointer: Gradio's hover rule, as specific and later, painted it white on
   white (two strangers read the Model tab's zoom level as unselected right after clicking it) */
input[type="radio"]:checked:hover:not([disabled]) {{ background-color: var(--checkbox-background-color-selected);
  border-color: var(--checkbox-border-color-selected); background-image: var(--radio-circle); }}
/* a chart deck's host until its first chart is drawn (Plotly marks the host): opening a tab had shown blank space */
.{chart_deck.HOST_CLASS}:not(.js-plotly-plot)::before {{ content: "drawing the chart…"; display: block;
  padding: 2em 0; opacity: 0.6; }}
/* the Attention tab's view while the server draws the view of new settings (a head sent from the Why tab) */
{chart_deck.waiting_css(attention_tab.DECK)}
/* the Why tab's note under its chart takes no room until a note is written in it */
#{why_page.PART_NOTE_ELEM_ID}:not(:has(p.{why_page.PART_NOTE_CLASS}:not([hidden]))) {{ display: none; }}
{DROPDOWN_TEXT} {{ padding-right: calc(var(--size-5) + var(--size-2)); text-overflow: ellipsis; }}
/* Gradio's container clips what runs over its sides; as a scroller (overflow: hidden) it also kept anything inside
   from sticking to the top of the screen: "clip" clips the same and scrolls nothing */
.gradio-container {{ overflow: clip !important; }}
/* on a wide screen the Attention tab's stage heading and its Look-for line stay at the top while the stage's charts
   scroll under them (its fold shut): an 86-token heatmap is 1,218 px tall, and a learner sent to its framed last row
   saw neither the stage's name nor what to look for. Above Gradio's labels (--layer-4), which showed through it */
@media (min-width: {STICKY_MIN_WIDTH}px) and (min-height: {STICKY_MIN_HEIGHT}px) {{
  {STAGE_STICKS}
}}
/* on a phone, pinned so for a framed row sent from the Why tab (attention_tab.QUERY_SHOWN_JS) */
#{attention_tab.STAGE_ELEM_ID}[data-pinned]{STAGE_STICKS.removeprefix(f"#{attention_tab.STAGE_ELEM_ID}")}
/* the title of the chart scrolled under it (page/attention.js), and a rule where the charts go under: hung below
   the heading over the charts (absolute, clicks go through), so the page's layout never changes with it (in the flow,
   the line added and removed itself ten times a second at a chart's foot, the page jumping 27 px each time) */
#{attention_tab.STAGE_ELEM_ID}:not(:has(details[open]))[data-under]::after {{ content: "Under it: " attr(data-under);
  display: block; padding: 2px 0 4px; font-size: var(--text-md); color: var(--body-text-color);
  border-bottom: 1px solid var(--border-color-primary); position: absolute; top: 100%; left: 0; right: 0;
  background: var(--body-background-fill); pointer-events: none; }}
@media (max-width: {PHONE_WIDTH}px) {{
  .js-plotly-plot .modebar-container {{ display: none; }}
  {CHECKPOINT_PICKER} {{ min-width: 100% !important; }}  /* over the block's own inline min-width */
  .playground-table .table-wrap {{ overflow-x: auto; }}
  .playground-table .table-wrap > .upload-container {{ min-width: {TABLE_MIN_WIDTH}px; }}
  .playground-table.wide-table .table-wrap > .upload-container {{ min-width: {WIDE_TABLE_MIN_WIDTH}px; }}
  /* a Markdown table's words and numbers whole (Gradio's prose breaks anywhere: the Why tab's knock-out table read
     "0.82 / 9" and "inta / ct" on a phone), scrolling sideways where it is wider than the screen */
  .prose table {{ display: block; max-width: 100%; overflow-x: auto; }}
  .prose table th, .prose table td {{ overflow-wrap: normal; word-break: normal; padding: 8px 10px; }}
}}
@media (max-width: {NARROW_WIDTH}px) {{
{_narrow_tick_rules()}
}}
@media (pointer: coarse) {{
  .js-plotly-plot .modebar-container {{ display: none; }}
  {TAP_TARGETS} {{ min-height: {TAP_PX}px; }}
  [role="tabpanel"] details > summary {{ padding-block: 12px; min-height: {TAP_PX}px; box-sizing: border-box; }}
}}
"""


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
        # (the tab first: the controls of a tab not yet drawn took the values, but its query box kept its own)
        on_screen = [why.checkpoint, why.text, why.head_heading]
        # through the queue (its fast lane): a refusal of an event that skips it reached the page as a failed request
        # and no toast, so a learner's click did nothing
        why.button.click(functools.partial(_attention_tab, ctx), on_screen, tabs, js=why_tab.HEAD_ON_SCREEN_JS,
                         api_name="why_to_attention_tab", api_visibility="private", show_progress="hidden",
                         **ctx.fast_lane).success(
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

    ``head``: the page's own scripts (page_scripts: playground/ui/page/*.js after their constants).
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
    return dict(css=CSS, head=page_scripts.head(), theme=theme, max_file_size=max_file_size, show_error=True,
                state_session_capacity=SESSION_CAPACITY, _frontend=False,
                app_kwargs={"middleware": [Middleware(KeptValues), Middleware(UnusedRoutes),
                                           Middleware(BodySizeLimit, max_bytes=body_cap(limits.max_upload_bytes)),
                                           Middleware(BodiesInFlight, **bodies_in_flight(limits, client_of)),
                                           Middleware(Uploads, ledger=uploads, client_of=client_of),
                                           Middleware(QueueShare, per_client=QUEUE_PER_CLIENT, total=QUEUE_UNITS,
                                                      trust_forwarded=trusted),
                                           Middleware(DirectCalls)]})
