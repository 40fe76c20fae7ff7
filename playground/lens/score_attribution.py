"""Why a head looked where it did: one head's score of one key by one query split by where the query vector and
the key vector came from in the residual stream (the embeddings, each earlier head and MLP, the biases), so a view
can say which earlier heads made this query look for that key ("why more than one layer").

    score_attribution(model, ids, layer=3, head=1, query_position=63, key_position=62)
        -> ScoreAttribution: values (query parts, key parts) summing to the model's own scaled score
    score_parts(model, ids, layer, head)                     every position's parts at once, for one head
    attribution.largest_pairs(3)                             the pairs that did most, largest first
    head_to_visit(pair)                                      the earlier head (and position) a view goes to

The layer's norm scale is frozen at each position, as circuits.py's logit attribution freezes the final one; the
norm's centring is linear, so it distributes over the parts. With rotary positions (the Llama family) each part's
query or key is turned at its position, as the model turns the whole: the rotation is linear too, and a grouped head
reads the K/V head it shares. The maths only; no figures, no UI.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from playground.lens import family
from playground.lens.circuits import _check_head, _check_position, _checked_ids, _head_projections, _is_notebook
from playground.model.base import run_with_cache
from playground.model.modes import evaluating


@dataclass(frozen=True)
class ScorePair:
    """One cell of a score's split: the query's part ``query_part`` read by the key's part ``key_part``."""

    query_part: str
    key_part: str
    value: float

    @property
    def label(self) -> str:
        """"L1 H0 -> token embedding": what the query's part looked for in what the key's part wrote."""
        return f"{self.query_part} -> {self.key_part}"


@dataclass(frozen=True)
class HeadVisit:
    """Where a view goes to see the earlier head behind a pair: that head at the position whose vector it wrote into
    (the query's position on the query's side, the key's on the key's)."""

    layer: int
    head: int
    position: int
    side: str  # "query" or "key"


@dataclass(frozen=True)
class ScoreAttribution:
    """One head's scaled score (before the mask) of one key by one query, split by where the query vector and the
    key vector came from in the stream: ``values[i, j]`` is query part ``query_names[i]`` dotted with key part
    ``key_names[j]``, over sqrt(head_size); ``values.sum()`` is ``score``.

    The parts are the embeddings, every head and MLP before ``layer`` (and their output biases), then the layer's
    own biases (its norm's bias through W_Q or W_K, plus b_Q or b_K): "L2 query bias", "L2 key bias", present only
    where the model has biases.
    """

    layer: int
    head: int
    query_position: int
    key_position: int
    score: float  # the model's own scaled score, from its forward pass
    query_names: list[str]
    key_names: list[str]
    kinds: list[str]  # per stream part (both sides alike, less the layer's own bias), as LogitAttribution's
    values: torch.Tensor  # (query parts, key parts) float32
    query_scale: float  # the layer's norm's sqrt(var + eps) at the query's position, frozen (1.0: no norm)
    key_scale: float

    @property
    def query_totals(self) -> torch.Tensor:
        """(query parts,): each query part's share of the score, over every key part."""
        return self.values.sum(dim=1)

    @property
    def key_totals(self) -> torch.Tensor:
        """(key parts,): each key part's share of the score, over every query part."""
        return self.values.sum(dim=0)

    def largest_pairs(self, count: int = 5) -> list[ScorePair]:
        """The ``count`` pairs that moved the score most (by size, either sign), largest first."""
        flat = self.values.reshape(-1)
        top = torch.topk(flat.abs(), min(count, flat.numel())).indices
        columns = self.values.size(1)
        return [ScorePair(self.query_names[int(i) // columns], self.key_names[int(i) % columns], float(flat[i]))
                for i in top]

    def head_to_visit(self, pair: ScorePair) -> HeadVisit | None:
        """The earlier head a view goes to for ``pair``: the key's part where it is a head (what a key offers is
        what composition changes most often, as an induction head's previous-token head), else the query's; None
        where neither part is a head (embeddings, MLPs, biases)."""
        for name, side, position in ((pair.key_part, "key", self.key_position),
                                     (pair.query_part, "query", self.query_position)):
            found = parse_head_name(name)
            if found is not None:
                return HeadVisit(*found, position, side)
        return None


def parse_head_name(name: str) -> tuple[int, int] | None:
    """"L1 H0" -> (1, 0); any other part's name ("L1 MLP", "token embedding") -> None."""
    words = name.split()
    if len(words) == 2 and words[0][:1] == "L" and words[1][:1] == "H" and words[0][1:].isdigit() \
            and words[1][1:].isdigit():
        return int(words[0][1:]), int(words[1][1:])
    return None


def _parts_before(model, ids: torch.Tensor, layer: int) -> tuple[list[str], list[str], torch.Tensor]:
    """Every part's output at every position of the stream that layer ``layer`` reads, (parts, T, C) (family.py's
    stream_parts: the embeddings, then each earlier block's heads, its projection's bias and its MLP). Notebook
    004's one layer reads the embeddings alone."""
    ids = ids.view(1, -1)  # (1, T)
    if _is_notebook(model):
        positions = torch.arange(ids.size(1), device=ids.device)
        return (["token embedding", "position embedding"], ["embedding", "embedding"],
                torch.stack([model.token_emb(ids[0]), model.pos_emb(positions)]))
    names, kinds, parts, _ = family.stream_parts(model, ids, below=layer)
    return names, kinds, parts


def _own_scores(model, ids: torch.Tensor, layer: int, head: int) -> torch.Tensor:
    """(T, T): the scaled scores (before the mask) the model's own forward pass gives: its attention's q and k at
    the layer's input."""
    d = model.config.head_size
    # the q and k the scores are taken from, through the named points (any family; notebook 004's each on its own
    # slice of the features): turned by their positions in a rotary model
    names = ("attn.hook_rot_q", "attn.hook_rot_k") if family.is_rotary(model) else ("attn.hook_q", "attn.hook_k")
    _, points = run_with_cache(model, ids.view(1, -1), set(names), {layer})
    q, k = (points[f"blocks.{layer}.{name}"] for name in names)  # (1, h, T, d), (1, h_kv, T, d)
    shared = head * k.size(1) // q.size(1)  # the K/V head this query head reads (itself without grouping)
    return (q[0, head] @ k[0, shared].T) / math.sqrt(d)  # (T, T)


@dataclass(frozen=True)
class ScoreParts:
    """Every position's query and key split into the stream's parts, for one head: ``queries[i, t]`` is part
    ``query_names[i]``'s piece of the query vector at position t (already over the fourth root of d on each side,
    so a query piece dotted with a key piece is its share of the scaled score). ``scores`` (T, T) are the model's."""

    query_names: list[str]
    key_names: list[str]
    kinds: list[str]
    queries: torch.Tensor  # (query parts, T, d) float64
    keys: torch.Tensor  # (key parts, T, d) float64
    scales: torch.Tensor  # (T,): the layer's norm's frozen scale at each position (ones: no norm)
    scores: torch.Tensor  # (T, T) the model's own scaled scores, before the mask

    def pair(self, query: int, key: int) -> torch.Tensor:
        """(query parts, key parts) float64: the split of the score key ``key`` gets from query ``query``."""
        return self.queries[:, query] @ self.keys[:, key].T


def score_parts(model, token_ids: torch.Tensor, layer: int, head: int,
                positions: Sequence[int] | None = None) -> ScoreParts:
    """score_attribution's split at every query and key position at once (one pass through the blocks below
    ``layer``); ScoreParts.pair(query, key) is one cell's table. ``positions``: only those (in that order; the
    queries', keys', scales' and scores' positions are then their indices in it), so one cell of a long text holds
    two positions' parts in float64, not all of them."""
    ids = _checked_ids(model, token_ids)
    _check_head(model, layer, head)
    d = model.config.head_size
    chosen = slice(None) if positions is None else torch.as_tensor(list(positions), dtype=torch.long)
    with evaluating(model):
        names, kinds, parts = _parts_before(model, ids, layer)  # (P, T, C)
        parts = parts[:, chosen].double()  # (P, T or len(positions), C)
        w_query, w_key, _, b_query, b_key, _ = _head_projections(model, layer, head)
        if _is_notebook(model):
            normed, norm_bias = parts, None
            scales = torch.ones(parts.size(1), dtype=torch.float64, device=parts.device)
        else:
            norm = family.attention_norm(model, layer)
            scales = family.frozen_scale(norm, parts.sum(dim=0))  # (T,)
            gain = norm.weight.double() if norm.weight is not None else 1.0
            if family.centres(model):  # LayerNorm's centring; RMSNorm has none
                parts = parts - parts.mean(dim=-1, keepdim=True)
            normed = parts / scales[None, :, None] * gain  # (P, T, C)
            bias = family.norm_bias(norm)
            norm_bias = bias.double() if bias is not None else None
        # each part's q or k turned at its own position (a rotary model): the rotation is linear, so the turned
        # parts still sum to the turned vector
        where = torch.arange(ids.numel(), device=parts.device)[chosen]
        root = d ** 0.25  # split sqrt(d) between the two sides
        sides = []
        for weight, bias, what in ((w_query, b_query, "query"), (w_key, b_key, "key")):
            pieces, side_names = normed @ weight.double() / root, list(names)  # (P, T, d)
            if norm_bias is not None or bias is not None:  # the layer's own: the norm's bias through W, W's bias
                own = torch.zeros(d, dtype=torch.float64, device=parts.device)
                own = own + (norm_bias @ weight.double() if norm_bias is not None else 0.0)
                own = own + (bias.double() if bias is not None else 0.0)
                pieces = torch.cat([pieces, (own / root).expand(1, parts.size(1), d)])
                side_names.append(f"L{layer} {what} bias")
            sides.append((family.rotate(model, pieces, where), side_names))
        scores = _own_scores(model, ids, layer, head)
        if positions is not None:
            scores = scores[chosen][:, chosen]
    (queries, query_names), (keys, key_names) = sides
    return ScoreParts(query_names, key_names, kinds, queries, keys, scales.cpu(), scores.float().cpu())


def score_attribution(model, token_ids: torch.Tensor, layer: int, head: int, query_position: int,
                      key_position: int) -> ScoreAttribution:
    """Why head ``head`` of ``layer`` gave key ``key_position`` the score it did from query ``query_position``: the
    scaled score q·k / sqrt(d) (before the mask) split into (query parts, key parts) by where each vector came from.

    The layer's LayerNorm is affine once its scale is frozen at each position (as logit_attribution freezes the
    final one): a part p reaches the normed input as (p - mean(p)) / scale * gain (the centring is linear, so it
    distributes over the parts), and the norm's bias is a part of its own, joined with W_Q's or W_K's bias. So
    q = sum of the query parts' q, k = sum of the key parts' k, and q·k is the sum of every pair's product. An
    earlier head's share through the key is the composition the QK circuit (embeddings alone) cannot see: L1 H0
    wrote "the character before me was `h`" into the key, and L3 H1's query looks for exactly that.

    The key may lie after the query (the mask hides it; its score is still a number). The values sum to the
    model's score to about 1e-5.
    """
    T = _checked_ids(model, token_ids).numel()
    query_position = _check_position(query_position, T)
    key_position = _check_position(key_position, T)
    parts = score_parts(model, token_ids, layer, head, positions=[query_position, key_position])  # 0: query, 1: key
    return ScoreAttribution(layer, head, query_position, key_position, float(parts.scores[0, 1]), parts.query_names,
                            parts.key_names, parts.kinds, parts.pair(0, 1).float().cpu(), float(parts.scales[0]),
                            float(parts.scales[1]))
