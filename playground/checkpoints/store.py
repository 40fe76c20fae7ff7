"""The one place that saves, lists and loads checkpoints in ``weights/<name>/``.

A checkpoint is a folder of plain files, never a pickle:
  config.json        the ModelConfig
  model.safetensors  the weights (a tied LM head is stored once, as the token embedding)
  vocabulary.json    the character tokenizer, or
  tokenizer.json     a BPE tokenizer (subword.BPETokenizer)
  training.json      optional: how it was trained (steps, losses, speed, corpus, device, seed)
  README.md          optional: the model card
  optimizer.safetensors  optional: the optimizer's state, so a resumed run goes on warm (training/optimizer_state.py)
Saving is atomic: files go to a temporary folder beside the target, which then replaces it by
rename, so a crash leaves either the old checkpoint or the new one, never half of one.
The loader also opens Hugging Face's GPT-2 layout (config.json with ``"model_type": "gpt2"``, model.safetensors
or its shards named by model.safetensors.index.json, tokenizer.json or GPT-2's vocab.json + merges.txt), mapped
into the playground's model by gpt2.py, and the Llama family's (``"model_type"`` llama or qwen2, its tokenizer.json),
mapped into llama.Llama by llama_layout.py: ``read_config`` and ``load_checkpoint`` tell the layouts apart by
config.json, and refuse another family (``"model_type": "t5"``) or pickled weights by name.
Listing and loading only read. What a crash can leave behind (``.tmp-`` and
``.old-`` folders) is cleared by ``recover``, which the app runs once at start-up and the training CLI once
before it starts.
``SHIPPED_CHECKPOINTS`` names the ones that came with the repository; whose the others are, and who may replace or
remove them, is the server's business (server/tenancy.py), not this module's.
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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from playground import checks
from playground.checkpoints import gpt2
from playground.checkpoints import llama as llama_layout
from playground.config import ConfigError, ModelConfig
from playground.model.families import build_model, describe_architecture
from playground.model.gpt import GPT
from playground.settings import PROJECT_ROOT
from playground.text.subword import BPETokenizer
from playground.text.tokenizer import CharTokenizer, Tokenizer

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"  # sharded weights: {"weight_map": {tensor name: shard file}}
PICKLED_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "model.pt", "ckpt.pt")
_SHARD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\.safetensors$")
VOCABULARY_FILE = "vocabulary.json"
TOKENIZER_FILE = gpt2.TOKENIZER_FILE  # tokenizer.json: a BPE tokenizer, in either layout
PLAYGROUND_LAYOUT, GPT2_LAYOUT, LLAMA_LAYOUT = "playground", "gpt2", "llama"
TRAINING_FILE = "training.json"
CARD_FILE = "README.md"
OPTIMIZER_FILE = "optimizer.safetensors"
DEFAULT_CHECKPOINT = "shakespeare-char"
# Checkpoints that came with the repository, which the app treats as read-only. The one list, by name, so it holds in
# any weights folder (a copy of the repository's, a test's) and no file a run writes can claim or drop the mark. The
# command line, the operator's tool, may still rebuild them.
SHIPPED_CHECKPOINTS = frozenset({DEFAULT_CHECKPOINT})
REPO_WEIGHTS_DIR = PROJECT_ROOT / "weights"
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
    model: GPT  # or llama.Llama, architectures.NotebookLanguageModel: the config says which (build_model)
    training: dict[str, Any] | None
    layout: str = PLAYGROUND_LAYOUT  # or GPT2_LAYOUT, LLAMA_LAYOUT: the files it was read from

    @property
    def description(self) -> str:
        """What kind of model this is, in one line: its layout and source, tokenizer, context and size.

        "GPT-2 layout from openai-community/gpt2, byte-level BPE tokenizer, 50,257 tokens, context 1024,
        124.4M parameters"
        """
        parameters = self.model.parameter_count()
        if self.layout == GPT2_LAYOUT:
            return gpt2.describe(self.name, self.config, self.tokenizer.describe(), parameters)
        if self.layout == LLAMA_LAYOUT:
            return llama_layout.describe(self.name, self.config, self.tokenizer.describe(), parameters)
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


def weights_dir(directory: str | Path | None = None) -> Path:
    """The folder checkpoints live in: ``directory`` where one is given (a test's, a server's), else
    ``PLAYGROUND_WEIGHTS_DIR``, else the repository's ``weights/``."""
    if directory is not None:
        return Path(directory)
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
    """True for a checkpoint that came with the repository (read-only in the app)."""
    return isinstance(name, str) and name.strip() in SHIPPED_CHECKPOINTS


def read_training(name: str, directory: Path | None = None) -> dict[str, Any] | None:
    """A checkpoint's training.json without loading its weights; None when it has none (or it is unreadable)."""
    path = weights_dir(directory) / validate_name(name) / TRAINING_FILE
    try:
        training = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return training if isinstance(training, dict) else None


def exists(name: str, directory: Path | None = None) -> bool:
    """Whether anything (a checkpoint, or a folder that is not one) already has this name in the weights folder."""
    return (weights_dir(directory) / validate_name(name)).exists()


def fresh_run_name(directory: Path | None = None, stem: str = "my-run", taken=()) -> str:
    """The first ``<stem>-N`` (N = 1, 2, ...) that names nothing in the weights folder, nor is ``taken`` (a run
    still training, whose folder may not hold a checkpoint yet): my-run-1, my-run-2..."""
    stem = validate_name(stem)[:56]
    number = 1
    while (exists(f"{stem}-{number}", directory) or is_shipped(f"{stem}-{number}")
           or f"{stem}-{number}" in taken):
        number += 1
    return f"{stem}-{number}"


def remove(name: str, directory: Path | None = None) -> None:
    """Delete a checkpoint folder: out of view in one rename (a ``.tmp-`` folder, which ``recover`` clears if a
    crash comes before the delete finishes), then deleted. Nothing happens when there is none."""
    name = validate_name(name)
    parent = weights_dir(directory)
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
    """An advisory lock on the folder ``parent`` itself shared by saves and recovery, across processes (an flock on
    the folder, as _claimed_temporary's claim: a lock file would stay in the folder for good).

    Yields True when held; with ``blocking=False`` yields False instead of waiting. The OS drops the
    lock when its process dies, so a killed save never leaves it held.
    """
    parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(parent, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        os.close(handle)


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
                    optimizer_state: tuple[dict[str, torch.Tensor], dict[str, str]] | None = None) -> Path:
    """Write ``<directory>/<name>/`` atomically and return its path.

    ``optimizer_state`` is (tensors, metadata), e.g. training/optimizer_state.py's ``flatten_optimizer_state``; it
    is written as
    optimizer.safetensors in the same folder, replaced with the weights or not at all.
    """
    name = validate_name(name)
    check_vocabulary(tokenizer, model.config, name)
    parent = weights_dir(directory)
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
    parent = weights_dir(directory)
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
    return _complete(weights_dir(directory) / validate_name(name))


def list_checkpoints(directory: Path | None = None) -> list[str]:
    """Names of complete checkpoints, the default first. Only reads: leftovers of crashes are ``recover``'s."""
    parent = weights_dir(directory)
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
    path = weights_dir(directory) / name
    if not path.is_dir():
        raise MissingCheckpointError(f"no checkpoint named {name!r}")
    return path


def read_layout(folder: Path) -> tuple[str, ModelConfig]:
    """Which layout ``folder/config.json`` is in (PLAYGROUND_LAYOUT, GPT2_LAYOUT or LLAMA_LAYOUT) and its
    ModelConfig, or a CheckpointError saying what is wrong with it. Another family's config (``"model_type": "t5"``)
    is refused by its model_type, before its fields are read."""
    data = _read_json(Path(folder) / CONFIG_FILE)
    family = data.get("model_type") if isinstance(data, dict) else None
    if family is not None and not gpt2.is_gpt2_config(data) and not llama_layout.is_llama_config(data):
        raise CheckpointError(
            f"{Path(folder).name}: model_type {checks.shown(family, quote=False)}: only the GPT-2 and Llama-family "
            f"layouts ({', '.join([gpt2.MODEL_TYPE, *llama_layout.MODEL_TYPES])}) and playground checkpoints open "
            "here; other families have blocks the playground's models do not have")
    try:
        if gpt2.is_gpt2_config(data):
            return GPT2_LAYOUT, gpt2.model_config(data)
        if llama_layout.is_llama_config(data):
            return LLAMA_LAYOUT, llama_layout.model_config(data)
        return PLAYGROUND_LAYOUT, ModelConfig.from_dict(data)
    except (ConfigError, gpt2.LayoutError, TypeError) as exc:
        raise CheckpointError(f"{Path(folder).name}/{CONFIG_FILE} is not a valid model config: {exc}") from None


def read_config(folder: Path) -> ModelConfig:
    """The ModelConfig in ``folder/config.json`` (either layout), or a CheckpointError saying what is wrong."""
    return read_layout(folder)[1]


def read_tokenizer(folder: Path, layout: str = PLAYGROUND_LAYOUT) -> Tokenizer:
    """vocabulary.json (characters) or tokenizer.json (BPE, or the characters an export wrote); the GPT-2 layout
    reads tokenizer.json, or builds it from GPT-2's vocab.json and merges.txt when only those are there."""
    folder = Path(folder)
    has_bpe = (folder / TOKENIZER_FILE).is_file()
    if layout == GPT2_LAYOUT and not has_bpe and (folder / gpt2.VOCAB_FILE).is_file() \
            and (folder / gpt2.MERGES_FILE).is_file():
        try:
            return BPETokenizer.from_str(gpt2.tokenizer_json_from_vocab_merges(
                (folder / gpt2.VOCAB_FILE).read_text(encoding="utf-8"),
                (folder / gpt2.MERGES_FILE).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise CheckpointError(f"{folder.name}: {checks.shown(str(exc), quote=False)}") from None
    if layout == PLAYGROUND_LAYOUT and ((folder / VOCABULARY_FILE).is_file() or not has_bpe):
        try:
            return CharTokenizer.from_dict(_read_json(folder / VOCABULARY_FILE))
        except ValueError as exc:
            if isinstance(exc, CheckpointError):
                raise
            raise CheckpointError(f"{folder.name}/{VOCABULARY_FILE} is not a valid vocabulary: {exc}") from None
    if not has_bpe and layout == LLAMA_LAYOUT:
        raise CheckpointError(f"{folder.name} has no {TOKENIZER_FILE}: a Llama-family folder needs it for its "
                              "tokenizer (copy it from the model it was trained from)")
    if not has_bpe:
        raise CheckpointError(f"{folder.name} has no {TOKENIZER_FILE}, nor GPT-2's {gpt2.VOCAB_FILE} and "
                              f"{gpt2.MERGES_FILE}: a GPT-2 layout folder needs one of them for its tokenizer (copy "
                              "them from the model it was trained from)")
    try:
        text = (folder / TOKENIZER_FILE).read_text(encoding="utf-8")
        characters = gpt2.read_character_tokenizer(text)
        return CharTokenizer(characters) if characters is not None else BPETokenizer.from_str(text)
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"cannot read {folder.name}/{TOKENIZER_FILE}: {exc}") from None
    except ValueError as exc:
        raise CheckpointError(f"{folder.name}/{TOKENIZER_FILE}: {exc}") from None


def check_size(config: ModelConfig, name: str, max_parameters: int | None) -> None:
    """Refuse a model above ``max_parameters`` (None: no cap) before its weights are read."""
    if max_parameters is not None and config.parameter_count() > max_parameters:
        raise CheckpointError(
            f"{name} has {config.parameter_count():,} parameters; this server's limit is {max_parameters:,}"
        )


def read_index(folder: Path) -> dict[str, str]:
    """The weight map of ``folder/model.safetensors.index.json`` (sharded weights): {tensor name: shard file}.

    Each shard must be a plain ``*.safetensors`` file name in the same folder (no path, no pickle); CheckpointError
    otherwise. ``{"weight_map": {"transformer.wte.weight": "model-00001-of-00002.safetensors", ...}}``
    """
    data = _read_json(Path(folder) / INDEX_FILE)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{Path(folder).name}/{INDEX_FILE} has no weight_map (tensor name -> shard file)")
    for key, shard in weight_map.items():
        if not isinstance(key, str) or not isinstance(shard, str) or not _SHARD_NAME.match(shard) or ".." in shard:
            raise CheckpointError(f"{Path(folder).name}/{INDEX_FILE} maps {checks.shown(key)} to "
                                  f"{checks.shown(shard)}, not a .safetensors file beside it")
    return weight_map


def missing_weights(name: str, found: Iterable[str], source: str | None = None) -> str:
    """Why the folder or repo ``name`` whose files are ``found`` has no weights to open, and what would open: a
    pickle is named, with the one command that writes its weights as safetensors and its tokenizer beside them
    (``source``: what from_pretrained reads), so the new folder opens as it is."""
    found = set(found)
    pickles = [file for file in PICKLED_WEIGHTS if file in found]
    if pickles:
        source = source or name
        target = f"{Path(source).name}-safetensors"
        return (f"{name} has {' and '.join(pickles)} but no {WEIGHTS_FILE}: pickled weights, and the playground "
                "never unpickles (loading a pickle can run any code). Convert it, weights and tokenizer together, "
                "with transformers: python -c \"from transformers import AutoModelForCausalLM as M, "
                "AutoTokenizer as T; "
                f"s, d = {source!r}, {target!r}; M.from_pretrained(s).save_pretrained(d); "
                "T.from_pretrained(s).save_pretrained(d)\" (a nanoGPT ckpt.pt: python -m playground.convert), then "
                f"open {target}")
    return (f"{name} has no {WEIGHTS_FILE} (nor {INDEX_FILE} with its shards): a checkpoint keeps its weights "
            "there, in safetensors")


@contextlib.contextmanager
def _weights(path: Path):
    """(names, read) over the weights of ``path``: its model.safetensors, or every shard its index names, each
    opened once; ``read(name)`` gives one tensor on the CPU. CheckpointError for a file that is not safetensors."""
    path = Path(path)
    if (path / WEIGHTS_FILE).is_file():
        files = {WEIGHTS_FILE: None}
    elif (path / INDEX_FILE).is_file():
        files = dict.fromkeys(sorted(set(read_index(path).values())))
    else:
        raise CheckpointError(missing_weights(path.name, (p.name for p in path.iterdir()), str(path)))
    file = WEIGHTS_FILE
    try:
        with contextlib.ExitStack() as stack:
            where: dict[str, Any] = {}
            for file in files:
                if not (path / file).is_file():
                    raise CheckpointError(f"{path.name}/{INDEX_FILE} names the shard {file}, which is not there")
                handle = stack.enter_context(safe_open(str(path / file), framework="pt", device="cpu"))
                for key in handle.keys():
                    if key in where:
                        raise CheckpointError(f"{path.name}: {checks.shown(key)} is stored in two shards")
                    where[key] = handle
            yield list(where), lambda key: where[key].get_tensor(key)
    except (SafetensorError, OSError) as exc:
        raise CheckpointError(f"{path.name}/{file} is corrupt or not safetensors: "
                              f"{checks.shown(str(exc), quote=False)}") from None


def _read_mapped_weights(path: Path, config: ModelConfig, layout: str = GPT2_LAYOUT) -> dict[str, torch.Tensor]:
    """model.safetensors (or its shards) in the GPT-2 layout (or the Llama family's) -> the playground's state dict
    (gpt2.map_state_dict, llama_layout.map_state_dict); the old buffers are never read."""
    mapping = llama_layout.map_state_dict if layout == LLAMA_LAYOUT else gpt2.map_state_dict
    try:
        with _weights(path) as (keys, read):
            return mapping(keys, read, config)
    except gpt2.LayoutError as exc:  # the layouts' own words, keys in them already bounded: not cut to a line
        raise CheckpointError(f"{path.name}/{WEIGHTS_FILE}: {exc}") from None
    except ValueError as exc:
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(f"{path.name}/{WEIGHTS_FILE} is corrupt or not safetensors: "
                              f"{checks.shown(str(exc), quote=False)}") from None


def load_checkpoint(name_or_path: str | Path, *, directory: Path | None = None,
                    device: torch.device | str = "cpu", max_parameters: int | None = None) -> Checkpoint:
    """Load config, tokenizer and weights strictly (a missing or unexpected key is an error), in the
    playground's layout, GPT-2's (gpt2.py maps its names and transposes its Conv1D weights) or the Llama family's
    (llama_layout.py maps its names).

    ``max_parameters`` refuses a model larger than that before its weights are read.
    """
    path = resolve(name_or_path, directory)
    layout, config = read_layout(path)
    tokenizer = read_tokenizer(path, layout)
    check_size(config, path.name, max_parameters)
    check_vocabulary(tokenizer, config, path.name)
    if not (path / WEIGHTS_FILE).is_file() and not (path / INDEX_FILE).is_file():
        raise CheckpointError(missing_weights(path.name, (p.name for p in path.iterdir()), str(path)))
    if layout in (GPT2_LAYOUT, LLAMA_LAYOUT):
        state = _read_mapped_weights(path, config, layout)
    elif (path / WEIGHTS_FILE).is_file():
        try:
            state = load_file(str(path / WEIGHTS_FILE), device="cpu")
        except (SafetensorError, OSError, ValueError) as exc:
            raise CheckpointError(f"{path.name}/{WEIGHTS_FILE} is corrupt or not safetensors: "
                                  f"{checks.shown(str(exc), quote=False)}") from None
    else:
        with _weights(path) as (keys, read):
            state = {key: read(key) for key in keys}
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


def load_optimizer_state(name_or_path: str | Path,
                         directory: Path | None = None) -> tuple[dict[str, torch.Tensor], dict[str, str]] | None:
    """The optimizer state saved with a checkpoint as (tensors, metadata), on the CPU, or None when it was saved
    without one. Give it to ``training.optimizer_state.restore_optimizer_state(optimizer, model, *state)``.
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
    return tensors, metadata
