"""Notebook 004 (the attention lab: an attention-only character model trained on "hello world"), under the
notebook's own names, signatures and attributes: ``Head(C_head)``, ``MultiHeadAttention(C, num_heads)``,
``SimpleLanguageModel(vocab_size, block_size, n_embd, n_head)``, ``get_batch`` and ``generate``. A notebook
reader's ``state_dict`` loads strictly.

Unlike GPT's heads, which each read the whole embedding, head i here reads only its own slice of it,
``x[..., i·C_head:(i+1)·C_head]``, through C_head x C_head key/query/value matrices; ``proj`` then mixes the
heads. There is no residual, no norm and no MLP: logits = output(attn(token_emb + pos_emb)).

The notebook's ``get_batch`` and ``generate`` read globals (``data``, ``encode``, ``decode``, ``device``); here
they are arguments. Its ``get_batch(batch_size=64)`` always returns 4 windows (the 4 is written into the body);
this one returns ``batch_size``.

    model = SimpleLanguageModel(vocab_size=8, block_size=8, n_embd=16, n_head=2)
    model(torch.tensor([[3, 2, 4]])).shape -> (1, 3, 8)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from playground.textbook.sizes import TextbookError, check_heads, check_length, check_positive

__all__ = ["Head", "MultiHeadAttention", "SimpleLanguageModel", "generate", "get_batch"]


class Head(nn.Module):
    """One causal head on a C_head-wide slice: key, query, value are Linear(C_head, C_head, bias=False).

    (B, T, C_head) -> (B, T, C_head); the scores are scaled by √C_head. No mask buffer: the notebook builds
    ``tril(ones(T, T))`` at each call (here on the input's device).
    """

    def __init__(self, C_head):
        super().__init__()
        check_positive(C_head=C_head)
        self.key = nn.Linear(C_head, C_head, bias=False)
        self.query = nn.Linear(C_head, C_head, bias=False)
        self.value = nn.Linear(C_head, C_head, bias=False)

    def weights(self, x):
        """softmax(q kᵀ / √C) with the future masked: (B, T, C) -> (B, T, T), each row summing to 1."""
        _, T, C = x.shape
        k = self.key(x)  # (B, T, C)
        q = self.query(x)
        scores = q @ k.transpose(-2, -1) / C**0.5  # (B, T, T)
        mask = torch.tril(torch.ones(T, T, device=x.device))
        scores = scores.masked_fill(mask == 0, float("-inf"))
        return F.softmax(scores, dim=-1)

    def forward(self, x):
        return self.weights(x) @ self.value(x)  # (B, T, T) @ (B, T, C) -> (B, T, C)


class MultiHeadAttention(nn.Module):
    """``num_heads`` Heads, head i on features [i·C_head, (i+1)·C_head) of x, concatenated, then ``proj``
    (Linear(C, C) with a bias). Parameters: 3·C_head² per head + C² + C."""

    def __init__(self, C, num_heads):
        super().__init__()
        self.C = C
        self.num_heads = num_heads
        self.C_head = check_heads(C, num_heads, width_name="C")
        self.heads = nn.ModuleList([Head(self.C_head) for _ in range(num_heads)])
        self.proj = nn.Linear(C, C)

    def slices(self, x):
        """Each head's slice of the features: (B, T, C) -> h x (B, T, C_head)."""
        return [x[..., i * self.C_head:(i + 1) * self.C_head] for i in range(self.num_heads)]

    def weights(self, x):
        """Every head's attention weights: (B, T, C) -> (B, h, T, T)."""
        return torch.stack([head.weights(part) for head, part in zip(self.heads, self.slices(x))], dim=1)

    def forward(self, x):
        head_outputs = [head(part) for head, part in zip(self.heads, self.slices(x))]  # h x (B, T, C_head)
        return self.proj(torch.cat(head_outputs, dim=-1))  # (B, T, C)


class SimpleLanguageModel(nn.Module):
    """Token ids (B, T <= block_size) -> next-token logits (B, T, vocab_size): ``token_emb`` + ``pos_emb``,
    ``attn`` (MultiHeadAttention(n_embd, n_head)), ``output`` (Linear(n_embd, vocab_size) with a bias)."""

    def __init__(self, vocab_size, block_size, n_embd, n_head):
        super().__init__()
        check_positive(vocab_size=vocab_size, block_size=block_size, n_embd=n_embd)
        self.token_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.attn = MultiHeadAttention(n_embd, n_head)
        self.output = nn.Linear(n_embd, vocab_size)

    @property
    def block_size(self) -> int:
        return self.pos_emb.num_embeddings

    def embed(self, idx):
        """Token + position embeddings: (B, T) -> (B, T, n_embd)."""
        _, T = idx.shape
        check_length(T, self.block_size, "block_size")
        return self.token_emb(idx) + self.pos_emb(torch.arange(T, device=idx.device))

    def attention_weights(self, idx):
        """Each head's weights for ids (B, T): (B, n_head, T, T), without gradients."""
        with torch.no_grad():
            return self.attn.weights(self.embed(idx))

    def forward(self, idx):
        return self.output(self.attn(self.embed(idx)))  # (B, T, vocab_size)


def get_batch(data, batch_size=4, block_size=8, generator=None):
    """``batch_size`` windows of ``block_size`` ids from ``data`` at random starts, and the same shifted by one.

    "hello world" (11 ids), block 8 -> starts 0, 1 or 2: x (B, 8), y (B, 8).
    """
    if len(data) <= block_size:
        raise TextbookError(f"the text has {len(data)} tokens: a window of {block_size} needs at least "
                            f"{block_size + 1}")
    ix = torch.randint(0, len(data) - block_size, (batch_size,), generator=generator)
    x = torch.stack([data[i:i + block_size] for i in ix])  # (B, block_size)
    y = torch.stack([data[i + 1:i + block_size + 1] for i in ix])
    return x, y


@torch.no_grad()
def generate(model, start_str, max_new_tokens=100, *, tokenizer, generator=None):
    """``start_str`` and ``max_new_tokens`` characters sampled after it, each from the softmax of the last
    position's logits over the last ``block_size`` ids (the notebook's ``idx[:, -8:]``).

    ``tokenizer`` has ``encode(str) -> ids`` and ``decode(ids) -> str``; ``generator`` seeds the draws.
    """
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise TextbookError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
    if not start_str:
        raise TextbookError("start_str is empty: give at least one character to start from")
    model.eval()
    device = next(model.parameters()).device
    idx = torch.as_tensor(tokenizer.encode(start_str), dtype=torch.long, device=device).view(1, -1)  # (1, T)
    for _ in range(max_new_tokens):
        idx_cond = idx[:, -model.block_size:]
        last_logits = model(idx_cond)[:, -1, :]  # (1, vocab_size)
        probs = F.softmax(last_logits, dim=-1)
        next_token = torch.multinomial(probs, num_samples=1, generator=generator)  # (1, 1)
        idx = torch.cat([idx, next_token], dim=1)
    return tokenizer.decode(idx[0])
