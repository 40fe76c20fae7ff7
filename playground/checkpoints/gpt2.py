"""The Hugging Face GPT-2 layout <-> the playground's own model: config.json and weight names mapped in one place.

A repo in that layout (openai-community/gpt2, distilgpt2, gpt2-medium, a learner's fine-tune) holds
  config.json        ``"model_type": "gpt2"``, n_embd, n_head, n_layer, n_positions, vocab_size, ...
  model.safetensors  GPT2LMHeadModel's state dict (safetensors only: a pickle is never read)
  tokenizer.json     its byte-level BPE tokenizer (subword.BPETokenizer)
GPT-2 is the playground's GPT with biases, GPT-2's tanh GELU, its LayerNorm epsilon and the LM head tied to the
token embedding, so every view (the seven stages, the heads, sampling with the KV cache) works on it unchanged.
Its weights differ only in their names and in one thing more: GPT-2's projections are ``Conv1D`` layers, whose
weight is stored (in, out), the transpose of ``nn.Linear``'s (out, in). ``CONV1D_WEIGHTS`` lists them and
``map_weight`` transposes them, here and nowhere else.

    transformer.h.0.attn.c_attn.weight (768, 2304)  ->  blocks.0.attn.qkv.weight (2304, 768), transposed
    h.0.attn.bias (1, 1, 1024, 1024)                 ->  dropped: an old causal-mask buffer, not a weight

Real repos differ: keys with or without the ``transformer.`` prefix, the old ``attn.bias`` / ``attn.masked_bias``
buffers present or not, ``lm_head.weight`` absent (tied) or stored as a copy of ``wte.weight``. A key that maps to
nothing is refused by name. Knows nothing about files, the Hub or the UI (checkpoints.py reads the files).

The same tables map the other way (``gpt2_config``, ``export_state_dict``; export.py writes the files), so a
playground run opens in ``transformers``: biases it was trained without are written as zeros (GPT-2 always has
them; a zero bias adds nothing), an untied head is stored as ``lm_head.weight`` with ``tie_word_embeddings``
false, and a character vocabulary becomes a ``tokenizers`` WordLevel model that maps each character to its ID
(``character_tokenizer_json``). What GPT-2 has no place for (notebook 004's attention-only model, a bias on the
LM head that is not zero, an activation it lacks) is refused saying what the model is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from playground import checks
from playground.config import ConfigError, ModelConfig

MODEL_TYPE = "gpt2"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"  # tells AutoTokenizer to read tokenizer.json as it is
VOCAB_FILE, MERGES_FILE = "vocab.json", "merges.txt"  # GPT-2's original BPE files, read when tokenizer.json is absent
PREFIX = "transformer."
# GPT-2's activation_function -> ModelConfig.activation
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
               "gelu": "gelu", "relu": "relu"}
# ModelConfig.activation -> the activation_function an exported config.json names (transformers' ACT2FN)
EXPORTED_ACTIVATIONS = {"gelu_tanh": "gelu_new", "gelu": "gelu", "relu": "relu"}
# Conv1D layers: weight stored (in, out), transposed once on the way in (map_weight)
CONV1D_WEIGHTS = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
# per block: GPT-2's name -> the playground's (blocks.N. + this)
BLOCK_NAMES = {
    "ln_1.weight": "ln_1.weight", "ln_1.bias": "ln_1.bias",
    "attn.c_attn.weight": "attn.qkv.weight", "attn.c_attn.bias": "attn.qkv.bias",
    "attn.c_proj.weight": "attn.proj.weight", "attn.c_proj.bias": "attn.proj.bias",
    "ln_2.weight": "ln_2.weight", "ln_2.bias": "ln_2.bias",
    "mlp.c_fc.weight": "mlp.fc.weight", "mlp.c_fc.bias": "mlp.fc.bias",
    "mlp.c_proj.weight": "mlp.proj.weight", "mlp.c_proj.bias": "mlp.proj.bias",
}
TOP_NAMES = {"wte.weight": "token_embedding.weight", "wpe.weight": "position_embedding.weight",
             "ln_f.weight": "ln_f.weight", "ln_f.bias": "ln_f.bias"}
OLD_BUFFERS = ("attn.bias", "attn.masked_bias")  # causal-mask buffers older transformers saved with the weights
TIED_HEAD = "lm_head.weight"
_BLOCK_KEY = re.compile(r"^h\.(\d+)\.(.+)$")


class LayoutError(ValueError):
    """A config.json or weights file in the GPT-2 layout that the playground's model cannot take; names the key."""


def is_gpt2_config(data: Any) -> bool:
    """Whether a parsed config.json is Hugging Face's GPT-2 layout (``"model_type": "gpt2"``)."""
    return isinstance(data, dict) and data.get("model_type") == MODEL_TYPE


def _whole(data: dict[str, Any], *names: str) -> int:
    for name in names:
        value = data.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise LayoutError(f"config.json: {name} must be a whole number, got {checks.shown(value)}")
            return value
    raise LayoutError(f"config.json has no {' or '.join(names)}")


def model_config(data: dict[str, Any]) -> ModelConfig:
    """A GPT-2 config.json -> ModelConfig: n_embd 768, n_head 12, n_layer 12, n_positions 1024, vocab_size 50257
    -> embedding_dim 768, heads_num 12, layers_num 12, context_size 1024, vocabulary_size 50257, with biases,
    the tanh GELU, layer_norm_epsilon and a tied head (``tie_word_embeddings`` false: a head of its own, without a
    bias, as GPT-2's). Dropout is 0: the playground runs these models, it does
    not train them. A setting the playground's model does not have is refused by name."""
    if not is_gpt2_config(data):
        raise LayoutError("config.json is not in the GPT-2 layout (its model_type is not gpt2)")
    embedding_dim = _whole(data, "n_embd")
    inner = data.get("n_inner")
    if inner is not None and inner != 4 * embedding_dim:
        raise LayoutError(f"config.json: n_inner {checks.shown(inner)} is not 4 × n_embd ({4 * embedding_dim}), "
                          "the only MLP width the playground's model has")
    function = data.get("activation_function", "gelu_new")
    if not isinstance(function, str) or function not in ACTIVATIONS:
        raise LayoutError(f"config.json: activation_function {checks.shown(function)} is not one of "
                          f"{', '.join(ACTIVATIONS)}")
    for name, supported in (("scale_attn_by_inverse_layer_idx", False), ("add_cross_attention", False),
                            ("scale_attn_weights", True)):
        if name in data and data[name] is not supported:
            raise LayoutError(f"config.json: {name} {checks.shown(data[name])} is not supported (the "
                              f"playground's model has {name} {supported})")
    tied = data.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise LayoutError(f"config.json: tie_word_embeddings must be true or false, got {checks.shown(tied)}")
    epsilon = data.get("layer_norm_epsilon", 1e-5)
    try:
        return ModelConfig(
            vocabulary_size=_whole(data, "vocab_size"), context_size=_whole(data, "n_positions", "n_ctx"),
            embedding_dim=embedding_dim, heads_num=_whole(data, "n_head"), layers_num=_whole(data, "n_layer"),
            dropout_rate=0.0, use_bias=True, activation=ACTIVATIONS[function], layer_norm_eps=epsilon,
            tie_embeddings=tied)
    except ConfigError as exc:
        raise LayoutError(f"config.json: {exc}") from None


def is_buffer(key: str) -> bool:
    """Whether a stored GPT-2 key is one of the old causal-mask buffers (dropped unread): "h.0.attn.bias" yes,
    "h.0.attn.c_attn.bias" (a weight) no."""
    match = _BLOCK_KEY.match(key.removeprefix(PREFIX))
    return bool(match) and match.group(2) in OLD_BUFFERS


def largest_buffer_bytes(config: ModelConfig) -> int:
    """The most the old buffers may add to a weights file: each layer's (1, 1, T, T) mask in fp32 and a scalar.

    GPT-2 small: 12 × 4 MiB = 48 MiB, which is why its model.safetensors is 548 MB for 124M parameters.
    """
    return config.layers_num * (4 * config.context_size * config.context_size + 8)


def target_name(key: str, layers_num: int, tied: bool = True) -> str | None:
    """The playground's name for a GPT-2 weight, None for a buffer to drop; LayoutError for anything else.

    "transformer.h.3.mlp.c_fc.bias" -> "blocks.3.mlp.fc.bias"; "h.3.attn.masked_bias" -> None; "lm_head.weight"
    -> None when the head is tied (it is the embedding), "lm_head.weight" when it is not.
    """
    name = key.removeprefix(PREFIX)
    if name in TOP_NAMES:
        return TOP_NAMES[name]
    if name == TIED_HEAD or key == TIED_HEAD:
        return None if tied else TIED_HEAD  # tied: checked against wte by map_state_dict
    match = _BLOCK_KEY.match(name)
    if match:
        layer, rest = int(match.group(1)), match.group(2)
        if layer >= layers_num:
            raise LayoutError(f"weights: {checks.shown(key)} belongs to layer {layer}, but config.json has n_layer "
                              f"{layers_num}")
        if rest in OLD_BUFFERS:
            return None
        if rest in BLOCK_NAMES:
            return f"blocks.{layer}.{BLOCK_NAMES[rest]}"
    raise LayoutError(f"weights: {checks.shown(key)} is not a GPT-2 weight the playground's model has")


def map_weight(key: str, tensor: torch.Tensor) -> torch.Tensor:
    """A GPT-2 tensor as the playground's model holds it: Conv1D weights (in, out) -> (out, in), all fp32.

    Always a copy of its own, made once: safetensors hands out views of the file's memory map, and one view kept
    (wte.weight, which needs no transpose) kept the whole mapping resident, so a loaded fp32 model held its
    weights twice (73.8 MiB of weights held 146 MiB, tests/test_memory_sweep.py)."""
    match = _BLOCK_KEY.match(key.removeprefix(PREFIX))
    if match and match.group(2) in CONV1D_WEIGHTS:
        if tensor.dim() != 2:
            raise LayoutError(f"weights: {checks.shown(key)} has shape {tuple(tensor.shape)}, not a Conv1D (in, out) "
                              "matrix")
        tensor = tensor.t()
    return tensor.to(torch.float32, memory_format=torch.contiguous_format, copy=True)


def map_state_dict(keys: Iterable[str], read: Callable[[str], torch.Tensor],
                   config: ModelConfig) -> dict[str, torch.Tensor]:
    """GPT-2's weights -> the playground's state dict (without ``lm_head.weight``, which is the embedding).

    ``read(key)`` gives one stored tensor: buffers are dropped unread. A key stored twice (with and without the
    prefix), a weight the model needs that is missing, or an ``lm_head.weight`` that is not a copy of
    ``wte.weight`` is a LayoutError naming it.
    """
    state: dict[str, torch.Tensor] = {}
    source: dict[str, str] = {}
    head_key = None
    for key in keys:
        target = target_name(key, config.layers_num, config.tie_embeddings)
        if target is None:
            if key.removeprefix(PREFIX) == TIED_HEAD:
                head_key = key
            continue
        if target in state:
            raise LayoutError(f"weights: {checks.shown(key)} and {checks.shown(source[target])} are the same weight "
                              "stored twice")
        state[target], source[target] = map_weight(key, read(key)), key
    expected = list(playground_names(config))
    missing = [name for name in expected if name not in state]
    if missing:
        gpt2_names = {name: gpt2_name(name) for name in expected}
        shown = ", ".join(gpt2_names[name] for name in missing[:5])
        raise LayoutError(f"weights: missing {shown}{' ...' if len(missing) > 5 else ''} "
                          f"({len(missing)} of the {len(expected)} the config needs)")
    if head_key is not None:
        head = read(head_key).to(torch.float32)
        embedding = state["token_embedding.weight"]
        if head.shape != embedding.shape or not torch.equal(head, embedding):
            raise LayoutError(f"weights: {checks.shown(head_key)} differs from wte.weight, but GPT-2's head is tied "
                              "to the token embedding")
    return state


def playground_names(config: ModelConfig) -> Iterable[str]:
    """The playground's names of every weight GPT-2 stores for ``config`` (no buffers): the embeddings and the
    final LayerNorm, each block's, then an untied head."""
    yield from TOP_NAMES.values()
    for layer in range(config.layers_num):
        for name in BLOCK_NAMES.values():
            yield f"blocks.{layer}.{name}"
    if not config.tie_embeddings:
        yield TIED_HEAD


_GPT2_TOP = {v: k for k, v in TOP_NAMES.items()}
_GPT2_BLOCK = {v: k for k, v in BLOCK_NAMES.items()}
_PLAYGROUND_BLOCK_KEY = re.compile(r"^blocks\.(\d+)\.(.+)$")


def gpt2_name(name: str) -> str:
    """GPT-2's name (without ``transformer.``) for a playground weight, the inverse of ``target_name``:
    "blocks.3.mlp.fc.bias" -> "h.3.mlp.c_fc.bias"; "lm_head.weight" stays. LayoutError for a name GPT-2 lacks."""
    if name in _GPT2_TOP or name == TIED_HEAD:
        return _GPT2_TOP.get(name, name)
    match = _PLAYGROUND_BLOCK_KEY.match(name)
    if match and match.group(2) in _GPT2_BLOCK:
        return f"h.{match.group(1)}.{_GPT2_BLOCK[match.group(2)]}"
    raise LayoutError(f"{checks.shown(name)} has no place in GPT-2's layout")


# ------------------------------------------------------------------------------------- playground -> GPT-2 layout
def gpt2_config(config: ModelConfig, bos_token_id: int | None = None) -> dict[str, Any]:
    """The config.json ``transformers`` reads for ``config``: embedding_dim 128, heads_num 4, layers_num 4,
    context_size 64, vocabulary_size 65 -> n_embd 128, n_head 4, n_layer 4, n_positions 64, vocab_size 65,
    with the activation and LayerNorm epsilon the run trained with. Refuses (LayoutError) what GPT-2 lacks."""
    if not config.is_gpt:
        raise LayoutError("notebook 004's model has no LayerNorm, MLP or residual, so it is not a GPT-2 (it is "
                          "one attention layer whose heads read their own slices of the embedding)")
    if config.activation not in EXPORTED_ACTIVATIONS:
        raise LayoutError(f"activation {checks.shown(config.activation)} has no GPT-2 activation_function "
                          f"(GPT-2 knows {', '.join(EXPORTED_ACTIVATIONS)} here)")
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": MODEL_TYPE,
        "vocab_size": config.vocabulary_size, "n_positions": config.context_size, "n_embd": config.embedding_dim,
        "n_layer": config.layers_num, "n_head": config.heads_num, "n_inner": None,
        "activation_function": EXPORTED_ACTIVATIONS[config.activation], "layer_norm_epsilon": config.layer_norm_eps,
        "resid_pdrop": config.dropout_rate, "embd_pdrop": config.dropout_rate, "attn_pdrop": config.dropout_rate,
        "initializer_range": 0.02, "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
        "reorder_and_upcast_attn": False, "tie_word_embeddings": config.tie_embeddings, "use_cache": True,
        "bos_token_id": bos_token_id, "eos_token_id": bos_token_id, "dtype": "float32",
    }


def export_state_dict(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """The playground's state dict -> GPT2LMHeadModel's (``transformer.`` names, Conv1D weights (in, out)).

    A bias the run was built without becomes zeros; a tied head is left out (transformers ties it to wte); an
    untied head's bias must be zero (GPT-2's head has none), else LayoutError, as for any weight GPT-2 lacks.
    """
    state = {key: tensor.detach().to("cpu", torch.float32) for key, tensor in state.items()}
    head_bias = state.pop("lm_head.bias", None)
    if head_bias is not None and bool(head_bias.abs().max() > 0):
        raise LayoutError(f"the LM head has a bias (largest {float(head_bias.abs().max()):.3g}), and GPT-2's head has "
                          "none: the run was trained with --use-bias before it followed nanoGPT (biases in the "
                          "blocks and LayerNorms, none on the head); train it again, with --use-bias or without, "
                          "to export it")
    if config.tie_embeddings:
        state.pop(TIED_HEAD, None)
    expected = set(playground_names(config))
    extra = sorted(set(state) - expected)
    if extra:
        raise LayoutError(f"{', '.join(checks.shown(k) for k in extra[:5])} "
                          f"{'have' if len(extra) > 1 else 'has'} no place in GPT-2's layout")
    exported = {}
    for name in playground_names(config):
        tensor = state.get(name)
        if tensor is None:
            if not name.endswith(".bias"):
                raise LayoutError(f"the weights have no {name}")
            size = config.embedding_dim
            if name.endswith("attn.qkv.bias") or name.endswith("mlp.fc.bias"):
                size = (3 if "qkv" in name else 4) * config.embedding_dim
            tensor = torch.zeros(size)
        key = gpt2_name(name)
        if _BLOCK_KEY.match(key) and _BLOCK_KEY.match(key).group(2) in CONV1D_WEIGHTS:
            tensor = tensor.t()
        exported[key if key == TIED_HEAD else PREFIX + key] = tensor.contiguous()
    return exported


def character_tokenizer_json(characters: Iterable[str]) -> str:
    """A tokenizer.json for a character vocabulary: a ``tokenizers`` WordLevel model mapping each character to
    its ID, a pre-tokenizer that cuts the text into single characters, and a decoder that joins them again.

    ["\\n", " ", "a"]: "a a\\n" -> [2, 1, 2, 0]; a character outside the vocabulary is an error, as here.
    """
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({character: i for i, character in enumerate(characters)}, unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()
    return tokenizer.to_str()


def read_character_tokenizer(json_text: str) -> list[str] | None:
    """The characters, in ID order, of a tokenizer.json that ``character_tokenizer_json`` wrote (a WordLevel model
    of single characters whose IDs are 0..V-1); None for any other tokenizer.json."""
    try:
        data = json.loads(json_text)
    except (ValueError, RecursionError):
        return None
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordLevel" or not isinstance(model.get("vocab"), dict):
        return None
    vocab = model["vocab"]
    if any(not isinstance(c, str) or len(c) != 1 for c in vocab) or sorted(vocab.values()) != list(range(len(vocab))):
        return None
    return sorted(vocab, key=vocab.__getitem__)


def tokenizer_json_from_vocab_merges(vocab_text: str, merges_text: str) -> str:
    """GPT-2's original files, vocab.json and merges.txt, as one tokenizer.json built by the ``tokenizers``
    library: a byte-level BPE (GPT-2's pre-tokenizer and decoder) with those tokens and merges, so a repo that
    ships only them opens as transformers' GPT2Tokenizer opens it. ValueError when they are not BPE files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    try:
        vocab = json.loads(vocab_text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{VOCAB_FILE} is not JSON: {checks.shown(str(exc), quote=False)}") from None
    if not isinstance(vocab, dict) or not all(isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                                              for k, v in vocab.items()):
        raise ValueError(f"{VOCAB_FILE} must map each token to its ID")
    merges = []
    for number, line in enumerate(merges_text.splitlines(), 1):
        if not line.strip() or (number == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise ValueError(f"{MERGES_FILE} line {number} is {checks.shown(line)}, not two tokens and a space")
        merges.append((parts[0], parts[1]))
    try:
        tokenizer = Tokenizer(models.BPE(vocab, merges))
    except Exception as exc:  # the Rust library raises plain Exceptions
        raise ValueError(f"{VOCAB_FILE} and {MERGES_FILE} do not make a BPE tokenizer: "
                         f"{checks.shown(str(exc), quote=False)}") from None
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    if "<|endoftext|>" in vocab:
        tokenizer.add_special_tokens(["<|endoftext|>"])
    return tokenizer.to_str()


def parameters_text(parameters: int) -> str:
    """124,439,808 -> "124.4M parameters"; 37,760 -> "37,760 parameters"."""
    return f"{parameters / 1e6:.1f}M parameters" if parameters >= 1_000_000 else f"{parameters:,} parameters"


def describe(source: str, config: ModelConfig, tokenizer_description: str, parameters: int) -> str:
    """"GPT-2 layout from owner/name, byte-level BPE tokenizer, 50,257 tokens, context 1024, 124.4M parameters"."""
    return (f"GPT-2 layout from {source}, {tokenizer_description}, context {config.context_size}, "
            f"{parameters_text(parameters)}")
