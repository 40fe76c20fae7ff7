"""Notebook 004's toy language model: SimpleLanguageModel, attention only, in the style of Karpathy's makemore /
"Let's build GPT" lecture. The maths and the sampling loop only; the tokenizer and the training loop are the
caller's (the notebook trains it with AdamW on the characters of "hello world").

Token + position embeddings, one multi-head causal self-attention (``n_head`` heads of ``n_embd // n_head``
features, concatenated, no output projection, no feed-forward, no norm), then ``lm_head`` to the vocabulary.
Attribute names are the notebook's (``token_embedding_table``, ``sa_heads.heads.0.key``, the ``tril`` buffers),
so its ``state_dict`` loads strictly.

    model = SimpleLanguageModel(vocab_size=8, block_size=8, n_embd=32, n_head=4)
    logits, loss = model(idx, targets)             # (B, T, 8), a scalar
    model.generate(idx[:, :1], 10, generator=torch.Generator().manual_seed(0)).shape -> (B, 11)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from playground.textbook.sizes import TextbookError, check_heads, check_length, check_positive


class Head(nn.Module):
    """One head of causal self-attention: key, query, value Linear(n_embd, head_size, bias=False) and ``tril``.

    The notebook reads ``n_embd`` and ``block_size`` from globals; here they are arguments. ``tril`` is the
    (block_size, block_size) lower-triangular ones matrix, a saved buffer as in the notebook.
    """

    def __init__(self, n_embd: int, head_size: int, block_size: int):
        super().__init__()
        check_positive(n_embd=n_embd, head_size=head_size, block_size=block_size)
        self.key = nn.Linear(n_embd, head_size, bias=False)
        self.query = nn.Linear(n_embd, head_size, bias=False)
        self.value = nn.Linear(n_embd, head_size, bias=False)
        self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        """softmax(q kᵀ / √head_size) with the future masked: (B, T, n_embd) -> (B, T, T), rows summing to 1."""
        _, t, _ = x.shape
        k = self.key(x)  # (B, T, head_size)
        q = self.query(x)
        wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5  # (B, T, T)
        wei = wei.masked_fill(self.tril[:t, :t] == 0, float("-inf"))
        return F.softmax(wei, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weights(x) @ self.value(x)  # (B, T, T) @ (B, T, head_size)


class Heads(nn.Module):
    """``num_heads`` Heads side by side, their outputs concatenated: (B, T, n_embd) -> (B, T, num_heads·head_size).

    The notebook calls it ``MultiHeadAttention(num_heads, head_size)``; renamed here because notebook 003's class
    of that name (two_layer.py) is a different thing. No output projection, as in the notebook.
    """

    def __init__(self, num_heads: int, head_size: int, n_embd: int, block_size: int):
        super().__init__()
        check_positive(num_heads=num_heads)
        self.heads = nn.ModuleList(Head(n_embd, head_size, block_size) for _ in range(num_heads))

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([head.weights(x) for head in self.heads], dim=1)  # (B, h, T, T)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([head(x) for head in self.heads], dim=-1)  # (B, T, h·head_size)


class SimpleLanguageModel(nn.Module):
    """Notebook 004's attention-only character model: token ids (B, T) -> next-token logits (B, T, vocab_size).

    ``SimpleLanguageModel(vocab_size, block_size, n_embd, n_head)``: ``token_embedding_table`` (vocab_size,
    n_embd), ``position_embedding_table`` (block_size, n_embd), ``sa_heads`` (n_head heads of n_embd // n_head),
    ``lm_head`` Linear(n_embd, vocab_size). Parameters: vocab_size·n_embd + block_size·n_embd + 3·n_embd² +
    n_embd·vocab_size + vocab_size. ``forward(idx, targets)`` returns ``(logits, loss)`` with logits kept
    (B, T, vocab_size) (the notebook flattens them to (B·T, vocab_size) when it has targets) and loss None without
    targets.
    """

    def __init__(self, vocab_size: int, block_size: int, n_embd: int, n_head: int):
        super().__init__()
        check_positive(vocab_size=vocab_size, block_size=block_size)
        head_size = check_heads(n_embd, n_head, width_name="n_embd", heads_name="n_head")
        self.block_size = block_size
        self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
        self.position_embedding_table = nn.Embedding(block_size, n_embd)
        self.sa_heads = Heads(n_head, head_size, n_embd, block_size)
        self.lm_head = nn.Linear(n_embd, vocab_size)

    def _embed(self, idx: torch.Tensor) -> torch.Tensor:
        _, t = idx.shape  # (B, T)
        check_length(t, self.block_size, "block_size")
        positions = torch.arange(t, device=idx.device)
        return self.token_embedding_table(idx) + self.position_embedding_table(positions)  # (B, T, n_embd)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        logits = self.lm_head(self.sa_heads(self._embed(idx)))  # (B, T, vocab_size)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss

    def attention_weights(self, idx: torch.Tensor) -> torch.Tensor:
        """Each head's causal attention weights for ids (B, T), T <= block_size: (B, n_head, T, T), no gradients.

        At a sampling step, pass the context ``generate`` saw (its last ``block_size`` ids) to see that step's.
        """
        with torch.no_grad():
            return self.sa_heads.weights(self._embed(idx))

    def generate(self, idx: torch.Tensor, max_new_tokens: int, generator: torch.Generator | None = None):
        """``idx`` (B, T) extended by ``max_new_tokens`` sampled ids: (B, T + max_new_tokens).

        Each step reads the last ``block_size`` ids, takes the softmax of the last position's logits and draws one
        id with ``torch.multinomial`` (seeded by ``generator`` when given, so a seed repeats the text).
        """
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
            raise TextbookError(f"max_new_tokens must be a non-negative integer, got {max_new_tokens!r}")
        if idx.dim() != 2 or idx.shape[1] < 1:
            raise TextbookError(f"idx must be (B, T) token ids with T >= 1, got shape {tuple(idx.shape)}")
        with torch.no_grad():
            for _ in range(max_new_tokens):
                idx_cond = idx[:, -self.block_size:]  # (B, T <= block_size)
                logits, _ = self(idx_cond)
                probs = F.softmax(logits[:, -1, :], dim=-1)  # (B, vocab_size)
                idx_next = torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)
                idx = torch.cat((idx, idx_next), dim=1)
        return idx
