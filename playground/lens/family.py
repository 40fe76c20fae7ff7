"""What the lens reads from a model of either family (model.gpt's GPT, model.llama's Llama): a head's projections,
each layer's norm and the final one with its scale frozen, the output projection, the rotation of q and k, and the
parts of the residual stream. circuits.py and score_attribution.py read a model through these, so their maths is
written once for both families; notebook 004's one-layer model (no stream, no norm) they read on their own.

    frozen_scale(norm, stream)            (T,): LayerNorm's sqrt(var + eps), RMSNorm's sqrt(mean(x²) + eps)
    rotate(model, x, positions)           (..., T, d) turned by each position's angles (a GPT: x unchanged)
    stream_parts(model, ids, below=2)     the embeddings, each head, bias and MLP of layers 0 and 1: (parts, T, C)

The two norms differ in one place the attributions see: LayerNorm centres its input (a part's share is its centred
output) and RMSNorm does not; both are affine once their scale is frozen at the position.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from playground.model.base import run_with_cache
from playground.model.gpt import HEADS_OUTPUT_OVERRIDES
from playground.model.llama import rotary_cos_sin, rotate_half
from playground.textbook.notebook_004 import MultiHeadAttention as NotebookAttention


def head_name(layer: int, head: int) -> str:
    return f"L{layer} H{head}"


def is_rotary(model) -> bool:
    """Positions enter as a rotation of q and k (the Llama family), not as an embedding added to the stream."""
    return bool(getattr(model.config, "is_llama", False))


def head_projections(model, layer: int, head: int) -> tuple:
    """(W_Q, W_K, W_V, b_Q, b_K, b_V) of one query head of a GPT or a Llama, each W (C, d) for ``x @ W``; a grouped
    head's K and V are those of the K/V head it shares."""
    return model.blocks[layer].attn.head_projections(head)


def output_projection(model, layer: int) -> nn.Linear:
    """The Linear that writes layer ``layer``'s heads, side by side, into the stream (GPT's proj, Llama's o_proj)."""
    return model.output_projection(layer)


def attention_norm(model, layer: int) -> nn.Module:
    """The norm layer ``layer``'s heads read the stream through (GPT's ln_1, Llama's input_layernorm)."""
    return model.attention_norm(layer)


def final_norm(model) -> nn.Module:
    return model.final_norm()


def centres(model) -> bool:
    """LayerNorm subtracts the mean of the features; RMSNorm does not."""
    return not is_rotary(model)


def frozen_scale(norm: nn.Module, stream: torch.Tensor) -> torch.Tensor:
    """(...,): what ``norm`` divides ``stream`` (..., C) by, at each position: LayerNorm's sqrt(var + eps) (after
    centring), RMSNorm's sqrt(mean(x²) + eps). Frozen, it makes the norm affine."""
    if isinstance(norm, nn.LayerNorm):
        return torch.sqrt(stream.var(dim=-1, unbiased=False) + norm.eps)
    return torch.sqrt(stream.pow(2).mean(dim=-1) + norm.eps)


def gain(norm: nn.Module, size: int, device) -> torch.Tensor:
    """(C,): the norm's scale per feature (ones where it has none)."""
    return norm.weight if norm.weight is not None else torch.ones(size, device=device)


def norm_bias(norm: nn.Module) -> torch.Tensor | None:
    return getattr(norm, "bias", None)  # RMSNorm has none


def rotate(model, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """``x`` (..., T, d) of q or k turned by the angles of ``positions`` (T,), as the model turns its own: each pair
    of features (i, i + d/2) rotated in its plane. The rotation is linear, so a sum of parts turns part by part. A
    GPT's positions are in its stream instead: ``x`` unchanged."""
    if not is_rotary(model):
        return x
    config = model.config
    cos, sin = rotary_cos_sin(positions, config.head_size, config.rope_theta, x.dtype)  # (T, d) each
    return x * cos + rotate_half(x) * sin


_HOOKED: set[int] = set()  # notebook attention modules whose projection reads HEADS_OUTPUT_OVERRIDES
_HOOK_LOCK = threading.Lock()


def _override_hook(attention) -> None:
    """Notebook 004's MultiHeadAttention (its own code, left as the notebook wrote it) gets what model.GPT's
    attention does: HEADS_OUTPUT_OVERRIDES applied to the heads' outputs before ``proj``, by a hook on ``proj``'s
    input that is a no-op outside an override (another thread's passes stay intact)."""
    with _HOOK_LOCK:
        if id(attention) in _HOOKED:
            return

        def apply(_proj, args):
            overrides = HEADS_OUTPUT_OVERRIDES.get()
            if overrides and attention in overrides:
                return (overrides[attention](args[0]), *args[1:])
            return None

        attention.proj.register_forward_pre_hook(apply)
        _HOOKED.add(id(attention))
        weakref.finalize(attention, _HOOKED.discard, id(attention))


@contextmanager
def overriding(replacements: dict) -> Iterator[None]:
    """The model's heads' outputs changed by ``replacements`` ({attention module: fn}) in this thread's forward
    passes only (model.HEADS_OUTPUT_OVERRIDES); one already in force runs first."""
    current = dict(HEADS_OUTPUT_OVERRIDES.get() or {})
    for module, replace in replacements.items():
        if isinstance(module, NotebookAttention):
            _override_hook(module)
        before = current.get(module)
        current[module] = replace if before is None else (lambda y, first=before, then=replace: then(first(y)))
    token = HEADS_OUTPUT_OVERRIDES.set(current)
    try:
        yield
    finally:
        HEADS_OUTPUT_OVERRIDES.reset(token)


def recorder(store: list):
    """An override that keeps what it sees (the heads' outputs side by side, (B, T, h·d)) and changes nothing."""
    def record(y: torch.Tensor) -> torch.Tensor:
        store.append(y)
        return y
    return record


def stream_parts(model, ids: torch.Tensor, below: int | None = None) -> tuple[list[str], list[str], torch.Tensor,
                                                                            torch.Tensor]:
    """(names, kinds, parts (P, T, C), stream (T, C)): every part's output at every position of the residual stream
    that layer ``below`` reads (None: the stream after the last block), and that stream, the parts' sum. The parts:
    the embeddings (a GPT's token and position, a Llama's token alone), then per layer each head through its slice of
    the output projection, that projection's bias (where it has one) and the MLP. A head's output is read where a
    knock-out replaces it (HEADS_OUTPUT_OVERRIDES), so a head knocked out around the call writes what it wrote."""
    ids = ids.view(1, -1)  # (1, T)
    T = ids.size(1)
    count = len(model.blocks) if below is None else below
    joined: list[list[torch.Tensor]] = [[] for _ in range(count)]  # per layer: (1, T, h·d) before the projection
    with overriding({block.attn: recorder(joined[i]) for i, block in enumerate(model.blocks[:count])}):
        # the first ``count`` blocks as the model's forward runs them (the blocks above are not run)
        _, points = run_with_cache(model, ids, {"hook_mlp_out", "hook_resid_post"}, set(range(count)),
                                   stop_when_kept=True)
    stream = points[f"blocks.{count - 1}.hook_resid_post"] if count else model.embed(ids)  # (1, T, C)
    names, kinds, parts = ["token embedding"], ["embedding"], [model.token_embedding(ids[0])]  # (T, C)
    if not is_rotary(model):
        names.append("position embedding")
        kinds.append("embedding")
        parts.append(model.position_embedding(torch.arange(T, device=ids.device)))
    d = model.config.head_size
    for layer in range(count):
        projection = output_projection(model, layer)
        weight = projection.weight  # (C, h·d): out x in
        for head in range(model.config.heads_num):
            features = slice(head * d, (head + 1) * d)
            names.append(head_name(layer, head))
            kinds.append("head")
            parts.append(joined[layer][0][0][:, features] @ weight[:, features].T)  # (T, C)
        if projection.bias is not None:
            names.append(f"L{layer} attention bias")
            kinds.append("bias")
            parts.append(projection.bias.expand(T, -1))
        names.append(f"L{layer} MLP")
        kinds.append("mlp")
        parts.append(points[f"blocks.{layer}.hook_mlp_out"][0])
    return names, kinds, torch.stack(parts), stream[0]
