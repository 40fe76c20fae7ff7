"""Attention tab: step through one head's Q, K, V, scores, scaling, mask, softmax and output.

Weights come from a trained checkpoint (a real head on the real input of its layer), from a seed, or from
the textbook presets. What-if switches show the consequence of each piece: the mask, the scaling, a
temperature, and the order of masking and scaling; when one differs from its default, the stage is drawn
twice, now and by default, on one colour scale. The maths, the lesson text, the step titles and which note
shows at which step live in playground.lens.walkthrough; what a view costs lives in playground.budget. This module
lays them out, and puts exports where Gradio serves files from.

The view renders when the tab is first opened and whenever a setting changes; the Show button (``/attention_step``)
does the same for API clients. Refusals arrive as a toast only: the events hide their progress, so the
previous figures stay as they were instead of carrying an "Error" badge.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shutil
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import gradio as gr

from playground import budget, checks
from playground.lens import walkthrough
from playground.lens.walkthrough import STAGE_KEYS, STEP_LABELS, STEP_TITLES, lessons
from playground.text.tokenizer import UnknownCharacterError
from playground.ui import chart_deck, head_table, plots, rotation_views, score_views
from playground.ui.attention_views import (
    CONTROL_MIN_WIDTH,
    DEFAULT_TEXT,
    SCORES_MET,
    SOURCES,
    STAGE_ELEM_ID,
    WEIGHTS_MET,
    HeadCache,
    View,
    beside_changes,
    coming_text,
    head_request,
    labels_that_matter,
    mixes_text,
    qkv_frames,
    query_beside_keys,
    score_bar_args,
    stage_view,
    stage_views,
    step_index,
    switch_settings,
    weight_bar_args,
)
from playground.ui.common import AppContext, checkpoint_dropdown, checkpoint_loaded
from playground.ui.events import once_shown, wire

EXPORTS_FOLDER = "attention-exports"  # inside Gradio's temp space, one fresh folder per export
_EXPORT_MAX_AGE_SECONDS = 3600
EXPORT_BYTES_PER_NUMBER = 28  # at most, in the CSV (a float32's shortest repr and a comma) and the .npy (4) together


def _warn(messages: list[str], already: list[str] | tuple = ()) -> list[str]:
    """Send each distinct warning once, skipping those the previous request of this page sent; returns them."""
    distinct = list(dict.fromkeys(messages))
    for message in distinct:
        if message not in already:
            gr.Warning(message)
    return distinct


def attention_step(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                   scale, mask, temperature, mask_before_scaling, step, query, *, heads: HeadCache | None = None):
    """Plain handler: (heading, figure 1-3, what-if Markdown, query score bars, query weight bars, query
    Markdown, input check HTML) for one step. When a switch differs from its default, figures 1 and 2 are
    the stage now and by default."""
    view = stage_view(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                      temperature, mask_before_scaling, step, query, heads=heads)
    _warn(view.warnings)
    return view.outputs


DECK = "attention"  # the page's chart deck: figures 1-3, the query's score bars, its weight bars
QUERY_ELEM_ID = "attention-query"  # the query position's box, which a click on a heatmap's row writes
ROW_FOOT_PX = 80  # a framed row sent to the foot of the screen stops this far above it (room for the keys' labels)
# the page's side of the tab: page/attention.js's window.attentionPage (its constants: page_scripts.constants)
# The query position written by another tab (the Why tab's "Step through"), drawn as a typed one is, the stage's
# heading and the framed row brought onto the screen
QUERY_SHOWN_JS = "() => window.attentionPage.queryShown()"
OPENED_JS = "() => window.attentionPage.opening(false)"  # the Why tab's opening refused: the first view waits no more

# A click (or a tap) on a heatmap's row makes that row's token the query; the title of the chart scrolled under the
# stage's heading is written under it
LISTEN_JS = "window.attentionPage.listen();"
DECK_SLOTS = range(5)
DECK_TEXTS = 3  # the heading, the what-if notes, the query's sentence


def _deck_key(*settings) -> str:
    """Names the settings a deck's views were made with (all but the step, the query last): the page keeps views of
    one key. A query box's whole number names one position however it was sent (5, 5.0)."""
    *rest, query = settings
    try:
        query = int(query) if float(query).is_integer() else query
    except (TypeError, ValueError):  # none, or text: refused where it is read
        pass
    return hashlib.sha1(repr((*rest, query)).encode()).hexdigest()[:16]


def _deck_view(view: View) -> tuple[list[str], list]:
    return [view.heading, view.whatif, view.query_md], [view.plot_a, view.plot_b, view.plot_c, view.score_bars,
                                                         view.weight_bars]


def attention_page(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                   scale, mask, temperature, mask_before_scaling, step, query, warned, *,
                   heads: HeadCache | None = None, moved: bool = False):
    """The page's first answer to a change: (a deck holding the step on screen, the input check HTML, the query
    position it shows (clamped to the text), the warnings sent). The page draws the deck where its inputs, the query
    box among them, are still the ones it was made for, and only then writes the position shown into the box
    (attention.js's drawFirst); attention_deck follows. ``moved``: the text
    under the query changed (a source, preset, text, checkpoint or head), so a position past its end was not asked
    for here: it goes to the last token without a warning (the Why tab's "Step through" left position 85 in the box,
    and the textbook preset then warned that 85 was past the end of its 6 tokens)."""
    settings = (source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                temperature, mask_before_scaling, query)
    view = stage_view(ctx, *settings[:-1], step, query, page=True, heads=heads)
    asked = checks.whole_number(query if query not in (None, "") else -1, "query position", -1)
    if moved and 0 <= view.query < asked:
        view = view._replace(warnings=[w for w in view.warnings if w != lessons.query_clamped(asked, view.query + 1)])
    deck = chart_deck.deck_json(_deck_key(*settings), {STEP_TITLES[step_index(step)]: _deck_view(view)},
                                settings=list(settings))
    return deck, view.text_check, view.query, _warn(view.warnings, warned or ())


def attention_deck(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                   scale, mask, temperature, mask_before_scaling, query, *, heads: HeadCache | None = None):
    """Every step's view for the settings on screen, from one trace: the page then steps through them by itself.
    Nothing new where nothing can be traced (attention_page has said why)."""
    settings = (source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                temperature, mask_before_scaling, query)
    views = stage_views(ctx, *settings[:-1], range(len(STEP_TITLES)), query, page=True, heads=heads)
    if len(views) != len(STEP_TITLES):
        return gr.skip()
    return chart_deck.deck_json(_deck_key(*settings), {title: _deck_view(view)
                                                       for title, view in zip(STEP_TITLES, views, strict=True)})


POSITIONS_MAX_LENGTH = plots.MAX_SIDE  # tokens: past this the heatmaps' window moves with the query (a new figure)
POSITIONS_HELD = 14  # attention_positions' answers the page keeps: two settings' seven steps (a switch and back)


def _bar_changes(labels, values, title, y_title, masked, masked_hover, important, *, shown=None, ticks=None) -> dict:
    """What plots.bar_chart(the same arguments) holds that the query's bars at another position may not: the bars'
    heights, the grey × of the masked keys, the title and the labels kept, as plain JSON (no figure built: the page is
    sent one per position). Laid over such a chart (the page's merge, chart_deck's), it is that chart. ``shown`` (the
    labels as drawn) and ``ticks`` (plots._bar_ticks's answer) where the caller has them already."""
    shown = shown or [plots._display_label(str(label)) for label in labels]
    hidden = [bool(m) for m in masked] if masked is not None else [False] * len(values)
    data = [{"y": [None if m else value for value, m in zip(values, hidden)]}]
    if any(hidden):
        where = [i for i, m in enumerate(hidden) if m]
        data.append({"customdata": [shown[i] for i in where],
                     "hovertemplate": f"%{{x}} · %{{customdata}}: {masked_hover}<extra></extra>",
                     "marker": {"line": {"color": "#8b93a1", "width": 2}, "size": 9, "symbol": "x-thin"},
                     "mode": "markers", "showlegend": False, "x": where, "y": [0.0] * len(where), "type": "scatter"})
    title_layout, top = plots._title_layout(title)
    tickvals, ticktext, angle = ticks or plots._bar_ticks(shown, plots.BAR_LABEL_ROOM_PX, important)
    meta = plots.bar_meta(shown, important)
    return {"data": data, "layout": {"title": title_layout, "margin": {"t": top}, **({"meta": meta} if meta else {}),
                                     "xaxis": {"tickvals": tickvals, "ticktext": ticktext, "tickangle": angle}}}


def _pruned(changes, base):
    """``changes`` less what ``base`` holds already (the page merges objects key by key, traces one by one)."""
    if not isinstance(changes, dict) or not isinstance(base, dict):
        return changes
    kept = {}
    for key, value in changes.items():
        if key == "data" and isinstance(value, list) and isinstance(base.get(key), list):
            kept[key] = [_pruned(trace, base[key][i]) if i < len(base[key]) else trace for i, trace in enumerate(value)]
        elif base.get(key, kept) != value:
            kept[key] = _pruned(value, base[key]) if isinstance(value, dict) and isinstance(base.get(key), dict) \
                else value
    return kept


def attention_positions(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                        scale, mask, temperature, mask_before_scaling, step, *, heads: HeadCache | None = None):
    """The step on screen at every query position of the text, for the page to draw a new query position itself:
    ``{"step", "length": T, "keys": {query box value: its deck's key}, "bases": [figure or null per slot],
    "positions": [{"text": the query's sentence, "changes": [changes or null per slot]}, ... T]}``. A heatmap's changes
    are its frame (the page lays them over the step's heatmap it holds: only the frame moves), the bars' are
    _bar_changes less the base sent (the bars at position 0). The heading and the what-if notes are the same at every
    position (the page keeps the step's). At step 2 the frames are Q's, K's and V's (qkv_frames), and the query's q
    beside its best keys (a new heatmap per position) is sent as its changes from the one at position 0. Nothing where
    nothing can be traced, or past POSITIONS_MAX_LENGTH tokens."""
    settings = (source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                temperature, mask_before_scaling)
    index = step_index(step)
    key = STAGE_KEYS[index]
    if source != SOURCES[2] and not text:
        return gr.skip()
    try:
        request = head_request(ctx, *settings[:9])
    except UnknownCharacterError:
        return gr.skip()
    T, C, d = request.length, request.embedding_dim, request.head_size
    if T > POSITIONS_MAX_LENGTH:
        return gr.skip()
    switches = switch_settings(scale, mask, temperature, mask_before_scaling)
    comparing = switches != walkthrough.DEFAULT_SWITCHES and key in walkthrough.SWITCHED_STAGES
    cost = budget.attention_view_cost(length=T, embedding_dim=C, head_size=d, bars=2 * T)
    with ctx.budget.reserve(request.cost(cost), hint=request.hint):
        inputs = heads.build(request) if heads is not None else request.build()
        trace = inputs.trace(**switches)
        widths = [min(matrix.values.size(1), plots.MAX_SIDE) for matrix in trace.matrices(key)]
        widths = (widths[:1] * 2 if comparing else widths) + [0] * 3

        def bars(position: int) -> list[dict | None]:
            token = trace.tokens[position]
            return [score_bar_args(trace, key, position, token) if index >= SCORES_MET else None,
                    weight_bar_args(trace, position, token) if index >= WEIGHTS_MET else None]

        if key == "qkv":  # step 2's q beside its best keys: the picture at position 0, and each position's changes
            bases = [None] * 3 + [json.loads(query_beside_keys(trace, 0, trace.tokens[0]).to_json()), None]
            besides = beside_changes(trace)
        else:
            bases = [None] * 3 + [json.loads(plots.bar_chart(**args).to_json()) if args else None for args in bars(0)]
        shown = [plots._display_label(str(label)) for label in trace.tokens]
        positions = []
        for position in range(T):
            if key == "qkv":
                frames = [{"layout": {"shapes": shapes}} for shapes in qkv_frames(trace, position, 0)]
                text = coming_text(position, trace.tokens[position], index)
                changes = _pruned(besides[position], bases[3])
                positions.append({"text": text, "changes": [*frames, changes, None]})
                continue
            frames = [{"layout": {"shapes": [plots.row_frame(position, width)]}} if width else None
                      for width in widths[:3]]
            # both bar charts label the same tokens first (the query, its largest weights): one choice of ticks
            ticks = plots._bar_ticks(shown, plots.BAR_LABEL_ROOM_PX, labels_that_matter(trace, position))
            changes = [_pruned(_bar_changes(**args, shown=shown, ticks=ticks), base) if args else None
                       for args, base in zip(bars(position), bases[3:])]
            if index >= WEIGHTS_MET:
                text = mixes_text(walkthrough.query_row(trace, position))
            else:
                text = coming_text(position, trace.tokens[position], index)
            positions.append({"text": text, "changes": frames + changes})
    keys = {str(query): _deck_key(*settings, query) for query in range(-1, T)}
    return json.dumps({"step": STEP_TITLES[index], "length": T, "keys": keys, "bases": bases,
                       "positions": positions}, separators=(",", ":"))


# The page keeps attention_positions' answers (window.attentionPositions) and draws a new query position from them
KEEP_POSITIONS_JS = "(raw) => { window.attentionPositions.keep(raw); }"
# (query box, step) -> (heading, what-if notes, query sentence, asked of the server, drawn in the page): one of the
# last two stamped, so the server is asked for the view, or for the rest of it (the other steps, the spare decks)
QUERY_JS = "(value, step) => window.attentionPage.query(value, step)"


def switch_label(scale, mask, mask_before_scaling, temperature) -> str:
    """The page's name for a setting of the what-if switches (SWITCH_LABEL_JS says the same in the page)."""
    return f"{int(bool(scale))}{int(bool(mask))}{int(bool(mask_before_scaling))}|{float(temperature):.2f}"


SWITCH_LABEL_JS = "window.attentionPage.switchLabel"  # page/attention.js: the same name, in the page
FLIPPED = ("scale", "mask", "mask_before_scaling")  # the switches whose other setting is made ahead


def attention_spare(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                    scale, mask, temperature, mask_before_scaling, step, query, *, heads: HeadCache | None = None):
    """The step on screen once more for each setting one switch away (the scaling, the mask, their order), as spare
    decks the page keeps: a click on one of those switches is drawn at once from them, and the server's answer for
    it, under the same key, draws nothing again. Nothing where nothing can be traced."""
    base = (source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text)
    now = dict(scale=scale, mask=mask, mask_before_scaling=mask_before_scaling)
    spares = {}
    for name in FLIPPED:
        flipped = dict(now, **{name: not now[name]})
        settings = (*base, flipped["scale"], flipped["mask"], temperature, flipped["mask_before_scaling"], query)
        view = stage_view(ctx, *settings[:-1], step, query, page=True, heads=heads)
        if view.plot_a is None:
            return gr.skip()
        label = switch_label(flipped["scale"], flipped["mask"], flipped["mask_before_scaling"], temperature)
        spares[label] = chart_deck.deck_json(_deck_key(*settings), {STEP_TITLES[step_index(step)]: _deck_view(view)})
    around = _deck_key(*base, scale, mask, temperature, mask_before_scaling, query)
    return chart_deck.spare_json(around, switch_label(scale, mask, mask_before_scaling, temperature), spares)


def attention_switched(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                       scale, mask, temperature, mask_before_scaling, step, query, warned, *,
                       heads: HeadCache | None = None):
    """attention_page for a what-if switch: (the deck, the warnings sent). The text and the query are as they were,
    so their boxes are left alone (the page may have drawn this answer already, from a spare deck)."""
    deck, _, _, sent = attention_page(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset,
                                      text, scale, mask, temperature, mask_before_scaling, step, query, warned,
                                      heads=heads)
    return deck, sent


def export_step(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                scale, mask, temperature, mask_before_scaling, step) -> list[str]:
    """Write the current step's matrices as CSV and .npy files in Gradio's temp space; returns their paths."""
    request = head_request(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text)
    switches = switch_settings(scale, mask, temperature, mask_before_scaling)
    key = STAGE_KEYS[step_index(step)]
    T, C, d = request.length, request.embedding_dim, request.head_size
    numbers = sum(rows * cols for rows, cols in walkthrough.stage_shapes(key, T, C, d))
    cost = budget.attention_export_cost(length=T, embedding_dim=C, head_size=d, numbers=numbers)
    ctx.sweep_temp_space(incoming=EXPORT_BYTES_PER_NUMBER * numbers)  # room for it in the temp space's quota
    with ctx.budget.reserve(request.cost(cost), hint=request.hint):
        trace = request.build().trace(**switches)
        return [str(path) for path in walkthrough.write_stage(trace, key, _fresh_export_folder())]


def _fresh_export_folder() -> Path:
    """A new folder in Gradio's temp space (GRADIO_TEMP_DIR, else <system temp>/gradio), which Gradio serves
    whatever allowed_paths says (not the playground's cache); export folders older than an hour go first."""
    root = Path(gr.utils.get_upload_folder()) / EXPORTS_FOLDER
    root.mkdir(parents=True, exist_ok=True)
    for old in root.iterdir():
        try:
            if time.time() - old.stat().st_mtime > _EXPORT_MAX_AGE_SECONDS:
                shutil.rmtree(old, ignore_errors=True)
        except OSError:  # another request removed it first
            continue
    folder = root / uuid.uuid4().hex[:12]
    folder.mkdir()
    return folder


def move_step(step, delta: int) -> str:
    index = min(max(step_index(step) + delta, 0), len(STEP_TITLES) - 1)
    return STEP_TITLES[index]


def _move_step_js(delta: int) -> str:
    """move_step in the page: the step picker moves without asking the server."""
    return f"(step) => window.attentionPage.moveStep(step, {int(delta)})"


def _source_groups(source: str) -> tuple:
    return tuple(gr.Group(visible=source == choice) for choice in SOURCES)


class Opened(NamedTuple):
    """The controls another tab sets to open one head here (the Why tab's "step through this head")."""

    source: gr.Radio
    checkpoint: gr.Dropdown
    text: gr.Textbox
    layer: gr.Number
    head: gr.Number
    query: gr.Number
    step: gr.Radio


def build(ctx: AppContext) -> Opened:
    gr.Markdown(
        "Scaled dot-product attention, one stage at a time, for a single head. Pick where the weights come from, "
        "type your own text, and step through. Switch the mask or the scaling off to see why each is there."
    )
    names = ctx.checkpoint_names()
    first_source = SOURCES[0] if names else SOURCES[2]
    with gr.Row():
        source = gr.Radio(list(SOURCES), value=first_source, label="Weights from", scale=1)
        with gr.Group(visible=first_source == SOURCES[0]) as checkpoint_group, gr.Row():
            checkpoint = checkpoint_dropdown(ctx, "attention", scale=2, min_width=CONTROL_MIN_WIDTH)
            layer = gr.Number(0, label="layer", scale=1)
            head = gr.Number(0, label="head", scale=1)
        with gr.Group(visible=first_source == SOURCES[1]) as random_group, gr.Row():
            seed = gr.Number(0, label="seed")
            embedding_dim = gr.Number(16, label="embedding_dim")
            head_size = gr.Number(8, label="head_size")
        with gr.Group(visible=first_source == SOURCES[2]) as preset_group:
            preset = gr.Dropdown([(f"{k}: {v.description}", k) for k, v in walkthrough.TEXTBOOK_PRESETS.items()],
                                 value="journey", label="preset")
    kv_line = gr.Markdown()  # a grouped model's K/V head for the picked query head (rotation_views.kv_text)
    text = gr.Textbox(DEFAULT_TEXT, label="Text (not used by the presets)", lines=2)
    with gr.Row():  # one column per switch: side by side on a desktop, a full-width row each on a phone
        with gr.Column(min_width=CONTROL_MIN_WIDTH):
            scale = gr.Checkbox(True, label="scale by 1/√d_k")
        with gr.Column(min_width=CONTROL_MIN_WIDTH):
            mask = gr.Checkbox(True, label="causal mask")
        with gr.Column(min_width=CONTROL_MIN_WIDTH):
            mask_before = gr.Checkbox(False, label="mask before scaling")
        with gr.Column(min_width=CONTROL_MIN_WIDTH, scale=2):
            temperature = gr.Slider(0.1, 5.0, value=1.0, step=0.1, label="temperature on the scores")
        with gr.Column(min_width=CONTROL_MIN_WIDTH):
            show_button = gr.Button("Show", variant="primary")
    with gr.Row():  # Previous and Next side by side, the step picker beside them (below them on a phone)
        with gr.Column(scale=0, min_width=250):
            with gr.Row():
                previous = gr.Button("◀ Previous", size="md", min_width=110)
                following = gr.Button("Next ▶", size="md", min_width=110)
        step = gr.Radio(list(zip(STEP_LABELS, STEP_TITLES)), value=STEP_TITLES[0], label="Step", scale=1,
                        min_width=240)
    text_check = gr.HTML(label="input check")
    heading = gr.Markdown(label="stage", elem_id=STAGE_ELEM_ID)
    # the page draws the figures itself (chart_deck): hosts for figures 1-3 here, the query's bars below
    with gr.Row():
        chart_deck.hosts(DECK, DECK_SLOTS[:3])
    whatif = gr.Markdown(label="what if")
    rotation = rotation_views.build(first_source)  # 2½: drawn for a rotary checkpoint; the shift proof for any
    opened = Opened(source, checkpoint, text, layer, head, None, step)  # its query box follows
    score_views.build_changes(ctx, opened)  # why Q, K and V are three matrices: tie W_K to W_Q, V = X
    with gr.Accordion("One query token", open=True):
        query = gr.Number(-1, label="query position (-1 = the last token)",
                          info="its row is framed in orange on the heatmaps; click a row to choose it",
                          elem_id=QUERY_ELEM_ID)
        gr.HTML("", js_on_load=LISTEN_JS, padding=False, min_height=0)
        with gr.Row():
            chart_deck.hosts(DECK, DECK_SLOTS[3:])
        query_md = gr.Markdown(label="values mixed")
        score_views.build_attention(ctx, opened._replace(query=query), QUERY_SHOWN_JS)  # why this score
    # /attention_step's figures, for API clients: never shown in the page, which draws the same figures from the deck
    plot_a, plot_b, plot_c = (gr.Plot(label=f"matrix {n}", visible=False) for n in (1, 2, 3))
    query_scores, query_weights = gr.Plot(label="score row", visible=False), gr.Plot(label="softmax row", visible=False)
    api_step = gr.Button("Show (API)", visible=False)  # /attention_step's trigger: the page's Show answers in the page
    deck = gr.Textbox(visible=False, label="chart deck")  # a Textbox, not a State: the page's js= events read it
    head_table.build(ctx, source, checkpoint, layer, head, step, shown_at=STAGE_ELEM_ID)
    with gr.Row():
        export = gr.Button("Export this step (CSV + .npy)")
        files = gr.File(label="Downloads", file_count="multiple", height=140)
    warned = gr.State([])  # the warnings the last view sent, so typing does not repeat them

    settings = [source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                temperature, mask_before, step]
    outputs = [heading, plot_a, plot_b, plot_c, whatif, query_scores, query_weights, query_md, text_check]
    heads = HeadCache(budget=ctx.budget)  # held from the server's budget, which evicts it
    draw = dict(fn=None, inputs=[deck, step], outputs=[heading, whatif, query_md], show_progress="hidden",
                queue=False)
    # only a first answer replaces the deck the page holds, where it was made for the inputs on screen and the query
    # position it wrote to the box (attention_page names them: a position typed and drawn in the page meanwhile is
    # not drawn over by the answer for the one before); the rest (every step, a step picked) add to the views of its
    # settings, so a slow answer for settings since changed is never drawn
    # the query position the answer shows goes to the box only where the answer is drawn (attention.js's drawFirst):
    # written by the answer itself, an answer made for -1 before the Why tab's step-through wrote 30 put -1 back
    shown_query = gr.Number(-1, visible=False, label="query position the answer shows")
    draw_first = dict(draw, inputs=[deck, step, *settings[:-1], query, shown_query],
                      outputs=[heading, whatif, query_md, query],
                      js=chart_deck.draw_js(DECK, DECK_TEXTS, reveal=STAGE_ELEM_ID, settings=True,
                                            call="window.attentionPage.drawFirst"))
    draw = dict(draw, js=chart_deck.draw_js(DECK, DECK_TEXTS, reveal=STAGE_ELEM_ID, more=True))
    # Hidden progress: a refused input leaves the previous figures as they were (no "Error" badge on each);
    # the toast says why. always_last: while one view computes, only the latest edit waits behind it.
    quick = dict(show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane)
    first_io = dict(inputs=[*settings, query, warned], outputs=[deck, text_check, shown_query, warned])

    def first(listener, moved: bool = False, **options):
        """``listener`` answers with the step on screen and what the page holds beside it (attention_page);
        ``moved``: the text under the query changed (attention_page's ``moved``)."""
        return wire(listener, attention_page, ctx, fixed=dict(heads=heads, moved=moved), **first_io, **options)

    spare = gr.Textbox(visible=False, label="spare decks")  # the step on screen, one switch away (attention_spare)
    # the step on screen at every query position (attention_positions); a new position drawn in the page (its value
    # stamped) or asked of the server
    positions = gr.Textbox(visible=False, label="query positions")
    drawn = gr.Textbox(visible=False, label="query position drawn in the page")
    need = gr.Textbox(visible=False, label="query position asked of the server")

    def answer(event, name: str) -> None:
        """``event`` answers with the step on screen (drawn at once), then every other step (kept for stepping),
        then the step on screen one switch away (kept for a what-if click)."""
        event.success(**draw_first, api_name=f"{name}_draw", api_visibility="private")
        event.failure(None, js=chart_deck.settle_js(DECK), api_name=f"{name}_settle", api_visibility="private",
                      show_progress="hidden", queue=False)
        drawn = wire(event.success, attention_deck, ctx, [*settings[:-1], query], deck, fixed=dict(heads=heads),
                     api_name=f"{name}_deck", api_visibility="private", show_progress="hidden",
                     trigger_mode="always_last", **ctx.fast_lane).then(
            **draw, api_name=f"{name}_deck_draw", api_visibility="private")
        keep_spares(drawn.then, name)

    def keep_spares(listener, name: str, every_position: bool = True) -> None:
        """The step on screen one switch away, then (``every_position``) at every query position, kept in the page."""
        kept = wire(listener, attention_spare, ctx, [*settings, query], spare, fixed=dict(heads=heads),
                    api_name=f"{name}_spare", api_visibility="private", show_progress="hidden",
                    trigger_mode="always_last", **ctx.fast_lane).then(
            None, spare, None, js=chart_deck.keep_js(DECK), api_name=f"{name}_spare_keep", api_visibility="private",
            show_progress="hidden", queue=False)
        if every_position:
            wire(kept.then, attention_positions, ctx, settings, positions, fixed=dict(heads=heads),
                 api_name=f"{name}_positions", api_visibility="private", show_progress="hidden",
                 trigger_mode="always_last", **ctx.fast_lane).then(
                None, positions, None, js=KEEP_POSITIONS_JS, api_name=f"{name}_positions_keep",
                api_visibility="private", show_progress="hidden", queue=False)

    source.change(_source_groups, source, [checkpoint_group, random_group, preset_group],
                  api_name="attention_source", api_visibility="private", show_progress="hidden")
    # /attention_step answers API clients (its figures as Plots, a refusal as an error); the page's Show answers as
    # every other change does, with the reason in the heading and one warning (a click with an emptied text box
    # had toasted a warning from the text's change and an error from Show)
    wire(api_step.click, attention_step, ctx, [*settings, query], outputs, fixed=dict(heads=heads),
         api_name="attention_step", **quick)
    answer(first(show_button.click, api_name="attention_show", api_visibility="private", **quick), "attention_show")
    # on arrival: gr.on without triggers or inputs runs once the page has loaded, held in the page until the visitor
    # first opens the tab (events.once_shown; the Tokenize tab comes first); the view then reads the page's values
    # (and, where the Why tab opened it, until its head is in the controls: attention.js's whenOpened)
    arrival = once_shown(gr.on(None, None, api_name="attention_arrival", api_visibility="private"), QUERY_ELEM_ID,
                         "attention_arrival_shown", then_js="window.attentionPage.whenOpened")
    answer(first(arrival.then, api_name="attention_load", api_visibility="private", **quick), "attention_load")
    # a step is drawn in the page from the deck already there (the server is not asked)
    step.change(**draw, api_name="attention_step_change", api_visibility="private")
    keep_spares(step.change, "attention_step_change")  # the new step one switch away, for a what-if click there
    previous.click(None, step, step, js=_move_step_js(-1), api_name="attention_previous", api_visibility="private",
                   queue=False)
    following.click(None, step, step, js=_move_step_js(1), api_name="attention_next", api_visibility="private",
                    queue=False)
    switch_controls = (("scale", scale), ("mask", mask), ("mask_order", mask_before), ("temperature", temperature))
    labelled = [scale, mask, mask_before, temperature]  # in switch_label's order
    for name, control in switch_controls:
        # drawn at once from a spare deck where the page holds one; the server's answer follows either way (for the
        # other steps), into hidden boxes only, and draws nothing again where the spare was drawn
        control.change(None, [*labelled, step], [heading, whatif, query_md], api_name=f"attention_adopt_{name}",
                       api_visibility="private", js=chart_deck.adopt_js(DECK, DECK_TEXTS, SWITCH_LABEL_JS),
                       show_progress="hidden", queue=False)
        answer(wire(control.change, attention_switched, ctx, fixed=dict(heads=heads),
                    inputs=[*settings, query, warned], outputs=[deck, warned], api_name=f"attention_update_{name}",
                    api_visibility="private", **quick), f"attention_update_{name}")
    # .input, not .change: the view writes a clamped position back into the box, which must not re-trigger it. A
    # position of the text is drawn in the page from what it holds, and the server sends the rest for it (the other
    # steps, the spare decks); anything else (nothing held yet, past the end, a decimal) is the server's to answer
    query.input(None, [query, step], [heading, whatif, query_md, need, drawn], js=QUERY_JS,
                api_name="attention_query_move", api_visibility="private", show_progress="hidden", queue=False)
    answer(first(need.change, api_name="attention_update_query", api_visibility="private", **quick),
           "attention_update_query")
    moved = wire(drawn.change, attention_deck, ctx, [*settings[:-1], query], deck, fixed=dict(heads=heads),
                 api_name="attention_moved_deck", api_visibility="private", show_progress="hidden",
                 trigger_mode="always_last", **ctx.fast_lane).then(
        **draw, api_name="attention_moved_deck_draw", api_visibility="private")
    keep_spares(moved.then, "attention_moved", every_position=False)  # the positions held are still right
    # a checkpoint that fails to load (`gpt2` offline) goes back to the one on screen (common.checkpoint_loaded)
    loaded = checkpoint_loaded(ctx, checkpoint, "attention")
    input_changes = [text.change, source.change, loaded.change, layer.change, head.change, seed.change,
                     embedding_dim.change, head_size.change, preset.change]
    answer(first(functools.partial(gr.on, input_changes), moved=True, api_name="attention_update_inputs",
                 api_visibility="private", js=chart_deck.wait_js(DECK), **quick), "attention_update_inputs")
    # spares are made around the text, the head and the query on screen: a change to any of them makes them wrong
    # (a new query drawn in the page moves the deck to its own key, whose spares follow; QUERY_JS forgets them where
    # the server is asked)
    gr.on(input_changes, None, None, None, js=chart_deck.forget_js(DECK),
          api_name="attention_forget_spares", api_visibility="private", show_progress="hidden", queue=False)
    # a download is of the step and settings it was made with: any change clears the list (in the page) rather than
    # leave a file of another step beside this one
    gr.on([step.change, *(control.change for _, control in switch_controls), *input_changes], None, None, files,
          js="() => null", api_name="attention_clear_downloads", api_visibility="private", show_progress="hidden",
          queue=False)
    wire(export.click, export_step, ctx, settings, files, api_name="attention_export", show_progress="hidden",
         **ctx.fast_lane)
    rotation_views.connect(ctx, rotation, kv_line, [source, checkpoint, layer, head, text, query],
                           [show_button.click, query.change, *input_changes[:5]], heads=heads)
    return Opened(source, checkpoint, text, layer, head, query, step)
