"""Batched multi-head attention: the reference every other implementation is compared with.

This is the ``MultiHeadAttention`` class of Sebastian Raschka's *Build a Large Language Model (From Scratch)*,
chapter 3: one projection per role for all heads at once, split into heads with a view + transpose, one
batched matrix product for every head's scores, then an output projection that mixes the heads.
Parameters are created in the book's order (W_query, W_key, W_value, out_proj), so a seeded layer
reproduces the book's numbers. Its defaults (parameter count, size check, how to load the reference's
weights, which is a plain copy here) are base.py's. This module holds the maths only.
"""

from __future__ import annotations

import torch
from torch import nn

from playground.attention.base import AttentionImplementation


class BatchedAttention(AttentionImplementation):
    """Causal multi-head self-attention, all heads in one batched matrix product.

    ``d_out`` is the total width; each of the ``num_heads`` heads has width ``d_out // num_heads``:
    d_in 768, d_out 768, 12 heads -> 12 heads of width 64.
    """

    name = "batched"
    title = "Batched heads (the reference)"
    why = "it is the reference itself"

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.check_sizes(d_in, d_out, num_heads)  # d_out divisible by num_heads
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # mixes the heads' outputs
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def _queries_keys_values(self, x):
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        if num_tokens > self.context_length:
            raise ValueError(f"{num_tokens} tokens exceed the context length {self.context_length}")
        keys = self.W_key(x)  # (B, T, d_out)
        queries = self.W_query(x)
        values = self.W_value(x)
        # Split the last dimension into heads: (B, T, d_out) -> (B, T, h, d_k) -> (B, h, T, d_k)
        keys = keys.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        return queries, keys, values

    def _attention_weights(self, queries, keys):
        num_tokens = queries.shape[2]
        attn_scores = queries @ keys.transpose(2, 3)  # (B, h, T, T): every head at once
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]  # True above the diagonal: the future
        attn_scores = attn_scores.masked_fill(mask_bool, -torch.inf)
        return torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)  # (B, h, T, T)

    def context_vectors(self, x):
        """The heads' outputs side by side, before ``out_proj``: (B, T, d_in) -> (B, T, d_out)."""
        b, num_tokens, _ = x.shape
        queries, keys, values = self._queries_keys_values(x)
        attn_weights = self.dropout(self._attention_weights(queries, keys))
        context_vec = (attn_weights @ values).transpose(1, 2)  # (B, h, T, d_k) -> (B, T, h, d_k)
        return context_vec.contiguous().view(b, num_tokens, self.d_out)  # (B, T, d_out)

    def forward(self, x):
        return self.out_proj(self.context_vectors(x))  # (B, T, d_out)

    def attention_weights(self, x):
        """Each head's attention weights before dropout: (B, T, d_in) -> (B, h, T, T)."""
        queries, keys, _ = self._queries_keys_values(x)
        return self._attention_weights(queries, keys)
