"""A GPT-style character model: the maths only.

Token + learned position embeddings, ``layers_num`` pre-LayerNorm blocks (causal multi-head
self-attention + MLP, each with a residual), a final LayerNorm and the LM head. GPT-2's variations are
config fields: the MLP's activation, the LayerNorm epsilon and an LM head tied to the token embedding.
Training runs attention through ``F.scaled_dot_product_attention``, except with dropout on a CPU, where the
explicit computation with dropout.py's cheaper masks is faster; on request the model computes attention
explicitly and returns every layer's per-head weights and the input each layer's attention saw.
Knows nothing about files (see checkpoints.py), tokenizers or the UI.
"""

from __future__ import annotations

import math
from contextvars import ContextVar
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from playground.budget import attention_is_explicit
from playground.config import ModelConfig
from playground.model.base import WEIGHT_POINTS, CountsItsWeights, Recorder, init_weights, record_point
from playground.model.dropout import Dropout, dropout

# Interventions on the heads' outputs for the forward passes of one request (playground.lens.circuits): {attention
# module: fn((B, T, C) -> (B, T, C))}, applied to the heads' outputs side by side before the output projection. A
# ContextVar, so a request changes only its own passes, never one another thread runs on the same model meanwhile.
HEADS_OUTPUT_OVERRIDES: ContextVar[dict | None] = ContextVar("heads_output_overrides", default=None)


def causal_mask(query_len: int, key_len: int, device: torch.device | None = None,
                window: int | None = None) -> torch.Tensor:
    """Boolean (query_len, key_len) mask, True where a query may look.

    The queries are the last ``query_len`` of ``key_len`` positions: 2 queries over 4 keys ->
    [[T, T, T, F], [T, T, T, T]]. ``window`` (Mistral's sliding window, None: none) keeps only the ``window`` keys
    ending at the query's own: query i sees key j iff j <= i and i - j < window; window 2 over 4 -> the last row
    [F, F, T, T].
    """
    offset = key_len - query_len
    mask = torch.ones(query_len, key_len, dtype=torch.bool, device=device).tril(diagonal=offset)
    if window is not None:
        mask = mask.triu(diagonal=offset - window + 1)  # key j >= query i - window + 1
    return mask


@dataclass
class KVCache:
    """Keys and values each layer has computed so far: lists of (B, h, T_cached, head_size); h is the model's key/value
    heads (the Llama family's grouped ones: fewer than its query heads)."""

    keys: list[torch.Tensor | None] = field(default_factory=list)
    values: list[torch.Tensor | None] = field(default_factory=list)

    @classmethod
    def empty(cls, layers_num: int) -> KVCache:
        return cls([None] * layers_num, [None] * layers_num)

    @property
    def length(self) -> int:
        return 0 if not self.keys or self.keys[0] is None else self.keys[0].size(2)

    @property
    def bytes(self) -> int:
        """What the cached keys and values take in memory."""
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values) if t is not None)

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=2)
            v = torch.cat([self.values[layer], v], dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v


@dataclass
class GPTOutput:
    logits: torch.Tensor  # (B, T, vocabulary_size)
    loss: torch.Tensor | None = None
    attention_weights: list[torch.Tensor] | None = None  # per layer (B, h, T, T_keys)
    attention_inputs: list[torch.Tensor] | None = None  # per layer (B, T, C): LayerNorm'd residual stream


class CausalSelfAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads_num = config.heads_num
        self.head_size = config.head_size
        self.qkv = nn.Linear(config.embedding_dim, 3 * config.embedding_dim, bias=config.use_bias)
        self.proj = nn.Linear(config.embedding_dim, config.embedding_dim, bias=config.use_bias)
        self.dropout_rate = config.dropout_rate
        self.resid_dropout = Dropout(config.dropout_rate)

    def project_qkv(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(B, T, C) -> q, k, v each (B, h, T, head_size); head i uses features i*d:(i+1)*d."""
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads_num, self.head_size).transpose(1, 2)  # (B, h, T, d)
        k = k.view(B, T, self.heads_num, self.head_size).transpose(1, 2)
        v = v.view(B, T, self.heads_num, self.head_size).transpose(1, 2)
        return q, k, v

    def head_projections(self, head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                   torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """Head ``head``'s (w_query, w_key, w_value) each (C, d), for ``x @ W``, and its biases (d,) or None.

        The rows of the fused qkv Linear that project_qkv gives this head: split(C) into q | k | v, then
        view(h, d) puts head i on features i*d:(i+1)*d of each. ``x @ w_query + b_query`` equals
        ``project_qkv(x)[0][:, head]``. Detached views of the parameters.
        """
        C = self.qkv.in_features
        weight = self.qkv.weight.detach().view(3, self.heads_num, self.head_size, C)  # (q|k|v, h, d, C)
        w_query, w_key, w_value = (weight[part, head].T for part in range(3))  # (C, d) each
        if self.qkv.bias is None:
            return w_query, w_key, w_value, None, None, None
        bias = self.qkv.bias.detach().view(3, self.heads_num, self.head_size)  # (q|k|v, h, d)
        return w_query, w_key, w_value, bias[0, head], bias[1, head], bias[2, head]

    def forward(self, x: torch.Tensor, need_weights: bool = False, cache: KVCache | None = None,
                layer: int = 0, recorder: Recorder | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, C = x.shape
        q, k, v = self.project_qkv(x)
        record_point(recorder, layer, "attn.hook_q", q)
        record_point(recorder, layer, "attn.hook_k", k)
        record_point(recorder, layer, "attn.hook_v", v)
        if cache is not None:
            k, v = cache.append(layer, k, v)  # (B, h, T_past + T, d)
        key_len = k.size(2)
        dropout_p = self.dropout_rate if self.training else 0.0
        weights = None
        # with dropout on a CPU, explicit: scaled_dot_product_attention would draw its mask one element at a time
        if need_weights or attention_is_explicit(dropout_p, x.device.type):  # budget.training_cost prices it
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_size)  # (B, h, T, T_keys)
            scores = scores.masked_fill(~causal_mask(T, key_len, x.device), float("-inf"))
            record_point(recorder, layer, "attn.hook_attn_scores", scores)
            weights = F.softmax(scores, dim=-1)
            record_point(recorder, layer, "attn.hook_pattern", weights)
            y = dropout(weights, dropout_p, self.training) @ v  # (B, h, T, d)
            weights = weights if need_weights else None
        elif key_len == T:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        elif T == 1:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        else:
            mask = causal_mask(T, key_len, x.device)
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        record_point(recorder, layer, "attn.hook_z", y)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        overrides = HEADS_OUTPUT_OVERRIDES.get()
        if overrides and self in overrides:
            y = overrides[self](y)
        return self.resid_dropout(self.proj(y)), weights


def activation(name: str, x: torch.Tensor) -> torch.Tensor:
    """The MLP's non-linearity by its config name: "gelu" (erf), "gelu_tanh" (GPT-2's gelu_new), "relu" or "silu"
    (the Llama family's gate)."""
    if name == "gelu_tanh":
        return F.gelu(x, approximate="tanh")
    if name == "relu":
        return F.relu(x)
    if name == "silu":
        return F.silu(x)
    return F.gelu(x)


class MLP(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.fc = nn.Linear(config.embedding_dim, 4 * config.embedding_dim, bias=config.use_bias)
        self.proj = nn.Linear(4 * config.embedding_dim, config.embedding_dim, bias=config.use_bias)
        self.dropout = Dropout(config.dropout_rate)
        self.activation = config.activation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(activation(self.activation, self.fc(x))))


def layer_norm(config: ModelConfig) -> nn.LayerNorm:
    return nn.LayerNorm(config.embedding_dim, eps=config.layer_norm_eps, bias=config.use_bias)


class Block(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.ln_1 = layer_norm(config)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = layer_norm(config)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, need_weights: bool = False, cache: KVCache | None = None,
                layer: int = 0,
                recorder: Recorder | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        record_point(recorder, layer, "hook_resid_pre", x)
        attention_input = self.ln_1(x)
        record_point(recorder, layer, "ln1.hook_normalized", attention_input)
        attended, weights = self.attn(attention_input, need_weights, cache, layer, recorder)
        record_point(recorder, layer, "hook_attn_out", attended)
        x = x + attended
        record_point(recorder, layer, "hook_resid_mid", x)
        mlp_input = self.ln_2(x)
        record_point(recorder, layer, "ln2.hook_normalized", mlp_input)
        mlp_out = self.mlp(mlp_input)
        record_point(recorder, layer, "hook_mlp_out", mlp_out)
        x = x + mlp_out
        record_point(recorder, layer, "hook_resid_post", x)
        return x, attention_input, weights


class GPT(CountsItsWeights, nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocabulary_size, config.embedding_dim)
        self.position_embedding = nn.Embedding(config.context_size, config.embedding_dim)
        self.dropout = Dropout(config.dropout_rate)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.layers_num))
        self.ln_f = layer_norm(config)
        self.lm_head = nn.Linear(config.embedding_dim, config.vocabulary_size, bias=config.head_bias)
        if config.tie_embeddings:
            self.lm_head.weight = self.token_embedding.weight  # one (V, C) matrix reads tokens in and scores them out
        self.apply(init_weights)
        for name, parameter in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("mlp.proj.weight"):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config.layers_num))

    # what every family answers alike (model.base): the norm a layer's heads read through, the Linear that writes its
    # heads into the stream, the final norm and the unembedding
    def attention_norm(self, layer: int) -> nn.Module:
        return self.blocks[layer].ln_1

    def output_projection(self, layer: int) -> nn.Linear:
        return self.blocks[layer].attn.proj

    def final_norm(self) -> nn.Module:
        return self.ln_f

    def unembed(self) -> nn.Linear:
        return self.lm_head

    def embed(self, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token + position embeddings for positions start..start+T-1: (B, T) -> (B, T, C)."""
        T = idx.size(1)
        if start + T > self.config.context_size:
            raise ValueError(
                f"sequence of {start + T} tokens is longer than context_size {self.config.context_size}"
            )
        positions = torch.arange(start, start + T, device=idx.device)
        return self.token_embedding(idx) + self.position_embedding(positions)  # (B, T, C)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *,
                return_attention: bool = False, cache: KVCache | None = None,
                capture: Recorder | None = None) -> GPTOutput:
        """idx (B, T) of token IDs -> logits (B, T, V); loss if targets; weights if asked; ``capture`` keeps the
        named points (base.Recorder)."""
        start = cache.length if cache is not None else 0
        x = self.dropout(self.embed(idx, start))
        weights_per_layer, inputs_per_layer = [], []
        for layer, block in enumerate(self.blocks):
            need_weights = return_attention or (capture is not None and any(
                capture.wants(layer, point) for point in WEIGHT_POINTS))
            x, attention_input, weights = block(x, need_weights, cache, layer, capture)
            if return_attention:
                weights_per_layer.append(weights)
                inputs_per_layer.append(attention_input)
        logits = self.lm_head(self.ln_f(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return GPTOutput(
            logits,
            loss,
            weights_per_layer if return_attention else None,
            inputs_per_layer if return_attention else None,
        )
