"""Copy a batched reference layer's weights into another implementation so both compute the same function.

Only the layout changes, never a number: heads_list and wrapper get the per-head row slices of W_query,
W_key, W_value (d_out 4, 2 heads -> head 0 gets rows 0-1, head 1 rows 2-3); fused_qkv gets them interleaved
head by head [q_0 k_0 v_0 | q_1 k_1 v_1 | ...]; torch_mha gets them stacked into ``in_proj_weight``
[all q | all k | all v]; sdpa has the reference's own layout. The wrapper has no output projection, so it
matches the reference *before* out_proj. sliced_heads is a different model and is refused.
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.batched import BatchedAttention
from playground.attention.fused_qkv import FusedQKVAttention
from playground.attention.heads_list import HeadsListAttention
from playground.attention.sdpa import SDPAAttention
from playground.attention.sliced_heads import SlicedHeadsAttention
from playground.attention.torch_mha import TorchMHAAttention
from playground.attention.wrapper import MultiHeadAttentionWrapper


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _copy(target: nn.Parameter | None, source: torch.Tensor | None, what: str) -> None:
    if (target is None) != (source is None):
        raise ValueError(f"cannot transplant {what}: one layer has a bias and the other does not (qkv_bias differs)")
    if target is None:
        return
    if target.shape != source.shape:
        raise ValueError(f"cannot transplant {what}: shape {tuple(source.shape)} into {tuple(target.shape)}")
    target.copy_(source)


def _per_head(reference: BatchedAttention, linear: nn.Linear) -> tuple[list[torch.Tensor], list[torch.Tensor | None]]:
    """Split a (d_out, d_in) projection into h row blocks of (d_k, d_in), one per head."""
    weights = list(linear.weight.split(reference.head_dim, dim=0))
    biases = list(linear.bias.split(reference.head_dim)) if linear.bias is not None else [None] * len(weights)
    return weights, biases


def _into_heads(reference: BatchedAttention, heads: nn.ModuleList) -> None:
    if len(heads) != reference.num_heads:
        raise ValueError(f"cannot transplant {reference.num_heads} heads into {len(heads)}")
    for role in ("W_query", "W_key", "W_value"):
        weights, biases = _per_head(reference, getattr(reference, role))
        for i, head in enumerate(heads):
            _copy(getattr(head, role).weight, weights[i], f"head {i} {role}.weight")
            _copy(getattr(head, role).bias, biases[i], f"head {i} {role}.bias")


def _into_fused(reference: BatchedAttention, target: FusedQKVAttention) -> None:
    h, d_k = reference.num_heads, reference.head_dim
    if target.num_heads != h:
        raise ValueError(f"cannot transplant {h} heads into {target.num_heads}")
    roles = (reference.W_query, reference.W_key, reference.W_value)
    d_in = reference.W_query.in_features
    # 3 x (d_out, d_in) -> (h, 3, d_k, d_in) -> (3·d_out, d_in): rows q_0 k_0 v_0 q_1 k_1 v_1 ...
    weight = torch.stack([r.weight.view(h, d_k, d_in) for r in roles], dim=1).reshape(3 * h * d_k, d_in)
    _copy(target.qkv.weight, weight, "qkv.weight")
    bias = None
    if reference.W_query.bias is not None:
        bias = torch.stack([r.bias.view(h, d_k) for r in roles], dim=1).reshape(3 * h * d_k)
    _copy(target.qkv.bias, bias, "qkv.bias")
    _copy(target.proj.weight, reference.out_proj.weight, "proj.weight")
    _copy(target.proj.bias, reference.out_proj.bias, "proj.bias")


def _into_torch_mha(reference: BatchedAttention, target: TorchMHAAttention) -> None:
    mha = target.attention
    if mha.num_heads != reference.num_heads:
        raise ValueError(f"cannot transplant {reference.num_heads} heads into {mha.num_heads}")
    roles = (reference.W_query, reference.W_key, reference.W_value)
    _copy(mha.in_proj_weight, torch.cat([r.weight for r in roles]), "in_proj_weight")  # (3·d_out, d_out)
    bias = torch.cat([r.bias for r in roles]) if reference.W_query.bias is not None else None
    _copy(mha.in_proj_bias, bias, "in_proj_bias")
    _copy(mha.out_proj.weight, reference.out_proj.weight, "out_proj.weight")
    _copy(mha.out_proj.bias, reference.out_proj.bias, "out_proj.bias")


def _into_same_layout(reference: BatchedAttention, target: nn.Module) -> None:
    if target.num_heads != reference.num_heads:
        raise ValueError(f"cannot transplant {reference.num_heads} heads into {target.num_heads}")
    for role in ("W_query", "W_key", "W_value", "out_proj"):
        _copy(getattr(target, role).weight, getattr(reference, role).weight, f"{role}.weight")
        _copy(getattr(target, role).bias, getattr(reference, role).bias, f"{role}.bias")


def transplant(reference: BatchedAttention, target_name: str, target_module: nn.Module) -> nn.Module:
    """Overwrite ``target_module``'s weights with the reference's, in place; returns ``target_module``.

    Afterwards heads_list, fused_qkv, sdpa and torch_mha compute the reference's function; wrapper computes
    the reference's context vectors before ``out_proj``. Raises ValueError for sliced_heads (a different
    model), an unknown name or mismatched sizes; TypeError for a module of the wrong class.
    """
    expected = {
        "batched": BatchedAttention,
        "wrapper": MultiHeadAttentionWrapper,
        "heads_list": HeadsListAttention,
        "fused_qkv": FusedQKVAttention,
        "sdpa": SDPAAttention,
        "torch_mha": TorchMHAAttention,
        "sliced_heads": SlicedHeadsAttention,
    }
    if not isinstance(reference, BatchedAttention):
        raise TypeError(f"the reference must be a BatchedAttention ('batched'), got {type(reference).__name__}")
    if target_name not in expected:
        raise ValueError(f"unknown attention implementation {target_name!r}: choose one of {', '.join(expected)}")
    if not isinstance(target_module, expected[target_name]):
        raise TypeError(
            f"{target_name!r} expects a {expected[target_name].__name__}, got {type(target_module).__name__}"
        )
    if target_name == "sliced_heads":
        raise ValueError(
            f"sliced_heads is a different model and cannot take the reference's weights: it has "
            f"{_count(target_module):,} parameters against the reference's {_count(reference):,}, because each "
            "head projects only its d_in/h slice of the features, so no weights make it compute the same function"
        )
    with torch.no_grad():
        if target_name in ("wrapper", "heads_list"):
            _into_heads(reference, target_module.heads)
            if target_name == "heads_list":
                _copy(target_module.out_proj.weight, reference.out_proj.weight, "out_proj.weight")
                _copy(target_module.out_proj.bias, reference.out_proj.bias, "out_proj.bias")
        elif target_name == "fused_qkv":
            _into_fused(reference, target_module)
        elif target_name == "torch_mha":
            _into_torch_mha(reference, target_module)
        else:  # batched, sdpa: the same parameter names and layout
            _into_same_layout(reference, target_module)
    return target_module
