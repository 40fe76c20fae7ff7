"""Character-level tokenizer: one token per character, IDs in sorted character order; and the interface every
tokenizer the app uses shares (``Tokenizer``), which subword.BPETokenizer also implements.

Owns the vocabulary and its JSON form. Knows nothing about models or files on disk.
On Tiny Shakespeare (65 symbols) "Hello world" -> [20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42].
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import torch


def escape_char(ch: str) -> str:
    """How a character reads in a table: "\\n" for newline, "␣" for space, "\\x07" for a control, "\\u200d" for an
    invisible one (a zero-width joiner, an emoji's variation selector "\\ufe0f"), and a combining mark on a dotted
    circle ("◌́"), since alone it would sit on the quote before it or on nothing."""
    named = {"\n": "\\n", "\t": "\\t", "\r": "\\r", " ": "␣"}
    if ch in named:
        return named[ch]
    code = ord(ch)
    if not ch.isprintable() or 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF:
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
    if unicodedata.category(ch) in ("Mn", "Me"):
        return "◌" + ch
    return ch


def escape_text(text: str) -> str:
    """escape_char on every character: "to be\n" -> "to␣be\\n"."""
    return "".join(escape_char(ch) for ch in text)


@dataclass(frozen=True)
class Piece:
    """One token of a text as a chip shows it: its ID (None: not in the vocabulary), the characters
    ``text[start:end]`` it came from, a readable label ("␣world") and a sentence for its hover."""

    token_id: int | None
    start: int
    end: int
    label: str
    detail: str = ""


@dataclass(frozen=True)
class UnknownCharacter:
    position: int
    character: str


def list_unknown(unknown: list[UnknownCharacter], at: str = "at", limit: int = 10) -> str:
    """The first ``limit`` unknown characters for a message, each quoted as escape_char shows it (not repr, which
    would double its backslash): ``'∑' at 6, '\\u200b' at 9 and 3 more``."""
    shown = ", ".join(f"'{escape_char(u.character)}' {at} {u.position}" for u in unknown[:limit])
    return shown + (f" and {len(unknown) - limit} more" if len(unknown) > limit else "")


class UnknownCharacterError(ValueError):
    """Text holds characters the vocabulary lacks; ``.unknown`` lists each with its position."""

    def __init__(self, unknown: list[UnknownCharacter]):
        self.unknown = unknown
        super().__init__(f"{len(unknown)} character(s) not in the vocabulary: {list_unknown(unknown, 'at position')}")


class VocabularySize(int):
    """An int that may also be called: ``tokenizer.vocabulary_size`` here, ``tokenizer.vocabulary_size()`` in the
    notebooks. Calling gives the plain int."""

    def __call__(self) -> int:
        return int(self)


class StreamDecoder(Protocol):
    def step(self, token_id: int, final: bool = False) -> str:
        """The text one more generated token adds ("" while it is part of a character still incomplete;
        ``final``: the last token, so an incomplete character comes out as "�" instead of waiting)."""


class Tokenizer(Protocol):
    """What the app asks of a tokenizer, whatever its kind (CharTokenizer, subword.BPETokenizer)."""

    kind: str  # "character" or "BPE"
    token_name: str  # what one token is called in a sentence: "character" or "token"

    @property
    def vocabulary_size(self) -> VocabularySize: ...

    @property
    def start_text(self) -> str: ...

    def encode(self, text: str) -> torch.Tensor: ...

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str: ...

    def find_unknown(self, text: str) -> list[UnknownCharacter]: ...

    def pieces(self, text: str) -> list[Piece]: ...

    def label(self, token_id: int) -> str: ...

    def stream_decoder(self) -> StreamDecoder: ...

    def describe(self) -> str: ...


def without_unknown(tokenizer: Tokenizer, text: str) -> str:
    """``text`` with the characters the vocabulary lacks left out: "a∑b" -> "ab" for a vocabulary of a and b."""
    unknown = {u.position for u in tokenizer.find_unknown(text)}
    return "".join(ch for i, ch in enumerate(text) if i not in unknown) if unknown else text


def labels(tokenizer: Tokenizer, ids: Iterable[int] | torch.Tensor) -> list[str]:
    """One readable label per token ID, for chips and heatmap axes: [46, 47] -> ["h", "i"]; " world" -> ["␣world"]."""
    if isinstance(ids, torch.Tensor):
        ids = ids.reshape(-1).tolist()
    return [tokenizer.label(int(i)) for i in ids]


class _CharStream:
    def __init__(self, tokenizer: CharTokenizer):
        self.tokenizer = tokenizer

    def step(self, token_id: int, final: bool = False) -> str:
        return self.tokenizer.decode([token_id])


class CharTokenizer:
    """Maps characters to integer IDs and back."""

    kind = "character"
    token_name = "character"

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
        """Text -> 1-D LongTensor of IDs; raises UnknownCharacterError naming each unknown character.

        Looks every code point up at once among the vocabulary's sorted code points (torch.searchsorted) rather than
        a character at a time: Tiny Shakespeare's 1.1M characters take about 30 ms, not 0.45 s, when a run starts.
        """
        if not text:
            return torch.empty(0, dtype=torch.long)
        codes = torch.frombuffer(bytearray(text.encode("utf-32-le", "surrogatepass")), dtype=torch.int32)
        sorted_codes, order = self._sorted_codes
        slots = torch.searchsorted(sorted_codes, codes).clamp_(max=len(sorted_codes) - 1)
        if not bool((sorted_codes[slots] == codes).all()):
            raise UnknownCharacterError(self.find_unknown(text))
        return order[slots]

    @functools.cached_property
    def _sorted_codes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The vocabulary's code points, sorted, and the ID of each: what encode looks characters up in."""
        codes = torch.tensor([ord(c) for c in self.characters], dtype=torch.int32)
        sorted_codes, order = torch.sort(codes)
        return sorted_codes, order.long()

    def decode(self, ids: Iterable[int] | torch.Tensor) -> str:
        if isinstance(ids, torch.Tensor):
            ids = ids.reshape(-1).tolist()
        out = []
        for i in ids:
            if not 0 <= int(i) < len(self.characters):
                raise ValueError(f"token id {i} is outside the vocabulary (0..{len(self.characters) - 1})")
            out.append(self.characters[int(i)])
        return "".join(out)

    @property
    def start_text(self) -> str:
        """What an empty prompt starts from: a newline, or the vocabulary's first symbol if it has none."""
        return "\n" if "\n" in self._ids else self.characters[0]

    def pieces(self, text: str) -> list[Piece]:
        """One piece per character; a character the vocabulary lacks has no ID."""
        out = []
        for position, ch in enumerate(text):
            token_id = self._ids.get(ch)
            meaning = "not in the vocabulary" if token_id is None else f"-> {token_id}"
            out.append(Piece(token_id, position, position + 1, escape_char(ch),
                             f"position {position}: {escape_char(ch)!r} {meaning}"))
        return out

    def label(self, token_id: int) -> str:
        return escape_char(self.decode([token_id]))

    def stream_decoder(self) -> StreamDecoder:
        return _CharStream(self)

    def describe(self) -> str:
        return f"character tokenizer, {self.vocabulary_size} characters"

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
