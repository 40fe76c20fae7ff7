"""Dropout with masks a CPU draws two elements at a time; the same ``nn.Dropout`` everywhere else.

``F.dropout`` on a CPU draws one random number per element masked, about 12-15 ns each on two cores: with the
shipped model's dropout 0.1 that was 29% of a training step (benchmarks/dropout_cost.py). ``dropout`` here draws
32 random bits per two elements instead: each 16-bit lane keeps its element when it is at or above a threshold, so
``p`` is rounded to a multiple of 1/65536 (0.1 becomes 0.1000061) and the kept elements are scaled by 1/(1 - that
p), which keeps the expected output equal to the input exactly, as nn.Dropout does. The draws come from torch's
global generator, so ``torch.manual_seed`` repeats them. On CUDA and MPS it is ``F.dropout``: their generators are
already fast. Owns only this; the model decides where dropout goes.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

LEVELS = 1 << 16  # one 16-bit lane per element
LANES = 2  # 16-bit lanes in each 32-bit draw


def rounded_rate(p: float) -> float:
    """The rate the CPU masks drop at: ``p`` rounded to a multiple of 1/65536 (0.1 -> 0.10000610...)."""
    return round(p * LEVELS) / LEVELS


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A boolean CPU mask of ``shape``, True (kept) with probability 1 - rounded_rate(p), independently per element."""
    count = math.prod(shape)
    draws = torch.randint(-(1 << 31), (1 << 31) - 1, ((count + LANES - 1) // LANES,), dtype=torch.int32)
    lanes = draws.view(torch.int16)[:count]  # uniform over -32768..32767 (the one value randint leaves out: 2^-32)
    return (lanes >= round(p * LEVELS) - LEVELS // 2).view(shape)


class _MaskedScale(torch.autograd.Function):
    """x * mask * scale, keeping only the boolean mask for the backward pass (as F.dropout keeps its own)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, kept: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(kept)
        ctx.scale = scale
        return kept.to(x.dtype).mul_(scale).mul_(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (kept,) = ctx.saved_tensors
        return kept.to(grad.dtype).mul_(ctx.scale).mul_(grad), None, None


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """``F.dropout(x, p, training)``, with keep_mask's cheaper draws on a CPU."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or p >= 1.0:
        return F.dropout(x, p, training)
    return _MaskedScale.apply(x, keep_mask(x.shape, p), 1.0 / (1.0 - rounded_rate(p)))


class Dropout(nn.Module):
    """``nn.Dropout(p)`` drawing its masks with ``dropout`` above: the same ``p`` attribute, no parameters."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
