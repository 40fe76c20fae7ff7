"""One attention head, step by step: the maths behind the Attention tab.

Owns the seven stages a learner steps through (X -> Q, K, V -> scores -> scaled -> masked -> weights ->
output), where a head's weights come from (a checkpoint, a seeded random head, two textbook presets), the
what-if analyses the tab prints, CSV/.npy export and turning typed text into token IDs.
Knows nothing about Gradio, Plotly or figures: every function takes and returns tensors, numbers, strings
and plain dataclasses. Weight matrices use the ``x @ W`` convention, (C, d_k), like the notebooks.

Worked example: ``journey_preset().trace()`` traces "Your journey starts with one step" (T 6, C 3, d_k 2);
its ``output`` row 0 is [-0.4519, 0.2216], the book's CausalAttention numbers.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from playground.model import GPT, causal_mask
from playground.tokenizer import CharTokenizer, UnknownCharacter, UnknownCharacterError, escape_char

# --------------------------------------------------------------------------- the trace

class Stage(NamedTuple):
    """One step of the walk-through; ``key`` names the HeadTrace field(s) it shows."""

    key: str
    title: str
    formula: str
    explanation: str


class StageMatrix(NamedTuple):
    """A matrix the tab can draw or export: values (rows, cols) with a label per row and column."""

    name: str
    values: torch.Tensor
    row_labels: list[str]
    col_labels: list[str]


STAGE_KEYS = ("x", "qkv", "scores", "scaled_scores", "masked_scores", "weights", "output")


@dataclass(eq=False)
class HeadTrace:
    """Every intermediate tensor of one head on one sequence, plus the switches that produced them.

    ``masked_scores`` is always what goes into softmax, whichever order the mask and scaling ran in.
    """

    x: torch.Tensor  # (T, C)
    q: torch.Tensor  # (T, d_k)
    k: torch.Tensor  # (T, d_k)
    v: torch.Tensor  # (T, d_k)
    scores: torch.Tensor  # (T, T)  q @ k.T
    scaled_scores: torch.Tensor  # (T, T)  scores / sqrt(d_k) / temperature
    masked_scores: torch.Tensor  # (T, T)  -inf above the diagonal when the mask is on
    weights: torch.Tensor  # (T, T)  softmax of each row of masked_scores
    output: torch.Tensor  # (T, d_k)  weights @ v
    tokens: list[str]
    scale: bool = True
    mask: bool = True
    temperature: float = 1.0
    mask_before_scaling: bool = False

    @property
    def length(self) -> int:
        return self.x.size(0)

    @property
    def embedding_dim(self) -> int:
        return self.x.size(1)

    @property
    def head_size(self) -> int:
        return self.q.size(1)

    def stages(self) -> list[Stage]:
        """The seven steps in order, with formulas and explanations that reflect this trace's switches."""
        T, C, d = self.length, self.embedding_dim, self.head_size
        divisor_text = f"√{d} = {math.sqrt(d):.3f}"
        temperature_text = f" ÷ τ ({self.temperature:g})" if self.temperature != 1.0 else ""
        if self.scale:
            scale_formula = f"S / √d_k  (√d_k = {divisor_text}){temperature_text}"
            scale_text = (
                "Dividing by √d_k keeps the scores from growing with the head size; without it softmax "
                "saturates and puts nearly all the weight on one token. The pattern in each row stays the "
                "same, only its spread shrinks."
            )
        else:
            scale_formula = f"S  (scaling is off){temperature_text}"
            scale_text = (
                "Scaling is off, so this step leaves the raw scores as they are. Turn it back on and watch "
                "the softmax rows in step 6 become less peaked."
            )
        if self.temperature != 1.0:
            scale_text += (
                f" The temperature τ = {self.temperature:g} divides the scores too: above 1 flattens the "
                "weights, below 1 sharpens them."
            )
        if self.mask and self.mask_before_scaling:
            scale_text += (
                " Here the mask was applied to the raw scores first; −∞ divided by any positive number is "
                "still −∞, so the result is identical."
            )
        if self.mask:
            mask_formula = "S_ij = −∞ wherever j > i (above the diagonal)"
            mask_text = (
                "Each token may look only at itself and the tokens before it, so every score above the "
                "diagonal becomes −∞. After softmax those entries are exactly 0: nothing flows back from the "
                "future. The diagonal is never masked, so every row keeps at least one score."
            )
        else:
            mask_formula = "no mask: every token sees every token"
            mask_text = (
                "The mask is off, so each token also sees the tokens after it. A language model trained "
                "like this could cheat by reading the very token it should predict; the mask-leak check "
                "shows which outputs now depend on the future."
            )
        return [
            Stage(
                "x", "1. Input X", f"X  ({T} × {C}: one row per token)",
                "Each row is one token's vector: the numbers this head starts from. For a checkpoint it is "
                "the LayerNorm'd input of the chosen layer, not the raw embedding. Tokens with similar rows "
                "will get similar queries and keys.",
            ),
            Stage(
                "qkv", "2. Queries, keys and values",
                f"Q = X·W_q,  K = X·W_k,  V = X·W_v  (each {T} × {d})",
                "The same three weight matrices are applied to every token, so row i of Q, K and V belongs "
                "to token i. A query says what the token is looking for, a key what it offers, and a value "
                "what it passes on when attended to.",
            ),
            Stage(
                "scores", "3. Raw scores", f"S = Q·Kᵀ  ({T} × {T})",
                "Entry (i, j) is the dot product of token i's query with token j's key: how well token j "
                "matches what token i is looking for. Read it row by row; each row belongs to one query "
                "token, and its largest entries will become its largest weights.",
            ),
            Stage("scaled_scores", "4. Scaled scores", scale_formula, scale_text),
            Stage("masked_scores", "5. Causal mask", mask_formula, mask_text),
            Stage(
                "weights", "6. Attention weights", "A = softmax of each row of S  (each row sums to 1)",
                "Softmax turns each row of scores into positive weights that sum to 1: how much token i "
                "takes from each token j. A row with one weight near 1 is sharp (saturated); a flat row "
                "averages the tokens it sees.",
            ),
            Stage(
                "output", "7. Output", f"out = A·V  ({T} × {d})",
                "Each output row is a weighted average of the value rows, using that token's attention "
                "weights. A token that put most of its weight on one token gets an output close to that "
                "token's value. In the full model the heads' outputs are joined and projected back to C "
                "features.",
            ),
        ]

    def matrices(self, key: str) -> list[StageMatrix]:
        """The matrices a stage shows, labelled: "qkv" gives Q, K and V; every other key gives one."""
        tokens = list(self.tokens)
        features = [f"x{j}" for j in range(self.embedding_dim)]
        head_features = [f"d{j}" for j in range(self.head_size)]
        if key == "x":
            return [StageMatrix("X", self.x, tokens, features)]
        if key == "qkv":
            return [StageMatrix(name, tensor, tokens, head_features)
                    for name, tensor in (("Q", self.q), ("K", self.k), ("V", self.v))]
        if key in ("scores", "scaled_scores", "masked_scores", "weights"):
            names = {"scores": "raw scores", "scaled_scores": "scaled scores",
                     "masked_scores": "masked scores", "weights": "attention weights"}
            return [StageMatrix(names[key], getattr(self, key), tokens, tokens)]
        if key == "output":
            return [StageMatrix("output", self.output, tokens, head_features)]
        raise ValueError(f"unknown stage {key!r}; the stages are {', '.join(STAGE_KEYS)}")


def _check_matrix(name: str, tensor: Any) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(tensor.shape)}")
    if not tensor.is_floating_point():
        raise ValueError(f"{name} must hold floating-point numbers, got {tensor.dtype}")


def _default_tokens(length: int) -> list[str]:
    return [f"t{i}" for i in range(length)]


def trace_head(
    x: torch.Tensor,
    w_query: torch.Tensor,
    w_key: torch.Tensor,
    w_value: torch.Tensor,
    *,
    tokens: list[str] | None = None,
    scale: bool = True,
    mask: bool = True,
    temperature: float = 1.0,
    mask_before_scaling: bool = False,
    b_query: torch.Tensor | None = None,
    b_key: torch.Tensor | None = None,
    b_value: torch.Tensor | None = None,
) -> HeadTrace:
    """Run one head on x (T, C) with weights (C, d_k) and keep every stage.

    ``temperature`` divides the (scaled) scores; ``mask_before_scaling`` puts −∞ into the raw scores and
    then scales, which gives the same weights because −∞ / √d_k is −∞.
    """
    _check_matrix("x", x)
    T, C = x.shape
    if T == 0:
        raise ValueError("x has no tokens (0 rows); a head needs at least one")
    for name, w in (("w_query", w_query), ("w_key", w_key), ("w_value", w_value)):
        _check_matrix(name, w)
        if w.size(0) != C:
            raise ValueError(f"{name} has shape {tuple(w.shape)} but x has {C} features; it must be ({C}, d_k)")
        if w.shape != w_query.shape:
            raise ValueError(
                f"{name} has shape {tuple(w.shape)} but w_query has {tuple(w_query.shape)}; all three must match"
            )
    d_k = w_query.size(1)
    if d_k == 0:
        raise ValueError("the head size d_k must be positive, got 0")
    for name, b in (("b_query", b_query), ("b_key", b_key), ("b_value", b_value)):
        if b is not None and tuple(b.shape) != (d_k,):
            raise ValueError(f"{name} must have shape ({d_k},), got {tuple(b.shape)}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number, got {temperature!r}")
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"temperature must be a positive finite number, got {temperature}")
    tokens = _default_tokens(T) if tokens is None else [str(t) for t in tokens]
    if len(tokens) != T:
        raise ValueError(f"got {len(tokens)} token labels for {T} tokens")

    with torch.no_grad():
        x = x.detach()
        q = x @ w_query  # (T, d_k)
        k = x @ w_key  # (T, d_k)
        v = x @ w_value  # (T, d_k)
        if b_query is not None:
            q = q + b_query
        if b_key is not None:
            k = k + b_key
        if b_value is not None:
            v = v + b_value
        scores = q @ k.T  # (T, T)
        divisor = (math.sqrt(d_k) if scale else 1.0) * float(temperature)
        scaled_scores = scores / divisor  # (T, T)
        if not mask:
            masked_scores = scaled_scores.clone()
        else:
            hidden = ~causal_mask(T, T, x.device)  # (T, T) True above the diagonal
            if mask_before_scaling:
                masked_scores = scores.masked_fill(hidden, float("-inf")) / divisor
            else:
                masked_scores = scaled_scores.masked_fill(hidden, float("-inf"))
        weights = F.softmax(masked_scores, dim=-1)  # (T, T)
        output = weights @ v  # (T, d_k)
    return HeadTrace(
        x=x, q=q, k=k, v=v, scores=scores, scaled_scores=scaled_scores, masked_scores=masked_scores,
        weights=weights, output=output, tokens=tokens, scale=bool(scale), mask=bool(mask),
        temperature=float(temperature), mask_before_scaling=bool(mask_before_scaling),
    )


@dataclass(eq=False)
class HeadInputs:
    """What trace_head needs: x (T, C), weights (C, d_k), optional biases (d_k,) and token labels."""

    x: torch.Tensor  # (T, C)
    w_query: torch.Tensor  # (C, d_k)
    w_key: torch.Tensor  # (C, d_k)
    w_value: torch.Tensor  # (C, d_k)
    tokens: list[str]
    b_query: torch.Tensor | None = None  # (d_k,)
    b_key: torch.Tensor | None = None
    b_value: torch.Tensor | None = None
    description: str = ""

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for trace_head, mask_leak and mask_order_difference."""
        return {
            "x": self.x, "w_query": self.w_query, "w_key": self.w_key, "w_value": self.w_value,
            "tokens": list(self.tokens), "b_query": self.b_query, "b_key": self.b_key, "b_value": self.b_value,
        }

    def trace(self, **switches: Any) -> HeadTrace:
        """trace_head on these inputs; switches are scale, mask, temperature, mask_before_scaling."""
        return trace_head(**self.as_kwargs(), **switches)


# --------------------------------------------------------------------------- where the weights come from

def _whole_number(name: str, value: Any) -> int:
    """An int from an int or a whole float (UI number boxes send 2.0); anything else is an error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{name} must be a whole number, got {value}")
    return int(value)


def _check_index(name: str, value: Any, count: int, what: str) -> int:
    value = _whole_number(name, value)
    if not 0 <= value < count:
        raise ValueError(f"{name} {value} is out of range: this model has {count} {what} (0-{count - 1})")
    return value


def checkpoint_head_inputs(model: GPT, token_ids: torch.Tensor, layer: int, head: int,
                           tokens: list[str] | None = None) -> HeadInputs:
    """The real input of ``layer`` and head ``head``'s query/key/value weights (and biases) for token_ids.

    token_ids is a 1-D LongTensor of at most context_size IDs; tensors come back on the CPU in float32.
    """
    config = model.config
    layer = _check_index("layer", layer, config.layers_num, "layers")
    head = _check_index("head", head, config.heads_num, "heads per layer")
    if not isinstance(token_ids, torch.Tensor) or token_ids.dim() != 1 or token_ids.is_floating_point():
        raise ValueError("token_ids must be a 1-D tensor of integer token IDs")
    T = token_ids.numel()
    if T == 0:
        raise ValueError("Type some text first: there are no tokens to trace")
    if T > config.context_size:
        raise ValueError(
            f"the sequence has {T} tokens but this model's context_size is {config.context_size}; "
            "shorten it (prepare_text truncates for you)"
        )
    low, high = int(token_ids.min()), int(token_ids.max())
    if low < 0 or high >= config.vocabulary_size:
        bad = low if low < 0 else high
        raise ValueError(f"token id {bad} is outside this model's vocabulary (0-{config.vocabulary_size - 1})")
    if tokens is None:
        tokens = [str(i) for i in token_ids.tolist()]

    parameter = next(model.parameters())
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            result = model(token_ids.to(parameter.device)[None], return_attention=True)
    finally:
        model.train(was_training)
    x = result.attention_inputs[layer][0]  # (T, C)

    C, d = config.embedding_dim, config.head_size
    qkv = model.blocks[layer].attn.qkv
    weight = qkv.weight.detach()  # (3C, C): rows are output features q | k | v

    def head_rows(part: int) -> slice:  # part 0 query, 1 key, 2 value
        return slice(part * C + head * d, part * C + (head + 1) * d)

    def to_cpu(tensor: torch.Tensor) -> torch.Tensor:
        return tensor.detach().to("cpu", torch.float32)

    w_query, w_key, w_value = (to_cpu(weight[head_rows(p)].T) for p in range(3))  # (C, d) each
    b_query = b_key = b_value = None
    if qkv.bias is not None:
        b_query, b_key, b_value = (to_cpu(qkv.bias[head_rows(p)]) for p in range(3))  # (d,) each
    return HeadInputs(
        to_cpu(x), w_query, w_key, w_value, list(tokens), b_query, b_key, b_value,
        description=f"layer {layer}, head {head} of the model, on {T} tokens",
    )


def trace_checkpoint_head(model: GPT, token_ids: torch.Tensor, layer: int, head: int,
                          tokens: list[str] | None = None, **switches: Any) -> HeadTrace:
    """Trace a trained head: checkpoint_head_inputs(...).trace(**switches)."""
    return checkpoint_head_inputs(model, token_ids, layer, head, tokens).trace(**switches)


def _check_size(name: str, value: Any) -> int:
    value = _whole_number(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return value


def random_head(text_or_length: str | int, embedding_dim: int, head_size: int, seed: int) -> HeadInputs:
    """Random embeddings and bias-free projections from ``torch.Generator().manual_seed(seed)``.

    A string gives one token per character ("cat" -> 3 tokens "c", "a", "t"); a number gives that many
    tokens t0, t1, .... Drawn in the order x (T, C), W_q, W_k, W_v (C, d_k); weights are N(0, 1/C) so q and k
    entries are about N(0, 1) and raw scores spread like √d_k, which is what scaling undoes.
    """
    if isinstance(text_or_length, str):
        if not text_or_length:
            raise ValueError("Type some text first")
        tokens = [escape_char(c) for c in text_or_length]
    else:
        tokens = _default_tokens(_check_size("the number of tokens", text_or_length))
    embedding_dim = _check_size("embedding_dim", embedding_dim)
    head_size = _check_size("head_size", head_size)
    seed = _whole_number("seed", seed)
    generator = torch.Generator().manual_seed(seed)
    T, C, d = len(tokens), embedding_dim, head_size
    x = torch.randn(T, C, generator=generator)  # (T, C)
    w_query, w_key, w_value = (torch.randn(C, d, generator=generator) / math.sqrt(C) for _ in range(3))
    return HeadInputs(x, w_query, w_key, w_value, tokens,
                      description=f"a random head (seed {seed}): {T} tokens, C {C}, d_k {d}")


JOURNEY_TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
JOURNEY_EMBEDDINGS = [
    [0.43, 0.15, 0.89],  # Your
    [0.55, 0.87, 0.66],  # journey
    [0.57, 0.85, 0.64],  # starts
    [0.22, 0.58, 0.33],  # with
    [0.77, 0.25, 0.10],  # one
    [0.05, 0.80, 0.55],  # step
]


def journey_preset(seed: int = 123) -> HeadInputs:
    """The book's "Your journey starts with one step": six 3-d embeddings, d_out 2.

    ``torch.manual_seed(seed)`` then ``nn.Linear(3, 2, bias=False)`` for query, key, value in that order
    (W = linear.weight.T). Seed 123 is the book's CausalAttention: with the mask on, output row 0 is
    [-0.4519, 0.2216]. Seed 789 is the book's SelfAttention_v2: with the mask off, row 0 is [-0.0739, 0.0713].
    The global RNG state is restored afterwards.
    """
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        query, key, value = (nn.Linear(3, 2, bias=False) for _ in range(3))
    finally:
        torch.random.set_rng_state(state)
    x = torch.tensor(JOURNEY_EMBEDDINGS)  # (6, 3)
    w_query, w_key, w_value = (layer.weight.detach().T.contiguous() for layer in (query, key, value))  # (3, 2)
    return HeadInputs(x, w_query, w_key, w_value, list(JOURNEY_TOKENS),
                      description=f'"Your journey starts with one step", 3-d embeddings, d_out 2, seed {seed}')


def lab_preset(*, batch_size: int = 2, sequence_length: int = 4, embedding_dim: int = 8,
               head_size: int = 8) -> HeadInputs:
    """The lab notebook's head: batch element 0 of ``torch.randn(2, 4, 8)`` after ``torch.manual_seed(1337)``.

    Then ``nn.Linear(8, 8, bias=False)`` for key, query, value in that order (W = linear.weight.T); tokens
    t0..t3. The sizes are parameters so the same draw order gives other notebooks' heads: batch_size 4,
    sequence_length 8, embedding_dim 32, head_size 16 is "Let's build GPT" (its first version does not scale).
    The global RNG state is restored afterwards.
    """
    batch_size, sequence_length, embedding_dim, head_size = (
        _check_size(name, value) for name, value in (("batch_size", batch_size), ("sequence_length", sequence_length),
                                                    ("embedding_dim", embedding_dim), ("head_size", head_size))
    )
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(1337)
        x = torch.randn(batch_size, sequence_length, embedding_dim)  # (B, T, C)
        key, query, value = (nn.Linear(embedding_dim, head_size, bias=False) for _ in range(3))
    finally:
        torch.random.set_rng_state(state)
    w_query, w_key, w_value = (layer.weight.detach().T.contiguous() for layer in (query, key, value))  # (C, d)
    return HeadInputs(x[0], w_query, w_key, w_value, _default_tokens(sequence_length),
                      description=(f"seed 1337, batch element 0 of randn({batch_size}, {sequence_length}, "
                                   f"{embedding_dim}), head_size {head_size}"))


@dataclass(frozen=True)
class Preset:
    """A named set of head inputs; call it to build them."""

    build: Callable[[], HeadInputs]
    description: str

    def __call__(self) -> HeadInputs:
        return self.build()


PRESETS: dict[str, Preset] = {
    "journey": Preset(journey_preset, '"Your journey starts with one step", seed 123 (the book\'s CausalAttention)'),
    "journey_v2": Preset(lambda: journey_preset(789),
                         '"Your journey starts with one step", seed 789 (the book\'s SelfAttention_v2)'),
    "lab": Preset(lab_preset, "Four random 8-d tokens, seed 1337, an 8-wide head (the lab notebook)"),
}


# --------------------------------------------------------------------------- what-if analyses

def _name_tokens(items: list[tuple[int, str]], limit: int = 8) -> str:
    named = ", ".join(f"{token!r} ({position})" for position, token in items[:limit])
    return named + (f" and {len(items) - limit} more" if len(items) > limit else "")


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
    last = f"{trace.tokens[-1]!r} ({T - 1})"
    if T == 1:
        summary = "There is only one token, so there is no future to leak from."
    elif affected:
        how_many = f"all {T - 1}" if len(affected) == T - 1 else f"{len(affected)} of the {T - 1}"
        summary = (f"With the mask off, {how_many} earlier tokens change their output when the last token {last} "
                   f"changes: {_name_tokens(affected)}. They are reading the future.")
    elif mask:
        summary = (f"With the mask on, no earlier token's output changes when the last token {last} changes: "
                   "each token sees only itself and the tokens before it.")
    else:
        summary = (f"No earlier token's output changed when the last token {last} changed: their weights on "
                   "later tokens are (numerically) zero.")
    return MaskLeak(
        mask=bool(mask),
        future_weight=future_weights.sum(dim=1).tolist(),
        max_future_weight=future_weights.amax(dim=1).tolist(),
        output_change=output_change.tolist(),
        affected=affected,
        summary=summary,
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
    summary = (
        f"Without scaling the rows average {entropy_unscaled.mean().item():.3f} nats of entropy and a largest "
        f"weight of {max_unscaled.mean().item():.3f}; with scaling {entropy_scaled.mean().item():.3f} nats and "
        f"{max_scaled.mean().item():.3f}. Lower entropy and a largest weight near 1 mean softmax is saturating."
    )
    return Saturation(
        entropy_scaled=entropy_scaled.tolist(),
        entropy_unscaled=entropy_unscaled.tolist(),
        max_weight_scaled=max_scaled.tolist(),
        max_weight_unscaled=max_unscaled.tolist(),
        max_entropy=torch.log(visible.to(scaled.dtype)).tolist(),
        summary=summary,
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
    position = _whole_number("the query position", position)
    if not 0 <= position < T:
        raise ValueError(f"query position {position} is out of range: the text has {T} tokens (0-{T - 1})")
    scores = trace.masked_scores[position]  # (T,)
    weights = trace.weights[position]  # (T,)
    visible = [j for j in range(T) if scores[j].item() != float("-inf")]
    mixes = sorted((Mix(j, trace.tokens[j], weights[j].item()) for j in visible),
                   key=lambda mix: (-mix.weight, mix.position))
    values = trace.v[[mix.position for mix in mixes]]  # (n, d_k)
    return QueryRow(
        position=position,
        token=trace.tokens[position],
        scores=scores.tolist(),
        weights=weights.tolist(),
        mixes=mixes,
        values=values,
        output=trace.output[position].tolist(),
    )


# --------------------------------------------------------------------------- export

_SPREADSHEET_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _safe_label(label: Any) -> str:
    text = str(label)
    return "'" + text if text.startswith(_SPREADSHEET_FORMULA_STARTS) else text


def to_csv(tensor: torch.Tensor, row_labels: list[str], col_labels: list[str]) -> str:
    """A labelled CSV of a 2-D tensor: header "", col labels; then one row per row label.

    Numbers use the shortest form that reads back exactly ("-inf" for masked scores). Labels that a
    spreadsheet would run as a formula (starting with = + - @) get a leading apostrophe.
    """
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2:
        raise ValueError("to_csv needs a 2-D tensor")
    rows, cols = tensor.shape
    if len(row_labels) != rows or len(col_labels) != cols:
        raise ValueError(
            f"the tensor is {rows} × {cols} but got {len(row_labels)} row and {len(col_labels)} column labels"
        )
    values = tensor.detach().cpu().numpy()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["", *(_safe_label(label) for label in col_labels)])
    for label, row in zip(row_labels, values):
        writer.writerow([_safe_label(label), *(str(value) for value in row)])
    return buffer.getvalue()


def to_npy_bytes(tensor: torch.Tensor) -> bytes:
    """The tensor as the bytes of a .npy file (numpy.load reads it back; no pickle)."""
    buffer = io.BytesIO()
    np.save(buffer, tensor.detach().cpu().numpy(), allow_pickle=False)
    return buffer.getvalue()


# --------------------------------------------------------------------------- typed text -> tokens

@dataclass
class PreparedText:
    """Typed text ready to trace."""

    ids: torch.Tensor  # (T,) token IDs, T <= context_size
    tokens: list[str]  # one readable label per token ("␣" for a space)
    dropped_count: int  # characters cut off the end to fit context_size
    notices: list[str] = field(default_factory=list)  # sentences to show the learner
    unknown: list[UnknownCharacter] = field(default_factory=list)  # unknown characters in the dropped tail


def prepare_text(text: str, tokenizer: CharTokenizer, context_size: int) -> PreparedText:
    """Encode text for tracing, keeping its first context_size characters.

    "hello world" with context_size 5 -> "hello" and the notice "6 characters were dropped (context_size is 5)".
    Raises ValueError("Type some text first") for empty text and UnknownCharacterError (naming each
    character and its position) for characters outside the vocabulary in the part that is kept.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a string, got {type(text).__name__}")
    if not text:
        raise ValueError("Type some text first")
    context_size = _check_size("context_size", context_size)
    kept, tail = text[:context_size], text[context_size:]
    ids = tokenizer.encode(kept)  # raises UnknownCharacterError; positions are positions in text
    notices = []
    unknown = [UnknownCharacter(context_size + u.position, u.character) for u in tokenizer.find_unknown(tail)]
    if tail:
        was = "character was" if len(tail) == 1 else "characters were"
        notice = f"{len(tail)} {was} dropped (context_size is {context_size})"
        if unknown:
            notice += f"; they included {len(unknown)} not in the vocabulary, which did not matter"
        notices.append(notice)
    return PreparedText(ids, [escape_char(c) for c in kept], len(tail), notices, unknown)


__all__ = [
    "PRESETS",
    "STAGE_KEYS",
    "HeadInputs",
    "HeadTrace",
    "MaskLeak",
    "Mix",
    "PreparedText",
    "Preset",
    "QueryRow",
    "Saturation",
    "Stage",
    "StageMatrix",
    "UnknownCharacterError",
    "checkpoint_head_inputs",
    "journey_preset",
    "lab_preset",
    "mask_leak",
    "mask_order_difference",
    "prepare_text",
    "query_row",
    "random_head",
    "row_entropy",
    "saturation",
    "to_csv",
    "to_npy_bytes",
    "trace_checkpoint_head",
    "trace_head",
]
