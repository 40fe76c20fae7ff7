"""Hugging Face's Llama-family layout <-> the playground's llama.Llama: config.json and weight names in one place.

A repo in that layout (HuggingFaceTB/SmolLM2-135M, Qwen/Qwen2.5-0.5B, TinyLlama/TinyLlama-1.1B-Chat-v1.0, a
learner's fine-tune) holds
  config.json        ``"model_type": "llama"``, ``"qwen2"`` or ``"mistral"``: hidden_size, num_attention_heads,
                     num_key_value_heads, intermediate_size, rope_theta, rms_norm_eps, ...
  model.safetensors  LlamaForCausalLM's (Qwen2ForCausalLM's, MistralForCausalLM's) state dict, or shards named by
                     its index
  tokenizer.json     its BPE tokenizer: byte-level (SmolLM2, Qwen2) or SentencePiece-style with ▁ (TinyLlama)
Qwen2 is Llama with biases on q, k and v (never on o_proj) and, optionally, a sliding window, which is refused;
Mistral is Llama with one ``sliding_window`` for every layer (ModelConfig.sliding_window).
Weights are nn.Linear's (out, in) in both, so they map by name only:

    model.layers.3.self_attn.k_proj.weight  ->  blocks.3.attn.k_proj.weight
    model.layers.3.input_layernorm.weight   ->  blocks.3.input_layernorm.weight
    model.embed_tokens.weight / model.norm.weight / lm_head.weight  ->  token_embedding / norm / lm_head

What the playground's model does not have is refused by name before a weight is read: a ``rope_scaling`` other than
the default rope type (llama3, yarn, linear, dynamic...), a head_dim that is not hidden_size / num_attention_heads,
a bias on o_proj or the MLP, an activation other than silu, Qwen2's sliding window. Knows nothing about files, the
Hub or the UI (checkpoints.py reads the files); the same tables map back (``llama_config``, ``export_state_dict``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import torch

from playground import checks
from playground.checkpoints.gpt2 import LayoutError, parameters_text
from playground.config import LLAMA_FAMILY, ConfigError, ModelConfig

MODEL_TYPES = ("llama", "qwen2", "mistral")
ACTIVATIONS = {"silu": "silu", "swish": "silu"}  # transformers' hidden_act -> ModelConfig.activation
PREFIX = "model."
TOP_NAMES = {"embed_tokens.weight": "token_embedding.weight", "norm.weight": "norm.weight"}
BLOCK_NAMES = {
    "input_layernorm.weight": "input_layernorm.weight",
    "self_attn.q_proj.weight": "attn.q_proj.weight", "self_attn.q_proj.bias": "attn.q_proj.bias",
    "self_attn.k_proj.weight": "attn.k_proj.weight", "self_attn.k_proj.bias": "attn.k_proj.bias",
    "self_attn.v_proj.weight": "attn.v_proj.weight", "self_attn.v_proj.bias": "attn.v_proj.bias",
    "self_attn.o_proj.weight": "attn.o_proj.weight",
    "post_attention_layernorm.weight": "post_attention_layernorm.weight",
    "mlp.gate_proj.weight": "mlp.gate_proj.weight", "mlp.up_proj.weight": "mlp.up_proj.weight",
    "mlp.down_proj.weight": "mlp.down_proj.weight",
}
OLD_BUFFERS = ("self_attn.rotary_emb.inv_freq",)  # the rotary frequencies older transformers saved with the weights
HEAD = "lm_head.weight"
_BLOCK_KEY = re.compile(r"^layers\.(\d+)\.(.+)$")


def is_llama_config(data: Any) -> bool:
    """Whether a parsed config.json is in the Llama family's layout (``"model_type"`` llama, qwen2 or mistral)."""
    return isinstance(data, dict) and data.get("model_type") in MODEL_TYPES


def _whole(data: dict[str, Any], name: str, default: int | None = None) -> int:
    value = data.get(name, default)
    if value is None:
        raise LayoutError(f"config.json has no {name}")
    if isinstance(value, bool) or not isinstance(value, int):
        raise LayoutError(f"config.json: {name} must be a whole number, got {checks.shown(value)}")
    return value


def _number(data: dict[str, Any], name: str, default: float) -> float:
    value = data.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LayoutError(f"config.json: {name} must be a number, got {checks.shown(value)}")
    return float(value)


def rope_settings(data: dict[str, Any]) -> float:
    """The rotary base of a config.json, refusing any rope type but the default: ``rope_theta`` (transformers 4), or
    ``rope_parameters`` {"rope_type": "default", "rope_theta": ...} (transformers 5). A ``rope_scaling`` such as
    Llama 3's {"rope_type": "llama3", "factor": 8.0, ...} is a LayoutError that says what it is."""
    parameters = data.get("rope_parameters")
    scaling = data.get("rope_scaling")
    theta = _number(data, "rope_theta", 10000.0)
    for name, settings in (("rope_parameters", parameters), ("rope_scaling", scaling)):
        if settings is None:
            continue
        if not isinstance(settings, dict):
            raise LayoutError(f"config.json: {name} must be an object, got {checks.shown(settings)}")
        kind = settings.get("rope_type", settings.get("type", "default"))
        if kind != "default":
            raise LayoutError(f"config.json: {name} has rope_type {checks.shown(kind)}, which stretches the rotary "
                              "angles beyond the positions the model was trained on; the playground implements the "
                              "default rope type only (angles position × rope_theta^(-2i/d), unscaled)")
        if name == "rope_parameters" and "rope_theta" in settings:
            theta = _number(settings, "rope_theta", theta)
    return theta


def model_config(data: dict[str, Any]) -> ModelConfig:
    """A Llama, Qwen2 or Mistral config.json -> ModelConfig of the family llama: hidden_size 576, num_attention_heads 9,
    num_key_value_heads 3, num_hidden_layers 30, intermediate_size 1536, max_position_embeddings 8192, vocab_size
    49152, rope_theta 1e5, rms_norm_eps 1e-5, tie_word_embeddings true (SmolLM2-135M) -> embedding_dim 576, heads_num
    9, kv_heads_num 3, layers_num 30, intermediate_size 1536, context_size 8192, ... Dropout is 0: the playground runs
    these models. A setting the playground's model does not have is refused by name."""
    if not is_llama_config(data):
        raise LayoutError(f"config.json is not in the Llama family's layout (its model_type is not "
                          f"{' or '.join(MODEL_TYPES)})")
    qwen2, mistral = data["model_type"] == "qwen2", data["model_type"] == "mistral"
    hidden = _whole(data, "hidden_size")
    heads = _whole(data, "num_attention_heads")
    head_dim = data.get("head_dim")
    if head_dim is not None and (heads <= 0 or head_dim != hidden // heads or hidden % heads):
        raise LayoutError(f"config.json: head_dim {checks.shown(head_dim)} is not hidden_size / num_attention_heads "
                          f"({hidden} / {heads}); the playground's heads split the embedding evenly")
    function = data.get("hidden_act", "silu")
    if function not in ACTIVATIONS:
        raise LayoutError(f"config.json: hidden_act {checks.shown(function)} is not silu, the gate of the SwiGLU MLP "
                          "the playground's Llama has")
    for name in ("attention_bias", "mlp_bias"):
        if not qwen2 and data.get(name, False) is not False:
            where = "o_proj (and q, k, v)" if name == "attention_bias" else "the MLP"
            raise LayoutError(f"config.json: {name} {checks.shown(data[name])} puts a bias on {where}, which the "
                              "playground's Llama does not have (only Qwen2's q, k and v biases)")
    if qwen2 and data.get("use_sliding_window", False) is not False:
        raise LayoutError("config.json: use_sliding_window true: Qwen2's sliding-window attention is not implemented "
                          "here (each query would see only the last sliding_window keys)")
    layer_types = data.get("layer_types")
    if mistral and isinstance(layer_types, list) and len(set(layer_types)) > 1:
        raise LayoutError("config.json: layer_types mixes full and sliding-window layers, which the playground does "
                          "not implement (Mistral's one sliding_window, the same in every layer, it does)")
    if not mistral and isinstance(layer_types, list) and any(kind != "full_attention" for kind in layer_types):
        raise LayoutError("config.json: layer_types names sliding_attention layers, and sliding-window attention is "
                          "not implemented here (each query would see only the last sliding_window keys)")
    if data.get("pretraining_tp", 1) not in (1, None):
        raise LayoutError(f"config.json: pretraining_tp {checks.shown(data['pretraining_tp'])} is not supported "
                          "(the playground computes each projection in one piece)")
    # transformers' MistralConfig defaults sliding_window to 4096 where config.json leaves it out; null is no window
    window = _whole(data, "sliding_window", 4096) if mistral and data.get("sliding_window", 4096) is not None else None
    tied = data.get("tie_word_embeddings", False)
    if not isinstance(tied, bool):
        raise LayoutError(f"config.json: tie_word_embeddings must be true or false, got {checks.shown(tied)}")
    try:
        return ModelConfig(
            vocabulary_size=_whole(data, "vocab_size"), context_size=_whole(data, "max_position_embeddings"),
            embedding_dim=hidden, heads_num=heads, layers_num=_whole(data, "num_hidden_layers"), dropout_rate=0.0,
            use_bias=False, activation=ACTIVATIONS[function], layer_norm_eps=_number(data, "rms_norm_eps", 1e-6),
            tie_embeddings=tied, family=LLAMA_FAMILY, kv_heads_num=_whole(data, "num_key_value_heads", heads),
            rope_theta=rope_settings(data), qkv_bias=qwen2, intermediate_size=_whole(data, "intermediate_size"),
            sliding_window=window)
    except ConfigError as exc:
        raise LayoutError(f"config.json: {exc}") from None


def is_buffer(key: str) -> bool:
    """Whether a stored key is the old rotary-frequency buffer (dropped unread): "model.layers.0.self_attn.rotary_emb
    .inv_freq" yes, "model.layers.0.self_attn.q_proj.weight" no."""
    match = _BLOCK_KEY.match(key.removeprefix(PREFIX))
    return bool(match) and match.group(2) in OLD_BUFFERS


def target_name(key: str, config: ModelConfig) -> str | None:
    """The playground's name for a stored weight, None for a buffer or a tied head's copy; LayoutError otherwise.

    "model.layers.3.mlp.gate_proj.weight" -> "blocks.3.mlp.gate_proj.weight"; "lm_head.weight" -> None when the head
    is tied (it is the embedding), "lm_head.weight" when it is not.
    """
    if key == HEAD:
        return None if config.tie_embeddings else HEAD
    name = key.removeprefix(PREFIX) if key.startswith(PREFIX) else None
    if name in TOP_NAMES:
        return TOP_NAMES[name]
    match = _BLOCK_KEY.match(name or "")
    if match:
        layer, rest = int(match.group(1)), match.group(2)
        if layer >= config.layers_num:
            raise LayoutError(f"weights: {checks.shown(key)} belongs to layer {layer}, but config.json has "
                              f"num_hidden_layers {config.layers_num}")
        if rest in OLD_BUFFERS:
            return None
        if rest in BLOCK_NAMES and (config.qkv_bias or not rest.endswith(".bias")):
            return f"blocks.{layer}.{BLOCK_NAMES[rest]}"
    raise LayoutError(f"weights: {checks.shown(key)} is not a weight the playground's Llama has")


def playground_names(config: ModelConfig) -> Iterable[str]:
    """The playground's names of every weight the layout stores for ``config``: the embedding, each block's, the
    final norm, then an untied head."""
    yield "token_embedding.weight"
    for layer in range(config.layers_num):
        for name in BLOCK_NAMES.values():
            if config.qkv_bias or not name.endswith(".bias"):
                yield f"blocks.{layer}.{name}"
    yield "norm.weight"
    if not config.tie_embeddings:
        yield HEAD


_LAYOUT_TOP = {v: k for k, v in TOP_NAMES.items()}
_LAYOUT_BLOCK = {v: k for k, v in BLOCK_NAMES.items()}
_PLAYGROUND_BLOCK_KEY = re.compile(r"^blocks\.(\d+)\.(.+)$")


def layout_name(name: str) -> str:
    """The layout's name for a playground weight, the inverse of ``target_name``: "blocks.3.attn.k_proj.weight" ->
    "model.layers.3.self_attn.k_proj.weight"; "lm_head.weight" stays."""
    if name == HEAD:
        return HEAD
    if name in _LAYOUT_TOP:
        return PREFIX + _LAYOUT_TOP[name]
    match = _PLAYGROUND_BLOCK_KEY.match(name)
    if match and match.group(2) in _LAYOUT_BLOCK:
        return f"{PREFIX}layers.{match.group(1)}.{_LAYOUT_BLOCK[match.group(2)]}"
    raise LayoutError(f"{checks.shown(name)} has no place in the Llama layout")


def map_state_dict(keys: Iterable[str], read: Callable[[str], torch.Tensor],
                   config: ModelConfig) -> dict[str, torch.Tensor]:
    """The layout's weights -> the playground's state dict (without ``lm_head.weight`` when tied).

    ``read(key)`` gives one stored tensor; buffers are dropped unread. Each tensor becomes a float32 copy of its own
    (safetensors hands out views of its memory map: gpt2.map_weight says why). A weight the model needs that is
    missing, or a stored ``lm_head.weight`` of a tied head that differs from the embedding, is a LayoutError.
    """
    state: dict[str, torch.Tensor] = {}
    head_key = None
    for key in keys:
        target = target_name(key, config)
        if target is None:
            if key == HEAD:
                head_key = key
            continue
        state[target] = read(key).to(torch.float32, memory_format=torch.contiguous_format, copy=True)
    expected = list(playground_names(config))
    missing = [name for name in expected if name not in state]
    if missing:
        shown = ", ".join(layout_name(name) for name in missing[:5])
        raise LayoutError(f"weights: missing {shown}{' ...' if len(missing) > 5 else ''} "
                          f"({len(missing)} of the {len(expected)} the config needs)")
    if head_key is not None:
        head = read(head_key).to(torch.float32)
        embedding = state["token_embedding.weight"]
        if head.shape != embedding.shape or not torch.equal(head, embedding):
            raise LayoutError("weights: lm_head.weight differs from model.embed_tokens.weight, but config.json ties "
                              "them (tie_word_embeddings true)")
    return state


# ------------------------------------------------------------------------------------- playground -> Llama layout
def llama_config(config: ModelConfig, bos_token_id: int | None = None,
                 eos_token_id: int | None = None) -> dict[str, Any]:
    """The config.json ``transformers`` reads for a model of the family llama: "qwen2" where it has q/k/v biases,
    "mistral" where it has a sliding window, "llama" otherwise."""
    if not config.is_llama:
        raise LayoutError(f"a model of the family {config.family} has no Llama layout")
    qwen2, mistral = config.qkv_bias, config.sliding_window is not None
    if qwen2 and mistral:
        raise LayoutError("a model with q/k/v biases and a sliding window has no layout here: Qwen2's windows follow "
                          "max_window_layers, which the playground does not implement, and Mistral has no biases")
    kind = "qwen2" if qwen2 else "mistral" if mistral else "llama"
    data = {
        "architectures": [{"qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM",
                           "llama": "LlamaForCausalLM"}[kind]],
        "model_type": kind,
        "vocab_size": config.vocabulary_size, "max_position_embeddings": config.context_size,
        "hidden_size": config.embedding_dim, "intermediate_size": config.mlp_width,
        "num_hidden_layers": config.layers_num, "num_attention_heads": config.heads_num,
        "num_key_value_heads": config.kv_heads, "head_dim": config.head_size, "hidden_act": "silu",
        "rms_norm_eps": config.layer_norm_eps, "rope_theta": config.rope_theta, "rope_scaling": None,
        "attention_dropout": 0.0, "tie_word_embeddings": config.tie_embeddings, "initializer_range": 0.02,
        "use_cache": True, "bos_token_id": bos_token_id, "eos_token_id": eos_token_id, "torch_dtype": "float32",
    }
    if qwen2:
        data.update({"use_sliding_window": False, "sliding_window": None, "max_window_layers": config.layers_num})
    elif mistral:
        data["sliding_window"] = config.sliding_window
    else:
        data.update({"attention_bias": False, "mlp_bias": False, "pretraining_tp": 1})
    return data


def export_state_dict(state: dict[str, torch.Tensor], config: ModelConfig) -> dict[str, torch.Tensor]:
    """The playground's state dict -> LlamaForCausalLM's (Qwen2ForCausalLM's) names; a tied head is left out
    (transformers ties it to embed_tokens)."""
    state = {key: tensor.detach().to("cpu", torch.float32) for key, tensor in state.items()}
    if config.tie_embeddings:
        state.pop(HEAD, None)
    expected = list(playground_names(config))
    extra = sorted(set(state) - set(expected))
    if extra:
        raise LayoutError(f"{', '.join(checks.shown(k) for k in extra[:5])} "
                          f"{'have' if len(extra) > 1 else 'has'} no place in the Llama layout")
    missing = [name for name in expected if name not in state]
    if missing:
        raise LayoutError(f"the weights have no {', '.join(missing[:5])}")
    return {layout_name(name): state[name].contiguous() for name in expected}


def describe(source: str, config: ModelConfig, tokenizer_description: str, parameters: int) -> str:
    """"Llama layout from owner/name: 9 query heads over 3 K/V heads, rotary positions (base 100,000), RMSNorm,
    SwiGLU; byte-level BPE tokenizer, 49,152 tokens, context 8192, 134.5M parameters"."""
    kind = "Qwen2" if config.qkv_bias else "Mistral" if config.sliding_window is not None else "Llama"
    window = f", a sliding window of {config.sliding_window} keys" if config.sliding_window is not None else ""
    return (f"{kind} layout from {source}: {config.heads_num} query heads over {config.kv_heads} K/V "
            f"head{'s' * (config.kv_heads != 1)}, rotary positions (base {config.rope_theta:,.0f}), RMSNorm, SwiGLU"
            f"{', q/k/v biases' if config.qkv_bias else ''}{window}; {tokenizer_description}, "
            f"context {config.context_size}, {parameters_text(parameters)}")
