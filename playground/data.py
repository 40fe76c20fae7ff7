"""Corpora and the token windows a model trains on.

Owns where training text comes from, in this order:
  1. an explicit path, or uploaded/pasted text;
  2. Tiny Shakespeare from the local cache (or the file named by ``PLAYGROUND_TINY_SHAKESPEARE``);
  3. a download of Tiny Shakespeare from its well-known URL, cached for next time;
  4. offline with nothing cached: the built-in corpus in ``assets/corpus/`` (no download needed).
Knows nothing about models; turns text into windows of token IDs with seeded batches.
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

logger = logging.getLogger(__name__)

TINY_SHAKESPEARE_NAME = "tinyshakespeare"
TINY_SHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINY_SHAKESPEARE_CHARS = 1_115_394
BUILTIN_CORPUS_PATH = Path(__file__).resolve().parent.parent / "assets" / "corpus" / "builtin.txt"
DOWNLOAD_TIMEOUT_SECONDS = 15


class CorpusError(ValueError):
    """The corpus cannot be used: empty, binary, too large, or unreadable."""


@dataclass(frozen=True)
class Corpus:
    name: str
    text: str
    source: str  # "path", "text", "cache", "download" or "builtin"

    def __len__(self) -> int:
        return len(self.text)


def cache_dir() -> Path:
    """``PLAYGROUND_CACHE_DIR`` or ``~/.cache/attention-playground``."""
    return Path(os.environ.get("PLAYGROUND_CACHE_DIR") or Path.home() / ".cache" / "attention-playground")


def offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes")
               for v in ("PLAYGROUND_OFFLINE", "HF_HUB_OFFLINE"))


def decode_text(raw: bytes, name: str, max_bytes: int | None = None) -> str:
    """Bytes of an upload -> text, refusing empty, oversized, binary or non-UTF-8 data."""
    if max_bytes is not None and len(raw) > max_bytes:
        raise CorpusError(f"{name} is {len(raw):,} bytes; the limit is {max_bytes:,} bytes")
    if not raw.strip():
        raise CorpusError(f"{name} is empty")
    if b"\x00" in raw:
        raise CorpusError(f"{name} looks binary (it contains NUL bytes); upload a UTF-8 text file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusError(f"{name} is not UTF-8 text (bad byte at offset {exc.start})") from None


def read_text_file(path: str | Path, max_bytes: int | None = None) -> str:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"cannot read {path.name}: {exc.strerror or exc}") from None
    return decode_text(raw, path.name, max_bytes)


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


def builtin_corpus() -> Corpus:
    return Corpus("builtin", BUILTIN_CORPUS_PATH.read_text(encoding="utf-8"), "builtin")


def tiny_shakespeare(allow_download: bool = True) -> Corpus:
    """Tiny Shakespeare from an explicit file, the cache, or a download; else the built-in corpus."""
    explicit = os.environ.get("PLAYGROUND_TINY_SHAKESPEARE")
    if explicit:
        return Corpus(TINY_SHAKESPEARE_NAME, read_text_file(explicit), "path")
    cached = cache_dir() / "tinyshakespeare.txt"
    if cached.is_file():
        return Corpus(TINY_SHAKESPEARE_NAME, read_text_file(cached), "cache")
    if allow_download and not offline():
        url = os.environ.get("PLAYGROUND_CORPUS_URL", TINY_SHAKESPEARE_URL)
        try:
            text = _download(url)
        except (OSError, urllib.error.URLError, CorpusError) as exc:
            logger.warning("Tiny Shakespeare download from %s failed (%s); using the built-in corpus", url, exc)
        else:
            _write_atomically(cached, text)
            return Corpus(TINY_SHAKESPEARE_NAME, text, "download")
    return builtin_corpus()


def load_corpus(path: str | Path | None = None, text: str | None = None, name: str | None = None,
                allow_download: bool = True) -> Corpus:
    """Resolve a corpus in the documented order (see the module docstring)."""
    if text is not None and text.strip():
        return Corpus(name or "pasted text", text, "text")
    if path is not None and str(path).strip():
        path = Path(path)
        if path.name == "tinyshakespeare" or str(path) in ("tinyshakespeare", "tiny_shakespeare"):
            return tiny_shakespeare(allow_download)
        return Corpus(name or path.stem, read_text_file(path), "path")
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
