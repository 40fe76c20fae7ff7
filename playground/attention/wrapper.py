"""A list of independent causal attention heads whose outputs are concatenated: no output projection.

This is the ``CausalAttention`` + ``MultiHeadAttentionWrapper`` pair of chapter 3 of Raschka's *Build a Large
Language Model (From Scratch)*: the most literal reading of "several heads". Each head owns its own
W_query, W_key, W_value, dropout and causal mask and runs its own matrix products, one after another.
Unlike the book, ``d_out`` here is the total width, so every head has width ``d_out // num_heads``:
d_out 768, 12 heads -> 12 heads of width 64, concatenated back to 768.
Without an output projection nothing mixes the heads, so this equals the batched reference *before* its
``out_proj``: given head i's rows of the reference's W_query, W_key, W_value, it computes the reference's
context vectors. This module holds the maths only.
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.base import CONTEXT, AttentionImplementation, load_heads, qkv_parameters


class CausalAttention(nn.Module):
    """One causal self-attention head: (B, T, d_in) -> (B, T, d_out)."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def attention_weights(self, x):
        """This head's attention weights before dropout: (B, T, d_in) -> (B, T, T)."""
        num_tokens = x.shape[1]
        if num_tokens > self.context_length:
            raise ValueError(f"{num_tokens} tokens exceed the context length {self.context_length}")
        keys = self.W_key(x)  # (B, T, d_k)
        queries = self.W_query(x)
        attn_scores = queries @ keys.transpose(1, 2)  # (B, T, T)
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        return torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)  # (B, T, T)

    def forward(self, x):
        attn_weights = self.dropout(self.attention_weights(x))
        return attn_weights @ self.W_value(x)  # (B, T, T) @ (B, T, d_k) -> (B, T, d_k)


class MultiHeadAttentionWrapper(AttentionImplementation):
    """``num_heads`` independent heads of width ``d_out // num_heads``, concatenated: (B, T, d_in) -> (B, T, d_out)."""

    name = "wrapper"
    title = "A list of heads, no output projection"
    why = "each head runs its own matrix products, so the sums run in a different order"
    equivalent = False  # no out_proj: it cannot mix the heads as the reference does
    compared_with = CONTEXT  # so it is compared with the reference's context vectors, before out_proj
    parameter_formula = "3·d_in·d_out (+3·d_out bias)"

    @classmethod
    def parameter_count(cls, d_in, d_out, num_heads, qkv_bias=False):
        return qkv_parameters(d_in, d_out, qkv_bias)

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.check_sizes(d_in, d_out, num_heads)  # d_out divisible by num_heads
        self.num_heads = num_heads
        self.heads = nn.ModuleList(
            [CausalAttention(d_in, d_out // num_heads, context_length, dropout, qkv_bias) for _ in range(num_heads)]
        )

    def forward(self, x):
        return torch.cat([head(x) for head in self.heads], dim=-1)  # h x (B, T, d_k) -> (B, T, d_out)

    def attention_weights(self, x):
        """Each head's attention weights before dropout: (B, T, d_in) -> (B, h, T, T)."""
        return torch.stack([head.attention_weights(x) for head in self.heads], dim=1)

    def load_reference(self, reference):
        """Head i takes rows [i·d_k, (i+1)·d_k) of the reference's W_query, W_key and W_value; no out_proj."""
        load_heads(reference, self.heads)
