"""Character-level tokenizer: one token per character, IDs in sorted character order.

Owns the vocabulary and its JSON form. Knows nothing about models or files on disk.
On Tiny Shakespeare (65 symbols) "Hello world" -> [20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch


def escape_char(ch: str) -> str:
    """How a character reads in a table: "\\n" for newline, "␣" for space, "\\x07" for a control."""
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r", " ": "␣"}
    if ch in named:
        return named[ch]
    if not ch.isprintable():
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return ch


@dataclass(frozen=True)
class UnknownCharacter:
    position: int
    character: str


class UnknownCharacterError(ValueError):
    """Text holds characters the vocabulary lacks; ``.unknown`` lists each with its position."""

    def __init__(self, unknown: list[UnknownCharacter]):
        self.unknown = unknown
        shown = ", ".join(f"{escape_char(u.character)!r} at position {u.position}" for u in unknown[:10])
        more = f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""
        super().__init__(f"{len(unknown)} character(s) not in the vocabulary: {shown}{more}")


class VocabularySize(int):
    """An int that may also be called: ``tokenizer.vocabulary_size`` here, ``tokenizer.vocabulary_size()`` in the
    notebooks. Calling gives the plain int."""

    def __call__(self) -> int:
        return int(self)


class CharTokenizer:
    """Maps characters to integer IDs and back."""

    def __init__(self, characters: Iterable[str]):
        chars = list(characters)
        if not chars:
            raise ValueError("a vocabulary needs at least one character")
        if any(not isinstance(c, str) or len(c) != 1 for c in chars):
            raise ValueError("every vocabulary entry must be a single character")
        if len(set(chars)) != len(chars):
            raise ValueError("the vocabulary has repeated characters")
        self.characters: tuple[str, ...] = tuple(chars)
        self._ids = {c: i for i, c in enumerate(chars)}

    @classmethod
    def train_from_text(cls, text: str) -> CharTokenizer:
        """The vocabulary is the text's unique characters in sorted order."""
        if not text:
            raise ValueError("cannot build a vocabulary from empty text")
        return cls(sorted(set(text)))

    @property
    def vocabulary_size(self) -> VocabularySize:
        """The number of symbols: an int, also callable as notebook 000 calls it (``tokenizer.vocabulary_size()``)."""
        return VocabularySize(len(self.characters))

    def find_unknown(self, text: str) -> list[UnknownCharacter]:
        return [UnknownCharacter(i, c) for i, c in enumerate(text) if c not in self._ids]

    def encode(self, text: str) -> torch.Tensor:
        """Text -> 1-D LongTensor of IDs; raises UnknownCharacterError naming each unknown character."""
        unknown = self.find_unknown(text)
        if unknown:
            raise UnknownCharacterError(unknown)
        return torch.tensor([self._ids[c] for c in text], dtype=torch.long)

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist()
        out = []
        for i in ids:
            if not 0 <= int(i) < len(self.characters):
                raise ValueError(f"token id {i} is outside the vocabulary (0..{len(self.characters) - 1})")
            out.append(self.characters[int(i)])
        return "".join(out)

    def to_dict(self) -> dict:
        return {"type": "char", "characters": list(self.characters)}

    @classmethod
    def from_dict(cls, data: dict) -> CharTokenizer:
        if not isinstance(data, dict) or data.get("type") != "char" or "characters" not in data:
            raise ValueError("not a character-tokenizer vocabulary (expected type 'char' and 'characters')")
        return cls(data["characters"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CharTokenizer) and other.characters == self.characters

    def __hash__(self) -> int:
        return hash(self.characters)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocabulary_size={self.vocabulary_size})"
