"""Multi-head attention with one fused projection for queries, keys and values.

One Linear(d_in, 3·d_out) computes all three roles for all heads in a single matrix product; its output is
read as (B, T, h, 3·d_k) and each head's 3·d_k slice is chunked into q, k, v. So the fused weight's rows
are laid out head by head, [q_0 k_0 v_0 | q_1 k_1 v_1 | ...], not [all q | all k | all v]:
d_out 4, 2 heads -> rows 0-1 q of head 0, 2-3 k of head 0, 4-5 v of head 0, 6-7 q of head 1, ...
(``load_reference`` interleaves the reference's weights that way). The causal mask is additive: 0 where a
query may look, -inf above the diagonal. ``forward(x, return_weights=True)`` also returns the attention
weights. Maths only.
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.base import AttentionImplementation, check_heads, copy_parameter


class FusedQKVAttention(AttentionImplementation):
    """Causal multi-head self-attention with a fused q/k/v projection: (B, T, d_in) -> (B, T, d_out)."""

    name = "fused_qkv"
    title = "One fused projection for q, k and v"
    why = "one fused 3·d_out matmul computes q, k and v together, blocked differently; additive mask"

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.check_sizes(d_in, d_out, num_heads)  # d_out divisible by num_heads
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        additive_mask = torch.full((context_length, context_length), float("-inf")).triu(diagonal=1)
        self.register_buffer("mask", additive_mask)  # 0 on and below the diagonal, -inf above

    def forward(self, x, return_weights=False):
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        if num_tokens > self.context_length:
            raise ValueError(f"{num_tokens} tokens exceed the context length {self.context_length}")
        qkv = self.qkv(x)  # (B, T, 3·d_out)
        qkv = qkv.view(b, num_tokens, self.num_heads, 3 * self.head_dim)  # (B, T, h, 3·d_k)
        qkv = qkv.permute(0, 2, 1, 3)  # (B, h, T, 3·d_k)
        q, k, v = qkv.chunk(3, dim=-1)  # 3 x (B, h, T, d_k)
        scores = q @ k.transpose(-2, -1) / self.head_dim**0.5  # (B, h, T, T)
        scores = scores + self.mask[:num_tokens, :num_tokens]  # the future gets -inf
        attn_weights = torch.softmax(scores, dim=-1)  # (B, h, T, T)
        out = self.dropout(attn_weights) @ v  # (B, h, T, d_k)
        out = out.transpose(1, 2).reshape(b, num_tokens, self.d_out)  # (B, T, d_out)
        out = self.proj(out)
        return (out, attn_weights) if return_weights else out

    def attention_weights(self, x):
        """Each head's attention weights before dropout: (B, T, d_in) -> (B, h, T, T)."""
        return self.forward(x, return_weights=True)[1]

    def load_reference(self, reference):
        """Interleave the reference's W_query, W_key, W_value head by head into ``qkv``; out_proj -> ``proj``."""
        check_heads(reference, self.num_heads)
        h, d_k, d_in = self.num_heads, self.head_dim, self.qkv.in_features
        roles = (reference.W_query, reference.W_key, reference.W_value)
        # 3 x (d_out, d_in) -> (h, 3, d_k, d_in) -> (3·d_out, d_in): rows q_0 k_0 v_0 q_1 k_1 v_1 ...
        weight = torch.stack([r.weight.view(h, d_k, d_in) for r in roles], dim=1).reshape(3 * h * d_k, d_in)
        copy_parameter(self.qkv.weight, weight, "qkv.weight")
        bias = None
        if reference.W_query.bias is not None:  # 3 x (d_out,) -> (h, 3, d_k) -> (3·d_out,)
            bias = torch.stack([r.bias.view(h, d_k) for r in roles], dim=1).reshape(3 * h * d_k)
        copy_parameter(self.qkv.bias, bias, "qkv.bias")
        copy_parameter(self.proj.weight, reference.out_proj.weight, "proj.weight")
        copy_parameter(self.proj.bias, reference.out_proj.bias, "proj.bias")
