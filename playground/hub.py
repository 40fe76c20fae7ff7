"""Checkpoints from the Hugging Face Hub: a repo id like ``owner/name`` -> a loaded Checkpoint.

Owns the calls to ``huggingface_hub`` (imported inside functions, so importing this module costs nothing)
and turns their many exceptions into one, ``HubError``, with a message a learner can act on.
Only the five checkpoint files are ever downloaded (see checkpoints.py), never a pickle
(``*.bin``, ``*.pt``, ``*.pkl``), nor a pushed run's optimizer.safetensors (twice the weights' size, and only a
resumed run reads it: training resumes local runs, never a Hub repo); loading goes through
``checkpoints.load_checkpoint``, the one loader.

Settings are read when a function is called, not when huggingface_hub was imported:
``HF_ENDPOINT`` (a mirror or a test server), ``HF_HUB_CACHE`` / ``HF_HOME`` (the cache), and
``HF_HUB_OFFLINE=1`` or ``PLAYGROUND_OFFLINE=1`` (use the cache only, make no request).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import re
from pathlib import Path

import torch

from playground import checkpoints
from playground.settings import offline

logger = logging.getLogger(__name__)

CHECKPOINT_FILES = (
    checkpoints.CONFIG_FILE,
    checkpoints.WEIGHTS_FILE,
    checkpoints.VOCABULARY_FILE,
    checkpoints.TRAINING_FILE,
    checkpoints.CARD_FILE,
)
REQUIRED_FILES = (checkpoints.CONFIG_FILE, checkpoints.WEIGHTS_FILE, checkpoints.VOCABULARY_FILE)
PICKLE_PATTERNS = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle", "*.ckpt")
MAX_REPO_ID_LENGTH = 96
_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?"
_REPO_ID_PATTERN = re.compile(rf"^{_PART}/{_PART}$")


class HubError(ValueError):
    """A Hub checkpoint cannot be had: bad id, offline, no such repo or revision, or not a checkpoint."""


def validate_repo_id(repo_id: str) -> str:
    """``owner/name`` with letters, digits, '-', '_' and '.', at most 96 characters, no '..' or '--'.

    ``"karpathy/shakespeare-char"`` passes; ``"../x"``, ``"a/b/c"`` and ``"a"`` raise HubError.
    """
    if not isinstance(repo_id, str):
        raise HubError(f"a Hub repo id must be text, got {type(repo_id).__name__}")
    repo_id = repo_id.strip()
    if not repo_id:
        raise HubError("the Hub repo id is empty (expected owner/name)")
    if len(repo_id) > MAX_REPO_ID_LENGTH:
        raise HubError(f"the Hub repo id is {len(repo_id)} characters long; the limit is {MAX_REPO_ID_LENGTH}")
    if ".." in repo_id or "--" in repo_id or repo_id.endswith(".git") or not _REPO_ID_PATTERN.match(repo_id):
        raise HubError(
            f"{repo_id!r} is not a Hub repo id: expected owner/name using letters, digits, '-', '_' and '.' "
            "(each part starting and ending with a letter or digit, no '..' or '--')"
        )
    return repo_id


def is_hub_id(text: str) -> bool:
    """True for ``owner/name`` forms, which no local checkpoint name can take (names have no '/').

    Purely about the text: a relative folder path such as ``runs/tiny`` looks the same, so a caller
    that also accepts folder paths checks ``Path(text).is_dir()`` first.
    """
    try:
        validate_repo_id(text)
    except HubError:
        return False
    return True


def _cache_dir(cache_dir: Path | None) -> str | None:
    """``cache_dir``, else ``HF_HUB_CACHE``, else ``$HF_HOME/hub``, else huggingface_hub's default (None)."""
    if cache_dir is not None:
        return str(Path(cache_dir).expanduser())
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return os.path.expanduser(os.environ[variable])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    return None


def _endpoint() -> str | None:
    endpoint = os.environ.get("HF_ENDPOINT", "").strip().rstrip("/")
    return endpoint or None


def _causes(exc: BaseException) -> list[BaseException]:
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _is_connection_problem(exc: BaseException) -> bool:
    """A connection refused, a timeout or offline mode anywhere in the chain (httpx, httpx2 or requests)."""
    for cause in _causes(exc):
        name = type(cause).__name__
        if isinstance(cause, (ConnectionError, TimeoutError)) or "Connect" in name or "Timeout" in name \
                or name == "OfflineModeIsEnabled":
            return True
    return False


def _status_code(exc: BaseException) -> int | None:
    for cause in _causes(exc):
        response = getattr(cause, "response", None)
        code = getattr(response, "status_code", None)
        if isinstance(code, int):
            return code
    return None


def _translate(exc: Exception, repo_id: str, revision: str | None, local_only: bool) -> HubError:
    """One readable HubError for whatever snapshot_download raised."""
    from huggingface_hub.utils import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    not_cached = f"cannot reach the Hugging Face Hub (offline?) and {repo_id} is not in the local cache"
    if isinstance(exc, GatedRepoError):
        return HubError(f"{repo_id} is a gated repo: accept its terms on the Hub and log in (hf auth login)")
    if isinstance(exc, RepositoryNotFoundError):
        return HubError(f"no Hub repo named {repo_id} (or it is private)")
    if isinstance(exc, RevisionNotFoundError):
        return HubError(f"{repo_id} has no revision {revision!r} (a branch, tag or commit hash)")
    if isinstance(exc, LocalEntryNotFoundError):
        if type(exc).__name__ == "IncompleteSnapshotError":
            return HubError(f"cannot reach the Hugging Face Hub (offline?) and the cached copy of {repo_id} "
                            "is incomplete")
        status = None if local_only or _is_connection_problem(exc) else _status_code(exc)
        if status in (401, 404):
            return HubError(f"no Hub repo named {repo_id} (or it is private)")
        if status is not None:
            return HubError(f"the Hub answered HTTP {status} and {repo_id} is not in the local cache (try later)")
        if local_only and revision:
            return HubError(f"{not_cached} at revision {revision!r}")
        return HubError(not_cached)
    if _is_connection_problem(exc):
        return HubError(not_cached)
    status = _status_code(exc)
    if status is not None:
        return HubError(f"the Hub answered HTTP {status} while downloading {repo_id}: "
                        f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}")
    return HubError(f"downloading {repo_id} from the Hub failed: {type(exc).__name__}: {exc}")


def _snapshot(repo_id: str, revision: str | None, cache_dir: Path | None, patterns: list[str]) -> Path:
    from huggingface_hub import snapshot_download

    local_only = offline()
    try:
        return Path(snapshot_download(
            repo_id,
            revision=revision,
            cache_dir=_cache_dir(cache_dir),
            allow_patterns=patterns,
            ignore_patterns=list(PICKLE_PATTERNS),
            local_files_only=local_only,
            endpoint=_endpoint(),
        ))
    except Exception as exc:  # huggingface_hub, httpx and OS errors all end here, translated
        raise _translate(exc, repo_id, revision, local_only) from exc


def download_checkpoint(repo_id: str, revision: str | None = None, cache_dir: Path | None = None,
                        max_parameters: int | None = None) -> Path:
    """Download (or find in the cache) the checkpoint files of a Hub repo; return the snapshot folder.

    Offline (``HF_HUB_OFFLINE=1`` / ``PLAYGROUND_OFFLINE=1``) it makes no request and returns the cached
    snapshot if there is one. With ``max_parameters`` it fetches config.json first and refuses a model
    above that size before its weights are downloaded. Raises HubError (or CheckpointError for a config
    that is broken or too large); the repo id is checked before any request.
    """
    repo_id = validate_repo_id(repo_id)
    if revision is not None:
        if not isinstance(revision, str) or not revision.strip():
            raise HubError(f"the revision must be a branch, tag or commit hash, got {revision!r}")
        revision = revision.strip()
    if max_parameters is not None:
        folder = _snapshot(repo_id, revision, cache_dir, [checkpoints.CONFIG_FILE])
        if not (folder / checkpoints.CONFIG_FILE).is_file():
            raise HubError(f"{repo_id} is not an Attention Playground checkpoint: it has no {checkpoints.CONFIG_FILE}")
        checkpoints.check_size(checkpoints.read_config(folder), repo_id, max_parameters)
    path = _snapshot(repo_id, revision, cache_dir, list(CHECKPOINT_FILES))
    for name in REQUIRED_FILES:
        if not (path / name).is_file():
            raise HubError(f"{repo_id} is not an Attention Playground checkpoint: it has no {name}")
    logger.info("Hub checkpoint %s is at %s", repo_id, path)
    return path


def load_from_hub(repo_id: str, device: torch.device | str = "cpu", *, revision: str | None = None,
                  cache_dir: Path | None = None, max_parameters: int | None = None) -> checkpoints.Checkpoint:
    """Download then load with ``checkpoints.load_checkpoint``; the Checkpoint is named after the repo.

    Raises HubError for Hub problems and CheckpointError when the files themselves are broken.
    """
    path = download_checkpoint(repo_id, revision=revision, cache_dir=cache_dir, max_parameters=max_parameters)
    repo_id = repo_id.strip()
    try:
        checkpoint = checkpoints.load_checkpoint(path, device=device, max_parameters=max_parameters)
    except checkpoints.CheckpointError as exc:
        raise checkpoints.CheckpointError(f"{repo_id}: {exc}") from None
    return dataclasses.replace(checkpoint, name=repo_id)
