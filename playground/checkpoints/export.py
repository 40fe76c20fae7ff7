"""A playground checkpoint -> a folder in Hugging Face's GPT-2 layout, which ``transformers`` opens as it is.

    export_gpt2("shakespeare-char", "out/shakespeare-gpt2")
    -> out/shakespeare-gpt2/  config.json (model_type gpt2), model.safetensors (GPT2LMHeadModel's names, Conv1D
                              weights (in, out)), generation_config.json, tokenizer.json, tokenizer_config.json,
                              README.md, training.json

    AutoModelForCausalLM.from_pretrained("out/shakespeare-gpt2")  # the same logits, to float rounding
    AutoTokenizer.from_pretrained("out/shakespeare-gpt2")         # the same token IDs
    pipeline("text-generation", model="out/shakespeare-gpt2")("ROMEO:")  # stops at the context (128 tokens)

The mapping is gpt2.py's (the one key map, used both ways); a character vocabulary becomes a ``tokenizers``
WordLevel model of its characters, a BPE run keeps its own tokenizer.json, and tokenizer_config.json names
``PreTrainedTokenizerFast`` so AutoTokenizer reads that file as it is instead of rebuilding GPT-2's own BPE.
generation_config.json caps generation at the context (transformers' text-generation pipeline asks for 256 new
tokens by default, and a position past ``n_positions`` has no embedding) and names the tokenizer's bos/eos token.
The playground opens the exported folder too (checkpoints.load_checkpoint reads the GPT-2 layout). A model of the
Llama family goes in that family's own layout instead (checkpoints/llama.py: config.json with model_type llama, or
qwen2 where it has q/k/v biases; LlamaForCausalLM's names), which transformers and the playground open the same way.
The folder is written beside its target and renamed into place, so a crash leaves no half of one. Knows nothing
about the UI or the Hub (hub.publish_checkpoint uploads what this writes); the command line is cli/export.py.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from safetensors.torch import save_file

from playground import checks
from playground.checkpoints import gpt2
from playground.checkpoints import llama as llama_layout
from playground.checkpoints import store as checkpoints
from playground.checkpoints.store import Checkpoint
from playground.text.subword import BPETokenizer

# who started a run, as the hashes a server records in training.json beside the run's own fields
# (server/tenancy.py writes them): never exported or published
OWNER_FIELD, CLIENT_FIELD = "owner", "client"
PRIVATE_FIELDS = frozenset({OWNER_FIELD, CLIENT_FIELD})
GENERATION_CONFIG_FILE = "generation_config.json"  # what transformers' generate() and pipelines start from
EXAMPLE_PROMPT = "ROMEO:"  # the card's pipeline example, where the vocabulary has its characters
EXPORTED_FILES = (checkpoints.CONFIG_FILE, checkpoints.WEIGHTS_FILE, GENERATION_CONFIG_FILE,
                  checkpoints.TOKENIZER_FILE, gpt2.TOKENIZER_CONFIG_FILE, checkpoints.CARD_FILE,
                  checkpoints.TRAINING_FILE)


class ExportError(ValueError):
    """A checkpoint the GPT-2 layout cannot hold, or a target folder that may not be written; says which and why."""


def tokenizer_files(checkpoint: Checkpoint) -> tuple[str, dict[str, Any], int | None]:
    """(tokenizer.json text, tokenizer_config.json, the ID of GPT-2's <|endoftext|> or None) for a checkpoint."""
    tokenizer = checkpoint.tokenizer
    if isinstance(tokenizer, BPETokenizer):
        text, special = tokenizer.to_str(), tokenizer.start_text
        bos = tokenizer.encode(special).tolist() if special != "\n" else []
        bos_id = bos[0] if len(bos) == 1 else None
    else:
        text, bos_id = gpt2.character_tokenizer_json(tokenizer.characters), None
    config: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
                              "model_max_length": checkpoint.config.context_size}
    if bos_id is not None:
        token = tokenizer.decode([bos_id])
        config.update(bos_token=token, eos_token=token)
    return text, config, bos_id


def generation_config(checkpoint: Checkpoint, bos_id: int | None) -> dict[str, Any]:
    """generation_config.json: generation stops at the context (max_length counts the prompt too), and the
    tokenizer's bos/eos token where it has one. Context 128, characters -> {"max_length": 128}; GPT-2's BPE adds
    "bos_token_id" and "eos_token_id" 50256."""
    config: dict[str, Any] = {"max_length": checkpoint.config.context_size}
    if bos_id is not None:
        config.update(bos_token_id=bos_id, eos_token_id=bos_id)
    return config


def _run_rows(checkpoint: Checkpoint) -> list[tuple[str, str]]:
    """The model's parameters, then the run's own numbers from its training.json (steps and corpus, validation
    loss, time and device), as (what, value) rows; only what it records (a GPT-2 from the Hub records none)."""
    training = checkpoint.training or {}
    rows = [("parameters", f"{checkpoint.model.parameter_count():,}")]
    corpus = training.get("corpus")
    steps = training.get("steps_done")
    if isinstance(steps, int) and steps > 0:
        where = f" on {corpus['name']} ({corpus['characters']:,} characters)" if isinstance(corpus, dict) and \
            isinstance(corpus.get("name"), str) and isinstance(corpus.get("characters"), int) else ""
        by = " with nanoGPT" if training.get("source") == "nanoGPT" else ""
        rows.append(("trained", f"{checks.count(steps, 'step')}{where}{by}"))
    if checkpoint.val_loss is not None:
        step = training["val_loss"][-1][0]
        whose = "nanoGPT's best" if training.get("source") == "nanoGPT" else "the run's last"
        rows.append(("validation loss", f"{checkpoint.val_loss:.4f} at step {step:,} ({whose}, cross-entropy in "
                                        "nats)"))
    seconds, device = training.get("wall_seconds"), training.get("device")
    if isinstance(seconds, (int, float)) and isinstance(device, str):
        rows.append(("training time", f"{seconds:,.0f} s on {device}"))
    return rows


def model_card(checkpoint: Checkpoint, target: str) -> str:
    """A short README.md: what the model is, the run's own numbers, and how to open ``target`` (the folder written,
    or the Hub repo id it is pushed to) in transformers."""
    config = checkpoint.config
    table = "\n".join(f"| {what} | {value} |" for what, value in _run_rows(checkpoint))
    tokenizer = checkpoint.tokenizer
    prompt = tokenizer.start_text if tokenizer.find_unknown(EXAMPLE_PROMPT) else EXAMPLE_PROMPT
    family, shape = ("llama", "A Llama-family") if config.is_llama else ("gpt2", "A GPT-2-shaped")
    return (f"---\nlibrary_name: transformers\npipeline_tag: text-generation\ntags: [{family}, attention-playground]\n"
            f"---\n\n# {checkpoint.name}\n\n"
            f"{shape} model from Attention Playground ({checkpoint.description}): {config.layers_num} layers, "
            f"{config.heads_num} heads, embedding {config.embedding_dim}, context {config.context_size}, "
            f"{config.vocabulary_size} {checkpoint.tokenizer.token_name}s.\n\n| | |\n| --- | --- |\n{table}\n\n"
            "```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer, pipeline\n"
            f'model = AutoModelForCausalLM.from_pretrained("{target}")\n'
            f'tokenizer = AutoTokenizer.from_pretrained("{target}")\n'
            f'print(pipeline("text-generation", model="{target}")({json.dumps(prompt)})[0]["generated_text"])\n```\n')


def write_gpt2(checkpoint: Checkpoint, folder: Path, card_target: str | None = None) -> tuple[str, ...]:
    """Write ``checkpoint`` in the GPT-2 layout (a Llama-family model: in its own) into the existing empty ``folder``;
    return the files written.

    Everything is mapped (and refused with an ExportError naming why) before the first file is written. The card
    names ``card_target`` (where the files will be read from: the folder they are renamed to, a Hub repo id),
    else ``folder``.
    """
    config = checkpoint.config
    try:
        text, tokenizer_config, bos_id = tokenizer_files(checkpoint)
        if config.is_llama:
            config_json = llama_layout.llama_config(config, bos_id, bos_id)
            state = llama_layout.export_state_dict(checkpoints.stored_state(checkpoint.model), config)
        else:
            config_json = gpt2.gpt2_config(config, bos_id)
            state = gpt2.export_state_dict(checkpoints.stored_state(checkpoint.model), config)
    except gpt2.LayoutError as exc:
        layout = "the Llama layout" if config.is_llama else "GPT-2's layout"
        raise ExportError(f"{checkpoint.name} cannot be written in {layout}: {exc}") from None
    folder = Path(folder)
    (folder / checkpoints.CONFIG_FILE).write_text(json.dumps(config_json, indent=2) + "\n", encoding="utf-8")
    save_file(state, str(folder / checkpoints.WEIGHTS_FILE), metadata={"format": "pt"})
    (folder / GENERATION_CONFIG_FILE).write_text(json.dumps(generation_config(checkpoint, bos_id), indent=2) + "\n",
                                                 encoding="utf-8")
    (folder / checkpoints.TOKENIZER_FILE).write_text(text, encoding="utf-8")
    (folder / gpt2.TOKENIZER_CONFIG_FILE).write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False) + "\n",
                                                     encoding="utf-8")
    (folder / checkpoints.CARD_FILE).write_text(model_card(checkpoint, card_target or str(folder)), encoding="utf-8")
    if checkpoint.training is not None:
        training = {k: v for k, v in checkpoint.training.items() if k not in PRIVATE_FIELDS}
        (folder / checkpoints.TRAINING_FILE).write_text(json.dumps(training, indent=2, ensure_ascii=False) + "\n",
                                                        encoding="utf-8")
    return tuple(name for name in EXPORTED_FILES if (folder / name).is_file())


def is_export(folder: Path) -> bool:
    """Whether ``folder`` holds an earlier export and nothing else: only files this module writes (no folders, no
    links), a config.json of GPT-2's layout and its weights among them."""
    try:
        entries = list(folder.iterdir())
        config = json.loads((folder / checkpoints.CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (all(entry.name in EXPORTED_FILES and entry.is_file() and not entry.is_symlink() for entry in entries)
            and isinstance(config, dict) and config.get("model_type") == "gpt2"
            and (folder / checkpoints.WEIGHTS_FILE).is_file())


def check_target(target: Path, checkpoint: Checkpoint, *, replace: bool, directory: Path | None = None) -> None:
    """Refuse (ExportError, naming what is there) a target that may not be written: a file; the current folder,
    the home folder or one above them; the weights folder, a folder holding the checkpoint; a folder that holds
    files, unless ``replace`` and they are an earlier export and nothing else (never someone's files or a run).

        out/tiny-gpt2 (an earlier export) with replace -> written over;  ~ or . or weights/ -> refused
    """
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise ExportError(f"{target} is {'a link' if target.is_symlink() else 'a file'}; give a new folder to export "
                          "into")
    resolved = target.resolve()
    for folder, what in ((Path.cwd(), "the current folder"), (Path.home(), "the home folder")):
        if resolved == folder.resolve() or resolved in folder.resolve().parents:
            raise ExportError(f"{target} is {what}{'' if resolved == folder.resolve() else ' or above it'}; "
                              "give a new folder to export into, such as out/" + checkpoint.name.replace("/", "-"))
    weights = checkpoints.weights_dir(directory)
    if resolved == weights.resolve() or resolved in weights.resolve().parents:
        raise ExportError(f"{target} is the weights folder{'' if resolved == weights.resolve() else ' or above it'}; "
                          "give a new folder to export into")
    source = checkpoint.path.resolve()
    if resolved == source or resolved in source.parents:
        raise ExportError(f"{target} {'is' if resolved == source else 'holds'} the checkpoint itself; export into "
                          "another folder")
    if not target.exists() or not any(target.iterdir()):
        return
    if not replace:
        raise ExportError(f"{target} already holds files: pass --replace to write over it, or another folder")
    if not is_export(target):
        names = sorted(entry.name + ("/" if entry.is_dir() else "") for entry in target.iterdir())
        shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        raise ExportError(f"{target} holds {shown}, not an earlier export alone: --replace writes over an earlier "
                          f"export only (GPT-2's config.json and {', '.join(EXPORTED_FILES[1:])}); give a new folder")


def export_gpt2(source: str | Path | Checkpoint, target: str | Path, *, directory: Path | None = None,
                replace: bool = False) -> Path:
    """Export ``source`` (a checkpoint name in ``directory``, a folder, or a loaded Checkpoint) to the folder
    ``target`` in GPT-2's layout; return ``target``.

    ``target`` must not exist (or be empty) unless ``replace``, and ``replace`` writes over an earlier export only
    (``check_target``); it is written in a temporary folder beside it, then renamed into place. Raises ExportError,
    or CheckpointError when ``source`` does not load.
    """
    checkpoint = source if isinstance(source, Checkpoint) else checkpoints.load_checkpoint(
        source if isinstance(source, Path) else str(source), directory=directory)
    target = Path(target).expanduser()
    check_target(target, checkpoint, replace=replace, directory=directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-export-{target.name}-", dir=target.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; an exported model is for sharing
        write_gpt2(checkpoint, tmp, card_target=str(target))  # the card names where it lands, not ``tmp``
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".old-export-{target.name}-", dir=target.parent))
            target.rename(old / target.name)
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
