"""What every model family answers the same way: its size, GPT-2's (and Llama's) initialisation, and the named
points of a forward pass (TransformerLens's hook names), so a view written for one family reads the next.

GPT, the Llama family and notebook 004's model mix ``CountsItsWeights`` in, so the budget, the cards and the
views ask any of them ``parameter_count()`` and ``weights_bytes()`` alike. All three take ``capture=Recorder(...)``
in their forward and keep POINTS per layer (a point a family lacks is never kept: the rotation in GPT and notebook
004's model, the MLP in notebook 004's); ``run_with_cache`` is TransformerLens's name for the whole of it. Beside
the points each family names its modules alike:

    model.attention_norm(layer)     the norm layer ``layer``'s heads read through (LayerNorm, RMSNorm; nb 004: none)
    model.output_projection(layer)  the Linear writing the heads, side by side, into the stream (proj, o_proj)
    model.final_norm()              the norm the unembedding reads through (ln_f, norm; nb 004: none)
    model.unembed()                 the unembedding (lm_head; nb 004: output)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from playground.model.modes import evaluating


class CountsItsWeights:
    """``parameter_count`` and ``weights_bytes`` for an nn.Module (mixed in before nn.Module)."""

    def parameter_count(self) -> int:
        """Every parameter once (``parameters()`` yields a tied matrix once)."""
        return sum(p.numel() for p in self.parameters())

    def weights_bytes(self) -> int:
        """Bytes the parameters and buffers take in memory, a tied matrix once."""
        return sum(t.numel() * t.element_size() for t in (*self.parameters(), *self.buffers()))


def init_weights(module: nn.Module) -> None:
    """GPT-2's initialisation, which transformers' LlamaPreTrainedModel keeps: every matrix N(0, 0.02), biases 0
    (norms keep their own ones and zeros). For ``model.apply``."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


# What a Recorder can keep per layer, as "blocks.{layer}.{point}", with its shape (h: query heads, h_kv: key/value
# heads, d: head_size, C: embedding_dim, T: this pass's tokens, T_keys: the keys they read, the cached ones included).
POINTS = {
    "hook_resid_pre": "(B, T, C) the residual stream into the block",
    "ln1.hook_normalized": "(B, T, C) the normed stream attention reads (LayerNorm in GPT, RMSNorm in Llama)",
    "attn.hook_q": "(B, h, T, d) queries (before the rotation, in Llama)",
    "attn.hook_k": "(B, h_kv, T, d) keys (before the rotation, in Llama): one per key/value head",
    "attn.hook_v": "(B, h_kv, T, d) values: one per key/value head",
    "attn.hook_rot_q": "(B, h, T, d) queries turned by their positions (Llama only)",
    "attn.hook_rot_k": "(B, h_kv, T, d) keys turned by their positions (Llama only)",
    "attn.hook_attn_scores": "(B, h, T, T_keys) q·k / sqrt(d), the future masked to -inf",
    "attn.hook_pattern": "(B, h, T, T_keys) the attention weights, softmax of the scores",
    "attn.hook_z": "(B, h, T, d) each head's output, its weights times the values",
    "hook_attn_out": "(B, T, C) what attention adds to the stream (the output projection of the heads side by side)",
    "hook_resid_mid": "(B, T, C) the stream after attention",
    "ln2.hook_normalized": "(B, T, C) the normed stream the MLP reads",
    "hook_mlp_out": "(B, T, C) what the MLP adds to the stream",
    "hook_resid_post": "(B, T, C) the residual stream out of the block",
}
WEIGHT_POINTS = ("attn.hook_attn_scores", "attn.hook_pattern")  # asking for one makes that layer's attention explicit


class _StopForwardError(Exception):
    """Not a failure: raised from inside a forward by a Recorder with ``stop_when_kept`` once it holds every point it
    asked for, and caught by run_with_cache."""


@dataclass
class Recorder:
    """Keeps the named points of one forward pass, detached: ``Recorder()`` every point of every layer,
    ``Recorder({"attn.hook_rot_k"}, layers={0})`` one. After ``model(idx, capture=recorder)``,
    ``recorder["blocks.0.attn.hook_rot_k"]`` is (B, h_kv, T, d). Nothing is kept on a pass without one."""

    points: set[str] | frozenset[str] | None = None  # names from POINTS; None: all of them
    layers: set[int] | frozenset[int] | None = None  # None: every layer
    values: dict[str, torch.Tensor] = field(default_factory=dict)
    # True: once every point asked for (named points of named layers) is kept, the forward stops there (the layers
    # above are not run: a view of layer 3 of 30 costs 4 blocks); run_with_cache catches the stop
    stop_when_kept: bool = False

    def __post_init__(self) -> None:
        unknown = sorted(set(self.points or ()) - set(POINTS))
        if unknown:
            raise ValueError(f"no point named {', '.join(unknown)}; the points are {', '.join(POINTS)}")

    def wants(self, layer: int, point: str) -> bool:
        return (self.layers is None or layer in self.layers) and (self.points is None or point in self.points)

    def record(self, layer: int, point: str, tensor: torch.Tensor) -> None:
        if self.wants(layer, point):
            self.values[f"blocks.{layer}.{point}"] = tensor.detach()
            if (self.stop_when_kept and self.points is not None and self.layers is not None
                    and len(self.values) == len(self.points) * len(self.layers)):
                raise _StopForwardError

    def __getitem__(self, name: str) -> torch.Tensor:
        return self.values[name]


def record_point(recorder: Recorder | None, layer: int, point: str, tensor: torch.Tensor) -> None:
    if recorder is not None:
        recorder.record(layer, point, tensor)


def run_with_cache(model: nn.Module, token_ids: torch.Tensor, points=None, layers=None, stop_when_kept: bool = False):
    """One forward of ``model`` (eval mode, no gradients) on ``token_ids`` (B, T) keeping the named points:
    -> (its output, the Recorder). ``run_with_cache(model, ids)[1]["blocks.0.attn.hook_pattern"]`` is layer 0's
    attention weights (B, h, T, T). ``stop_when_kept`` (with ``points`` and ``layers`` named) stops the forward once
    they are all kept, as TransformerLens's ``stop_at_layer`` does: the output is then None."""
    recorder = Recorder(points, layers, stop_when_kept=stop_when_kept)
    with evaluating(model):
        try:
            output = model(token_ids, capture=recorder)
        except _StopForwardError:
            output = None
    return output, recorder
