"""Corpora and the token windows a model trains on.

Owns where training text comes from, in this order:
  1. uploaded or pasted text, or an explicit path (``tinyshakespeare`` by itself names Tiny Shakespeare);
  2. Tiny Shakespeare from the local cache (or the file named by ``PLAYGROUND_TINY_SHAKESPEARE``);
  3. a download of Tiny Shakespeare from its well-known URL, cached for next time;
  4. offline with nothing cached: the built-in corpus in ``assets/corpus/`` (no download needed).
Every ``Corpus`` says what it is (``label``), why it is that text (``reason``) and whether a visitor gave it
(``from_visitor``: the server's upload cap applies). Knows nothing about models; turns text into windows of
token IDs with seeded batches. Where the cache is and whether the network may be used: settings.py.
"""

from __future__ import annotations

import logging
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import torch

from playground.settings import PROJECT_ROOT, cache_dir, offline

logger = logging.getLogger(__name__)

TINY_SHAKESPEARE_NAME = "tinyshakespeare"
TINY_SHAKESPEARE_KEYWORDS = (TINY_SHAKESPEARE_NAME, "tiny_shakespeare")  # said instead of a path: Tiny Shakespeare
TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINY_SHAKESPEARE_CHARS = 1_115_394
BUILTIN_CORPUS_PATH = PROJECT_ROOT / "assets" / "corpus" / "builtin.txt"
DOWNLOAD_TIMEOUT_SECONDS = 15
VISITOR_SOURCES = ("upload", "text")  # text a visitor gave; every other source is the server's own


class CorpusError(ValueError):
    """The corpus cannot be used: empty, binary, too large, or unreadable."""


def is_tiny_shakespeare(name: str | None, source: str | None = None) -> bool:
    """Whether the corpus called ``name``, from ``source``, is Tiny Shakespeare.

    Answers for a Corpus and for the ``corpus`` record in a checkpoint's training.json alike
    (``{"name": "tinyshakespeare", "source": "path", ...}``). A visitor's text is never Tiny Shakespeare,
    whatever it is called; a server file named ``tinyshakespeare.txt`` is.
    """
    return name == TINY_SHAKESPEARE_NAME and source not in (*VISITOR_SOURCES, "builtin")


@dataclass(frozen=True)
class Corpus:
    """Text to train on, where it came from, and why it is this text.

    ``source``: "path" (a file the command line or ``PLAYGROUND_TINY_SHAKESPEARE`` named), "upload" (a
    visitor's file), "text" (pasted), "cache" or "download" (Tiny Shakespeare), "builtin" (the Sonnets).
    ``reason``: a clause a learner can read, such as "offline and Tiny Shakespeare is not cached, so the
    built-in Sonnets are used".
    """

    name: str
    text: str
    source: str
    reason: str = ""

    def __len__(self) -> int:
        return len(self.text)

    @property
    def is_tiny_shakespeare(self) -> bool:
        return is_tiny_shakespeare(self.name, self.source)

    @property
    def from_visitor(self) -> bool:
        """True for an upload or pasted text, which the server's upload cap limits; False for the server's own
        corpora (Tiny Shakespeare, the built-in Sonnets, a file named on the command line)."""
        return self.source in VISITOR_SOURCES

    @property
    def label(self) -> str:
        """What to call it in a sentence: "Tiny Shakespeare", "the built-in Sonnets corpus", "an uploaded file"...

        Every visitor reads it in a run's status, so it says "an", not "your"."""
        if self.is_tiny_shakespeare:
            return "Tiny Shakespeare"
        return {"builtin": "the built-in Sonnets corpus", "upload": "an uploaded file",
                "text": "the pasted text"}.get(self.source, f"the {self.name} corpus")


def decode_text(raw: bytes, name: str, max_bytes: int | None = None, size: int | None = None) -> str:
    """Bytes of an upload -> text, refusing empty, oversized, binary, UTF-16 or other non-UTF-8 data.

    ``size`` is the whole file's size where ``raw`` holds only its first ``max_bytes + 1`` bytes; a UTF-8
    byte-order mark is dropped (it would be a character of the vocabulary).
    """
    size = max(len(raw), size or 0)
    if max_bytes is not None and size > max_bytes:
        raise CorpusError(f"{name} is {size:,} bytes; the limit is {max_bytes:,} bytes")
    if not raw.strip():
        raise CorpusError(f"{name} is empty")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or _mostly_alternate_nuls(raw):
        raise CorpusError(f"{name} is UTF-16 text; save it as UTF-8 and upload it again")
    if b"\x00" in raw:
        raise CorpusError(f"{name} looks binary (it contains NUL bytes); upload a UTF-8 text file")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{name} is not UTF-8 text (bad byte at offset {exc.start})") from None


def _mostly_alternate_nuls(raw: bytes) -> bool:
    """UTF-16 without a byte-order mark: ASCII text's every other byte is NUL (and only those)."""
    head = raw[:4096]
    for offset in (0, 1):
        nuls, others = head[offset::2].count(0), head[1 - offset::2].count(0)
        if nuls >= 0.9 * len(head[offset::2]) and others == 0 and len(head) >= 4:
            return True
    return False


def read_text_file(path: str | Path, max_bytes: int | None = None) -> str:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    return decode_text(raw, repr(path.name), max_bytes)


def _download(url: str) -> str:
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_SECONDS) as response:  # noqa: S310
        raw = response.read(50_000_000)
    return decode_text(raw, "the downloaded corpus")


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".txt")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def builtin_corpus(reason: str = "the built-in Sonnets were asked for") -> Corpus:
    return Corpus("builtin", BUILTIN_CORPUS_PATH.read_text(encoding="utf-8"), "builtin", reason)


def tiny_shakespeare(allow_download: bool = True) -> Corpus:
    """Tiny Shakespeare from an explicit file, the cache, or a download; else the built-in corpus."""
    explicit = os.environ.get("PLAYGROUND_TINY_SHAKESPEARE")
    if explicit:
        return Corpus(TINY_SHAKESPEARE_NAME, read_text_file(explicit), "path",
                      "read from the copy this server names (PLAYGROUND_TINY_SHAKESPEARE)")
    cached = cache_dir() / "tinyshakespeare.txt"
    if cached.is_file():
        return Corpus(TINY_SHAKESPEARE_NAME, read_text_file(cached), "cache", "read from this server's cache")
    if offline():
        return builtin_corpus("offline and Tiny Shakespeare is not cached, so the built-in Sonnets are used")
    if not allow_download:
        return builtin_corpus("Tiny Shakespeare is not cached and downloading it was not allowed, "
                              "so the built-in Sonnets are used")
    url = os.environ.get("PLAYGROUND_CORPUS_URL", TINY_SHAKESPEARE_URL)
    try:
        text = _download(url)
    except (OSError, urllib.error.URLError, CorpusError) as exc:
        logger.warning("Tiny Shakespeare download from %s failed (%s); using the built-in corpus", url, exc)
        return builtin_corpus("the Tiny Shakespeare download failed, so the built-in Sonnets are used")
    _write_atomically(cached, text)
    return Corpus(TINY_SHAKESPEARE_NAME, text, "download", "downloaded once and cached for next time")


def load_corpus(path: str | Path | None = None, text: str | None = None, name: str | None = None,
                allow_download: bool = True, *, uploaded: bool = False) -> Corpus:
    """Resolve a corpus in the documented order (see the module docstring).

    ``text`` is pasted text, or with ``uploaded=True`` the decoded contents of a visitor's file; either way
    ``Corpus.from_visitor`` is true. ``path`` is a file the server names; the bare word ``tinyshakespeare``
    (or ``tiny_shakespeare``) instead of a path means Tiny Shakespeare, from wherever it can be had.
    """
    if text is not None and text.strip():
        if uploaded:
            return Corpus(name or "uploaded file", text, "upload", "a visitor uploaded it")
        return Corpus(name or "pasted text", text, "text", "a visitor pasted it")
    if path is not None and str(path).strip():
        if str(path).strip() in TINY_SHAKESPEARE_KEYWORDS:
            return tiny_shakespeare(allow_download)
        path = Path(path)
        return Corpus(name or path.stem, read_text_file(path), "path", f"read from {path.name}")
    return tiny_shakespeare(allow_download)


def split_train_val(ids: torch.Tensor, val_fraction: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """The first 90% trains, the last 10% validates: 100 ids -> 90 and 10."""
    n_train = int(len(ids) * (1 - val_fraction))
    return ids[:n_train], ids[n_train:]


class TokenIdsDataset(torch.utils.data.Dataset):
    """Windows of ``block_size`` inputs, targets shifted by one.

    data 1..9, block 4 -> 5 pairs; the first is x=[1, 2, 3, 4], y=[2, 3, 4, 5].
    """

    def __init__(self, data: torch.Tensor, block_size: int):
        if block_size <= 0:
            raise ValueError(f"block_size must be positive, got {block_size}")
        if len(data) <= block_size:
            raise CorpusError(
                f"the text has {len(data):,} tokens, too few for context_size {block_size} "
                f"(it needs at least {block_size + 1})"
            )
        self.data = data
        self.block_size = block_size

    def __len__(self) -> int:
        return len(self.data) - self.block_size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        return self.data[index:index + self.block_size], self.data[index + 1:index + self.block_size + 1]

    def random_batch(self, batch_size: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """``batch_size`` windows at seeded random offsets: x and y of shape (B, block_size)."""
        starts = torch.randint(len(self), (batch_size,), generator=generator)
        offsets = starts[:, None] + torch.arange(self.block_size)  # (B, T)
        return self.data[offsets], self.data[offsets + 1]
