"""Notebook 003's two-layer transformer: MultiHeadAttention(query, key, value, mask), FeedForward, the post-norm
TransformerLayer and TwoLayerTransformer (token + position embeddings, two layers under a causal mask, xavier
init, an output projection to the vocabulary). The maths only.

Attribute names are the notebook's, so its ``state_dict`` loads strictly. Unlike notebook 002 the heads are joined
with the transpose (``combine_heads``), and the mask makes the model causal: a token's logits never depend on
later tokens.

    model = TwoLayerTransformer(vocab_size=10, d_model=16, num_heads=4, d_ff=32, max_len=8)
    model(torch.tensor([[1, 2, 3]])).shape -> (1, 3, 10)        (next-token logits at every position)
"""

from __future__ import annotations

import math

import torch
from torch import nn

from playground.textbook.sizes import check_dropout, check_heads, check_length, check_positive

MASKED_SCORE = -1e9  # what the notebook writes where the mask is 0: softmax turns it into a weight of exactly 0


def causal_mask(num_tokens: int, device: torch.device | None = None) -> torch.Tensor:
    """(1, 1, T, T) bool, True where query i may read key j (j <= i): T 3 -> [[T, F, F], [T, T, F], [T, T, T]]."""
    return torch.tril(torch.ones(num_tokens, num_tokens, dtype=torch.bool, device=device)).view(
        1, 1, num_tokens, num_tokens)


class MultiHeadAttention(nn.Module):
    """Notebook 003's multi-head attention, ``forward(query, key, value, mask=None)``.

    W_q, W_k, W_v, W_o are Linear(d_model, d_model) with biases: 4·(d_model² + d_model) parameters; each of the
    ``num_heads`` heads has ``d_k = d_model // num_heads`` features. ``mask`` broadcasts to (B, h, T_q, T_k) and
    is 1/True where a query may read a key; scores where it is 0 become -1e9 before the softmax. With
    ``causal_mask`` and query = key = value it computes what the attention family's batched reference computes
    (playground/attention/batched.py) once that holds these weights: W_q -> W_query, W_k -> W_key,
    W_v -> W_value, W_o -> out_proj, with ``qkv_bias=True``.
    """

    def __init__(self, d_model: int, num_heads: int):
        super().__init__()
        self.d_k = check_heads(d_model, num_heads)
        self.d_model = d_model
        self.num_heads = num_heads
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape  # (B, T, d_model)
        return x.view(b, t, self.num_heads, self.d_k).transpose(1, 2)  # (B, h, T, d_k)

    def combine_heads(self, x: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = x.shape  # (B, h, T, d_k)
        return x.transpose(1, 2).contiguous().view(b, t, self.d_model)  # (B, T, h, d_k) -> (B, T, d_model)

    def attention_probabilities(self, Q: torch.Tensor, K: torch.Tensor, mask: torch.Tensor | None = None):
        """softmax(Q Kᵀ / √d_k) with masked scores at -1e9: (B, h, T_q, d_k), (B, h, T_k, d_k) -> (B, h, T_q, T_k)."""
        scores = Q @ K.transpose(-2, -1) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, MASKED_SCORE)
        return torch.softmax(scores, dim=-1)

    def scaled_dot_product_attention(self, Q, K, V, mask=None) -> torch.Tensor:
        return self.attention_probabilities(Q, K, mask) @ V  # (B, h, T_q, d_k)

    def attention_weights(self, query, key, mask=None) -> torch.Tensor:
        """Each head's weights for these inputs: (B, T_q, d_model), (B, T_k, d_model) -> (B, h, T_q, T_k)."""
        return self.attention_probabilities(self.split_heads(self.W_q(query)), self.split_heads(self.W_k(key)), mask)

    def forward(self, query, key, value, mask=None) -> torch.Tensor:
        Q = self.split_heads(self.W_q(query))  # (B, h, T_q, d_k)
        K = self.split_heads(self.W_k(key))  # (B, h, T_k, d_k)
        V = self.split_heads(self.W_v(value))
        return self.W_o(self.combine_heads(self.scaled_dot_product_attention(Q, K, V, mask)))  # (B, T_q, d_model)


class FeedForward(nn.Module):
    """Notebook 003's feed-forward: ``linear2(relu(linear1(x)))``, d_model -> d_ff -> d_model.

    2·d_model·d_ff + d_ff + d_model parameters; no dropout inside (TransformerLayer drops its output).
    """

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        check_positive(d_model=d_model, d_ff=d_ff)
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.relu(self.linear1(x)))  # (B, T, d_ff) inside, (B, T, d_model) out


class TransformerLayer(nn.Module):
    """Notebook 003's layer, post-norm like 002's: ``x = norm1(x + dropout(self_attn(x, x, x, mask)))``, then
    ``x = norm2(x + dropout(feed_forward(x)))``. The norms are ``nn.LayerNorm`` here (002 wrote its own).

    Parameters: attention 4·(d² + d), feed-forward 2·d·d_ff + d_ff + d, two norms 2·d each (d = d_model).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.1):
        super().__init__()
        check_dropout(dropout)
        self.self_attn = MultiHeadAttention(d_model, num_heads)
        self.feed_forward = FeedForward(d_model, d_ff)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.self_attn(x, x, x, mask)))  # (B, T, d_model)
        return self.norm2(x + self.dropout(self.feed_forward(x)))


class TwoLayerTransformer(nn.Module):
    """Notebook 003's model: token ids (B, T) -> next-token logits (B, T, vocab_size), causal.

    ``embedding`` (vocab_size, d) + learned ``position_embedding`` (max_len, d), dropout, ``layer1`` and
    ``layer2`` under ``causal_mask``, then ``fc_out`` Linear(d, vocab_size). Every weight matrix (every parameter
    with 2 or more dimensions, embeddings included) starts xavier-uniform, as the notebook's ``init_weights`` does;
    biases and norms keep PyTorch's defaults. Parameters: vocab_size·d + max_len·d + 2 layers + d·vocab_size +
    vocab_size.
    """

    def __init__(self, vocab_size: int, d_model: int, num_heads: int, d_ff: int, max_len: int, dropout: float = 0.1):
        super().__init__()
        check_positive(vocab_size=vocab_size, max_len=max_len)
        check_dropout(dropout)
        self.max_len = max_len
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(max_len, d_model)
        self.layer1 = TransformerLayer(d_model, num_heads, d_ff, dropout)
        self.layer2 = TransformerLayer(d_model, num_heads, d_ff, dropout)
        self.fc_out = nn.Linear(d_model, vocab_size)
        self.dropout = nn.Dropout(dropout)
        self.init_weights()

    def init_weights(self) -> None:
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)

    def forward(self, src: torch.Tensor) -> torch.Tensor:
        _, t = src.shape  # (B, T) token ids
        check_length(t, self.max_len)
        positions = torch.arange(t, device=src.device)  # (T,)
        x = self.dropout(self.embedding(src) + self.position_embedding(positions))  # (B, T, d_model)
        mask = causal_mask(t, src.device)  # (1, 1, T, T)
        x = self.layer2(self.layer1(x, mask), mask)
        return self.fc_out(x)  # (B, T, vocab_size)
