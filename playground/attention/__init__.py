"""The family of causal multi-head attention implementations behind the Compare tab, and their registry.

Each implementation lives in its own module, an ``AttentionImplementation`` (base.py) that carries what it
knows about itself: title, why it differs, what it is compared with, its parameter formula, the sizes it needs,
how it loads the reference's weights and its attention backend. Each maps (B, T, d_in) -> (B, T, d_out), where
``d_out`` is the total width and every one of the ``num_heads`` heads has width ``d_out // num_heads``.
``batched`` is the reference. This package knows nothing about timing (costs.py), plotting or the UI.
Adding an implementation is one new module and one line in ``FAMILY``.

    layer = build("fused_qkv", d_in=64, d_out=64, num_heads=4, context_length=128)
    layer(torch.randn(2, 16, 64)).shape -> (2, 16, 64)
"""

from __future__ import annotations

import inspect

import torch
from torch import nn

from playground.attention.base import AttentionImplementation
from playground.attention.batched import BatchedAttention
from playground.attention.fused_qkv import FusedQKVAttention
from playground.attention.heads_list import HeadsListAttention
from playground.attention.sdpa import SDPAAttention
from playground.attention.sliced_heads import SlicedHeadsAttention
from playground.attention.torch_mha import TorchMHAAttention
from playground.attention.transplant import transplant
from playground.attention.wrapper import MultiHeadAttentionWrapper

FAMILY: tuple[type[AttentionImplementation], ...] = (  # in the order the Compare tab lists them
    MultiHeadAttentionWrapper,
    HeadsListAttention,
    BatchedAttention,
    FusedQKVAttention,
    SlicedHeadsAttention,
    SDPAAttention,
    TorchMHAAttention,
)
IMPLEMENTATIONS: dict[str, type[AttentionImplementation]] = {cls.name: cls for cls in FAMILY}  # name -> class
REFERENCE = BatchedAttention.name

# (atol, rtol) per dtype, the ONE table the tests, the equivalence check and the app use: two implementations
# agree when every element has |actual - expected| <= atol + rtol·|expected| (torch.testing.assert_close's rule).
# They sum in different orders, so they differ by rounding only: on CPU, for d up to 1024 and T up to 1024, the
# largest differences were 2.5e-7 (fp32), 1e-3 (fp16) and 8e-3 (bf16) against values near 1, at most a quarter of
# these, while swapping two heads' queries moves outputs by 0.1 or more. bf16's also covers a bf16 layer against
# its own fp32 self.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-7),
    torch.float32: (1e-5, 1e-4),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (3e-2, 3e-2),
}


def tolerance_for(dtype: torch.dtype) -> tuple[float, float]:
    """(atol, rtol) for comparing two implementations' outputs computed in ``dtype``."""
    if dtype not in TOLERANCES:
        raise ValueError(f"no tolerance defined for {dtype}; choose one of {', '.join(map(str, TOLERANCES))}")
    return TOLERANCES[dtype]


def implementation(name: str) -> type[AttentionImplementation]:
    """The registered class called ``name``; ValueError naming the choices otherwise."""
    if name not in IMPLEMENTATIONS:
        raise ValueError(f"unknown attention implementation {name!r}: choose one of {', '.join(IMPLEMENTATIONS)}")
    return IMPLEMENTATIONS[name]


def build(name, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False) -> AttentionImplementation:
    """A fresh causal attention layer ``name`` mapping (B, T, d_in) -> (B, T, d_out); seed torch first to repeat it."""
    cls = implementation(name)
    sizes = {"d_in": d_in, "d_out": d_out, "num_heads": num_heads, "context_length": context_length}
    for label, value in sizes.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{label} must be a positive integer, got {value!r}")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout}")
    cls.check_sizes(d_in, d_out, num_heads)
    return cls(d_in=d_in, d_out=d_out, num_heads=num_heads, context_length=context_length, dropout=dropout,
               qkv_bias=qkv_bias)


def checked(name: str, module: nn.Module) -> AttentionImplementation:
    """``module`` itself if it is an instance of the class registered as ``name``; TypeError otherwise."""
    cls = implementation(name)
    if not isinstance(module, cls):
        raise TypeError(f"{name!r} expects a {cls.__name__}, got {type(module).__name__}")
    return module


def head_weights(name: str, module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Each head's attention weights for input x (B, T, d_in): (B, h, T, T), rows summing to 1.

    Computed with dropout off and without gradients, each implementation its own way (recomputed from its
    weights, a return-weights path, or ``need_weights=True`` for torch_mha); equivalent implementations give
    the same maps once they share the reference's weights.
    """
    module = checked(name, module)
    was_training = module.training
    module.eval()
    try:
        with torch.no_grad():
            return module.attention_weights(x)
    finally:
        module.train(was_training)


def source_of(name: str) -> str:
    """The source code of the module file that implements ``name`` (what actually runs)."""
    return inspect.getsource(inspect.getmodule(implementation(name)))


__all__ = [
    "FAMILY",
    "IMPLEMENTATIONS",
    "REFERENCE",
    "TOLERANCES",
    "AttentionImplementation",
    "build",
    "checked",
    "head_weights",
    "implementation",
    "source_of",
    "tolerance_for",
    "transplant",
]
