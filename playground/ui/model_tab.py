"""Model tab: zoom from one score to the whole model, on the learner's own text or on the book's inputs.

A model map at the top (Embeddings -> Layer 0..N-1 -> Final norm -> LM head -> Next-character probabilities)
picks the part; the level picker zooms: 1. one score (q_i, k_j, their products and sum), 2. one head (its
weights; the Attention tab steps through its seven stages), 3. all heads (weights, concatenation, output
projection; notebook 001's numbers on the textbook inputs; a switch that forgets notebook 002's transpose and
maps where each block of the scrambled rows came from), 4. the block (the residual stream's length at each
point, with switches for post-norm, encoder, ReLU and seeded attention dropout), 5. the model (a logit lens).
The maths and the words live in playground.lens.anatomy; what a view costs in anatomy.view_cost. This module lays
them out.

The view renders when the page loads and whenever a setting changes (``/model_view`` for API clients).
Refusals arrive as a toast only: the events hide their progress, so the previous figures stay as they were.
"""

from __future__ import annotations

import functools
import hashlib
import json

import gradio as gr

from playground import checks
from playground.checkpoints import store as checkpoints
from playground.lens import anatomy, walkthrough
from playground.lens.anatomy import lessons
from playground.lens.anatomy.lessons import LEVEL_LABELS, LEVEL_TITLES, MODEL_PARTS
from playground.ui import chart_deck
from playground.ui.common import FAILURES, REFUSALS, AppContext, checkpoint_dropdown, checkpoint_loaded, fold
from playground.ui.events import once_shown, wire
from playground.ui.model_family_views import checkpoint_view, checkpoint_views
from playground.ui.model_views import (
    ATTENTION_MODES,
    BOOK_INPUTS,
    BOOK_SOURCES,
    CONTROL_MIN_WIDTH,
    DEFAULT_TEXT,
    LEVEL_ELEM_ID,
    SHOWN_ID,
    SOURCES,
    View,
    book_view,
    textbook_view,
    view_settings,
)


def model_view(ctx: AppContext, source, checkpoint, text, level, layer, head, query, key, norm_order, attention,
               activation, dropout, dropout_seed, forget_transpose: bool = False, book_inputs: str = BOOK_INPUTS[0],
               part: str = "") -> View:
    """Plain handler: one zoom level's view. Returns a View (the map's part, heading Markdown, up to four figures,
    a numbers Markdown table behind a fold, the map's parts for this model, and level 3's forgotten-transpose
    picture). ``forget_transpose`` (level 3 only): join the heads as notebook 002's code does, without the
    transpose. A notebook's own model as the source (notebook 002's encoder layer, 003's two-layer transformer,
    004's sliced heads) reads ``book_inputs``: the text or the notebook's own inputs. ``part``: the part of the
    model map last clicked (the page keeps it; API clients leave it out)."""
    text = checks.text(text, "The text", ctx.limits.max_text_chars)
    source = checks.choice(source, "source", SOURCES)
    if source in BOOK_SOURCES:
        view = book_view(source, text, checks.choice(book_inputs, "inputs", BOOK_INPUTS))
    else:
        settings = view_settings(level, layer, head, query, key, norm_order, attention, activation, dropout,
                                 dropout_seed, forget_transpose)
        if source == SOURCES[0]:
            view = checkpoint_view(ctx, checkpoint, text, settings, part)
        else:
            view = textbook_view(settings, part)
    return _folded(view)


def _folded(view: View) -> View:
    """The view as the page shows it: its numbers table behind a fold."""
    return view._replace(numbers=fold(view.numbers, "the numbers"))


def plain(view: View) -> tuple:
    """/model_view's answer for API clients: (the map's part, heading, figure 1-4 or None, numbers)."""
    return view.part, view.heading, view.plot_a, view.plot_b, view.plot_c, view.plot_d, view.numbers


DECK = "model"  # the page's chart deck: one view per zoom level, up to four figures each
DECK_SLOTS = range(4)
DECK_TEXTS = 4  # the heading, the forgotten transpose's picture, the numbers, the model map's part


def _deck_key(*settings) -> str:
    """Names the settings a deck's views were made with (all but the level): the page keeps views of one key."""
    return hashlib.sha1(repr(settings).encode()).hexdigest()[:16]


def _deck_view(view: View) -> tuple[list[str], list]:
    """The view's texts and its figures, those drawn first: the page numbers them 1, 2, … with no gaps."""
    drawn = [figure for figure in (view.plot_a, view.plot_b, view.plot_c, view.plot_d) if figure is not None]
    return [view.heading, view.picture, view.numbers, view.part], drawn + [None] * (len(DECK_SLOTS) - len(drawn))


def _level_title(level) -> str:
    """The level picker's value for ``level`` (a title or a key)."""
    return LEVEL_TITLES[anatomy.LEVELS.index(lessons.level_key(level))]


def model_page(ctx: AppContext, source, checkpoint, text, level, layer, head, query, key, norm_order, attention,
               activation, dropout, dropout_seed, forget_transpose, book_inputs, part) -> str:
    """The page's first answer to a change: a deck holding the level on screen (the page draws it where the inputs
    it names are still the ones it was made for; model_deck follows with the other levels)."""
    settings = (source, checkpoint, text, layer, head, query, key, norm_order, attention, activation, dropout,
                dropout_seed, forget_transpose, book_inputs, part)
    made_for = [source, checkpoint, text, norm_order, attention, activation, dropout, dropout_seed, forget_transpose,
                book_inputs]  # what the page compares (build's drawn_where)
    view = model_view(ctx, source, checkpoint, text, level, layer, head, query, key, norm_order, attention,
                      activation, dropout, dropout_seed, forget_transpose, book_inputs, part)
    name = level if source in BOOK_SOURCES else _level_title(level)  # a notebook's model has one view
    # named as its spares are: where only the layer, head or query changed, the page keeps the spares it holds
    label = spare_label(layer, head, query) if source == SOURCES[0] and all(
        isinstance(value, (int, float)) for value in (layer, head, query)) else None
    return chart_deck.deck_json(_deck_key(*settings), {name: _deck_view(view)}, label=label, settings=made_for)


def model_deck(ctx: AppContext, source, checkpoint, text, layer, head, query, key, norm_order, attention, activation,
               dropout, dropout_seed, forget_transpose, book_inputs, part):
    """Every level's view for the settings on screen: the page then zooms through them by itself. A level that is
    refused is left out (model_page has said why where it is the one on screen); a notebook's own model has no
    levels, and nothing more is sent."""
    if source in BOOK_SOURCES:
        return gr.skip()
    settings = (source, checkpoint, text, layer, head, query, key, norm_order, attention, activation, dropout,
                dropout_seed, forget_transpose, book_inputs, part)
    views = {}
    for title in LEVEL_TITLES:
        try:
            views[title] = _deck_view(model_view(ctx, source, checkpoint, text, title, layer, head, query, key,
                                                 norm_order, attention, activation, dropout, dropout_seed,
                                                 forget_transpose, book_inputs, part))
        except (*REFUSALS, *FAILURES):
            continue
    return chart_deck.deck_json(_deck_key(*settings), views) if views else gr.skip()


MAX_SPARE_VIEWS = 4  # other layers and heads whose view of the level on screen is made ahead, nearest first (more
# kept the server's fast lane busy after each answer: a query position asked right after waited behind them)
MAX_SPARE_BYTES = 1_500_000  # and the spare decks sent after a change at most this large together (level 3's
# view of all heads, some 1.4 MB, is not made ahead: its layers and heads go to the server)


def spare_label(layer, head, query) -> str:
    """The page's name for a layer, a head and a query position (SPARE_LABEL_JS says the same in the page):
    "1|0|-1". A spare is named by all three, so one drawn carries the others with it (chart_deck's carry)."""
    def number(value) -> str:
        value = float(value)
        return str(int(value)) if value.is_integer() else repr(value)
    return f"{number(layer)}|{number(head)}|{number(query)}"


SPARE_LABEL_JS = "window.modelPage.spareLabel"  # page/model.js: the same name, in the page


def model_spare(ctx: AppContext, source, checkpoint, text, level, layer, head, query, key, norm_order, attention,
                activation, dropout, dropout_seed, forget_transpose, book_inputs, part):
    """The level on screen once more for other layers and heads of the checkpoint (the nearest MAX_SPARE_VIEWS, up to
    MAX_SPARE_BYTES), as spare decks the page keeps: a new layer or head there is drawn at once from them, and the
    server's answer for it, under the same key, draws nothing again. Nothing for a level that reads neither, for the
    textbook or a notebook's model (one layer, one head shown), or where the view is refused."""
    if source != SOURCES[0] or not isinstance(layer, (int, float)) or not isinstance(head, (int, float)):
        return gr.skip()
    level_key = lessons.level_key(level) if level in LEVEL_TITLES else None
    if level_key is None or not _picker_shown("layer", level_key, True):
        return gr.skip()
    try:
        config = ctx.checkpoint(checkpoint or "").config
    except (*REFUSALS, *FAILURES):
        return gr.skip()
    kind = type(layer)
    others = [(kind(other), head) for other in range(config.layers_num) if other != layer]
    if _picker_shown("head", level_key, True):
        others += [(layer, type(head)(other)) for other in range(config.heads_num) if other != head]
    others.sort(key=lambda lh: abs(lh[0] - layer) + abs(lh[1] - head))
    rest = (query, key, norm_order, attention, activation, dropout, dropout_seed, forget_transpose, book_inputs, part)
    spares, sent = {}, 0
    for other_layer, other_head in others[:MAX_SPARE_VIEWS]:
        try:
            deck = model_page(ctx, source, checkpoint, text, level, other_layer, other_head, *rest)
        except (*REFUSALS, *FAILURES):
            continue
        sent += len(deck)
        if sent > MAX_SPARE_BYTES:
            break
        spares[spare_label(other_layer, other_head, query)] = deck
    if not spares:
        return gr.skip()
    around = _deck_key(source, checkpoint, text, layer, head, *rest)
    return chart_deck.spare_json(around, spare_label(layer, head, query), spares)


MAX_HELD_CHARS = 64_000  # the page's list of spares held, as sent: some 48 labels of a dozen characters


def _held_labels(held) -> set[str]:
    """The labels in the page's list of the spares it holds; none where it is not such a list (it comes from the
    page: a visitor can send anything, and is then sent every spare again, at most a round's)."""
    if not isinstance(held, str) or len(held) > MAX_HELD_CHARS:
        return set()
    try:
        labels = json.loads(held)
    except (ValueError, RecursionError):
        return set()
    return {label for label in labels if isinstance(label, str)} if isinstance(labels, list) else set()


QUERY_SPARE_LEVELS = ("score", "head", "block")  # the levels whose other query positions are made ahead (all heads'
# view is some 1.4 MB a position, and the model level's logit lens runs the whole model a position)
QUERY_SPARES_PER_ROUND = 12  # positions a round makes: some 0.6 s of one core at the first level; a round at a time,
QUERY_SPARE_ROUNDS = 4  # so a click of another visitor waits for one round at most, and 48 positions in all


def model_query_spare(ctx: AppContext, source, checkpoint, text, level, layer, head, query, key, norm_order,
                      attention, activation, dropout, dropout_seed, forget_transpose, book_inputs, part,
                      held: str = "[]"):
    """The level on screen at other query positions (the QUERY_SPARES_PER_ROUND nearest the query that the page does
    not hold: ``held``, the labels of its spares), as spare decks each sent as its changes to the view on screen (a
    new position moves a frame and rewrites a title, its heatmaps mostly unchanged): a new query position the page
    holds is drawn at once, and the server's answer for it draws nothing again. Made once the visitor changes the
    query (QUERY_SPARE_ROUNDS rounds), never on arrival; nothing for the textbook or a notebook's model, or a level
    not in QUERY_SPARE_LEVELS."""
    if source != SOURCES[0] or not all(isinstance(value, (int, float)) for value in (layer, head, query)):
        return gr.skip()
    if level not in LEVEL_TITLES or lessons.level_key(level) not in QUERY_SPARE_LEVELS:
        return gr.skip()
    held_labels = _held_labels(held)
    try:
        loaded = ctx.checkpoint(checkpoint or "")
        T = walkthrough.prepare_text(checks.text(text, "The text", ctx.limits.max_text_chars), loaded.tokenizer,
                                     loaded.config.context_size).ids.numel()
        here, _ = anatomy.position(query, "query", T)
    except (*REFUSALS, *FAILURES):
        return gr.skip()
    kind = type(query)
    missing = [kind(p) for p in sorted(range(T), key=lambda p: (abs(p - here), p))
               if p != here and spare_label(layer, head, p) not in held_labels][:QUERY_SPARES_PER_ROUND]
    if not missing:
        return gr.skip()
    rest = (key, norm_order, attention, activation, dropout, dropout_seed, forget_transpose, book_inputs, part)
    try:
        settings = view_settings(level, layer, head, query, key, norm_order, attention, activation, dropout,
                                 dropout_seed, forget_transpose)
        views = checkpoint_views(ctx, checkpoint, checks.text(text, "The text", ctx.limits.max_text_chars),
                                 settings, part, [query, *missing])
    except (*REFUSALS, *FAILURES):
        return gr.skip()
    name = _level_title(level)
    _, shown_figures = _deck_view(_folded(views[0]))
    bases = {f"q{slot}": json.loads(figure.to_json()) for slot, figure in enumerate(shown_figures)
             if figure is not None}
    spares = {}
    for position, view in zip(missing, views[1:], strict=True):
        texts, figures = _deck_view(_folded(view))
        sent = [None if figure is None else
                {"base": f"q{slot}", "changes": chart_deck.figure_changes(bases[f"q{slot}"],
                                                                           json.loads(figure.to_json()))}
                if f"q{slot}" in bases else json.loads(figure.to_json())
                for slot, figure in enumerate(figures)]
        key_p = _deck_key(source, checkpoint, text, layer, head, position, *rest)
        spares[spare_label(layer, head, position)] = chart_deck.deck_json(key_p, {name: (texts, sent)})
    around = _deck_key(source, checkpoint, text, layer, head, query, *rest)
    return chart_deck.spare_json(around, spare_label(layer, head, query), spares, bases)


def navigate(part, level, layer) -> tuple[str, object, str]:
    """A click on the model map -> (level, layer, the part clicked): a block keeps a level inside the block
    (score, head, heads, block) or goes to the block level; every other part goes to the model level."""
    current = lessons.level_key(level) if level in LEVEL_TITLES else "score"
    if isinstance(part, str) and part.startswith("Layer "):
        number = checks.whole_number(part.removeprefix("Layer "), "layer", 0)
        return (level if current != "model" else LEVEL_TITLES[anatomy.LEVELS.index("block")]), number, part
    if part in MODEL_PARTS:
        return LEVEL_TITLES[anatomy.LEVELS.index("model")], layer, part
    raise ValueError(f"unknown part of the model {checks.shown(part)}")


def controls(ctx: AppContext, source, checkpoint, level) -> tuple:
    """Which pickers the view uses, (checkpoint group, layer, head, key, block switches, the forget-the-transpose
    switch, the zoom level, the book model's inputs, the query) visible or not, and the model map's parts for this model
    (left as they are when the checkpoint does not load: the view says why). A notebook's own model has one view:
    no map, no zoom level."""
    key = lessons.level_key(level) if level in LEVEL_TITLES else "score"
    from_checkpoint = source == SOURCES[0]  # the textbook has one layer, and its block one head
    if source in BOOK_SOURCES:
        hidden = gr.Number(visible=False)
        return (gr.Group(visible=False), hidden, hidden, hidden, gr.Group(visible=False), gr.Checkbox(visible=False),
                gr.Radio(visible=False), gr.Radio(visible=False), gr.Radio(visible=True), hidden)
    model_map = gr.Radio(choices=lessons.map_parts(1), visible=True)
    if from_checkpoint:
        try:
            model_map = gr.Radio(choices=lessons.map_parts(ctx.checkpoint(checkpoint or "").config.layers_num),
                                 visible=True)
        except (ValueError, OSError, RuntimeError):
            model_map = gr.Radio(visible=True)
    layer, head, key_, switches, forget = (_picker_shown(picker, key, from_checkpoint) for picker in LEVEL_PICKERS)
    return (gr.Group(visible=from_checkpoint), gr.Number(visible=layer), gr.Number(visible=head),
            gr.Number(visible=key_), gr.Group(visible=switches), gr.Checkbox(visible=forget),
            model_map, gr.Radio(visible=True), gr.Radio(visible=False), gr.Number(visible=True))


# which pickers a level uses, as controls() decides them for a source with levels (a notebook's model has none)
LEVEL_PICKERS = {  # picker -> (the levels that use it, only for a trained checkpoint)
    "layer": (("score", "head", "heads", "block"), True),
    "head": (("score", "head", "heads", "block"), True),
    "key": (("score",), False),
    "switches": (("block",), False),
    "forget_transpose": (("heads",), False),
}


def _picker_shown(picker: str, level: str, from_checkpoint: bool) -> bool:
    """Whether ``picker`` shows at ``level`` (a key), for a source with levels: the rule _level_controls_js runs."""
    used, only_checkpoint = LEVEL_PICKERS[picker]
    return level in used and (from_checkpoint or not only_checkpoint)


def _level_controls_js() -> str:
    """controls() for a new level, in the page: the pickers it uses shown, the others hidden (no server)."""
    return "(source, level) => window.modelPage.levelControls(source, level)"  # page/model.js


def page_constants() -> dict:
    """What page/model.js reads (page_scripts' prelude): the levels by title, the pickers, the notebooks' models."""
    return {"LEVELS": dict(zip(LEVEL_TITLES, anatomy.LEVELS)), "LEVEL_PICKERS": LEVEL_PICKERS,
            "BOOK_SOURCES": list(BOOK_SOURCES), "CHECKPOINT_SOURCE": SOURCES[0]}


def _first_parts(ctx: AppContext, name: str | None) -> list[str]:
    """The map's parts for the default checkpoint, from its config alone (nothing is loaded at build time)."""
    if name:
        try:
            return lessons.map_parts(checkpoints.read_config(checkpoints.resolve(name, ctx.weights)).layers_num)
        except checkpoints.CheckpointError:
            pass
    return lessons.map_parts(1)


def build(ctx: AppContext) -> None:
    gr.Markdown(
        "The whole model, and how to zoom into it: from one score (a query times a key) to one head, all heads, a "
        "block, and the model's next-character probabilities. Click a part of the model, pick a zoom level, and "
        "type your own text (a notebook's own model has one view: no parts, no levels)."
    )
    names = ctx.checkpoint_names()
    first_source = SOURCES[0] if names else SOURCES[1]
    parts = _first_parts(ctx, names[0] if names else None)
    with gr.Row():
        source = gr.Radio(list(SOURCES), value=first_source, label="Numbers from", scale=1,
                          min_width=CONTROL_MIN_WIDTH)
        with gr.Group(visible=first_source == SOURCES[0]) as checkpoint_group:
            checkpoint = checkpoint_dropdown(ctx, "model", min_width=CONTROL_MIN_WIDTH)
    text = gr.Textbox(DEFAULT_TEXT, label="Text (the checkpoint reads it; the textbook inputs are fixed)", lines=2,
                      elem_id=SHOWN_ID)
    model_map = gr.Radio(parts, value=parts[1], label="The model, part by part (click one)",
                         info="Embeddings → blocks → final norm → LM head → next-character probabilities")
    level = gr.Radio(list(zip(LEVEL_LABELS, LEVEL_TITLES)), value=LEVEL_TITLES[0], label="Zoom level")
    with gr.Row():
        layer = gr.Number(0, label="layer", min_width=CONTROL_MIN_WIDTH, info="from 0, as on the map",
                          visible=first_source == SOURCES[0])
        head = gr.Number(0, label="head", min_width=CONTROL_MIN_WIDTH)
        query = gr.Number(-1, label="query position (-1 = last)", min_width=CONTROL_MIN_WIDTH)
        key = gr.Number(0, label="key position (-1 = last)", min_width=CONTROL_MIN_WIDTH)
    with gr.Group(visible=False) as switches, gr.Row():
        norm_order = gr.Radio([(lessons.NORM_ORDER_LABELS[k], k) for k in anatomy.NORM_ORDERS], value="pre",
                              label="LayerNorm", min_width=CONTROL_MIN_WIDTH)
        attention = gr.Radio([(lessons.ATTENTION_LABELS[causal], mode) for mode, causal in ATTENTION_MODES.items()],
                             value="decoder", label="attention", min_width=CONTROL_MIN_WIDTH)
        activation = gr.Radio([(lessons.ACTIVATION_LABELS[k], k) for k in anatomy.ACTIVATIONS], value="gelu",
                              label="MLP activation", min_width=CONTROL_MIN_WIDTH)
        dropout = gr.Slider(0.0, 0.9, value=0.0, step=0.05, label="attention dropout p",
                            info="training mode, seeded; 0 = off", min_width=CONTROL_MIN_WIDTH)
        dropout_seed = gr.Number(0, label="dropout seed", min_width=CONTROL_MIN_WIDTH)
    forget_transpose = gr.Checkbox(False, label=lessons.FORGET_TRANSPOSE_LABEL, info=lessons.FORGET_TRANSPOSE_INFO,
                                   visible=False)
    book_inputs = gr.Radio(list(BOOK_INPUTS), value=BOOK_INPUTS[0], label="The book's model reads", visible=False)
    heading = gr.Markdown(label="level", elem_id=LEVEL_ELEM_ID)
    picture = gr.HTML(label="the blocks, joined two ways", padding=False)  # level 3's forgotten transpose
    # The page draws the figures itself (chart_deck): a level already sent is drawn without asking the server. Each
    # figure keeps its own column, shown or not; the figures drawn come first, with no empty slot between.
    with gr.Row():
        chart_deck.hosts(DECK, DECK_SLOTS[:2], views=LEVEL_TITLES)
    with gr.Row():
        chart_deck.hosts(DECK, DECK_SLOTS[2:], views=LEVEL_TITLES)
    numbers = gr.Markdown(label="numbers")
    deck = gr.Textbox(visible=False, label="chart deck")  # a Textbox, not a State: the page's js= events read it
    # /model_view's answer, for API clients: plain values, never shown in the page (it draws the same from the deck)
    api_part, api_heading, api_numbers = (gr.Textbox(visible=False, label=what) for what in ("part", "heading",
                                                                                             "numbers"))
    api_plots = [gr.Plot(label=f"figure {n}", visible=False) for n in range(1, 5)]
    api_button = gr.Button("view", visible=False)

    clicked = gr.State("")  # the part of the model map last clicked: the model level names it
    spare = gr.Textbox(visible=False, label="spare decks")  # the level on screen for other layers and heads
    query_spare = gr.Textbox(visible=False, label="query spares")  # and for other query positions
    held = gr.Textbox("[]", visible=False, label="spares held")  # the labels of the spares the page holds

    settings = [source, checkpoint, text, level, layer, head, query, key, norm_order, attention, activation, dropout,
                dropout_seed, forget_transpose, book_inputs, clicked]
    unlevelled = [control for control in settings if control is not level]
    quick = dict(show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane)
    draw = dict(fn=None, inputs=[deck, level], outputs=[heading, picture, numbers, model_map], show_progress="hidden",
                queue=False)
    # a first answer is drawn where the inputs it names are still on screen (the layer, head, query and key are left
    # out: a new checkpoint's controls write them without asking for an answer)
    drawn_where = [source, checkpoint, text, norm_order, attention, activation, dropout, dropout_seed,
                   forget_transpose, book_inputs]  # model_page's made_for
    draw_first = dict(draw, inputs=[deck, level, *drawn_where], js=chart_deck.draw_js(DECK, DECK_TEXTS, settings=True))
    # only a first answer replaces the deck the page holds: the other levels add to the views of its settings
    draw = dict(draw, js=chart_deck.draw_js(DECK, DECK_TEXTS, more=True))

    def answer(listener, name: str, query_rounds: int = 0) -> None:
        """``listener`` answers with the level on screen (drawn at once), then every other level (kept), then the
        level on screen for other layers and heads. With ``query_rounds``, rounds of other query positions too, the
        first before the other levels: the next query position is the likeliest next click."""
        event = wire(listener, model_page, ctx, settings, deck, api_name=f"{name}_page", api_visibility="private",
                     **quick)
        event.success(**draw_first, api_name=f"{name}_draw", api_visibility="private")
        before = query_round(event.success, name, 0).then if query_rounds else event.success
        drawn = wire(before, model_deck, ctx, unlevelled, deck, api_name=f"{name}_deck",
                     api_visibility="private", show_progress="hidden", trigger_mode="always_last",
                     **ctx.fast_lane).then(**draw, api_name=f"{name}_deck_draw", api_visibility="private")
        after = keep_spares(drawn.then, name)
        for number in range(1, query_rounds):
            after = query_round(after.then, name, number)

    def query_round(listener, name: str, number: int):
        """The positions the page still lacks (it says which it holds first), made and kept in the page."""
        asked = listener(None, None, held, js=chart_deck.held_js(DECK), api_name=f"{name}_held_{number}",
                         api_visibility="private", show_progress="hidden", queue=False)
        return wire(asked.then, model_query_spare, ctx, [*settings, held], query_spare,
                    api_name=f"{name}_query_spare_{number}", api_visibility="private", show_progress="hidden",
                    **ctx.fast_lane).then(
            None, query_spare, None, js=chart_deck.keep_js(DECK), api_name=f"{name}_query_spare_keep_{number}",
            api_visibility="private", show_progress="hidden", queue=False)

    def keep_spares(listener, name: str):
        """The level on screen for other layers and heads (model_spare), kept in the page for a change of either."""
        return wire(listener, model_spare, ctx, settings, spare, api_name=f"{name}_spare", api_visibility="private",
                    show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane).then(
            None, spare, None, js=chart_deck.keep_js(DECK), api_name=f"{name}_spare_keep", api_visibility="private",
            show_progress="hidden", queue=False)

    def shown_controls(listener, **options):
        return wire(listener, controls, ctx, [source, checkpoint, level],
                    [checkpoint_group, layer, head, key, switches, forget_transpose, model_map, level, book_inputs,
                     query], show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane, **options)

    wire(api_button.click, model_view, ctx, settings, [api_part, api_heading, *api_plots, api_numbers], then=plain,
         api_name="model_view", **quick)
    # on arrival (see attention_tab): the view reads the page's values once the visitor opens the tab
    arrival = once_shown(gr.on(None, None, api_name="model_arrival", api_visibility="private"), SHOWN_ID,
                         "model_arrival_shown")
    answer(arrival.then, "model_load")
    # the pickers a level uses are shown in the page; after the server's controls (a new source or checkpoint, whose
    # answer may land after a level picked since) the page applies the level on screen again
    level_controls = dict(fn=None, inputs=[source, level], outputs=[layer, head, key, switches, forget_transpose],
                          js=_level_controls_js(), show_progress="hidden", queue=False, api_visibility="private")
    shown_controls(arrival.then, api_name="model_arrival_controls", api_visibility="private").then(
        **level_controls, api_name="model_arrival_level_controls")
    loaded = checkpoint_loaded(ctx, checkpoint, "model").change  # a name that fails to load goes back (common.py)
    shown_controls(functools.partial(gr.on, [source.change, loaded]), api_name="model_controls",
                   api_visibility="private").then(**level_controls, api_name="model_controls_level")
    level.change(**level_controls, api_name="model_level_controls")
    # a level is drawn in the page from the deck already there (the server is not asked); on a phone, where it
    # landed below the screen, the page scrolls to its heading
    level.change(**dict(draw, js=chart_deck.draw_js(DECK, DECK_TEXTS, reveal=LEVEL_ELEM_ID, more=True)),
                 api_name="model_level", api_visibility="private")
    # (no spares made for a new level: made meanwhile, they take the 2 cores the page draws the level with, 220 ->
    # 445 ms measured at load 6; a new level's layers and heads are the server's until its next answer)
    # a new layer or head is drawn at once from a spare deck where the page holds one; the server's answer follows
    # either way (for the other levels) and draws nothing again where the spare was drawn
    for name, control in (("layer", layer.input), ("head", head.change), ("query", query.change)):
        control(None, [layer, head, query, level], [heading, picture, numbers, model_map],
                api_name=f"model_adopt_{name}", api_visibility="private",
                js=chart_deck.adopt_js(DECK, DECK_TEXTS, SPARE_LABEL_JS), show_progress="hidden", queue=False)
    # spares are made around every other setting on screen: a change to any of them makes them wrong (a spare's
    # label names its layer, head and query position: one is never drawn for another)
    gr.on([source.change, loaded, text.change, key.change, norm_order.change,
           attention.change, activation.change, dropout.change, dropout_seed.change, forget_transpose.change,
           book_inputs.change], None, None, None, js=chart_deck.forget_js(DECK), api_name="model_forget_spares",
          api_visibility="private", show_progress="hidden", queue=False)
    # layer also changes when the map is clicked: .input here, and the map's click answers once itself
    answer(functools.partial(gr.on, [source.change, loaded, text.change, layer.input, head.change,
                                     key.change, norm_order.change, attention.change, activation.change,
                                     dropout.change, dropout_seed.change, forget_transpose.change,
                                     book_inputs.change]), "model_update")
    # a new query position: then the other positions, made ahead once the visitor moves the query (not on arrival)
    answer(query.change, "model_query", query_rounds=QUERY_SPARE_ROUNDS)
    answer(wire(model_map.input, navigate, None, [model_map, level, layer], [level, layer, clicked],
                api_name="model_navigate", api_visibility="private", show_progress="hidden").then, "model_navigate")
