"""Compare tab: seven multi-head attention implementations run side by side on the same input.

Shows where they agree (equivalence after weight transplant), what they cost (parameters, time and memory
against T), each head's map, and the real source of each module.
"""

from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go
import torch

from playground import checks, plots
from playground.attention import IMPLEMENTATIONS, source_of
from playground.attention.costs import SWEEP_LENGTHS, check_fits, time_implementations
from playground.attention.equivalence import compare
from playground.device import describe, pick_device, supported_dtypes
from playground.ui.common import AppContext, bound, friendly

MAX_T = 1024
MAX_MAP_T = 48
GPT2_SMALL = dict(embedding_dim=768, heads_num=12, seq_len=64, batch=1, qkv_bias=True)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def _settings(embedding_dim, heads_num, seq_len, batch, seed, dtype, device):
    embedding_dim = checks.whole_number(embedding_dim, "embedding_dim", 1, 4096)
    heads_num = checks.whole_number(heads_num, "heads_num", 1, 64)
    if embedding_dim % heads_num:
        raise ValueError(f"embedding_dim {embedding_dim} is not divisible by heads_num {heads_num}")
    seq_len = checks.whole_number(seq_len, "T", 1, MAX_T)
    batch = checks.whole_number(batch, "batch", 1, 64)
    seed = checks.whole_number(seed, "seed", 0, 2**31 - 1)
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    chosen = pick_device(device)
    if _DTYPE_NAMES[dtype] not in supported_dtypes(chosen):
        raise ValueError(f"{dtype} is not supported on {describe(chosen)}; choose one of "
                         f"{', '.join(k for k, v in _DTYPE_NAMES.items() if v in supported_dtypes(chosen))}")
    return embedding_dim, heads_num, seq_len, batch, seed, DTYPES[dtype], chosen


def run_comparison(ctx: AppContext, embedding_dim, heads_num, seq_len, batch, seed, qkv_bias, dtype, device):
    """Plain handler: (summary Markdown, equivalence rows, parameter rows, per-head map grid)."""
    d, h, T, B, seed, torch_dtype, chosen = _settings(embedding_dim, heads_num, seq_len, batch, seed, dtype, device)
    check_fits(B, h, T, torch_dtype, chosen)
    result = compare(d, d, h, T, B, seed, bool(qkv_bias), torch_dtype, chosen)
    equivalence = {"headers": ["name", "compared with", "max |diff|", "rel. diff", "atol", "agrees",
                               "why they differ at all"], "data": []}
    for row in result.rows:
        target = ("reference before out_proj" if row.name == "wrapper" else "batched reference") if row.compared \
            else "—"
        agrees = "—" if row.within_tolerance is None else ("yes" if row.within_tolerance else "NO")
        equivalence["data"].append([
            row.name, target, "—" if row.max_abs_diff is None else f"{row.max_abs_diff:.3e}",
            "—" if row.max_rel_diff is None else f"{row.max_rel_diff:.3e}", f"{row.atol:g}", agrees, row.why])
    parameters = {"headers": ["implementation", "parameters", "formula"],
                  "data": [[row.name, f"{row.parameters:,}", row.parameter_formula] for row in result.rows]}
    agreeing = [r.name for r in result.rows if r.within_tolerance]
    summary = (f"{len(agreeing)} of {sum(r.compared for r in result.rows)} compared implementations agree with "
               f"the reference within the {dtype} tolerance on {describe(chosen)} (input {B} × {T} × {d}, "
               f"{h} heads of width {d // h}, seed {seed}). Dropout is 0 here: dropout draws random numbers, so "
               "with it on no two implementations could agree.")
    grid = None
    if T <= MAX_MAP_T:
        names = [n for n in result.head_maps]
        grid = plots.heatmap_grid([[result.head_maps[n][i] for i in range(h)] for n in names], names,
                                  [f"head {i}" for i in range(h)], title="Per-head attention maps (batch item 0)")
    else:
        summary += f"\n\nPer-head maps are drawn for T ≤ {MAX_MAP_T}."
    return summary, equivalence, parameters, grid


def run_timing(ctx: AppContext, embedding_dim, heads_num, batch, dtype, device, max_len, progress=None):
    """Plain handler: (timing figure, memory figure, Markdown) for the sweep over T."""
    d, h, _, B, _, torch_dtype, chosen = _settings(embedding_dim, heads_num, 1, batch, 0, dtype, device)
    max_len = checks.whole_number(max_len, "largest T", 16, MAX_T)
    lengths = [T for T in SWEEP_LENGTHS if T <= max_len]
    names = [n for n, impl in IMPLEMENTATIONS.items() if impl.unsupported_reason(d, d, h) is None]

    def report(done, total, label):
        if progress is not None:
            progress(done / total, desc=f"timing {label}")

    records = time_implementations(names, d, d, h, lengths, B, chosen, torch_dtype, progress=report)
    timing = go.Figure()
    memory = go.Figure()
    for name in names:
        mine = [r for r in records if r.name == name]
        timing.add_trace(go.Scatter(x=[r.seq_len for r in mine], y=[r.forward_ms for r in mine],
                                    name=f"{name} forward", mode="lines+markers"))
        timing.add_trace(go.Scatter(x=[r.seq_len for r in mine], y=[r.forward_backward_ms for r in mine],
                                    name=f"{name} fwd+bwd", mode="lines+markers", line=dict(dash="dot")))
        memory.add_trace(go.Scatter(x=[r.seq_len for r in mine], y=[(r.peak_memory_bytes or 0) / 2**20 for r in mine],
                                    name=name, mode="lines+markers"))
    timing.update_layout(title=f"Median time vs T on {describe(chosen)}", xaxis_type="log", yaxis_type="log",
                         xaxis_title="T", yaxis_title="ms", height=420)
    estimate = any(r.memory_is_estimate for r in records)
    memory.update_layout(title="Attention-matrix memory vs T" + (" (estimate)" if estimate else " (measured peak)"),
                         xaxis_type="log", yaxis_type="log", xaxis_title="T", yaxis_title="MiB", height=360)
    backends = sorted({f"{r.name}: {r.sdpa_backend}" for r in records if r.name in ("sdpa", "torch_mha")})
    notes = (f"Medians after warm-up, batch {B}, embedding {d}, {h} heads, {dtype}. SDPA backend: "
             f"{'; '.join(backends) or 'n/a'}. "
             + ("On this device memory is the size of the (B, h, T, T) scores and weights, computed, not measured."
                if estimate else "Memory is the measured peak above the allocation before each call."))
    return timing, memory, notes


def build(ctx: AppContext) -> None:
    gr.Markdown(
        "Multi-head attention written seven ways. With the same weights, the five that can express the same "
        "function agree to within rounding; `wrapper` has no output projection, and `sliced_heads` is a "
        "different, smaller model. Then see what each costs as the sequence grows."
    )
    with gr.Row():
        embedding_dim = gr.Number(64, label="embedding_dim", precision=0, minimum=1)
        heads_num = gr.Number(4, label="heads_num", precision=0, minimum=1)
        seq_len = gr.Number(16, label="T", precision=0, minimum=1, maximum=MAX_T)
        batch = gr.Number(2, label="batch", precision=0, minimum=1)
        seed = gr.Number(0, label="seed", precision=0, minimum=0)
    with gr.Row():
        qkv_bias = gr.Checkbox(False, label="qkv bias")
        dtype = gr.Radio(list(DTYPES), value="fp32", label="dtype")
        device = gr.Dropdown(["auto", "cpu", "cuda", "mps"], value="auto", label="device")
        gpt2 = gr.Button("GPT-2 small preset")
        run = gr.Button("Compare", variant="primary")
    summary = gr.Markdown(label="summary")
    equivalence = gr.Dataframe(label="Equivalence after weight transplant", interactive=False, wrap=True,
                               column_widths=["11%", "15%", "10%", "9%", "7%", "7%", "41%"])
    parameters = gr.Dataframe(label="Parameters", interactive=False)
    grid = gr.Plot(label="Per-head attention maps")
    with gr.Accordion("Cost curves", open=False):
        with gr.Row():
            max_len = gr.Number(1024, label="largest T", precision=0, minimum=16, maximum=MAX_T)
            time_button = gr.Button("Time them")
        timing_plot = gr.Plot(label="time")
        memory_plot = gr.Plot(label="memory")
        timing_notes = gr.Markdown(label="timing notes")
    with gr.Accordion("Source code (the module that ran)", open=False):
        which = gr.Dropdown(list(IMPLEMENTATIONS), value="batched", label="implementation")
        code = gr.Code(source_of("batched"), language="python", label="source")

    def timing(embedding_dim, heads_num, batch, dtype, device, max_len, progress=gr.Progress()):
        return run_timing(ctx, embedding_dim, heads_num, batch, dtype, device, max_len, progress)

    def show_source(name):
        if name not in IMPLEMENTATIONS:
            raise ValueError(f"unknown implementation {name!r}; choose one of {', '.join(IMPLEMENTATIONS)}")
        return source_of(name)

    inputs = [embedding_dim, heads_num, seq_len, batch, seed, qkv_bias, dtype, device]
    run.click(bound(run_comparison, ctx), inputs, [summary, equivalence, parameters, grid],
              api_name="compare")
    gpt2.click(lambda: (GPT2_SMALL["embedding_dim"], GPT2_SMALL["heads_num"], GPT2_SMALL["seq_len"],
                        GPT2_SMALL["batch"], GPT2_SMALL["qkv_bias"]), None,
               [embedding_dim, heads_num, seq_len, batch, qkv_bias], api_name="compare_gpt2_preset",
               api_visibility="private")
    time_button.click(friendly(timing), [embedding_dim, heads_num, batch, dtype, device, max_len],
                      [timing_plot, memory_plot, timing_notes], api_name="compare_timing",
                      concurrency_id="timing", concurrency_limit=1)
    which.change(friendly(show_source), which, code, api_name="compare_source")
