"""The Attention tab's rotation stage (drawn for rotary models only) and its shift proof (any checkpoint).

Between step 2 (Q, K, V) and step 3 (the scores) a rotary model turns q and k by their positions: this section draws
one query's q and its best key's k before and after their turn, and each feature pair's angle at each position; its
shift proof runs the head on the learner's text at positions + k, where a rotary model's scores stay and a GPT's
learned positions move them. The maths lives in playground.lens.walkthrough.rotation; attention_tab places this.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import gradio as gr
import torch

from playground import budget, checks
from playground.lens import walkthrough
from playground.ui import plots
from playground.ui.attention_views import SOURCES, HeadCache, head_request
from playground.ui.common import AppContext
from playground.ui.events import wire

ROTATION_ELEM_ID = "attention-rotation"
SHIFT_ELEM_ID = "attention-shift"
ROTATION_TITLE = "2½. Rotation: where a rotary model's positions enter"
DEFAULT_SHIFT = 5


def _checkpoint_head(ctx: AppContext, source, checkpoint, layer, head, text):
    """The HeadRequest of a checkpoint's head (sized, not built); a ValueError for the other sources."""
    if source != SOURCES[0]:
        raise ValueError("The rotation and the shift proof read a checkpoint's head: pick 'trained checkpoint'")
    return head_request(ctx, source, checkpoint, layer, head, 0, 16, 8, "", text)


def kv_text(ctx: AppContext, source, checkpoint, head) -> str:
    """Which K/V head the picked query head reads, and which query heads share it ('' where each has its own)."""
    if source != SOURCES[0] or not checkpoint:
        return ""
    try:
        config = ctx.checkpoint(checkpoint).config
        head = checks.index(head, "head", config.heads_num, "heads per layer")
    except ValueError:  # the stage's own view says what is wrong
        return ""
    if not config.is_llama:
        return ""
    sharing = walkthrough.kv_sharing(config.heads_num, config.kv_heads, head)
    return (f"**K/V head:** {sharing.sentence} ({config.heads_num} query heads over {config.kv_heads} K/V "
            f"head{'s' * (config.kv_heads != 1)}); step 2's K and V are K/V head {sharing.kv_head}'s.")


def _figures(trace: walkthrough.HeadTrace, position: int, theta: float):
    """(q and k before and after their turn, the angle of each pair at each position)."""
    best = int(torch.argmax(trace.weights[position]))  # the key this query takes most from
    turn = walkthrough.rotation_at(trace, position, best)
    rows = torch.stack([turn.q_before, turn.q_after, turn.k_before, turn.k_after])  # (4, d)
    token, key_token = trace.tokens[position], trace.tokens[best]
    labels = [f"q of {position} before", f"q of {position} turned", f"k of {best} before", f"k of {best} turned"]
    bound = float(rows.abs().max()) or 1.0
    pairs = walkthrough.pair_labels(trace.head_size)
    half = trace.head_size // 2
    columns = [f"d{j} (pair {j % half})" for j in range(trace.head_size)]
    turned = plots.heatmap(
        rows, labels, columns,
        f"Query {position} ({plots._display_label(token)}) and its best key {best} ({plots._display_label(key_token)}):"
        f" q·k {turn.score_before:.3g} unturned, {turn.score_after:.3g} turned",
        colorscale="RdBu", zmin=-bound, zmax=bound, sparse_columns=True, x_title="dimension of the head",
        show_values=False)
    angles = walkthrough.pair_angles(trace.length, trace.head_size, theta)  # (T, d/2)
    positions = [f"{i} {plots._display_label(t)}" for i, t in enumerate(trace.tokens)]
    start = max(0, position - plots.MAX_SIDE // 2)
    angle_map = plots.heatmap(
        angles, positions, pairs, f"Angle (radians) each pair turns by: position × θ_i, θ_i = {theta:g}^(-2i/d)",
        colorscale="Viridis", zmin=0.0, show_values=False, first_row=start, highlight_row=position,
        sparse_columns=True, x_title="feature pair (i & i + d/2)", y_title="position and token")
    return turned, angle_map


def rotation_view(ctx: AppContext, source, checkpoint, layer, head, text, query, *,
                  heads: HeadCache | None = None):
    """(the rotation section shown or hidden, its text, q and k before and after, the angles, the K/V head's line,
    the shift proof's group shown or hidden). Hidden, with nothing drawn, where the head is not a rotary checkpoint's
    or cannot be traced (the stage's own view says why)."""
    hidden = (gr.update(visible=False), "", None, None, kv_text(ctx, source, checkpoint, head),
              gr.update(visible=source == SOURCES[0]))
    if source != SOURCES[0] or not text:
        return hidden
    try:
        request = _checkpoint_head(ctx, source, checkpoint, layer, head, text)
        asked = checks.whole_number(query if query not in (None, "") else -1, "query position", -1)
    except ValueError:  # the stage's own view says why
        return hidden
    T, C, d = request.length, request.embedding_dim, request.head_size
    cost = budget.attention_view_cost(length=T, embedding_dim=C, head_size=d,
                                      heatmap_cells=4 * d + min(T, plots.MAX_SIDE) * d // 2, bars=0, traces=1)
    with ctx.budget.reserve(request.cost(cost), hint=request.hint):
        inputs = heads.build(request) if heads is not None else request.build()
        if inputs.rotation is None:  # positions entered x as learned vectors: there is no rotation to draw
            return hidden
        trace = inputs.trace()
        position = trace.length - 1 if asked < 0 else min(asked, trace.length - 1)
        turned, angle_map = _figures(trace, position, inputs.rope_theta)
    text_md = (f"#### {ROTATION_TITLE}\n\n**Look for:** {walkthrough.ROTATION_TEXT} *({inputs.head})*\n\n"
               f"`q_turned = q·cos + rotate_half(q)·sin` (the same for k), rope_theta {inputs.rope_theta:g}, "
               f"d_k {d}: pair i is features i and i + {d // 2}. Step 3's scores are the turned q · k.")
    return gr.update(visible=True), text_md, turned, angle_map, hidden[4], hidden[5]


def shift_view(ctx: AppContext, source, checkpoint, layer, head, text, shift) -> str:
    """The shift proof on the text: the head's scores at positions + shift against those at 0.. (Markdown)."""
    request = _checkpoint_head(ctx, source, checkpoint, layer, head, text)
    loaded = ctx.checkpoint(checkpoint or "")
    shift = checks.whole_number(shift, "the shift k", 0)
    T, C, d = request.length, request.embedding_dim, request.head_size
    cost = budget.attention_view_cost(length=T, embedding_dim=C, head_size=d, heatmap_cells=0, bars=0, traces=2)
    ids = walkthrough.prepare_text(text, loaded.tokenizer, loaded.config.context_size).ids
    with ctx.budget.reserve(request.cost(cost), hint=request.hint):
        proof = walkthrough.shift_proof(loaded.model, ids, layer, head, shift)
    return f"**Shift proof**, {proof.sentence}"


class Rotation(NamedTuple):
    """The section's components (build), wired by connect once the tab's controls exist."""

    section: gr.Column
    text: gr.Markdown
    turned: gr.Plot
    angles: gr.Plot
    shift_group: gr.Column
    shift: gr.Number
    prove: gr.Button
    proof: gr.Markdown


def build(first_source: str) -> Rotation:
    """The rotation section (hidden until a rotary checkpoint's head is on screen) and the shift proof (shown for a
    checkpoint's head), laid out where this is called."""
    with gr.Column(visible=False, elem_id=ROTATION_ELEM_ID) as section:
        rotation_md = gr.Markdown()
        with gr.Row():
            turned = gr.Plot(label="q and k, before and after their turn")
            angles = gr.Plot(label="the angle of each pair at each position")
    with gr.Column(visible=first_source == SOURCES[0], elem_id=SHIFT_ELEM_ID) as shift_group, gr.Group():
        gr.Markdown("**Shift proof:** the same tokens at positions + k. Does the head score them the same?")
        with gr.Row():
            shift = gr.Number(DEFAULT_SHIFT, label="shift the positions by k")
            prove = gr.Button("Shift the text")
        proof_md = gr.Markdown()
    return Rotation(section, rotation_md, turned, angles, shift_group, shift, prove, proof_md)


def connect(ctx: AppContext, rotation: Rotation, kv_line: gr.Markdown, head_controls: list, triggers: list, *,
            heads: HeadCache) -> None:
    """Redraw the section on ``triggers`` (the tab's Show and input changes) from ``head_controls`` (source,
    checkpoint, layer, head, text, query); ``kv_line`` (beside the head picker) names the K/V head the query head
    reads. The shift proof answers its button."""
    wire(functools.partial(gr.on, triggers), rotation_view, ctx, head_controls,
         [rotation.section, rotation.text, rotation.turned, rotation.angles, kv_line, rotation.shift_group],
         fixed=dict(heads=heads), api_name="attention_rotation", api_visibility="private", show_progress="hidden",
         trigger_mode="always_last")
    wire(rotation.prove.click, shift_view, ctx, [*head_controls[:5], rotation.shift], rotation.proof,
         api_name="attention_shift", api_visibility="private", show_progress="hidden", **ctx.fast_lane)
