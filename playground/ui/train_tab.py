"""Train tab: start a background run, watch its curves, samples and a probe sentence's attention, stop it.

The tab only talks to the job manager (ctx.jobs); a gr.Timer polls its status, so a reloaded page or a
second browser sees the live run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import gradio as gr

from playground import checks, plots
from playground.config import ModelConfig, TrainConfig
from playground.data import decode_text
from playground.jobs import JobStatus
from playground.presets import TRAIN_PRESETS
from playground.run import RunRequest
from playground.ui.common import AppContext, bound, friendly

CORPORA = ("Tiny Shakespeare", "uploaded .txt", "pasted text")
# The fields a preset fills, by start_run's parameter names, in the order /train_preset returns them.
PRESET_FIELDS = ("layers_num", "heads_num", "embedding_dim", "context_size", "batch_size", "steps", "learning_rate",
                 "warmup_steps", "dropout_rate", "seed", "device", "run_name")
ESTIMATE_FIELDS = ("layers_num", "heads_num", "embedding_dim", "context_size", "batch_size", "steps")
# The time estimate, calibrated on a 2-core CPU with torch 2.13 (python benchmarks/train_speed.py and small runs):
# training sustains about 1.2e11 FLOP/s (6 per parameter per token, plus attention), and every step also pays a
# fixed cost for Python, kernel launches and the optimizer, about 0.6 ms plus 0.5 ms per layer.
_CPU_FLOPS = 1.2e11
_STEP_OVERHEAD_S, _LAYER_OVERHEAD_S = 6e-4, 5e-4


def _fmt_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def estimate(layers_num, heads_num, embedding_dim, context_size, batch_size, steps) -> str:
    """Parameter count and a rough CPU time estimate for the fields as they stand."""
    try:
        config = ModelConfig(vocabulary_size=65, context_size=checks.whole_number(context_size, "context_size", 1),
                             embedding_dim=checks.whole_number(embedding_dim, "embedding_dim", 1),
                             heads_num=checks.whole_number(heads_num, "heads_num", 1),
                             layers_num=checks.whole_number(layers_num, "layers_num", 1))
        batch, steps = checks.whole_number(batch_size, "batch size", 1), checks.whole_number(steps, "steps", 1)
    except ValueError as exc:
        return f"⚠️ {exc}"
    tokens = batch * config.context_size
    flops_per_token = 6 * config.parameter_count() + 12 * config.layers_num * config.context_size * config.embedding_dim
    seconds = steps * (tokens * flops_per_token / _CPU_FLOPS + _STEP_OVERHEAD_S + _LAYER_OVERHEAD_S * config.layers_num)
    return (f"**{config.parameter_count():,} parameters** (with Tiny Shakespeare's 65 symbols) · "
            f"{tokens:,} tokens per step · about {_fmt_seconds(seconds)} on a 2-core CPU (rough)")


def preset_fields(name: str) -> dict[str, Any]:
    """A training preset's value for each field the preset fills, keyed by the field's name (PRESET_FIELDS)."""
    if name not in TRAIN_PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(TRAIN_PRESETS)}")
    preset = TRAIN_PRESETS[name]
    values = {**preset.model.to_dict(), **preset.train.to_dict(), "run_name": name}
    return {field: values[field] for field in PRESET_FIELDS}


def preset_values(name: str) -> list:
    """/train_preset's outputs: ``preset_fields`` in PRESET_FIELDS order."""
    return list(preset_fields(name).values())


def start_run(ctx: AppContext, layers_num, heads_num, embedding_dim, context_size, batch_size, steps,
              learning_rate, warmup_steps, dropout_rate, seed, device, corpus_choice, upload, pasted, run_name,
              resume=False):
    """Validate every field, then hand the run to the job manager."""
    limits = ctx.limits
    model = dict(layers_num=checks.whole_number(layers_num, "layers_num", 1, 64),
                 heads_num=checks.whole_number(heads_num, "heads_num", 1, 64),
                 embedding_dim=checks.whole_number(embedding_dim, "embedding_dim", 1, 4096),
                 context_size=checks.whole_number(context_size, "context_size", 1, limits.max_context_size),
                 dropout_rate=checks.real_number(dropout_rate, "dropout_rate", 0.0, 0.99), use_bias=False)
    steps = checks.whole_number(steps, "steps", 1, limits.max_steps)
    preset = TRAIN_PRESETS["tiny"].train
    train = replace(preset, batch_size=checks.whole_number(batch_size, "batch size", 1, 1024), steps=steps,
                    learning_rate=checks.real_number(learning_rate, "learning rate"),
                    warmup_steps=checks.whole_number(warmup_steps, "warmup steps", 0),
                    seed=checks.whole_number(seed, "seed", 0, 2**31 - 1),
                    device=str(device or "auto"), eval_interval=max(1, min(preset.eval_interval, steps // 4 or 1)),
                    sample_interval=max(1, min(preset.sample_interval, steps // 4 or 1)),
                    checkpoint_interval=max(1, min(500, steps // 2 or 1)))
    TrainConfig.from_dict(train.to_dict())  # validates learning rate, device, ...
    corpus_path = corpus_text = None
    if corpus_choice == CORPORA[1]:
        if not upload:
            raise ValueError("choose a .txt file to upload, or pick another corpus")
        path = Path(upload if isinstance(upload, str) else getattr(upload, "name", upload))
        raw = path.read_bytes()[: limits.max_upload_bytes + 1]
        corpus_text = decode_text(raw, path.name, limits.max_upload_bytes)
    elif corpus_choice == CORPORA[2]:
        corpus_text = checks.text(pasted, "The pasted text", limits.max_upload_bytes)
        if not corpus_text.strip():
            raise ValueError("the pasted text is empty")
    elif corpus_choice != CORPORA[0]:
        raise ValueError(f"unknown corpus {corpus_choice!r}; choose one of {', '.join(CORPORA)}")
    request = RunRequest(run_name=str(run_name or "").strip(), model=model, train=train, corpus_path=corpus_path,
                         corpus_text=corpus_text, resume=bool(resume), weights_dir=ctx.weights)
    ctx.jobs.start(request)
    return render_status(ctx.jobs.status())


def render_status(status: JobStatus, layer: int = 0, head: int = 0, snapshot: int | None = None):
    """(status Markdown, loss figure, samples text, probe heatmap, snapshot slider) for one poll."""
    if status.state == "idle":
        return ("No run yet. Pick a preset, adjust, press **Start**.", plots.line_chart({}, "loss"), "",
                None, gr.Slider(minimum=0, maximum=1, value=0, step=1))
    done = max(0, status.step - status.start_step)
    progress = status.step / status.steps if status.steps else 0
    bar = "█" * int(progress * 30) + "░" * (30 - int(progress * 30))
    val = f"{status.val_loss[-1][1]:.4f}" if status.val_loss else "–"
    train = f"{status.train_loss[-1][1]:.4f}" if status.train_loss else "–"
    text = (f"**{status.state.upper()}** · run **{status.run_name}** · {status.message}\n\n"
            f"`{bar}` step **{status.step} / {status.steps}** ({progress:.0%})\n\n"
            f"train loss {train} · validation loss **{val}** · {status.tokens_per_second:,.0f} tokens/s · "
            f"learning rate {status.learning_rate:.2e} · elapsed {_fmt_seconds(status.elapsed_seconds)} · "
            f"ETA {_fmt_seconds(status.eta_seconds)}\n\n"
            f"{status.parameter_count:,} parameters · {status.device} · corpus {status.corpus}"
            + (f" · {done} steps this session" if status.start_step else ""))
    stride = max(1, len(status.train_loss) // 500)
    figure = plots.line_chart({"train": status.train_loss[::stride], "validation": status.val_loss},
                              "Loss (cross-entropy, nats)")
    samples = "\n\n".join(f"--- step {step} ---\n{sample}" for step, sample in reversed(status.samples[-5:]))
    probe_figure = None
    last = len(status.probes) - 1
    index = last if snapshot is None else max(0, min(int(snapshot), last))
    if status.probes:
        probe = status.probes[index]
        layer = max(0, min(int(layer), probe.weights.shape[0] - 1))
        head = max(0, min(int(head), probe.weights.shape[1] - 1))
        probe_figure = plots.heatmap(probe.weights[layer, head], probe.tokens, probe.tokens,
                                     f"Probe attention at step {probe.step} · layer {layer} head {head}",
                                     show_values=False, x_title="key (looked at)", y_title="query")
    slider = gr.Slider(minimum=0, maximum=max(last, 1), value=max(index, 0), step=1,
                       label=f"snapshot ({len(status.probes)} saved, at each evaluation)")
    return text, figure, samples, probe_figure, slider


def build(ctx: AppContext) -> None:
    gr.Markdown(
        "Train a small character-level GPT on the server, in the background: one run at a time for everyone. "
        "Watch the training and validation loss fall, read samples as they improve, and see the attention of a "
        "fixed probe sentence form. Stop keeps a checkpoint; the Attention and Sample tabs can load it."
    )
    first = preset_fields("tiny")
    fields: dict[str, gr.components.Component] = {}  # by name: PRESET_FIELDS, start_run's parameters
    with gr.Row():
        preset = gr.Dropdown(list(TRAIN_PRESETS), value="tiny", label="preset",
                             info="; ".join(f"{k}: {v.description}" for k, v in TRAIN_PRESETS.items()))
        fields["run_name"] = gr.Textbox("my-run", label="run name (folder in weights/)")
        fields["device"] = gr.Dropdown(["auto", "cpu", "cuda", "mps"], value=first["device"], label="device")
    with gr.Row():
        for name in ("layers_num", "heads_num", "embedding_dim", "context_size"):
            fields[name] = gr.Number(first[name], label=name, precision=0, minimum=1)
        fields["dropout_rate"] = gr.Number(first["dropout_rate"], label="dropout_rate", minimum=0, maximum=0.99)
    with gr.Row():
        fields["batch_size"] = gr.Number(first["batch_size"], label="batch size", precision=0, minimum=1)
        fields["steps"] = gr.Number(first["steps"], label="steps", precision=0, minimum=1,
                                    maximum=ctx.limits.max_steps)
        fields["learning_rate"] = gr.Number(first["learning_rate"], label="learning rate")
        fields["warmup_steps"] = gr.Number(first["warmup_steps"], label="warmup steps", precision=0, minimum=0)
        fields["seed"] = gr.Number(first["seed"], label="seed", precision=0, minimum=0)
    with gr.Row():
        corpus = gr.Radio(list(CORPORA), value=CORPORA[0], label="corpus")
        upload = gr.File(label=".txt upload", file_types=[".txt"], type="filepath")
        pasted = gr.Textbox(label="pasted text", lines=3)
    estimate_md = gr.Markdown(estimate(**{name: first[name] for name in ESTIMATE_FIELDS}))
    with gr.Row():
        start = gr.Button("Start", variant="primary")
        resume = gr.Button("Resume run")
        stop = gr.Button("Stop", variant="stop")
    status_md = gr.Markdown(label="status")
    loss_plot = gr.Plot(label="Loss")
    with gr.Row():
        with gr.Column():
            samples = gr.Textbox(label="Samples (newest first)", lines=12)
        with gr.Column():
            with gr.Row():
                probe_layer = gr.Number(0, label="layer", precision=0, minimum=0)
                probe_head = gr.Number(0, label="head", precision=0, minimum=0)
            snapshot = gr.Slider(0, 1, value=0, step=1, label="snapshot")
            probe_plot = gr.Plot(label="Probe sentence attention")
    timer = gr.Timer(1.0)

    settings = [fields[name] for name in PRESET_FIELDS if name != "run_name"]
    outputs = [status_md, loss_plot, samples, probe_plot, snapshot]

    def poll(layer, head, snapshot_index, seen):
        """Redraw only when something changed; follow the newest snapshot while new ones arrive."""
        status = ctx.jobs.status()
        key = [status.state, status.run_name, status.step, len(status.probes), len(status.samples), layer, head]
        if seen == key:
            return (*[gr.skip()] * len(outputs), seen)
        follow = not seen or seen[:5] != key[:5]
        return (*render_status(status, layer or 0, head or 0, None if follow else snapshot_index), key)

    def stop_run():
        return render_status(ctx.jobs.stop())

    preset.change(friendly(preset_values), preset, [fields[name] for name in PRESET_FIELDS], api_name="train_preset")
    estimate_inputs = [fields[name] for name in ESTIMATE_FIELDS]
    for field in estimate_inputs:
        field.change(estimate, estimate_inputs, estimate_md, api_name=f"train_estimate_{field.label}".replace(" ", "_"),
                     api_visibility="private", show_progress="hidden")
    run_inputs = [*settings, corpus, upload, pasted, fields["run_name"]]
    start.click(bound(start_run, ctx), run_inputs, outputs, api_name="train_start")
    resume.click(bound(start_run, ctx, resume=True), run_inputs, outputs, api_name="train_resume")
    stop.click(friendly(stop_run), None, outputs, api_name="train_stop")
    seen = gr.State([])
    timer.tick(friendly(poll), [probe_layer, probe_head, snapshot, seen], [*outputs, seen], api_name="train_status",
               show_progress="hidden")
    snapshot.release(friendly(lambda layer, head, index: render_status(ctx.jobs.status(), layer or 0, head or 0,
                                                                       index)),
                     [probe_layer, probe_head, snapshot], outputs, api_name="train_replay", api_visibility="private")
