"""Typed text -> the token IDs a checkpoint head is traced on: cut to the model's context, unknowns named.

Owns ``prepare_text`` and the notices it gives the learner. Knows nothing about the model or the UI.

    prepare_text("hello world", tokenizer, 5) -> "hello", notice "6 characters were dropped (context_size is 5)"
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from playground import checks
from playground.tokenizer import CharTokenizer, UnknownCharacter, escape_char


@dataclass
class PreparedText:
    """Typed text ready to trace."""

    ids: torch.Tensor  # (T,) token IDs, T <= context_size
    tokens: list[str]  # one readable label per token ("␣" for a space)
    dropped_count: int  # characters cut off the end to fit context_size
    notices: list[str] = field(default_factory=list)  # sentences to show the learner
    unknown: list[UnknownCharacter] = field(default_factory=list)  # unknown characters in the dropped tail


def prepare_text(text: str, tokenizer: CharTokenizer, context_size: int) -> PreparedText:
    """Encode text for tracing, keeping its first context_size characters.

    Raises ValueError("Type some text first") for empty text and UnknownCharacterError (naming each
    character and its position) for characters outside the vocabulary in the part that is kept.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if not text:
        raise ValueError("Type some text first")
    context_size = checks.whole_number(context_size, "context_size", 1)
    kept, tail = text[:context_size], text[context_size:]
    ids = tokenizer.encode(kept)  # raises UnknownCharacterError; positions are positions in text
    notices = []
    unknown = [UnknownCharacter(context_size + u.position, u.character) for u in tokenizer.find_unknown(tail)]
    if tail:
        was = "character was" if len(tail) == 1 else "characters were"
        notice = f"{len(tail)} {was} dropped (context_size is {context_size})"
        if unknown:
            notice += f"; they included {len(unknown)} not in the vocabulary, which did not matter"
        notices.append(notice)
    return PreparedText(ids, [escape_char(c) for c in kept], len(tail), notices, unknown)
