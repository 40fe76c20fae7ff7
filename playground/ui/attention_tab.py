"""Attention tab: step through one head's Q, K, V, scores, scaling, mask, softmax and output.

Weights come from a trained checkpoint (a real head on the real input of its layer), from a seed, or from
the textbook presets. What-if switches show the consequence of each piece: the mask, the scaling, a
temperature, and the order of masking and scaling; when one differs from its default, the stage is drawn
twice, now and by default, on one colour scale. The maths, the lesson text, the step titles and which note
shows at which step live in playground.walkthrough; what a view costs lives in playground.budget. This module
lays them out, and puts exports where Gradio serves files from.

The view renders when the page loads and whenever a setting changes; the Show button (``/attention_step``)
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import gradio as gr
import numpy as np
import torch

from playground import budget, checks, walkthrough
from playground.architectures import require_gpt
from playground.checks import count
from playground.tokenizer import UnknownCharacterError
from playground.ui import chart_deck, head_table, plots
from playground.ui.common import AppContext, RecentReadings, checkpoint_dropdown, fold
from playground.ui.events import wire
from playground.ui.widgets import chips_html
from playground.walkthrough import STAGE_KEYS, STEP_LABELS, STEP_TITLES, lessons

SOURCES = ("trained checkpoint", "random weights", "textbook preset")
SOURCE_KINDS = dict(zip(SOURCES, ("checkpoint", "random", "textbook")))  # lessons.INPUT_LOOK_FOR's keys
DEFAULT_TEXT = "To be, or not to be: that is the question."
EMPTY_TEXT = "Type some text first"
EXPORTS_FOLDER = "attention-exports"  # inside Gradio's temp space, one fresh folder per export
_EXPORT_MAX_AGE_SECONDS = 3600
EXPORT_BYTES_PER_NUMBER = 28  # at most, in the CSV (a float32's shortest repr and a comma) and the .npy (4) together
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
    are not kept."""

    def __init__(self, size: int = HEAD_CACHE_SIZE) -> None:
        super().__init__(size)

    def build(self, request: HeadRequest) -> walkthrough.HeadInputs:
        if request.identity is None:
            return request.build()
        return self.get(request.identity, request.owner, request.build)


def head_inputs(ctx: AppContext, source: str, checkpoint: str | None, layer, head, seed, embedding_dim, head_size,
                preset: str, text: str) -> tuple[walkthrough.HeadInputs, list[str]]:
    """The head's inputs for the chosen source, and notices (e.g. how much text was dropped)."""
    request = head_request(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text)
    return request.build(), request.notices


def _step_index(step) -> int:
    if step in STEP_TITLES:
        return STEP_TITLES.index(step)
    return checks.whole_number(step, "step", 1, len(STEP_TITLES)) - 1


def _switches(scale, mask, temperature, mask_before_scaling) -> dict:
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


def _figures(trace: walkthrough.HeadTrace, default: walkthrough.HeadTrace | None, key: str, position: int) -> list:
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
        return _qkv_figures(trace, position, start, scale)
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


def _qkv_frames(trace: walkthrough.HeadTrace, position: int, start: int) -> list[list[dict]]:
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


def _qkv_figures(trace: walkthrough.HeadTrace, position: int, start: int, scale: dict) -> list:
    """Q, K and V on one colour scale, rows named by position and token, columns by the head's dimensions, framed
    for ``position`` (_qkv_frames), their titles below the toolbar's band."""
    labels = _position_labels(trace)
    figures = []
    for matrix, frames in zip(trace.matrices("qkv"), _qkv_frames(trace, position, start), strict=True):
        figure = plots.heatmap(matrix.values, labels, matrix.col_labels, QKV_TITLES[matrix.name], **scale,
                               first_row=start, sparse_columns=True, x_title="dimension of the head",
                               y_title="position and token")
        figure.update_layout(shapes=frames)
        figures.append(_below_the_toolbar(figure))
    return figures


def _short(values) -> list[float]:
    """float32 values written at their shortest (9 digits at most, each read back as the same float32): the bars'
    JSON is about half as long, and each bar is the number the head computed."""
    return [float(str(value)) for value in np.asarray(values, dtype=np.float32)]


def _score_bar_args(trace: walkthrough.HeadTrace, key: str, position: int, token: str) -> dict:
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
                masked=hidden, masked_hover=lessons.MASKED_SCORE_HOVER, important=_labels_that_matter(trace, position))


def _weight_bar_args(trace: walkthrough.HeadTrace, position: int, token: str) -> dict:
    """plots.bar_chart's arguments for the query's softmax weights (masked keys grey)."""
    return dict(labels=trace.tokens, values=_short(trace.weights[position]),
                title=f"Softmax weights of query {position} ({token})", y_title="weight",
                masked=trace.masked[position].tolist(), masked_hover=lessons.MASKED_WEIGHT_HOVER,
                important=_labels_that_matter(trace, position))


def _score_bars(trace: walkthrough.HeadTrace, key: str, position: int, token: str):
    """The query's row of the scores as the step on screen has them (_score_bar_args)."""
    return plots.bar_chart(**_score_bar_args(trace, key, position, token))


KEYS_BESIDE = 3  # keys drawn beside the query's row at step 2: those its q matches best


def _best_keys(trace: walkthrough.HeadTrace, position: int) -> tuple[list[int], torch.Tensor]:
    """The keys query ``position`` matches best (largest q·k among the keys it may see; softmax keeps the order, so
    they are also those it takes most from), and its row of raw scores with the keys it may not see at -inf."""
    scores = trace.scores[position].clone()
    if trace.mask:
        scores[position + 1:] = float("-inf")  # the mask will hide later keys: they are not what it reads
    best = torch.topk(scores, min(KEYS_BESIDE, position + 1 if trace.mask else trace.length)).indices.tolist()
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


def _query_beside_keys(trace: walkthrough.HeadTrace, position: int, token: str):
    """Step 2's picture of what Q and K are for: the query's q row above the k rows of the keys it matches best
    (largest q·k among the keys it may see), feature by feature on one colour scale, each key's q·k named."""
    shown = _beside(trace, position)
    figure = plots.heatmap(shown.rows, shown.labels, [f"d{c}" for c in range(trace.head_size)], shown.title,
                           colorscale="RdBu", zmin=-shown.bound, zmax=shown.bound, sparse_columns=True,
                           x_title="dimension of the head", show_values=False)
    # y as a list (Plotly sends an array as base64), so a position's changes name the rows as the figure does
    return figure.update_traces(customdata=None, hovertemplate=BESIDE_HOVER)


def _beside_changes(trace: walkthrough.HeadTrace) -> list[dict]:
    """What _query_beside_keys draws at each position that it may not draw at another (its numbers, labels, title
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


def _labels_that_matter(trace: walkthrough.HeadTrace, position: int) -> list[int]:
    """The bars whose labels a crowded row keeps: its largest weights, then the query itself (named in the title) where
    it keeps clear of them. The query first had left its largest weight, two keys before it, unnamed: a learner read
    the tall bar beside the query's label as the query looking at itself."""
    weights = trace.weights[position]
    return [*torch.topk(weights, min(TOP_LABELLED, weights.numel())).indices.tolist(), position]


MIXES_SHOWN = 12  # value vectors named in the query's sentence, largest weight first
NEGLIGIBLE_WEIGHT = 0.0005  # a weight that prints as 0.000: counted, not named


def _mixes_text(row: walkthrough.QueryRow) -> str:
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


def _coming_text(position: int, token: str, index: int) -> str:
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


def _view(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale,
          mask, temperature, mask_before_scaling, step, query, page: bool = False, heads=None) -> View:
    """The step's view. ``page``: the page's own event, where an emptied text box clears the plots and says why in
    the heading (the old plots stayed beside an empty box); an API call is refused instead."""
    return _views(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                  temperature, mask_before_scaling, [_step_index(step)], query, page=page, heads=heads)[0]


def _views(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale,
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
    switches = _switches(scale, mask, temperature, mask_before_scaling)
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
            figures = _figures(trace, shown_default, key, position)
            # the query's panel shows only what the steps so far have introduced: scores from step 3, weights from 6
            score_bars = (_score_bars(trace, key, position, row.token) if index >= SCORES_MET
                          else _query_beside_keys(trace, position, row.token) if key == "qkv" else None)
            weight_bars = (plots.bar_chart(**_weight_bar_args(trace, position, row.token)) if index >= WEIGHTS_MET
                           else None)
            stage = stages[index]
            look_for = lessons.look_for(index, SOURCE_KINDS[source], trace.scale, trace.mask, trace.temperature,
                                        trace.mask_before_scaling)
            # the head named in sight (on a wide screen the heading stays at the top): a learner sent here from the
            # Why tab saw nothing on the screen say which head the stages were of
            whose = f" *({inputs.head})*" if inputs.head else ""
            heading = (f"### {stage.title}\n\n**Look for:** {look_for}{whose}\n\n"
                       + fold(f"`{stage.formula}`\n\n{stage.explanation}\n\n{heading_tail}"))
            query_md = _mixes_text(row) if index >= WEIGHTS_MET else _coming_text(row.position, row.token, index)
            whatif = "\n\n".join(note for note in notes if note)
            views.append(View(heading, *figures, fold(whatif, "what the switches change") if whatif else "",
                              score_bars, weight_bars, query_md, "", asked if asked < 0 else position, warnings))
    return views


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
    view = _view(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
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
# A click (or a tap) on a heatmap's row makes that row's token the query; the title of the chart scrolled under the
# stage's heading is written under it
PAGE_LISTENERS_JS = "window.attentionPage.listenForRowPicks(); window.attentionPage.listenUnderHeading();"
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
                   heads: HeadCache | None = None):
    """The page's first answer to a change: (a deck holding the step on screen, the input check HTML, the query
    box's value (clamped to the text), the warnings sent). The page draws the deck, where its inputs (all but the
    query, which this answer writes) are still the ones it was made for; attention_deck follows."""
    settings = (source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                temperature, mask_before_scaling, query)
    view = _view(ctx, *settings[:-1], step, query, page=True, heads=heads)
    deck = chart_deck.deck_json(_deck_key(*settings), {STEP_TITLES[_step_index(step)]: _deck_view(view)},
                                settings=list(settings[:-1]))
    return deck, view.text_check, view.query, _warn(view.warnings, warned or ())


def attention_deck(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                   scale, mask, temperature, mask_before_scaling, query, *, heads: HeadCache | None = None):
    """Every step's view for the settings on screen, from one trace: the page then steps through them by itself.
    Nothing new where nothing can be traced (attention_page has said why)."""
    settings = (source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                temperature, mask_before_scaling, query)
    views = _views(ctx, *settings[:-1], range(len(STEP_TITLES)), query, page=True, heads=heads)
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
    position (the page keeps the step's). At step 2 the frames are Q's, K's and V's (_qkv_frames), and the query's q
    beside its best keys (a new heatmap per position) is sent as its changes from the one at position 0. Nothing where
    nothing can be traced, or past POSITIONS_MAX_LENGTH tokens."""
    settings = (source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                temperature, mask_before_scaling)
    index = _step_index(step)
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
    switches = _switches(scale, mask, temperature, mask_before_scaling)
    comparing = switches != walkthrough.DEFAULT_SWITCHES and key in walkthrough.SWITCHED_STAGES
    cost = budget.attention_view_cost(length=T, embedding_dim=C, head_size=d, bars=2 * T)
    with ctx.budget.reserve(request.cost(cost), hint=request.hint):
        inputs = heads.build(request) if heads is not None else request.build()
        trace = inputs.trace(**switches)
        widths = [min(matrix.values.size(1), plots.MAX_SIDE) for matrix in trace.matrices(key)]
        widths = (widths[:1] * 2 if comparing else widths) + [0] * 3

        def bars(position: int) -> list[dict | None]:
            token = trace.tokens[position]
            return [_score_bar_args(trace, key, position, token) if index >= SCORES_MET else None,
                    _weight_bar_args(trace, position, token) if index >= WEIGHTS_MET else None]

        if key == "qkv":  # step 2's q beside its best keys: the picture at position 0, and each position's changes
            bases = [None] * 3 + [json.loads(_query_beside_keys(trace, 0, trace.tokens[0]).to_json()), None]
            besides = _beside_changes(trace)
        else:
            bases = [None] * 3 + [json.loads(plots.bar_chart(**args).to_json()) if args else None for args in bars(0)]
        shown = [plots._display_label(str(label)) for label in trace.tokens]
        positions = []
        for position in range(T):
            if key == "qkv":
                frames = [{"layout": {"shapes": shapes}} for shapes in _qkv_frames(trace, position, 0)]
                text = _coming_text(position, trace.tokens[position], index)
                changes = _pruned(besides[position], bases[3])
                positions.append({"text": text, "changes": [*frames, changes, None]})
                continue
            frames = [{"layout": {"shapes": [plots.row_frame(position, width)]}} if width else None
                      for width in widths[:3]]
            # both bar charts label the same tokens first (the query, its largest weights): one choice of ticks
            ticks = plots._bar_ticks(shown, plots.BAR_LABEL_ROOM_PX, _labels_that_matter(trace, position))
            changes = [_pruned(_bar_changes(**args, shown=shown, ticks=ticks), base) if args else None
                       for args, base in zip(bars(position), bases[3:])]
            if index >= WEIGHTS_MET:
                text = _mixes_text(walkthrough.query_row(trace, position))
            else:
                text = _coming_text(position, trace.tokens[position], index)
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


SWITCH_LABEL_JS = ("(v) => `${v[0] ? 1 : 0}${v[1] ? 1 : 0}${v[2] ? 1 : 0}|${Number(v[3]).toFixed(2)}`")
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
        view = _view(ctx, *settings[:-1], step, query, page=True, heads=heads)
        if view.plot_a is None:
            return gr.skip()
        label = switch_label(flipped["scale"], flipped["mask"], flipped["mask_before_scaling"], temperature)
        spares[label] = chart_deck.deck_json(_deck_key(*settings), {STEP_TITLES[_step_index(step)]: _deck_view(view)})
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
    switches = _switches(scale, mask, temperature, mask_before_scaling)
    key = STAGE_KEYS[_step_index(step)]
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
    index = min(max(_step_index(step) + delta, 0), len(STEP_TITLES) - 1)
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
    with gr.Accordion("One query token", open=True):
        query = gr.Number(-1, label="query position (-1 = the last token)",
                          info="its row is framed in orange on the heatmaps; click a row to choose it",
                          elem_id=QUERY_ELEM_ID)
        gr.HTML("", js_on_load=PAGE_LISTENERS_JS, padding=False, min_height=0)
        with gr.Row():
            chart_deck.hosts(DECK, DECK_SLOTS[3:])
        query_md = gr.Markdown(label="values mixed")
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
    heads = HeadCache()
    draw = dict(fn=None, inputs=[deck, step], outputs=[heading, whatif, query_md], show_progress="hidden",
                queue=False)
    # only a first answer replaces the deck the page holds, where it was made for the inputs on screen (attention_page
    # names them); the rest (every step, a step picked) add to the views of its settings, so a slow answer for
    # settings since changed is never drawn
    draw_first = dict(draw, inputs=[deck, step, *settings[:-1]],
                      js=chart_deck.draw_js(DECK, DECK_TEXTS, reveal=STAGE_ELEM_ID, settings=True))
    draw = dict(draw, js=chart_deck.draw_js(DECK, DECK_TEXTS, reveal=STAGE_ELEM_ID, more=True))
    # Hidden progress: a refused input leaves the previous figures as they were (no "Error" badge on each);
    # the toast says why. always_last: while one view computes, only the latest edit waits behind it.
    quick = dict(show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane)
    first_io = dict(inputs=[*settings, query, warned], outputs=[deck, text_check, query, warned])

    def first(listener, **options):
        """``listener`` answers with the step on screen and what the page holds beside it (attention_page)."""
        return wire(listener, attention_page, ctx, fixed=dict(heads=heads), **first_io, **options)

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
    # on arrival: gr.on without triggers or inputs runs once the page has loaded; the view then reads the page's
    # values (a tab Gradio renders lazily still gets them: its figures are drawn when it is opened)
    answer(first(gr.on(None, None, api_name="attention_arrival", api_visibility="private").then,
                 api_name="attention_load", api_visibility="private", **quick), "attention_load")
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
    input_changes = [text.change, source.change, checkpoint.change, layer.change, head.change, seed.change,
                     embedding_dim.change, head_size.change, preset.change]
    answer(first(functools.partial(gr.on, input_changes), api_name="attention_update_inputs",
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
    return Opened(source, checkpoint, text, layer, head, query, step)
