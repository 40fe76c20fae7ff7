"""What every attention implementation says about itself, and the defaults most of them share.

Each implementation is an ``nn.Module`` subclass of ``AttentionImplementation`` and carries, as class
attributes at the top of its class: its registry ``name``, a one-line ``title``, ``why`` its numbers differ
from the reference's at all, whether it can express the reference's function (``equivalent``), what it is
compared with once it holds the reference's weights (``compared_with``), and its parameter formula. Its
methods say which sizes it cannot build (``unsupported_reason``), how it counts its parameters, how it loads
the reference's weights (``load_reference``) and which attention kernel runs (``backend``).
Every constructor takes the book's positional order, ``(d_in, d_out, context_length, dropout, num_heads,
qkv_bias=False)``, so ``MultiHeadAttentionWrapper(d_in, d_out, context_length, 0.0, num_heads=2)`` runs as written
in notebook 001 (``attention.build`` passes keywords). The defaults here are the reference's: batched and sdpa
share them. The maths lives in each module; this one
also holds the helpers that copy weights and ask PyTorch which fused kernel it would pick.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn
from torch.nn.attention import SDPBackend

EXPLICIT_SOFTMAX = "none (explicit softmax)"  # the backend of every implementation that writes softmax out
OUTPUT, CONTEXT = "output", "context"  # what an implementation is compared with: see compared_with

_BACKEND_LABELS = {
    SDPBackend.MATH: "math",
    SDPBackend.FLASH_ATTENTION: "flash",
    SDPBackend.EFFICIENT_ATTENTION: "efficient",
    SDPBackend.CUDNN_ATTENTION: "cudnn",
}


def qkv_parameters(d_in: int, d_out: int, qkv_bias: bool) -> int:
    """W_query, W_key, W_value of (d_out, d_in) each, plus their biases: d_in 768, d_out 768, bias -> 1,771,776."""
    return 3 * d_in * d_out + (3 * d_out if qkv_bias else 0)


def output_projection_parameters(d_out: int) -> int:
    """out_proj, Linear(d_out, d_out) with its bias: d_out 768 -> 590,592."""
    return d_out * d_out + d_out


class AttentionImplementation(nn.Module):
    """A causal multi-head attention layer (B, T, d_in) -> (B, T, d_out) that describes itself.

    Subclasses set ``name``, ``title`` and ``why`` and override what differs from the reference's defaults.
    """

    name: ClassVar[str]  # the registry key, e.g. "batched"
    title: ClassVar[str]  # one line for a learner, e.g. "Batched heads (reference)"
    why: ClassVar[str]  # why its numbers differ from the reference's at all, once it holds the same weights
    equivalent: ClassVar[bool] = True  # can it compute exactly the reference's function?
    # what it is compared with after load_reference: the reference's OUTPUT, its CONTEXT vectors (the heads'
    # outputs side by side, before out_proj), or None: it cannot load the reference's weights at all
    compared_with: ClassVar[str | None] = OUTPUT
    parameter_formula: ClassVar[str] = "3·d_in·d_out (+3·d_out bias) + d_out·d_out + d_out"

    @classmethod
    def parameter_count(cls, d_in: int, d_out: int, num_heads: int, qkv_bias: bool = False) -> int:
        """How many parameters ``parameter_formula`` gives for these sizes (the reference's: q, k, v, out_proj)."""
        return qkv_parameters(d_in, d_out, qkv_bias) + output_projection_parameters(d_out)

    @classmethod
    def unsupported_reason(cls, d_in: int, d_out: int, num_heads: int) -> str | None:
        """Why these sizes cannot be built, or None when they can. Every head gets d_out // num_heads features."""
        if d_out % num_heads != 0:
            return f"d_out ({d_out}) must be divisible by num_heads ({num_heads})"
        return None

    @classmethod
    def check_sizes(cls, d_in: int, d_out: int, num_heads: int) -> None:
        """Raise ValueError with ``unsupported_reason`` when these sizes cannot be built."""
        reason = cls.unsupported_reason(d_in, d_out, num_heads)
        if reason:
            raise ValueError(reason)

    def load_reference(self, reference: nn.Module) -> None:
        """Overwrite this layer's weights with the batched reference's, in place; only the layout may change.

        The default is the reference's own layout and parameter names (W_query, W_key, W_value, out_proj).
        """
        check_heads(reference, self.num_heads)
        for role in ("W_query", "W_key", "W_value", "out_proj"):
            copy_parameter(getattr(self, role).weight, getattr(reference, role).weight, f"{role}.weight")
            copy_parameter(getattr(self, role).bias, getattr(reference, role).bias, f"{role}.bias")

    def backend(self, x: torch.Tensor) -> str:
        """The attention kernel that runs on input x (B, T, d_in): here softmax written out, no fused kernel."""
        return EXPLICIT_SOFTMAX


def parameter_total(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def check_heads(reference: nn.Module, num_heads: int) -> None:
    if num_heads != reference.num_heads:
        raise ValueError(f"cannot transplant {reference.num_heads} heads into {num_heads}")


def copy_parameter(target: nn.Parameter | None, source: torch.Tensor | None, what: str) -> None:
    """Copy ``source`` into ``target`` in place; both None (no bias) is fine, one None is a clear error."""
    if (target is None) != (source is None):
        raise ValueError(f"cannot transplant {what}: one layer has a bias and the other does not (qkv_bias differs)")
    if target is None:
        return
    if target.shape != source.shape:
        raise ValueError(f"cannot transplant {what}: shape {tuple(source.shape)} into {tuple(target.shape)}")
    with torch.no_grad():
        target.copy_(source)


def load_heads(reference: nn.Module, heads: nn.ModuleList) -> None:
    """Give head i rows [i·d_k, (i+1)·d_k) of the reference's W_query, W_key, W_value (d_k = d_out // h).

    d_out 4, 2 heads -> head 0 gets rows 0-1, head 1 rows 2-3.
    """
    check_heads(reference, len(heads))
    for role in ("W_query", "W_key", "W_value"):
        linear = getattr(reference, role)
        weights = linear.weight.split(reference.head_dim, dim=0)  # h x (d_k, d_in)
        biases = linear.bias.split(reference.head_dim) if linear.bias is not None else [None] * len(heads)
        for i, head in enumerate(heads):
            copy_parameter(getattr(head, role).weight, weights[i], f"head {i} {role}.weight")
            copy_parameter(getattr(head, role).bias, biases[i], f"head {i} {role}.bias")


def sdpa_backend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout_p: float = 0.0) -> str:
    """The backend PyTorch's own selector picks for a causal ``scaled_dot_product_attention`` call on q, k, v.

    Asks ``torch._fused_sdp_choice``, the function the dispatcher itself uses; "unknown" if this PyTorch lacks it.
    """
    choose = getattr(torch, "_fused_sdp_choice", None)
    if choose is None:
        return "unknown"
    try:
        label = _BACKEND_LABELS.get(SDPBackend(choose(q, k, v, None, dropout_p, True)), "unknown")
    except (RuntimeError, ValueError, TypeError):
        return "unknown"
    return f"{label} (cpu)" if label == "flash" and q.device.type == "cpu" else label


def sdpa_backend_for(x: torch.Tensor, num_heads: int, head_dim: int) -> str:
    """``sdpa_backend`` for the (B, h, T, d_k) queries, keys and values an input x (B, T, d_in) would give."""
    q = torch.empty(x.shape[0], num_heads, x.shape[1], head_dim, dtype=x.dtype, device=x.device)  # (B, h, T, d_k)
    return sdpa_backend(q, q, q)
