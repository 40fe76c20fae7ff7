"""Why the model predicted a character: direct logit attribution, each head's QK and OV circuits, and heads knocked
out. The maths only, on playground.model.GPT (the character models and the GPT-2 layout alike); no figures, no UI.

    logit_attribution(model, ids, position=9, target_id=1)   the target's logit split into the parts that wrote it:
                                                              the embeddings, every head, every MLP, the biases;
                                                              the parts sum to the model's logit (float32, 1e-4)
    qk_circuit(model, layer=0, head=2)                        (V, V): the score query character i gives key character j
    ov_circuit(model, layer=0, head=2)                        (V, V): the logits head writes when it attends to c
    with ablated(model, [(0, 2)], mode="mean", token_ids=ids):  the model runs with head 2 of layer 0 knocked out
    head_effects(model, ids)                                  every head's knock-out: the loss it adds, ranked

Direct logit attribution works as TransformerLens's does: the residual stream after the last block is a sum of the
parts' outputs; the final LayerNorm is affine once its scale is frozen at the chosen position, so each part's
centred output, divided by that scale, times the norm's gain, read by the target's row of the LM head, is its share
of the logit. The norm's and the head's biases make one more part. A head's share is its output through its slice
of the output projection; the projection's bias is a part of its own.

The circuits read token embeddings alone (no position), through the layer's first LayerNorm: for layers past the
first they are the direct path, as if the head read the embeddings straight from the input.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from playground.model import GPT

ABLATION_MODES = ("zero", "mean")


class CircuitError(ValueError):
    """A circuit or attribution was asked for something the model does not have; the message says what."""


@dataclass(frozen=True)
class LogitAttribution:
    """The parts of one logit: ``values[i]`` is ``names[i]``'s share; ``values.sum()`` is ``logit``."""

    position: int
    target_id: int
    logit: float  # the model's own logit for the target at the position
    names: list[str]  # "token embedding", "position embedding", "L0 H2", "L0 attention bias", "L0 MLP", ...
    values: torch.Tensor  # (parts,) float32
    kinds: list[str]  # per part: "embedding", "head", "bias" or "mlp"
    scale: float  # the final LayerNorm's sqrt(var + eps) at the position, frozen

    def head(self, layer: int, head: int) -> float:
        return float(self.values[self.names.index(head_name(layer, head))])


def head_name(layer: int, head: int) -> str:
    return f"L{layer} H{head}"


def _check_position(position: int, length: int) -> int:
    if isinstance(position, bool) or not isinstance(position, int):
        raise CircuitError(f"position must be a whole number, got {position!r}")
    if not -length <= position < length:
        raise CircuitError(f"position {position} is outside the text's {length} tokens")
    return position % length


def _check_head(model: GPT, layer: int, head: int) -> None:
    config = model.config
    if not 0 <= layer < config.layers_num:
        raise CircuitError(f"layer {layer} is out of range: this model has {config.layers_num} layers (0 to "
                           f"{config.layers_num - 1})")
    if not 0 <= head < config.heads_num:
        raise CircuitError(f"head {head} is out of range: each layer has {config.heads_num} heads (0 to "
                           f"{config.heads_num - 1})")


def _check_token(model: GPT, token_id: int, what: str = "target") -> int:
    vocabulary = model.config.vocabulary_size
    if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < vocabulary:
        raise CircuitError(f"{what} id {token_id!r} is outside the vocabulary (0 to {vocabulary - 1})")
    return token_id


@contextmanager
def _evaluating(model: GPT) -> Iterator[None]:
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        model.train(was_training)


def _parts_of_the_stream(model: GPT, token_ids: torch.Tensor, position: int) -> tuple[list[str], list[str],
                                                                                     list[torch.Tensor], torch.Tensor]:
    """Every part's output at ``position`` (each (C,)) and the final residual stream there, from one forward pass
    that records each block's attention-projection input and MLP output."""
    ids = token_ids.view(1, -1)  # (1, T)
    T = ids.size(1)
    config = model.config
    d = config.head_size
    head_inputs: list[torch.Tensor] = []  # per layer (T, C): the heads' outputs side by side, before proj
    mlp_outputs: list[torch.Tensor] = []  # per layer (T, C)
    hooks = []
    for block in model.blocks:
        hooks.append(block.attn.proj.register_forward_pre_hook(lambda _m, args: head_inputs.append(args[0][0])))
        hooks.append(block.mlp.register_forward_hook(lambda _m, _args, out: mlp_outputs.append(out[0])))
    try:
        x = model.embed(ids)  # (1, T, C)
        for block in model.blocks:
            x, _, _ = block(x)
    finally:
        for hook in hooks:
            hook.remove()
    positions = torch.arange(T, device=ids.device)
    names = ["token embedding", "position embedding"]
    kinds = ["embedding", "embedding"]
    parts = [model.token_embedding(ids[0])[position], model.position_embedding(positions)[position]]
    for layer, block in enumerate(model.blocks):
        proj = block.attn.proj.weight  # (C, C): out x in
        joined = head_inputs[layer][position]  # (C,)
        for head in range(config.heads_num):
            features = slice(head * d, (head + 1) * d)
            names.append(head_name(layer, head))
            kinds.append("head")
            parts.append(proj[:, features] @ joined[features])  # (C,)
        if block.attn.proj.bias is not None:
            names.append(f"L{layer} attention bias")
            kinds.append("bias")
            parts.append(block.attn.proj.bias)
        names.append(f"L{layer} MLP")
        kinds.append("mlp")
        parts.append(mlp_outputs[layer][position])
    return names, kinds, parts, x[0, position]


def logit_attribution(model: GPT, token_ids: torch.Tensor, position: int, target_id: int) -> LogitAttribution:
    """The logit of ``target_id`` after ``token_ids[: position + 1]`` split into the parts that wrote it.

    ``token_ids`` is (T,) or (1, T), T at most the model's context. Runs in eval mode without gradients.
    """
    ids = torch.as_tensor(token_ids).view(-1)
    if ids.numel() == 0:
        raise CircuitError("the text is empty: there is no position to explain")
    if ids.numel() > model.config.context_size:
        raise CircuitError(f"the text is {ids.numel()} tokens; this model reads at most {model.config.context_size}")
    position = _check_position(position, ids.numel())
    target_id = _check_token(model, target_id)
    with _evaluating(model):
        names, kinds, parts, stream = _parts_of_the_stream(model, ids.to(model.token_embedding.weight.device),
                                                           position)
        norm = model.ln_f
        scale = torch.sqrt(stream.var(unbiased=False) + norm.eps)  # frozen at this position
        gain = norm.weight if norm.weight is not None else torch.ones_like(stream)
        reader = model.lm_head.weight[target_id] * gain  # (C,): what a centred, scaled stream is read by
        values = [float(((part - part.mean()) / scale) @ reader) for part in parts]
        constant = 0.0
        if norm.bias is not None:
            constant += float(norm.bias @ model.lm_head.weight[target_id])
        if model.lm_head.bias is not None:
            constant += float(model.lm_head.bias[target_id])
        if norm.bias is not None or model.lm_head.bias is not None:
            names.append("final norm and LM head biases")
            kinds.append("bias")
            values.append(constant)
        logit = float(model.lm_head(norm(stream))[target_id])
    return LogitAttribution(position, target_id, logit, names, torch.tensor(values), kinds, float(scale))


def _embeddings_through(model: GPT, layer: int) -> torch.Tensor:
    """Every token's embedding alone, through layer ``layer``'s first LayerNorm: (V, C)."""
    return model.blocks[layer].ln_1(model.token_embedding.weight)


def qk_circuit(model: GPT, layer: int, head: int) -> torch.Tensor:
    """(V, V): the scaled score a query of token i gives a key of token j in head ``head`` of ``layer``, from the
    token embeddings alone (no position) through the layer's norm, W_Q and W_K (with their biases)."""
    _check_head(model, layer, head)
    with _evaluating(model):
        x = _embeddings_through(model, layer)  # (V, C)
        w_query, w_key, _, b_query, b_key, _ = model.blocks[layer].attn.head_projections(head)
        q = x @ w_query + (b_query if b_query is not None else 0)  # (V, d)
        k = x @ w_key + (b_key if b_key is not None else 0)
        return (q @ k.T) / math.sqrt(model.config.head_size)  # (V, V)


def ov_circuit(model: GPT, layer: int, head: int) -> torch.Tensor:
    """(V, V): row c is the logits head ``head`` of ``layer`` writes when it attends to token c alone, from c's
    embedding through the layer's norm, W_V (with its bias), the head's slice of W_O, the final norm and the LM head.
    Each row is that head's output read as if it were the whole stream (the final norm on it alone)."""
    _check_head(model, layer, head)
    with _evaluating(model):
        x = _embeddings_through(model, layer)  # (V, C)
        attention = model.blocks[layer].attn
        _, _, w_value, _, _, b_value = attention.head_projections(head)
        v = x @ w_value + (b_value if b_value is not None else 0)  # (V, d)
        d = model.config.head_size
        written = v @ attention.proj.weight[:, head * d:(head + 1) * d].T  # (V, C)
        return model.lm_head(model.ln_f(written))  # (V, V)


def _heads_by_layer(model: GPT, heads: Iterable[tuple[int, int]]) -> dict[int, list[int]]:
    chosen: dict[int, list[int]] = {}
    for layer, head in heads:
        _check_head(model, layer, head)
        chosen.setdefault(layer, []).append(head)
    return chosen


def head_means(model: GPT, token_ids: torch.Tensor) -> list[torch.Tensor]:
    """Per layer, the heads' outputs side by side (before the output projection) averaged over every position of
    ``token_ids`` ((T,) or (B, T)): (C,) each."""
    ids = torch.as_tensor(token_ids)
    ids = ids.view(1, -1) if ids.dim() == 1 else ids
    joined: list[torch.Tensor] = []
    hooks = [block.attn.proj.register_forward_pre_hook(lambda _m, args: joined.append(args[0].mean(dim=(0, 1))))
             for block in model.blocks]
    try:
        with _evaluating(model):
            model(ids.to(model.token_embedding.weight.device))
    finally:
        for hook in hooks:
            hook.remove()
    return joined


@contextmanager
def ablated(model: GPT, heads: Sequence[tuple[int, int]], mode: str = "zero",
            token_ids: torch.Tensor | None = None) -> Iterator[GPT]:
    """Inside, ``model`` runs with each (layer, head) in ``heads`` knocked out: its output, before the output
    projection, replaced by zeros ("zero") or by its mean over ``token_ids`` ("mean", which needs them). The model's
    weights are untouched; leaving the block removes the hooks."""
    if mode not in ABLATION_MODES:
        raise CircuitError(f"ablation mode {mode!r} is not one of {', '.join(ABLATION_MODES)}")
    chosen = _heads_by_layer(model, heads)
    if mode == "mean" and token_ids is None:
        raise CircuitError("mean ablation needs the text whose mean replaces the heads (token_ids)")
    means = head_means(model, token_ids) if mode == "mean" else None
    d = model.config.head_size

    def replace(layer: int):
        def hook(_module, args):
            joined = args[0].clone()  # (B, T, C)
            for head in chosen[layer]:
                features = slice(head * d, (head + 1) * d)
                joined[..., features] = 0.0 if means is None else means[layer][features]
            return (joined,)
        return hook

    hooks = [model.blocks[layer].attn.proj.register_forward_pre_hook(replace(layer)) for layer in chosen]
    try:
        yield model
    finally:
        for hook in hooks:
            hook.remove()


@dataclass(frozen=True)
class HeadEffect:
    layer: int
    head: int
    loss: float  # the loss on the text with this head knocked out
    added: float  # that minus the intact model's loss: how much the text needed this head


def text_loss(model: GPT, token_ids: torch.Tensor) -> float:
    """The mean next-token cross-entropy over ``token_ids`` (T,) (each token predicting the next)."""
    ids = torch.as_tensor(token_ids).view(1, -1).to(model.token_embedding.weight.device)
    if ids.size(1) < 2:
        raise CircuitError("the text needs at least two tokens to have a next token to predict")
    with _evaluating(model):
        logits = model(ids[:, :-1]).logits  # (1, T-1, V)
        return float(F.cross_entropy(logits[0], ids[0, 1:]))


def head_effects(model: GPT, token_ids: torch.Tensor, mode: str = "mean") -> list[HeadEffect]:
    """Every head knocked out alone, the loss on ``token_ids`` each time; the most needed head first."""
    intact = text_loss(model, token_ids)
    effects = []
    for layer in range(model.config.layers_num):
        for head in range(model.config.heads_num):
            with ablated(model, [(layer, head)], mode, token_ids):
                loss = text_loss(model, token_ids)
            effects.append(HeadEffect(layer, head, loss, loss - intact))
    return sorted(effects, key=lambda effect: -effect.added)
