"""The maths of one attention head, stage by stage: X -> Q, K, V -> scores -> scaled -> masked -> weights -> output.

Owns ``trace_head`` and the ``HeadTrace`` it returns (every intermediate tensor plus the switches that made
them) and the labelled matrices each stage shows. Knows nothing about lesson text (lessons.py), where the
weights come from (sources.py), files, Gradio or Plotly. Weights use the ``x @ W`` convention, (C, d_k),
like the notebooks.

    trace_head(torch.randn(6, 3), *(torch.randn(3, 2) for _ in range(3))).weights.shape -> (6, 6)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from playground import checks
from playground.model.gpt import causal_mask
from playground.model.llama import rotate_half

STAGE_KEYS = ("x", "qkv", "scores", "scaled_scores", "masked_scores", "weights", "output")
SWITCHED_STAGES = ("scaled_scores", "masked_scores", "weights", "output")  # the stages the switches can change
DEFAULT_SWITCHES = {"scale": True, "mask": True, "temperature": 1.0, "mask_before_scaling": False}  # trace_head's


class StageMatrix(NamedTuple):
    """A matrix a stage shows: values (rows, cols) with a label per row and column."""

    name: str
    values: torch.Tensor
    row_labels: list[str]
    col_labels: list[str]


@dataclass(eq=False)
class HeadTrace:
    """Every intermediate tensor of one head on one sequence, plus the switches that produced them.

    ``masked_scores`` is always what goes into softmax, whichever order the mask and scaling ran in.
    """

    x: torch.Tensor  # (T, C)
    q: torch.Tensor  # (T, d_k)  what the scores read: turned by each position's angles in a rotary head
    k: torch.Tensor  # (T, d_k)
    v: torch.Tensor  # (T, d_k)
    scores: torch.Tensor  # (T, T)  q @ k.T
    scaled_scores: torch.Tensor  # (T, T)  scores / sqrt(d_k) / temperature
    masked_scores: torch.Tensor  # (T, T)  -inf above the diagonal (and outside a sliding window) when the mask is on
    weights: torch.Tensor  # (T, T)  softmax of each row of masked_scores
    output: torch.Tensor  # (T, d_k)  weights @ v
    tokens: list[str]
    scale: bool = True
    mask: bool = True
    temperature: float = 1.0
    mask_before_scaling: bool = False
    q_before: torch.Tensor | None = None  # (T, d_k) a rotary head's queries before the rotation; None without one
    k_before: torch.Tensor | None = None  # (T, d_k)
    window: int | None = None  # Mistral's sliding window: the mask also hides keys this many or more back

    @property
    def rotary(self) -> bool:
        """Whether positions entered this head as a rotation of q and k (the Llama family), not in x."""
        return self.q_before is not None

    @property
    def length(self) -> int:
        return self.x.size(0)

    @property
    def embedding_dim(self) -> int:
        return self.x.size(1)

    @property
    def head_size(self) -> int:
        return self.q.size(1)

    @property
    def switches(self) -> dict[str, Any]:
        """The switches that made this trace, keyed as trace_head's keywords (compare with DEFAULT_SWITCHES)."""
        return {"scale": self.scale, "mask": self.mask, "temperature": self.temperature,
                "mask_before_scaling": self.mask_before_scaling}

    @property
    def masked(self) -> torch.Tensor:
        """(T, T) True where the score went into softmax as −∞: those weights are exactly 0."""
        return torch.isneginf(self.masked_scores)

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
            names = {"scores": "raw scores", "scaled_scores": "scaled scores" if self.scale else "scores, not scaled",
                     "masked_scores": "masked scores" if self.mask else "scores, no mask",
                     "weights": "attention weights"}
            return [StageMatrix(names[key], getattr(self, key), tokens, tokens)]
        if key == "output":
            return [StageMatrix("output", self.output, tokens, head_features)]
        raise ValueError(f"unknown stage {key!r}; the stages are {', '.join(STAGE_KEYS)}")


def stage_shapes(key: str, length: int, embedding_dim: int, head_size: int) -> list[tuple[int, int]]:
    """The (rows, cols) of each matrix stage ``key`` shows, from the sizes alone (before anything is traced).

        stage_shapes("qkv", 6, 3, 2) -> [(6, 2), (6, 2), (6, 2)]
    """
    T, C, d = length, embedding_dim, head_size
    shapes = {"x": [(T, C)], "qkv": [(T, d)] * 3, "output": [(T, d)]}
    shapes.update({key: [(T, T)] for key in ("scores", "scaled_scores", "masked_scores", "weights")})
    if key not in shapes:
        raise ValueError(f"unknown stage {key!r}; the stages are {', '.join(STAGE_KEYS)}")
    return shapes[key]


def default_tokens(length: int) -> list[str]:
    """Labels t0, t1, ... for ``length`` tokens that have no text."""
    return [f"t{i}" for i in range(length)]


def _check_matrix(name: str, tensor: Any) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(tensor.shape)}")
    if not tensor.is_floating_point():
        raise ValueError(f"{name} must hold floating-point numbers, got {tensor.dtype}")


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
    rotation: tuple[torch.Tensor, torch.Tensor] | None = None,
    window: int | None = None,
) -> HeadTrace:
    """Run one head on x (T, C) with weights (C, d_k) and keep every stage.

    ``rotation``: (cos, sin), each (T, d_k), the angles of each position (model.llama.rotary_cos_sin): q and k are
    turned by them before the scores, as a rotary model (Llama) turns them; q_before and k_before keep them unturned.

    ``window`` (Mistral's sliding window, None: none): the mask hides key j from query i also where i - j >= window,
    as model.llama masks it; with the mask off it goes too.

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
    if rotation is not None and any(tuple(part.shape) != (T, d_k) for part in rotation):
        raise ValueError(f"the rotation's cos and sin must each have shape ({T}, {d_k})")
    if window is not None:
        window = checks.whole_number(window, "the sliding window", 1)
    temperature = checks.real_number(temperature, "temperature")
    if temperature <= 0:
        raise ValueError(f"temperature must be above 0, got {temperature}")
    tokens = default_tokens(T) if tokens is None else [str(t) for t in tokens]
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
        q_before = k_before = None
        if rotation is not None:  # each pair of features (i, i + d/2) turned by its position's angle
            cos, sin = rotation
            q_before, k_before = q, k
            q = q * cos + rotate_half(q) * sin  # (T, d_k)
            k = k * cos + rotate_half(k) * sin  # (T, d_k)
        scores = q @ k.T  # (T, T)
        divisor = (math.sqrt(d_k) if scale else 1.0) * temperature
        scaled_scores = scores / divisor  # (T, T)
        if not mask:
            masked_scores = scaled_scores.clone()
        else:
            hidden = ~causal_mask(T, T, x.device, window)  # (T, T) True above the diagonal, and outside a window
            if mask_before_scaling:
                masked_scores = scores.masked_fill(hidden, float("-inf")) / divisor
            else:
                masked_scores = scaled_scores.masked_fill(hidden, float("-inf"))
        weights = F.softmax(masked_scores, dim=-1)  # (T, T)
        output = weights @ v  # (T, d_k)
    return HeadTrace(
        x=x, q=q, k=k, v=v, scores=scores, scaled_scores=scaled_scores, masked_scores=masked_scores,
        weights=weights, output=output, tokens=tokens, scale=bool(scale), mask=bool(mask),
        temperature=temperature, mask_before_scaling=bool(mask_before_scaling), q_before=q_before, k_before=k_before,
        window=window,
    )
