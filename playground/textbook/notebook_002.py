"""Notebook 002 (multi-head attention with a fused qkv layer, layer norm from scratch, the post-norm encoder), under
the notebook's own names, signatures and attributes: ``scaled_dot_product``, ``MultiHeadAttention(d_model,
num_heads)``, ``LayerNormalization(parameters_shape, eps)``, ``PositionwiseFeedForward(d_model, hidden,
drop_prob)``, ``EncoderLayer(d_model, ffn_hidden, num_heads, drop_prob)`` and ``Encoder(d_model, ffn_hidden,
num_heads, drop_prob, num_layers)``. A notebook reader's ``state_dict`` loads strictly.

The notebook joins the heads back with ``values.reshape(B, T, h·d)`` straight from (B, h, T, d), without the
transpose, which lays other tokens' features into a token's row. Here the heads are joined right by default;
``forget_transpose=True`` gives exactly the notebook's numbers (pitfalls.py maps where each feature then comes from).
The notebook prints every shape; ``verbose=True`` prints the same lines.

    encoder = Encoder(d_model=16, ffn_hidden=32, num_heads=4, drop_prob=0.1, num_layers=2)
    encoder(torch.randn(1, 5, 16)).shape -> (1, 5, 16)        (embeddings in, contextual embeddings out)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from playground.textbook.sizes import check_dropout, check_heads, check_positive

__all__ = ["Encoder", "EncoderLayer", "LayerNormalization", "MultiHeadAttention", "PositionwiseFeedForward",
           "combine_heads", "scaled_dot_product"]


def _say(verbose: bool, line: str) -> None:
    if verbose:
        print(line)  # noqa: T201 - the notebook's own shape printout, only on request


def scaled_dot_product(q, k, v, mask=None, *, verbose=False):
    """softmax(q kᵀ / √d_k + mask) v: q, k, v (..., T, d_k) -> (values (..., T, d_k), attention (..., T, T)).

    ``mask`` is *added* to the scaled scores (0 where a query may look, -inf or a large negative number where not).
    """
    d_k = q.size()[-1]
    scaled = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d_k)  # (..., T, T)
    _say(verbose, f"scaled.size(): {scaled.size()}")
    if mask is not None:
        _say(verbose, f"Adding the Mask of shape {mask.size()}")
        scaled = scaled + mask
        _say(verbose, f"scaled.size(): {scaled.size()}")
    attention = F.softmax(scaled, dim=-1)
    _say(verbose, f"Attention.size(): {attention.size()}")
    values = torch.matmul(attention, v)  # (..., T, d_k)
    return values, attention


def combine_heads(values: torch.Tensor, forget_transpose: bool = False) -> torch.Tensor:
    """The heads' outputs side by side: (B, h, T, d) -> (B, T, h·d), head i in features [i·d, (i+1)·d).

    ``forget_transpose=True`` is the notebook's line, ``values.reshape(B, T, h·d)`` with no transpose: it reads the
    (h, T, d) block in memory order, so token t's row takes the flat range [t·h·d, (t+1)·h·d) of it.
    """
    b, h, t, d = values.shape
    if forget_transpose:
        return values.reshape(b, t, h * d)  # the notebook's join: (B, h, T, d) read as (B, T, h·d)
    return values.transpose(1, 2).reshape(b, t, h * d)  # (B, T, h, d) -> (B, T, h·d)


class MultiHeadAttention(nn.Module):
    """The notebook's multi-head self-attention: ``forward(x, mask=None)`` -> ``(out, attention)``.

    ``qkv_layer`` is one Linear(d_model, 3·d_model) laid out per head: head i's [q | k | v] are its output
    features [i·3d, (i+1)·3d) (d = head_dim), not three d_model-wide blocks. ``linear_layer`` is
    Linear(d_model, d_model). Both have biases: 4·(d_model² + d_model) parameters. ``attention`` is
    (B, h, T, T). Unmasked unless a ``mask`` is given. ``forget_transpose=True`` joins the heads the notebook's way.
    """

    def __init__(self, d_model, num_heads, *, forget_transpose=False, verbose=False):
        super().__init__()
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = check_heads(d_model, num_heads)
        self.forget_transpose = forget_transpose
        self.verbose = verbose
        self.qkv_layer = nn.Linear(d_model, 3 * d_model)
        self.linear_layer = nn.Linear(d_model, d_model)

    def queries_keys_values(self, x):
        """Each head's q, k, v: (B, T, d_model) -> three (B, h, T, head_dim)."""
        batch_size, max_sequence_length, _ = x.size()
        qkv = self.qkv_layer(x)  # (B, T, 3·d_model)
        _say(self.verbose, f"qkv.size: {qkv.size()}")
        qkv = qkv.reshape(batch_size, max_sequence_length, self.num_heads, 3 * self.head_dim)  # (B, T, h, 3d)
        _say(self.verbose, f"qkv.size: {qkv.size()}")
        qkv = qkv.permute(0, 2, 1, 3)  # (B, h, T, 3d)
        q, k, v = qkv.chunk(3, dim=-1)  # each (B, h, T, d)
        for name, tensor in (("q", q), ("k", k), ("v", v)):
            _say(self.verbose, f"{name}.size: {tensor.size()}")
        return q, k, v

    def forward(self, x, mask=None):
        _say(self.verbose, f"x.size(): {x.size()}")
        q, k, v = self.queries_keys_values(x)
        values, attention = scaled_dot_product(q, k, v, mask, verbose=self.verbose)  # (B, h, T, d), (B, h, T, T)
        _say(self.verbose, f"values.size(): {values.size()}")
        _say(self.verbose, f"attention.size(): {attention.size()}")
        values = combine_heads(values, self.forget_transpose)  # (B, T, d_model)
        _say(self.verbose, f"values.size(): {values.size()}")
        out = self.linear_layer(values)
        _say(self.verbose, f"out.size(): {out.size()}")
        return out, attention


class LayerNormalization(nn.Module):
    """``gamma · (x - mean) / sqrt(var + eps) + beta`` over the last ``len(parameters_shape)`` dimensions.

    The variance is the biased one, so with ``parameters_shape=[d_model]`` this computes ``nn.LayerNorm(d_model,
    eps)`` (whose ``weight``/``bias`` are ``gamma``/``beta`` here). ``gamma`` starts at ones, ``beta`` at zeros.
    """

    def __init__(self, parameters_shape, eps=1e-5):
        super().__init__()
        self.parameters_shape = parameters_shape
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(parameters_shape))
        self.beta = nn.Parameter(torch.zeros(parameters_shape))

    def forward(self, inputs):
        dims = [-(i + 1) for i in range(self.gamma.dim())]
        mean = inputs.mean(dim=dims, keepdim=True)
        variance = ((inputs - mean) ** 2).mean(dim=dims, keepdim=True)
        std = (variance + self.eps).sqrt()
        y = (inputs - mean) / std
        return self.gamma * y + self.beta


class PositionwiseFeedForward(nn.Module):
    """The same two layers at every position: ``linear2(dropout(relu(linear1(x))))``, d_model -> hidden -> d_model."""

    def __init__(self, d_model, hidden, drop_prob=0.1):
        super().__init__()
        check_positive(d_model=d_model, hidden=hidden)
        check_dropout(drop_prob)
        self.linear1 = nn.Linear(d_model, hidden)
        self.linear2 = nn.Linear(hidden, d_model)
        self.relu = nn.ReLU()
        self.dropout = nn.Dropout(drop_prob)

    def forward(self, x):
        x = self.linear1(x)  # (B, T, hidden)
        x = self.relu(x)
        x = self.dropout(x)
        return self.linear2(x)  # (B, T, d_model)


class EncoderLayer(nn.Module):
    """Post-norm: ``x = norm1(x + dropout1(attention(x)))``, then ``x = norm2(x + dropout2(ffn(x)))``. Unmasked,
    so each output row depends on every token. ``forget_transpose=True`` joins the heads the notebook's way."""

    def __init__(self, d_model, ffn_hidden, num_heads, drop_prob, *, forget_transpose=False, verbose=False):
        super().__init__()
        check_dropout(drop_prob)
        self.verbose = verbose
        self.attention = MultiHeadAttention(d_model=d_model, num_heads=num_heads, forget_transpose=forget_transpose,
                                            verbose=verbose)
        self.norm1 = LayerNormalization(parameters_shape=[d_model])
        self.dropout1 = nn.Dropout(p=drop_prob)
        self.ffn = PositionwiseFeedForward(d_model, hidden=ffn_hidden, drop_prob=drop_prob)
        self.norm2 = LayerNormalization(parameters_shape=[d_model])
        self.dropout2 = nn.Dropout(p=drop_prob)

    def forward(self, x):
        residual_x = x
        x, _ = self.attention(x, mask=None)
        x = self.dropout1(x)
        x = self.norm1(x + residual_x)
        residual_x = x
        x = self.ffn(x)
        x = self.dropout2(x)
        x = self.norm2(x + residual_x)
        _say(self.verbose, f"Shape of x :{x.size()}")
        return x  # (B, T, d_model)


class Encoder(nn.Module):
    """``num_layers`` EncoderLayers in a row, embeddings (B, T, d_model) in and out; no final norm (post-norm
    layers end on one). ``forget_transpose=True`` joins every layer's heads the notebook's way."""

    def __init__(self, d_model, ffn_hidden, num_heads, drop_prob, num_layers, *, forget_transpose=False,
                 verbose=False):
        super().__init__()
        check_positive(num_layers=num_layers)
        self.layers = nn.ModuleList([
            EncoderLayer(d_model, ffn_hidden, num_heads, drop_prob, forget_transpose=forget_transpose,
                         verbose=verbose)
            for _ in range(num_layers)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x
