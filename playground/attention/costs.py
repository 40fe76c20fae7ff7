"""What attention costs: a memory estimate, a budget check, and a timing sweep over the implementations.

Memory grows with T²: the explicit implementations hold a (B, h, T, T) score matrix and the same-shaped
attention weights, e.g. batch 2, 4 heads, T 1024, fp32 -> 2·4·1024·1024·4 bytes = 32 MiB each, 64 MiB both.
Fused ``scaled_dot_product_attention`` backends (flash, memory-efficient, cuDNN) never store them; each
implementation says which backend it runs (its ``backend(x)``).
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

DEFAULT_CAP_BYTES = 4 * 1024**3  # never plan more than this for the attention matrices, whatever the device has
SWEEP_LENGTHS = (16, 32, 64, 128, 256, 512, 1024)  # the Compare tab's default timing sweep over T


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
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return free, "free CUDA memory"
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "available RAM"
    except (ValueError, OSError, AttributeError):
        return None, ""


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
    "estimate_attention_bytes",
    "sdpa_backend",
    "time_implementations",
]
