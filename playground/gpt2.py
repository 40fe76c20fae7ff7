"""The Hugging Face GPT-2 layout -> the playground's own model: config.json and weight names mapped in one place.

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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from playground import checks
from playground.config import ConfigError, ModelConfig

MODEL_TYPE = "gpt2"
TOKENIZER_FILE = "tokenizer.json"
PREFIX = "transformer."
# GPT-2's activation_function -> ModelConfig.activation
ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
               "gelu": "gelu", "relu": "relu"}
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
    the tanh GELU, layer_norm_epsilon and a tied head. Dropout is 0: the playground runs these models, it does
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
                            ("scale_attn_weights", True), ("tie_word_embeddings", True)):
        if name in data and data[name] is not supported:
            raise LayoutError(f"config.json: {name} {checks.shown(data[name])} is not supported (the "
                              f"playground's model has {name} {supported})")
    epsilon = data.get("layer_norm_epsilon", 1e-5)
    try:
        return ModelConfig(
            vocabulary_size=_whole(data, "vocab_size"), context_size=_whole(data, "n_positions", "n_ctx"),
            embedding_dim=embedding_dim, heads_num=_whole(data, "n_head"), layers_num=_whole(data, "n_layer"),
            dropout_rate=0.0, use_bias=True, activation=ACTIVATIONS[function], layer_norm_eps=epsilon,
            tie_embeddings=True)
    except ConfigError as exc:
        raise LayoutError(f"config.json: {exc}") from None


def largest_buffer_bytes(config: ModelConfig) -> int:
    """The most the old buffers may add to a weights file: each layer's (1, 1, T, T) mask in fp32 and a scalar.

    GPT-2 small: 12 × 4 MiB = 48 MiB, which is why its model.safetensors is 548 MB for 124M parameters.
    """
    return config.layers_num * (4 * config.context_size * config.context_size + 8)


def target_name(key: str, layers_num: int) -> str | None:
    """The playground's name for a GPT-2 weight, None for a buffer to drop; LayoutError for anything else.

    "transformer.h.3.mlp.c_fc.bias" -> "blocks.3.mlp.fc.bias"; "h.3.attn.masked_bias" -> None.
    """
    name = key.removeprefix(PREFIX)
    if name in TOP_NAMES:
        return TOP_NAMES[name]
    if name == TIED_HEAD or key == TIED_HEAD:
        return None  # tied: checked against wte by map_state_dict
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
    """A GPT-2 tensor as the playground's model holds it: Conv1D weights (in, out) -> (out, in), all fp32."""
    match = _BLOCK_KEY.match(key.removeprefix(PREFIX))
    if match and match.group(2) in CONV1D_WEIGHTS:
        if tensor.dim() != 2:
            raise LayoutError(f"weights: {checks.shown(key)} has shape {tuple(tensor.shape)}, not a Conv1D (in, out) "
                              "matrix")
        tensor = tensor.t()
    return tensor.to(torch.float32).contiguous()


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
        target = target_name(key, config.layers_num)
        if target is None:
            if key.removeprefix(PREFIX) == TIED_HEAD:
                head_key = key
            continue
        if target in state:
            raise LayoutError(f"weights: {checks.shown(key)} and {checks.shown(source[target])} are the same weight "
                              "stored twice")
        state[target], source[target] = map_weight(key, read(key)), key
    expected = [*TOP_NAMES.values(), *(f"blocks.{layer}.{name}" for layer in range(config.layers_num)
                                       for name in BLOCK_NAMES.values())]
    missing = [name for name in expected if name not in state]
    if missing:
        gpt2_names = {**{v: k for k, v in TOP_NAMES.items()},
                      **{f"blocks.{layer}.{v}": f"h.{layer}.{k}" for layer in range(config.layers_num)
                         for k, v in BLOCK_NAMES.items()}}
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


def parameters_text(parameters: int) -> str:
    """124,439,808 -> "124.4M parameters"; 37,760 -> "37,760 parameters"."""
    return f"{parameters / 1e6:.1f}M parameters" if parameters >= 1_000_000 else f"{parameters:,} parameters"


def describe(source: str, config: ModelConfig, tokenizer_description: str, parameters: int) -> str:
    """"GPT-2 layout from owner/name, byte-level BPE tokenizer, 50,257 tokens, context 1024, 124.4M parameters"."""
    return (f"GPT-2 layout from {source}, {tokenizer_description}, context {config.context_size}, "
            f"{parameters_text(parameters)}")
