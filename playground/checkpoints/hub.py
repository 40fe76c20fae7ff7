"""Checkpoints from the Hugging Face Hub: a repo id like ``owner/name`` (or a canonical id without an owner, such
as ``gpt2``) -> a loaded Checkpoint; and publishing a run to the Hub.

Owns the calls to ``huggingface_hub`` (imported inside functions, so importing this module costs nothing)
and turns their many exceptions into one, ``HubError``, with a message a learner can act on.
A repo is a checkpoint in the playground's own layout, in Hugging Face's GPT-2 layout (config.json with
``"model_type": "gpt2"``, model.safetensors or its shards with model.safetensors.index.json, tokenizer.json or
GPT-2's vocab.json + merges.txt; see gpt2.py) or in the Llama family's (``"model_type"`` llama or qwen2, the same
weights files, tokenizer.json; see llama_layout.py). Only the checkpoint files are ever downloaded (see
checkpoints.py), never a pickle (``*.bin``, ``*.pt``, ``*.pkl``), nor a pushed run's optimizer.safetensors
(twice the weights' size, and only a resumed run reads it: training resumes local runs, never a Hub repo);
loading goes through ``checkpoints.load_checkpoint``, the one loader.

Repo ids come from strangers, so before a byte of weights is fetched:
  * the id must match ``PLAYGROUND_HUB_ALLOW`` when the owner set it (``owner/name`` ids or ``owner/*``);
  * the repo's file listing (one metadata request) must show the checkpoint files at sizes this server
    accepts: small JSON files, a tokenizer.json of at most 16 MiB, and (in the playground's layout) weights no
    larger than ``max_parameters`` fp32 numbers;
  * config.json (a few hundred bytes) is fetched and must describe a model within ``max_parameters``, whose
    weights file is no larger than the config implies (4 bytes a parameter + a header, + GPT-2's old mask
    buffers, up to 4·T² bytes a layer: gpt2.largest_buffer_bytes) and whose forward pass fits the memory budget
    (``budget.inference_cost``). For a GPT-2 layout repo this is where the weights' size is first checked: the
    buffers make its file larger than its parameters alone, and only its config says by how much;
  * the weights' safetensors headers are read on the Hub (``get_safetensors_metadata``, a ranged request of a
    few KiB a file) and must hold no more numbers than the config describes.
Downloads go to the playground's own cache, ``<PLAYGROUND_CACHE_DIR>/hub`` (settings.cache_dir), never to the
machine's shared Hugging Face cache (``HF_HUB_CACHE`` / ``HF_HOME``), which may hold its user's own files of the
same repo: a revision refused after the fact (a file that turned out bigger, weights that do not load) is
removed from the playground's cache again, and past PLAYGROUND_MAX_HUB_CACHE_BYTES its least recently used repos
go (``prune_cache``), both through huggingface_hub's own ``scan_cache_dir(...).delete_revisions(...)``, which
frees only the blobs no other cached revision links to; nothing outside it is ever deleted. No request carries
this server's HF token (``token=False``) unless the owner opts in with ``PLAYGROUND_HUB_USE_TOKEN=1``: a visitor's
id must not read the owner's private or gated repos.

Settings are read when a function is called, not when huggingface_hub was imported:
``HF_ENDPOINT`` (a mirror or a test server), ``PLAYGROUND_CACHE_DIR`` (the cache, under ``hub/``), and
``HF_HUB_OFFLINE=1`` or ``PLAYGROUND_OFFLINE=1`` (use the cache only, make no request).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import logging
import os
import re
import shutil
from pathlib import Path

import torch

from playground import budget, checks, settings
from playground.checkpoints import gpt2
from playground.checkpoints import llama as llama_layout
from playground.checkpoints import store as checkpoints
from playground.config import ModelConfig
from playground.settings import offline

logger = logging.getLogger(__name__)

CHECKPOINT_FILES = (
    checkpoints.CONFIG_FILE,
    checkpoints.WEIGHTS_FILE,
    checkpoints.VOCABULARY_FILE,
    checkpoints.TOKENIZER_FILE,
    checkpoints.TRAINING_FILE,
    checkpoints.CARD_FILE,
)
REQUIRED_FILES = (checkpoints.CONFIG_FILE, checkpoints.WEIGHTS_FILE)
TOKENIZER_FILES = (checkpoints.VOCABULARY_FILE, checkpoints.TOKENIZER_FILE)  # one of them, as the layout says
BPE_FILES = (gpt2.VOCAB_FILE, gpt2.MERGES_FILE)  # GPT-2's original tokenizer files: read when tokenizer.json is absent
PICKLE_PATTERNS = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle", "*.ckpt")
MAX_REPO_ID_LENGTH = 96
MAX_SMALL_FILE_BYTES = 1 * 2**20  # config.json, vocabulary.json, training.json, README.md: a few KiB each
MAX_TOKENIZER_BYTES = 16 * 2**20  # tokenizer.json: GPT-2's is 1.4 MiB (50,257 tokens and 50,000 merges)
# Building a tokenizer holds the GIL (every visitor's calls wait): a 791,900-token vocab.json held it 10 s at a time,
# 57 s a load. Gemma's 256,000 tokens pass; a config's vocabulary bounds its files (Llama 3's tokenizer.json: 71 B)
MAX_HUB_VOCABULARY, TOKENIZER_BYTES_PER_TOKEN, TOKENIZER_SLACK_BYTES = 262_144, 128, 2**20
WEIGHTS_HEADER_BYTES = 1 * 2**20  # room for model.safetensors' JSON header (names, shapes, offsets)
_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?"
_REPO_ID_PATTERN = re.compile(rf"^(?:{_PART}/)?{_PART}$")


class HubError(ValueError):
    """A Hub checkpoint cannot be had: bad id, offline, no such repo or revision, or not a checkpoint."""


class NotFoundError(HubError):
    """No such repo on the Hub, or offline and not in the cache: nothing was found under that id."""


def is_not_found(exc: BaseException) -> bool:
    """Whether a HubError means the id names nothing reachable (as opposed to a repo that was found and refused)."""
    return isinstance(exc, NotFoundError)


def validate_repo_id(repo_id: str) -> str:
    """``owner/name``, or a canonical id without an owner (``gpt2``, ``distilgpt2``), with letters, digits, '-', '_'
    and '.', at most 96 characters, no '..' or '--'; checked by the project's rules, then huggingface_hub's own
    ``validate_repo_id``.

    ``"karpathy/shakespeare-char"`` and ``"gpt2"`` pass; ``"../x"`` and ``"a/b/c"`` raise HubError.
    """
    if not isinstance(repo_id, str):
        raise HubError(f"a Hub repo id must be text, got {type(repo_id).__name__}")
    repo_id = repo_id.strip()
    if not repo_id:
        raise HubError("the Hub repo id is empty (expected owner/name, or a canonical id such as gpt2)")
    if len(repo_id) > MAX_REPO_ID_LENGTH:
        raise HubError(f"the Hub repo id is {len(repo_id)} characters long; the limit is {MAX_REPO_ID_LENGTH}")
    if ".." in repo_id or "--" in repo_id or repo_id.endswith(".git") or not _REPO_ID_PATTERN.match(repo_id):
        raise HubError(
            f"{checks.shown(repo_id)} is not a Hub repo id: expected owner/name (or a canonical id such as gpt2) "
            "using letters, digits, '-', '_' and '.' (each part starting and ending with a letter or digit, no '..' "
            "or '--')"
        )
    from huggingface_hub.utils import HFValidationError
    from huggingface_hub.utils import validate_repo_id as hub_rules

    try:
        hub_rules(repo_id)
    except HFValidationError as exc:
        raise HubError(f"{checks.shown(repo_id)} is not a Hub repo id: {checks.shown(str(exc), quote=False)}") \
            from None
    return repo_id


def is_hub_id(text: str) -> bool:
    """True for ``owner/name`` forms, which no local checkpoint name can take (names have no '/').

    Purely about the text: a relative folder path such as ``runs/tiny`` looks the same, so a caller
    that also accepts folder paths checks ``Path(text).is_dir()`` first. A canonical id without an owner
    (``gpt2``) reads as a local name first; loading.open_checkpoint asks the Hub when no local run has it.
    """
    if not isinstance(text, str) or "/" not in text:
        return False
    try:
        validate_repo_id(text)
    except HubError:
        return False
    return True


def is_canonical_id(text: str) -> bool:
    """True for a Hub id without an owner (``gpt2``, ``distilgpt2``, ``gpt2-medium``) that this server may load
    (``PLAYGROUND_HUB_ALLOW``): what loading.open_checkpoint asks the Hub for when no local run has the name."""
    if not isinstance(text, str) or "/" in text:
        return False
    try:
        check_allowed(validate_repo_id(text))
    except HubError:
        return False
    return True


def _cache_dir(cache_dir: Path | None) -> str:
    """``cache_dir``, else the playground's own ``<PLAYGROUND_CACHE_DIR>/hub``: never the shared Hugging Face
    cache, whose files belong to the machine's user (remove_download deletes in the folder this returns)."""
    return str(Path(cache_dir).expanduser() if cache_dir is not None else settings.cache_dir() / "hub")


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
        return NotFoundError(f"no Hub repo named {repo_id} (or it is private)")
    if isinstance(exc, RevisionNotFoundError):
        return HubError(f"{repo_id} has no revision {checks.shown(revision)} (a branch, tag or commit hash)")
    if isinstance(exc, LocalEntryNotFoundError):
        if type(exc).__name__ == "IncompleteSnapshotError":
            return HubError(f"cannot reach the Hugging Face Hub (offline?) and the cached copy of {repo_id} "
                            "is incomplete")
        status = None if local_only or _is_connection_problem(exc) else _status_code(exc)
        if status in (401, 404):
            return NotFoundError(f"no Hub repo named {repo_id} (or it is private)")
        if status is not None:
            return HubError(f"the Hub answered HTTP {status} and {repo_id} is not in the local cache (try later)")
        if local_only and revision:
            return HubError(f"{not_cached} at revision {checks.shown(revision)}")
        return NotFoundError(not_cached)
    if _is_connection_problem(exc):
        return NotFoundError(not_cached)
    status = _status_code(exc)
    if status is not None:
        return HubError(f"the Hub answered HTTP {status} while downloading {repo_id}: "
                        f"{checks.shown(str(exc), quote=False) if str(exc).strip() else type(exc).__name__}")
    return HubError(f"downloading {repo_id} from the Hub failed: {type(exc).__name__}: "
                    f"{checks.shown(str(exc), quote=False)}")


def _token() -> bool | None:
    """``False`` (send no token) unless ``PLAYGROUND_HUB_USE_TOKEN=1``: then None, huggingface_hub's own default."""
    opted_in = os.environ.get("PLAYGROUND_HUB_USE_TOKEN", "").strip().lower() in ("1", "true", "yes")
    return None if opted_in else False


def allowed_patterns() -> list[str]:
    """``PLAYGROUND_HUB_ALLOW`` split at commas: repo ids and ``owner/*`` patterns; empty when unset (any repo)."""
    return [item.strip() for item in os.environ.get("PLAYGROUND_HUB_ALLOW", "").split(",") if item.strip()]


def check_allowed(repo_id: str) -> None:
    """Refuse a repo outside ``PLAYGROUND_HUB_ALLOW`` (when set): ``owner/*`` allows every repo of that owner.

    Ids compare as the Hub compares them, ignoring case: ``Learner/*`` allows ``learner/tiny-char``.
    """
    patterns = allowed_patterns()
    if not patterns:
        return
    owner = repo_id.split("/", 1)[0].lower() if "/" in repo_id else None  # a canonical id (gpt2) has none
    for pattern in patterns:
        if pattern.lower() == repo_id.lower() or (pattern.endswith("/*") and pattern[:-2].lower() == owner):
            return
    shown = ", ".join(patterns[:8]) + (", ..." if len(patterns) > 8 else "")
    raise HubError(f"{repo_id} is not one of the Hub repos this server loads ({shown}); pick one of those, "
                   "or a checkpoint trained here")


def _snapshot(repo_id: str, revision: str | None, cache_dir: Path | None, patterns: list[str],
              local_only: bool, status: int | None = None) -> Path:
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(
            repo_id,
            revision=revision,
            cache_dir=_cache_dir(cache_dir),
            allow_patterns=patterns,
            ignore_patterns=list(PICKLE_PATTERNS),
            local_files_only=local_only,
            endpoint=_endpoint(),
            token=_token(),
        ))
    except Exception as exc:  # huggingface_hub, httpx and OS errors all end here, translated
        if status is not None and local_only:
            raise HubError(f"the Hub answered HTTP {status} and {repo_id} is not in the local cache "
                           "(try later)") from exc
        raise _translate(exc, repo_id, revision, local_only) from exc


@dataclasses.dataclass(frozen=True)
class Listing:
    """What the Hub says a repo holds at one commit, before anything is downloaded: {file name: bytes}."""

    commit: str
    sizes: dict[str, int]


def _listing(repo_id: str, revision: str | None) -> tuple[Listing | None, int | None]:
    """The repo's files and their sizes at ``revision`` (one metadata request), pinned to its commit.

    Returns (None, status) when the Hub cannot be reached or answers 5xx (``status`` None or the HTTP code):
    the caller then uses the cache only, as snapshot_download does. Other failures raise HubError.
    """
    from huggingface_hub import HfApi

    try:
        info = HfApi(endpoint=_endpoint(), token=_token()).model_info(
            repo_id, revision=revision or "main", files_metadata=True, token=_token())
    except Exception as exc:
        status = None if _is_connection_problem(exc) else _status_code(exc)
        if _is_connection_problem(exc) or (status is not None and status >= 500):
            logger.warning("cannot list %s on the Hub (%s); trying the cache", repo_id, status or "unreachable")
            return None, status
        if status in (401, 404) and not isinstance(exc, _hub_errors()):
            raise NotFoundError(f"no Hub repo named {repo_id} (or it is private)") from exc
        raise _translate(exc, repo_id, revision, False) from exc
    sizes = {}
    for sibling in info.siblings or []:
        size = sibling.lfs.size if sibling.lfs is not None and sibling.lfs.size is not None else sibling.size
        sizes[sibling.rfilename] = size if isinstance(size, int) else -1  # -1: the Hub did not say
    return Listing(info.sha or revision or "main", sizes), None


def _hub_errors() -> tuple[type[Exception], ...]:
    from huggingface_hub.utils import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    return GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError


def largest_weights_bytes(parameters: int) -> int:
    """The size a model.safetensors of ``parameters`` fp32 numbers may have: 4 bytes each plus its JSON header.

    1,000 parameters -> 4,000 bytes + WEIGHTS_HEADER_BYTES.
    """
    return 4 * parameters + WEIGHTS_HEADER_BYTES


def _pickles(sizes: dict[str, int]) -> list[str]:
    """The files of a listing that are pickles (pytorch_model.bin...), which are never fetched."""
    return sorted(name for name in sizes if any(fnmatch.fnmatch(name, pattern) for pattern in PICKLE_PATTERNS))


def _has_bpe_files(sizes: dict[str, int]) -> bool:
    return all(name in sizes for name in BPE_FILES)


def _looks_gpt2(sizes: dict[str, int]) -> bool:
    """A listing with no vocabulary.json: the GPT-2 layout, until its config.json says."""
    return checkpoints.VOCABULARY_FILE not in sizes


def wanted_files(sizes: dict[str, int]) -> list[str]:
    """What a checkpoint's download fetches, given what the repo holds: the CHECKPOINT_FILES it has, the index of
    sharded weights in place of model.safetensors, GPT-2's vocab.json and merges.txt in place of tokenizer.json.
    (The shards themselves are named by the index: ``_shards``.)"""
    files = [name for name in CHECKPOINT_FILES if name in sizes]
    if checkpoints.WEIGHTS_FILE not in sizes and checkpoints.INDEX_FILE in sizes:
        files.append(checkpoints.INDEX_FILE)
    if not any(name in sizes for name in TOKENIZER_FILES) and _has_bpe_files(sizes):
        files.extend(BPE_FILES)
    return files


def _check_sizes(repo_id: str, sizes: dict[str, int], max_parameters: int | None) -> None:
    """Refuse, from the sizes alone, a repo that is not a checkpoint or whose files this server would not take."""
    if checkpoints.CONFIG_FILE not in sizes:
        raise HubError(f"{repo_id} is not an Attention Playground checkpoint: it has no {checkpoints.CONFIG_FILE}, "
                       "which says what model the weights make (the playground's own, GPT-2's or the Llama family's "
                       "layout)")
    if checkpoints.WEIGHTS_FILE not in sizes and checkpoints.INDEX_FILE not in sizes:
        raise HubError(checkpoints.missing_weights(repo_id, sizes))
    if not any(name in sizes for name in TOKENIZER_FILES) and not _has_bpe_files(sizes):
        raise HubError(f"{repo_id} has no tokenizer: no {TOKENIZER_FILES[0]} (the playground's layout), "
                       f"{TOKENIZER_FILES[1]}, or {' and '.join(BPE_FILES)} (GPT-2's layout); add the tokenizer of "
                       "the model it was trained from")
    for name in wanted_files(sizes):
        size = sizes[name]
        if size < 0:
            raise HubError(f"the Hub did not say how large {repo_id}'s {name} is, so it is not downloaded")
        if name in (checkpoints.TOKENIZER_FILE, *BPE_FILES):
            limit, what = MAX_TOKENIZER_BYTES, "the most this server reads for it"
        elif name != checkpoints.WEIGHTS_FILE:
            limit, what = MAX_SMALL_FILE_BYTES, "the most this server reads for it"
        elif _looks_gpt2(sizes):
            continue  # its size is checked against its config.json (_check_config), before it is fetched
        elif max_parameters is not None:
            limit = largest_weights_bytes(max_parameters)
            what = f"the most a model of {max_parameters:,} parameters (this server's limit) needs"
        else:
            continue
        if size > limit:
            raise HubError(f"{repo_id}'s {name} is {budget.human(size)}, more than {budget.human(limit)}, {what}; "
                           "it is not downloaded")


def _check_tokenizer_size(repo_id: str, vocabulary_size: int, sizes: dict[str, int]) -> None:
    """Refuse a tokenizer past MAX_HUB_VOCABULARY tokens or whose files (those the loader reads) hold more than
    TOKENIZER_BYTES_PER_TOKEN a declared token."""
    if vocabulary_size > MAX_HUB_VOCABULARY:
        raise HubError(f"{repo_id}'s vocabulary has {vocabulary_size:,} tokens, more than the {MAX_HUB_VOCABULARY:,} "
                       "this server reads (building a tokenizer holds every visitor's calls while it runs); it is "
                       "not downloaded")
    read = [checkpoints.TOKENIZER_FILE] if checkpoints.TOKENIZER_FILE in sizes else list(BPE_FILES)
    stored = sum(max(0, sizes.get(name, 0)) for name in read)
    allowed = TOKENIZER_BYTES_PER_TOKEN * vocabulary_size + TOKENIZER_SLACK_BYTES
    if stored > allowed:
        raise HubError(f"{repo_id}'s {' and '.join(name for name in read if name in sizes)} hold "
                       f"{budget.human(stored)}, more than a vocabulary of {vocabulary_size:,} tokens needs (at most "
                       f"{budget.human(allowed)}); it is not downloaded")


def _shards(repo_id: str, folder: Path, sizes: dict[str, int]) -> list[str]:
    """The shard files the repo's model.safetensors.index.json names (each one the repo holds); [] when the
    weights are one model.safetensors."""
    if checkpoints.WEIGHTS_FILE in sizes or not (folder / checkpoints.INDEX_FILE).is_file():
        return []
    try:
        shards = sorted(set(checkpoints.read_index(folder).values()))
    except checkpoints.CheckpointError as exc:
        raise HubError(f"{repo_id}: {exc}") from None
    absent = [shard for shard in shards if shard not in sizes]
    if absent:
        raise HubError(f"{repo_id}'s {checkpoints.INDEX_FILE} names {', '.join(absent[:3])}, which the repo does not "
                       "hold")
    return shards


def _check_config(repo_id: str, folder: Path, sizes: dict[str, int], max_parameters: int | None,
                  memory_budget: budget.MemoryBudget | None, max_context: int | None = None) -> ModelConfig:
    """The config must describe a model within the limits whose weights (one file or its shards) are no larger
    than it implies (GPT-2's: its parameters and the old mask buffers), with the tokenizer files its layout reads,
    and whose forward pass fits the budget at the longest text this server runs (``max_context``; default the
    model's own context: Qwen2.5's 32,768 tokens priced its (h, T, T) maps at 22.6 GiB); returns it."""
    layout, config = checkpoints.read_layout(folder)
    checkpoints.check_size(config, repo_id, max_parameters)
    _check_tokenizer_size(repo_id, config.vocabulary_size, sizes)
    parameters = config.parameter_count()
    implied = largest_weights_bytes(parameters)
    what = "fp32 weights"
    if layout == checkpoints.GPT2_LAYOUT:
        if checkpoints.TOKENIZER_FILE not in sizes and not _has_bpe_files(sizes):
            raise HubError(f"{repo_id} is in the GPT-2 layout but has no {checkpoints.TOKENIZER_FILE}, nor "
                           f"{' and '.join(BPE_FILES)} (its BPE tokenizer, which the playground reads with the "
                           "tokenizers library)")
        implied += gpt2.largest_buffer_bytes(config)
        what = "fp32 weights and GPT-2's old mask buffers"
    if layout == checkpoints.LLAMA_LAYOUT and checkpoints.TOKENIZER_FILE not in sizes:
        raise HubError(f"{repo_id} is in the Llama family's layout but has no {checkpoints.TOKENIZER_FILE} (its "
                       "tokenizer, which the playground reads with the tokenizers library)")
    shards = _shards(repo_id, folder, sizes)
    weights = sum(sizes.get(name, 0) for name in shards or [checkpoints.WEIGHTS_FILE])
    if weights > implied:
        stored = f"its {len(shards)} weight shards are" if shards else f"{checkpoints.WEIGHTS_FILE} is"
        raise HubError(f"{repo_id}'s {stored} {budget.human(weights)}, but its config.json describes "
                       f"{parameters:,} parameters, at most {budget.human(implied)} of {what}; it is not downloaded")
    cost = budget.combined("this forward pass", budget.inference_cost(
        parameters=parameters, layers_num=config.layers_num, heads_num=config.heads_num,
        embedding_dim=config.embedding_dim, context_size=min(config.context_size, max_context or config.context_size),
        vocabulary_size=config.vocabulary_size), budget.tokenizer_cost(config.vocabulary_size))
    try:
        (memory_budget or budget.MemoryBudget()).check(cost, hint="pick a smaller checkpoint")
    except budget.BudgetError as exc:
        raise HubError(f"{repo_id}: {exc}") from None
    return config


def _check_tensors(repo_id: str, revision: str, config: ModelConfig, shards: list[str]) -> None:
    """Before the weights are downloaded, read their safetensors headers on the Hub (huggingface_hub's
    ``get_safetensors_metadata``; for shards its per-file ``parse_safetensors_file_metadata``, since the former
    fetches the index into the shared cache) and refuse weights holding more numbers than the config describes.

    Buffers and a stored copy of a tied head (GPT-2's old files; old Llama files' rotary frequencies) are not
    counted: they are dropped unread.
    """
    from huggingface_hub import HfApi

    api = HfApi(endpoint=_endpoint(), token=_token())
    try:
        if shards:
            files = [api.parse_safetensors_file_metadata(repo_id, shard, revision=revision, token=_token())
                     for shard in shards]
        else:
            files = list(api.get_safetensors_metadata(repo_id, revision=revision, token=_token())
                         .files_metadata.values())
    except Exception as exc:  # huggingface_hub, httpx and parsing errors all end here, translated
        if type(exc).__name__ == "SafetensorsParsingError":
            raise HubError(f"{repo_id}'s weights are not safetensors (their header cannot be read: "
                           f"{checks.shown(str(exc), quote=False)}); they are not downloaded") from exc
        raise _translate(exc, repo_id, revision, False) from exc
    counted = 0
    for file in files:
        for name, info in file.tensors.items():
            if gpt2.is_buffer(name) or llama_layout.is_buffer(name) \
                    or (name.removeprefix(gpt2.PREFIX) == gpt2.TIED_HEAD and config.tie_embeddings):
                continue
            counted += info.parameter_count
    if counted > config.parameter_count():
        raise HubError(f"{repo_id}'s weights hold {counted:,} numbers, but its config.json describes "
                       f"{config.parameter_count():,} parameters; they are not downloaded")


def _local_sizes(folder: Path) -> dict[str, int]:
    names = [*CHECKPOINT_FILES, checkpoints.INDEX_FILE, *BPE_FILES]
    if (folder / checkpoints.INDEX_FILE).is_file():
        try:
            names += sorted(set(checkpoints.read_index(folder).values()))
        except checkpoints.CheckpointError:
            pass  # reported when the index is read again by _check_config
    return {name: (folder / name).stat().st_size for name in names if (folder / name).is_file()}


def _scan(cache_root: Path):
    """huggingface_hub's own ``scan_cache_dir`` of a cache the playground owns: its repos, each revision's files and
    the blobs they link to; None when there is no cache there to scan. A repo it cannot read (a folder that is not
    a cached repo, or one half written) is left out of ``repos``: callers treat it on its own."""
    from huggingface_hub import scan_cache_dir

    try:
        return scan_cache_dir(cache_root)
    except Exception as exc:  # CacheNotFound, or an OS error reading the folder
        logger.warning("cannot scan the playground's Hub cache %s: %s", cache_root, exc)
        return None


def _repo_id_of(repo_root: Path) -> str:
    """The repo id a cache folder holds: "models--learner--tiny-char" -> "learner/tiny-char", "models--gpt2" ->
    "gpt2"."""
    return repo_root.name.removeprefix("models--").replace("--", "/")


def remove_download(folder: Path) -> None:
    """Delete one refused revision (a snapshot folder ``<cache>/models--owner--name/snapshots/<commit>``) through
    huggingface_hub's ``scan_cache_dir(...).delete_revisions(...)``: its snapshot, the refs that name it and the blobs
    no other cached revision of the repo links to. A repo's revisions share blobs (an unchanged config.json or
    tokenizer.json is one blob), so deleting what the refused snapshot links to left an older revision's links
    dangling; its last revision gone, the repo folder goes too. Nothing outside the repo's folder is touched.
    """
    folder = Path(folder)
    repo_root = folder.parent.parent
    if folder.parent.name != "snapshots" or not repo_root.name.startswith("models--"):
        return
    info = _scan(repo_root.parent)
    revisions = [revision.commit_hash for repo in (info.repos if info is not None else ())
                 if repo.repo_path.resolve() == repo_root.resolve() for revision in repo.revisions
                 if revision.snapshot_path.resolve() == folder.resolve()]
    if revisions:
        info.delete_revisions(*revisions).execute()
    elif folder.is_dir():  # a repo the scan cannot read: its snapshot's links go, blobs another may use stay
        shutil.rmtree(folder, ignore_errors=True)
    logger.info("removed %s at revision %s, which was refused, from the playground's Hub cache",
                _repo_id_of(repo_root), folder.name)


def _folder_bytes(folder: Path) -> int:
    total = 0
    for root, _folders, names in os.walk(folder):
        for name in names:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                continue
    return total


def prune_cache(cache_root: Path, max_bytes: int, keep: Path | None = None) -> list[str]:
    """Remove whole repos from a cache the playground owns, the least recently used first, until what is left takes
    at most ``max_bytes``; ``keep`` (the repo just used) is never removed. Returns the repo ids removed.

    The repos are huggingface_hub's ``scan_cache_dir``'s, and each goes with ``delete_revisions`` of all its
    revisions; a folder the scan cannot read (not a cached repo, or half written) goes whole when its turn comes.
    A repo's size is what its folder holds on disk (an interrupted download's partial blob too); when it was used
    is its folder's time, which download_checkpoint touches. Only ever called on ``<PLAYGROUND_CACHE_DIR>/hub``,
    never the user's shared Hugging Face cache."""
    root = Path(cache_root)
    if not root.is_dir():
        return []
    repos = []
    for entry in root.iterdir():
        if entry.name.startswith("models--") and entry.is_dir() and not entry.is_symlink():
            try:
                used = entry.stat().st_mtime
            except OSError:
                continue
            repos.append((used, entry.name, _folder_bytes(entry), entry))
    total = sum(size for _, _, size, _ in repos)
    if total <= max_bytes:
        return []
    info = _scan(root)
    scanned = {repo.repo_path.resolve(): repo for repo in (info.repos if info is not None else ())}
    removed = []
    for _, _, size, entry in sorted(repos):
        if total <= max_bytes:
            break
        if keep is not None and entry.resolve() == Path(keep).resolve():
            continue
        repo = scanned.get(entry.resolve())
        if repo is not None:
            info.delete_revisions(*(revision.commit_hash for revision in repo.revisions)).execute()
        shutil.rmtree(entry, ignore_errors=True)  # what the scan could not read, or left (locks, partial blobs)
        total -= size
        removed.append(_repo_id_of(entry))
        logger.info("pruned %s (%d bytes) from the playground's Hub cache %s", _repo_id_of(entry), size, root)
    return removed


def download_checkpoint(repo_id: str, revision: str | None = None, cache_dir: Path | None = None,
                        max_parameters: int | None = None, memory_budget: budget.MemoryBudget | None = None,
                        max_context: int | None = None) -> Path:
    """Download (or find in the cache) the checkpoint files of a Hub repo; return the snapshot folder.

    Offline (``HF_HUB_OFFLINE=1`` / ``PLAYGROUND_OFFLINE=1``) it makes no request and returns the cached
    snapshot if there is one. Online it lists the repo's files with their sizes first and refuses, before any
    weights are fetched, a repo outside ``PLAYGROUND_HUB_ALLOW``, one that is not a checkpoint, files too large
    for ``max_parameters``, a config above it or one whose weights (one file, or the shards its index names) are
    larger than it implies or hold more numbers than it describes (their safetensors headers, read on the Hub),
    and a model whose forward pass (at ``max_context`` tokens at most) does not fit ``memory_budget`` (a
    ``budget.MemoryBudget``; default: this server's). Raises HubError (or CheckpointError for a config that is
    broken or too large); the repo id is checked before any request.
    """
    repo_id = validate_repo_id(repo_id)
    check_allowed(repo_id)
    if revision is not None:
        if not isinstance(revision, str) or not revision.strip():
            raise HubError(f"the revision must be a branch, tag or commit hash, got {checks.shown(revision)}")
        revision = revision.strip()
    asked = revision  # a branch, tag or commit hash the caller named; revision becomes the commit checked
    listing, status = (None, None) if offline() else _listing(repo_id, revision)
    local_only = listing is None
    if listing is not None:
        _check_sizes(repo_id, listing.sizes, max_parameters)
        small = [name for name in (checkpoints.CONFIG_FILE, checkpoints.INDEX_FILE) if name in listing.sizes]
    else:
        small = [checkpoints.CONFIG_FILE, checkpoints.INDEX_FILE]
    folder = _snapshot(repo_id, revision, cache_dir, small, local_only, status)
    if not (folder / checkpoints.CONFIG_FILE).is_file():
        raise HubError(f"{repo_id} is not an Attention Playground checkpoint: it has no {checkpoints.CONFIG_FILE}")
    try:
        if listing is not None:
            if folder.name != listing.commit:
                raise HubError(f"{repo_id} changed on the Hub while it was being checked; try again")
            revision = listing.commit  # what was checked is what is downloaded, even if the repo changes now
            config = _check_config(repo_id, folder, listing.sizes, max_parameters, memory_budget, max_context)
            shards = _shards(repo_id, folder, listing.sizes)
            _check_tensors(repo_id, revision, config, shards)
            files = wanted_files(listing.sizes) + shards
        else:
            files = [*CHECKPOINT_FILES, checkpoints.INDEX_FILE, *BPE_FILES, *_local_shards(folder)]
        path = _snapshot(repo_id, revision, cache_dir, files, local_only, status)
        sizes = _local_sizes(path)  # what arrived (or was cached) is checked as the listing was
        _check_sizes(repo_id, sizes, max_parameters)
        _check_config(repo_id, path, sizes, max_parameters, memory_budget, max_context)
    except HubError:
        remove_download(folder)
        raise
    except checkpoints.CheckpointError as exc:
        remove_download(folder)
        raise in_repo_words(exc, repo_id, asked, folder) from None
    logger.info("Hub checkpoint %s is at %s", repo_id, path)
    if cache_dir is None:  # the playground's own cache: this repo was used now, the least used go past its size
        repo_root = path.parent.parent  # <cache>/models--owner--name/snapshots/<commit>
        try:
            os.utime(repo_root)
        except OSError:
            pass
        prune_cache(Path(_cache_dir(None)), settings.hub_cache_bytes(), keep=repo_root)
    return path


def in_repo_words(exc: checkpoints.CheckpointError, repo_id: str, revision: str | None,
                  snapshot: Path) -> checkpoints.CheckpointError:
    """The loader's refusal of a downloaded snapshot, naming the repo instead of the snapshot folder (a commit hash
    the learner never typed), and the revision when one was asked for:
    "0123abcd...: model_type llama: ..." -> "learner/tiny-llama: model_type llama: ..." """
    text = str(exc).replace(Path(snapshot).name, repo_id)
    if not text.startswith(repo_id):
        text = f"{repo_id}: {text}"
    if revision is not None:
        text += f" (revision {checks.shown(revision)})"
    return type(exc)(text)


def _local_shards(folder: Path) -> list[str]:
    """The shards a cached index names (offline: the cache holds what the online download fetched)."""
    if not (folder / checkpoints.INDEX_FILE).is_file():
        return []
    try:
        return sorted(set(checkpoints.read_index(folder).values()))
    except checkpoints.CheckpointError:
        return []


def load_from_hub(repo_id: str, device: torch.device | str = "cpu", *, revision: str | None = None,
                  cache_dir: Path | None = None, max_parameters: int | None = None,
                  memory_budget: budget.MemoryBudget | None = None,
                  max_context: int | None = None) -> checkpoints.Checkpoint:
    """Download then load with ``checkpoints.load_checkpoint``; the Checkpoint is named after the repo.

    Raises HubError for Hub problems and CheckpointError when the files themselves are broken (a download
    that does not load is removed from the cache).
    """
    path = download_checkpoint(repo_id, revision=revision, cache_dir=cache_dir, max_parameters=max_parameters,
                               memory_budget=memory_budget, max_context=max_context)
    repo_id = repo_id.strip()
    try:
        with (memory_budget or budget.MemoryBudget()).reserve(loading_cost(path), hint="try again in a moment"):
            checkpoint = checkpoints.load_checkpoint(path, device=device, max_parameters=max_parameters)
    except budget.BudgetError as exc:
        raise HubError(f"{repo_id}: {exc}") from None
    except checkpoints.CheckpointError as exc:
        remove_download(path)
        raise in_repo_words(exc, repo_id, revision, path) from None
    return dataclasses.replace(checkpoint, name=repo_id)


def loading_cost(folder: Path) -> budget.Cost:
    """What loading a downloaded snapshot holds at its peak (``budget.import_cost``), priced from its config.json and
    the sizes of its weights files (one model.safetensors, or the shards its index names), and its tokenizer
    (``budget.tokenizer_cost``: a 16 MiB vocab.json loaded under the parameter cap held 550 MiB)."""
    _, config = checkpoints.read_layout(folder)
    sizes = _local_sizes(folder)
    stored = sizes.get(checkpoints.WEIGHTS_FILE) or sum(sizes.get(shard, 0) for shard in _local_shards(folder))
    C = config.embedding_dim
    largest = max(config.vocabulary_size * C, config.context_size * C, config.mlp_width * C)  # embedding or MLP
    return budget.combined("loading this checkpoint",
                           budget.import_cost(stored_bytes=stored, parameters=config.parameter_count(),
                                              largest_tensor=largest),
                           budget.tokenizer_cost(config.vocabulary_size))


# ------------------------------------------------------------------------------------ publishing (the operator's)
@dataclasses.dataclass(frozen=True)
class Published:
    """Where a published checkpoint went: the repo's URL, the commit, the files it carries and their layout
    (``checkpoints.GPT2_LAYOUT``, which transformers opens too, or the playground's own, ``note`` saying why)."""

    repo_id: str
    url: str
    commit: str
    files: tuple[str, ...]
    layout: str = checkpoints.GPT2_LAYOUT
    note: str = ""


def publish_checkpoint(folder: Path, repo_id: str, *, token: str | None = None, private: bool = False,
                       commit_message: str | None = None) -> Published:
    """Upload a checkpoint folder to the Hub model repo ``repo_id`` (created if missing) with huggingface_hub's own
    upload API, so ``repo_id`` then opens anywhere the playground runs, and in transformers.

    What goes is the checkpoint exported in GPT-2's layout (export.write_gpt2: config.json, model.safetensors,
    tokenizer.json, tokenizer_config.json, the card, the training record), never optimizer.safetensors or anything
    else in the folder, and only a folder that loads with the one loader. A model GPT-2's layout cannot hold
    (notebook 004's, an older run's bias on its LM head) goes in the playground's own layout, and
    ``Published.note`` says why. The token is
    ``token``, else huggingface_hub's own (``HF_TOKEN`` or ``hf auth login``); it needs write access.
    Raises HubError with what to do (log in, pick another name, go online); CheckpointError if the folder does not
    load.
    """
    import tempfile

    from playground.checkpoints import export

    repo_id = validate_repo_id(repo_id)
    folder = Path(folder)
    checkpoint = checkpoints.load_checkpoint(folder)  # never publish what would not open
    if offline():
        raise HubError("publishing needs the Hub, and this process is offline (HF_HUB_OFFLINE / PLAYGROUND_OFFLINE)")
    from huggingface_hub import HfApi

    api = HfApi(endpoint=_endpoint(), token=token)
    with tempfile.TemporaryDirectory(prefix="playground-publish-") as exported:
        layout, note = checkpoints.GPT2_LAYOUT, ""
        try:
            files = export.write_gpt2(checkpoint, Path(exported), card_target=repo_id)
            source = Path(exported)
        except export.ExportError as exc:
            layout, source = checkpoints.PLAYGROUND_LAYOUT, folder
            files = tuple(name for name in CHECKPOINT_FILES if (folder / name).is_file())
            note = (f"{exc}; it went in the playground's own layout, which opens in any playground but not in "
                    "transformers")
        try:
            api.create_repo(repo_id, private=private, exist_ok=True)
            info = api.upload_folder(folder_path=str(source), repo_id=repo_id, allow_patterns=list(files),
                                     commit_message=commit_message or f"Upload the {folder.name} checkpoint")
        except Exception as exc:  # huggingface_hub, httpx and OS errors all end here, translated
            raise _publish_error(exc, repo_id) from exc
    url = str(getattr(info, "repo_url", "") or f"{_endpoint() or 'https://huggingface.co'}/{repo_id}")
    return Published(repo_id, url, str(info.oid), files, layout, note)


def _publish_error(exc: Exception, repo_id: str) -> HubError:
    if _is_connection_problem(exc):
        return HubError(f"cannot reach the Hugging Face Hub to publish {repo_id} (offline?)")
    status = _status_code(exc)
    if status == 401:
        return HubError(f"the Hub refused to publish {repo_id}: not logged in (run `hf auth login` or set HF_TOKEN "
                        "to a token with write access)")
    if status == 403:
        return HubError(f"the Hub refused to publish {repo_id}: this token may not write to {repo_id.split('/')[0]}'s "
                        "repos (use a write token, or your own user or organisation name)")
    if status is not None:
        first = checks.shown(str(exc), quote=False) if str(exc).strip() else type(exc).__name__
        return HubError(f"the Hub answered HTTP {status} while publishing {repo_id}: {first}")
    return HubError(f"publishing {repo_id} failed: {type(exc).__name__}: {checks.shown(str(exc), quote=False)}")
