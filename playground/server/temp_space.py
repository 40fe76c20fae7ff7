"""Gradio's temp space under one quota: the files visitors upload and the exports the app writes for them to download
share ``max_bytes``, swept by age (older than ``max_age_seconds``) and then by size (oldest first).

Gradio itself deletes what it served more than an hour ago every ten minutes (``delete_cache``), which bounds the
space by time only: at a high enough rate an hour of files is any size. ``sweep`` runs before each write the app
makes there (an export) and as each upload reaches a handler, so the space holds at most its quota whatever the
rate. What is in use (``keep``: the upload a handler is reading) is never removed.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger(__name__)


class TempSpaceError(ValueError):
    """A write that could not fit the temp space's quota even when it is empty."""


def _files(root: Path) -> list[tuple[float, int, Path]]:
    """(modified time, bytes, path) of every file under ``root``, oldest first; links are not followed."""
    found = []
    for folder, _folders, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            try:
                status = path.lstat()
            except OSError:  # removed meanwhile
                continue
            found.append((status.st_mtime, status.st_size, path))
    return sorted(found)


def usage(root: Path) -> int:
    """Bytes of the files under ``root``."""
    return sum(size for _, size, _ in _files(Path(root))) if Path(root).is_dir() else 0


def sweep(root: Path, max_bytes: int, max_age_seconds: float, *, incoming: int = 0, keep: Iterable[Path] = (),
          now: float | None = None) -> int:
    """Delete files under ``root`` older than ``max_age_seconds``, then the oldest until the rest and ``incoming``
    bytes fit ``max_bytes``; empty folders go too. Returns the bytes removed.

    Raises TempSpaceError, removing nothing, when ``incoming`` alone is over ``max_bytes``.

        quota 100 MB, 120 MB of exports, a new one of 10 MB -> the oldest 30 MB go
    """
    root = Path(root)
    if incoming > max_bytes:
        raise TempSpaceError(f"this would write about {incoming:,} bytes to the server's temp space, more than its "
                             f"quota of {max_bytes:,} bytes (PLAYGROUND_MAX_TEMP_BYTES): ask for less")
    if not root.is_dir():
        return 0
    now = time.time() if now is None else now
    kept = {Path(path).resolve() for path in keep}
    files = [entry for entry in _files(root) if entry[2].resolve() not in kept]
    total = usage(root) + incoming
    removed = 0
    for modified, size, path in files:
        if now - modified <= max_age_seconds and total <= max_bytes:
            break
        try:
            path.unlink()
        except OSError:  # another request removed it first
            continue
        total, removed = total - size, removed + size
    for folder, folders, names in os.walk(root, topdown=False):
        if Path(folder) != root and not folders and not names:
            try:
                os.rmdir(folder)
            except OSError:
                pass
    if removed:
        logger.info("temp space %s: removed %d bytes (quota %d bytes, files older than %g s)", root, removed,
                    max_bytes, max_age_seconds)
    return removed
