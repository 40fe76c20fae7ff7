"""Why tab: from a head's pattern to the model's next character, on the learner's own text.

Three views of one checkpoint at one position: **why this character** (the target's logit split into the parts that
wrote it, and for the chosen head one picture from its pattern to the next character: its weights, what it writes
from each key, their product, the sum that is its bar, the logit and the probability), **what the head reads and
writes** (its QK and OV circuits over the vocabulary, the strongest pairs in words) and **knock heads out** (the
loss and the prediction without them, and every head ranked by the loss it adds). The maths is playground.lens.circuits;
why_reading checks the inputs, prices the reading and runs it, why_views says and draws what it found, and this
module holds the handlers, the decks the page is sent and the tab's wiring. Renders on arrival and on every edit
(``/why`` for API clients).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from collections import Counter
from typing import NamedTuple

import gradio as gr
import numpy as np
import plotly.graph_objects as go

from playground import checks
from playground.checkpoints import store as checkpoints
from playground.lens import circuits
from playground.ui import chain_plots, chart_deck, score_views
from playground.ui import why_page as script  # the page's own script: what the browser runs
from playground.ui.common import AppContext, checkpoint_dropdown, checkpoint_loaded, fold, keep_on_refusal
from playground.ui.events import wire
from playground.ui.why_page import (
    CIRCUITS_DECK,
    DECK,
    HEADS_DECK,
    HERE,
    RANKING_DECK,
    STRONGEST,
)
from playground.ui.why_reading import (
    CHAIN_MORE,
    DEFAULT_TEXT,
    HEAD_NAMES_INFO,
    MAX_RANKED_HEADS,
    MODES,
    SPLITS,
    STEP_THROUGH_PX,
    VERSUS,
    ReadingCache,
    WhyView,
    _every_head,
    _head_at,
    _head_names,
    _label,
    _names,
    _Reading,
    _reading,
    _strongest,
)
from playground.ui.why_views import (
    _cell_shapes,
    _chain_arguments,
    _chain_changes,
    _circuits_view,
    _head_heading,
    _heading,
    _in_the_tables,
    _numbers,
    _parts_changes,
    _parts_figure,
    _ranking,
    _texts,
)


def explain(ctx: AppContext, checkpoint: str, text: str, position, target: str, head: str = STRONGEST,
            knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS,
            distance=None, *, memo: ReadingCache | None = None) -> WhyView:
    """Plain handler (``/why``): why the model gives ``target`` (empty: its own guess) after
    ``text[: position + 1]``, the chosen head's chain and circuits, and what knocking out the ``knocked`` heads
    changes, as the page shows them (its texts and figures), with the parts and the chain as numbers too.
    ``split``: VERSUS, the parts of logit(target) - logit(runner-up); ALONE, of the target's logit (numbers' "split"
    says which). ``distance``: the QK table's distance from query back to key, for a model with rotary positions."""
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, position, memo, split,
                  distance) as (reading, position):
        heading, head_heading, knock_heading = _texts(reading, position)
        layer, which = _head_at(reading, position)
        chain = chain_plots.chain_figure(**_chain_arguments(reading, position, layer, which))
        circuits_heading, qk, ov = _circuits_view(reading, layer, which)
        circuits_heading = circuits_heading.replace(HERE, _in_the_tables(reading, position, layer, which))
        # the tables are the head's, kept for every position: this position's outlines go on copies
        qk, ov = (go.Figure(figure).update_layout(shapes=shapes)
                  for figure, shapes in zip((qk, ov), _cell_shapes(reading, position, layer, which)))
        return WhyView(heading, _parts_figure(reading, position), head_heading, chain,
                       _numbers(reading, position, layer, which), circuits_heading, qk, ov, knock_heading,
                       _ranking(reading))


# the one sentence of why a rotary model's QK table needs a distance, under the box that sets it
DISTANCE_INFO = ("rotary positions turn q and k, so a QK score depends on how far back the key is: the QK table is "
                 "drawn for keys this many tokens back")
MAX_SENT_CIRCUITS = 4  # heads whose circuits the page is sent ahead where every head's would be too many
# every head's QK and OV tables are sent ahead while they hold at most this many cells (the shipped model's 16 heads
# over its 65 characters: 135,200 cells, about 0.8 MB), so a head chosen in the list is drawn in the page
MAX_SENT_CIRCUIT_CELLS = 150_000


def _key(*settings) -> str:
    return hashlib.sha1(repr(settings).encode()).hexdigest()[:16]


def _circuits_key(reading: _Reading, checkpoint: str, text: str) -> str:
    """The key of a text's circuits: a rotary model's are drawn at a distance, and change with it."""
    return _key(checkpoint, text) if reading.distance is None else _key(checkpoint, text, reading.distance)


def _bases(reading: _Reading) -> dict:
    """The figures every view's figures are changes to (position 0's): a base carries only the charts' kind, the
    parts' names and its look; every view's changes carry the rest."""
    def build():
        figures = (_parts_figure(reading, 0), chain_plots.chain_base(reading.versus))
        return {name: json.loads(figure.to_json()) for name, figure in zip(("parts", "chain"), figures)}
    return reading.memo.get(("bases", reading.name, reading.versus), reading.model, build)


def _settings(checkpoint: str, text: str, target: str, split: str) -> dict:
    """The inputs a view was made for, as the page holds them: it leaves an answer for inputs it no longer shows."""
    return {"checkpoint": checkpoint, "text": text, "target": target, "split": split}


def _position_deck(reading: _Reading, key: str, positions, settings: dict | None = None) -> str:
    """The deck of these positions' parts, keyed "<T>:<key>" (the page reads the text's length from it): each view's
    texts are its heading and the name of the head with the longest bar there. ``settings``: the inputs it answers
    (_settings)."""
    views = {str(p): ([_heading(reading, p), circuits.head_name(*_strongest(reading, p))],
                      [{"base": "parts", "changes": _parts_changes(reading, p)}]) for p in positions}
    return chart_deck.deck_json(f"{reading.ids.numel()}:{key}", views, {"parts": _bases(reading)["parts"]},
                                settings=settings)


def _heads_deck(reading: _Reading, key: str, views) -> str:
    """The deck of heads' readings, one view "<head>@<position>" per (layer, head, position) in ``views``: its
    heading and its chain, from where it looked to the next character's probability."""
    sent = {f"{circuits.head_name(layer, which)}@{p}": ([_head_heading(reading, p, layer, which),
                                                         _in_the_tables(reading, p, layer, which),
                                                         json.dumps(_cell_shapes(reading, p, layer, which))],
                                                        [{"base": "chain",
                                                          "changes": _chain_changes(reading, p, layer, which)}])
            for layer, which, p in views}
    return chart_deck.deck_json(key, sent, {"chain": _bases(reading)["chain"]})


def _heatmap_changes(figure) -> dict:
    """A circuit's heatmap as changes to another of its kind (a base): its table, as float32 in base64 (Plotly's
    typed arrays; the values already rounded to 4 significant digits), its colour range and its title."""
    trace = figure.data[0]
    table = np.asarray(trace.z, dtype=np.float32)
    return {"data": [{"z": {"dtype": "f4", "bdata": base64.b64encode(table.tobytes()).decode(),
                            "shape": ", ".join(map(str, table.shape))}, "zmin": trace.zmin, "zmax": trace.zmax}],
            "layout": {"title": figure.layout.title.to_plotly_json(), "margin": {"t": figure.layout.margin.t}}}


def _circuits_deck(reading: _Reading, checkpoint: str, text: str, heads) -> str:
    """The circuits of these heads, each table as changes to one QK and one OV base (the labels and the look, sent
    once): every head of the shipped model is some 0.7 MB."""
    views, bases = {}, {}
    for layer, which in heads:
        heading, qk, ov = _circuits_view(reading, layer, which)
        for name, figure in (("qk", qk), ("ov", ov)):
            if name not in bases:
                bases[name] = json.loads(figure.to_json())
                del bases[name]["data"][0]["z"]
        views[circuits.head_name(layer, which)] = ([heading], [{"base": "qk", "changes": _heatmap_changes(qk)},
                                                               {"base": "ov", "changes": _heatmap_changes(ov)}])
    return chart_deck.deck_json(_circuits_key(reading, checkpoint, text), views, bases)


def _every_circuit_fits(reading: _Reading) -> bool:
    config = reading.model.config
    n = config.vocabulary_size if reading.subset is None else reading.subset.numel()
    return config.layers_num * config.heads_num * 2 * n * n <= MAX_SENT_CIRCUIT_CELLS


def _knock_json(reading: _Reading, key: str, names: str | None = None, near: dict | None = None) -> str:
    """The numbers the page writes the knock-out heading from (why_page's knockText, as _knock_text does): per set
    of heads knocked out ("" the intact model; ``names``: only that set), the loss and, at each position, the guess
    and the target's probability. Every head alone comes with the ranking, so ticking one asks the server nothing.
    ``near``: the sets one tick away from ``names`` (_near_knocks), sent with it ("near" names it: the page asks no
    more)."""
    knocks = reading.knocks if names is None else {name: reading.knocks[name] for name in ("", names)}
    if near is not None:
        knocks = {**near, **knocks}
    guessed = sorted({guess for knock in knocks.values() for guess in knock.guesses})
    return json.dumps({
        "key": key, "note": reading.ranking_note,
        "targets": [_label(reading.tokenizer.label(target)) for target in reading.targets],
        "labels": {str(i): _label(reading.tokenizer.label(i)) for i in guessed},
        "sets": {name: {"loss": knock.loss, "guesses": knock.guesses, "p": knock.target_probabilities}
                 for name, knock in knocks.items()},
        **({"near": [names]} if near is not None else {})})


def _near_knocks(reading: _Reading) -> dict:
    """The knock-outs one tick away from the knocked heads (each other head added after them, each of them taken off)
    that the reading does not hold, by their names: one batched pass, made while the reading is admitted (its price
    counts the ranking's pass, which this one follows); none where the model has more heads than are ranked (each
    would be a forward pass)."""
    every = _every_head(reading.model.config)
    knocked = reading.knocked_heads
    if not knocked or len(every) > MAX_RANKED_HEADS:
        return {}
    sets = [[*knocked, lh] if lh not in knocked else [k for k in knocked if k != lh] for lh in every]
    sets = [heads for heads in sets if heads and _names(heads) not in reading.knocks]
    if not sets:
        return {}
    model, ids = reading.model, reading.ids
    text_key = (reading.name, tuple(ids.tolist()))

    def read():
        means = reading.memo.get(("means", *text_key), model, lambda: circuits.head_means(model, ids)) \
            if reading.mode == "mean" else None
        return circuits.knock_outs(model, ids, sets, reading.targets, reading.mode, means)
    near = reading.memo.get(("near", *text_key, tuple(reading.targets), tuple(knocked), reading.mode), model, read)
    return {_names(knock.heads): knock for knock in near}


def why_page(ctx: AppContext, checkpoint: str, text: str, position, target: str, head: str = STRONGEST,
             knocked: list[str] | None = None, mode: str = "mean over the text", shown: dict | None = None,
             split: str = VERSUS, distance=None, *, fresh: bool = False, memo: ReadingCache | None = None):
    """The page's first answer to a change: (the parts at the position on screen, every head's reading there, the
    circuits of its head, the ranking, the knock-out numbers, ``shown`` updated). Circuits, a ranking and knock-out
    numbers the page holds (``shown``) are not sent again unless ``fresh``; why_deck follows with every other
    position."""
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, position, memo, split,
                  distance) as (reading, position):
        shown = dict(shown or {}) if not fresh else {}
        text_key = _key(checkpoint, text, target, reading.versus)
        deck = _position_deck(reading, text_key, [position], _settings(checkpoint, text, target, split))
        heads_deck = _heads_deck(reading, text_key, [(layer, which, position) for layer, which in reading.keys])
        layer, which = _head_at(reading, position)
        circuits_key, ranking_key = _circuits_key(reading, checkpoint, text), _key(checkpoint, text, mode)
        knock_key = _key(checkpoint, text, target, mode)
        held = shown.get("heads", []) if shown.get("circuits") == circuits_key else []
        circuits_deck = gr.skip()
        if circuits.head_name(layer, which) not in held:
            circuits_deck = _circuits_deck(reading, checkpoint, text, [(layer, which)])
            held = [*held, circuits.head_name(layer, which)]
        ranking_deck = gr.skip()
        if shown.get("ranking") != ranking_key:
            ranking_deck = chart_deck.deck_json(ranking_key, {"ranking": ([], [_ranking(reading)])})
        names = _names(reading.knocked_heads)
        knock = _knock_json(reading, knock_key) if shown.get("knock") != knock_key else \
            _knock_json(reading, knock_key, names) if names else gr.skip()
        return deck, heads_deck, circuits_deck, ranking_deck, knock, {"circuits": circuits_key, "heads": held,
                                                                      "ranking": ranking_key, "knock": knock_key}


def why_deck(ctx: AppContext, checkpoint: str, text: str, target: str, head: str = STRONGEST,
             knocked: list[str] | None = None, mode: str = "mean over the text", shown: dict | None = None,
             split: str = VERSUS, distance=None, *, memo: ReadingCache | None = None):
    """Every position's parts, the reading of the head that pushed most (and of the chosen head) at every position,
    and the circuits of every head (where they fit; else of the heads that push most somewhere in the text): the
    page then draws a new position or head by itself. (deck, heads deck, circuits deck, ``shown`` updated)."""
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=split,
                  distance=distance) as (reading, _):
        T = reading.ids.numel()
        deck, heads_deck = _every_position_decks(reading, checkpoint, text, target, split)
        shown = dict(shown or {})
        circuits_key = _circuits_key(reading, checkpoint, text)
        held = shown.get("heads", []) if shown.get("circuits") == circuits_key else []
        if _every_circuit_fits(reading):
            wanted = _every_head(reading.model.config)
        else:
            pushed = Counter(_strongest(reading, p) for p in range(T))
            wanted = [lh for lh, _ in pushed.most_common()][:MAX_SENT_CIRCUITS]
        missing = [lh for lh in wanted if circuits.head_name(*lh) not in held]
        circuits_deck = gr.skip()
        if missing:
            circuits_deck = _circuits_deck(reading, checkpoint, text, missing)
            held = [*held, *(circuits.head_name(*lh) for lh in missing)]
        return deck, heads_deck, circuits_deck, {**shown, "circuits": circuits_key, "heads": held}


def _every_position_decks(reading: _Reading, checkpoint: str, text: str, target: str,
                          split: str) -> tuple[str, str]:
    """(every position's parts, the reading of the head that pushed most and of the chosen head at every position),
    as the decks the page keeps."""
    T = reading.ids.numel()
    text_key = _key(checkpoint, text, target, reading.versus)
    views = {(*_strongest(reading, p), p) for p in range(T)}
    if reading.head is not None:
        views |= {(*reading.head, p) for p in range(T)}
    return (_position_deck(reading, text_key, range(T), _settings(checkpoint, text, target, split)),
            _heads_deck(reading, text_key, sorted(views, key=lambda v: (v[2], v[0], v[1]))))


def why_split_spare(ctx: AppContext, checkpoint: str, text: str, target: str, head: str = STRONGEST,
                    knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS, *,
                    memo: ReadingCache | None = None) -> str:
    """The other split's decks at every position (why_deck's parts and heads' readings, split the other way), for
    the page to keep beside the split on screen: a switch of the split is drawn there at once (why_page.SPLIT_JS),
    and the server's answer for it, under the same keys, draws nothing again. Asking the server took 0.6 s a switch,
    most of it making these figures again. ``{"around": the deck on screen's key, "label": the split they are, "from":
    the split on screen, "decks": {deck name: deck}}``."""
    split = split or VERSUS
    other = next(each for each in SPLITS if each != checks.choice(split, "split", SPLITS))
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=other) as (reading, _):
        deck, heads_deck = _every_position_decks(reading, checkpoint, text, target, other)
        # The split on screen reads the same tokens, the other way: its key needs no second reading.
        around = f"{reading.ids.numel()}:{_key(checkpoint, text, target, not reading.versus)}"
        return (f'{{"around": {json.dumps(around)}, "label": {json.dumps(other)}, "from": {json.dumps(split)}, '
                f'"decks": {{{json.dumps(DECK)}: {deck}, {json.dumps(HEADS_DECK)}: {heads_deck}}}}}')


def why_head_views(ctx: AppContext, checkpoint: str, text: str, target: str, head: str,
                   knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS, *,
                   memo: ReadingCache | None = None):
    """A head chosen in the page (drawn there from what it holds): its reading at every position, so that a new
    position is drawn in the page too (the heads deck; nothing for the head that pushed most, sent already)."""
    if (head or STRONGEST) == STRONGEST:
        return gr.skip()
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=split) as (reading, _):
        return _heads_deck(reading, _key(checkpoint, text, target, reading.versus),
                           [(*reading.head, p) for p in range(reading.ids.numel())])


def why_knock(ctx: AppContext, checkpoint: str, text: str, target: str, knocked: list[str] | None = None,
              mode: str = "mean over the text", split: str = VERSUS, *, memo: ReadingCache | None = None):
    """A set of heads knocked out (several heads: one forward pass) and the sets one tick away from it (one more
    batched pass), which the page writes the knock-out heading from: the next tick is drawn in the page."""
    with _reading(ctx, checkpoint, text, target, STRONGEST, knocked, mode, memo=memo, split=split) as (reading, _):
        names = _names(reading.knocked_heads)
        if not names:
            return gr.skip()
        return _knock_json(reading, _key(checkpoint, text, target, mode), names, _near_knocks(reading))


def controls(ctx: AppContext, checkpoint: str) -> tuple:
    """The head pickers for this checkpoint's layers and heads, and the QK tables' distance, shown for a model with
    rotary positions (left as they are when it does not load)."""
    try:
        config = ctx.checkpoint(checkpoint or "").config
    except (ValueError, OSError, RuntimeError):
        return gr.skip(), gr.skip(), gr.skip()
    names = _head_names(config.layers_num, config.heads_num)
    return (gr.Dropdown(choices=_head_choices(names), value=STRONGEST),
            gr.Dropdown(choices=names, value=[], multiselect=True), gr.Number(visible=config.is_llama))


def _head_choices(names: list[str]) -> list[tuple[str, str]]:
    """The head list's (label, value) pairs: the head with the longest bar at each position, then every head."""
    return [(script.STRONGEST_SHOWN, STRONGEST), *((name, name) for name in names)]


def _first_config(ctx: AppContext):
    """The default checkpoint's config alone (nothing is loaded at build time), or None."""
    names = ctx.checkpoint_names()
    if names:
        try:
            return checkpoints.read_config(checkpoints.resolve(names[0], ctx.weights))
        except checkpoints.CheckpointError:
            pass
    return None


def _first_heads(ctx: AppContext) -> list[str]:
    """The default checkpoint's head names."""
    config = _first_config(ctx)
    return [] if config is None else _head_names(config.layers_num, config.heads_num)


class ToAttention(NamedTuple):
    """The button that opens the head on screen in the Attention tab, and what it reads there."""

    button: gr.Button
    checkpoint: gr.Dropdown
    text: gr.Textbox
    head_heading: gr.Markdown


# the head and position on screen, as the page's head heading names them ("L3 H1 at position 85 …"): the page draws
# a chosen head itself, so its heading, not the head box (which may say "strongest"), is what the learner sees
HEAD_ON_SCREEN_JS = "(checkpoint, text, heading) => window.whyPage.headOnScreen(checkpoint, text, heading)"


def head_on_screen(heading: str) -> tuple[int, int, int]:
    """(layer, head, position) of the head heading "### L3 H1 at position 85 …"; a clear error without one."""
    found = re.match(r"(?:#+\s*)?L(\d+) H(\d+) at position (\d+)", heading or "")
    if not found:
        raise gr.Error("No head is on screen to open: wait for the head's chain, or, where this tab has no view of "
                       "the checkpoint, change the text or the checkpoint first.", print_exception=False)
    layer, head, position = map(int, found.groups())
    return layer, head, position


def build(ctx: AppContext) -> ToAttention:
    # the other tabs start from "To be, or not to be"; "the guess's lead": knocked out, the head leaves the guess
    # standing, and a stranger read "writes most of the guess" against that
    gr.Markdown("Which parts of the model wrote its guess for the next character, what one head looks for and "
                "writes, and what the model loses without it. The text starts as Juliet's line, where one head "
                "writes most of the guess's lead over the runner-up; type your own.")
    with gr.Row():
        checkpoint = checkpoint_dropdown(ctx, "why", scale=2)
        position = gr.Number(-1, label="position (-1 = last)", info="the model guesses what comes after it")
        target = gr.Textbox("", label="target", info="empty: the model's own guess", max_length=16)
    text = gr.Textbox(DEFAULT_TEXT, label="Text", lines=2)
    split = gr.Radio(list(SPLITS), value=VERSUS, label="split",
                     info="a guess wins against the other characters: softmax ignores what every logit shares")
    heading = gr.Markdown(label="why this character", elem_id=script.HEADING_ELEM_ID)
    # the page draws the figures itself (chart_deck): the parts here, the head's bars, its circuits, the ranking
    with gr.Row():
        chart_deck.hosts(DECK, [0])
    # what a clicked MLP, embedding or bias bar is, and the script that picks a head by its bar: one element of no
    # height until a note is written (two empty ones left a gap under the chart that a learner took for a failure)
    gr.HTML("", elem_id=script.PART_NOTE_ELEM_ID, js_on_load=script.PICK_JS, padding=False, min_height=0)
    picked = gr.Textbox(visible="hidden", label="head picked on the chart", elem_id=script.PICKED_ELEM_ID)
    heads = _first_heads(ctx)
    # choices follow the checkpoint; an API caller's head names are checked by the handler against its model
    head = gr.Dropdown(_head_choices(heads), value=STRONGEST, label="head", allow_custom_value=True,
                       info=HEAD_NAMES_INFO, elem_id=script.PICKER_ELEM_ID)
    head_heading = gr.Markdown(label="the head's reading", elem_id=script.HEAD_ELEM_ID)
    # a learner who found the deciding head here retyped the text, the layer, the head and the position to see its
    # seven stages in the Attention tab
    # as wide as its words (on one line: at Gradio's 160 px they wrapped), in the primary colour: a thin grey bar
    # across the page was easy to miss
    with gr.Row():
        to_attention = gr.Button("Step through this head in the Attention tab", size="sm", variant="primary", scale=0,
                                 min_width=STEP_THROUGH_PX)
    with gr.Row():
        chart_deck.hosts(HEADS_DECK, [0])  # the chain: from the head's pattern to the next character
    gr.Markdown(fold(CHAIN_MORE, "how the chain is read"))  # the same for every head: not sent with each
    score_views.build_why(ctx, checkpoint, text, head_heading)  # why the head scored the key it looked at
    circuits_heading = gr.Markdown(label="what the head reads and writes")
    first = _first_config(ctx)
    # only a model with rotary positions has one: its QK scores depend on how far back the key is
    distance = gr.Number(circuits.DEFAULT_DISTANCE, label="distance", info=DISTANCE_INFO,
                         visible=bool(first is not None and first.is_llama))
    with gr.Row():  # a host per head: every head's tables drawn out of sight while the page is idle
        chart_deck.hosts(CIRCUITS_DECK, [0, 1], views=heads)
    with gr.Row():
        knocked = gr.Dropdown(heads, value=[], multiselect=True, allow_custom_value=True, label="knock out",
                              info="heads whose output is replaced", scale=3, elem_id=script.KNOCKED_ELEM_ID)
        mode = gr.Radio(list(MODES), value=next(iter(MODES)), label="replace a knocked-out head's output by",
                        scale=1)
    knock_heading = gr.Markdown(label="knocked out")
    with gr.Row():
        chart_deck.hosts(RANKING_DECK, [0])
    # /why's answer, for API clients: never shown in the page, which draws the same from the decks
    with gr.Group(visible=False):
        api_button = gr.Button("explain", visible=False)
        api_outputs = [gr.Markdown(visible=False, label=field) if field.endswith("heading") else
                       gr.JSON(visible=False, label=field) if field == "numbers" else
                       gr.Plot(label=field, visible=False) for field in WhyView._fields]
    decks = [gr.Textbox(visible=False, label=f"{name} deck") for name in (DECK, HEADS_DECK, CIRCUITS_DECK,
                                                                          RANKING_DECK)]
    decks.append(gr.Textbox(visible=False, label="knock-out numbers"))
    need = gr.Textbox(visible=False, label="view the page asks for")
    need_knock = gr.Textbox(visible=False, label="knock-out the page asks for")
    want_head = gr.Textbox(visible=False, label="head whose every position the page asks for")
    shown = gr.State({})  # the circuits, ranking and knock-out numbers the page holds: they are not sent again
    other_split = gr.Textbox(visible=False, label="the other split's decks")  # why_split_spare's, kept in the page

    settings = [checkpoint, text, position, target, head, knocked, mode]  # then split, after shown where sent
    texts = [heading, head_heading, knock_heading, circuits_heading]
    on_screen = [position, head, knocked]
    quick = dict(show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane)
    # an answer is drawn only while the page still shows the inputs it was made for (why_page.take_js)
    draw = dict(fn=None, inputs=[*decks, checkpoint, text, target, split, *on_screen], outputs=texts,
                show_progress="hidden", queue=False)
    in_page = dict(inputs=on_screen, outputs=[*texts, need, need_knock, want_head], js=script.SHOW_EVENT_JS,
                   api_visibility="private", show_progress="hidden", queue=False)

    memo = ReadingCache(budget=ctx.budget)  # held from the server's budget, which evicts it

    def answer(listener, name: str, fresh: bool = False):
        """``listener`` answers with the position on screen (drawn at once), then every other position. Returns the
        first answer's event."""
        first = wire(listener, why_page, ctx, [*settings, shown, split, distance], [*decks, shown],
                     fixed=dict(fresh=fresh, memo=memo),
                     api_name=name, api_visibility="private", **quick)
        keep_on_refusal(first, [*decks, shown], f"{name}_refused")
        first.success(**draw, js=script.take_js(False), api_name=f"{name}_draw", api_visibility="private")
        drawn = wire(first.success, why_deck, ctx, [checkpoint, text, target, head, knocked, mode, shown, split,
                                                    distance],
                     [*decks[:3], shown], fixed=dict(memo=memo), api_name=f"{name}_deck", api_visibility="private",
                     **quick).then(
            **draw, js=script.take_js(True), api_name=f"{name}_deck_draw", api_visibility="private")
        wire(drawn.then, why_split_spare, ctx, [checkpoint, text, target, head, knocked, mode, split], other_split,
             fixed=dict(memo=memo), api_name=f"{name}_split_spare", api_visibility="private", **quick).then(
            None, other_split, None, js=script.KEEP_SPLIT_JS, api_name=f"{name}_split_keep", api_visibility="private",
            show_progress="hidden", queue=False)
        return first

    def pickers(listener, **options):
        return wire(listener, controls, ctx, [checkpoint], [head, knocked, distance], show_progress="hidden",
                    **options)

    wire(api_button.click, explain, ctx, [*settings, split, distance], api_outputs, fixed=dict(memo=memo),
         api_name="why", **quick)
    arrival = gr.on(None, None, api_name="why_arrival", api_visibility="private")
    answer(pickers(arrival.then, api_name="why_arrival_controls", api_visibility="private").then, "why_load")
    # a new checkpoint resets the head pickers first, so the view never reads another model's head names
    loaded = checkpoint_loaded(ctx, checkpoint, "why")  # a name that fails to load goes back (common.py)
    refused = answer(pickers(loaded.change, api_name="why_controls", api_visibility="private").then,
                     "why_checkpoint")
    # a checkpoint that cannot read the text: the old model's view is taken off, not left under the new name
    refused.failure(None, None, texts, js=script.STALE_JS, api_name="why_checkpoint_stale", api_visibility="private",
                    show_progress="hidden", queue=False)
    # a split switched is drawn at once from the other split's decks where the page holds them; the server's answer
    # follows either way (under the same keys it draws nothing again)
    split.change(None, [split, *on_screen], texts, js=script.SPLIT_JS, api_name="why_split_switch",
                 api_visibility="private", show_progress="hidden", queue=False)
    answer(functools.partial(gr.on, [text.change, target.change, mode.change, split.change, distance.change]),
           "why_update")
    # a head chosen in the list, or by a click on its bar in the attribution chart, is drawn in the page from the
    # readings and circuits it holds; then its reading at every position follows, asked for once (the list's
    # input event comes twice: at the choice, and again as the box loses focus)
    head.input(None, **in_page, api_name="why_head")
    picked.change(None, [picked, head], head, js=script.PICK_HEAD_JS, api_name="why_pick_head",
                  api_visibility="private", show_progress="hidden", queue=False).success(
        None, **in_page, api_name="why_picked")
    wire(want_head.change, why_head_views, ctx, [checkpoint, text, target, head, knocked, mode, split], decks[1],
         fixed=dict(memo=memo), api_name="why_head_views", api_visibility="private", **quick).success(
        None, [decks[1], *on_screen], texts, js=script.TAKE_HEADS_JS, api_name="why_head_views_draw",
        api_visibility="private", show_progress="hidden", queue=False)
    # heads ticked or unticked: drawn in the page from the numbers it holds (every head alone, sent with the
    # ranking); a set it lacks is asked for, and answered with numbers alone
    knocked.change(None, **in_page, api_name="why_knocked")
    knocked.select(None, None, None, js=script.KNOCK_CHOSEN_JS, api_name="why_knock_chosen", api_visibility="private",
                   show_progress="hidden", queue=False)
    wire(need_knock.change, why_knock, ctx, [checkpoint, text, target, knocked, mode, split], decks[4],
         fixed=dict(memo=memo), api_name="why_knock", api_visibility="private", **quick).success(
        None, [decks[4], *on_screen], texts, js=script.TAKE_KNOCK_JS, api_name="why_knock_draw",
        api_visibility="private", show_progress="hidden", queue=False)
    # a new position is drawn in the page from the decks it holds; one not there yet is asked for
    position.change(None, **in_page, api_name="why_position")
    answer(need.change, "why_need", fresh=True)
    return ToAttention(to_attention, checkpoint, text, head_heading)
