"""The Model tab's levels read through a model's named points (model.base.run_with_cache, TransformerLens's hook
names), for the Llama family: what it has that GPT has not is kept as it is, never rebuilt from GPT's modules.

  1-2. one score, one head   ``rotary_head(model, ids, layer, head)``: the head's HeadTrace on q and k after the
                 rotation (what its scores read), q and k before it, the angle each pair of features turns at each
                 position, and the K/V head it reads with the query heads that share it
  3. all heads   levels.all_heads, which reads every family's heads at their named points (its o_proj here)
  4. the block   ``gated_block_walk(model, ids, layer)``: RMSNorm, attention, add, RMSNorm, the SwiGLU MLP (gate,
                 up, SiLU, their product, down), add: a levels.BlockWalk and the gated MLP's parts
  5. the model   levels.logit_lens, which reads the family's stream after each block at hook_resid_post

Knows nothing about lesson text (family_lessons.py), Gradio or Plotly. Every result is detached, float32, on the CPU.

    rotary_head(model, ids, 0, 3).kv_head  -> 1      (4 query heads over 2 K/V heads: heads 2 and 3 share K/V head 1)
    gated_block_walk(model, ids, 0).output ==  run_with_cache(model, ids[None])[1]["blocks.0.hook_resid_post"][0]
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from playground import checks
from playground.lens.anatomy.levels import (
    BlockWalk,
    StreamPoint,
    check_token_ids,
)
from playground.lens.walkthrough import HeadTrace
from playground.model.base import run_with_cache
from playground.model.gpt import activation as model_activation
from playground.model.gpt import causal_mask

HEAD_POINTS = ("ln1.hook_normalized", "attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_rot_q",
               "attn.hook_rot_k", "attn.hook_attn_scores", "attn.hook_pattern", "attn.hook_z")
BLOCK_POINTS = ("hook_resid_pre", "ln1.hook_normalized", "attn.hook_pattern", "attn.hook_z", "hook_attn_out",
                "hook_resid_mid", "ln2.hook_normalized", "hook_mlp_out", "hook_resid_post")
# the block's points in order, as the level names them: (name, named point, is it the residual stream)
GATED_BLOCK = (("block input", "hook_resid_pre", True), ("RMSNorm 1", "ln1.hook_normalized", False),
               ("attention output", "hook_attn_out", False), ("residual add 1", "hook_resid_mid", True),
               ("RMSNorm 2", "ln2.hook_normalized", False), ("MLP output (SwiGLU)", "hook_mlp_out", False),
               ("residual add 2 (block output)", "hook_resid_post", True))


def _cpu(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", torch.float32)


def kv_head_of(config, head: int) -> int:
    """The K/V head query head ``head`` reads: query heads g·n .. (g+1)·n − 1 share K/V head g (n = heads / K/V
    heads, as repeat_kv copies them). 4 query heads over 2: kv_head_of(config, 3) -> 1."""
    return head // (config.heads_num // config.kv_heads)


def heads_sharing(config, kv_head: int) -> list[int]:
    """The query heads that read K/V head ``kv_head``: [2, 3] for K/V head 1 of 4 query heads over 2."""
    group = config.heads_num // config.kv_heads
    return list(range(kv_head * group, (kv_head + 1) * group))


def _recorded(model, token_ids: torch.Tensor, layers: set[int], points) -> tuple[torch.Tensor, dict]:
    ids = check_token_ids(model, token_ids)
    _, recorder = run_with_cache(model, ids[None], points=set(points), layers=layers, stop_when_kept=True)
    return ids, {name: _cpu(tensor[0]) for name, tensor in recorder.values.items()}


# --------------------------------------------------------------------------------------------- 1-2. one head

@dataclass(eq=False)
class RotaryHead:
    """One query head of a rotary layer: its trace on the rotated q and k, what the rotation and the grouping did."""

    trace: HeadTrace  # x = the RMSNorm'd stream, q and k after the rotation, v of the shared K/V head
    q_before: torch.Tensor  # (T, d) q_proj(x) for this head, before the rotation
    k_before: torch.Tensor  # (T, d) k_proj(x) for its K/V head, before the rotation
    angles: torch.Tensor  # (T, d/2) the angle pair i (features i and i + d/2) turns at each position, in radians
    head: int
    kv_head: int  # the K/V head it reads (its keys and values)
    sharing: list[int]  # the query heads that read that K/V head, this one included
    rope_theta: float


def rotary_angles(length: int, head_size: int, rope_theta: float) -> torch.Tensor:
    """(T, d/2): position t × rope_theta^(-2i/d), the angle of pair i at position t (llama.rotary_cos_sin's)."""
    inv_freq = 1.0 / (rope_theta ** (torch.arange(0, head_size, 2).float() / head_size))  # (d/2,)
    return torch.arange(length).float()[:, None] * inv_freq[None, :]  # (T, d/2)


def rotary_head(model, token_ids: torch.Tensor, layer: int, head: int, tokens: list[str] | None = None) -> RotaryHead:
    """Layer ``layer``, query head ``head`` of a Llama-family model on token_ids, read through its named points: the
    scores are q·k of the rotated q and k, the weights are the model's own (attn.hook_pattern)."""
    config = model.config
    layer = checks.index(layer, "layer", config.layers_num, "layers")
    head = checks.index(head, "head", config.heads_num, "heads per layer")
    ids, points = _recorded(model, token_ids, {layer}, HEAD_POINTS)

    def point(name: str) -> torch.Tensor:
        return points[f"blocks.{layer}.{name}"]

    kv_head = kv_head_of(config, head)
    q, k, v = point("attn.hook_rot_q")[head], point("attn.hook_rot_k")[kv_head], point("attn.hook_v")[kv_head]
    T, d = q.shape
    scores = q @ k.T  # (T, T)
    scaled = scores / math.sqrt(d)
    masked = scaled.masked_fill(~causal_mask(T, T, window=config.sliding_window), float("-inf"))  # Mistral's window
    trace = HeadTrace(point("ln1.hook_normalized"), q, k, v, scores, scaled, masked, point("attn.hook_pattern")[head],
                      point("attn.hook_z")[head], list(tokens) if tokens is not None else [str(i) for i in
                                                                                           ids.tolist()],
                      window=config.sliding_window)
    return RotaryHead(trace, point("attn.hook_q")[head], point("attn.hook_k")[kv_head],
                      rotary_angles(T, d, config.rope_theta), head, kv_head, heads_sharing(config, kv_head),
                      config.rope_theta)


# --------------------------------------------------------------------------------------------- 4. the block

@dataclass(eq=False)
class GatedMLP:
    """The SwiGLU MLP at every position: down(SiLU(gate(x)) × up(x)), each part kept, (T, hidden) each."""

    gate: torch.Tensor  # gate_proj(x)
    activated: torch.Tensor  # SiLU(gate): how far each hidden unit's gate opens (negative gates close, to about 0)
    up: torch.Tensor  # up_proj(x): what each hidden unit would pass
    gated: torch.Tensor  # SiLU(gate) × up: what passes, into down_proj
    output: torch.Tensor  # (T, C) down_proj(gated): what the MLP adds to the stream


@dataclass(eq=False)
class GatedBlockWalk:
    walk: BlockWalk  # the stream at each point (RMSNorm 1, attention, add, RMSNorm 2, SwiGLU, add), the weights
    mlp: GatedMLP


def is_gated(model, layer: int) -> bool:
    """Block ``layer``'s MLP is gated (SwiGLU: gate_proj, up_proj, down_proj), as the Llama family's are."""
    return hasattr(model.blocks[layer].mlp, "gate_proj")


def gated_block_walk(model, token_ids: torch.Tensor, layer: int) -> GatedBlockWalk:
    """Block ``layer`` of a Llama-family model on token_ids as it runs (pre-norm, causal, RMSNorm, SwiGLU): the
    stream read at its named points, and the gated MLP's parts from its own gate_proj, up_proj and down_proj on the
    RMSNorm'd stream it read (their down_proj is the block's hook_mlp_out)."""
    config = model.config
    layer = checks.index(layer, "layer", config.layers_num, "layers")
    _, points = _recorded(model, token_ids, {layer}, BLOCK_POINTS)

    def point(name: str) -> torch.Tensor:
        return points[f"blocks.{layer}.{name}"]

    mlp = model.blocks[layer].mlp
    parameter = mlp.gate_proj.weight
    with torch.no_grad():
        x = point("ln2.hook_normalized").to(parameter.device, parameter.dtype)  # (T, C)
        gate, up = mlp.gate_proj(x), mlp.up_proj(x)  # (T, hidden) each
        activated = model_activation(mlp.activation, gate)
        gated = activated * up
        output = mlp.down_proj(gated)  # (T, C)
    weights = point("attn.hook_pattern")  # (h, T, T)
    walk = BlockWalk([StreamPoint(name, point(hook), stream) for name, hook, stream in GATED_BLOCK], weights,
                     torch.ones(weights.shape, dtype=torch.bool), weights, _cpu(gated), activation="silu")
    return GatedBlockWalk(walk, GatedMLP(_cpu(gate), _cpu(activated), _cpu(up), _cpu(gated), _cpu(output)))
