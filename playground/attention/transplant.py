"""Copy a batched reference layer's weights into another implementation so both compute the same function.

Only the layout changes, never a number, and each implementation knows its own layout: its
``load_reference`` does the copying (heads_list and wrapper take per-head row slices, fused_qkv interleaves
q, k, v head by head, torch_mha stacks them into ``in_proj_weight``, sdpa has the reference's own layout,
sliced_heads refuses). This module only checks what it is given and hands over.
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.batched import BatchedAttention


def transplant(reference: BatchedAttention, target_name: str, target_module: nn.Module) -> nn.Module:
    """Overwrite ``target_module``'s weights with the reference's, in place; returns ``target_module``.

    Afterwards the target computes what its class's ``compared_with`` says: the reference's output, or its
    context vectors before out_proj. Raises ValueError for an implementation that cannot take the weights
    (sliced_heads), an unknown name or mismatched sizes; TypeError for a module of the wrong class.
    """
    from playground.attention import checked  # the registry imports this module, so look it up when called

    if not isinstance(reference, BatchedAttention):
        raise TypeError(f"the reference must be a BatchedAttention ('batched'), got {type(reference).__name__}")
    with torch.no_grad():
        checked(target_name, target_module).load_reference(reference)
    return target_module
