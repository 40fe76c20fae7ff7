"""Why tab: from a head's pattern to the model's next character, on the learner's own text.

Three views of one checkpoint at one position: **why this character** (the target's logit split into the parts that
wrote it, and for the chosen head one picture from its pattern to the next character: its weights, what it writes
from each key, their product, the sum that is its bar, the logit and the probability), **what the head reads and
writes** (its QK and OV circuits over the vocabulary, the strongest pairs in words) and **knock heads out** (the
loss and the prediction without them, and every head ranked by the loss it adds). The maths is
playground.lens.circuits; why_reading checks the inputs, prices the reading and runs it (its Reading answers what the
views ask), why_sentences says what it found, why_views draws it, why_decks packs it for the page, and this module
holds the handlers and the tab's wiring. Renders on arrival and on every edit (``/why`` for API clients).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

import gradio as gr
import plotly.graph_objects as go

from playground import checks
from playground.checkpoints import store as checkpoints
from playground.lens import circuits
from playground.ui import chain_plots, chart_deck, score_views, why_decks
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
    DEFAULT_TEXT,
    MODES,
    SPLITS,
    VERSUS,
    ReadingCache,
    WhyView,
    head_names,
    heads_named,
    reading_for,
)
from playground.ui.why_sentences import in_the_tables, texts
from playground.ui.why_views import cell_shapes, chain_arguments, circuits_view, numbers, parts_figure, ranking

HEAD_NAMES_INFO = "L3 H1 is layer 3's head 1, L2 MLP layer 2's MLP (both counted from 0)"  # the bars' names
STEP_THROUGH_PX = 320  # the step-through button's width: its words on one line, within a phone's 358 px
CHAIN_MORE = ("② is what the head would add to the target's logit if all its weight were on that key: the key's "
              "value, through the head's share of the output projection, read the way the bars above read every "
              "part. The weights add up to 1, so the pushes add up to exactly this head's bar. \"Every other part\" "
              "is the embeddings, the other heads, the MLPs and the biases. Softmax compares every character's "
              "logit: a push helps the probability only as far as it lifts this logit above the others.")


def explain(ctx: AppContext, checkpoint: str, text: str, position, target: str, head: str = STRONGEST,
            knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS,
            distance=None, *, memo: ReadingCache | None = None) -> WhyView:
    """Plain handler (``/why``): why the model gives ``target`` (empty: its own guess) after
    ``text[: position + 1]``, the chosen head's chain and circuits, and what knocking out the ``knocked`` heads
    changes, as the page shows them (its texts and figures), with the parts and the chain as numbers too.
    ``split``: VERSUS, the parts of logit(target) - logit(runner-up); ALONE, of the target's logit (numbers' "split"
    says which). ``distance``: the QK table's distance from query back to key, for a model with rotary positions."""
    with reading_for(ctx, checkpoint, text, target, head, knocked, mode, position, memo, split,
                     distance) as (reading, position):
        heading, head_heading, knock_heading = texts(reading, position)
        layer, which = reading.head_at(position)
        chain = chain_plots.chain_figure(**chain_arguments(reading, position, layer, which))
        circuits_heading, qk, ov = circuits_view(reading, layer, which)
        circuits_heading = circuits_heading.replace(HERE, in_the_tables(reading, position, layer, which))
        # the tables are the head's, kept for every position: this position's outlines go on copies
        qk, ov = (go.Figure(figure).update_layout(shapes=shapes)
                  for figure, shapes in zip((qk, ov), cell_shapes(reading, position, layer, which)))
        return WhyView(heading, parts_figure(reading, position), head_heading, chain,
                       numbers(reading, position, layer, which), circuits_heading, qk, ov, knock_heading,
                       ranking(reading))


# the one sentence of why a rotary model's QK table needs a distance, under the box that sets it
DISTANCE_INFO = ("rotary positions turn q and k, so a QK score depends on how far back the key is: the QK table is "
                 "drawn for keys this many tokens back")


def why_page(ctx: AppContext, checkpoint: str, text: str, position, target: str, head: str = STRONGEST,
             knocked: list[str] | None = None, mode: str = "mean over the text", shown: dict | None = None,
             split: str = VERSUS, distance=None, *, fresh: bool = False, memo: ReadingCache | None = None):
    """The page's first answer to a change: (the parts at the position on screen, every head's reading there, the
    circuits of its head, the ranking, the knock-out numbers, ``shown`` updated). Circuits, a ranking and knock-out
    numbers the page holds (``shown``) are not sent again unless ``fresh``; why_deck follows with every other
    position."""
    with reading_for(ctx, checkpoint, text, target, head, knocked, mode, position, memo, split,
                     distance) as (reading, position):
        shown = dict(shown or {}) if not fresh else {}
        text_key = why_decks.deck_key(checkpoint, text, target, reading.versus)
        made_for = why_decks.settings_of(checkpoint, text, target, split)
        deck = why_decks.position_deck(reading, text_key, [position], made_for)
        here = [(layer, which, position) for layer, which in reading.keys]
        heads_deck = why_decks.heads_deck(reading, text_key, here)
        layer, which = reading.head_at(position)
        circuits_key = why_decks.circuits_key(reading, checkpoint, text)
        ranking_key = why_decks.deck_key(checkpoint, text, mode)
        knock_key = why_decks.deck_key(checkpoint, text, target, mode)
        held = shown.get("heads", []) if shown.get("circuits") == circuits_key else []
        circuits_deck = gr.skip()
        if circuits.head_name(layer, which) not in held:
            circuits_deck = why_decks.circuits_deck(reading, checkpoint, text, [(layer, which)])
            held = [*held, circuits.head_name(layer, which)]
        ranking_deck = gr.skip()
        if shown.get("ranking") != ranking_key:
            ranking_deck = chart_deck.deck_json(ranking_key, {"ranking": ([], [ranking(reading)])})
        names = heads_named(reading.knocked_heads)
        knock = why_decks.knock_json(reading, knock_key) if shown.get("knock") != knock_key else \
            why_decks.knock_json(reading, knock_key, names) if names else gr.skip()
        return deck, heads_deck, circuits_deck, ranking_deck, knock, {"circuits": circuits_key, "heads": held,
                                                                      "ranking": ranking_key, "knock": knock_key}


def why_deck(ctx: AppContext, checkpoint: str, text: str, target: str, head: str = STRONGEST,
             knocked: list[str] | None = None, mode: str = "mean over the text", shown: dict | None = None,
             split: str = VERSUS, distance=None, *, memo: ReadingCache | None = None):
    """Every position's parts, the reading of the head that pushed most (and of the chosen head) at every position,
    and the circuits of every head (where they fit; else of the heads that push most somewhere in the text): the
    page then draws a new position or head by itself. (deck, heads deck, circuits deck, ``shown`` updated)."""
    with reading_for(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=split,
                     distance=distance) as (reading, _):
        deck, heads_deck = why_decks.every_position_decks(reading, checkpoint, text, target, split)
        shown = dict(shown or {})
        circuits_key = why_decks.circuits_key(reading, checkpoint, text)
        held = shown.get("heads", []) if shown.get("circuits") == circuits_key else []
        missing = [lh for lh in why_decks.circuits_wanted(reading) if circuits.head_name(*lh) not in held]
        circuits_deck = gr.skip()
        if missing:
            circuits_deck = why_decks.circuits_deck(reading, checkpoint, text, missing)
            held = [*held, *(circuits.head_name(*lh) for lh in missing)]
        return deck, heads_deck, circuits_deck, {**shown, "circuits": circuits_key, "heads": held}


def why_split_spare(ctx: AppContext, checkpoint: str, text: str, target: str, head: str = STRONGEST,
                    knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS, *,
                    memo: ReadingCache | None = None) -> str:
    """The other split's decks at every position (why_deck's parts and heads' readings, split the other way), for
    the page to keep beside the split on screen (why_decks.split_spare_json): a switch of the split is drawn there at
    once (why_page.SPLIT_JS), and the server's answer for it, under the same keys, draws nothing again, where asking
    the server would make these figures again."""
    split = checks.choice(split or VERSUS, "split", SPLITS)
    other = next(each for each in SPLITS if each != split)
    with reading_for(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=other) as (reading, _):
        return why_decks.split_spare_json(reading, checkpoint, text, target, split)


def why_head_views(ctx: AppContext, checkpoint: str, text: str, target: str, head: str,
                   knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS, *,
                   memo: ReadingCache | None = None):
    """A head chosen in the page (drawn there from what it holds): its reading at every position, so that a new
    position is drawn in the page too (the heads deck; nothing for the head that pushed most, sent already)."""
    if (head or STRONGEST) == STRONGEST:
        return gr.skip()
    with reading_for(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=split) as (reading, _):
        return why_decks.heads_deck(reading, why_decks.deck_key(checkpoint, text, target, reading.versus),
                                    [(*reading.head, p) for p in range(reading.ids.numel())])


def why_knock(ctx: AppContext, checkpoint: str, text: str, target: str, knocked: list[str] | None = None,
              mode: str = "mean over the text", split: str = VERSUS, *, memo: ReadingCache | None = None):
    """A set of heads knocked out (several heads: one forward pass) and the sets one tick away from it (one more
    batched pass), which the page writes the knock-out heading from: the next tick is drawn in the page."""
    with reading_for(ctx, checkpoint, text, target, STRONGEST, knocked, mode, memo=memo, split=split) as (reading, _):
        names = heads_named(reading.knocked_heads)
        if not names:
            return gr.skip()
        return why_decks.knock_json(reading, why_decks.deck_key(checkpoint, text, target, mode), names,
                                    reading.near_knocks())


def controls(ctx: AppContext, checkpoint: str) -> tuple:
    """The head pickers for this checkpoint's layers and heads, and the QK tables' distance, shown for a model with
    rotary positions (left as they are when it does not load)."""
    try:
        config = ctx.checkpoint(checkpoint or "").config
    except (ValueError, OSError, RuntimeError):
        return gr.skip(), gr.skip(), gr.skip()
    names = head_names(config.layers_num, config.heads_num)
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
    return [] if config is None else head_names(config.layers_num, config.heads_num)


class ToAttention(NamedTuple):
    """The button that opens the head on screen in the Attention tab, and what it reads there."""

    button: gr.Button
    checkpoint: gr.Dropdown
    text: gr.Textbox
    head_heading: gr.Markdown


# the head and position on screen, as the page's head heading names them ("L3 H1 at position 85 …"): the page draws
# a chosen head itself, so its heading, not the head box (which may say "strongest"), is what the learner sees
HEAD_ON_SCREEN_JS = "(checkpoint, text, heading) => window.whyPage.headOnScreen(checkpoint, text, heading)"
# the same, marking the Attention tab's opening under way: its first view, made once the tab is shown, waits for it
STEP_THROUGH_JS = "(checkpoint, text, heading) => window.whyPage.stepThrough(checkpoint, text, heading)"


def head_on_screen(heading: str) -> tuple[int, int, int]:
    """(layer, head, position) of the head heading "### L3 H1 at position 85 …"; a clear error without one."""
    found = re.match(r"(?:#+\s*)?L(\d+) H(\d+) at position (\d+)", heading or "")
    if not found:
        raise gr.Error("No head is on screen to open: wait for the head's chain, or, where this tab has no view of "
                       "the checkpoint, change the text or the checkpoint first.", print_exception=False)
    layer, head, position = map(int, found.groups())
    return layer, head, position


def build(ctx: AppContext) -> ToAttention:
    # the other tabs start from "To be, or not to be"; "the guess's lead", not "the guess": knocked out, the head
    # leaves the guess standing
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
    # height until a note is written (an empty element's gap under the chart looks like something failed to draw)
    gr.HTML("", elem_id=script.PART_NOTE_ELEM_ID, js_on_load=script.PICK_JS, padding=False, min_height=0)
    picked = gr.Textbox(visible="hidden", label="head picked on the chart", elem_id=script.PICKED_ELEM_ID)
    heads = _first_heads(ctx)
    # choices follow the checkpoint; an API caller's head names are checked by the handler against its model
    head = gr.Dropdown(_head_choices(heads), value=STRONGEST, label="head", allow_custom_value=True,
                       info=HEAD_NAMES_INFO, elem_id=script.PICKER_ELEM_ID)
    head_heading = gr.Markdown(label="the head's reading", elem_id=script.HEAD_ELEM_ID)
    # the head on screen opened in the Attention tab at its seven stages, with nothing to type again; as wide as its
    # words (on one line: at Gradio's 160 px they wrap), in the primary colour: a thin grey bar across the page is easy
    # to miss
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
