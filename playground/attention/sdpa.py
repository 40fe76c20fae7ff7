"""Multi-head attention through PyTorch's fused kernel, ``F.scaled_dot_product_attention``.

The projections are the batched reference's (W_query, W_key, W_value, out_proj, created in that order); the
middle, scores -> mask -> softmax -> weighted sum, is one call with ``is_causal=True``. PyTorch picks a
backend (flash attention, memory-efficient, or the plain "math" one) and the fused ones never store the
(B, h, T, T) weights, which is why they save memory at long context. Because the kernel does not return
weights, ``attention_weights`` recomputes them explicitly from this module's own projections.
It loads the reference's weights as they are (the same names and layout: base.py's default). Maths only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from playground.attention.base import AttentionImplementation, sdpa_backend_for


class SDPAAttention(AttentionImplementation):
    """Causal multi-head self-attention via ``scaled_dot_product_attention``: (B, T, d_in) -> (B, T, d_out)."""

    name = "sdpa"
    title = "PyTorch's fused scaled_dot_product_attention"
    why = "the fused kernel computes softmax online, in blocks, with its own rounding"

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        self.check_sizes(d_in, d_out, num_heads)  # d_out divisible by num_heads
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.context_length = context_length
        self.dropout = dropout
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    def _queries_keys_values(self, x):
        b, num_tokens, _ = x.shape  # (B, T, d_in)
        if num_tokens > self.context_length:
            raise ValueError(f"{num_tokens} tokens exceed the context length {self.context_length}")
        q = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)  # (B, h, T, d_k)
        k = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def forward(self, x):
        b, num_tokens, _ = x.shape
        q, k, v = self._queries_keys_values(x)
        dropout_p = self.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)  # (B, h, T, d_k)
        out = out.transpose(1, 2).contiguous().view(b, num_tokens, self.d_out)  # (B, T, d_out)
        return self.out_proj(out)

    def attention_weights(self, x):
        """The weights the kernel computes internally, recomputed explicitly: (B, T, d_in) -> (B, h, T, T)."""
        q, k, _ = self._queries_keys_values(x)
        num_tokens = q.shape[2]
        scores = q @ k.transpose(-2, -1) / self.head_dim**0.5  # (B, h, T, T)
        future = torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=x.device).triu(diagonal=1)
        return torch.softmax(scores.masked_fill(future, -torch.inf), dim=-1)

    def backend(self, x):
        """Which kernel PyTorch picks for this input: "flash (cpu)", "math", "efficient", "cudnn"..."""
        return sdpa_backend_for(x, self.num_heads, self.head_dim)
