"""One layer of a Llama-family checkpoint's attention computed each way that exists for grouped K/V heads, on its own
q/k/v weights and the rotation, for the Compare tab: what each way copies, how far its numbers are from the others,
what it costs. Maths only: knows nothing about files, tokenizers or the UI.

The ways (WAYS), each from the same rotated q (B, h, T, d) and grouped k, v (B, h_kv, T, d):
  repeat_kv, then matmul   transformers' eager path (and llama.py's with weights): K and V copied for their query
                           heads, then softmax(q·kᵀ/√d, causal)·v; the reference here
  sdpa, enable_gqa         torch's scaled_dot_product_attention reading the grouped K and V as they are
  sdpa after repeat_kv     the fused kernel on copied K and V (what llama.py runs without weights)
  grouped matmul           q viewed as (B, h_kv, n, T, d): each K/V head meets its n query heads in one matmul, no copy
Each takes the model's sliding window (Mistral's; None: none) and masks with it as llama.py does.

    layer_ways(model, ids, 0).rows[1].max_abs_diff  -> about 1e-7 (sdpa, enable_gqa against repeat_kv, float32)
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from playground import checks
from playground.model.base import run_with_cache
from playground.model.gpt import causal_mask
from playground.model.llama import apply_rotary_pos_emb, repeat_kv, rotary_cos_sin
from playground.model.modes import evaluating

REPEATS = 5  # timed runs of each way (after one warm-up): the median is reported


def _explicit(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None) -> torch.Tensor:
    T, d = q.size(2), q.size(3)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # (B, h, T, T)
    scores = scores.masked_fill(~causal_mask(T, T, q.device, window), float("-inf"))
    return F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype) @ v  # (B, h, T, d)


def _sdpa_mask(q: torch.Tensor, window: int | None) -> dict:
    """sdpa's keywords for the causal mask: is_causal, or with a sliding window the (T, T) mask itself."""
    T = q.size(2)
    return {"is_causal": True} if window is None else {"attn_mask": causal_mask(T, T, q.device, window)}


def repeat_then_matmul(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """K/V head g copied for query heads g·n .. (g+1)·n − 1 (repeat_kv), then the explicit softmax."""
    n = q.size(1) // k.size(1)
    return _explicit(q, repeat_kv(k, n), repeat_kv(v, n), window)  # (B, h, T, d)


def sdpa_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """torch's fused kernel told the K/V heads are grouped: it reads each one for its query heads, no copy."""
    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **_sdpa_mask(q, window))  # (B, h, T, d)


def sdpa_repeated(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None) -> torch.Tensor:
    n = q.size(1) // k.size(1)
    return F.scaled_dot_product_attention(q, repeat_kv(k, n), repeat_kv(v, n),
                                          **_sdpa_mask(q, window))  # (B, h, T, d)


def grouped_matmul(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None = None) -> torch.Tensor:
    """q viewed as (B, h_kv, n, T, d): the n query heads of a group share one K/V head in a broadcast matmul."""
    B, h, T, d = q.shape
    h_kv = k.size(1)
    grouped = q.view(B, h_kv, h // h_kv, T, d)  # query heads g·n .. (g+1)·n − 1 together, beside K/V head g
    scores = grouped @ k[:, :, None].transpose(-2, -1) / math.sqrt(d)  # (B, h_kv, n, T, T)
    scores = scores.masked_fill(~causal_mask(T, T, q.device, window), float("-inf"))
    weights = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return (weights @ v[:, :, None]).view(B, h, T, d)  # (B, h, T, d)


@dataclass(frozen=True)
class Way:
    name: str
    compute: Callable[..., torch.Tensor]  # (q, k, v, window=None) -> (B, h, T, d)
    copies_kv: bool  # K and V copied for every query head (h / h_kv times their size)
    keeps_weights: bool  # the (B, h, T, T) weights are made in memory
    what: str


WAYS = (
    Way("repeat_kv, then matmul", repeat_then_matmul, True, True,
        "transformers' eager path: K and V copied for their query heads, the weights made explicitly"),
    Way("sdpa, enable_gqa", sdpa_gqa, False, False,
        "torch's fused kernel reading the grouped K and V as they are"),
    Way("sdpa after repeat_kv", sdpa_repeated, True, False,
        "the fused kernel on copied K and V (llama.py's path when no weights are asked for)"),
    Way("grouped matmul", grouped_matmul, False, True,
        "each K/V head meets its query heads in one broadcast matmul: the weights made, nothing copied"),
)
REFERENCE = WAYS[0].name


@dataclass(frozen=True)
class WayRow:
    name: str
    what: str
    max_abs_diff: float  # against the reference way
    max_abs_diff_model: float  # against the model's own forward (its attn.hook_z)
    median_ms: float
    kv_bytes: int  # the K and V it reads, copies included
    weights_bytes: int  # the (B, h, T, T) weights it makes, 0 for a fused kernel


@dataclass(frozen=True)
class LayerWays:
    layer: int
    heads_num: int
    kv_heads: int
    head_size: int
    length: int
    rows: list[WayRow]


def rotated_qkv(model, token_ids: torch.Tensor, layer: int) -> tuple[torch.Tensor, ...]:
    """Layer ``layer``'s q (1, h, T, d) and k, v (1, h_kv, T, d) from its own q_proj, k_proj, v_proj on the
    RMSNorm'd stream it reads (ln1.hook_normalized), q and k turned at their positions; and the model's own head
    outputs (attn.hook_z) to check against."""
    config = model.config
    _, recorder = run_with_cache(model, token_ids[None], points={"ln1.hook_normalized", "attn.hook_z"},
                                 layers={layer})
    x = recorder[f"blocks.{layer}.ln1.hook_normalized"]  # (1, T, C)
    attn = model.blocks[layer].attn
    T, d = x.size(1), config.head_size
    with evaluating(model):
        q = attn.q_proj(x).view(1, T, config.heads_num, d).transpose(1, 2)  # (1, h, T, d)
        k = attn.k_proj(x).view(1, T, config.kv_heads, d).transpose(1, 2)  # (1, h_kv, T, d)
        v = attn.v_proj(x).view(1, T, config.kv_heads, d).transpose(1, 2)  # (1, h_kv, T, d)
        cos, sin = rotary_cos_sin(torch.arange(T, device=x.device), d, config.rope_theta, x.dtype)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
    return q, k, v, recorder[f"blocks.{layer}.attn.hook_z"]


def layer_ways(model, token_ids: torch.Tensor, layer: int, repeats: int = REPEATS,
               clock: Callable[[], float] = time.perf_counter) -> LayerWays:
    """Every way of WAYS on layer ``layer`` of a Llama-family ``model`` reading token_ids (1-D): each one's largest
    |difference| from the reference way and from the model's own forward, its median time and what it holds."""
    config = model.config
    if not config.is_llama:
        raise ValueError("grouped K/V heads are the Llama family's: this checkpoint's heads each have their own K/V "
                         "head (the implementations above compare GPT's multi-head attention)")
    layer = checks.index(layer, "layer", config.layers_num, "layers")
    q, k, v, own = rotated_qkv(model, token_ids, layer)
    B, h, T, d = q.shape
    itemsize = q.element_size()
    rows, reference = [], None
    window = config.sliding_window
    with torch.no_grad():
        for way in WAYS:
            out = way.compute(q, k, v, window)
            times = []
            for _ in range(repeats + 1):
                started = clock()
                way.compute(q, k, v, window)
                times.append((clock() - started) * 1000)
            reference = out if reference is None else reference
            kv_heads = h if way.copies_kv else k.size(1)
            rows.append(WayRow(way.name, way.what, float((out - reference).abs().max()),
                               float((out - own).abs().max()), statistics.median(times[1:]),
                               2 * B * kv_heads * T * d * itemsize,
                               B * h * T * T * itemsize if way.keeps_weights else 0))
    return LayerWays(layer, h, k.size(1), d, T, rows)
