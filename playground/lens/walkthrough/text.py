"""Typed text -> the token IDs a checkpoint head is traced on: cut to the model's context, unknowns named.

Owns ``prepare_text`` and the notices it gives the learner. Works through the tokenizer's pieces, so a character
checkpoint traces one token per character and a GPT-2 one its BPE tokens. Knows nothing about the model or the UI.

    prepare_text("hello world", tokenizer, 5) -> "hello", notice "6 characters were dropped (context_size is 5)"
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from playground import checks
from playground.text.tokenizer import Tokenizer, UnknownCharacter, UnknownCharacterError


@dataclass
class PreparedText:
    """Typed text ready to trace."""

    ids: torch.Tensor  # (T,) token IDs, T <= context_size
    tokens: list[str]  # one readable label per token ("␣" for a space, "␣world" for a BPE piece)
    dropped_count: int  # tokens cut off the end to fit context_size
    notices: list[str] = field(default_factory=list)  # sentences to show the learner
    unknown: list[UnknownCharacter] = field(default_factory=list)  # unknown characters in the dropped tail


def prepare_text(text: str, tokenizer: Tokenizer, context_size: int) -> PreparedText:
    """Encode text for tracing, keeping its first context_size tokens.

    Raises ValueError("Type some text first") for empty text and UnknownCharacterError (naming each
    character and its position) for characters outside the vocabulary in the part that is kept.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if not text:
        raise ValueError("Type some text first")
    context_size = checks.whole_number(context_size, "context_size", 1)
    pieces = tokenizer.pieces(text)
    kept, tail = pieces[:context_size], pieces[context_size:]
    unknown_kept = [UnknownCharacter(i, text[i]) for p in kept if p.token_id is None for i in range(p.start, p.end)]
    if unknown_kept:
        raise UnknownCharacterError(unknown_kept)  # positions are positions in text
    notices = []
    unknown = [UnknownCharacter(i, text[i]) for p in tail if p.token_id is None for i in range(p.start, p.end)]
    if tail:
        name = tokenizer.token_name
        was = f"{name} was" if len(tail) == 1 else f"{name}s were"
        notice = f"{len(tail)} {was} dropped (context_size is {context_size})"
        if unknown:
            notice += f"; they included {len(unknown)} not in the vocabulary, which did not matter"
        notices.append(notice)
    ids = torch.tensor([p.token_id for p in kept], dtype=torch.long)
    return PreparedText(ids, [p.label for p in kept], len(tail), notices, unknown)
