"""The one resolver from what a person types to a loaded checkpoint: a name, a Hub repo id, or a folder.

    open_checkpoint("shakespeare-char")                      -> weights/shakespeare-char/
    open_checkpoint("owner/name")                            -> downloaded from the Hub (hub.py), then loaded
    open_checkpoint("runs/tiny", allow_folders=True)         -> that folder (the CLI; never the web API)
    open_checkpoint("gpt2")                                  -> weights/gpt2/ if there is one, else the Hub's gpt2

Everything reads through ``checkpoints.load_checkpoint``, the one loader. ``source_key`` is the canonical
form of a source, so "big" and "big " name the same checkpoint (and the same cache entry).
Knows nothing about the UI; the app's cache of loaded checkpoints lives in ``ui/common.AppContext``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import torch

from playground import checks
from playground.budget import MemoryBudget
from playground.checkpoints import hub
from playground.checkpoints import store as checkpoints

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceKey:
    """What a typed source means: ``kind`` is "name", "hub" or "folder"; ``value`` its canonical text."""

    kind: str
    value: str


def source_key(source: str | Path, *, allow_folders: bool = False) -> SourceKey:
    """The canonical form of a checkpoint source, checked (names and repo ids validated, whitespace trimmed).

    " big " -> name "big"; "owner/name" -> hub; with ``allow_folders`` an existing folder (a Path, or text
    naming one) -> its absolute path, so "runs/tiny" and "./runs/tiny/" are one source.
    """
    if isinstance(source, Path):
        if not allow_folders:
            raise checkpoints.CheckpointError("a checkpoint is chosen by name or Hub repo id here, not by folder")
        return SourceKey("folder", str(source.expanduser().resolve()))
    if source is not None and not isinstance(source, str):  # an API client sent a file, a list, a number...
        raise checkpoints.CheckpointError(f"a checkpoint is chosen by its name or a Hub repo id (text), "
                                          f"not {type(source).__name__} {checks.shown(source)}")
    if source is None or not source.strip():
        raise checkpoints.CheckpointError("pick a checkpoint first (none is loaded)")
    text = source.strip()
    if allow_folders and Path(text).expanduser().is_dir():
        return SourceKey("folder", str(Path(text).expanduser().resolve()))
    if hub.is_hub_id(text):
        return SourceKey("hub", hub.validate_repo_id(text))
    return SourceKey("name", checkpoints.validate_name(text))


def weights_stamp(key: SourceKey, directory: Path | None = None) -> int | None:
    """A number that changes whenever a local checkpoint's weights file is replaced (None for Hub repos and
    for a folder without weights), to know when a cached copy is stale.

    Every save writes a new file, so the stamp mixes its inode with its modification time and size: two saves
    within one tick of the file system's clock still differ. Raises CheckpointError for a name that is not there.
    """
    if key.kind == "hub":
        return None
    if key.kind == "name" and not (checkpoints.weights_dir(directory)
                                   / key.value).exists() and hub.is_canonical_id(key.value):
        return None  # no local run of that name: the Hub's canonical repo (open_checkpoint) is what it opens
    folder = Path(key.value) if key.kind == "folder" else checkpoints.resolve(key.value, directory)
    try:
        stat = (folder / checkpoints.WEIGHTS_FILE).stat()
    except OSError:
        return None
    return hash((stat.st_ino, stat.st_mtime_ns, stat.st_size))


def open_checkpoint(source: str | Path | SourceKey, *, directory: Path | None = None,
                    device: torch.device | str = "cpu", max_parameters: int | None = None,
                    revision: str | None = None, allow_folders: bool = False,
                    memory_budget: MemoryBudget | None = None,
                    max_context: int | None = None) -> checkpoints.Checkpoint:
    """Load ``source`` (a name in ``directory``, a Hub repo id, or with ``allow_folders`` a folder path).

    A Hub repo is checked before its weights are fetched: against ``PLAYGROUND_HUB_ALLOW``, ``max_parameters``
    and ``memory_budget`` (default: a budget from this server's settings) for a forward of up to ``max_context``
    tokens (default: the model's context), and fetched without the server's
    token (see hub.py). Raises CheckpointError (or HubError) with a message naming what was asked for and where
    it was looked for.
    """
    key = source if isinstance(source, SourceKey) else source_key(source, allow_folders=allow_folders)
    if key.kind == "hub":
        return hub.load_from_hub(key.value, device, revision=revision, max_parameters=max_parameters,
                                 memory_budget=memory_budget, max_context=max_context)
    if key.kind == "folder":
        return checkpoints.load_checkpoint(Path(key.value), device=device, max_parameters=max_parameters)
    try:
        return checkpoints.load_checkpoint(key.value, directory=directory, device=device,
                                           max_parameters=max_parameters)
    except checkpoints.MissingCheckpointError as exc:
        folder = checkpoints.weights_dir(directory)
        what = "a name there, a folder path or a Hub id owner/name" if allow_folders else \
            "a name there or a Hub id owner/name"
        missing = f"{exc} in {folder}"
    if not hub.is_canonical_id(key.value):
        raise checkpoints.MissingCheckpointError(f"{missing} (give {what})")
    try:  # a canonical Hub id without an owner (gpt2, distilgpt2): no local run has the name, so the Hub's repo
        checkpoint = hub.load_from_hub(key.value, device, revision=revision, max_parameters=max_parameters,
                                       memory_budget=memory_budget, max_context=max_context)
    except hub.HubError as exc:
        if not hub.is_not_found(exc):
            raise hub.HubError(f"{missing}, so the Hub repo {key.value} was tried: {exc}") from None
        raise checkpoints.MissingCheckpointError(f"{missing}, nor a Hub repo {key.value} ({exc}; give {what})") \
            from None
    logger.info("no checkpoint named %r in %s: opened the Hub repo %s", key.value, folder, key.value)
    return checkpoint


def opened_from(checkpoint: checkpoints.Checkpoint, source: str | Path) -> str | None:
    """A sentence when ``source`` named no local run and the Hub's canonical repo of that name was opened
    instead (open_checkpoint("gpt2")), so the person who typed it knows which one they have; None otherwise."""
    text = str(source).strip()
    if checkpoint.name == text and not hub.is_hub_id(text) and hub.is_canonical_id(text) \
            and checkpoint.path.parent.name == "snapshots":
        return (f"no checkpoint named {text!r} here, so the Hugging Face Hub repo {text} was opened "
                f"({checkpoint.description})")
    return None
