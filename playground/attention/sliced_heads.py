"""Multi-head attention where each head sees only its own slice of the input features.

Head i reads features [i·d_in/h, (i+1)·d_in/h) and projects them with its own key, query and value Linears
(d_in/h -> d_out/h, created in that order); the heads' outputs are concatenated and mixed by a
Linear(d_out, d_out). d_in 768, 12 heads -> each head reads 64 features, not 768.
This is a different, smaller model, not another way to compute the batched reference: its q/k/v weights
are h times fewer, and no choice of weights makes it equal the reference (``load_reference`` refuses it).
Needs d_in and d_out divisible by num_heads. Maths only.
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.base import (
    AttentionImplementation,
    output_projection_parameters,
    parameter_total,
    qkv_parameters,
)


class SlicedHead(nn.Module):
    """One causal head over a slice of the features: (B, T, d_in/h) -> (B, T, d_out/h)."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.context_length = context_length
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.register_buffer("tril", torch.tril(torch.ones(context_length, context_length)))
        self.dropout = nn.Dropout(dropout)

    def attention_weights(self, x):
        """This head's attention weights before dropout: (B, T, d_in/h) -> (B, T, T)."""
        num_tokens = x.shape[1]
        if num_tokens > self.context_length:
            raise ValueError(f"{num_tokens} tokens exceed the context length {self.context_length}")
        k = self.key(x)  # (B, T, d_k)
        q = self.query(x)
        scores = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T)
        scores = scores.masked_fill(self.tril[:num_tokens, :num_tokens] == 0, float("-inf"))
        return torch.softmax(scores, dim=-1)

    def forward(self, x):
        return self.dropout(self.attention_weights(x)) @ self.value(x)  # (B, T, d_k)


class SlicedHeadsAttention(AttentionImplementation):
    """``num_heads`` heads, each over d_in/h features, concatenated, projected: (B, T, d_in) -> (B, T, d_out)."""

    name = "sliced_heads"
    title = "Each head reads only its slice of the features"
    why = "a different, smaller model: no weights make it compute the reference's function"
    equivalent = False
    compared_with = None  # it cannot take the reference's weights, so it is not compared
    parameter_formula = "3·d_in·d_out/h (+3·d_out bias) + d_out·d_out + d_out"

    @classmethod
    def parameter_count(cls, d_in, d_out, num_heads, qkv_bias=False):
        per_head = qkv_parameters(d_in // num_heads, d_out // num_heads, qkv_bias)  # 1/h² of the reference's q/k/v
        return num_heads * per_head + output_projection_parameters(d_out)

    @classmethod
    def unsupported_reason(cls, d_in, d_out, num_heads):
        reason = super().unsupported_reason(d_in, d_out, num_heads)
        if reason is None and d_in % num_heads != 0:
            reason = f"sliced_heads needs d_in ({d_in}) divisible by num_heads ({num_heads}): each head reads d_in/h"
        return reason

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.check_sizes(d_in, d_out, num_heads)  # d_out and d_in divisible by num_heads
        self.slice_width = d_in // num_heads
        self.heads = nn.ModuleList(
            [
                SlicedHead(d_in // num_heads, d_out // num_heads, context_length, dropout, qkv_bias)
                for _ in range(num_heads)
            ]
        )
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        slices = x.split(self.slice_width, dim=-1)  # h x (B, T, d_in/h)
        out = torch.cat([head(part) for head, part in zip(self.heads, slices)], dim=-1)  # (B, T, d_out)
        return self.dropout(self.proj(out))

    def attention_weights(self, x):
        """Each head's attention weights before dropout: (B, T, d_in) -> (B, h, T, T)."""
        slices = x.split(self.slice_width, dim=-1)
        return torch.stack([head.attention_weights(part) for head, part in zip(self.heads, slices)], dim=1)

    def load_reference(self, reference):
        """Refused: no weights make this model compute the reference's function."""
        raise ValueError(
            f"sliced_heads is a different model and cannot take the reference's weights: it has "
            f"{parameter_total(self):,} parameters against the reference's {parameter_total(reference):,}, because "
            "each head projects only its d_in/h slice of the features, so no weights make it compute the same function"
        )
