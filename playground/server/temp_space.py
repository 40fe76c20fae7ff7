"""Gradio's temp space under one quota: the files visitors upload and the exports the app writes for them to download
share ``max_bytes``, swept by age (older than ``max_age_seconds``) and then by size (oldest first).

Gradio itself deletes what it served more than an hour ago every ten minutes (``delete_cache``), which bounds the
space by time only: at a high enough rate an hour of files is any size. ``sweep`` runs before each write the app
makes there (an export) and as each upload reaches a handler, so the space holds at most its quota whatever the
rate. What is in use (``keep``: the upload a handler is reading) is never removed, nor is an upload still being
written (``is_partial``: Gradio's ``tmp*`` file at the top of the folder, written to within PARTIAL_SECONDS), which
is not counted either: the upload's reservation counts it (server/uploads.py). ``remove_partials`` removes what a
dropped upload left.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger(__name__)


PARTIAL_SECONDS = 60.0  # an upload being written gets a chunk at least every read timeout (server/bodies.py, 20 s)
PARTIAL_PREFIX = "tmp"  # Gradio's NamedTemporaryFile, at the top of its upload folder, until the upload is whole


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


def is_partial(root: Path, path: Path, modified: float, now: float, *, stale_too: bool = False) -> bool:
    """Whether ``path`` is an upload Gradio is still writing (``stale_too``: or one it stopped writing)."""
    return (path.parent == Path(root) and path.name.startswith(PARTIAL_PREFIX)
            and (stale_too or now - modified < PARTIAL_SECONDS))


def usage(root: Path, *, counted_only: bool = False) -> int:
    """Bytes of the files under ``root`` (``counted_only``: less the uploads still being written)."""
    root, now = Path(root), time.time()
    if not root.is_dir():
        return 0
    return sum(size for modified, size, path in _files(root)
               if not (counted_only and is_partial(root, path, modified, now)))


def remove_partials(root: Path, *, all_of_them: bool = False) -> int:
    """Remove the uploads left half-written under ``root``: those no longer written to (``all_of_them``: every one,
    when no upload is in flight). Returns the bytes removed."""
    root, now, removed = Path(root), time.time(), 0
    if not root.is_dir():
        return 0
    for modified, size, path in _files(root):
        if is_partial(root, path, modified, now, stale_too=True) and (
                all_of_them or not is_partial(root, path, modified, now)):
            try:
                path.unlink()
            except OSError:
                continue
            removed += size
    return removed


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
    files = [entry for entry in _files(root) if not is_partial(root, entry[2], entry[0], now)]
    total = sum(size for _, size, _ in files) + incoming
    files = [entry for entry in files if entry[2].resolve() not in kept]
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
