"""Notebook 003 (attention with separate W_q, W_k, W_v, W_o; the two-layer causal transformer), under the
notebook's own names, signatures and attributes: ``MultiHeadAttention(d_model, num_heads, dropout)`` called
``(query, key, value, mask)``, ``FeedForward(d_model, d_ff, dropout)``, the post-norm ``TransformerLayer`` and
``TwoLayerTransformer(vocab_size, d_model=256, num_heads=4, d_ff=1024, max_seq_len=512, dropout=0.1)``.
A notebook reader's ``state_dict`` loads strictly; the notebook's code is right, so the numbers are its own.

    model = TwoLayerTransformer(vocab_size=10, d_model=16, num_heads=4, d_ff=32, max_seq_len=8)
    model(torch.tensor([[1, 2, 3]])).shape -> (1, 3, 10)        (next-token logits at every position)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from playground.textbook.sizes import check_dropout, check_heads, check_length, check_positive

__all__ = ["FeedForward", "MultiHeadAttention", "TransformerLayer", "TwoLayerTransformer"]


class MultiHeadAttention(nn.Module):
    """``forward(query, key, value, mask=None)`` -> (B, T_q, d_model); self-attention passes x three times.

    W_q, W_k, W_v, W_o are Linear(d_model, d_model) with biases: 4·(d_model² + d_model) parameters; each of the
    ``num_heads`` heads has ``d_k = d_model // num_heads`` features. ``mask`` broadcasts to (B, h, T_q, T_k) and
    is 1 where a query may read a key; scores where it is 0 become -inf. Dropout acts on the attention weights.
    """

    def __init__(self, d_model, num_heads, dropout=0.1):
        super().__init__()
        self.d_k = check_heads(d_model, num_heads)
        check_dropout(dropout)
        self.d_model = d_model
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def split_heads(self, x):
        """(B, T, d_model) -> (B, h, T, d_k)."""
        batch_size, seq_len, _ = x.size()
        return x.view(batch_size, seq_len, self.num_heads, self.d_k).transpose(1, 2)

    def combine_heads(self, x):
        """(B, h, T, d_k) -> (B, T, d_model), with the transpose."""
        batch_size, _, seq_len, _ = x.size()
        return x.transpose(1, 2).contiguous().view(batch_size, seq_len, self.d_model)

    def attention_weights(self, query, key, mask=None):
        """Each head's weights before dropout: (B, h, T_q, T_k), each row summing to 1 over the keys it may read."""
        Q = self.split_heads(self.W_q(query))  # (B, h, T_q, d_k)
        K = self.split_heads(self.W_k(key))  # (B, h, T_k, d_k)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / math.sqrt(self.d_k)  # (B, h, T_q, T_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, float("-inf"))
        return F.softmax(scores, dim=-1)

    def forward(self, query, key, value, mask=None):
        V = self.split_heads(self.W_v(value))  # (B, h, T_k, d_k)
        attn_weights = self.dropout(self.attention_weights(query, key, mask))
        attn_output = self.combine_heads(torch.matmul(attn_weights, V))  # (B, T_q, d_model)
        return self.W_o(attn_output)


class FeedForward(nn.Module):
    """``linear2(dropout(relu(linear1(x))))``: d_model -> d_ff -> d_model at every position."""

    def __init__(self, d_model, d_ff, dropout=0.1):
        super().__init__()
        check_positive(d_model=d_model, d_ff=d_ff)
        check_dropout(dropout)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.linear2(self.dropout(F.relu(self.linear1(x))))


class TransformerLayer(nn.Module):
    """Post-norm: ``x = norm1(x + dropout1(attention(x, x, x, mask)))``, ``x = norm2(x + dropout2(ff(x)))``.

    ``norm1``/``norm2`` are ``nn.LayerNorm(d_model)``, as in the notebook.
    """

    def __init__(self, d_model, num_heads, d_ff, dropout=0.1):
        super().__init__()
        self.attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.feed_forward = FeedForward(d_model, d_ff, dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        attn_output = self.attention(x, x, x, mask)
        x = self.norm1(x + self.dropout1(attn_output))  # (B, T, d_model)
        ff_output = self.feed_forward(x)
        return self.norm2(x + self.dropout2(ff_output))


class TwoLayerTransformer(nn.Module):
    """Token ids (B, T) -> next-token logits (B, T, vocab_size): token + position embeddings, dropout, two
    TransformerLayers under a causal mask, ``output_projection``. Every weight matrix starts xavier-uniform."""

    def __init__(self, vocab_size, d_model=256, num_heads=4, d_ff=1024, max_seq_len=512, dropout=0.1):
        super().__init__()
        check_positive(vocab_size=vocab_size, max_seq_len=max_seq_len)
        self.d_model = d_model
        self.max_seq_len = max_seq_len
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.positional_embedding = nn.Embedding(max_seq_len, d_model)
        self.layer1 = TransformerLayer(d_model, num_heads, d_ff, dropout)
        self.layer2 = TransformerLayer(d_model, num_heads, d_ff, dropout)
        self.output_projection = nn.Linear(d_model, vocab_size)
        self.dropout = nn.Dropout(dropout)
        self._init_weights()

    def _init_weights(self):
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def create_causal_mask(self, seq_len, device):
        """(1, 1, T, T), 1 where query i may read key j <= i."""
        mask = torch.tril(torch.ones(seq_len, seq_len, device=device))
        return mask.view(1, 1, seq_len, seq_len)

    def embed(self, x):
        """Token + position embeddings, before dropout: (B, T) -> (B, T, d_model)."""
        _, seq_len = x.size()
        check_length(seq_len, self.max_seq_len, "max_seq_len")
        positions = torch.arange(0, seq_len, device=x.device).unsqueeze(0)  # (1, T)
        return self.token_embedding(x) + self.positional_embedding(positions)

    def forward(self, x):
        seq_len = x.size(1)
        h = self.dropout(self.embed(x))  # (B, T, d_model)
        mask = self.create_causal_mask(seq_len, h.device)
        h = self.layer1(h, mask)
        h = self.layer2(h, mask)
        return self.output_projection(h)  # (B, T, vocab_size)
