"""The Attention tab's views: one head's request (checked and costed), its inputs kept per text, and each of its
seven stages drawn as figures and texts (no Gradio events: playground.ui.attention_tab wires them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import torch

from playground import budget, checks
from playground.checks import count
from playground.lens import walkthrough
from playground.lens.walkthrough import STAGE_KEYS, STEP_TITLES, lessons
from playground.model.families import require_gpt
from playground.text.tokenizer import UnknownCharacterError
from playground.ui import plots
from playground.ui.common import AppContext, RecentReadings, fold
from playground.ui.widgets import chips_html

SOURCES = ("trained checkpoint", "random weights", "textbook preset")
SOURCE_KINDS = dict(zip(SOURCES, ("checkpoint", "random", "textbook")))  # lessons.INPUT_LOOK_FOR's keys
DEFAULT_TEXT = "To be, or not to be: that is the question."
EMPTY_TEXT = "Type some text first"
MAX_SIZE = 1024  # embedding_dim and head_size of a random head
FEATURE_STAGES = ("x", "qkv", "output")  # stages whose columns are features (labelled sparsely), not tokens
STAGE_ELEM_ID = "attention-stage"  # the stage's heading, where a picked head takes the page
CONTROL_MIN_WIDTH = 200  # the narrowest a control gets: on a phone (390 px) each takes a full-width row


@dataclass
class HeadRequest:
    """What the settings ask for, checked, before any tensor is made: the head's sizes, how to build its inputs,
    what a checkpoint's forward pass costs, and what to lower when the whole is too big."""

    length: int
    embedding_dim: int
    head_size: int
    build: Callable[[], walkthrough.HeadInputs]
    notices: list[str] = field(default_factory=list)
    forward: budget.Cost | None = None
    hint: str = ""
    about: str = ""  # what kind of model the weights come from (a checkpoint's description)
    identity: tuple | None = None  # what the built inputs depend on, where building them is worth remembering
    owner: object = None  # the loaded checkpoint they come from: a reloaded one is another

    def cost(self, own: budget.Cost) -> budget.Cost:
        """``own`` (the traces, figures or files) plus the checkpoint's forward pass when there is one."""
        return budget.combined(own.what, self.forward, own) if self.forward else own


def head_request(ctx: AppContext, source: str, checkpoint: str | None, layer, head, seed, embedding_dim, head_size,
                 preset: str, text: str) -> HeadRequest:
    """The head the settings ask for, sized but not built (raises UnknownCharacterError for a checkpoint)."""
    text = checks.text(text, "The text", ctx.limits.max_text_chars)
    if source == SOURCES[0]:
        loaded = ctx.checkpoint(checkpoint or "")
        config = loaded.config
        if not config.is_llama:  # GPT's and the Llama family's heads are read alike (their named points)
            require_gpt(config, loaded.name, "this step-by-step view of one head's weights")
        prepared = walkthrough.prepare_text(text, loaded.tokenizer, config.context_size)
        T = len(prepared.ids)
        forward = budget.inference_cost(parameters=config.parameter_count(), layers_num=config.layers_num,
                                        heads_num=config.heads_num, embedding_dim=config.embedding_dim,
                                        context_size=T, vocabulary_size=config.vocabulary_size, attention_maps=True)
        return HeadRequest(
            T, config.embedding_dim, config.head_size, notices=prepared.notices, forward=forward,
            build=lambda: walkthrough.checkpoint_head_inputs(loaded.model, prepared.ids, layer, head,
                                                             tokens=prepared.tokens),
            hint=f"use a shorter text (it is {T} tokens)", about=loaded.description,
            identity=("checkpoint", id(loaded), tuple(prepared.ids.tolist()), layer, head), owner=loaded)
    if source == SOURCES[1]:
        if not text:
            raise ValueError(EMPTY_TEXT)
        limit = ctx.limits.max_context_size
        notices = []
        if len(text) > limit:
            notices.append(f"{len(text) - limit} characters were dropped (the limit is {limit})")
            text = text[:limit]
        C = checks.whole_number(embedding_dim, "embedding_dim", 1, MAX_SIZE)
        d = checks.whole_number(head_size, "head_size", 1, MAX_SIZE)
        seed = checks.seed(seed)
        return HeadRequest(len(text), C, d, notices=notices,
                           build=lambda: walkthrough.random_head(text, C, d, seed),
                           hint=f"use a shorter text (it is {len(text)} tokens) or lower embedding_dim ({C}) "
                                f"or head_size ({d})")
    if source == SOURCES[2]:
        presets = walkthrough.TEXTBOOK_PRESETS
        if preset not in presets:
            raise ValueError(f"unknown preset {checks.shown(preset)}; choose one of {', '.join(presets)}")
        inputs = presets[preset]()  # a handful of tokens: building it is the cheapest way to size it
        return HeadRequest(inputs.x.size(0), inputs.x.size(1), inputs.w_query.size(1), build=lambda: inputs,
                           notices=[f"Preset: {presets[preset].description}. The text box is not used."])
    raise ValueError(f"unknown weight source {checks.shown(source)}; choose one of: {', '.join(SOURCES)}")


HEAD_CACHE_SIZE = 8  # heads' inputs kept: a checkpoint head's x is (T, C), at most a few MB each


class HeadCache(RecentReadings):
    """The last HEAD_CACHE_SIZE checkpoint heads' inputs, keyed by the loaded checkpoint, the text's token ids,
    the layer and the head: stepping through a text or moving its query runs the model's forward pass once, not
    at every click (it was half of each answer's server time). Random heads and presets cost little to build and
    are not kept. Given the server's ``budget``, what is kept is held from it as the Why tab's readings are
    (RecentReadings)."""

    def __init__(self, size: int = HEAD_CACHE_SIZE, budget=None) -> None:
        super().__init__(size, budget, what="the Attention tab's heads")

    def build(self, request: HeadRequest) -> walkthrough.HeadInputs:
        if request.identity is None:
            return request.build()
        return self.get(request.identity, request.owner, request.build)


def head_inputs(ctx: AppContext, source: str, checkpoint: str | None, layer, head, seed, embedding_dim, head_size,
                preset: str, text: str) -> tuple[walkthrough.HeadInputs, list[str]]:
    """The head's inputs for the chosen source, and notices (e.g. how much text was dropped)."""
    request = head_request(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text)
    return request.build(), request.notices


def step_index(step) -> int:
    if step in STEP_TITLES:
        return STEP_TITLES.index(step)
    return checks.whole_number(step, "step", 1, len(STEP_TITLES)) - 1


def switch_settings(scale, mask, temperature, mask_before_scaling) -> dict:
    """The trace's switches; trace_head refuses a temperature that is not above 0."""
    return dict(scale=checks.flag(scale, "scale by 1/√d_k"), mask=checks.flag(mask, "causal mask"),
                temperature=checks.real_number(temperature, "temperature"),
                mask_before_scaling=checks.flag(mask_before_scaling, "mask before scaling"))


def _colour_bound(*tensors: torch.Tensor) -> float:
    """The largest |finite value| of all the tensors: one symmetric colour scale for all of them."""
    largest = max((t[torch.isfinite(t)].abs().max().item() for t in tensors if torch.isfinite(t).any()),
                  default=0.0)
    return largest or 1.0


def _heatmap_count(key: str, comparing: bool) -> int:
    return 2 if comparing else len(walkthrough.stage_shapes(key, 1, 1, 1))


def _figures(trace: walkthrough.HeadTrace, default: walkthrough.HeadTrace | None, key: str, position: int,
             sharing: str = "") -> list:
    """The stage's heatmaps: Q, K and V on one scale; or the stage now and by default (when a switch differs)
    on one scale; the scaled scores on the raw scores' scale too; weights always on 0-1. The query's row is framed,
    and the window follows it past 128 tokens."""
    if default is None:
        shown = [(trace, matrix, "") for matrix in trace.matrices(key)]
    else:
        shown = [(trace, trace.matrices(key)[0], "now"), (default, default.matrices(key)[0], "default")]
    if key == "weights":
        scale = dict(colorscale="Blues", zmin=0.0, zmax=1.0)
    else:
        values = [matrix.values for _, matrix, _ in shown]
        if key == "scaled_scores":  # on step 3's colour scale: the same pattern, paler (it had looked the same)
            values += [source.matrices("scores")[0].values for source, _, _ in shown]
        bound_ = _colour_bound(*values)
        scale = dict(colorscale="RdBu", zmin=-bound_, zmax=bound_)
    start = max(0, position - plots.MAX_SIDE // 2)
    if key == "qkv":
        return _qkv_figures(trace, position, start, scale, sharing)
    figures = []
    for source, matrix, tag in shown:
        title = f"{tag} ({lessons.switches_text(source.switches, key)}): {matrix.name}" if tag else matrix.name
        masked, hover = None, lessons.MASKED_SCORE_HOVER
        if key == "weights":
            sums = matrix.values.sum(dim=1)
            title += f" · row sums {sums.min().item():.4f}–{sums.max().item():.4f}"
            masked, hover = source.masked, lessons.MASKED_WEIGHT_HOVER
        if key in ("masked_scores", "weights") and source.mask:
            title += f" · {lessons.MASKED_LEGEND}"
        square = matrix.col_labels == matrix.row_labels
        figure = plots.heatmap(
            matrix.values, matrix.row_labels, matrix.col_labels, title, **scale, masked=masked, masked_hover=hover,
            highlight_row=position, first_row=start, first_col=start if square else 0,
            sparse_columns=key in FEATURE_STAGES, x_title="key token" if square else "feature",
            y_title="query token" if key not in FEATURE_STAGES else "token")
        # a key per column: on a phone each keeps its label, the pattern scrolling sideways
        figures.append(plots.wide_on_touch(figure, min(len(matrix.col_labels), plots.MAX_SIDE)) if square else figure)
    return figures + [None] * (3 - len(figures))


# Step 2's heatmaps as what they are for: each matrix's title says its role, the query's q row is framed in orange and
# the rows of the keys it matches best are framed in green on K and on V (what it finds, and what it takes)
QKV_TITLES = {"Q": "Q: what each token looks for (framed: the query)",
              "K": "K: what each token offers (green: the keys the query matches best)",
              "V": "V: what each token passes on (green: the values the query takes most)"}


def _position_labels(trace: walkthrough.HeadTrace) -> list[str]:
    """Each row's position and token ("41 ."), so a framed row can be found by number as well as by character."""
    return [f"{i} {plots._display_label(token)}" for i, token in enumerate(trace.tokens)]


def qkv_frames(trace: walkthrough.HeadTrace, position: int, start: int) -> list[list[dict]]:
    """The frames of Q, K and V for ``position``: its q row (orange), and the k and v rows it matches best (green)."""
    best, _ = _best_keys(trace, position)
    cols = min(trace.head_size, plots.MAX_SIDE)
    first_row = max(0, min(start, max(0, trace.length - plots.MAX_SIDE)))
    query = [plots.row_frame(position - first_row, cols)] if first_row <= position < first_row + plots.MAX_SIDE else []
    matches = plots.match_frames(best, cols, start, trace.length)
    return [query, matches, matches]


# On a desktop Plotly shows its toolbar over a chart's top right corner while the pointer is on the chart: three
# heatmaps in a row are 390-440 px wide, and the toolbar (some 200 px) lay over the first line of each two-line title
TOOLBAR_ROOM_PX = 36  # the toolbar's band is 2-28 px from the chart's top


def _below_the_toolbar(figure):
    """``figure``'s top margin, where Plotly centres the title, taller by TOOLBAR_ROOM_PX: the title's first line
    comes down below the toolbar's band (on a phone there is no toolbar: a little more room)."""
    return figure.update_layout(margin=dict(t=figure.layout.margin.t + TOOLBAR_ROOM_PX))


def _qkv_figures(trace: walkthrough.HeadTrace, position: int, start: int, scale: dict, sharing: str = "") -> list:
    """Q, K and V on one colour scale, rows named by position and token, columns by the head's dimensions, framed
    for ``position`` (qkv_frames), their titles below the toolbar's band. ``sharing``: a grouped model's K/V head
    (walkthrough.kv_sharing's sentence), named on K and V, which are that shared head's."""
    labels = _position_labels(trace)
    figures = []
    for matrix, frames in zip(trace.matrices("qkv"), qkv_frames(trace, position, start), strict=True):
        title = QKV_TITLES[matrix.name] + (f" · {sharing}" if sharing and matrix.name in ("K", "V") else "")
        figure = plots.heatmap(matrix.values, labels, matrix.col_labels, title, **scale,
                               first_row=start, sparse_columns=True, x_title="dimension of the head",
                               y_title="position and token")
        figure.update_layout(shapes=frames)
        figures.append(_below_the_toolbar(figure))
    return figures


def _short(values) -> list[float]:
    """float32 values written at their shortest (9 digits at most, each read back as the same float32): the bars'
    JSON is about half as long, and each bar is the number the head computed."""
    return [float(str(value)) for value in np.asarray(values, dtype=np.float32)]


def score_bar_args(trace: walkthrough.HeadTrace, key: str, position: int, token: str) -> dict:
    """plots.bar_chart's arguments for the query's row of the scores as the step on screen has them: raw up to step
    3, scaled at step 4, and from step 5 on what goes into softmax (masked cells grey, when the mask is on)."""
    if key in ("x", "qkv", "scores"):
        values, what, hidden = trace.scores[position], "Raw scores", None
    elif key == "scaled_scores":
        values, hidden = trace.scaled_scores[position], None
        what = "Scaled scores" if trace.scale else "Scores (not scaled)"
    else:
        values, hidden, what = trace.masked_scores[position], trace.masked[position].tolist(), "Scores into softmax"
    shown = [0.0 if hidden and hidden[j] else value for j, value in enumerate(_short(values))]
    return dict(labels=trace.tokens, values=shown, title=f"{what} of query {position} ({token})", y_title="score",
                masked=hidden, masked_hover=lessons.MASKED_SCORE_HOVER, important=labels_that_matter(trace, position))


def weight_bar_args(trace: walkthrough.HeadTrace, position: int, token: str) -> dict:
    """plots.bar_chart's arguments for the query's softmax weights (masked keys grey)."""
    return dict(labels=trace.tokens, values=_short(trace.weights[position]),
                title=f"Softmax weights of query {position} ({token})", y_title="weight",
                masked=trace.masked[position].tolist(), masked_hover=lessons.MASKED_WEIGHT_HOVER,
                important=labels_that_matter(trace, position))


def _score_bars(trace: walkthrough.HeadTrace, key: str, position: int, token: str):
    """The query's row of the scores as the step on screen has them (score_bar_args)."""
    return plots.bar_chart(**score_bar_args(trace, key, position, token))


KEYS_BESIDE = 3  # keys drawn beside the query's row at step 2: those its q matches best


def _best_keys(trace: walkthrough.HeadTrace, position: int) -> tuple[list[int], torch.Tensor]:
    """The keys query ``position`` matches best (largest q·k among the keys it may see; softmax keeps the order, so
    they are also those it takes most from), and its row of raw scores with the keys it may not see at -inf."""
    scores = trace.scores[position].clone()
    if trace.mask:  # the mask will hide later keys (and a sliding window's older ones): they are not what it reads
        scores[trace.masked[position]] = float("-inf")
    seen = int((~trace.masked[position]).sum()) if trace.mask else trace.length
    best = torch.topk(scores, min(KEYS_BESIDE, seen)).indices.tolist()
    return best, scores


class Beside(NamedTuple):
    """What step 2's query-beside-keys picture shows for one query: its rows (q, then the best keys' k), their labels,
    the title and the colour bound."""

    rows: torch.Tensor  # (1 + keys, d)
    labels: list[str]
    title: str
    bound: float


def _beside(trace: walkthrough.HeadTrace, position: int) -> Beside:
    token = trace.tokens[position]
    best, scores = _best_keys(trace, position)
    rows = torch.stack([trace.q[position], *(trace.k[j] for j in best)])
    labels = [f"q of {position} ({token})"] + [f"k of {j} ({trace.tokens[j]}): q·k {scores[j].item():.2f}"
                                              for j in best]
    labels = [plots._display_label(label) for label in labels]
    return Beside(rows, labels, f"The keys query {position} ({token}) matches best, beside its q", _colour_bound(rows))


# the picture's hover names the cell by its row and dimension (the row's label is beside it): no text per cell, so a
# position's picture, sent for the page to draw itself, is its numbers and labels (a few KB), not 13 KB of hover text
BESIDE_HOVER = "row %{y}, d%{x}<br>value %{z:.6g}<extra></extra>"


def query_beside_keys(trace: walkthrough.HeadTrace, position: int, token: str):
    """Step 2's picture of what Q and K are for: the query's q row above the k rows of the keys it matches best
    (largest q·k among the keys it may see), feature by feature on one colour scale, each key's q·k named."""
    shown = _beside(trace, position)
    figure = plots.heatmap(shown.rows, shown.labels, [f"d{c}" for c in range(trace.head_size)], shown.title,
                           colorscale="RdBu", zmin=-shown.bound, zmax=shown.bound, sparse_columns=True,
                           x_title="dimension of the head", show_values=False)
    # y as a list (Plotly sends an array as base64), so a position's changes name the rows as the figure does
    return figure.update_traces(customdata=None, hovertemplate=BESIDE_HOVER)


def beside_changes(trace: walkthrough.HeadTrace) -> list[dict]:
    """What query_beside_keys draws at each position that it may not draw at another (its numbers, labels, title
    and colour bound), without a figure per position: laid over that picture at another position (the page's merge)
    each is the picture at its position. The rows are few (KEYS_BESIDE + 1), so each is labelled and the height stays
    plots.heatmap's least."""
    shown = [_beside(trace, position) for position in range(trace.length)]
    data = plots.heatmap_traces_json([dict(z=each.rows.double().numpy(), y=np.arange(each.rows.size(0)),
                                           zmin=-each.bound, zmax=each.bound) for each in shown])
    changes = []
    for each, values in zip(shown, data, strict=True):
        title, top = plots._title_layout(each.title)
        rows = list(range(each.rows.size(0)))
        changes.append({"data": [values], "layout": {"title": title, "margin": {"t": top},
                                                     "yaxis": {"tickvals": rows, "ticktext": each.labels}}})
    return changes


TOP_LABELLED = 3  # the largest weights of a query's row keep their labels where not every bar can have one


def labels_that_matter(trace: walkthrough.HeadTrace, position: int) -> list[int]:
    """The bars whose labels a crowded row keeps: its largest weights, then the query itself (named in the title) where
    it keeps clear of them: the largest weights first, since a tall unnamed bar beside the query's label reads as the
    query looking at itself."""
    weights = trace.weights[position]
    return [*torch.topk(weights, min(TOP_LABELLED, weights.numel())).indices.tolist(), position]


MIXES_SHOWN = 12  # value vectors named in the query's sentence, largest weight first
NEGLIGIBLE_WEIGHT = 0.0005  # a weight that prints as 0.000: counted, not named


def mixes_text(row: walkthrough.QueryRow) -> str:
    """Which value vectors the query mixes, largest weight first (behind a fold); the negligible ones counted."""
    named = [mix for mix in row.mixes if mix.weight >= NEGLIGIBLE_WEIGHT][:MIXES_SHOWN]
    rest = len(row.mixes) - len(named)
    mixes = ", ".join(f"`{m.token}` ({m.position}) × {m.weight:.3f}" for m in named)
    negligible = sum(mix.weight < NEGLIGIBLE_WEIGHT for mix in row.mixes)
    more = ""
    if rest:
        more = (f" and {rest} more" + (f" ({negligible} of them with weights below {NEGLIGIBLE_WEIGHT:g})"
                                       if negligible else ""))
    return (f"Query **{row.position}** `{row.token}`: its output is the weighted sum of the value vectors it reads, "
            f"the bars above.\n\n" + fold(f"It mixes the value vectors of: {mixes}{more}.", "the weights"))


SCORES_MET, WEIGHTS_MET = STAGE_KEYS.index("scores"), STAGE_KEYS.index("weights")


def coming_text(position: int, token: str, index: int) -> str:
    """Before softmax, the query's panel says what it will show, and at which step."""
    coming = [(SCORES_MET, "its scores"), (WEIGHTS_MET, "its softmax weights")]
    pending = [(met, what) for met, what in coming if met > index]
    said = [f"{what}{' come' if not i else ''} at step {met + 1}" for i, (met, what) in enumerate(pending)]
    return f"Query **{position}** `{token}` (framed in orange): {', '.join(said)}."


class View(NamedTuple):
    """What one step shows: the public outputs (heading to text_check), the query box's value and warnings."""

    heading: str
    plot_a: object
    plot_b: object
    plot_c: object
    whatif: str
    score_bars: object
    weight_bars: object
    query_md: str
    text_check: str
    query: int  # -1, or the position shown: a position past the end comes back clamped
    warnings: list[str]

    @property
    def outputs(self) -> tuple:
        return tuple(self)[:9]


def stage_view(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale,
               mask, temperature, mask_before_scaling, step, query, page: bool = False, heads=None) -> View:
    """The step's view. ``page``: the page's own event, where an emptied text box clears the plots and says why in
    the heading (the old plots stayed beside an empty box); an API call is refused instead."""
    return stage_views(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                       temperature, mask_before_scaling, [step_index(step)], query, page=page, heads=heads)[0]


def stage_views(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale,
                mask, temperature, mask_before_scaling, indices, query, page: bool = False, heads=None) -> list[View]:
    """One View per step index in ``indices``, from one trace of the head (and one of the default, when a switch
    differs). ``heads``: a HeadCache, so the head's inputs (a checkpoint's forward pass) are built once per text.
    Where nothing can be traced (an empty text on the page, characters the checkpoint lacks) it is one View."""
    asked = checks.whole_number(query if query not in (None, "") else -1, "query position", -1)
    if page and source != SOURCES[2] and not text:
        return [View(f"### {EMPTY_TEXT}\n\nEach step is computed over the tokens of a text: type one above (or pick "
                     "a textbook preset).", None, None, None, "", None, None, "", "", asked, [EMPTY_TEXT])]
    try:
        request = head_request(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text)
    except UnknownCharacterError as exc:
        loaded = ctx.checkpoint(checkpoint or "")
        html = chips_html(text[: loaded.config.context_size], loaded.tokenizer)
        message = f"**{exc}** Remove the highlighted characters, or pick random weights / a preset."
        return [View(message, None, None, None, "", None, None, "", html, asked, [str(exc)])]
    switches = switch_settings(scale, mask, temperature, mask_before_scaling)
    keys = [STAGE_KEYS[index] for index in indices]
    differs = switches != walkthrough.DEFAULT_SWITCHES
    T, C, d = request.length, request.embedding_dim, request.head_size
    cells = sum(_heatmap_count(key, differs and key in walkthrough.SWITCHED_STAGES) * max(
        min(rows, plots.MAX_SIDE) * min(cols, plots.MAX_SIDE) for rows, cols in walkthrough.stage_shapes(key, T, C, d))
        for key in keys)
    comparing = differs and any(key in walkthrough.SWITCHED_STAGES for key in keys)
    cost = budget.attention_view_cost(length=T, embedding_dim=C, head_size=d, heatmap_cells=cells, bars=2 * len(keys),
                                      traces=1 + comparing + max(walkthrough.whatif_traces(key) for key in keys))
    with ctx.budget.reserve(request.cost(cost), hint=request.hint):
        inputs = heads.build(request) if heads is not None else request.build()
        trace = inputs.trace(**switches)
        default = inputs.trace() if comparing else None
        stages = walkthrough.stages(trace)
        position = trace.length - 1 if asked < 0 else min(asked, trace.length - 1)
        warnings = [lessons.query_clamped(asked, trace.length)] if asked > position else []
        row = walkthrough.query_row(trace, position)
        heading_tail = (f"*{inputs.description}* · T = {count(trace.length, 'token')} · C = {trace.embedding_dim} · "
                        f"d_k = {trace.head_size}")
        if request.about:
            heading_tail += f"\n\nModel: {request.about}"
        if request.notices:
            heading_tail += "\n\n" + "\n\n".join(f"ℹ️ {n}" for n in request.notices)
        views = []
        for index, key in zip(indices, keys):
            shown_default = default if differs and key in walkthrough.SWITCHED_STAGES else None
            identical = shown_default is not None and all(
                torch.equal(now.values, then.values)
                for now, then in zip(trace.matrices(key), shown_default.matrices(key), strict=True))
            notes = [lessons.comparison_note(trace, key, identical),
                     *walkthrough.stage_notes(key, trace, **inputs.as_kwargs())]
            figures = _figures(trace, shown_default, key, position, inputs.sharing)
            # the query's panel shows only what the steps so far have introduced: scores from step 3, weights from 6
            score_bars = (_score_bars(trace, key, position, row.token) if index >= SCORES_MET
                          else query_beside_keys(trace, position, row.token) if key == "qkv" else None)
            weight_bars = (plots.bar_chart(**weight_bar_args(trace, position, row.token)) if index >= WEIGHTS_MET
                           else None)
            stage = stages[index]
            look_for = lessons.look_for(index, SOURCE_KINDS[source], trace.scale, trace.mask, trace.temperature,
                                        trace.mask_before_scaling)
            # the head named in sight (on a wide screen the heading stays at the top): opened from the Why tab, the
            # stages say whose they are
            whose = f" *({inputs.head})*" if inputs.head else ""
            if trace.mask and trace.window is not None and key == "masked_scores":  # Mistral's sliding window
                look_for = lessons.window_look_for(trace.window)
            elif trace.mask and trace.window is not None and key == "weights":
                whose += f" {lessons.window_sentence(trace.window)}"
            if key == "qkv" and (inputs.sharing or trace.rotary):  # what only the Llama family has
                whose += "".join([f" K/V: {inputs.sharing}." if inputs.sharing else "",
                                  " Q and K here are turned by their positions (2½. Rotation, below)."
                                  if trace.rotary else ""])
            heading = (f"### {stage.title}\n\n**Look for:** {look_for}{whose}\n\n"
                       + fold(f"`{stage.formula}`\n\n{stage.explanation}\n\n{heading_tail}"))
            query_md = mixes_text(row) if index >= WEIGHTS_MET else coming_text(row.position, row.token, index)
            whatif = "\n\n".join(note for note in notes if note)
            views.append(View(heading, *figures, fold(whatif, "what the switches change") if whatif else "",
                              score_bars, weight_bars, query_md, "", asked if asked < 0 else position, warnings))
    return views
