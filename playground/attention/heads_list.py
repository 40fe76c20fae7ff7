"""A list of independent causal heads, concatenated, then an output projection that mixes them.

This is ``Ch03_MHA_Wrapper`` from the "mha-implementations" bonus notebook of Raschka's *Build a Large Language
Model (From Scratch)*: the chapter 3 wrapper (see wrapper.py, whose ``CausalAttention`` head it reuses) plus
a Linear(d_out, d_out) and dropout. It computes the same function as the batched reference, one head at a
time: h small matrix products instead of one batched product. To hold the reference's weights, head i takes
rows [i·d_k, (i+1)·d_k) of its W_query, W_key and W_value, and out_proj is copied as it is.
This module holds the maths only.
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.base import AttentionImplementation, copy_parameter, load_heads
from playground.attention.wrapper import CausalAttention


class HeadsListAttention(AttentionImplementation):
    """``num_heads`` heads of width ``d_out // num_heads``, concatenated, projected: (B, T, d_in) -> (B, T, d_out)."""

    name = "heads_list"
    title = "A list of heads, then an output projection"
    why = "the same heads one by one, then the projection: per-head matmuls sum in a different order"

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.check_sizes(d_in, d_out, num_heads)  # d_out divisible by num_heads
        self.num_heads = num_heads
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out // num_heads, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        context_vec = torch.cat([head(x) for head in self.heads], dim=-1)  # h x (B, T, d_k) -> (B, T, d_out)
        return self.dropout(self.out_proj(context_vec))  # (B, T, d_out)

    def attention_weights(self, x):
        """Each head's attention weights before dropout: (B, T, d_in) -> (B, h, T, T)."""
        return torch.stack([head.attention_weights(x) for head in self.heads], dim=1)

    def load_reference(self, reference):
        """Head i takes rows [i·d_k, (i+1)·d_k) of the reference's W_query, W_key and W_value; out_proj as it is."""
        load_heads(reference, self.heads)
        copy_parameter(self.out_proj.weight, reference.out_proj.weight, "out_proj.weight")
        copy_parameter(self.out_proj.bias, reference.out_proj.bias, "out_proj.bias")
