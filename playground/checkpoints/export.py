"""A playground checkpoint -> a folder in Hugging Face's GPT-2 layout, which ``transformers`` opens as it is.

    export_gpt2("shakespeare-char", "out/shakespeare-gpt2")
    -> out/shakespeare-gpt2/  config.json (model_type gpt2), model.safetensors (GPT2LMHeadModel's names, Conv1D
                              weights (in, out)), tokenizer.json, tokenizer_config.json, README.md, training.json

    AutoModelForCausalLM.from_pretrained("out/shakespeare-gpt2")  # the same logits, to float rounding
    AutoTokenizer.from_pretrained("out/shakespeare-gpt2")         # the same token IDs

The mapping is gpt2.py's (the one key map, used both ways); a character vocabulary becomes a ``tokenizers``
WordLevel model of its characters, a BPE run keeps its own tokenizer.json, and tokenizer_config.json names
``PreTrainedTokenizerFast`` so AutoTokenizer reads that file as it is instead of rebuilding GPT-2's own BPE.
The playground opens the exported folder too (checkpoints.load_checkpoint reads the GPT-2 layout). A model of the
Llama family goes in that family's own layout instead (llama_layout.py: config.json with model_type llama, or qwen2
where it has q/k/v biases; LlamaForCausalLM's names), which transformers and the playground open the same way.
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

from playground.checkpoints import gpt2
from playground.checkpoints import llama as llama_layout
from playground.checkpoints import store as checkpoints
from playground.checkpoints.store import Checkpoint
from playground.text.subword import BPETokenizer

# who started a run, as the hashes a server records in training.json beside the run's own fields
# (server/tenancy.py writes them): never exported or published
OWNER_FIELD, CLIENT_FIELD = "owner", "client"
PRIVATE_FIELDS = frozenset({OWNER_FIELD, CLIENT_FIELD})
EXPORTED_FILES = (checkpoints.CONFIG_FILE, checkpoints.WEIGHTS_FILE, checkpoints.TOKENIZER_FILE,
                  gpt2.TOKENIZER_CONFIG_FILE, checkpoints.CARD_FILE, checkpoints.TRAINING_FILE)


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


def model_card(checkpoint: Checkpoint, target: str) -> str:
    """A short README.md: what the model is and the two lines that open it in transformers."""
    config = checkpoint.config
    family, shape = ("llama", "A Llama-family") if config.is_llama else ("gpt2", "A GPT-2-shaped")
    return (f"---\nlibrary_name: transformers\ntags: [{family}, attention-playground]\n---\n\n# {checkpoint.name}\n\n"
            f"{shape} model from Attention Playground ({checkpoint.description}): {config.layers_num} layers, "
            f"{config.heads_num} heads, embedding {config.embedding_dim}, context {config.context_size}, "
            f"{config.vocabulary_size} {checkpoint.tokenizer.token_name}s.\n\n```python\n"
            "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
            f'model = AutoModelForCausalLM.from_pretrained("{target}")\n'
            f'tokenizer = AutoTokenizer.from_pretrained("{target}")\n```\n')


def write_gpt2(checkpoint: Checkpoint, folder: Path, card_target: str | None = None) -> tuple[str, ...]:
    """Write ``checkpoint`` in the GPT-2 layout (a Llama-family model: in its own) into the existing empty ``folder``;
    return the files written.

    Everything is mapped (and refused with an ExportError naming why) before the first file is written.
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
    (folder / checkpoints.TOKENIZER_FILE).write_text(text, encoding="utf-8")
    (folder / gpt2.TOKENIZER_CONFIG_FILE).write_text(json.dumps(tokenizer_config, indent=2, ensure_ascii=False) + "\n",
                                                     encoding="utf-8")
    (folder / checkpoints.CARD_FILE).write_text(model_card(checkpoint, card_target or str(folder)), encoding="utf-8")
    if checkpoint.training is not None:
        training = {k: v for k, v in checkpoint.training.items() if k not in PRIVATE_FIELDS}
        (folder / checkpoints.TRAINING_FILE).write_text(json.dumps(training, indent=2, ensure_ascii=False) + "\n",
                                                        encoding="utf-8")
    return tuple(name for name in EXPORTED_FILES if (folder / name).is_file())


def export_gpt2(source: str | Path | Checkpoint, target: str | Path, *, directory: Path | None = None,
                replace: bool = False) -> Path:
    """Export ``source`` (a checkpoint name in ``directory``, a folder, or a loaded Checkpoint) to the folder
    ``target`` in GPT-2's layout; return ``target``.

    ``target`` must not exist (or be empty) unless ``replace``; it is written in a temporary folder beside it,
    then renamed into place. Raises ExportError, or CheckpointError when ``source`` does not load.
    """
    checkpoint = source if isinstance(source, Checkpoint) else checkpoints.load_checkpoint(
        source if isinstance(source, Path) else str(source), directory=directory)
    target = Path(target).expanduser()
    if target.exists():
        if not target.is_dir():
            raise ExportError(f"{target} is a file; give a folder to export into")
        if any(target.iterdir()) and not replace:
            raise ExportError(f"{target} already holds files: pass --replace to write over it, or another folder")
    if target.resolve() == checkpoint.path.resolve():
        raise ExportError(f"{target} is the checkpoint itself; export into another folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-export-{target.name}-", dir=target.parent))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; an exported model is for sharing
        write_gpt2(checkpoint, tmp)
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
