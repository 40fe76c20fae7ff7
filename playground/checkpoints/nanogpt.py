"""nanoGPT checkpoints -> playground checkpoints, converted once and written by ``checkpoints.save_checkpoint``.

A learner who trained Karpathy's nanoGPT (``train.py``) has ``out/ckpt.pt`` and, for a character model,
``data/<dataset>/meta.pkl``. This module reads both without running anything they might carry, checks every
tensor against the playground GPT it maps onto, and saves a normal checkpoint folder (safetensors, JSON) that
every tab and ``checkpoints.load_checkpoint`` opens. Nothing is unpickled again after the conversion.

Owns: reading ckpt.pt (``torch.load(weights_only=True)`` only), reading meta.pkl (an unpickler that refuses every
class, so only dicts, lists, text and numbers come out) or a characters file, the key map below and the
provenance written to training.json. Knows nothing about the UI; the command line is cli/convert.py.

The two models are the same maths (both pre-LayerNorm with eps 1e-5, exact GELU, nn.Linear weights stored
(out, in), a fused q|k|v projection whose heads are split by ``view(B, T, h, d)``, token + learned position
embeddings), so conversion is renaming:

    transformer.wte.weight            -> token_embedding.weight
    transformer.wpe.weight            -> position_embedding.weight
    transformer.h.{i}.ln_1.*          -> blocks.{i}.ln_1.*
    transformer.h.{i}.attn.c_attn.*   -> blocks.{i}.attn.qkv.*
    transformer.h.{i}.attn.c_proj.*   -> blocks.{i}.attn.proj.*
    transformer.h.{i}.ln_2.*          -> blocks.{i}.ln_2.*
    transformer.h.{i}.mlp.c_fc.*      -> blocks.{i}.mlp.fc.*
    transformer.h.{i}.mlp.c_proj.*    -> blocks.{i}.mlp.proj.*
    transformer.ln_f.*                -> ln_f.*
    lm_head.weight                    -> lm_head.weight   (nanoGPT ties it to wte; here it is a copy)

Also: a ``torch.compile`` run's ``_orig_mod.`` prefix is stripped; older nanoGPT's causal-mask buffer
``transformer.h.{i}.attn.bias`` (not ``attn.c_attn.bias``, a real parameter) is dropped; weights become float32.
With ``bias=True`` both have biases in the blocks and LayerNorms and none on the LM head (the playground's
``use_bias`` follows nanoGPT), so the logits are exactly nanoGPT's. Anything missing, left over or of the wrong shape is
refused with a ConversionError naming it.

    convert_nanogpt("out/ckpt.pt", "my-nanogpt", meta_path="data/shakespeare_char/meta.pkl")
    -> weights/my-nanogpt/  (config.json, model.safetensors, vocabulary.json, training.json, README.md)
"""

from __future__ import annotations

import io
import math
import pickle
import pickletools
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from playground import checks
from playground.checkpoints import store as checkpoints
from playground.config import ConfigError, ModelConfig
from playground.model.gpt import GPT
from playground.text.tokenizer import CharTokenizer, escape_char

SOURCE = "nanoGPT"
COMPILED_PREFIX = "_orig_mod."
MAX_VOCABULARY_FILE_BYTES = 1 * 2**20  # meta.pkl or a characters file: a character vocabulary is a few KiB
NO_VOCABULARY = ("nanoGPT character models keep their vocabulary in meta.pkl; pass --meta or --characters-file "
                 "(GPT-2 BPE checkpoints are not supported yet)")
MODEL_ARGS = ("n_layer", "n_head", "n_embd", "block_size", "bias", "vocab_size", "dropout")
_MASK_BUFFER = re.compile(r"^transformer\.h\.\d+\.attn\.bias$")  # old nanoGPT's (1, 1, T, T) causal mask
_KEY_MAP = (  # nanoGPT name pattern -> playground name; {i} is the block
    (re.compile(r"^transformer\.wte\.weight$"), "token_embedding.weight"),
    (re.compile(r"^transformer\.wpe\.weight$"), "position_embedding.weight"),
    (re.compile(r"^transformer\.h\.(\d+)\.ln_1\.(weight|bias)$"), r"blocks.\1.ln_1.\2"),
    (re.compile(r"^transformer\.h\.(\d+)\.attn\.c_attn\.(weight|bias)$"), r"blocks.\1.attn.qkv.\2"),
    (re.compile(r"^transformer\.h\.(\d+)\.attn\.c_proj\.(weight|bias)$"), r"blocks.\1.attn.proj.\2"),
    (re.compile(r"^transformer\.h\.(\d+)\.ln_2\.(weight|bias)$"), r"blocks.\1.ln_2.\2"),
    (re.compile(r"^transformer\.h\.(\d+)\.mlp\.c_fc\.(weight|bias)$"), r"blocks.\1.mlp.fc.\2"),
    (re.compile(r"^transformer\.h\.(\d+)\.mlp\.c_proj\.(weight|bias)$"), r"blocks.\1.mlp.proj.\2"),
    (re.compile(r"^transformer\.ln_f\.(weight|bias)$"), r"ln_f.\1"),
    (re.compile(r"^lm_head\.weight$"), "lm_head.weight"),
)
# The most items a hashed value (a tuple, a frozenset, a class's arguments) may hold once written out. A real
# checkpoint's largest is a tensor's rebuild arguments, a few dozen; a tuple (a, a) nested 60 deep is 2**60.
MAX_SHARED_ITEMS = 100_000
_MEMO_PUTS = {"PUT", "BINPUT", "LONG_BINPUT"}
_MEMO_GETS = {"GET", "BINGET", "LONG_BINGET"}
_MUTATORS = {"APPEND", "APPENDS", "SETITEM", "SETITEMS", "ADDITEMS", "BUILD"}  # they change the object below


class ConversionError(ValueError):
    """A nanoGPT checkpoint or vocabulary cannot be converted; the message says what is wrong."""


@dataclass(frozen=True)
class NanoGPTCheckpoint:
    """What ckpt.pt holds that a conversion uses: the weights (prefix stripped), the shape and the progress."""

    state: dict[str, torch.Tensor]
    model_args: dict[str, Any]
    iter_num: int | None
    best_val_loss: float | None
    train_config: dict[str, Any]  # nanoGPT's ``config``: its plain values only


def _plain(value: Any) -> Any:
    """A JSON-able copy of a scalar (tensors of one element become numbers), or None for anything else."""
    if isinstance(value, torch.Tensor):
        return _plain(value.item()) if value.numel() == 1 else None
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return None


def check_sharing(data: bytes, what: str) -> None:
    """Refuse a pickle that builds a value sharing itself into more than MAX_SHARED_ITEMS items, before it is
    unpickled.

    Unpickling ``(a, a)`` nested 60 deep takes a few hundred bytes, and hashing it (as a dict key, in a
    frozenset) visits all 2**60 items without ever returning. This reads the opcodes without building anything:
    each value on the unpickler's stack is stood for by the count of items it holds written out, a value built
    from others counts theirs, a memo fetch counts what was stored. Lists and dicts, which change after they are
    stored and cannot be hashed, count 1; quoting them is bounded by ``checks.shown``.
    """
    stack: list[int] = []  # the items each value on the unpickler's stack holds written out; 0 is a MARK
    memo: dict[int, int] = {}
    try:
        for opcode, arg, _ in pickletools.genops(data):
            name = opcode.name
            if name in _MEMO_PUTS or name == "MEMOIZE":
                memo[arg if name in _MEMO_PUTS else len(memo)] = stack[-1]
                continue
            if name in _MEMO_GETS or name == "DUP":
                stack.append(memo[arg] if name in _MEMO_GETS else stack[-1])
                continue
            if name == "MARK":
                stack.append(0)
                continue
            before, popped = opcode.stack_before, 0
            if pickletools.markobject in before:
                while stack[-1] != 0:
                    popped += stack.pop()
                stack.pop()
                below = before.index(pickletools.markobject)
            else:
                below = len(before)
            container = 1
            for _ in range(below):
                container = stack.pop()
                popped += container
            built = container if name in _MUTATORS else 1 + popped
            if built > MAX_SHARED_ITEMS:
                raise ConversionError(f"{what} was refused: it shares one value so often that it holds more than "
                                      f"{MAX_SHARED_ITEMS:,} items written out, which no checkpoint or vocabulary "
                                      "does; nothing in it was read")
            stack.extend([built] * len(opcode.stack_after))
    except ConversionError:
        raise
    except (ValueError, IndexError, KeyError) as exc:  # a broken pickle: pickletools says where
        raise ConversionError(f"{what} was refused: it is not a pickle ({checks.shown(str(exc), quote=False)})") \
            from None


def _check_archive(path: Path) -> None:
    """Refuse, before torch reads it, a ckpt.pt that is not torch's zip format or that would expand when read.

    torch.save writes its records uncompressed (ZIP_STORED), so what loading allocates is at most the file's own
    size; a compressed record could expand a small upload into gigabytes (a zip bomb), so one is refused.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            records = archive.infolist()
            pickled = [archive.read(record) for record in records if record.filename.endswith(".pkl")
                       and record.compress_type == zipfile.ZIP_STORED and record.file_size <= path.stat().st_size]
    except (zipfile.BadZipFile, OSError):
        raise ConversionError(f"{path.name} is not a torch checkpoint in torch's zip format (torch.save since "
                              "PyTorch 1.6, which nanoGPT uses)") from None
    packed = [record.filename for record in records if record.compress_type != zipfile.ZIP_STORED]
    declared = sum(record.file_size for record in records)
    if packed or declared > path.stat().st_size:
        what = ", ".join(packed[:3]) if packed else "records larger than the file"
        raise ConversionError(f"{path.name} holds compressed records ({what}); torch.save never compresses, so this "
                              "file was not written by it and is not read")
    for data in pickled:
        check_sharing(data, path.name)


def read_nanogpt_checkpoint(path: str | Path) -> NanoGPTCheckpoint:
    """Load ``ckpt.pt`` with ``torch.load(weights_only=True)`` (never anything looser) and pick out its parts."""
    path = Path(path)
    if not path.is_file():
        raise ConversionError(f"{path} is not a file")
    _check_archive(path)  # its pickled part is checked for shared values before torch unpickles it
    try:
        data = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError, OSError, ValueError, AttributeError) as exc:
        first_line = checks.shown(str(exc), quote=False) if str(exc).strip() else type(exc).__name__
        raise ConversionError(
            f"{path.name} cannot be read with torch.load(weights_only=True), the only way this converter opens "
            f"a checkpoint: it is not a torch checkpoint, or it holds objects other than tensors and plain data "
            f"(a custom class). torch said: {first_line}"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict) or \
            not isinstance(data.get("model_args"), dict):
        raise ConversionError(f"{path.name} is not a nanoGPT checkpoint: expected a dict with 'model' (the weights) "
                              "and 'model_args' (the shape), as nanoGPT's train.py saves")
    state = {}
    for key, tensor in data["model"].items():
        if not isinstance(key, str) or not isinstance(tensor, torch.Tensor):
            raise ConversionError(f"{path.name}: the weights hold {checks.shown(key)}, which is not a named tensor")
        state[key.removeprefix(COMPILED_PREFIX)] = tensor
    iter_num = _plain(data.get("iter_num"))
    best_val_loss = _plain(data.get("best_val_loss"))
    raw_config = data.get("config") if isinstance(data.get("config"), dict) else {}
    train_config = {k: _plain(v) for k, v in raw_config.items() if isinstance(k, str) and _plain(v) is not None}
    return NanoGPTCheckpoint(
        state=state,
        model_args=dict(data["model_args"]),
        iter_num=int(iter_num) if isinstance(iter_num, (int, float)) and not isinstance(iter_num, bool) else None,
        best_val_loss=float(best_val_loss) if isinstance(best_val_loss, (int, float)) else None,
        train_config=train_config,
    )


def model_config(model_args: dict[str, Any]) -> ModelConfig:
    """nanoGPT's ``model_args`` as a ModelConfig: n_layer 6, n_head 6, n_embd 384, block_size 256 ->
    layers_num 6, heads_num 6, embedding_dim 384, context_size 256."""
    missing = [name for name in MODEL_ARGS if name not in model_args]
    if missing:
        raise ConversionError(f"model_args lacks {', '.join(missing)}; nanoGPT's train.py saves all of "
                              f"{', '.join(MODEL_ARGS)}")
    if not isinstance(model_args["bias"], bool):
        raise ConversionError(f"model_args bias must be true or false, got {checks.shown(model_args['bias'])}")
    dropout = checks.real_number(model_args["dropout"], "model_args dropout", error=ConversionError)
    try:
        return ModelConfig(vocabulary_size=model_args["vocab_size"], context_size=model_args["block_size"],
                           embedding_dim=model_args["n_embd"], heads_num=model_args["n_head"],
                           layers_num=model_args["n_layer"], dropout_rate=dropout, use_bias=model_args["bias"])
    except (ConfigError, TypeError, ValueError) as exc:
        raise ConversionError(f"model_args do not describe a model the playground can build: {exc}") from None


def playground_key(nanogpt_key: str) -> str | None:
    """The playground name of a nanoGPT weight (``transformer.h.0.attn.c_attn.weight`` -> ``blocks.0.attn.qkv.weight``),
    or None when it has none."""
    for pattern, replacement in _KEY_MAP:
        if pattern.match(nanogpt_key):
            return pattern.sub(replacement, nanogpt_key)
    return None


def held_bytes(tensors) -> int:
    """The memory ``tensors`` hold: each storage once (views and stride-0 tensors share one)."""
    storages = {}
    for tensor in tensors:
        if isinstance(tensor, torch.Tensor):
            storage = tensor.untyped_storage()
            storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def convert_state(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """nanoGPT's weights renamed for ``GPT(config)``, float32, checked key by key and shape by shape."""
    with torch.device("meta"):  # the names and shapes only: no memory, no initialisation
        expected = {key: tensor.shape for key, tensor in GPT(config).state_dict().items()}
    converted, unexpected = {}, []
    for key, tensor in state.items():
        if _MASK_BUFFER.match(key):
            continue  # a buffer, not a weight: the playground builds its causal mask on the fly
        target = playground_key(key)
        if target is None or target not in expected:
            unexpected.append(key)
            continue
        if not tensor.is_floating_point():
            raise ConversionError(f"{key} holds {tensor.dtype} values; weights must be floating point")
        if tensor.shape != expected[target]:
            raise ConversionError(f"{key} has shape {tuple(tensor.shape)}; model_args need "
                                  f"{tuple(expected[target])} for {target}")
        converted[target] = tensor.detach().to(torch.float32).clone()
    missing = sorted(set(expected) - set(converted))
    if missing or unexpected:
        parts = []
        if missing:
            parts.append(f"missing weights for {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"unexpected keys {', '.join(sorted(unexpected)[:5])}{' ...' if len(unexpected) > 5 else ''}")
        raise ConversionError(f"the weights do not match model_args: {'; '.join(parts)}")
    return converted


class _PlainDataUnpickler(pickle.Unpickler):
    """Unpickles dicts, lists, tuples, text and numbers only: every class or function lookup is refused, so a
    pickled object or a ``__reduce__`` payload stops before anything runs."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"it asks for {module}.{name}, and only plain data is accepted")


def _read_small(path: str | Path, what: str) -> bytes:
    path = Path(path)
    if not path.is_file():
        raise ConversionError(f"{what} {path} is not a file")
    if path.stat().st_size > MAX_VOCABULARY_FILE_BYTES:
        raise ConversionError(f"{what} {path.name} is {path.stat().st_size:,} bytes; a character vocabulary "
                              f"fits in {MAX_VOCABULARY_FILE_BYTES:,}")
    return path.read_bytes()


def read_meta(path: str | Path) -> list[str]:
    """The characters of nanoGPT's ``meta.pkl`` in ID order: ``{'itos': {0: '\\n', 1: ' ', ...}}`` -> ['\\n', ' ', ...].

    Only plain data is unpickled (see _PlainDataUnpickler); then ``itos`` must map IDs 0..V-1 each to one
    character, and ``vocab_size`` and ``stoi``, when present, must agree with it.
    """
    name = Path(path).name
    try:
        data = _read_small(path, "meta.pkl")
        check_sharing(data, name)
        meta = _PlainDataUnpickler(io.BytesIO(data)).load()
    except ConversionError:
        raise
    except Exception as exc:  # whatever a broken or hostile pickle raises, it is one refusal
        raise ConversionError(f"{name} was refused: {checks.shown(str(exc), quote=False)}. A nanoGPT meta.pkl "
                              "holds only a dict of vocab_size, itos and stoi; nothing in it was run") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("itos"), dict):
        raise ConversionError(f"{name} is not a nanoGPT character vocabulary: expected a dict with 'itos' "
                              "(ID -> character), as data/<dataset>/prepare.py writes")
    itos = meta["itos"]
    size = len(itos)
    if size == 0 or any(type(i) is not int for i in itos) or set(itos) != set(range(size)):
        raise ConversionError(f"{name}: itos must map the IDs 0..{max(size - 1, 0)} each to a character")
    characters = [itos[i] for i in range(size)]
    wrong = next((i for i, c in enumerate(characters) if not isinstance(c, str) or len(c) != 1), None)
    if wrong is not None:
        raise ConversionError(f"{name}: itos[{wrong}] is {checks.shown(characters[wrong])}, not a single character "
                              "(GPT-2 BPE vocabularies are not supported yet)")
    if "vocab_size" in meta and meta["vocab_size"] != size:
        raise ConversionError(f"{name}: vocab_size is {checks.shown(meta['vocab_size'])} but itos has {size} entries")
    if "stoi" in meta and meta["stoi"] != {c: i for i, c in enumerate(characters)}:
        raise ConversionError(f"{name}: stoi is not the inverse of itos")
    return characters


def read_characters_file(path: str | Path) -> list[str]:
    """The characters of a UTF-8 text file, in order, as IDs 0..V-1 (no newline translation, no trimming)."""
    try:
        return list(_read_small(path, "the characters file").decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConversionError(f"{Path(path).name} is not UTF-8 text: {checks.shown(str(exc), quote=False)}") \
            from None


def vocabulary(meta_path: str | Path | None = None, characters_path: str | Path | None = None,
               characters: str | None = None) -> CharTokenizer:
    """The tokenizer from meta.pkl, a characters file or pasted characters (exactly one), keeping nanoGPT's ID
    order."""
    given = [value for value in (meta_path, characters_path, characters) if value is not None]
    if len(given) > 1:
        raise ConversionError("pass one vocabulary: meta.pkl, a characters file or the characters themselves")
    if not given:
        raise ConversionError(NO_VOCABULARY)
    if meta_path is not None:
        characters = read_meta(meta_path)
    elif characters_path is not None:
        characters = read_characters_file(characters_path)
    else:
        characters = list(characters)
    repeated = {c: [i for i, d in enumerate(characters) if d == c] for c in dict.fromkeys(characters)
                if characters.count(c) > 1}
    if repeated:
        shown = ", ".join(f"'{escape_char(c)}' (IDs {', '.join(map(str, ids[:4]))})"
                          for c, ids in list(repeated.items())[:5])
        message = f"the vocabulary repeats {shown}: each character must have one ID"
        if characters_path is not None and characters[-1] == "\n" and "\n" in repeated:
            message += (f". {Path(characters_path).name} ends with a newline that is also character "
                        f"{repeated[chr(10)][0]}: an editor adds one on save. Remove the last one (truncate -s -1 "
                        f"{Path(characters_path).name}) and convert again")
        raise ConversionError(message)
    try:
        return CharTokenizer(characters)
    except ValueError as exc:
        raise ConversionError(f"the vocabulary cannot be used: {exc}") from None


def trailing_newline_hint(tokenizer: CharTokenizer, rows: int, characters_path: str | Path | None) -> str:
    """When a characters file has one character more than the model and it is a final newline: what to do."""
    if characters_path is None or tokenizer.vocabulary_size != rows + 1 or tokenizer.characters[-1] != "\n":
        return ""
    name = Path(characters_path).name
    return (f"; {name} ends with a newline ('\\n', ID {rows}), one more than the model's {rows}: an editor adds one "
            f"on save. Remove it (truncate -s -1 {name}) and convert again")


def training_record(nano: NanoGPTCheckpoint, source_file: str, vocabulary_file: str,
                    command: str | None) -> dict[str, Any]:
    """What training.json holds for a converted checkpoint: where it came from and how far nanoGPT got.

    ``steps_done`` is nanoGPT's iter_num and ``val_loss`` its best validation loss (nanoGPT's own split), so the
    listings show them as for a run trained here.
    """
    record: dict[str, Any] = {
        "source": SOURCE,
        "source_file": source_file,
        "vocabulary_file": vocabulary_file,
        "iter_num": nano.iter_num,
        "best_val_loss": nano.best_val_loss,
        "model_args": {k: _plain(v) for k, v in nano.model_args.items() if isinstance(k, str)},
        "nanogpt_config": nano.train_config,
        "steps_done": nano.iter_num or 0,
        "train_loss": [],
        "val_loss": [[nano.iter_num or 0, nano.best_val_loss]] if nano.best_val_loss is not None else [],
    }
    if command is not None:
        record["converted_with"] = command
    return record


def model_card(name: str, config: ModelConfig, nano: NanoGPTCheckpoint, source_file: str,
               command: str | None) -> str:
    """A short README.md: converted from nanoGPT, with which command, its shape and progress."""
    loss = f"{nano.best_val_loss:.4f}" if nano.best_val_loss is not None else "not recorded"
    dataset = nano.train_config.get("dataset")
    rows = [
        ("source", f"nanoGPT `{source_file}`" + (f", dataset `{dataset}`" if isinstance(dataset, str) else "")),
        ("parameters", f"{config.parameter_count():,}"),
        ("shape", f"{config.layers_num} layers, {config.heads_num} heads, embedding {config.embedding_dim}, context "
                  f"{config.context_size}, vocabulary {config.vocabulary_size}, bias {config.use_bias}"),
        ("iterations", str(nano.iter_num) if nano.iter_num is not None else "not recorded"),
        ("best validation loss", f"{loss} (nanoGPT's own measurement)"),
    ]
    table = "\n".join(f"| {key} | {value} |" for key, value in rows)
    how = f"\n\nConverted with:\n\n```bash\n{command}\n```" if command else ""
    return (
        f"---\nlibrary_name: attention-playground\ntags: [character-level, gpt, attention-playground, nanogpt]\n"
        f"---\n\n# {name}\n\nA character-level GPT trained with Karpathy's nanoGPT and converted to an Attention "
        f"Playground checkpoint (weights renamed, the LM head untied; the maths is unchanged).{how}\n\n"
        f"| | |\n|---|---|\n{table}\n"
    )


def convert_nanogpt(ckpt_path: str | Path, name: str, *, meta_path: str | Path | None = None,
                    characters_path: str | Path | None = None, characters: str | None = None,
                    directory: Path | None = None, max_parameters: int | None = None, command: str | None = None,
                    record: dict[str, Any] | None = None,
                    before_converting: Callable[[ModelConfig, int], None] | None = None) -> Path:
    """Convert nanoGPT's ckpt.pt (+ meta.pkl, a characters file or the characters) to ``<directory>/<name>/``;
    return its path.

    Everything is checked before anything is written: the name, the vocabulary, the shape (and
    ``max_parameters``, None for no cap), every weight. ``command`` is recorded in training.json and the card;
    ``record``'s fields go into training.json too (the app's upload records whose the folder is there).
    ``before_converting(config, read_bytes)`` is called once the model's shape is known, before any tensor is
    converted or a byte written: a caller prices the conversion there by what that shape takes (a 2.5 KB ckpt.pt of
    stride-0 tensors declaring 19M parameters becomes 73 MB) beside what the weights read hold (``read_bytes``),
    and may refuse it by raising.
    """
    name = checkpoints.validate_name(name)
    tokenizer = vocabulary(meta_path, characters_path, characters)
    nano = read_nanogpt_checkpoint(ckpt_path)
    config = model_config(nano.model_args)
    if max_parameters is not None and config.parameter_count() > max_parameters:
        raise ConversionError(f"the model has {config.parameter_count():,} parameters; the limit is "
                              f"{max_parameters:,}")
    if tokenizer.vocabulary_size != config.vocabulary_size:
        raise ConversionError(
            f"the vocabulary has {tokenizer.vocabulary_size} characters but the model was trained with vocab_size "
            f"{config.vocabulary_size}; pass the meta.pkl of the dataset it was trained on"
            + (" (a vocab_size of 50257 or 50304 is GPT-2's BPE, which is not supported yet)"
               if config.vocabulary_size in (50257, 50304) else "")
            + trailing_newline_hint(tokenizer, config.vocabulary_size, characters_path)
        )
    if before_converting is not None:
        before_converting(config, held_bytes(nano.state.values()))
    state = convert_state(nano.state, config)
    with torch.device("meta"):
        model = GPT(config)
    model.load_state_dict(state, strict=True, assign=True)  # the converted tensors become the parameters
    model.eval()
    source_file = Path(ckpt_path).name
    vocabulary_file = "pasted characters" if characters is not None else \
        Path(meta_path if meta_path is not None else characters_path).name
    return checkpoints.save_checkpoint(
        model, tokenizer, name, directory=directory,
        training={**(record or {}), **training_record(nano, source_file, vocabulary_file, command)},
        card=model_card(name, config, nano, source_file, command),
    )
