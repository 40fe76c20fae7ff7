"""The one place that saves, lists and loads checkpoints in ``weights/<name>/``.

A checkpoint is a folder of plain files, never a pickle:
  config.json        the ModelConfig
  model.safetensors  the weights (a tied LM head is stored once, as the token embedding)
  vocabulary.json    the character tokenizer, or
  tokenizer.json     a BPE tokenizer (subword.BPETokenizer)
  training.json      optional: how it was trained (steps, losses, speed, corpus, device, seed)
  README.md          optional: the model card
  optimizer.safetensors  optional: the optimizer's state, so a resumed run goes on warm (optim_state.py)
Saving is atomic: files go to a temporary folder beside the target, which then replaces it by
rename, so a crash leaves either the old checkpoint or the new one, never half of one.
The loader also opens Hugging Face's GPT-2 layout (config.json with ``"model_type": "gpt2"``, model.safetensors,
tokenizer.json), mapped into the playground's model by gpt2.py: ``read_config`` and ``load_checkpoint`` tell the
two layouts apart by config.json. Listing and loading only read. What a crash can leave behind (``.tmp-`` and
``.old-`` folders) is cleared by ``recover``, which the app runs once at start-up and the training CLI once
before it starts.

Who may write what (the app asks; the command line is the operator's and may write any name):
  * shipped checkpoints (``SHIPPED_CHECKPOINTS``, the ones that came with the repository) are read-only;
  * a visitor run records its owner as ``"owner": owner_hash(token)`` in training.json, never the token;
  * visitor runs are bounded by ``make_room``: the oldest go first, never a shipped one, an operator's
    (no owner record) or one in ``keep``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from playground import checks, gpt2
from playground.architectures import build_model, describe_architecture
from playground.config import ConfigError, ModelConfig
from playground.model import GPT
from playground.optim_state import OptimizerState
from playground.subword import BPETokenizer
from playground.tokenizer import CharTokenizer, Tokenizer

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
VOCABULARY_FILE = "vocabulary.json"
TOKENIZER_FILE = gpt2.TOKENIZER_FILE  # tokenizer.json: a BPE tokenizer, in either layout
PLAYGROUND_LAYOUT, GPT2_LAYOUT = "playground", "gpt2"
TRAINING_FILE = "training.json"
CARD_FILE = "README.md"
OPTIMIZER_FILE = "optimizer.safetensors"
LOCK_FILE = ".lock"
DEFAULT_CHECKPOINT = "shakespeare-char"
# Checkpoints that came with the repository: the app never writes, replaces, resumes or removes them. The one list,
# by name, so it holds in any weights folder (a copy of the repository's, a test's) and no file a visitor's run
# writes can claim or drop the mark. The command line, the operator's tool, may still rebuild them.
SHIPPED_CHECKPOINTS = frozenset({DEFAULT_CHECKPOINT})
OWNER_FIELD = "owner"  # in training.json: owner_hash of the token of the visitor who started the run
REPO_WEIGHTS_DIR = Path(__file__).resolve().parent.parent / "weights"
_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class CheckpointError(ValueError):
    """A checkpoint is missing, incomplete, corrupt or does not match its config."""


class MissingCheckpointError(CheckpointError):
    """No checkpoint folder has that name (as opposed to one that exists but is broken)."""


@dataclass
class Checkpoint:
    name: str  # the checkpoint's name, or the Hub repo id it came from
    path: Path
    config: ModelConfig
    tokenizer: Tokenizer  # CharTokenizer or subword.BPETokenizer
    model: GPT  # or architectures.NotebookLanguageModel: config.architecture says which (build_model)
    training: dict[str, Any] | None
    layout: str = PLAYGROUND_LAYOUT  # or GPT2_LAYOUT: the files it was read from

    @property
    def description(self) -> str:
        """What kind of model this is, in one line: its layout and source, tokenizer, context and size.

        "GPT-2 layout from openai-community/gpt2, byte-level BPE tokenizer, 50,257 tokens, context 1024,
        124.4M parameters"
        """
        parameters = self.model.parameter_count()
        if self.layout == GPT2_LAYOUT:
            return gpt2.describe(self.name, self.config, self.tokenizer.describe(), parameters)
        kind = describe_architecture(self.config)
        return (f"Attention Playground checkpoint {self.name}{f', {kind}' if kind else ''}, "
                f"{self.tokenizer.describe()}, context {self.config.context_size}, {gpt2.parameters_text(parameters)}")

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


def validate_name(name: str, what: str = "checkpoint name") -> str:
    """A run or checkpoint name: letters, digits, '.', '_' and '-', at most 64, no '..' or separators.

    ``what`` is what a refusal calls it: the Train tab's box says "run name"."""
    if not isinstance(name, str):
        raise CheckpointError(f"a {what} must be text, got {type(name).__name__}")
    name = name.strip()
    if not name:
        raise CheckpointError(f"the {what} is empty")
    if len(name) > 64:
        raise CheckpointError(f"the {what} is {len(name)} characters long; the limit is 64")
    if ".." in name or not _NAME_PATTERN.match(name):
        raise CheckpointError(
            f"{what} {name!r} is not allowed: use letters, digits, '.', '_' and '-' "
            "(no path separators, no '..', not starting with '.')"
        )
    return name


def is_shipped(name: str) -> bool:
    """True for a checkpoint that came with the repository (read-only for the app's visitors)."""
    return isinstance(name, str) and name.strip() in SHIPPED_CHECKPOINTS


def owner_hash(token: str) -> str:
    """What training.json records for the owner of a run: a SHA-256 of their token, never the token itself."""
    return hashlib.sha256(f"attention-playground owner:{token}".encode("utf-8", "surrogatepass")).hexdigest()


def read_training(name: str, directory: Path | None = None) -> dict[str, Any] | None:
    """A checkpoint's training.json without loading its weights; None when it has none (or it is unreadable)."""
    path = (Path(directory) if directory is not None else weights_dir()) / validate_name(name) / TRAINING_FILE
    try:
        training = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return training if isinstance(training, dict) else None


def recorded_owner(name: str, directory: Path | None = None) -> str | None:
    """The owner hash a run's training.json records, or None (an operator's run, an older one, or no run)."""
    owner = (read_training(name, directory) or {}).get(OWNER_FIELD)
    return owner if isinstance(owner, str) and owner else None


def exists(name: str, directory: Path | None = None) -> bool:
    """Whether anything (a checkpoint, or a folder that is not one) already has this name in the weights folder."""
    return ((Path(directory) if directory is not None else weights_dir()) / validate_name(name)).exists()


def fresh_run_name(directory: Path | None = None, stem: str = "my-run", taken=()) -> str:
    """The first ``<stem>-N`` (N = 1, 2, ...) that names nothing in the weights folder, nor is ``taken`` (a run
    still training, whose folder may not hold a checkpoint yet): my-run-1, my-run-2..."""
    stem = validate_name(stem)[:56]
    number = 1
    while (exists(f"{stem}-{number}", directory) or is_shipped(f"{stem}-{number}")
           or f"{stem}-{number}" in taken):
        number += 1
    return f"{stem}-{number}"


def estimated_bytes(parameters: int, steps: int) -> int:
    """About how much a run's folder takes on disk: fp32 weights, AdamW's two moments, the JSON loss curves."""
    return 12 * parameters + 64 * steps + 64 * 1024


@dataclass(frozen=True)
class StoredRun:
    name: str
    size: int  # bytes of all its files
    saved_at: float  # when its weights were last written
    owner: str | None  # recorded_owner: None for an operator's run


def stored_runs(directory: Path | None = None) -> list[StoredRun]:
    """Every run folder in the weights folder (not the shipped ones, not hidden leftovers), oldest save first."""
    parent = Path(directory) if directory is not None else weights_dir()
    runs = []
    if not parent.is_dir():
        return runs
    for entry in parent.iterdir():
        if entry.name.startswith(".") or not entry.is_dir() or is_shipped(entry.name):
            continue
        try:
            files = [f for f in entry.iterdir() if f.is_file()]
            size = sum(f.stat().st_size for f in files)
            weights = entry / WEIGHTS_FILE
            saved_at = weights.stat().st_mtime if weights.is_file() else entry.stat().st_mtime
        except OSError:
            continue
        runs.append(StoredRun(entry.name, size, saved_at, recorded_owner(entry.name, parent)))
    return sorted(runs, key=lambda run: (run.saved_at, run.name))


def make_room(directory: Path | None, incoming_bytes: int, *, max_runs: int, max_bytes: int,
              keep: frozenset[str] | set[str] = frozenset(), replacing: str | None = None, owner: str | None = None,
              max_per_owner: int | None = None, protect_seconds: float = 0.0, now: float | None = None) -> list[str]:
    """Remove visitor runs until one more of ``incoming_bytes`` fits; return the names removed.

    The quota counts visitor runs only (those with an owner record): at most ``max_runs`` folders and
    ``max_bytes`` together, the incoming run included. ``replacing`` names the run the incoming one will
    replace (a resumed or replaced run): it is not counted. Never removed: a shipped checkpoint, an operator's
    run (no owner record), ``replacing`` or a name in ``keep`` (a run in progress).

    For a visitor (``owner``, an owner hash) the rules are fair to everyone else:

      1. a visitor keeps at most ``max_per_owner`` runs: past it, their own oldest go first;
      2. then, for the server's room, other visitors' runs saved more than ``protect_seconds`` ago, oldest first,
         and only then the visitor's own; another visitor's run saved more recently is never removed, so one
         visitor starting many small runs cannot wipe out everyone else's.

    Raises CheckpointError, and removes nothing, when even that would not make room.

        20 visitor runs, max_runs 20: the oldest (no one's within protect_seconds) goes, the new one is the 20th.
    """
    parent = Path(directory) if directory is not None else weights_dir()
    now = time.time() if now is None else now
    runs = [run for run in stored_runs(parent) if run.owner is not None and run.name != replacing]
    removable = [run for run in runs if run.name not in keep]
    own = [run for run in removable if run.owner == owner]  # none without an owner: every run here has one
    count, total = len(runs) + 1, sum(run.size for run in runs) + incoming_bytes
    doomed: list[StoredRun] = []
    if owner is not None and max_per_owner is not None:
        held = sum(1 for run in runs if run.owner == owner) + 1
        for run in own:
            if held <= max_per_owner:
                break
            doomed.append(run)
            held, count, total = held - 1, count - 1, total - run.size
    others = [run for run in removable if run.owner != owner]
    protected = [run for run in others if now - run.saved_at < protect_seconds]
    stale = [run for run in others if now - run.saved_at >= protect_seconds]
    for run in stale + [run for run in own if run not in doomed]:
        if count <= max_runs and total <= max_bytes:
            break
        doomed.append(run)
        count, total = count - 1, total - run.size
    if count > max_runs or total > max_bytes:
        if incoming_bytes <= max_bytes and protected:
            wait = max(1, math.ceil((min(run.saved_at for run in protected) + protect_seconds - now) / 60))
            raise CheckpointError(
                f"this server keeps at most {max_runs} visitor runs in {max_bytes:,} bytes, and the room is taken "
                f"by other visitors' runs saved in the last {protect_seconds / 60:g} minutes, which are kept at "
                f"least that long; the oldest of them may make room in about {wait} minute{'s' * (wait != 1)}: "
                "try then, or replace one of your own runs")
        raise CheckpointError(
            f"this run's checkpoint would take about {incoming_bytes:,} bytes and this server keeps at most "
            f"{max_runs} visitor runs in {max_bytes:,} bytes; lower the model's size"
        )
    for run in doomed:
        _remove(parent, run.name)
        whose = "this visitor's own oldest" if run.owner == owner else "the oldest"
        logger.info("removed the visitor run %s (%d bytes, %s) to make room", run.name, run.size, whose)
    return [run.name for run in doomed]


def _remove(parent: Path, name: str) -> None:
    """Take a run out of view in one rename (a ``.tmp-`` folder, which ``recover`` clears if a crash comes
    before the delete finishes), then delete it."""
    with _folder_lock(parent):
        source = parent / name
        if not source.exists():
            return
        doomed = parent / f".tmp-removed-{name}-{uuid.uuid4().hex[:8]}"
        os.rename(source, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


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


def check_vocabulary(tokenizer: Tokenizer, config: ModelConfig, name: str) -> None:
    """The tokenizer's IDs must be the model's rows: as many for characters; a BPE tokenizer may have fewer
    (a fine-tune can pad its embedding to a round 50,304), never more."""
    size, rows = tokenizer.vocabulary_size, config.vocabulary_size
    if size > rows or (size != rows and not isinstance(tokenizer, BPETokenizer)):
        raise CheckpointError(f"{name}: the tokenizer has {size} symbols but the model expects {rows}")


def stored_state(model: GPT) -> dict[str, torch.Tensor]:
    """The tensors model.safetensors holds: the state dict on the CPU, a tied head left out (it is the token
    embedding; safetensors refuses two names for one tensor)."""
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    if model.config.tie_embeddings:
        del state["lm_head.weight"]
    return state


def save_checkpoint(model: GPT, tokenizer: Tokenizer, name: str, *, directory: Path | None = None,
                    training: dict[str, Any] | None = None, card: str | None = None,
                    optimizer_state: OptimizerState | None = None) -> Path:
    """Write ``<directory>/<name>/`` atomically and return its path.

    ``optimizer_state`` is ``optim_state.flatten_optimizer_state(optimizer, model)``; it is written as
    optimizer.safetensors in the same folder, replaced with the weights or not at all.
    """
    name = validate_name(name)
    check_vocabulary(tokenizer, model.config, name)
    parent = Path(directory) if directory is not None else weights_dir()
    parent.mkdir(parents=True, exist_ok=True)
    target = parent / name
    with _claimed_temporary(parent, name) as tmp:
        try:
            _write_json(tmp / CONFIG_FILE, model.config.to_dict())
            save_file(stored_state(model), str(tmp / WEIGHTS_FILE), metadata={"format": "pt"})
            if isinstance(tokenizer, BPETokenizer):
                (tmp / TOKENIZER_FILE).write_text(tokenizer.to_str(), encoding="utf-8")
            else:
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


def _complete(folder: Path) -> bool:
    return folder.is_dir() and (folder / WEIGHTS_FILE).is_file() and (folder / CONFIG_FILE).is_file()


def has_checkpoint(name: str, directory: Path | None = None) -> bool:
    """Whether the run ``name`` has saved a complete checkpoint (a failed run's last good one, if any)."""
    return _complete((Path(directory) if directory is not None else weights_dir()) / validate_name(name))


def list_checkpoints(directory: Path | None = None) -> list[str]:
    """Names of complete checkpoints, the default first. Only reads: leftovers of crashes are ``recover``'s."""
    parent = Path(directory) if directory is not None else weights_dir()
    if not parent.is_dir():
        return []
    names = sorted(entry.name for entry in parent.iterdir() if not entry.name.startswith(".") and _complete(entry))
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
        raise CheckpointError(f"{path.parent.name}/{path.name} is unreadable or not JSON: "
                              f"{checks.shown(str(exc), quote=False)}") from None


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


def read_layout(folder: Path) -> tuple[str, ModelConfig]:
    """Which layout ``folder/config.json`` is in (PLAYGROUND_LAYOUT or GPT2_LAYOUT) and its ModelConfig, or a
    CheckpointError saying what is wrong with it."""
    data = _read_json(Path(folder) / CONFIG_FILE)
    try:
        if gpt2.is_gpt2_config(data):
            return GPT2_LAYOUT, gpt2.model_config(data)
        return PLAYGROUND_LAYOUT, ModelConfig.from_dict(data)
    except (ConfigError, gpt2.LayoutError, TypeError) as exc:
        raise CheckpointError(f"{Path(folder).name}/{CONFIG_FILE} is not a valid model config: {exc}") from None


def read_config(folder: Path) -> ModelConfig:
    """The ModelConfig in ``folder/config.json`` (either layout), or a CheckpointError saying what is wrong."""
    return read_layout(folder)[1]


def read_tokenizer(folder: Path, layout: str = PLAYGROUND_LAYOUT) -> Tokenizer:
    """vocabulary.json (characters) or tokenizer.json (BPE); the GPT-2 layout reads tokenizer.json only."""
    folder = Path(folder)
    has_bpe = (folder / TOKENIZER_FILE).is_file()
    if layout == PLAYGROUND_LAYOUT and ((folder / VOCABULARY_FILE).is_file() or not has_bpe):
        try:
            return CharTokenizer.from_dict(_read_json(folder / VOCABULARY_FILE))
        except ValueError as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{folder.name}/{VOCABULARY_FILE} is not a valid vocabulary: {exc}") from None
    if not has_bpe:
        raise CheckpointError(f"{folder.name} has no {TOKENIZER_FILE} (a GPT-2 layout repo keeps its BPE "
                              "tokenizer there)")
    try:
        return BPETokenizer.from_file(folder / TOKENIZER_FILE)
    except ValueError as exc:
        raise CheckpointError(f"{folder.name}/{TOKENIZER_FILE}: {exc}") from None


def check_size(config: ModelConfig, name: str, max_parameters: int | None) -> None:
    """Refuse a model above ``max_parameters`` (None: no cap) before its weights are read."""
    if max_parameters is not None and config.parameter_count() > max_parameters:
        raise CheckpointError(
            f"{name} has {config.parameter_count():,} parameters; this server's limit is {max_parameters:,}"
        )


def _read_gpt2_weights(path: Path, config: ModelConfig) -> dict[str, torch.Tensor]:
    """model.safetensors in the GPT-2 layout -> the playground's state dict (gpt2.map_state_dict); the old
    buffers are never read."""
    try:
        with safe_open(str(path / WEIGHTS_FILE), framework="pt", device="cpu") as handle:
            return gpt2.map_state_dict(list(handle.keys()), handle.get_tensor, config)
    except gpt2.LayoutError as exc:
        raise CheckpointError(f"{path.name}/{WEIGHTS_FILE}: {checks.shown(str(exc), quote=False)}") from None
    except (SafetensorError, OSError, ValueError) as exc:
        raise CheckpointError(f"{path.name}/{WEIGHTS_FILE} is corrupt or not safetensors: "
                              f"{checks.shown(str(exc), quote=False)}") from None


def load_checkpoint(name_or_path: str | Path, *, directory: Path | None = None,
                    device: torch.device | str = "cpu", max_parameters: int | None = None) -> Checkpoint:
    """Load config, tokenizer and weights strictly (a missing or unexpected key is an error), in the
    playground's layout or GPT-2's (gpt2.py maps its names and transposes its Conv1D weights).

    ``max_parameters`` refuses a model larger than that before its weights are read.
    """
    path = resolve(name_or_path, directory)
    layout, config = read_layout(path)
    tokenizer = read_tokenizer(path, layout)
    check_size(config, path.name, max_parameters)
    check_vocabulary(tokenizer, config, path.name)
    weights_path = path / WEIGHTS_FILE
    if not weights_path.is_file():
        raise CheckpointError(f"{path.name} has no {WEIGHTS_FILE}")
    if layout == GPT2_LAYOUT:
        state = _read_gpt2_weights(path, config)
    else:
        try:
            state = load_file(str(weights_path), device="cpu")
        except (SafetensorError, OSError, ValueError) as exc:
            raise CheckpointError(f"{path.name}/{WEIGHTS_FILE} is corrupt or not safetensors: "
                                  f"{checks.shown(str(exc), quote=False)}") from None
    with torch.device("meta"):  # shapes only: the loaded tensors become the parameters, no second copy is made
        model = build_model(config)
    expected = stored_state_shapes(model)
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
        if tensor.shape != expected[key]:
            raise CheckpointError(
                f"{path.name}: {key} has shape {tuple(tensor.shape)}, the config needs {tuple(expected[key])}"
            )
    state = {key: tensor.to(torch.float32) for key, tensor in state.items()}
    if config.tie_embeddings:
        state["lm_head.weight"] = state["token_embedding.weight"]
    model.load_state_dict(state, strict=True, assign=True)
    if config.tie_embeddings:  # assign gave the head its own Parameter over the same numbers: make it the same one
        model.lm_head.weight = model.token_embedding.weight
    model.to(device).eval()
    training = _read_json(path / TRAINING_FILE) if (path / TRAINING_FILE).is_file() else None
    return Checkpoint(path.name, path, config, tokenizer, model, training, layout)


def stored_state_shapes(model: GPT) -> dict[str, torch.Size]:
    """The names and shapes model.safetensors must hold for this model (a tied head is not stored)."""
    shapes = {key: tensor.shape for key, tensor in model.state_dict().items()}
    if model.config.tie_embeddings:
        del shapes["lm_head.weight"]
    return shapes


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
        raise CheckpointError(f"{path.name}/{OPTIMIZER_FILE} is corrupt or not safetensors: "
                              f"{checks.shown(str(exc), quote=False)}") from None
    metadata.pop("format", None)
    return OptimizerState(tensors, metadata)
