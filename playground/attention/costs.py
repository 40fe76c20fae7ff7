"""What attention costs: a memory estimate, a budget check, a time estimate, and a timing sweep.

Memory grows with T²: the explicit implementations hold a (B, h, T, T) score matrix and the same-shaped
attention weights, e.g. batch 2, 4 heads, T 1024, fp32 -> 2·4·1024·1024·4 bytes = 32 MiB each, 64 MiB both.
Fused ``scaled_dot_product_attention`` backends (flash, memory-efficient, cuDNN) never store them; each
implementation says which backend it runs (its ``backend(x)``). A whole request's memory (every part, measured
against real peaks) is ``playground.budget.compare_cost`` / ``timing_cost``.

Time is estimated before a request starts, from its shapes. One forward costs its matrix products
(``matmul_flops``: the four projections, QKᵀ and weights·V) at the device's matmul rate, plus a fixed time
per (B, h, T, T) score for the scaling, mask and softmax, which are memory-bound; backward costs twice the
forward. A sweep's cell runs a warm-up and at least MIN_REPEATS repeats of forward and forward + backward,
and at most REPEAT_BUDGET_S more for cheap cells. The CPU figures were measured on this project's 2-core CPU
while two other test runs shared it, and taken as they came (a quiet CPU is about 5x faster): the default
sweep's fused sdpa cells ran their matrix products at about 22 GFLOP/s (15 assumed), and the explicit
implementations spent about 21 ns more per score (20 assumed); bf16 ran about 5.5x slower than fp32.
The default sweep (embedding 64, 4 heads, batch 2, T 16 to 1024) is estimated at 34 s; it took 18 s then
with 1 thread and 40 s with 2 (3.4 s on the quiet CPU). With torch's threads spinning on a CPU busy with other
work, a sweep can take several times longer than the estimate (the default one once took 153 s).
This module times and measures; it knows nothing about plotting or the UI (``progress`` is a plain callback).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch

from playground.attention import build, implementation
from playground.attention.base import sdpa_backend
from playground.budget import container_limit

DEFAULT_CAP_BYTES = 4 * 1024**3  # never plan more than this for the attention matrices, whatever the device has
SWEEP_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)  # the Compare tab's default timing sweep over T
DEVICE_SPEEDS = {  # (matmul FLOP/s, seconds per (B, h, T, T) score in one forward): conservative, not peaks
    "cpu": (1.5e10, 2e-8),  # measured: see the module docstring
    "cuda": (1e12, 2e-10),  # not measured here (no GPU): well below a small GPU's fp32 rate and bandwidth
    "mps": (2e11, 1e-9),  # not measured here
}
MIN_REPEATS, MAX_REPEATS, REPEAT_BUDGET_S = 3, 15, 0.04  # _auto_repeats' bounds
CELL_OVERHEAD_S = 0.02  # building inputs, Python's own work per call
CPU_HALF_SLOWDOWN = 6  # bf16 sweep on this CPU: 176 s against 32 s in fp32 (embedding 128, 8 heads, batch 2)


def _as_dtype(dtype: torch.dtype | str) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype), None)
    if not isinstance(resolved, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}: use e.g. 'float32' or 'bfloat16'")
    return resolved


def _human(num_bytes: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if num_bytes < 1024 or unit == "GiB":
            return f"{num_bytes:.0f} {unit}" if unit == "bytes" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    return f"{num_bytes:.1f} GiB"


def estimate_attention_bytes(
    batch: int, heads: int, T: int, dtype: torch.dtype | str, materialized: bool = True
) -> int:
    """Bytes of the attention matrices one forward pass keeps for the backward pass.

    Counts the (B, h, T, T) scores and the (B, h, T, T) softmax weights, nothing else (no parameters, inputs,
    q/k/v or outputs): batch 2, 4 heads, T 1024, fp32 -> 2 · 2·4·1024·1024 · 4 bytes = 64 MiB.
    With ``materialized=False`` (a fused sdpa backend) only the per-row softmax statistics remain: (B, h, T) fp32.
    """
    if materialized:
        return 2 * batch * heads * T * T * _as_dtype(dtype).itemsize
    return batch * heads * T * 4


def _available_bytes(device: torch.device) -> tuple[int | None, str]:
    """Free memory on ``device``: CUDA's own count, else the machine's available RAM, but never more than this
    process's container allows (a container sees the host's free memory, not its own limit)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free, "free CUDA memory"
    try:
        available, source = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "available RAM"
    except (ValueError, OSError, AttributeError):
        available, source = None, ""
    limit = container_limit()
    if limit is not None and (available is None or limit < available):
        return limit, "the container's memory limit"
    return available, source


def check_fits(
    batch: int,
    heads: int,
    T: int,
    dtype: torch.dtype | str,
    device: torch.device | str = "cpu",
    cap_bytes: int | None = DEFAULT_CAP_BYTES,
) -> int:
    """Return the estimate of ``estimate_attention_bytes``, or raise ValueError if it exceeds the budget.

    The budget is the smaller of ``cap_bytes`` (None: no cap) and the device's free memory where it can be read.
    """
    estimate = estimate_attention_bytes(batch, heads, T, dtype)
    budget, source = (cap_bytes, "the cap") if cap_bytes is not None else (None, "")
    available, available_source = _available_bytes(torch.device(device))
    if available is not None and (budget is None or available < budget):
        budget, source = available, available_source
    if budget is not None and estimate > budget:
        raise ValueError(
            f"attention at T={T} needs about {_human(estimate)} for its (B, h, T, T) scores and weights "
            f"({batch}×{heads}×{T}×{T} × 2 × {_as_dtype(dtype).itemsize} bytes), over the budget of "
            f"{_human(budget)} ({source}): lower T, the batch or the number of heads"
        )
    return estimate


def matmul_flops(d_in: int, d_out: int, T: int, batch: int) -> int:
    """FLOPs of one forward's matrix products: the Q, K, V projections (2·B·T·d_in·3·d_out), out_proj
    (2·B·T·d_out²), QKᵀ and weights·V (4·B·T²·d_out). d 64, T 1024, batch 2 -> 50 M + 17 M + 537 M = 604 M."""
    return 2 * batch * T * d_in * 3 * d_out + 2 * batch * T * d_out * d_out + 4 * batch * T * T * d_out


def forward_seconds(d_in: int, d_out: int, num_heads: int, T: int, batch: int,
                    device: torch.device | str = "cpu", dtype: torch.dtype | str = torch.float32) -> float:
    """Estimated time of one forward: its matrix products at the device's rate plus the time of its scores
    (CPU_HALF_SLOWDOWN times that for bf16 or fp16 on a CPU, which has no fast kernels for them here)."""
    kind = torch.device(device).type
    rate, per_score = DEVICE_SPEEDS.get(kind, DEVICE_SPEEDS["cpu"])
    slowdown = CPU_HALF_SLOWDOWN if kind == "cpu" and _as_dtype(dtype).itemsize == 2 else 1
    return slowdown * (matmul_flops(d_in, d_out, T, batch) / rate + batch * num_heads * T * T * per_score)


def sweep_seconds(implementations: int, d_in: int, d_out: int, num_heads: int, seq_lens: Sequence[int], batch: int,
                  device: torch.device | str = "cpu", backward: bool = True,
                  dtype: torch.dtype | str = torch.float32) -> float:
    """How long ``time_implementations`` should take for these shapes, estimated before it starts.

    Each cell runs a warm-up and at least MIN_REPEATS repeats of the forward (and of forward + backward, three
    forwards' work); a cheap cell repeats up to MAX_REPEATS times, which adds at most REPEAT_BUDGET_S.
    """
    per_call = 4 if backward else 1  # forward + (forward + backward = 3 forwards)
    seconds = sum((1 + MIN_REPEATS) * per_call * forward_seconds(d_in, d_out, num_heads, T, batch, device, dtype)
                  + REPEAT_BUDGET_S + CELL_OVERHEAD_S for T in seq_lens)
    return implementations * seconds


def compare_seconds(implementations: int, d_in: int, d_out: int, num_heads: int, T: int, batch: int,
                    device: torch.device | str = "cpu", maps: bool = False,
                    dtype: torch.dtype | str = torch.float32) -> float:
    """How long ``equivalence.compare`` should take: a forward of each implementation and two of the reference
    (its output and its context vectors), and one more each for the per-head maps when they are drawn."""
    forwards = (implementations + 2) * (2 if maps else 1)
    return forwards * forward_seconds(d_in, d_out, num_heads, T, batch, device, dtype) \
        + implementations * CELL_OVERHEAD_S


@dataclass(frozen=True)
class TimingRecord:
    """One implementation at one sequence length; times are medians in milliseconds."""

    name: str
    seq_len: int
    forward_ms: float
    forward_backward_ms: float | None  # None when the sweep ran without backward
    peak_memory_bytes: int | None
    memory_is_estimate: bool  # True on CPU/MPS: estimate_attention_bytes, not a measurement
    sdpa_backend: str  # "flash (cpu)", "math", "efficient", ... ; "none (explicit softmax)"; "unknown"
    repeats: int

    def as_dict(self) -> dict:
        return asdict(self)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def _timed(fn: Callable[[], None], device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    fn()
    _sync(device)
    return time.perf_counter() - start


def _auto_repeats(seconds_per_call: float, budget_s: float = 0.04, most: int = 15) -> int:
    """Repeat cheap calls more, dear ones less: at least 3 (a real median), up to ``most``, to fill ``budget_s``."""
    return max(3, min(most, int(budget_s / max(seconds_per_call, 1e-6))))


def time_implementations(
    names: Sequence[str],
    d_in: int,
    d_out: int,
    num_heads: int,
    seq_lens: Sequence[int],
    batch: int,
    device: torch.device | str = "cpu",
    dtype: torch.dtype | str = torch.float32,
    warmup: int | None = None,
    repeats: int | None = None,
    backward: bool = True,
    progress: Callable[[int, int, str], None] | None = None,
    cap_bytes: int | None = DEFAULT_CAP_BYTES,
    seed: int = 0,
    threads: int | None = None,
) -> list[TimingRecord]:
    """Time each implementation's forward (no grad) and forward+backward at each sequence length.

    ``warmup``/``repeats`` None: 1 warm-up call, then as many repeats as fit a small time budget (fewer at
    large T). ``progress(done, total, label)`` is called after each (implementation, T) cell. Layers are
    seeded and kept in training mode (dropout 0), so torch_mha runs its sdpa path rather than its eval-only
    fast path. Peak memory is measured on CUDA (peak above what was allocated before the call); elsewhere it
    is ``estimate_attention_bytes``. ``threads`` sets torch's CPU thread count (process-wide, so also for any
    other thread, such as a training job) for the sweep only, restoring it afterwards: on a CPU shared with
    other busy processes 1 thread times far more steadily than several.
    Raises ValueError up front for an unknown name, unsupported sizes or an attention matrix over the budget.
    """
    device, dtype = torch.device(device), _as_dtype(dtype)
    for name in names:
        implementation(name).check_sizes(d_in, d_out, num_heads)
    if not seq_lens:
        raise ValueError("give at least one sequence length")
    check_fits(batch, num_heads, max(seq_lens), dtype, device, cap_bytes)
    previous_threads = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        records, total = [], len(names) * len(seq_lens)
        generator = torch.Generator().manual_seed(seed)
        for name in names:
            torch.manual_seed(seed)
            module = build(name, d_in, d_out, num_heads, max(seq_lens)).to(device=device, dtype=dtype)
            module.train()
            for T in seq_lens:
                x = torch.randn(batch, T, d_in, generator=generator).to(device=device, dtype=dtype)
                grad_out = torch.randn(batch, T, d_out, generator=generator).to(device=device, dtype=dtype)
                records.append(_time_cell(name, module, x, grad_out, num_heads, warmup, repeats, backward))
                if progress is not None:
                    progress(len(records), total, f"{name} T={T}")
        return records
    finally:
        torch.set_num_threads(previous_threads)


def _time_cell(name, module, x, grad_out, num_heads, warmup, repeats, backward) -> TimingRecord:
    """Time one layer on one input: warm up, pick the repeat count, take medians."""
    device = x.device

    def forward():
        with torch.no_grad():
            module(x)

    def forward_backward():
        module.zero_grad(set_to_none=True)
        module(x).backward(grad_out)

    calls = (forward, forward_backward) if backward else (forward,)
    warmup_times = [min(_timed(call, device) for _ in range(max(1, warmup or 1))) for call in calls]
    count = repeats if repeats is not None else _auto_repeats(sum(warmup_times))
    medians = [1000 * statistics.median([_timed(call, device) for _ in range(count)]) for call in calls]
    backend = module.backend(x)
    batch, T, _ = x.shape
    return TimingRecord(
        name=name,
        seq_len=T,
        forward_ms=medians[0],
        forward_backward_ms=medians[1] if backward else None,
        sdpa_backend=backend,
        repeats=count,
        **_peak_memory(calls[-1], device, batch, num_heads, T, x.dtype, backend),
    )


def _peak_memory(call, device, batch, heads, T, dtype, backend) -> dict:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        baseline = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        call()
        torch.cuda.synchronize(device)
        return {"peak_memory_bytes": torch.cuda.max_memory_allocated(device) - baseline, "memory_is_estimate": False}
    fused = backend.split(" ")[0] in ("flash", "efficient", "cudnn")
    estimate = estimate_attention_bytes(batch, heads, T, dtype, materialized=not fused)
    return {"peak_memory_bytes": estimate, "memory_is_estimate": True}


__all__ = [
    "DEFAULT_CAP_BYTES",
    "TimingRecord",
    "check_fits",
    "compare_seconds",
    "estimate_attention_bytes",
    "forward_seconds",
    "matmul_flops",
    "sweep_seconds",
    "sdpa_backend",
    "time_implementations",
]
