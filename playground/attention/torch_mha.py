"""Multi-head attention as PyTorch ships it: ``torch.nn.MultiheadAttention`` with a causal boolean mask.

One packed ``in_proj_weight`` (3·d_out, d_out) holds W_query, W_key, W_value stacked [all q | all k | all v];
the output projection is the module's own ``out_proj``. ``nn.MultiheadAttention`` projects its input from
``embed_dim`` to ``embed_dim``, so this form needs d_in == d_out (it raises a ValueError otherwise) rather
than hiding an extra projection that the other forms do not have.
One adjustment: PyTorch's single ``bias`` flag switches the q/k/v biases *and* the out_proj bias together,
while every other form here always has an out_proj bias. With ``qkv_bias=False`` we give ``out_proj`` a bias
(initialised to zero, as PyTorch itself initialises it), so the layer can express the batched reference.
Maths only.
"""

from __future__ import annotations

import torch
from torch import nn


class TorchMHAAttention(nn.Module):
    """Causal ``nn.MultiheadAttention`` self-attention: (B, T, d_out) -> (B, T, d_out); needs d_in == d_out."""

    def __init__(self, d_in, d_out, num_heads, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        if d_out % num_heads != 0:
            raise ValueError(f"d_out ({d_out}) must be divisible by num_heads ({num_heads})")
        if d_in != d_out:
            raise ValueError(
                f"torch_mha needs d_in == d_out (got d_in={d_in}, d_out={d_out}): nn.MultiheadAttention "
                "maps embed_dim to embed_dim"
            )
        self.context_length = context_length
        self.attention = nn.MultiheadAttention(d_out, num_heads, dropout=dropout, bias=qkv_bias, batch_first=True)
        if not qkv_bias:  # bias=False also dropped out_proj's bias; the other forms keep it
            self.attention.out_proj.bias = nn.Parameter(torch.zeros(d_out))
        future = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), diagonal=1)
        self.register_buffer("mask", future)  # True where a query may NOT look

    def _mask(self, x):
        num_tokens = x.shape[1]
        if num_tokens > self.context_length:
            raise ValueError(f"{num_tokens} tokens exceed the context length {self.context_length}")
        return self.mask[:num_tokens, :num_tokens]  # (T, T)

    def forward(self, x):
        out, _ = self.attention(x, x, x, attn_mask=self._mask(x), need_weights=False, is_causal=True)
        return out  # (B, T, d_out)

    def attention_weights(self, x):
        """Each head's attention weights, as MHA returns them: (B, T, d_out) -> (B, h, T, T)."""
        _, weights = self.attention(x, x, x, attn_mask=self._mask(x), need_weights=True, average_attn_weights=False)
        return weights
