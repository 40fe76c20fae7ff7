"""Notebook 001 (causal attention and multi-head attention on "Your journey starts with one step"), under the
notebook's own names: ``CausalAttention``, ``MultiHeadAttentionWrapper``, ``MultiHeadAttention`` and
``count_parameters``.

``CausalAttention`` and ``MultiHeadAttention`` are the attention family's own (playground/attention/wrapper.py
and batched.py): the same signatures, attributes and buffers as the notebook's. ``MultiHeadAttentionWrapper`` is
written here because the notebook's gives *every* head ``d_out`` features, so its output is num_heads · d_out
wide; the Compare tab's wrapper (attention/wrapper.py) splits one ``d_out`` among the heads instead.

    torch.manual_seed(123); MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)(batch)[0, 0]
        -> [-0.4519, 0.2216, 0.4772, 0.1063]                         (the notebook's printed first row)
    count_parameters(MultiHeadAttention(768, 768, 1024, 0.1, 12, qkv_bias=True)) -> 2,362,368
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.batched import BatchedAttention as MultiHeadAttention
from playground.attention.wrapper import CausalAttention

__all__ = ["CausalAttention", "MultiHeadAttention", "MultiHeadAttentionWrapper", "count_parameters"]


class MultiHeadAttentionWrapper(nn.Module):
    """``num_heads`` CausalAttention heads of ``d_out`` features each, concatenated: (B, T, d_in) -> (B, T, h·d_out).

    No output projection, so nothing mixes the heads; 3·d_in·d_out parameters per head (+3·d_out with qkv_bias).
    """

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)  # h x (B, T, d_out) -> (B, T, h·d_out)

    def attention_weights(self, x):
        """Each head's weights before dropout: (B, T, d_in) -> (B, h, T, T)."""
        return torch.stack([head.attention_weights(x) for head in self.heads], dim=1)


def count_parameters(module):
    """Every parameter's element count, summed: Linear(768, 768) with its bias -> 590,592."""
    return sum(p.numel() for p in module.parameters())
