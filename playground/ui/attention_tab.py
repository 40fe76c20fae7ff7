"""Attention tab: step through one head's Q, K, V, scores, scaling, mask, softmax and output.

Weights come from a trained checkpoint (a real head on the real input of its layer), from a seed, or from
the textbook presets. What-if switches show the consequence of each piece: the mask, the scaling, a
temperature, and the order of masking and scaling. The maths, the lesson text and the step titles live in
playground.walkthrough; this module lays them out, and puts exports where Gradio serves files from.
"""

from __future__ import annotations

import shutil
import time
import uuid
from pathlib import Path

import gradio as gr

from playground import checks, plots, walkthrough
from playground.tokenizer import UnknownCharacterError
from playground.ui.common import AppContext, bound, checkpoint_dropdown
from playground.ui.widgets import chips_html
from playground.walkthrough import STEP_TITLES

SOURCES = ("trained checkpoint", "random weights", "textbook preset")
DEFAULT_TEXT = "To be, or not to be: that is the question."
EXPORTS_FOLDER = "attention-exports"  # inside Gradio's temp space, one fresh folder per export
_EXPORT_MAX_AGE_SECONDS = 3600


def head_inputs(ctx: AppContext, source: str, checkpoint: str | None, layer, head, seed, embedding_dim, head_size,
                preset: str, text: str) -> tuple[walkthrough.HeadInputs, list[str]]:
    """The head's inputs for the chosen source, and notices (e.g. how much text was dropped)."""
    text = checks.text(text, "The text", ctx.limits.max_text_chars)
    if source == SOURCES[0]:
        loaded = ctx.checkpoint(checkpoint or "")
        prepared = walkthrough.prepare_text(text, loaded.tokenizer, loaded.config.context_size)
        inputs = walkthrough.checkpoint_head_inputs(loaded.model, prepared.ids, layer, head, tokens=prepared.tokens)
        return inputs, prepared.notices
    if source == SOURCES[1]:
        if not text:
            raise ValueError("Type some text first")
        limit = ctx.limits.max_context_size
        notices = []
        if len(text) > limit:
            notices.append(f"{len(text) - limit} characters were dropped (the limit is {limit})")
            text = text[:limit]
        inputs = walkthrough.random_head(text, checks.whole_number(embedding_dim, "embedding_dim", 1, 1024),
                                         checks.whole_number(head_size, "head_size", 1, 1024),
                                         checks.whole_number(seed, "seed", 0, 2**63 - 1))
        return inputs, notices
    if source == SOURCES[2]:
        presets = walkthrough.TEXTBOOK_PRESETS
        if preset not in presets:
            raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(presets)}")
        return presets[preset](), [f"Preset: {presets[preset].description}. The text box is not used."]
    raise ValueError(f"unknown weight source {source!r}; choose one of: {', '.join(SOURCES)}")


def _step_index(step) -> int:
    if step in STEP_TITLES:
        return STEP_TITLES.index(step)
    return checks.whole_number(step, "step", 1, len(STEP_TITLES)) - 1


def _switches(scale, mask, temperature, mask_before_scaling) -> dict:
    """The trace's switches; trace_head refuses a temperature that is not above 0."""
    return dict(scale=bool(scale), mask=bool(mask), temperature=checks.real_number(temperature, "temperature"),
                mask_before_scaling=bool(mask_before_scaling))


def _whatif(inputs: walkthrough.HeadInputs, trace: walkthrough.HeadTrace, switches: dict) -> str:
    common = dict(tokens=inputs.tokens, b_query=inputs.b_query, b_key=inputs.b_key, b_value=inputs.b_value,
                  temperature=switches["temperature"])
    leak = walkthrough.mask_leak(inputs.x, inputs.w_query, inputs.w_key, inputs.w_value, mask=False,
                                 scale=switches["scale"], **common)
    scaled = walkthrough.trace_head(inputs.x, inputs.w_query, inputs.w_key, inputs.w_value, scale=True,
                                    mask=switches["mask"], **common)
    unscaled = walkthrough.trace_head(inputs.x, inputs.w_query, inputs.w_key, inputs.w_value, scale=False,
                                      mask=switches["mask"], **common)
    saturation = walkthrough.saturation(scaled, unscaled)
    order = walkthrough.mask_order_difference(inputs.x, inputs.w_query, inputs.w_key, inputs.w_value,
                                              scale=switches["scale"], **common)
    lines = [
        f"**Mask ({'on' if trace.mask else 'off'} now).** {leak.summary}",
        f"**Scaling {'on' if trace.scale else 'off'}.** {saturation.summary}",
        f"**Mask before vs after scaling:** largest difference in the weights = **{order:g}** "
        "(−∞ ÷ √d_k is still −∞, so the order cannot matter).",
    ]
    if trace.length <= 16:
        rows = ["| query | entropy scaled | entropy unscaled | max weight scaled | max weight unscaled |",
                "|---|---|---|---|---|"]
        for i, token in enumerate(trace.tokens):
            rows.append(f"| {i} `{token}` | {saturation.entropy_scaled[i]:.3f} | {saturation.entropy_unscaled[i]:.3f}"
                        f" | {saturation.max_weight_scaled[i]:.3f} | {saturation.max_weight_unscaled[i]:.3f} |")
        lines.append("\n".join(rows))
    return "\n\n".join(lines)


def _figures(trace: walkthrough.HeadTrace, index: int) -> list:
    key = walkthrough.STAGE_KEYS[index]
    figures = []
    for matrix in trace.matrices(key):
        title = matrix.name
        colorscale, zmid = ("Blues", None) if key == "weights" else ("RdBu", 0.0)
        if key == "weights":
            sums = matrix.values.sum(dim=1)
            title += f" · row sums {sums.min().item():.4f}–{sums.max().item():.4f}"
        figures.append(plots.heatmap(matrix.values, matrix.row_labels, matrix.col_labels, title,
                                     colorscale=colorscale, zmid=zmid,
                                     x_title="key token" if matrix.col_labels == matrix.row_labels else "feature",
                                     y_title="query token" if key not in ("x", "qkv", "output") else "token"))
    return figures + [None] * (3 - len(figures))


def attention_step(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                   scale, mask, temperature, mask_before_scaling, step, query):
    """Plain handler: (heading, figure 1-3, what-if Markdown, query score bars, query weight bars, query
    Markdown, input check HTML) for one step."""
    try:
        inputs, notices = head_inputs(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset,
                                      text)
    except UnknownCharacterError as exc:
        loaded = ctx.checkpoint(checkpoint or "")
        gr.Warning(str(exc))
        html = chips_html(text[: loaded.config.context_size], loaded.tokenizer)
        message = f"**{exc}** Remove the highlighted characters, or pick random weights / a preset."
        return (message, None, None, None, "", None, None, "", html)
    switches = _switches(scale, mask, temperature, mask_before_scaling)
    trace = inputs.trace(**switches)
    index = _step_index(step)
    stage = walkthrough.stages(trace)[index]
    heading = (f"### {stage.title}\n\n`{stage.formula}`\n\n{stage.explanation}\n\n"
               f"*{inputs.description}* · T = {trace.length} tokens · C = {trace.embedding_dim} · "
               f"d_k = {trace.head_size}")
    if notices:
        heading += "\n\n" + "\n\n".join(f"ℹ️ {n}" for n in notices)
    figures = _figures(trace, index)
    position = checks.whole_number(query if query not in (None, "") else -1, "query position", -1)
    position = trace.length - 1 if position < 0 else min(position, trace.length - 1)
    row = walkthrough.query_row(trace, position)
    score_bars = plots.bar_chart(trace.tokens, [s if s != float("-inf") else 0.0 for s in row.scores],
                                 f"Scores of query {position} ({row.token}) (masked shown as 0)", "score")
    weight_bars = plots.bar_chart(trace.tokens, row.weights, f"Softmax weights of query {position} ({row.token})",
                                  "weight")
    mixes = ", ".join(f"`{m.token}` ({m.position}) × {m.weight:.3f}" for m in row.mixes[:12])
    query_md = (f"Query **{position}** `{row.token}` mixes the value vectors of: {mixes}"
                f"{' …' if len(row.mixes) > 12 else ''}. Its output is their weighted sum.")
    return (heading, *figures, _whatif(inputs, trace, switches), score_bars, weight_bars, query_md, "")


def export_step(ctx: AppContext, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text,
                scale, mask, temperature, mask_before_scaling, step) -> list[str]:
    """Write the current step's matrices as CSV and .npy files in Gradio's temp space; returns their paths."""
    inputs, _ = head_inputs(ctx, source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text)
    trace = inputs.trace(**_switches(scale, mask, temperature, mask_before_scaling))
    key = walkthrough.STAGE_KEYS[_step_index(step)]
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


def _visible_plots(result: tuple) -> tuple:
    """Show the second and third plot boxes only when the step has a second and third matrix (Q, K, V)."""
    heading, a, b, c, *rest = result
    return (heading, a, gr.Plot(value=b, visible=b is not None), gr.Plot(value=c, visible=c is not None), *rest)


def _source_groups(source: str) -> tuple:
    return tuple(gr.Group(visible=source == choice) for choice in SOURCES)


def build(ctx: AppContext) -> None:
    gr.Markdown(
        "Scaled dot-product attention, one stage at a time, for a single head. Pick where the weights come from, "
        "type your own text, and step through. Switch the mask or the scaling off to see why each is there."
    )
    names = ctx.checkpoint_names()
    first_source = SOURCES[0] if names else SOURCES[2]
    with gr.Row():
        source = gr.Radio(list(SOURCES), value=first_source, label="Weights from", scale=1)
        with gr.Group(visible=first_source == SOURCES[0]) as checkpoint_group, gr.Row():
            checkpoint = checkpoint_dropdown(ctx, "attention", scale=2)
            layer = gr.Number(0, label="layer", precision=0, minimum=0, scale=1)
            head = gr.Number(0, label="head", precision=0, minimum=0, scale=1)
        with gr.Group(visible=first_source == SOURCES[1]) as random_group, gr.Row():
            seed = gr.Number(0, label="seed", precision=0, minimum=0)
            embedding_dim = gr.Number(16, label="embedding_dim", precision=0, minimum=1)
            head_size = gr.Number(8, label="head_size", precision=0, minimum=1)
        with gr.Group(visible=first_source == SOURCES[2]) as preset_group:
            preset = gr.Dropdown([(f"{k}: {v.description}", k) for k, v in walkthrough.TEXTBOOK_PRESETS.items()],
                                 value="journey", label="preset")
    text = gr.Textbox(DEFAULT_TEXT, label="Text (not used by the presets)", lines=2)
    with gr.Row():
        scale = gr.Checkbox(True, label="scale by 1/√d_k")
        mask = gr.Checkbox(True, label="causal mask")
        mask_before = gr.Checkbox(False, label="mask before scaling")
        temperature = gr.Slider(0.1, 5.0, value=1.0, step=0.1, label="temperature on the scores")
        show_button = gr.Button("Show", variant="primary")
    with gr.Row():
        previous = gr.Button("◀ Previous", scale=1)
        step = gr.Radio(list(STEP_TITLES), value=STEP_TITLES[0], label="Step", scale=6)
        following = gr.Button("Next ▶", scale=1)
    text_check = gr.HTML(label="input check")
    heading = gr.Markdown(label="stage")
    with gr.Row():
        plot_a = gr.Plot(label="matrix 1")
        plot_b = gr.Plot(label="matrix 2", visible=False)
        plot_c = gr.Plot(label="matrix 3", visible=False)
    whatif = gr.Markdown(label="what if")
    with gr.Accordion("One query token", open=True):
        query = gr.Number(-1, label="query position (-1 = the last token)", precision=0, minimum=-1)
        with gr.Row():
            query_scores = gr.Plot(label="score row")
            query_weights = gr.Plot(label="softmax row")
        query_md = gr.Markdown(label="values mixed")
    with gr.Row():
        export = gr.Button("Export this step (CSV + .npy)")
        files = gr.File(label="Downloads", file_count="multiple", height=140)

    settings = [source, checkpoint, layer, head, seed, embedding_dim, head_size, preset, text, scale, mask,
                temperature, mask_before, step]
    outputs = [heading, plot_a, plot_b, plot_c, whatif, query_scores, query_weights, query_md, text_check]
    show = bound(attention_step, ctx, then=_visible_plots)
    shared = dict(concurrency_id="model", concurrency_limit=ctx.model_concurrency)
    source.change(_source_groups, source, [checkpoint_group, random_group, preset_group],
                  api_name="attention_source", api_visibility="private", show_progress="hidden")
    show_button.click(show, [*settings, query], outputs, api_name="attention_step", **shared)
    step.change(show, [*settings, query], outputs, api_name="attention_step_change", api_visibility="private",
                **shared)
    previous.click(lambda s: move_step(s, -1), step, step, api_name="attention_previous", api_visibility="private")
    following.click(lambda s: move_step(s, 1), step, step, api_name="attention_next", api_visibility="private")
    for name, control in (("scale", scale), ("mask", mask), ("mask_order", mask_before),
                          ("temperature", temperature), ("query", query)):
        control.change(show, [*settings, query], outputs, api_name=f"attention_update_{name}",
                       api_visibility="private", show_progress="hidden", **shared)
    export.click(bound(export_step, ctx), settings, files, api_name="attention_export")
