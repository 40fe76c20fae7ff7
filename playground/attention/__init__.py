"""The family of causal multi-head attention implementations behind the Compare tab, and their registry.

Each implementation lives in its own module and maps (B, T, d_in) -> (B, T, d_out), where ``d_out`` is the
total width and every one of the ``num_heads`` heads has width ``d_out // num_heads``. ``batched`` is the
reference; the ``equivalent`` ones compute the same function once given its weights (see transplant.py).
This package knows nothing about timing (costs.py), plotting or the UI.

    layer = build("fused_qkv", d_in=64, d_out=64, num_heads=4, context_length=128)
    layer(torch.randn(2, 16, 64)).shape -> (2, 16, 64)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from playground.attention.batched import BatchedAttention
from playground.attention.fused_qkv import FusedQKVAttention
from playground.attention.heads_list import HeadsListAttention
from playground.attention.sdpa import SDPAAttention
from playground.attention.sliced_heads import SlicedHeadsAttention
from playground.attention.torch_mha import TorchMHAAttention
from playground.attention.transplant import transplant
from playground.attention.wrapper import MultiHeadAttentionWrapper

REFERENCE = "batched"


@dataclass(frozen=True)
class Implementation:
    """One registered implementation: what it is, whether it can express the reference, what it costs."""

    name: str
    title: str
    module_class: type[nn.Module]
    description: str
    equivalent: bool  # can it compute exactly the reference's function (after transplant)?
    parameter_formula: str
    parameter_count: Callable[[int, int, int, bool], int]  # (d_in, d_out, num_heads, qkv_bias) -> count
    requirement: str = ""  # a constraint beyond "d_out divisible by num_heads", in words

    def unsupported_reason(self, d_in: int, d_out: int, num_heads: int) -> str | None:
        """Why these sizes cannot be built, or None when they can."""
        if d_out % num_heads != 0:
            return f"d_out ({d_out}) must be divisible by num_heads ({num_heads})"
        if self.module_class is TorchMHAAttention and d_in != d_out:
            return f"{self.name} needs d_in == d_out (got {d_in} and {d_out})"
        if self.module_class is SlicedHeadsAttention and d_in % num_heads != 0:
            return f"{self.name} needs d_in ({d_in}) divisible by num_heads ({num_heads})"
        return None


def _qkv_parameters(d_in: int, d_out: int, qkv_bias: bool) -> int:
    return 3 * d_in * d_out + (3 * d_out if qkv_bias else 0)


def _output_projection_parameters(d_out: int) -> int:
    return d_out * d_out + d_out


def _reference_count(d_in: int, d_out: int, num_heads: int, qkv_bias: bool = False) -> int:
    return _qkv_parameters(d_in, d_out, qkv_bias) + _output_projection_parameters(d_out)


def _wrapper_count(d_in: int, d_out: int, num_heads: int, qkv_bias: bool = False) -> int:
    return _qkv_parameters(d_in, d_out, qkv_bias)


def _sliced_count(d_in: int, d_out: int, num_heads: int, qkv_bias: bool = False) -> int:
    per_head = 3 * (d_in // num_heads) * (d_out // num_heads)
    return num_heads * per_head + (3 * d_out if qkv_bias else 0) + _output_projection_parameters(d_out)


_REFERENCE_FORMULA = "3·d_in·d_out (+3·d_out bias) + d_out·d_out + d_out"

IMPLEMENTATIONS: dict[str, Implementation] = {
    impl.name: impl
    for impl in (
        Implementation(
            "wrapper",
            "List of heads, no projection",
            MultiHeadAttentionWrapper,
            "Independent causal heads run one after another and concatenated; nothing mixes the heads.",
            False,
            "3·d_in·d_out (+3·d_out bias)",
            _wrapper_count,
        ),
        Implementation(
            "heads_list",
            "List of heads + projection",
            HeadsListAttention,
            "The same independent heads, concatenated, then an output Linear that mixes them.",
            True,
            _REFERENCE_FORMULA,
            _reference_count,
        ),
        Implementation(
            "batched",
            "Batched heads (reference)",
            BatchedAttention,
            "One projection per role for all heads, split with view + transpose, one batched matmul.",
            True,
            _REFERENCE_FORMULA,
            _reference_count,
        ),
        Implementation(
            "fused_qkv",
            "Fused q/k/v projection",
            FusedQKVAttention,
            "One Linear to 3·d_out computes q, k and v together, chunked per head; additive causal mask.",
            True,
            _REFERENCE_FORMULA,
            _reference_count,
        ),
        Implementation(
            "sliced_heads",
            "Heads over feature slices",
            SlicedHeadsAttention,
            "Each head reads only its d_in/h slice of the features: a smaller, different model.",
            False,
            "3·d_in·d_out/h (+3·d_out bias) + d_out·d_out + d_out",
            _sliced_count,
            requirement="d_in divisible by num_heads",
        ),
        Implementation(
            "sdpa",
            "scaled_dot_product_attention",
            SDPAAttention,
            "The batched projections around PyTorch's fused attention kernel (flash / efficient / math).",
            True,
            _REFERENCE_FORMULA,
            _reference_count,
        ),
        Implementation(
            "torch_mha",
            "torch.nn.MultiheadAttention",
            TorchMHAAttention,
            "PyTorch's built-in layer with a causal boolean mask and its own packed in_proj and out_proj.",
            True,
            "3·d_out·d_out (+3·d_out bias) + d_out·d_out + d_out",
            _reference_count,
            requirement="d_in == d_out",
        ),
    )
}


def _implementation(name: str) -> Implementation:
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"unknown attention implementation {name!r}: choose one of {', '.join(IMPLEMENTATIONS)}")
    return IMPLEMENTATIONS[name]


def build(name, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False) -> nn.Module:
    """A fresh causal attention layer ``name`` mapping (B, T, d_in) -> (B, T, d_out); seed torch first to repeat it."""
    impl = _implementation(name)
    sizes = {"d_in": d_in, "d_out": d_out, "num_heads": num_heads, "context_length": context_length}
    for label, value in sizes.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    reason = impl.unsupported_reason(d_in, d_out, num_heads)
    if reason:
        raise ValueError(reason)
    return impl.module_class(
        d_in=d_in,
        d_out=d_out,
        num_heads=num_heads,
        context_length=context_length,
        dropout=dropout,
        qkv_bias=qkv_bias,
    )


def head_weights(name: str, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Each head's attention weights for input x (B, T, d_in): (B, h, T, T), rows summing to 1.

    Computed with dropout off and without gradients, each implementation its own way (recomputed from its
    weights, a return-weights path, or ``need_weights=True`` for torch_mha); equivalent implementations give
    the same maps once they share the reference's weights.
    """
    impl = _implementation(name)
    if not isinstance(module, impl.module_class):
        raise TypeError(f"{name!r} expects a {impl.module_class.__name__}, got {type(module).__name__}")
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            return module.attention_weights(x)
    finally:
        module.train(was_training)


def source_of(name: str) -> str:
    """The source code of the module file that implements ``name`` (what actually runs)."""
    return inspect.getsource(inspect.getmodule(_implementation(name).module_class))


_TOLERANCES = {
    torch.float64: (1e-10, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (3e-2, 3e-2),
}


def tolerance_for(dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for comparing two implementations' outputs computed in ``dtype``."""
    if dtype not in _TOLERANCES:
        raise ValueError(f"no tolerance defined for {dtype}; choose one of {', '.join(map(str, _TOLERANCES))}")
    return _TOLERANCES[dtype]


__all__ = [
    "IMPLEMENTATIONS",
    "REFERENCE",
    "Implementation",
    "build",
    "head_weights",
    "source_of",
    "tolerance_for",
    "transplant",
]
