"""The one place that saves, lists and loads checkpoints in ``weights/<name>/``.

A checkpoint is a folder of plain files, never a pickle:
  config.json        the ModelConfig
  model.safetensors  the weights
  vocabulary.json    the tokenizer
  training.json      optional: how it was trained (steps, losses, speed, corpus, device, seed)
  README.md          optional: the model card
  optimizer.safetensors  optional: the optimizer's state, so a resumed run goes on warm (optim_state.py)
Saving is atomic: files go to a temporary folder beside the target, which then replaces it by
rename, so a crash leaves either the old checkpoint or the new one, never half of one.
Listing and loading only read. What a crash can leave behind (``.tmp-`` and ``.old-`` folders) is cleared
by ``recover``, which the app runs once at start-up and the training CLI once before it starts.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from playground.config import ConfigError, ModelConfig
from playground.model import GPT
from playground.optim_state import OptimizerState
from playground.tokenizer import CharTokenizer

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
VOCABULARY_FILE = "vocabulary.json"
TRAINING_FILE = "training.json"
CARD_FILE = "README.md"
OPTIMIZER_FILE = "optimizer.safetensors"
LOCK_FILE = ".lock"
DEFAULT_CHECKPOINT = "shakespeare-char"
REPO_WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "weights"
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class CheckpointError(ValueError):
    """A checkpoint is missing, incomplete, corrupt or does not match its config."""


class MissingCheckpointError(CheckpointError):
    """No checkpoint folder has that name (as opposed to one that exists but is broken)."""


@dataclass
class Checkpoint:
    name: str
    path: Path
    config: ModelConfig
    tokenizer: CharTokenizer
    model: GPT
    training: dict[str, Any] | None

    @property
    def val_loss(self) -> float | None:
        losses = (self.training or {}).get("val_loss") or []
        return float(losses[-1][1]) if losses else None

    @property
    def steps(self) -> int:
        return int((self.training or {}).get("steps_done", 0))


def weights_dir() -> Path:
    """``PLAYGROUND_WEIGHTS_DIR`` or the repository's ``weights/``."""
    return Path(os.environ.get("PLAYGROUND_WEIGHTS_DIR") or REPO_WEIGHTS_DIR)


def validate_name(name: str) -> str:
    """A run or checkpoint name: letters, digits, '.', '_' and '-', at most 64, no '..' or separators."""
    if not isinstance(name, str):
        raise CheckpointError(f"a checkpoint name must be text, got {type(name).__name__}")
    name = name.strip()
    if not name:
        raise CheckpointError("the checkpoint name is empty")
    if len(name) > 64:
        raise CheckpointError(f"the checkpoint name is {len(name)} characters long; the limit is 64")
    if ".." in name or not _NAME_PATTERN.match(name):
        raise CheckpointError(
            f"checkpoint name {name!r} is not allowed: use letters, digits, '.', '_' and '-' "
            "(no path separators, no '..', not starting with '.')"
        )
    return name


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _fsync_tree(folder: Path) -> None:
    for file in folder.iterdir():
        with open(file, "rb") as handle:
            os.fsync(handle.fileno())
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _folder_lock(parent: Path, blocking: bool = True):
    """An advisory lock on ``parent/.lock`` shared by saves and recovery, across processes.

    Yields True when held; with ``blocking=False`` yields False instead of waiting. The OS drops the
    lock when its process dies, so a killed save never leaves it held.
    """
    parent.mkdir(parents=True, exist_ok=True)
    with open(parent / LOCK_FILE, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def _claimed_temporary(parent: Path, name: str):
    """A fresh ``.tmp-<name>-*`` folder beside the target, locked for as long as the save runs.

    It is made under the folder lock, which ``recover`` holds while it looks, so recovery never sees it
    unclaimed; the claim is an flock on the folder itself, which the OS drops when the saving process dies.
    """
    with _folder_lock(parent):
        tmp = Path(tempfile.mkdtemp(dir=parent, prefix=f".tmp-{name}-"))
        claim = os.open(tmp, os.O_RDONLY)
        fcntl.flock(claim, fcntl.LOCK_EX)
    try:
        yield tmp
    finally:
        os.close(claim)  # closing drops the flock


def save_checkpoint(model: GPT, tokenizer: CharTokenizer, name: str, *, directory: Path | None = None,
                    training: dict[str, Any] | None = None, card: str | None = None,
                    optimizer_state: OptimizerState | None = None) -> Path:
    """Write ``<directory>/<name>/`` atomically and return its path.

    ``optimizer_state`` is ``optim_state.flatten_optimizer_state(optimizer, model)``; it is written as
    optimizer.safetensors in the same folder, replaced with the weights or not at all.
    """
    name = validate_name(name)
    if tokenizer.vocabulary_size != model.config.vocabulary_size:
        raise CheckpointError(
            f"tokenizer has {tokenizer.vocabulary_size} symbols but the model expects "
            f"{model.config.vocabulary_size}"
        )
    parent = Path(directory) if directory is not None else weights_dir()
    parent.mkdir(parents=True, exist_ok=True)
    target = parent / name
    with _claimed_temporary(parent, name) as tmp:
        try:
            _write_json(tmp / CONFIG_FILE, model.config.to_dict())
            state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
            save_file(state, str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
            _write_json(tmp / VOCABULARY_FILE, tokenizer.to_dict())
            if training is not None:
                _write_json(tmp / TRAINING_FILE, training)
            if card is not None:
                (tmp / CARD_FILE).write_text(card, encoding="utf-8")
            if optimizer_state is not None:
                tensors, metadata = optimizer_state
                save_file({k: v.detach().to("cpu").contiguous() for k, v in tensors.items()},
                          str(tmp / OPTIMIZER_FILE), metadata={**metadata, "format": "pt"})
            _fsync_tree(tmp)
            with _folder_lock(parent):
                if target.exists():
                    old = parent / f".old-{name}-{uuid.uuid4().hex[:8]}"
                    os.rename(target, old)
                    os.rename(tmp, target)
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    os.rename(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def write_card(name: str, card: str, *, directory: Path | None = None) -> Path:
    """Write (or replace) a checkpoint's model card, README.md, atomically."""
    path = resolve(name, directory) / CARD_FILE
    tmp = path.with_name(f".{CARD_FILE}.tmp")
    tmp.write_text(card, encoding="utf-8")
    os.replace(tmp, path)
    return path


def recover(directory: Path | None = None) -> None:
    """Undo what a crash mid-save can leave: put a lone ``.old-`` copy back, delete abandoned ``.tmp-`` folders.

    Run once at start-up (build_app, the training CLI), never by listing. Works under the save lock, and not
    at all while another process holds it (its ``.old-`` copy is not a leftover then). A ``.tmp-`` folder
    is abandoned, whatever its age, when no live save holds its claim (see ``_claimed_temporary``), so a
    save running in another process is never touched. A folder it may not write to is left as it is.
    """
    parent = Path(directory) if directory is not None else weights_dir()
    if not parent.is_dir():
        return
    try:
        with _folder_lock(parent, blocking=False) as held:
            if held:
                _recover_unlocked(parent)
    except OSError as exc:
        logger.warning("could not clear what crashed saves left in %s: %s", parent, exc)


def _abandoned(entry: Path) -> bool:
    """True when no live save claims ``entry``: its process died (the OS dropped the flock)."""
    try:
        claim = os.open(entry, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(claim)
    return True


def _recover_unlocked(parent: Path) -> None:
    for entry in parent.iterdir():
        if entry.name.startswith(".old-"):
            original = parent / entry.name[len(".old-"):].rsplit("-", 1)[0]
            if not original.exists():
                os.rename(entry, original)
                logger.info("restored %s from %s (a save was killed between two renames)", original.name, entry.name)
            else:
                shutil.rmtree(entry, ignore_errors=True)
        elif entry.name.startswith(".tmp-") and _abandoned(entry):
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def list_checkpoints(directory: Path | None = None) -> list[str]:
    """Names of complete checkpoints, the default first. Only reads: leftovers of crashes are ``recover``'s."""
    parent = Path(directory) if directory is not None else weights_dir()
    if not parent.is_dir():
        return []
    names = sorted(
        entry.name for entry in parent.iterdir()
        if entry.is_dir() and not entry.name.startswith(".") and (entry / WEIGHTS_FILE).is_file()
        and (entry / CONFIG_FILE).is_file()
    )
    if DEFAULT_CHECKPOINT in names:
        names.remove(DEFAULT_CHECKPOINT)
        names.insert(0, DEFAULT_CHECKPOINT)
    return names


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path.parent.name} has no {path.name}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path.parent.name}/{path.name} is unreadable or not JSON: {exc}") from None


def resolve(name_or_path: str | Path, directory: Path | None = None) -> Path:
    """A checkpoint name in the weights folder, or a folder path (a Path, or text with a separator)."""
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or "/" in text or os.sep in text:
        candidate = Path(name_or_path)
        if candidate.is_dir() and (candidate / CONFIG_FILE).exists():
            return candidate
        if isinstance(name_or_path, Path):
            raise CheckpointError(f"{candidate} is not a checkpoint folder (no {CONFIG_FILE})")
    name = validate_name(text)
    path = (Path(directory) if directory is not None else weights_dir()) / name
    if not path.is_dir():
        raise MissingCheckpointError(f"no checkpoint named {name!r}")
    return path


def read_config(folder: Path) -> ModelConfig:
    """The ModelConfig in ``folder/config.json``, or a CheckpointError saying what is wrong with it."""
    try:
        return ModelConfig.from_dict(_read_json(Path(folder) / CONFIG_FILE))
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"{Path(folder).name}/{CONFIG_FILE} is not a valid model config: {exc}") from None


def check_size(config: ModelConfig, name: str, max_parameters: int | None) -> None:
    """Refuse a model above ``max_parameters`` (None: no cap) before its weights are read."""
    if max_parameters is not None and config.parameter_count() > max_parameters:
        raise CheckpointError(
            f"{name} has {config.parameter_count():,} parameters; this server's limit is {max_parameters:,}"
        )


def load_checkpoint(name_or_path: str | Path, *, directory: Path | None = None,
                    device: torch.device | str = "cpu", max_parameters: int | None = None) -> Checkpoint:
    """Load config, vocabulary and weights strictly (a missing or unexpected key is an error).

    ``max_parameters`` refuses a model larger than that before its weights are read.
    """
    path = resolve(name_or_path, directory)
    config = read_config(path)
    try:
        tokenizer = CharTokenizer.from_dict(_read_json(path / VOCABULARY_FILE))
    except ValueError as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path.name}/{VOCABULARY_FILE} is not a valid vocabulary: {exc}") from None
    check_size(config, path.name, max_parameters)
    if tokenizer.vocabulary_size != config.vocabulary_size:
        raise CheckpointError(
            f"{path.name}: vocabulary has {tokenizer.vocabulary_size} symbols, config says {config.vocabulary_size}"
        )
    weights_path = path / WEIGHTS_FILE
    if not weights_path.is_file():
        raise CheckpointError(f"{path.name} has no {WEIGHTS_FILE}")
    try:
        state = load_file(str(weights_path), device="cpu")
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path.name}/{WEIGHTS_FILE} is corrupt or not safetensors: {exc}") from None
    model = GPT(config)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing keys: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"unexpected keys: {', '.join(unexpected[:5])}{' ...' if len(unexpected) > 5 else ''}")
        raise CheckpointError(f"{path.name}: weights do not match the config ({'; '.join(parts)})")
    for key, tensor in state.items():
        if tensor.shape != expected[key].shape:
            raise CheckpointError(
                f"{path.name}: {key} has shape {tuple(tensor.shape)}, the config needs {tuple(expected[key].shape)}"
            )
    model.load_state_dict(state, strict=True)
    model.to(device).eval()
    training = _read_json(path / TRAINING_FILE) if (path / TRAINING_FILE).is_file() else None
    return Checkpoint(path.name, path, config, tokenizer, model, training)


def load_optimizer_state(name_or_path: str | Path, directory: Path | None = None) -> OptimizerState | None:
    """The optimizer state saved with a checkpoint, on the CPU, or None when it was saved without one.

    Give it to ``optim_state.restore_optimizer_state(optimizer, model, *state)``.
    """
    path = resolve(name_or_path, directory)
    file = path / OPTIMIZER_FILE
    if not file.is_file():
        return None
    try:
        with safe_open(str(file), framework="pt", device="cpu") as handle:
            metadata = dict(handle.metadata() or {})
            tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path.name}/{OPTIMIZER_FILE} is corrupt or not safetensors: {exc}") from None
    metadata.pop("format", None)
    return OptimizerState(tensors, metadata)
