"""Why tab: from a head's pattern to the model's next character, on the learner's own text.

Three views of one checkpoint at one position: **why this character** (the target's logit split into the parts that
wrote it, and for the chosen head which attended characters pushed it), **what the head reads and writes** (its QK
and OV circuits over the vocabulary, the strongest pairs in words) and **knock heads out** (the loss and the
prediction without them, and every head ranked by the loss it adds). The maths is playground.circuits; this module
checks the inputs, prices the view and lays it out. Renders on arrival and on every edit (``/why`` for API clients).
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import NamedTuple

import gradio as gr
import torch

from playground import budget, checkpoints, checks, circuits, plots
from playground.architectures import require_gpt
from playground.tokenizer import escape_text, labels
from playground.ui.common import AppContext, checkpoint_dropdown, keep_on_refusal
from playground.ui.events import wire

DEFAULT_TEXT = "ROMEO:\nBut soft, what light through yonder window breaks? It is the east, and Juliet is the sun"
STRONGEST = "the head that pushed most"
MODES = {"mean over the text": "mean", "zero": "zero"}
MAX_TOKENS = 256  # the text a view reads: its attention maps and its figures stay small whatever the model
MAX_CIRCUIT_TOKENS = 96  # rows and columns of a QK or OV table drawn: a character vocabulary fits whole
MAX_RANKED_HEADS = 48  # knock-out ranking costs a forward pass a head: GPT-2's 144 are knocked out by hand
PAIRS = 5
LOOK_FOR_PARTS = "**Look for:** the longest bars: the parts that wrote this guess. Green pushed it up, red down."
LOOK_FOR_HEAD = "**Look for:** the characters this head read that pushed the guess up (the tall bars)."
LOOK_FOR_CIRCUITS = ("**Look for:** bright cells. Left: which key characters a query character looks for. Right: "
                     "which next characters the head promotes when it attends to a character.")
LOOK_FOR_KNOCK = "**Look for:** the heads whose loss bar is tallest: the text needs them most."
CIRCUIT_MORE = ("Both tables read each character's token embedding alone, without its position, through the "
                "layer's LayerNorm: for a layer past the first that is the direct path, as if the head read the input "
                "itself. QK: the scaled score a query character gives a key character (softmax runs over a row). OV: "
                "the logits the head writes when all its weight is on one character, through W_V, W_O, the final "
                "norm and the LM head.")


class WhyView(NamedTuple):
    heading: str
    parts: object  # the attribution's bar chart
    head_heading: str
    weights: object  # the chosen head's attention row
    shares: object  # each attended character's share of the head's part
    circuits_heading: str
    qk: object
    ov: object
    knock_heading: str
    ranking: object  # every head's added loss, or None where ranking is too dear


def _label(text: str) -> str:
    return escape_text(text)


def _head_names(layers: int, heads: int) -> list[str]:
    return [circuits.head_name(layer, head) for layer in range(layers) for head in range(heads)]


def _parse_head(name: str, layers: int, heads: int) -> tuple[int, int]:
    names = _head_names(layers, heads)
    if name not in names:
        raise ValueError(f"head {checks.shown(name)} is not one of this model's heads (L0 H0 to {names[-1]})")
    layer, head = divmod(names.index(name), heads)
    return layer, head


def _target(tokenizer, target: str, predicted: int) -> int:
    """The target's id: the model's own guess when the box is empty, else the one token the text encodes to."""
    if not target:
        return predicted
    if tokenizer.find_unknown(target):
        raise ValueError(f"the target {checks.shown(target)} is not in this model's vocabulary")
    ids = tokenizer.encode(target)
    if ids.numel() != 1:
        raise ValueError(f"the target {checks.shown(target)} is {ids.numel()} tokens: give one "
                         f"{tokenizer.token_name}")
    return int(ids[0])


def _circuit_tokens(vocabulary: int, ids: torch.Tensor) -> torch.Tensor | None:
    """Every token of a small vocabulary; for a large one the text's own tokens, then the lowest ids, up to
    MAX_CIRCUIT_TOKENS."""
    if vocabulary <= MAX_CIRCUIT_TOKENS:
        return None
    chosen = list(dict.fromkeys(ids.tolist()))[:MAX_CIRCUIT_TOKENS]
    taken = set(chosen)
    lowest = (i for i in range(vocabulary) if i not in taken)
    chosen += itertools.islice(lowest, MAX_CIRCUIT_TOKENS - len(chosen))
    return torch.tensor(sorted(chosen))


def _pairs_in_words(table: torch.Tensor, names: list[str], verb: str, among=None) -> str:
    pairs = circuits.strongest_pairs(table, PAIRS, among)
    return "; ".join(f"`{names[row]}` {verb} `{names[col]}` ({value:+.2f})" for row, col, value in pairs)


def _coloured_bars(figure, values: list[float]):
    figure.update_traces(marker_color=["#2f9e44" if v >= 0 else "#e03131" for v in values], selector=dict(type="bar"))
    return figure


def explain(ctx: AppContext, checkpoint: str, text: str, position, target: str, head: str = STRONGEST,
            knocked: list[str] | None = None, mode: str = "mean over the text") -> WhyView:
    """Plain handler: why the model gives ``target`` (empty: its own guess) after ``text[: position + 1]``, the
    chosen head's reading and circuits, and what knocking out the ``knocked`` heads changes."""
    text = checks.text(text, "The text", ctx.limits.max_text_chars)
    target = checks.text(target, "The target", 16)
    mode = MODES[checks.choice(mode, "knock-out", MODES)]
    knocked = list(knocked or [])
    loaded = ctx.checkpoint(checkpoint or "")
    model, tokenizer, config = loaded.model, loaded.tokenizer, loaded.config
    require_gpt(config, loaded.name, "the Why tab")
    if not text:
        raise ValueError("the text is empty: type a few characters for the model to read")
    unknown = tokenizer.find_unknown(text)
    if unknown:
        raise ValueError(f"the text has {len(unknown)} character(s) this model does not know; the first is "
                         f"{checks.shown(unknown[0].character)} at {unknown[0].position}")
    ids = tokenizer.encode(text)
    limit = min(MAX_TOKENS, config.context_size)
    if ids.numel() > limit:
        raise ValueError(f"the text is {ids.numel():,} tokens; this view reads at most {limit} (use a shorter text)")
    T = ids.numel()
    position = checks.whole_number(position, "position")
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside the text's {T} tokens (-1 is the last)")
    position %= T
    layers, heads = config.layers_num, config.heads_num
    head = checks.text(head, "head", 64) or STRONGEST
    knocked_heads = [_parse_head(name, layers, heads) for name in knocked]
    subset = _circuit_tokens(config.vocabulary_size, ids)
    n = config.vocabulary_size if subset is None else subset.numel()
    cost = budget.combined("this view", budget.inference_cost(
        parameters=config.parameter_count(), layers_num=layers, heads_num=heads, embedding_dim=config.embedding_dim,
        context_size=T, vocabulary_size=config.vocabulary_size, attention_maps=True),
        budget.Cost("", (("circuit tables", 4 * 4 * n * max(n, config.vocabulary_size)),
                         ("figures", (2 * n * n) * budget.BYTES_PER_HEATMAP_CELL))))
    with ctx.budget.reserve(cost, hint=f"use a shorter text (it is {T} tokens)"):
        return _view(model, tokenizer, ids, position, target, head, knocked_heads, mode, subset)


def _view(model, tokenizer, ids, position, target, head, knocked_heads, mode, subset) -> WhyView:
    config = model.config
    tokens = [_label(label) for label in labels(tokenizer, ids)]
    with torch.no_grad():
        logits = model(ids.view(1, -1).to(model.token_embedding.weight.device)).logits[0, position]
    probabilities = torch.softmax(logits.float(), dim=-1)
    predicted = int(probabilities.argmax())
    target_id = _target(tokenizer, target, predicted)
    name = _label(tokenizer.label(target_id))
    rank = int((probabilities > probabilities[target_id]).sum()) + 1
    parts = circuits.logit_attribution(model, ids, position, target_id)
    values = parts.values.tolist()
    heading = (f"### Why `{name}` after `{tokens[position]}` (position {position})\n\n{LOOK_FOR_PARTS}\n\n"
               f"The model gives `{name}` probability {float(probabilities[target_id]):.3f} (its choice number "
               f"{rank}); its logit {parts.logit:.3f} is the sum of these {len(values)} bars.")
    bars = _coloured_bars(plots.bar_chart(parts.names, values, f"The logit of '{name}', part by part", "logit"),
                          values)
    if head == STRONGEST:
        layer, which = max(((layer, which) for layer in range(config.layers_num) for which in range(config.heads_num)),
                           key=lambda lh: parts.head(*lh))
    else:
        layer, which = _parse_head(head, config.layers_num, config.heads_num)
    chosen = circuits.head_name(layer, which)
    weights, shares = circuits.key_contributions(model, ids, position, target_id, layer, which, parts)
    seen = slice(0, position + 1)
    key_labels = [f"{i}:{token}" for i, token in enumerate(tokens)][seen]
    # the character whose push has the head's own sign: a head that lowers the logit is read by what pushed down
    part = parts.head(layer, which)
    top = int((shares[seen] if part >= 0 else -shares[seen]).argmax())
    pushed = "pushed it up most" if float(shares[top]) >= 0 else "pushed it down most"
    head_heading = (f"### {chosen} at position {position}\n\n{LOOK_FOR_HEAD}\n\nIts part of the logit: "
                    f"{part:+.3f}; the character that {pushed}: `{tokens[top]}` at {top} "
                    f"(weight {float(weights[top]):.2f}, {float(shares[top]):+.3f}).")
    weight_bars = plots.bar_chart(key_labels, weights[seen].tolist(), f"Where position {position} looks ({chosen})",
                                  "attention weight")
    share_values = shares[seen].tolist()
    share_bars = _coloured_bars(plots.bar_chart(key_labels, share_values,
                                                f"Each read character's push on '{name}' ({chosen})", "logit"),
                                share_values)
    vocabulary = [_label(label) for label in labels(tokenizer, subset if subset is not None else
                                                    torch.arange(config.vocabulary_size))]
    qk = circuits.qk_circuit(model, layer, which, subset)
    ov = circuits.ov_circuit(model, layer, which, subset)
    direct = " (the direct path: as if it read the embeddings)" if layer > 0 else ""
    shown_of = "" if subset is None else f" ({subset.numel()} of the {config.vocabulary_size:,} tokens: the text's, " \
                                         "then the lowest ids)"
    # the pairs in words are among the text's own characters: one the model never saw keeps a random embedding,
    # whose entries can be the table's largest and mean nothing
    in_text = set(ids.tolist())
    among = [k for k, token in enumerate(subset.tolist() if subset is not None else range(config.vocabulary_size))
             if token in in_text]
    circuits_heading = (f"### What {chosen} reads and writes{direct}\n\n{LOOK_FOR_CIRCUITS}\n\n"
                        f"Looks for, among your text's characters: "
                        f"{_pairs_in_words(qk, vocabulary, 'looks for', among)}.\n\n"
                        f"Promotes: {_pairs_in_words(ov, vocabulary, 'promotes', among)}.{shown_of}\n\n"
                        f"<details><summary>more</summary>\n\n{CIRCUIT_MORE}\n\n</details>")
    qk_map = plots.vocabulary_heatmap(qk, vocabulary, f"QK of {chosen}: query (row) → key character",
                                      x_title="key", y_title="query", hover="query %{y} → key %{x}: score %{z:.3f}")
    ov_map = plots.vocabulary_heatmap(ov, vocabulary, f"OV of {chosen}: attended (row) → next character",
                                      x_title="promoted", y_title="attended",
                                      hover="attending to %{y}, the logit of %{x}: %{z:+.3f}")
    knock_heading, ranking = _knock_view(model, ids, position, target_id, knocked_heads, mode, tokenizer,
                                         probabilities)
    return WhyView(heading, bars, head_heading, weight_bars, share_bars, circuits_heading, qk_map, ov_map,
                   knock_heading, ranking)


def _knock_view(model, ids, position, target_id, knocked_heads, mode, tokenizer,
                intact: torch.Tensor) -> tuple[str, object]:
    """The knock-out table and the ranking; ``intact``: the intact model's probabilities at ``position``."""
    config = model.config
    name = _label(tokenizer.label(target_id))
    intact_loss = circuits.text_loss(model, ids) if ids.numel() > 1 else None
    device_ids = ids.view(1, -1).to(model.token_embedding.weight.device)

    def prediction(probabilities: torch.Tensor) -> tuple[str, float]:
        return _label(tokenizer.label(int(probabilities.argmax()))), float(probabilities[target_id])

    guess, p_target = prediction(intact)
    names = ", ".join(circuits.head_name(*lh) for lh in knocked_heads)
    lines = [f"### {f'Knocked out: {names}' if knocked_heads else 'Knock heads out'}\n\n{LOOK_FOR_KNOCK}"]
    if knocked_heads:
        with circuits.ablated(model, knocked_heads, mode, ids):
            knocked_loss = circuits.text_loss(model, ids) if ids.numel() > 1 else None
            with torch.no_grad():
                knocked_guess, knocked_p = prediction(torch.softmax(model(device_ids).logits[0, position].float(),
                                                                    dim=-1))
        table = ["| | intact | without " + names + " | change |", "|---|---|---|---|"]
        if intact_loss is not None:
            table.append(f"| loss on the text | {intact_loss:.3f} | {knocked_loss:.3f} | "
                         f"{knocked_loss - intact_loss:+.3f} |")
        table.append(f"| guess at position {position} | `{guess}` | `{knocked_guess}` | "
                     f"{'same' if guess == knocked_guess else 'changed'} |")
        table.append(f"| p(`{name}`) | {p_target:.3f} | {knocked_p:.3f} | {knocked_p - p_target:+.3f} |")
        lines.append("\n".join(table))
    else:
        lines.append("Tick heads below to knock them out.")
    ranking = None
    heads_total = config.layers_num * config.heads_num
    if intact_loss is None:
        lines.append("The text needs two tokens for a loss to rank heads by.")
    elif heads_total > MAX_RANKED_HEADS:
        lines.append(f"Ranking all {heads_total} heads would take {heads_total} forward passes: knock heads out by "
                     "hand instead.")
    else:
        effects = circuits.head_effects(model, ids, mode)
        ordered = sorted(effects, key=lambda e: (e.layer, e.head))
        ranking = plots.bar_chart([circuits.head_name(e.layer, e.head) for e in ordered],
                                  [e.added for e in ordered], "Loss added when each head alone is knocked out",
                                  "added loss")
        lines.append(f"Most needed: {circuits.head_name(effects[0].layer, effects[0].head)} "
                     f"({effects[0].added:+.3f} without it).")
    return "\n\n".join(lines), ranking


def controls(ctx: AppContext, checkpoint: str) -> tuple:
    """The head pickers for this checkpoint's layers and heads (left as they are when it does not load)."""
    try:
        config = ctx.checkpoint(checkpoint or "").config
    except (ValueError, OSError, RuntimeError):
        return gr.skip(), gr.skip()
    names = _head_names(config.layers_num, config.heads_num)
    return (gr.Dropdown(choices=[STRONGEST, *names], value=STRONGEST),
            gr.Dropdown(choices=names, value=[], multiselect=True))


def _first_heads(ctx: AppContext) -> list[str]:
    """The default checkpoint's head names, from its config alone (nothing is loaded at build time)."""
    names = ctx.checkpoint_names()
    if names:
        try:
            config = checkpoints.read_config(checkpoints.resolve(names[0], ctx.weights))
            return _head_names(config.layers_num, config.heads_num)
        except checkpoints.CheckpointError:
            pass
    return []


FIGURES = ("parts", "weights", "shares", "qk", "ov", "ranking")  # the WhyView fields a gr.Plot shows


def _shown(view: WhyView) -> tuple:
    return tuple(gr.Plot(value=item, visible=item is not None) if field in FIGURES else item
                 for field, item in zip(WhyView._fields, view))


def explain_changes(ctx: AppContext, checkpoint: str, text: str, position, target: str, head: str = STRONGEST,
                    knocked: list[str] | None = None, mode: str = "mean over the text", shown: dict | None = None):
    """The page's handler: ``explain``, sending the two circuit heatmaps and the ranking only when they differ
    from what the page shows (``shown``, returned updated last): a new position usually keeps them, and moving
    them was most of a click's wait."""
    view = explain(ctx, checkpoint, text, position, target, head, knocked, mode)
    ranking = view.ranking.data[0].y if view.ranking is not None else None
    keys = {"circuits": view.circuits_heading, "ranking": None if ranking is None else list(ranking)}
    outputs = dict(zip(WhyView._fields, _shown(view)))
    shown = shown or {}
    if shown.get("circuits") == keys["circuits"]:
        outputs["qk"] = outputs["ov"] = gr.skip()
    if keys["ranking"] is not None and shown.get("ranking") == keys["ranking"]:
        outputs["ranking"] = gr.skip()
    return (*outputs.values(), keys)


HEAD_ELEM_ID = "why-head"  # the chosen head's heading, where a clicked bar takes the page
PARTS_ELEM_ID = "why-parts"  # the attribution's chart, whose head bars open their head
PICKED_ELEM_ID = "why-picked-head"  # the hidden box a click on a head's bar writes the head's name into
# A click on a bar of the attribution chart: the bar under the pointer (Plotly's hover data, which a click or a tap
# sets first) names a part; a head's name goes into the hidden box, whose change opens that head.
PICK_JS = """
if (!window.whyBarPicks) {
  window.whyBarPicks = true;
  document.addEventListener('click', event => {
    const chart = event.target.closest && event.target.closest('#""" + PARTS_ELEM_ID + """ .js-plotly-plot');
    const point = chart && chart._hoverdata && chart._hoverdata[0];
    const name = point && point.customdata;
    const box = document.querySelector('#""" + PICKED_ELEM_ID + """ textarea');
    if (!box || typeof name !== 'string' || !/^L\\d+ H\\d+$/.test(name)) return;
    box.value = name + ' #' + Date.now();  // stamped: the same bar clicked again is a change again
    box.dispatchEvent(new Event('input', {bubbles: true}));
    document.querySelector('#""" + HEAD_ELEM_ID + """')?.scrollIntoView({behavior: 'smooth', block: 'start'});
  });
}
"""


def pick_head(picked: str, current: str):
    """A head's bar clicked ("L1 H0 #<click time>"): its name for the head picker (anything else, or the head
    already open, leaves the picker as it is)."""
    name = picked.split(" #")[0] if isinstance(picked, str) else ""
    return name if re.fullmatch(r"L\d+ H\d+", name) and name != current else gr.skip()


def build(ctx: AppContext) -> None:
    gr.Markdown("Which parts of the model wrote its guess for the next character, what one head looks for and "
                "writes, and what the model loses without it.")
    with gr.Row():
        checkpoint = checkpoint_dropdown(ctx, "why", scale=2)
        position = gr.Number(-1, label="position (-1 = last)", info="the model guesses what comes after it")
        target = gr.Textbox("", label="target", info="empty: the model's own guess", max_length=16)
    text = gr.Textbox(DEFAULT_TEXT, label="Text", lines=2)
    heading = gr.Markdown(label="why this character")
    parts = gr.Plot(label="the logit, part by part", elem_id=PARTS_ELEM_ID)
    picked = gr.Textbox(visible="hidden", label="head picked on the chart", elem_id=PICKED_ELEM_ID)
    gr.HTML("", js_on_load=PICK_JS, padding=False)
    heads = _first_heads(ctx)
    # choices follow the checkpoint; an API caller's head names are checked by the handler against its model
    head = gr.Dropdown([STRONGEST, *heads], value=STRONGEST, label="head", allow_custom_value=True)
    head_heading = gr.Markdown(label="the head's reading", elem_id=HEAD_ELEM_ID)
    with gr.Row():
        weights = gr.Plot(label="where it looks")
        shares = gr.Plot(label="what each read character pushed")
    circuits_heading = gr.Markdown(label="what the head reads and writes")
    with gr.Row():
        qk = gr.Plot(label="QK circuit")
        ov = gr.Plot(label="OV circuit")
    with gr.Row():
        knocked = gr.Dropdown(heads, value=[], multiselect=True, allow_custom_value=True, label="knock out",
                              info="heads whose output is replaced", scale=3)
        mode = gr.Radio(list(MODES), value=next(iter(MODES)), label="replace a knocked-out head's output by",
                        scale=1)
    knock_heading = gr.Markdown(label="knocked out")
    ranking = gr.Plot(label="every head knocked out alone")

    inputs = [checkpoint, text, position, target, head, knocked, mode]
    outputs = [heading, parts, head_heading, weights, shares, circuits_heading, qk, ov, knock_heading, ranking]
    shown = gr.State({})  # what the page's circuits and ranking show now: unchanged ones are not sent again
    inputs, outputs = [*inputs, shown], [*outputs, shown]
    quick = dict(show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane)

    def view(listener, **options):
        return wire(listener, explain_changes, ctx, inputs, outputs, **options)

    def pickers(listener, **options):
        return wire(listener, controls, ctx, [checkpoint], [head, knocked], show_progress="hidden", **options)

    arrival = gr.on(None, None, api_name="why_arrival", api_visibility="private")
    view(pickers(arrival.then, api_name="why_arrival_controls", api_visibility="private").then,
         api_name="why_load", api_visibility="private", **quick)
    # a new checkpoint resets the head pickers first, so the view never reads another model's head names
    keep_on_refusal(view(pickers(checkpoint.change, api_name="why_controls", api_visibility="private").then,
                         api_name="why_checkpoint", api_visibility="private", **quick), outputs,
                    "why_checkpoint_refused")
    # a click on a head's bar in the attribution chart opens that head
    keep_on_refusal(view(picked.change(pick_head, [picked, head], head, api_name="why_pick_head",
                                       api_visibility="private", show_progress="hidden",
                                       trigger_mode="always_last").success,
                         api_name="why_picked", api_visibility="private", **quick), outputs, "why_pick_refused")
    keep_on_refusal(view(functools.partial(gr.on, [text.change, position.change, target.change, head.input,
                                                   knocked.input, mode.change]), api_name="why", **quick),
                    outputs, "why_refused")
