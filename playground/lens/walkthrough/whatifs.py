"""What-if analyses of one head: does the output read the future, does softmax saturate, does order matter.

Owns the numbers behind the Attention tab's "what if" panel and its one-query view: mask leaks, row entropy
and largest weights with and without scaling, mask-before-vs-after-scaling, and one query's row sorted by
weight. Each returns a plain dataclass; the sentences come from lessons.py. ``stage_notes`` runs only the
analyses a stage shows (lessons.WHATIF_NOTES); ``whatif_traces`` says how many traces that costs. Knows
nothing about the UI.

Why Q, K and V are three projections, on a model and a text: ``tied_query_key`` runs the model with one head's W_K
set to its W_Q (its scores turn symmetric: a token can only look for what it offers), ``value_is_input`` with its
values set to the normed input it reads (it can only copy, not choose what to pass); each returns the changed
pattern and the loss on the text beside the intact model's. Either family: in the Llama family a K/V head is shared
by a group of query heads, so the change is the group's (its one W_K becomes the picked head's W_Q, its one V is X)
and every head of the group reads it; rotary positions keep tied scores symmetric (R_i q_i · R_j q_j depends on
j - i through one orthogonal R_(j-i), the same both ways).

    mask_leak(**journey_preset().as_kwargs()).affected -> [(0, 'Your'), (1, 'journey'), ... (4, 'one')]
    whatif_traces("weights") -> 4        (the mask leak traces twice, saturation twice)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from playground import checks
from playground.lens.walkthrough import lessons
from playground.lens.walkthrough.trace import HeadTrace, trace_head
from playground.model.base import run_with_cache
from playground.model.gpt import GPT, causal_mask
from playground.model.llama import apply_rotary_pos_emb, repeat_kv, rotary_cos_sin
from playground.model.modes import evaluating

TRACES_PER_NOTE = {"mask_leak": 2, "saturation": 2, "mask_order": 2}  # how often each analysis traces the head
TABLE_TOKENS = 16  # the saturation note prints a per-query table up to this many tokens


@dataclass
class MaskLeak:
    """How much each token's output depends on tokens after it."""

    mask: bool
    future_weight: list[float]  # per row i: total weight on positions j > i
    max_future_weight: list[float]  # per row i: the largest single weight on a position j > i
    output_change: list[float]  # per row i: max |change| of output row i when the last token changes
    affected: list[tuple[int, str]]  # (position, token) of earlier rows whose output changed
    summary: str


def mask_leak(x: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor, w_value: torch.Tensor, *,
              mask: bool = False, **switches: Any) -> MaskLeak:
    """Which earlier tokens' outputs change when the last token changes (1.0 added to each feature).

    With the mask off, every row that puts weight on a later token leaks; with it on, all numbers are 0.
    ``switches`` are the other trace_head keywords (tokens, scale, temperature, biases).
    """
    trace = trace_head(x, w_query, w_key, w_value, mask=mask, **switches)
    T = trace.length
    future = ~causal_mask(T, T)  # (T, T) True above the diagonal
    future_weights = trace.weights.masked_fill(~future, 0.0)  # (T, T)
    changed_x = trace.x.clone()
    changed_x[-1] = changed_x[-1] + 1.0
    changed = trace_head(changed_x, w_query, w_key, w_value, mask=mask, **switches)
    output_change = (changed.output - trace.output).abs().amax(dim=1)  # (T,)
    affected = [(i, trace.tokens[i]) for i in range(T - 1) if output_change[i].item() > 0.0]
    return MaskLeak(
        mask=bool(mask),
        future_weight=future_weights.sum(dim=1).tolist(),
        max_future_weight=future_weights.amax(dim=1).tolist(),
        output_change=output_change.tolist(),
        affected=affected,
        summary=lessons.mask_leak_summary(trace.tokens, affected, bool(mask), max(
            (trace.weights[i, -1].item() for i in range(T - 1) if output_change[i].item() == 0.0), default=0.0)),
    )


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """Entropy in nats of each row of weights (T, T) -> (T,); 0 · log 0 counts as 0."""
    return -torch.special.xlogy(weights, weights).sum(dim=-1)


@dataclass
class Saturation:
    """How peaked the softmax rows are with and without the 1/√d_k scaling."""

    entropy_scaled: list[float]  # nats per row; log(number of visible tokens) is the flattest possible
    entropy_unscaled: list[float]
    max_weight_scaled: list[float]
    max_weight_unscaled: list[float]
    max_entropy: list[float]  # per row: log of the number of tokens the row can see
    summary: str


def saturation(trace_with_scaling: HeadTrace, trace_without: HeadTrace) -> Saturation:
    """Per-row entropy (nats) and largest weight of two traces of the same head, scaled and unscaled."""
    if trace_with_scaling.weights.shape != trace_without.weights.shape:
        raise ValueError(
            f"the two traces have different shapes {tuple(trace_with_scaling.weights.shape)} and "
            f"{tuple(trace_without.weights.shape)}; trace the same inputs twice"
        )
    scaled, unscaled = trace_with_scaling.weights, trace_without.weights  # (T, T)
    visible = (trace_with_scaling.masked_scores != float("-inf")).sum(dim=1)  # (T,)
    entropy_scaled, entropy_unscaled = row_entropy(scaled), row_entropy(unscaled)  # (T,)
    max_scaled, max_unscaled = scaled.amax(dim=1), unscaled.amax(dim=1)  # (T,)
    return Saturation(
        entropy_scaled=entropy_scaled.tolist(),
        entropy_unscaled=entropy_unscaled.tolist(),
        max_weight_scaled=max_scaled.tolist(),
        max_weight_unscaled=max_unscaled.tolist(),
        max_entropy=torch.log(visible.to(scaled.dtype)).tolist(),
        summary=lessons.saturation_summary(entropy_scaled.mean().item(), max_scaled.mean().item(),
                                           entropy_unscaled.mean().item(), max_unscaled.mean().item(),
                                           trace_with_scaling.head_size),
    )


def mask_order_difference(x: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor, w_value: torch.Tensor,
                          **switches: Any) -> float:
    """Largest |difference| between the weights with the mask applied before and after scaling (0.0).

    ``switches`` are the other trace_head keywords; the mask is always on here.
    """
    switches = {key: value for key, value in switches.items() if key not in ("mask", "mask_before_scaling")}
    before = trace_head(x, w_query, w_key, w_value, mask=True, mask_before_scaling=True, **switches)
    after = trace_head(x, w_query, w_key, w_value, mask=True, mask_before_scaling=False, **switches)
    return (before.weights - after.weights).abs().max().item()


class Mix(NamedTuple):
    """One visible token in a query's row: where it is, what it is, how much the query takes from it."""

    position: int
    token: str
    weight: float


@dataclass
class QueryRow:
    """One query token's view: its scores, its weights and the value vectors it mixes."""

    position: int
    token: str
    scores: list[float]  # the row that goes into softmax (−inf where masked)
    weights: list[float]  # its softmax; sums to 1
    mixes: list[Mix]  # visible tokens, largest weight first
    values: torch.Tensor  # (len(mixes), d_k) value rows in the same order as mixes
    output: list[float]  # (d_k,) = sum of weight * value


def query_row(trace: HeadTrace, position: int) -> QueryRow:
    """Query token ``position``'s score row, softmax row and the values it mixes, sorted by weight."""
    T = trace.length
    position = checks.whole_number(position, "the query position")
    if not 0 <= position < T:
        raise ValueError(f"query position {position} is out of range: the text has {T} tokens (0-{T - 1})")
    scores = trace.masked_scores[position]  # (T,)
    weights = trace.weights[position]  # (T,)
    score_list, weight_list = scores.tolist(), weights.tolist()  # one copy each, not one .item() per key
    visible = [j for j in range(T) if score_list[j] != float("-inf")]
    mixes = sorted((Mix(j, trace.tokens[j], weight_list[j]) for j in visible),
                   key=lambda mix: (-mix.weight, mix.position))
    values = trace.v[[mix.position for mix in mixes]]  # (n, d_k)
    return QueryRow(
        position=position,
        token=trace.tokens[position],
        scores=score_list,
        weights=weight_list,
        mixes=mixes,
        values=values,
        output=trace.output[position].tolist(),
    )


def whatif_traces(key: str) -> int:
    """How many traces of the head stage ``key``'s what-if notes run, on top of the one shown."""
    return sum(TRACES_PER_NOTE[name] for name in lessons.notes_at(key))


def stage_notes(key: str, trace: HeadTrace, x: torch.Tensor, w_query: torch.Tensor, w_key: torch.Tensor,
                w_value: torch.Tensor, **inputs: Any) -> list[str]:
    """The what-if notes (Markdown) stage ``key`` shows, each analysis run only where its note is shown.

    ``trace`` is the head as shown, whose switches the analyses keep; ``inputs`` are trace_head's other
    keywords (tokens, biases). Stages 1-3 show none: softmax and the mask have not been met yet.
    """
    names = lessons.notes_at(key)
    common = dict(inputs, temperature=trace.temperature)
    notes = []
    if "mask_leak" in names:
        leak = mask_leak(x, w_query, w_key, w_value, mask=False, scale=trace.scale, **common)
        notes.append(lessons.mask_leak_note(trace, leak.summary))
    if "saturation" in names:
        order = dict(mask=trace.mask, mask_before_scaling=trace.mask_before_scaling)
        result = saturation(trace_head(x, w_query, w_key, w_value, scale=True, **order, **common),
                            trace_head(x, w_query, w_key, w_value, scale=False, **order, **common))
        rows = (list(zip(trace.tokens, result.entropy_scaled, result.entropy_unscaled, result.max_weight_scaled,
                         result.max_weight_unscaled)) if trace.length <= TABLE_TOKENS else [])
        notes.append(lessons.saturation_note(key, trace, result.summary, rows))
    if "mask_order" in names and trace.mask:  # with the mask off there is no order to compare
        notes.append(lessons.mask_order_note(
            mask_order_difference(x, w_query, w_key, w_value, scale=trace.scale, **common)))
    return notes


HEAD_CHANGES = ("tied query and key", "value is the input")


class HeadChangeError(ValueError):
    """A head change was asked of a model, head or text it cannot run on; the message says what."""


@dataclass
class HeadChange:
    """One head of a model changed, on a text: its pattern and the text's loss beside the intact model's."""

    change: str  # one of HEAD_CHANGES
    layer: int
    head: int
    scores: torch.Tensor  # (T, T) the changed head's scaled scores, before the mask
    weights: torch.Tensor  # (T, T) its attention weights with the change
    original_weights: torch.Tensor  # (T, T) the intact head's
    written: torch.Tensor  # (T, C) what the changed head adds to the residual stream at each position
    loss: float  # the mean next-token cross-entropy over the text with the change
    original_loss: float  # the intact model's
    heads: tuple[int, ...] = ()  # the query heads the change reached: the head itself, or its K/V group's heads

    @property
    def loss_change(self) -> float:
        """loss - original_loss: how much worse (above 0) the model predicts the text with the head changed."""
        return self.loss - self.original_loss

    @property
    def summary(self) -> str:
        return lessons.head_change_summary(self.change, self.layer, self.head, self.original_loss, self.loss)


def _changed_forward(model: GPT, ids: torch.Tensor, layer: int, head: int, change: str | None):
    """The model's forward pass on ``ids`` (1, T) as Block.forward runs it, head ``head`` of ``layer`` changed:
    (logits (T, V), that head's scaled scores (T, T), weights (T, T), what it writes into the stream (T, C))."""
    T = ids.size(1)
    d = model.config.head_size
    x = model.embed(ids)  # (1, T, C)
    found = None
    for index, block in enumerate(model.blocks):
        normed = model.attention_norm(index)(x)  # (1, T, C)
        if index != layer:
            attended, _ = block.attn(normed)
        else:
            attention = block.attn
            q, k, v = attention.project_qkv(normed)  # (1, h, T, d)
            if change == "tied query and key":
                k = k.clone()
                k[:, head] = q[:, head]  # W_K := W_Q (and b_K := b_Q): the head's keys are its queries
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)  # (1, h, T, T)
            weights = F.softmax(scores.masked_fill(~causal_mask(T, T, x.device), float("-inf")), dim=-1)
            joined = (weights @ v).transpose(1, 2).reshape(x.shape)  # (1, T, C)
            features = slice(head * d, (head + 1) * d)
            if change == "value is the input":  # V = X: the head's output is the weighted normed input, as it is
                joined = joined.clone()
                joined[..., features] = 0.0
                written = weights[0, head] @ normed[0]  # (T, C)
                attended = attention.proj(joined) + written
            else:
                written = joined[0][:, features] @ attention.proj.weight[:, features].T  # (T, C)
                attended = attention.proj(joined)
            found = (scores[0, head], weights[0, head], written)
        x = x + attended
        x = x + block.mlp(block.ln_2(x))
    return (model.unembed()(model.final_norm()(x))[0], *found)


def changed_heads(config, head: int) -> tuple[int, ...]:
    """The query heads a change of ``head`` reaches: itself in GPT; in the Llama family every head sharing its K/V
    head (4 query heads over 2 K/V heads: a change of head 3 reaches heads 2 and 3)."""
    if not getattr(config, "is_llama", False):
        return (head,)
    n = config.heads_num // config.kv_heads  # query heads per K/V head
    return tuple(range(head // n * n, (head // n + 1) * n))


def _changed_llama_forward(model, ids: torch.Tensor, layer: int, head: int, change: str | None):
    """_changed_forward for the Llama family, as LlamaBlock.forward runs it, the K/V group of head ``head`` of
    ``layer`` changed: tied, the group's keys are the head's queries before the rotation (W_K := W_Q, b_K := b_Q);
    V = X, each head of the group writes its weights times the normed input into the stream, W_O left out (X is C
    wide, the heads' values d wide: no W_O can read it)."""
    T = ids.size(1)
    attention0 = model.blocks[0].attn
    h, h_kv, d, n = attention0.heads_num, attention0.num_key_value_heads, attention0.head_size, \
        attention0.num_key_value_groups
    group = head // n  # the K/V head the picked head shares with heads group*n .. group*n + n - 1
    x = model.embed(ids)  # (1, T, C)
    cos, sin = rotary_cos_sin(torch.arange(T, device=ids.device), d, model.config.rope_theta, x.dtype)
    found = None
    for index, block in enumerate(model.blocks):
        normed = block.input_layernorm(x)  # (1, T, C)
        if index != layer:
            attended, _ = block.attn(normed, cos, sin)
        else:
            attention = block.attn
            q = attention.q_proj(normed).view(1, T, h, d).transpose(1, 2)  # (1, h, T, d)
            k = attention.k_proj(normed).view(1, T, h_kv, d).transpose(1, 2)  # (1, h_kv, T, d)
            v = attention.v_proj(normed).view(1, T, h_kv, d).transpose(1, 2)  # (1, h_kv, T, d)
            if change == "tied query and key":
                k = k.clone()
                k[:, group] = q[:, head]  # the group's one W_K := the head's W_Q: its keys are the head's queries
            q, k = apply_rotary_pos_emb(q, k, cos, sin)  # both turned at their positions, 0..T-1
            k, v = repeat_kv(k, n), repeat_kv(v, n)  # (1, h, T, d): the group's heads read its K/V head
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)  # (1, h, T, T)
            seen = causal_mask(T, T, x.device, window=model.config.sliding_window)  # Mistral's window where it has one
            weights = F.softmax(scores.masked_fill(~seen, float("-inf")), dim=-1,
                                dtype=torch.float32).to(q.dtype)
            joined = (weights @ v).transpose(1, 2).reshape(1, T, h * d)  # (1, T, h·d)
            features = slice(head * d, (head + 1) * d)
            if change == "value is the input":  # V = X for the group: each of its heads writes weights @ X
                members = slice(group * n * d, (group + 1) * n * d)
                joined = joined.clone()
                joined[..., members] = 0.0
                copies = weights[0, group * n:(group + 1) * n] @ normed[0]  # (n, T, C)
                written = copies[head - group * n]
                attended = attention.o_proj(joined) + copies.sum(0)
            else:
                written = joined[0][:, features] @ attention.o_proj.weight[:, features].T  # (T, C)
                attended = attention.o_proj(joined)
            found = (scores[0, head], weights[0, head], written)
        x = x + attended
        x = x + block.mlp(block.post_attention_layernorm(x))
    return (model.unembed()(model.final_norm()(x))[0], *found)


def change_head(model: GPT, token_ids: torch.Tensor, layer: int, head: int, change: str) -> HeadChange:
    """Run ``model`` on ``token_ids`` (T,) with head ``head`` of ``layer`` changed (one of HEAD_CHANGES); the
    weights are untouched (the change is made in this pass alone)."""
    if change not in HEAD_CHANGES:
        raise HeadChangeError(f"the change must be one of {', '.join(HEAD_CHANGES)}, got {change!r}")
    llama = getattr(model.config, "is_llama", False)
    if not llama and not getattr(model.config, "is_gpt", True):
        raise HeadChangeError("notebook 004's model has no residual stream to copy into; try a GPT checkpoint")
    config = model.config
    if not 0 <= layer < config.layers_num or not 0 <= head < config.heads_num:
        raise HeadChangeError(f"layer {layer}, head {head} is not in this model: it has {config.layers_num} layers "
                              f"of {config.heads_num} heads (numbered from 0)")
    ids = torch.as_tensor(token_ids, dtype=torch.long).view(1, -1).to(next(model.parameters()).device)
    if not 2 <= ids.size(1) <= config.context_size:
        raise HeadChangeError(f"the text must be 2 to {config.context_size} tokens (one to read, one to predict), "
                              f"got {ids.size(1)}")
    with evaluating(model):
        intact, points = run_with_cache(model, ids, {"attn.hook_pattern"})  # every layer's, as the model reads them
        forward = _changed_llama_forward if llama else _changed_forward
        logits, scores, weights, written = forward(model, ids, layer, head, change)
        original_loss = F.cross_entropy(intact.logits[0, :-1].float(), ids[0, 1:])
        loss = F.cross_entropy(logits[:-1].float(), ids[0, 1:])
    return HeadChange(change, layer, head, scores.float().cpu(), weights.float().cpu(),
                      points[f"blocks.{layer}.attn.hook_pattern"][0, head].float().cpu(), written.float().cpu(),
                      float(loss), float(original_loss), changed_heads(config, head))


def tied_query_key(model: GPT, token_ids: torch.Tensor, layer: int, head: int) -> HeadChange:
    """One matrix for Q and K: the head's W_K (and b_K) set to its W_Q. Its scores become symmetric before the mask,
    score(i, j) = score(j, i): a token can no longer look for something other than what it offers."""
    return change_head(model, token_ids, layer, head, "tied query and key")


def value_is_input(model: GPT, token_ids: torch.Tensor, layer: int, head: int) -> HeadChange:
    """No value projection: V = X, the normed input the head reads, and the head's output (its weights times X)
    goes into the stream as it is, in place of W_O's reading of its values. It can only copy what it attends to, not
    choose what of it to pass."""
    return change_head(model, token_ids, layer, head, "value is the input")
