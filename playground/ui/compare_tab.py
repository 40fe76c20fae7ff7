"""Compare tab: the registered multi-head attention implementations run side by side on the same input, and a
Llama-family checkpoint's own layer computed each way that exists for grouped K/V heads (model.grouped_ways).

Shows where they agree (equivalence after a weight transplant: the reference's weights copied into each),
what they cost (parameters, time and memory against T), each head's map, and the real source of each module.
Everything it says about an implementation (title, why it differs, what it is compared with) comes from that
implementation's class; this module only words and draws it.

Every request knows its cost before it runs: a comparison and a timing sweep estimate their memory
(``budget.compare_cost`` / ``timing_cost``, reserved from the server's budget while they run) and their time
(``costs.compare_seconds`` / ``sweep_seconds``, against PLAYGROUND_MAX_REQUEST_SECONDS), and a refusal says
what to lower and to what. Both run in the long lane; the source viewer and the preset in the fast one.
"""

from __future__ import annotations

import math

import gradio as gr
import plotly.graph_objects as go
import torch
from plotly.colors import qualitative

from playground import budget, checks
from playground.attention import IMPLEMENTATIONS, REFERENCE, source_of
from playground.attention.base import CONTEXT, EXPLICIT_SOFTMAX, OUTPUT
from playground.attention.costs import SWEEP_LENGTHS, compare_seconds, sweep_seconds, time_implementations
from playground.attention.equivalence import compare
from playground.checks import count
from playground.device import available_devices, describe, offered_devices, pick_device, supported_dtypes
from playground.lens import walkthrough
from playground.model import grouped_ways
from playground.text.tokenizer import UnknownCharacterError
from playground.ui import plots
from playground.ui.common import AppContext, checkpoint_dropdown, fold, keep_on_refusal, message_for
from playground.ui.events import once_shown, wire

MAX_T = 1024
MAX_MAP_HEADS = 6  # heads side by side per implementation; 64 made panels a pixel wide (and Plotly refused 52+)
MAX_MAP_T = 48
SHOWN_ID = "compare-run"  # in the page once the tab is opened: its first comparison is made then (events.once_shown)
GPT2_SMALL = dict(embedding_dim=768, heads_num=12, seq_len=64, batch=1, qkv_bias=True)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
COLOURS = qualitative.D3  # 10 distinct colours: one per implementation, in every chart
COMPARED_WITH = {OUTPUT: "the reference's output", CONTEXT: "the reference's context vectors (before out_proj)"}
LEGEND_BELOW = dict(orientation="h", yanchor="top", y=-0.28, xanchor="left", x=0,  # below the axis title "T"
                    entrywidth=105, font=dict(size=11))  # several entries a row, even on a phone
TITLE_LINE = 34  # characters: a chart title longer than this wraps, so a phone's narrow chart shows all of it
TITLE_FONT = dict(size=15)
TITLE_LINE_PX = 20  # the height of a line of a TITLE_FONT title
MARGINS = dict(l=60, r=20, t=90)  # narrow side margins leave a phone's chart some room


def _names(names: list[str]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{name}`" for name in names]
    return " and ".join([", ".join(quoted[:-1]), quoted[-1]]) if len(quoted) > 1 else "".join(quoted)


def intro() -> str:
    """The tab's opening words, counted from the registry so that they match what a comparison reports."""
    family = list(IMPLEMENTATIONS.values())
    compared = [cls for cls in family if cls.compared_with is not None]
    on_context = [cls.name for cls in compared if cls.compared_with == CONTEXT]
    apart = [cls for cls in family if cls.compared_with is None]
    shown = (f"Multi-head attention written {len(family)} ways. Given `{REFERENCE}`'s weights (the reference), the "
             "others should agree with it to within rounding; then see what each costs as the sequence grows.")
    text = (
        "A **weight transplant** copies the reference's weights into another implementation, rearranged into that "
        "implementation's own layout but with no number changed, so whatever difference remains is rounding. "
        f"The {len(compared)} implementations that can take them (the reference among them) are compared, and "
        "with the same weights they agree to within rounding"
    )
    if on_context:
        one = len(on_context) == 1
        text += (
            f"; {_names(on_context)} {'has' if one else 'have'} no **out_proj** (the output projection: the Linear "
            f"after the heads that mixes their outputs), so {'it is' if one else 'they are'} compared with the "
            "reference's **context vectors** (the heads' outputs side by side, before out_proj)"
        )
    text += ". " + " ".join(f"`{cls.name}` is not compared ({cls.why})." for cls in apart)
    text += (
        " A row **agrees** when every |difference| ≤ **atol** + rtol·|reference value|: atol is the absolute "
        "tolerance, rtol the relative one, both looser for the less precise dtypes."
    )
    return shown + "\n\n" + fold(text, "what a weight transplant is, which are compared, what agrees means")


def colour_of(name: str) -> str:
    """The one colour an implementation has in every chart: its place in the registry picks it."""
    return COLOURS[list(IMPLEMENTATIONS).index(name) % len(COLOURS)]


def _settings(embedding_dim, heads_num, seq_len, batch, seed, dtype, device):
    embedding_dim = checks.whole_number(embedding_dim, "embedding_dim", 1, 4096)
    heads_num = checks.whole_number(heads_num, "heads_num", 1, 64)
    if embedding_dim % heads_num:
        raise ValueError(f"embedding_dim {embedding_dim} is not divisible by heads_num {heads_num}")
    seq_len = checks.whole_number(seq_len, "T", 1, MAX_T)
    batch = checks.whole_number(batch, "batch", 1, 64)
    seed = checks.seed(seed)
    if dtype not in DTYPES:
        raise ValueError(f"unknown dtype {checks.shown(dtype)}; choose one of {', '.join(DTYPES)}")
    chosen = pick_device(device)
    if _DTYPE_NAMES[dtype] not in supported_dtypes(chosen):
        raise ValueError(f"{dtype} is not supported on {describe(chosen)}; choose one of "
                         f"{', '.join(k for k, v in _DTYPE_NAMES.items() if v in supported_dtypes(chosen))}")
    return embedding_dim, heads_num, seq_len, batch, seed, DTYPES[dtype], chosen


def offered_dtypes() -> list[str]:
    """The dtype choices some device of this server runs (fp16 only where a GPU or MPS is)."""
    runnable = {name for kind in available_devices() for name in supported_dtypes(kind)}
    return [short for short, name in _DTYPE_NAMES.items() if name in runnable]


def wrapped(title: str, width: int = TITLE_LINE) -> str:
    """A Plotly title broken into lines of at most ``width`` characters (Plotly never wraps a title itself)."""
    lines, line = [], ""
    for word in title.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "<br>".join([*lines, line])


def _largest(fits, candidates) -> int | None:
    """The largest of ``candidates`` (ascending) for which ``fits(candidate)`` holds, or None."""
    best = None
    for candidate in candidates:
        if fits(candidate):
            best = candidate
    return best


def _lower(options: dict[str, int | None], alternative: str = "") -> str:
    """'lower T to at most 512 or the batch to at most 3' from {"T": 512, "the batch": 3}; None: cannot help."""
    said = [f"{name} to at most {value}" for name, value in options.items() if value]
    if not said:
        return f"lower {alternative}" if alternative else "ask for less"
    return "lower " + " or ".join(said) + (f" (or lower {alternative})" if alternative else "")


def _smaller_model(d: int, h: int) -> str:
    """The other sizes a refusal may suggest lowering, with their values: heads_num only when above 1."""
    return f"embedding_dim ({d})" + (f" or heads_num ({h})" if h > 1 else "")


def _refuse_if_over(ctx: AppContext, seconds: float, cost: budget.Cost, what: str, hint) -> None:
    """Refuse a request estimated to run longer than the limit or to need more than the budget; ``hint()`` says
    what to lower (computed only for a refusal)."""
    limit = ctx.limits.max_request_seconds
    if seconds > limit:
        raise ValueError(f"{what} would take about {seconds:.0f} s on this server (estimated from its shapes "
                         f"before starting), over its limit of {limit} s a request "
                         f"(PLAYGROUND_MAX_REQUEST_SECONDS): {hint()}")
    if cost.bytes > ctx.budget.total:
        ctx.budget.check(cost, hint=hint())


def comparison_cost(ctx: AppContext, d: int, h: int, T: int, B: int, dtype: torch.dtype, device) -> budget.Cost:
    """The comparison's memory, refused up front (with what to lower) when it could never fit or run in time."""
    implementations = len(IMPLEMENTATIONS)

    def cost(T=T, B=B):
        return budget.compare_cost(embedding_dim=d, heads_num=h, seq_len=T, batch=B, itemsize=dtype.itemsize,
                                   implementations=implementations, maps=T <= MAX_MAP_T)

    def seconds(T=T, B=B):
        return compare_seconds(implementations, d, d, h, T, B, device, maps=T <= MAX_MAP_T, dtype=dtype)

    def in_time(T=T, B=B):
        return seconds(T, B) <= ctx.limits.max_request_seconds

    def fits(T=T, B=B):
        return cost(T, B).bytes <= ctx.budget.total and in_time(T, B)

    def hint():
        return _lower({"T": _largest(lambda t: fits(T=t), range(1, T)),
                       "the batch": _largest(lambda b: fits(B=b), range(1, B)),
                       "the batch to 1 and T": _largest(lambda t: fits(T=t, B=1), range(1, T)) if B > 1 else None},
                      _smaller_model(d, h))

    _refuse_if_over(ctx, seconds(), cost(),
                    f"Comparing the {implementations} implementations at batch {B}, T {T}, embedding {d}, "
                    f"{count(h, 'head')}", hint)
    return cost()


def run_comparison(ctx: AppContext, embedding_dim, heads_num, seq_len, batch, seed, qkv_bias, dtype, device,
                   request: gr.Request = None):
    """Plain handler: (summary Markdown, equivalence rows, parameter rows, per-head map grid). A long comparison
    holds one of the long places (ctx.long_work) while it runs; a short one none."""
    d, h, T, B, seed, torch_dtype, chosen = _settings(embedding_dim, heads_num, seq_len, batch, seed, dtype, device)
    qkv_bias = checks.flag(qkv_bias, "qkv bias")
    cost = comparison_cost(ctx, d, h, T, B, torch_dtype, chosen)
    seconds = compare_seconds(len(IMPLEMENTATIONS), d, d, h, T, B, chosen, maps=T <= MAX_MAP_T, dtype=torch_dtype)
    with ctx.long_work.hold(ctx.client_of(request), seconds), ctx.budget.reserve(cost):
        result = compare(d, d, h, T, B, seed, qkv_bias, torch_dtype, chosen, with_maps=T <= MAX_MAP_T)
    # the answer first: on a phone the table scrolls sideways, and "agrees" and "max |diff|" were off-screen
    equivalence = {"headers": ["name", "agrees", "max |diff|", "rel. diff", "atol", "compared with",
                               "what it is — why its numbers differ at all"], "data": []}
    for row in result.rows:
        agrees = "—" if row.within_tolerance is None else ("yes" if row.within_tolerance else "NO")
        equivalence["data"].append([
            row.name, agrees, "—" if row.max_abs_diff is None else f"{row.max_abs_diff:.3e}",
            "—" if row.max_rel_diff is None else f"{row.max_rel_diff:.3e}", f"{row.atol:g}",
            COMPARED_WITH.get(row.compared_with, "—"), f"{row.title} — {row.why}"])
    parameters = {"headers": ["implementation", "parameters", "formula"],
                  "data": [[row.name, f"{row.parameters:,}", row.parameter_formula] for row in result.rows]}
    agreeing = [r.name for r in result.rows if r.within_tolerance]
    atol, rtol = result.rows[0].atol, result.rows[0].rtol
    # the verdict and one Look-for line in sight, the rules behind the fold (pictures first: 60 words at most)
    summary = (f"**Look for:** the **agrees** column, and maps that look alike. {len(agreeing)} of "
               f"{sum(r.compared for r in result.rows)} compared implementations agree with the reference within the "
               f"{dtype} tolerance on {describe(chosen)} (input {B} × {T} × {d}, {count(h, 'head')} of width "
               f"{d // h}, seed {seed}).\n\n" + fold(
                   f"A row agrees when every |difference| ≤ atol + rtol·|reference value|, here atol {atol:g} "
                   f"(absolute) and rtol {rtol:g} (relative); **rel. diff** is the largest |difference| over the "
                   "largest |reference value|. Dropout is 0 here: dropout draws random numbers, so with it on no "
                   "two implementations could agree.", "what agrees means"))
    grid = None
    if T <= MAX_MAP_T:
        names = [n for n in result.head_maps]
        drawn = min(h, MAX_MAP_HEADS)
        title = "Per-head attention maps (batch item 0)" + (
            f": heads 0–{drawn - 1} of {h} (the tables compare every head)" if drawn < h else "")
        grid = plots.heatmap_grid([[result.head_maps[n][i] for i in range(drawn)] for n in names], names,
                                  [f"head {i}" for i in range(drawn)], title=title)
        # Plotly sets a title's first line where it is told and runs the others below: the first line's middle
        # two lines from the top (below the chart's label), and room above the heads' names for every line
        title = wrapped(grid.layout.title.text or "")
        lines = title.count("<br>") + 1
        height = grid.layout.height + TITLE_LINE_PX * (lines - 1)
        grid.update_layout(title=dict(text=title, font=TITLE_FONT, yref="container", yanchor="middle",
                                      y=1 - 2 * TITLE_LINE_PX / height), margin_t=TITLE_LINE_PX * (lines + 2) + 20,
                           height=height)
        grid.update_annotations(font_size=11)  # "head 0", "head 1"... side by side on a phone's narrow chart
    else:
        summary += f"\n\nPer-head maps are drawn for T ≤ {MAX_MAP_T}."
    return summary, equivalence, parameters, grid


def sweep_cost(ctx: AppContext, names: list[str], d: int, h: int, lengths: list[int], B: int, dtype: torch.dtype,
               device) -> budget.Cost:
    """The sweep's memory at its largest T, refused up front (with what to lower) when it could never fit or
    would take longer than PLAYGROUND_MAX_REQUEST_SECONDS."""
    def cost(T, B=B):
        return budget.timing_cost(embedding_dim=d, heads_num=h, seq_len=T, batch=B, itemsize=dtype.itemsize)

    def fits(T=max(lengths), B=B):
        swept = [t for t in lengths if t <= T]
        return cost(T, B).bytes <= ctx.budget.total and \
            sweep_seconds(len(names), d, d, h, swept, B, device, dtype=dtype) <= ctx.limits.max_request_seconds

    def hint():
        shorter = [t for t in SWEEP_LENGTHS if t < max(lengths)]
        return _lower({"the largest T": _largest(lambda t: fits(T=t), shorter),
                       "the batch": _largest(lambda b: fits(B=b), range(1, B)),
                       "the batch to 1 and the largest T": _largest(lambda t: fits(T=t, B=1), shorter) if B > 1
                       else None}, _smaller_model(d, h))

    what = (f"Timing {len(names)} implementations at T {lengths[0]} to {lengths[-1]} (batch {B}, embedding {d}, "
            f"{count(h, 'head')})")
    _refuse_if_over(ctx, sweep_seconds(len(names), d, d, h, lengths, B, device, dtype=dtype), cost(max(lengths)),
                    what, hint)
    return cost(max(lengths))


def _timed(d: int, h: int) -> list[str]:
    """The implementations a sweep times: those that can take this shape."""
    return [n for n, impl in IMPLEMENTATIONS.items() if impl.unsupported_reason(d, d, h) is None]


def _priced_timing(ctx: AppContext, embedding_dim, heads_num, batch, dtype, device, max_len):
    """The sweep's settings and its memory, refused up front as ``sweep_cost`` says."""
    d, h, _, B, _, torch_dtype, chosen = _settings(embedding_dim, heads_num, 1, batch, 0, dtype, device)
    max_len = checks.whole_number(max_len, "largest T", 16, MAX_T)
    lengths = [T for T in SWEEP_LENGTHS if T <= max_len]
    names = _timed(d, h)
    return names, d, h, lengths, B, torch_dtype, chosen, sweep_cost(ctx, names, d, h, lengths, B, torch_dtype, chosen)


def timing_refusal(ctx: AppContext, embedding_dim, heads_num, batch, dtype, device, max_len) -> str:
    """Beside "Time them": why the sweep will be refused (the toast says it too, then fades), or "" when it runs."""
    try:
        _priced_timing(ctx, embedding_dim, heads_num, batch, dtype, device, max_len)
    except (ValueError, TypeError) as exc:  # a BudgetError is a ValueError
        return f"**Not timed:** {message_for(exc)}"
    return ""


def largest_timed_length(ctx: AppContext, embedding_dim: int, heads_num: int, batch: int, dtype: str, device) -> int:
    """The largest T of the sweep that this server times for this shape (16, the smallest, when none fits)."""
    def fits(T):
        return not timing_refusal(ctx, embedding_dim, heads_num, batch, dtype, device, T)

    return _largest(fits, SWEEP_LENGTHS) or SWEEP_LENGTHS[0]


def gpt2_preset(ctx: AppContext, dtype, device):
    """GPT-2 small's shape, and the largest T its sweep may time here (1024 would take about 144 s on a CPU)."""
    preset = GPT2_SMALL
    if dtype not in DTYPES:  # a field the visitor emptied: the preset's own default
        dtype = "fp32"
    largest = largest_timed_length(ctx, preset["embedding_dim"], preset["heads_num"], preset["batch"], dtype, device)
    return (preset["embedding_dim"], preset["heads_num"], preset["seq_len"], preset["batch"], preset["qkv_bias"],
            largest)


def run_timing(ctx: AppContext, embedding_dim, heads_num, batch, dtype, device, max_len, progress=None,
               request: gr.Request = None):
    """Plain handler: (timing figure, memory figure, Markdown) for the sweep over T; it holds one of the long places
    (ctx.long_work) while it runs."""
    names, d, h, lengths, B, torch_dtype, chosen, cost = _priced_timing(ctx, embedding_dim, heads_num, batch, dtype,
                                                                        device, max_len)

    def report(done, total, label):
        if progress is not None:
            progress(done / total, desc=f"timing {label}")

    with ctx.long_work.hold(ctx.client_of(request), math.inf), ctx.budget.reserve(cost):
        records = time_implementations(names, d, d, h, lengths, B, chosen, torch_dtype, progress=report)
    timing = go.Figure()
    memory = go.Figure()
    for name in names:  # one colour and one legend entry per implementation: clicking it hides both its lines
        mine = [r for r in records if r.name == name]
        x, colour = [r.seq_len for r in mine], colour_of(name)
        for what, y, dash in (("forward", [r.forward_ms for r in mine], "solid"),
                              ("forward + backward", [r.forward_backward_ms for r in mine], "dot")):
            timing.add_trace(go.Scatter(x=x, y=y, name=name, legendgroup=name, showlegend=dash == "solid",
                                        mode="lines+markers", line=dict(color=colour, dash=dash),
                                        hovertemplate=f"{name} {what}: %{{y:.3f}} ms at T %{{x}}<extra></extra>"))
        memory.add_trace(go.Scatter(x=x, y=[(r.peak_memory_bytes or 0) / 2**20 for r in mine], name=name,
                                    legendgroup=name, mode="lines+markers", line=dict(color=colour)))
    timing.update_layout(title=dict(text=wrapped(f"Median time vs T on {describe(chosen)}"), font=TITLE_FONT),
                         xaxis_type="log", yaxis_type="log", xaxis_title="T", yaxis_title="ms", height=460,
                         margin=MARGINS, legend=LEGEND_BELOW)
    estimate = any(r.memory_is_estimate for r in records)
    memory.update_layout(title=dict(text=wrapped("Attention-matrix memory vs T" + (" (estimate)" if estimate else
                                                                                   " (measured peak)")),
                                    font=TITLE_FONT),
                         xaxis_type="log", yaxis_type="log", xaxis_title="T", yaxis_title="MiB", height=460,
                         margin=MARGINS, legend=LEGEND_BELOW)
    backends = sorted({f"{r.name}: {r.sdpa_backend}" for r in records if r.sdpa_backend != EXPLICIT_SOFTMAX})
    notes = (f"Medians after warm-up, batch {B}, embedding {d}, {count(h, 'head')}, {dtype}; solid lines: forward, "
             f"dotted: forward + backward. SDPA backend: "
             f"{'; '.join(backends) or 'n/a'}. "
             + ("On this device memory is the size of the (B, h, T, T) scores and weights, computed, not measured."
                if estimate else "Memory is the measured peak above the allocation before each call."))
    return timing, memory, notes


CHECKPOINT_TEXT = "To be, or not to be: that is the question."
WAYS_HEADERS = ["way", "max |diff| from repeat_kv", "max |diff| from the model's forward", "median ms",
                "K and V read (bytes)", "weights made (bytes)", "what it is"]


def checkpoint_heads(ctx: AppContext, checkpoint, text, layer) -> tuple[str, dict]:
    """Plain handler: one layer of a Llama-family checkpoint, its own rotated q and grouped k, v computed each way
    that exists for grouped K/V heads (model.grouped_ways) -> (summary Markdown, rows: each way's largest difference
    from repeat_kv's and from the model's own forward, its median time and the bytes it holds)."""
    text = checks.text(text, "The text", ctx.limits.max_text_chars)
    loaded = ctx.checkpoint(checkpoint or "")
    config = loaded.config
    if not config.is_llama:
        raise ValueError(f"{loaded.name} gives every query head its own K/V head, so its heads are computed one way: "
                         "the implementations above compare it. Pick a Llama-family checkpoint (a modern run, "
                         "SmolLM2, Qwen2.5, TinyLlama) to compare the ways of grouped K/V heads")
    layer = checks.index(layer, "layer", config.layers_num, "layers")
    try:
        prepared = walkthrough.prepare_text(text, loaded.tokenizer, config.context_size)
    except UnknownCharacterError as exc:
        raise ValueError(f"{exc}: remove them") from None
    T, h, C = prepared.ids.numel(), config.heads_num, config.embedding_dim
    cost = budget.combined("this comparison", budget.inference_cost(
        parameters=config.parameter_count(), layers_num=config.layers_num, heads_num=h, embedding_dim=C,
        context_size=T, vocabulary_size=config.vocabulary_size), budget.Cost("", (
            ("each way's weights, scores and K/V copies", budget.BYTES_PER_FLOAT * (3 * h * T * T + 4 * h * T * C)),)))
    with ctx.budget.reserve(cost, hint=f"use a shorter text (it is {T} tokens)"):
        ways = grouped_ways.layer_ways(loaded.model, prepared.ids, layer)
    rows = [[row.name, f"{row.max_abs_diff:.3e}", f"{row.max_abs_diff_model:.3e}", f"{row.median_ms:.3f}",
             f"{row.kv_bytes:,}", f"{row.weights_bytes:,}", row.what] for row in ways.rows]
    group = ways.heads_num // ways.kv_heads
    summary = (f"**Look for:** the two difference columns: every way computes layer {layer}'s heads from its own "
               f"weights and rotation, so they agree within rounding; the bytes show what reading the grouped K and V "
               f"as they are saves. {loaded.name}: {ways.heads_num} query heads over {ways.kv_heads} K/V heads "
               f"({group} query heads a K/V head) of {ways.head_size} features, on {count(T, 'token')}.\n\n" + fold(
                   "repeat_kv copies each K/V head for its query heads, as transformers' eager path does, and is the "
                   "reference; the model's forward is llama.py's own (its named point attn.hook_z). A fused kernel "
                   "never makes the (h, T, T) weights; sdpa with enable_gqa and the grouped matmul read each K/V head "
                   f"once, {group}× less than the copies. Times are medians of {grouped_ways.REPEATS} runs on "
                   f"{describe(next(loaded.model.parameters()).device)}.", "how the ways differ"))
    return summary, {"headers": WAYS_HEADERS, "data": rows}


DEFAULTS = (64, 4, 16, 2, 0, False, "fp32", "auto")  # embedding_dim, heads_num, T, batch, seed, bias, dtype, device


def first_comparison(ctx: AppContext, embedding_dim, heads_num, seq_len, batch, seed, qkv_bias, dtype, device,
                     request: gr.Request = None):
    """What the tab shows on arrival: the comparison of the page's values, which are the defaults unless the visitor
    was quick, so computed once per server and then served from memory."""
    values = (embedding_dim, heads_num, seq_len, batch, seed, qkv_bias, dtype, device)
    if values == DEFAULTS:
        return ctx.remembered(("compare", *DEFAULTS), lambda: run_comparison(ctx, *DEFAULTS))
    return run_comparison(ctx, *values, request)


def build(ctx: AppContext) -> None:
    gr.Markdown(intro())
    dim, heads, length, batch_size, seed_value, bias, dtype_name, device_name = DEFAULTS
    with gr.Row():
        embedding_dim = gr.Number(dim, label="embedding_dim")
        heads_num = gr.Number(heads, label="heads_num")
        seq_len = gr.Number(length, label="T")
        batch = gr.Number(batch_size, label="batch")
        seed = gr.Number(seed_value, label="seed")
    with gr.Row():
        qkv_bias = gr.Checkbox(bias, label="qkv bias")
        dtype = gr.Radio(offered_dtypes(), value=dtype_name, label="dtype")
        device = gr.Dropdown(offered_devices(), value=device_name, label="device",
                             info="the devices this server has")
        gpt2 = gr.Button("GPT-2 small preset")
        run = gr.Button("Compare", variant="primary", elem_id=SHOWN_ID)
    summary = gr.Markdown(label="summary")
    equivalence = gr.Dataframe(label="Equivalence after a weight transplant (the reference's weights copied into "
                                     "each)", interactive=False, wrap=True,
                               elem_classes=["playground-table", "wide-table"], max_height=1200,
                               column_widths=["12%", "8%", "11%", "11%", "8%", "16%", "34%"])
    parameters = gr.Dataframe(label="Parameters", interactive=False, wrap=True, elem_classes=["playground-table"],
                              column_widths=["25%", "20%", "55%"])
    grid = gr.Plot(label="Per-head attention maps")
    with gr.Accordion("Cost curves", open=False):
        with gr.Row():
            max_len = gr.Number(largest_timed_length(ctx, dim, heads, batch_size, dtype_name, device_name),
                                label="largest T")
            time_button = gr.Button("Time them")
            timing_refused = gr.Markdown(label="why not timed")  # stays after the toast fades
        timing_plot = gr.Plot(label="time")
        memory_plot = gr.Plot(label="memory")
        timing_notes = gr.Markdown(label="timing notes")
    with gr.Accordion("A checkpoint's own heads: grouped K/V heads, each way", open=False):
        gr.Markdown("A Llama-family checkpoint's query heads share K/V heads. Its own layer, with its real q/k/v "
                    "weights and the rotation, computed each way that exists for grouped heads.")
        with gr.Row():
            own_checkpoint = checkpoint_dropdown(ctx, "compare")
            own_layer = gr.Number(0, label="layer", info="from 0")
            own_button = gr.Button("Compare its heads")
        own_text = gr.Textbox(CHECKPOINT_TEXT, label="Text (the checkpoint reads it)", lines=1)
        own_summary = gr.Markdown(label="the checkpoint's heads")
        own_rows = gr.Dataframe(label="Each way on the checkpoint's layer", interactive=False, wrap=True,
                                elem_classes=["playground-table", "wide-table"],
                                column_widths=["16%", "12%", "12%", "9%", "11%", "11%", "29%"])
    with gr.Accordion("Source code (the module that ran)", open=False):
        which = gr.Dropdown(list(IMPLEMENTATIONS), value=REFERENCE, label="implementation")
        code = gr.Code(source_of(REFERENCE), language="python", label="source")

    def timing(embedding_dim, heads_num, batch, dtype, device, max_len, progress=gr.Progress(),
               request: gr.Request = None):
        return run_timing(ctx, embedding_dim, heads_num, batch, dtype, device, max_len, progress, request)

    def show_source(name):
        if name not in IMPLEMENTATIONS:
            raise ValueError(f"unknown implementation {checks.shown(name)}; choose one of {', '.join(IMPLEMENTATIONS)}")
        return source_of(name)

    inputs = [embedding_dim, heads_num, seq_len, batch, seed, qkv_bias, dtype, device]

    def maps_shown(length):
        """The maps' box only where maps are drawn (T ≤ MAX_MAP_T): GPT-2's preset left an empty box. A step of
        its own after each comparison, so /compare keeps answering the figure itself."""
        try:
            return gr.Plot(visible=checks.whole_number(length, "seq_len") <= MAX_MAP_T)
        except ValueError:
            return gr.skip()

    box = dict(fn=maps_shown, inputs=seq_len, outputs=grid, api_visibility="private", show_progress="hidden")
    # on arrival (as the Attention tab does): the tables and maps filled, not blank until Compare is pressed; a
    # Compare pressed before it is done cancels it, so the defaults never replace the visitor's own comparison
    arrival = once_shown(gr.on(None, None, api_name="compare_arrival", api_visibility="private"), SHOWN_ID,
                         "compare_arrival_shown")  # once the visitor opens the tab: not a comparison per page load
    arrival = wire(arrival.then, first_comparison, ctx, inputs, [summary, equivalence, parameters, grid],
                   api_name="compare_load", api_visibility="private", show_progress="hidden", **ctx.long_lane)
    arrival.success(**box, api_name="compare_load_maps")
    # always_last: a Compare pressed while one runs is done after it (a button's default, "once", dropped it, and the
    # result shown stopped matching the fields)
    compared = [summary, equivalence, parameters, grid]
    comparison = wire(run.click, run_comparison, ctx, inputs, compared, api_name="compare", cancels=[arrival],
                      trigger_mode="always_last", **ctx.long_lane)
    keep_on_refusal(comparison, compared, "compare_refused")
    comparison.success(**box, api_name="compare_maps")
    # the preset compares as well as fills: its tables had kept showing the last comparison until Compare was pressed
    # the preset fills the largest T its sweep may time here: with 1024 its own "Time them" was refused at once
    preset = wire(gpt2.click, gpt2_preset, ctx, [dtype, device],
                  [embedding_dim, heads_num, seq_len, batch, qkv_bias, max_len], api_name="compare_gpt2_preset",
                  api_visibility="private", **ctx.fast_lane)
    preset_comparison = wire(preset.then, run_comparison, ctx, inputs, compared, api_name="compare_gpt2",
                             api_visibility="private", **ctx.long_lane)
    keep_on_refusal(preset_comparison, compared, "compare_gpt2_refused")
    preset_comparison.success(**box, api_name="compare_gpt2_maps")
    timed = [timing_plot, memory_plot, timing_notes]
    timing_inputs = [embedding_dim, heads_num, batch, dtype, device, max_len]
    # first the refusal beside the button (or nothing), then the sweep, whose refusal is the toast
    priced = wire(time_button.click, timing_refusal, ctx, timing_inputs, timing_refused,
                  api_name="compare_timing_check", api_visibility="private", show_progress="hidden", **ctx.fast_lane)
    keep_on_refusal(wire(priced.then, timing, None, timing_inputs, timed, api_name="compare_timing", **ctx.long_lane),
                    timed, "compare_timing_refused")
    wire(which.change, show_source, None, which, code, api_name="compare_source", **ctx.fast_lane)
    own = [own_summary, own_rows]
    keep_on_refusal(wire(own_button.click, checkpoint_heads, ctx, [own_checkpoint, own_text, own_layer], own,
                         api_name="compare_checkpoint_heads", api_visibility="private", trigger_mode="always_last",
                         **ctx.long_lane),
                    own, "compare_checkpoint_heads_refused")
