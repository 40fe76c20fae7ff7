"""Which dtype a training step's forward runs in: ``TrainConfig.precision`` resolved for one model on one device.

"float32" and "bfloat16" are taken as asked (device.training_dtype refuses bfloat16 where it cannot run). "auto" is
decided by measurement, not by what the CPU's flags promise: a few forward and backward passes of the run's own
model at its own batch, in float32 and under bfloat16 autocast, alternating; bfloat16 wins only when its fastest
pass beats float32's by BFLOAT16_MARGIN (on an AMD EPYC with AVX-512 BF16, nanoGPT's baby shape trained at 16.3k
tokens/s in bfloat16 against 17.8k in float32). The fastest pass, not the median: on a machine shared with other
work a pass can only be slowed, never sped up, so the fastest of each is the nearest to what the kernels cost. The
answer is remembered for the process, per device, model shape and batch size, so a run measures once and the loop
(train.train) reads the same answer its run recorded.

Knows nothing of runs or files; run.py records the choice (``PrecisionChoice.reason``) in training.json.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from playground.device import describe, supported_dtypes, training_dtype

PROBE_ROUNDS = 3  # timed (float32, bfloat16) pairs after one untimed warm-up pass of each
# A probe pass reads at most this many multiply-adds' worth of windows (6 x parameters x tokens for a forward and
# backward pass), at least one window: nanoGPT's baby shape and the tiny preset probe their whole batch, a 19.8M-
# parameter model at context 256 one window (its whole batch of 64 took 98 s to probe, eight passes, on 2 cores).
PROBE_FLOPS = 2e10
# bfloat16 autocast is taken only when its fastest pass is this share faster than float32's: it rounds the forward,
# and the optimizer's step (float32 either way) dilutes what the pass gains, so a near tie stays float32
BFLOAT16_MARGIN = 0.05
REMEMBERED = 64  # choices kept per process (a server meets many shapes); the oldest is forgotten first

_chosen: OrderedDict[tuple, PrecisionChoice] = OrderedDict()
_lock = threading.Lock()  # one probe at a time: two at once would time each other


@dataclass(frozen=True)
class PrecisionChoice:
    """The forward's dtype and why: ``reason`` is what training.json records under "precision"."""

    dtype: torch.dtype
    reason: str
    float32_seconds: float | None = None  # the fastest measured forward and backward pass of each, where measured
    bfloat16_seconds: float | None = None

    @property
    def name(self) -> str:
        return "bfloat16" if self.dtype == torch.bfloat16 else "float32"

    def to_dict(self) -> dict:
        return {"dtype": self.name, "reason": self.reason}


def resolve_precision(model: nn.Module, device: torch.device | str, precision: str, batch_size: int, *,
                      clock: Callable[[], float] = time.perf_counter) -> PrecisionChoice:
    """``precision`` for ``model`` (already on ``device``) training on batches of ``batch_size``.

    "auto" where bfloat16 autocast is offered (the CPU, CUDA with bfloat16; not MPS, whose autocast support varies):
    measured once per process by ``measure_precision`` with ``clock``, then remembered.
    """
    device = torch.device(device)
    dtype = training_dtype(device, precision)  # refuses an unknown precision, or bfloat16 where it cannot run
    if precision != "auto":
        return PrecisionChoice(dtype, f"{precision}, as asked")
    if device.type not in ("cpu", "cuda") or "bfloat16" not in supported_dtypes(device):
        return PrecisionChoice(torch.float32, f"auto: float32 (bfloat16 autocast is not measured on "
                                              f"{describe(device)})")
    key = (str(device), getattr(model, "config", type(model).__name__), batch_size)
    with _lock:
        if key not in _chosen:
            _chosen[key] = measure_precision(model, device, batch_size, clock=clock)
            while len(_chosen) > REMEMBERED:
                _chosen.popitem(last=False)
        return _chosen[key]


def forget_choices() -> None:
    """Forget every remembered choice (the next "auto" measures again)."""
    with _lock:
        _chosen.clear()


def probe_windows(parameters: int, context_size: int, batch_size: int) -> int:
    """How many of a batch's windows a probe pass reads: its whole batch where that is within PROBE_FLOPS, else as
    many as are (at least one). 0.8M parameters, context 64, batch 12 -> 12; 19.8M, context 256, batch 64 -> 1."""
    return max(1, min(batch_size, int(PROBE_FLOPS // (6 * parameters * context_size))))


def measure_precision(model: nn.Module, device: torch.device, batch_size: int, *,
                      clock: Callable[[], float] = time.perf_counter, rounds: int = PROBE_ROUNDS) -> PrecisionChoice:
    """Time forward and backward passes of ``model`` on random token windows (``batch_size`` of them, or fewer for a
    large model: ``probe_windows``) in float32 and under bfloat16 autocast: one untimed pass of each, then ``rounds``
    pairs (float32 first), each pass read from ``clock`` before and after; bfloat16 when its fastest pass is at least
    BFLOAT16_MARGIN faster than float32's, else float32. float32 passes of 25, 25, 10 ms against bfloat16's 11, 11, 11
    (two float32 passes slowed by other work) -> float32.

    Leaves the model as it found it: its weights (no optimizer step), its gradients, its train/eval mode, and
    torch's random state (dropout draws from it), so a run draws the same masks measured or not.
    """
    config = model.config
    parameters = list(model.parameters())
    gradients = [parameter.grad for parameter in parameters]
    was_training = model.training
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    generator = torch.Generator().manual_seed(0)
    windows = probe_windows(sum(p.numel() for p in parameters), config.context_size, batch_size)
    ids = torch.randint(config.vocabulary_size, (windows, config.context_size + 1), generator=generator)
    x, y = ids[:, :-1].to(device), ids[:, 1:].to(device)

    def one_pass(dtype: torch.dtype) -> None:
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = model(x, y).loss
        loss.backward()
        for parameter in parameters:
            parameter.grad = None
        sync()

    seconds: dict[torch.dtype, list[float]] = {torch.float32: [], torch.bfloat16: []}
    model.train()
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            for dtype in seconds:
                one_pass(dtype)
            for _ in range(rounds):
                for dtype, times in seconds.items():
                    started = clock()
                    one_pass(dtype)
                    times.append(clock() - started)
    finally:
        model.train(was_training)
        for parameter, gradient in zip(parameters, gradients):
            parameter.grad = gradient
    full, half = min(seconds[torch.float32]), min(seconds[torch.bfloat16])
    dtype = torch.bfloat16 if half <= full * (1 - BFLOAT16_MARGIN) else torch.float32
    faster = "bfloat16 autocast" if dtype == torch.bfloat16 else "float32"
    return PrecisionChoice(dtype, f"auto: {faster} measured faster on {describe(device)} (a forward and backward "
                                  f"pass of batch {windows}: float32 {full * 1000:.1f} ms, bfloat16 autocast "
                                  f"{half * 1000:.1f} ms, the fastest of {rounds} each)", full, half)
