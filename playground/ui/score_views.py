"""Why this score, and why Q, K and V are three matrices, on screen: the views the Why tab's chain and the Attention
tab's framed cell open (their picture first, then a sentence or two), beside the tabs' own views.

    why_score(ctx, checkpoint, text, layer=3, head=1, query=63, key=-1)
        -> ScoreView: the largest (query part, key part) pairs of lens.score_attribution as bars that add up to the
           score, the sentence "L3 H1 looked at 'h'@62 from 'e'@63 because L1 H0 wrote ... into the key", and the
           earlier heads in it (a click on one goes to it)
    head_change_view(ctx, checkpoint, text, layer, head, change="tied query and key")
        -> ChangeView: the pattern before and after (lens.walkthrough's tied_query_key or value_is_input), the loss
           on the text before and after, and what broke

The maths is playground.lens (score_attribution, walkthrough.whatifs); this module reads a checkpoint and a text,
prices the pass, and draws and words what came back. page/score.js sends a click on a head's bar where it goes.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import gradio as gr
import plotly.graph_objects as go
import torch

from playground import budget, checks
from playground.lens.circuits import head_name
from playground.lens.score_attribution import ScoreAttribution, parse_head_name, score_attribution
from playground.lens.walkthrough.whatifs import change_head
from playground.model.base import run_with_cache
from playground.model.families import require_gpt
from playground.model.modes import evaluating
from playground.text.tokenizer import escape_text
from playground.ui import plots
from playground.ui.common import AppContext
from playground.ui.events import wire

SCORE_PAIRS = 8  # the bars drawn: the largest pairs, then one bar for every other pair (so the bars add up)
MAX_SCORE_TOKENS = 256  # the text a score view reads (as the Why tab's views)
HEAD_COLOUR, OTHER_COLOUR, REST_COLOUR = "#4c6ef5", "#8b93a1", "#c7ccd4"  # a pair with an earlier head; without; rest
WHY_SCORE_ELEM_ID = "why-score"  # the Why tab's score chart: a click on a head's bar selects that head
ATTENTION_SCORE_ELEM_ID = "attention-score"  # the Attention tab's: a click opens that head's walkthrough
ATTENTION_SCORE_PICKED_ELEM_ID = "attention-score-picked"  # the hidden box a click writes "L1 H0@62 #<time>" into
LOOK_FOR_SCORE = ("**Look for:** blue bars: an earlier head's write that this head's query or key reads. Click one to "
                  "go to that head.")
# what each change of HEAD_CHANGES takes away, said under its pattern
CHANGE_LABELS = {"tie W_K to W_Q (one matrix for Q and K)": "tied query and key",
                 "V = X (no value matrix)": "value is the input"}
CHANGE_BROKE = {
    "tied query and key": ("**What broke:** with one matrix a query is its own key, and q·q is the largest q·k can be "
                           "(unless the other key is longer): the head turns to look at the token itself. A token can "
                           "only look for what it offers, so a head that looks for the character *before* it cannot be "
                           "written."),
    "value is the input": ("**What broke:** with V = X the head passes on the whole input it attends to, as it is: it "
                           "still chooses *where* to look, but no longer *what* to take from there, so its write is a "
                           "copy the later layers must untangle."),
}


class ScoreView(NamedTuple):
    figure: go.Figure
    text: str  # Markdown: the sentence, the score's sum, why more than one layer
    heads: list[str]  # the earlier heads the picture names, "L1 H0@62": where a click on each goes
    numbers: dict  # the score and its parts as numbers (an API client's)


class ChangeView(NamedTuple):
    figure: go.Figure  # the head's pattern before and after, side by side
    text: str  # Markdown: the loss before and after, and what broke
    numbers: dict


def _quoted(token: str) -> str:
    return "`" + escape_text(token).replace("`", "ˋ") + "`"


def _read_text(ctx: AppContext, checkpoint: str, text: str, view: str, llama: bool = False):
    """(the loaded GPT checkpoint, or with ``llama`` a Llama-family one too, the text's ids, cut to what the view
    reads, the tokens' labels); a clear error for a text it cannot read."""
    text = checks.text(text, "the text", ctx.limits.max_text_chars)
    if not text:
        raise ValueError("the text is empty: type a few characters for the model to read")
    loaded = ctx.checkpoint(checkpoint or "")
    if not (llama and loaded.config.is_llama):
        require_gpt(loaded.config, loaded.name, view)
    unknown = loaded.tokenizer.find_unknown(text)
    if unknown:
        raise ValueError(f"the text has {len(unknown)} character(s) this model does not know; the first is "
                         f"{checks.shown(unknown[0].character)} at {unknown[0].position}. Type a text in the "
                         "characters it knows, or choose another checkpoint")
    ids = loaded.tokenizer.encode(text)[:min(MAX_SCORE_TOKENS, loaded.config.context_size)]
    return loaded, ids, [loaded.tokenizer.label(int(i)) for i in ids]


def _head(config, layer, head) -> tuple[int, int]:
    layer = checks.whole_number(layer, "layer")
    head = checks.whole_number(head, "head")
    if not 0 <= layer < config.layers_num or not 0 <= head < config.heads_num:
        raise ValueError(f"layer {layer}, head {head} is not in this model: it has {config.layers_num} layers of "
                         f"{config.heads_num} heads (numbered from 0)")
    return layer, head


def _position(value, length: int, what: str) -> int:
    position = checks.whole_number(value, what)
    if not -length <= position < length:
        raise ValueError(f"{what} {position} is outside the text's {length} tokens (-1 is the last)")
    return position % length


def _cost(config, T: int) -> budget.Cost:
    """One pass with the attention maps (the key the query weights most, the score's own pass), and every part of the
    stream below the layer at every position, (parts, T, C) in float32, centred and normed once more."""
    L, h, C = config.layers_num, config.heads_num, config.embedding_dim
    parts = 2 + L * h + 2 * L
    return budget.combined("this score's split", budget.inference_cost(
        parameters=config.parameter_count(), layers_num=L, heads_num=h, embedding_dim=C, context_size=T,
        vocabulary_size=config.vocabulary_size, attention_maps=True),
        budget.Cost("", (("every part of the stream", 3 * 4 * parts * T * C),)))


def _pair_label(query_part: str, key_part: str) -> str:
    """"key: L1 H0 × query: token embedding": what wrote the key, read by what wrote the query."""
    return f"key: {key_part} × query: {query_part}"


def _where(attribution: ScoreAttribution, query_part: str, key_part: str) -> str:
    """"L1 H0@62": the earlier head behind a pair and the position it wrote at (the key's where the key's part is a
    head), or "" where neither part is a head."""
    for name, position in ((key_part, attribution.key_position), (query_part, attribution.query_position)):
        found = parse_head_name(name)
        if found is not None:
            return f"{head_name(*found)}@{position}"
    return ""


def score_figure(attribution: ScoreAttribution, tokens: list[str], pairs: int = SCORE_PAIRS) -> go.Figure:
    """The largest pairs as horizontal bars, then one for every other pair: the bars add up to the score. A pair with
    an earlier head on either side is blue; its bar's customdata names where a click goes ("L1 H0@62")."""
    a = attribution
    largest = a.largest_pairs(pairs)
    labels = [_pair_label(p.query_part, p.key_part) for p in largest]
    values = [p.value for p in largest]
    where = [_where(a, p.query_part, p.key_part) for p in largest]
    colours = [HEAD_COLOUR if w else OTHER_COLOUR for w in where]
    rest = float(a.values.sum()) - sum(values)
    others = a.values.numel() - len(largest)
    if others:
        labels.append(f"every other pair ({others})")
        values.append(rest)
        where.append("")
        colours.append(REST_COLOUR)
    query, key = a.query_position, a.key_position
    title = (f"Why {head_name(a.layer, a.head)} scored {_plain(tokens[key])}@{key} from {_plain(tokens[query])}@"
             f"{query}: {a.score:+.2f}, the bars' sum")
    figure = plots.horizontal_bar_chart(labels, values, title, "share of the scaled score", colours=colours,
                                        touch_row_px=36)
    shown = [plots._display_label(label) for label in labels]
    figure.update_traces(customdata=[[label, w] for label, w in zip(shown, where)],
                         hovertemplate="%{customdata[0]}: %{x:.4f}<extra></extra>")
    return figure


def _plain(token: str) -> str:
    return "'" + escape_text(token) + "'"


def _sentence(attribution: ScoreAttribution, tokens: list[str], weight: float) -> str:
    """The picture in words: what looked where, the pair that did most, what the earlier heads gave, and so why a
    model has more than one layer."""
    a = attribution
    query, key = a.query_position, a.key_position
    looked = (f"**{head_name(a.layer, a.head)} looked at {_quoted(tokens[key])}@{key}** from "
              f"{_quoted(tokens[query])}@{query} (weight {weight:.2f}, score {a.score:+.2f})")
    top = a.largest_pairs(1)[0]
    head_rows = [i for i, kind in enumerate(a.kinds) if kind == "head"]
    query_heads = torch.zeros(len(a.query_names), dtype=torch.bool)
    key_heads = torch.zeros(len(a.key_names), dtype=torch.bool)
    query_heads[head_rows] = True
    key_heads[head_rows] = True
    from_heads = float(a.values[query_heads[:, None] | key_heads[None, :]].sum())
    if parse_head_name(top.key_part):
        because = (f" most because **{top.key_part}** wrote into the key what the query's **{top.query_part}** looks "
                   f"for ({top.value:+.2f} of the score).")
    elif parse_head_name(top.query_part):
        because = (f" most because **{top.query_part}** wrote into the query what the key's **{top.key_part}** "
                   f"offers ({top.value:+.2f} of the score).")
    else:
        because = (f": its largest pair is the query's **{top.query_part}** reading the key's **{top.key_part}** "
                   f"({top.value:+.2f}).")
    total = f" The {a.values.numel()} pairs add up to the score: {float(a.values.sum()):+.4f}."
    if a.layer == 0:
        layers = ("\n\n**Why more than one layer:** a layer-0 head reads the embeddings alone; a head in a later layer "
                  "can also look for what this one writes.")
    else:
        layers = (f"\n\n**Why more than one layer:** pairs with an earlier head give {from_heads:+.2f} of this score: "
                  f"a look a layer-0 head cannot take, since it reads the embeddings alone.")
    return looked + because + total + layers


def why_score(ctx: AppContext, checkpoint: str, text: str, layer, head, query, key=-1) -> ScoreView:
    """Why head ``head`` of ``layer`` gave key ``key`` its score from query ``query`` (-1: the last; a key of -1: the
    key that query weights most), as a picture and a sentence."""
    loaded, ids, tokens = _read_text(ctx, checkpoint, text, "why this score")
    model, T = loaded.model, ids.numel()
    layer, head = _head(loaded.config, layer, head)
    query = _position(query, T, "query position")
    chosen = checks.whole_number(key, "key position")
    with ctx.budget.reserve(_cost(loaded.config, T), hint=f"use a shorter text (it is {T} tokens)"), \
            evaluating(model), torch.no_grad():
        device = next(model.parameters()).device
        _, points = run_with_cache(model, ids.view(1, -1).to(device), {"attn.hook_pattern"})
        weights = points[f"blocks.{layer}.attn.hook_pattern"][0, head, query]
        weights = weights.float().cpu()  # (T,)
        key = int(weights[:query + 1].argmax()) if chosen == -1 else _position(chosen, T, "key position")
        if key > query:
            raise ValueError(f"key position {key} is after the query ({query}): the causal mask hides it, so the head "
                             "gave it no weight. Choose a key at or before the query")
        attribution = score_attribution(model, ids, layer, head, query, key)
    where = [w for p in attribution.largest_pairs(SCORE_PAIRS)
             if (w := _where(attribution, p.query_part, p.key_part))]
    numbers = {"layer": layer, "head": head, "query": query, "key": key, "score": attribution.score,
               "weight": float(weights[key]), "query_parts": attribution.query_names,
               "key_parts": attribution.key_names, "values": attribution.values.tolist()}
    text = LOOK_FOR_SCORE + "\n\n" + _sentence(attribution, tokens, float(weights[key]))
    return ScoreView(score_figure(attribution, tokens), text, list(dict.fromkeys(where)), numbers)


def _diagonal(weights: torch.Tensor, offset: int) -> float:
    """The mean weight a query puts on the key ``offset`` from it (0: itself, -1: the one before)."""
    return float(weights.diagonal(offset).mean()) if weights.size(0) > -offset else 0.0


def head_change_view(ctx: AppContext, checkpoint: str, text: str, layer, head, change: str) -> ChangeView:
    """One of the two what-ifs (CHANGE_LABELS) on head ``head`` of ``layer`` over the text: its pattern before and
    after, the loss before and after, and a sentence on what broke."""
    change = CHANGE_LABELS[checks.choice(change, "what if", CHANGE_LABELS)]
    loaded, ids, tokens = _read_text(ctx, checkpoint, text, "the Q, K and V what-ifs", llama=True)
    layer, head = _head(loaded.config, layer, head)
    T = ids.numel()
    if T < 2:
        raise ValueError("the text must be at least 2 tokens: one to read, one to predict")
    with ctx.budget.reserve(_cost(loaded.config, T), hint=f"use a shorter text (it is {T} tokens)"), \
            torch.no_grad():
        changed = change_head(loaded.model, ids, layer, head, change)
    before, after = changed.original_weights, changed.weights
    symmetric = float((changed.scores - changed.scores.T).abs().max())
    masked = ~torch.tril(torch.ones(T, T, dtype=torch.bool))
    name = head_name(layer, head)
    title = f"{name}'s attention weights on the text, intact and changed"
    figure = plots.heads_grid(torch.stack([before, after]), tokens, title, masked=masked)
    figure.layout.annotations[0].text = "intact"
    figure.layout.annotations[1].text = "W_K = W_Q" if change == "tied query and key" else "V = X"
    moved = float((after - before).abs().max())
    worse = changed.loss_change
    loss = (f"**Loss on the text: {changed.original_loss:.3f} → {changed.loss:.3f}** "
            f"({'+' if worse >= 0 else ''}{worse:.3f}); the largest weight that moved, {moved:.2f}.")
    if change == "tied query and key":
        detail = (f" The scores are symmetric (largest |score(i, j) − score(j, i)|: {symmetric:.1e}). Mean weight on "
                  f"the token itself {_diagonal(before, 0):.2f} → {_diagonal(after, 0):.2f}, on the one before it "
                  f"{_diagonal(before, -1):.2f} → {_diagonal(after, -1):.2f}.")
    else:
        detail = " The pattern is the intact head's (the scores are untouched): only what it passes on changed."
    text = loss + detail + _what_changed(loaded.config, name, change, changed.heads) + "\n\n" + CHANGE_BROKE[change]
    numbers = {"change": change, "layer": layer, "head": head, "heads_changed": list(changed.heads),
               "loss": changed.loss,
               "original_loss": changed.original_loss, "largest_weight_moved": moved, "asymmetry": symmetric,
               "self_weight": [_diagonal(before, 0), _diagonal(after, 0)],
               "previous_weight": [_diagonal(before, -1), _diagonal(after, -1)]}
    return ChangeView(figure, text, numbers)


def _what_changed(config, name: str, change: str, heads: tuple[int, ...]) -> str:
    """What exactly was changed, where a family or a width makes it more than "W_K = W_Q" or "V = X": a K/V head
    shared by a group of query heads (one W_K, one V for all of them), rotary positions, X wider than a head."""
    others = ", ".join(f"H{h}" for h in heads if f"H{h}" != name.split()[-1])
    words = []
    if change == "tied query and key":
        if config.is_llama:
            words.append(" Rotary positions turn q and k by their positions; the scores stay symmetric, since the turn "
                         "between positions i and j reads the same both ways.")
        if others:
            words.append(f" {name} shares its K/V head with {others}: the group has one W_K, so it became {name}'s "
                         f"W_Q for all of them ({others} now match their queries against {name}'s).")
    else:
        words.append(f" X is {config.embedding_dim} wide and the head's values {config.head_size}: no W_O can read X, "
                     "so the head's write is its weights times X, added to the stream as it is (W_O left out).")
        if others:
            words.append(f" {name} shares its K/V head with {others}: the group has one V, so it became X for all of "
                         "them, and each writes its own weights times X.")
    return "".join(words)


# ------------------------------------------------------------------------------------------------ the tabs' controls

HEADING_AT = re.compile(r"(?:#+\s*)?L(\d+) H(\d+) at position (\d+)")  # the Why tab's head heading (why_tab's)
# the Why tab's head on screen, as the page's head heading names it (a head drawn in the page is not in the head box)
WHY_ON_SCREEN_JS = "(checkpoint, text, heading, key) => window.scorePage.whyOnScreen(checkpoint, text, heading, key)"
LISTEN_JS = "window.scorePage.listen();"
OPENED_JS = "(picked, layer, head, query) => window.scorePage.opened(picked, layer, head, query)"
NOT_A_CHECKPOINT = ("{what} reads a trained checkpoint's layers: choose \"trained checkpoint\" under Weights from "
                    "(random weights and the textbook presets are one head, with no layers before it)")


def why_score_on_screen(ctx: AppContext, checkpoint: str, text: str, heading: str, key=-1):
    """The Why tab's "why this score": the head and position its head heading names, and ``key`` (-1: the key the
    head weights most there). (figure, words)."""
    found = HEADING_AT.match(checks.text(heading, "the head's heading", 1000) or "")
    if not found:
        raise ValueError("No head is on screen yet: wait for the head's chain, then ask why it scored its key")
    layer, head, position = map(int, found.groups())
    view = why_score(ctx, checkpoint, text, layer, head, position, key)
    return view.figure, view.text


def attention_score(ctx: AppContext, source: str, checkpoint: str, text: str, layer, head, query, key=-1):
    """The Attention tab's "why this score" for the framed row's query (-1: the last) and ``key``. (figure, words)."""
    if source != "trained checkpoint":
        raise ValueError(NOT_A_CHECKPOINT.format(what="Why this score"))
    view = why_score(ctx, checkpoint, text, layer, head, query, key)
    return view.figure, view.text


def attention_change(ctx: AppContext, source: str, checkpoint: str, text: str, layer, head, change: str):
    """The Attention tab's Q, K and V what-ifs. (figure, words)."""
    if source != "trained checkpoint":
        raise ValueError(NOT_A_CHECKPOINT.format(what="The Q, K and V what-ifs"))
    view = head_change_view(ctx, checkpoint, text, layer, head, change)
    return view.figure, view.text


def _key_box() -> gr.Number:
    return gr.Number(-1, label="key position", info="-1: the key this query weights most")


def build_why(ctx: AppContext, checkpoint, text, head_heading) -> None:
    """Under the Why tab's chain: why the head on screen scored the key it looked at; a click on a head's bar selects
    that head (page/score.js)."""
    with gr.Accordion("Why this score: which earlier heads made this head look there", open=True):
        with gr.Row():
            key = _key_box()
            button = gr.Button("Why this score", size="sm", variant="secondary", scale=0, min_width=180)
        plot = gr.Plot(label="why this score", elem_id=WHY_SCORE_ELEM_ID, show_label=False)
        words = gr.Markdown(label="why this score in words")
        gr.HTML("", js_on_load=LISTEN_JS, padding=False, min_height=0)
    wire(button.click, why_score_on_screen, ctx, [checkpoint, text, head_heading, key], [plot, words],
         js=WHY_ON_SCREEN_JS, api_name="why_score", api_visibility="private", show_progress="hidden",
         trigger_mode="always_last", **ctx.fast_lane)


def build_attention(ctx: AppContext, opened, query_shown_js: str) -> tuple:
    """Beside the Attention tab's framed row: why its head scored a key from that query (a click on an earlier head's
    bar opens that head's walkthrough at the position it wrote at). ``opened``: attention_tab.Opened."""
    with gr.Row():
        key = _key_box()
        button = gr.Button("Why this score", size="sm", variant="secondary", scale=0, min_width=180)
    plot = gr.Plot(label="why this score", elem_id=ATTENTION_SCORE_ELEM_ID, show_label=False)
    words = gr.Markdown(label="why this score in words")
    picked = gr.Textbox(visible="hidden", label="head picked on the score's chart",
                        elem_id=ATTENTION_SCORE_PICKED_ELEM_ID)
    gr.HTML("", js_on_load=LISTEN_JS, padding=False, min_height=0)
    wire(button.click, attention_score, ctx, [opened.source, opened.checkpoint, opened.text, opened.layer,
                                              opened.head, opened.query, key], [plot, words],
         api_name="attention_score", api_visibility="private", show_progress="hidden",
         trigger_mode="always_last", **ctx.fast_lane)
    picked.change(None, [picked, opened.layer, opened.head, opened.query], [opened.layer, opened.head, opened.query],
                 js=OPENED_JS, api_name="attention_score_open", api_visibility="private", show_progress="hidden",
                 queue=False).then(None, None, None, js=query_shown_js, api_name="attention_score_opened",
                                   api_visibility="private", show_progress="hidden", queue=False)
    return plot, words


def build_changes(ctx: AppContext, opened) -> None:
    """The Q, K and V what-ifs, beside the scaling and mask switches: the head's pattern and the text's loss with
    W_K tied to W_Q, or with V = X."""
    with gr.Accordion("What if Q and K were one matrix, or V were X?", open=False):
        with gr.Row():
            change = gr.Radio(list(CHANGE_LABELS), value=next(iter(CHANGE_LABELS)), label="what if", scale=3)
            button = gr.Button("Run this what-if", size="sm", scale=0, min_width=180)
        plot = gr.Plot(label="pattern before and after", show_label=False)
        words = gr.Markdown(label="what broke")
    wire(button.click, attention_change, ctx, [opened.source, opened.checkpoint, opened.text, opened.layer,
                                               opened.head, change], [plot, words],
         api_name="attention_qkv_whatif", api_visibility="private", show_progress="hidden",
         trigger_mode="always_last", **ctx.fast_lane)
