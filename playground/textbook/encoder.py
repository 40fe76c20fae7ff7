"""Notebook 002's encoder: LayerNormalization from scratch, the position-wise feed-forward, unmasked multi-head
self-attention, the post-norm EncoderLayer and the Encoder stack. The maths only.

Attribute names are the notebook's, so its ``state_dict`` loads strictly into these classes; what differs from
the notebook's code is said in each class's docstring. The one real difference: the notebook joins the heads back
with ``.contiguous().view(B, T, h*d)`` straight from (B, h, T, d), without the transpose, which lays other tokens'
features into a token's row. Here the heads are joined right unless ``forget_transpose=True`` asks for the
notebook's own numbers (pitfalls.py maps where each feature then comes from).

    encoder = Encoder(num_layers=2, d_model=16, num_heads=4, d_ff=32)
    encoder(torch.randn(1, 5, 16)).shape -> (1, 5, 16)        (embeddings in, contextual embeddings out)
"""

from __future__ import annotations

import math

import torch
from torch import nn

from playground.textbook.sizes import check_dropout, check_heads, check_positive


class LayerNormalization(nn.Module):
    """Notebook 002's layer norm written from scratch: ``gamma · (x - mean) / sqrt(var + eps) + beta`` per row.

    The mean and the (biased) variance run over the last dimension, ``d_model`` features; ``gamma`` starts at
    ones and ``beta`` at zeros, 2·d_model parameters. It computes what ``nn.LayerNorm(d_model, eps)`` computes
    (whose ``weight``/``bias`` are ``gamma``/``beta`` here).
    """

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        check_positive(d_model=d_model)
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d_model))
        self.beta = nn.Parameter(torch.zeros(d_model))

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """Each row to mean 0 and variance var / (var + eps), before ``gamma`` and ``beta``: (..., d) -> (..., d)."""
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = x.var(dim=-1, keepdim=True, unbiased=False)  # (..., 1)
        return (x - mean) / torch.sqrt(var + self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gamma * self.normalize(x) + self.beta  # (..., d_model)


class PositionwiseFeedForward(nn.Module):
    """Notebook 002's feed-forward, the same two layers at every position: ``w_2(dropout(relu(w_1(x))))``.

    d_model -> d_ff -> d_model; 2·d_model·d_ff + d_ff + d_model parameters.
    """

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        check_positive(d_model=d_model, d_ff=d_ff)
        check_dropout(dropout)
        self.w_1 = nn.Linear(d_model, d_ff)
        self.w_2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(self.dropout(torch.relu(self.w_1(x))))  # (B, T, d_ff) inside, (B, T, d_model) out


def combine_heads(heads_output: torch.Tensor, forget_transpose: bool = False) -> torch.Tensor:
    """The heads' outputs side by side: (B, h, T, d) -> (B, T, h·d), head i in features [i·d, (i+1)·d).

    ``forget_transpose=True`` is notebook 002's line, ``.contiguous().view(B, T, h·d)`` with no transpose: it reads
    the (h, T, d) block in memory order, so token t's row takes the flat range [t·h·d, (t+1)·h·d) of it, pieces of
    other tokens (pitfalls.forgotten_transpose says which).
    """
    b, h, t, d = heads_output.shape
    if forget_transpose:
        return heads_output.contiguous().view(b, t, h * d)  # the notebook's bug: (B, h, T, d) read as (B, T, h·d)
    return heads_output.transpose(1, 2).contiguous().view(b, t, h * d)  # (B, T, h, d) -> (B, T, h·d)


class MultiHeadSelfAttention(nn.Module):
    """Notebook 002's multi-head self-attention, unmasked: every token attends to every token, later ones too.

    The notebook calls it ``MultiHeadAttention``; it is renamed here because notebook 003's class of that name
    (two_layer.py) takes ``(query, key, value, mask)`` while this one takes ``x`` alone. Parameters W_q, W_k,
    W_v, W_o, each Linear(d_model, d_model) with a bias: 4·(d_model² + d_model). Each of the ``num_heads`` heads
    has ``d_k = d_model // num_heads`` features. ``forget_transpose=True`` joins the heads the notebook's way.
    """

    def __init__(self, d_model: int, num_heads: int, forget_transpose: bool = False):
        super().__init__()
        self.d_k = check_heads(d_model, num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.forget_transpose = forget_transpose
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape  # (B, T, d_model)
        return x.view(b, t, self.num_heads, self.d_k).transpose(1, 2)  # (B, h, T, d_k)

    def _queries_keys_values(self, x):
        return self.split_heads(self.W_q(x)), self.split_heads(self.W_k(x)), self.split_heads(self.W_v(x))

    @staticmethod
    def _weights(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, h, T, T), no mask
        return torch.softmax(scores, dim=-1)

    def attention_weights(self, x: torch.Tensor) -> torch.Tensor:
        """Each head's attention weights: (B, T, d_model) -> (B, h, T, T), every row summing to 1 over all T."""
        q, k, _ = self._queries_keys_values(x)
        return self._weights(q, k)

    def heads_output(self, x: torch.Tensor) -> torch.Tensor:
        """Each head's output before the heads are joined: (B, T, d_model) -> (B, h, T, d_k)."""
        q, k, v = self._queries_keys_values(x)
        return self._weights(q, k) @ v  # (B, h, T, T) @ (B, h, T, d_k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        joined = combine_heads(self.heads_output(x), self.forget_transpose)  # (B, T, d_model)
        return self.W_o(joined)


class EncoderLayer(nn.Module):
    """Notebook 002's encoder layer, post-norm: ``x = norm1(x + dropout(self_attn(x)))``, then
    ``x = norm2(x + dropout(feed_forward(x)))``. Unmasked, so each output row depends on every token.

    Parameters: attention 4·(d² + d), feed-forward 2·d·d_ff + d_ff + d, two norms 2·d each (d = d_model).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1, forget_transpose: bool = False):
        super().__init__()
        check_dropout(dropout)
        self.self_attn = MultiHeadSelfAttention(d_model, num_heads, forget_transpose)
        self.feed_forward = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNormalization(d_model)
        self.norm2 = LayerNormalization(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x)))  # (B, T, d_model)
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class Encoder(nn.Module):
    """Notebook 002's encoder: ``num_layers`` EncoderLayers in a row, embeddings (B, T, d_model) in and out.

    Post-norm layers end on a norm already, so there is no final norm; the embeddings are the caller's (the
    notebook builds them in a cell of its own). Parameters: ``num_layers`` times an EncoderLayer's.
    """

    def __init__(self, num_layers: int, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1,
                 forget_transpose: bool = False):
        super().__init__()
        check_positive(num_layers=num_layers)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, num_heads, d_ff, dropout, forget_transpose) for _ in range(num_layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)  # (B, T, d_model)
        return x
