"""The Llama family (Llama, SmolLM2, TinyLlama, Qwen2): the maths only, written as model.py writes GPT.

A token embedding (no position embedding), ``layers_num`` pre-norm blocks, a final RMSNorm and the LM head. The
blocks differ from GPT's in four places a learner asks about:
  * positions enter as a rotation of q and k (``apply_rotary_pos_emb``): feature i of a head and feature i + d/2
    turn together by the angle position × rope_theta^(-2i/d), so a score q·k depends on the distance between query and
    key, never on where the pair sits;
  * ``kv_heads_num`` key/value heads, each shared by heads_num / kv_heads_num query heads (grouped-query attention):
    the KV cache keeps the grouped heads, and ``repeat_kv`` copies them for their query heads where the scores are
    taken;
  * RMSNorm (a scale, no centring, no bias) replaces LayerNorm;
  * the MLP is gated (SwiGLU): down(silu(gate(x)) * up(x)).
Mistral is this layout with a ``sliding_window`` W: query i sees key j only where j <= i and i - j < W (the causal mask
cut to the W keys ending at the query's own, transformers' ``sliding_window_overlay``: kv_idx > q_idx - W).
Names are transformers' (``rotate_half``, ``apply_rotary_pos_emb``, ``repeat_kv``, ``input_layernorm``, ``q_proj``...,
``gate_proj``...), so its modeling_llama.py reads beside this file line for line; llama_layout.py maps its weights.

The forward contract is model.GPT's (``forward(idx, targets, *, return_attention, cache)`` -> GPTOutput, ``embed``,
``parameter_count``, ``weights_bytes``), so sampling and the sample CLI run it unchanged. On request (``capture=``, a
``Recorder``) it keeps, for each layer, the named points the views read, TransformerLens's hook names: see POINTS.
Knows nothing about files (checkpoints.py, llama_layout.py), tokenizers or the UI.

Where it differs from transformers on purpose: the outer names are the playground GPT's (``blocks.N.attn``,
``token_embedding``, ``norm``) and the named points keep the heads' (B, h, T, d) layout; the numbers are its eager
path's (rotary angles and the softmax in float32), and only the default rope type is implemented (llama_layout.py
refuses any other ``rope_scaling`` by name).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from playground.budget import attention_is_explicit
from playground.config import ModelConfig
from playground.model.base import WEIGHT_POINTS, CountsItsWeights, Recorder, init_weights, record_point
from playground.model.dropout import Dropout, dropout
from playground.model.gpt import HEADS_OUTPUT_OVERRIDES, GPTOutput, KVCache, activation, causal_mask


class RMSNorm(nn.Module):
    """x / sqrt(mean(x²) + eps) * weight: LayerNorm without the centring and the bias (in float32, as transformers)."""

    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        variance = x.pow(2).mean(-1, keepdim=True)  # (B, T, 1)
        return self.weight * (x * torch.rsqrt(variance + self.eps)).to(dtype)


def rotary_cos_sin(positions: torch.Tensor, head_size: int, rope_theta: float,
                   dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of each position's angles, (T, d) each, for positions (T,) (the default rope type).

    Feature pair i (features i and i + d/2) turns by position × inv_freq[i], inv_freq[i] = rope_theta^(-2i/d): the
    first pair by a radian a token, the last slowest. Computed in float32 whatever the model's dtype, as transformers
    computes LlamaRotaryEmbedding's.
    """
    exponents = torch.arange(0, head_size, 2, dtype=torch.int64, device=positions.device).float() / head_size
    inv_freq = 1.0 / (rope_theta ** exponents)  # (d/2,)
    angles = positions.float()[:, None] * inv_freq[None, :]  # (T, d/2)
    emb = torch.cat((angles, angles), dim=-1)  # (T, d): feature i and feature i + d/2 share an angle
    return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """(..., d): [x1, x2] -> [-x2, x1], the halves d/2 apart: each pair (x_i, x_{i+d/2}) turned by 90 degrees."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor,
                         sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Turn q (B, h, T, d) and k (B, h_kv, T, d) by their positions' angles (cos, sin (T, d)): each pair of
    features (i, i + d/2) rotated in its plane, x cos + rotate_half(x) sin."""
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    """(B, h_kv, T, d) -> (B, h_kv * n_rep, T, d): K/V head g copied for query heads g*n_rep .. (g+1)*n_rep - 1."""
    batch, kv_heads, length, head_size = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, kv_heads, n_rep, length, head_size)
    return hidden_states.reshape(batch, kv_heads * n_rep, length, head_size)  # (B, h, T, d)


class LlamaAttention(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.heads_num = config.heads_num
        self.num_key_value_heads = config.kv_heads
        self.num_key_value_groups = config.heads_num // config.kv_heads  # query heads per K/V head
        self.head_size = config.head_size
        C, d = config.embedding_dim, config.head_size
        self.q_proj = nn.Linear(C, self.heads_num * d, bias=config.qkv_bias)
        self.k_proj = nn.Linear(C, self.num_key_value_heads * d, bias=config.qkv_bias)
        self.v_proj = nn.Linear(C, self.num_key_value_heads * d, bias=config.qkv_bias)
        self.o_proj = nn.Linear(self.heads_num * d, C, bias=False)
        self.dropout_rate = config.dropout_rate
        self.resid_dropout = Dropout(config.dropout_rate)
        self.sliding_window = config.sliding_window  # Mistral's W, None: every earlier key

    def key_value_head(self, head: int) -> int:
        """The K/V head query head ``head`` reads: head // (heads_num / kv_heads_num), as repeat_kv copies it."""
        return head // self.num_key_value_groups

    def head_projections(self, head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                   torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
        """Query head ``head``'s (w_query, w_key, w_value) each (C, d), for ``x @ W``, and its biases (d,) or None, as
        GPT's CausalSelfAttention.head_projections gives them: w_key and w_value are those of the K/V head it shares
        (key_value_head). ``x @ w_query + b_query`` is hook_q[:, head] before the rotation. Detached views."""
        d, g = self.head_size, self.key_value_head(head)
        rows_q, rows_kv = slice(head * d, (head + 1) * d), slice(g * d, (g + 1) * d)
        weights = [projection.weight.detach()[rows].T for projection, rows in  # (C, d) each
                   ((self.q_proj, rows_q), (self.k_proj, rows_kv), (self.v_proj, rows_kv))]
        biases = [None if projection.bias is None else projection.bias.detach()[rows] for projection, rows in
                  ((self.q_proj, rows_q), (self.k_proj, rows_kv), (self.v_proj, rows_kv))]
        return (*weights, *biases)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, need_weights: bool = False,
                cache: KVCache | None = None, layer: int = 0,
                recorder: Recorder | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        B, T, C = x.shape
        h, h_kv, d = self.heads_num, self.num_key_value_heads, self.head_size
        q = self.q_proj(x).view(B, T, h, d).transpose(1, 2)  # (B, h, T, d)
        k = self.k_proj(x).view(B, T, h_kv, d).transpose(1, 2)  # (B, h_kv, T, d)
        v = self.v_proj(x).view(B, T, h_kv, d).transpose(1, 2)  # (B, h_kv, T, d)
        record_point(recorder, layer, "attn.hook_q", q)
        record_point(recorder, layer, "attn.hook_k", k)
        record_point(recorder, layer, "attn.hook_v", v)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)  # each turned at its true position, start..start+T-1
        record_point(recorder, layer, "attn.hook_rot_q", q)
        record_point(recorder, layer, "attn.hook_rot_k", k)
        if cache is not None:
            k, v = cache.append(layer, k, v)  # (B, h_kv, T_past + T, d): the cache keeps the grouped heads, rotated
        key_len = k.size(2)
        # Query heads g*n .. (g+1)*n - 1 (n = heads_num / kv_heads_num) share K/V head g: copied for them here,
        # where the scores are taken. 4 query heads over 2 K/V heads: heads 0, 1 read K/V head 0; heads 2, 3 head 1.
        k = repeat_kv(k, self.num_key_value_groups)  # (B, h, T_keys, d)
        v = repeat_kv(v, self.num_key_value_groups)  # (B, h, T_keys, d)
        dropout_p = self.dropout_rate if self.training else 0.0
        weights = None
        if need_weights or attention_is_explicit(dropout_p, x.device.type):  # budget.training_cost prices it
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)  # (B, h, T, T_keys)
            mask = causal_mask(T, key_len, x.device, self.sliding_window)  # (T, T_keys): queries at true positions
            scores = scores.masked_fill(~mask, float("-inf"))
            record_point(recorder, layer, "attn.hook_attn_scores", scores)
            weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)  # (B, h, T, T_keys)
            record_point(recorder, layer, "attn.hook_pattern", weights)
            y = dropout(weights, dropout_p, self.training) @ v  # (B, h, T, d)
            weights = weights if need_weights else None
        elif key_len == T and self.sliding_window is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        elif T == 1 and (self.sliding_window is None or key_len <= self.sliding_window):
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(T, key_len, x.device,
                                                                               self.sliding_window),
                                               dropout_p=dropout_p)
        record_point(recorder, layer, "attn.hook_z", y)
        y = y.transpose(1, 2).contiguous().view(B, T, h * d)  # (B, T, h·d): the heads side by side
        overrides = HEADS_OUTPUT_OVERRIDES.get()
        if overrides and self in overrides:
            y = overrides[self](y)
        return self.resid_dropout(self.o_proj(y)), weights


class LlamaMLP(nn.Module):
    """SwiGLU: down_proj(silu(gate_proj(x)) * up_proj(x)), the gate deciding how much of each up feature passes."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.embedding_dim, config.mlp_width, bias=False)
        self.up_proj = nn.Linear(config.embedding_dim, config.mlp_width, bias=False)
        self.down_proj = nn.Linear(config.mlp_width, config.embedding_dim, bias=False)
        self.activation = config.activation
        self.dropout = Dropout(config.dropout_rate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.down_proj(activation(self.activation, self.gate_proj(x)) * self.up_proj(x)))


class LlamaBlock(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(config.embedding_dim, config.layer_norm_eps)
        self.attn = LlamaAttention(config)
        self.post_attention_layernorm = RMSNorm(config.embedding_dim, config.layer_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, need_weights: bool = False,
                cache: KVCache | None = None, layer: int = 0,
                recorder: Recorder | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        record_point(recorder, layer, "hook_resid_pre", x)
        attention_input = self.input_layernorm(x)  # (B, T, C)
        record_point(recorder, layer, "ln1.hook_normalized", attention_input)
        attended, weights = self.attn(attention_input, cos, sin, need_weights, cache, layer, recorder)
        record_point(recorder, layer, "hook_attn_out", attended)
        x = x + attended
        record_point(recorder, layer, "hook_resid_mid", x)
        mlp_input = self.post_attention_layernorm(x)
        record_point(recorder, layer, "ln2.hook_normalized", mlp_input)
        mlp_out = self.mlp(mlp_input)
        record_point(recorder, layer, "hook_mlp_out", mlp_out)
        x = x + mlp_out
        record_point(recorder, layer, "hook_resid_post", x)
        return x, attention_input, weights


class Llama(CountsItsWeights, nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        if not config.is_llama:
            raise ValueError(f"llama.Llama builds the family llama, and this config's family is {config.family}")
        self.config = config
        self.token_embedding = nn.Embedding(config.vocabulary_size, config.embedding_dim)
        self.dropout = Dropout(config.dropout_rate)
        self.blocks = nn.ModuleList(LlamaBlock(config) for _ in range(config.layers_num))
        self.norm = RMSNorm(config.embedding_dim, config.layer_norm_eps)
        self.lm_head = nn.Linear(config.embedding_dim, config.vocabulary_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.token_embedding.weight  # one (V, C) matrix reads tokens in and scores them out
        self.apply(init_weights)

    # what every family answers alike (model.base): here RMSNorms, o_proj and the (tied or untied) head
    def attention_norm(self, layer: int) -> nn.Module:
        return self.blocks[layer].input_layernorm

    def output_projection(self, layer: int) -> nn.Linear:
        return self.blocks[layer].attn.o_proj

    def final_norm(self) -> nn.Module:
        return self.norm

    def unembed(self) -> nn.Linear:
        return self.lm_head

    def embed(self, idx: torch.Tensor, start: int = 0) -> torch.Tensor:
        """Token embeddings (B, T) -> (B, T, C); positions enter later, as a rotation of q and k. ``start`` is the
        first token's position, checked against context_size as GPT checks it."""
        T = idx.size(1)
        if start + T > self.config.context_size:
            raise ValueError(
                f"sequence of {start + T} tokens is longer than context_size {self.config.context_size}"
            )
        return self.token_embedding(idx)  # (B, T, C)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None, *, return_attention: bool = False,
                cache: KVCache | None = None, capture: Recorder | None = None) -> GPTOutput:
        """idx (B, T) of token IDs -> logits (B, T, V); loss if targets; weights if asked; ``capture`` keeps the
        named points (Recorder)."""
        start = cache.length if cache is not None else 0
        x = self.dropout(self.embed(idx, start))
        positions = torch.arange(start, start + idx.size(1), device=idx.device)  # (T,): the true positions
        cos, sin = rotary_cos_sin(positions, self.config.head_size, self.config.rope_theta, x.dtype)  # (T, d) each
        weights_per_layer, inputs_per_layer = [], []
        for layer, block in enumerate(self.blocks):
            need_weights = return_attention or (capture is not None and any(
                capture.wants(layer, point) for point in WEIGHT_POINTS))
            x, attention_input, weights = block(x, cos, sin, need_weights, cache, layer, capture)
            if return_attention:
                weights_per_layer.append(weights)
                inputs_per_layer.append(attention_input)
        logits = self.lm_head(self.norm(x))  # (B, T, V)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return GPTOutput(
            logits,
            loss,
            weights_per_layer if return_attention else None,
            inputs_per_layer if return_attention else None,
        )
