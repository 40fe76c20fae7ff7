"""The rotation stage of a rotary head (the Llama family), and its proof on the learner's text.

Owns what the Attention tab's rotation stage shows: each feature pair's angle at each position (``pair_angles``), a
query's q and a key's k before and after their turn (``rotation_at``), and ``shift_proof``: the same tokens at
positions + k, whose scores a rotary model keeps (a score depends only on the distance between query and key) and
a GPT's learned positions change. Reads the model through its forward and the named points only. Knows nothing
about lesson text beyond its one sentence per result, figures or the UI.

    pair_angles(3, 4, 10000.0)[2] -> tensor([2.0000, 0.0200])   (position 2: pair 0 turns 1 rad a token, pair 1 0.01)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground import checks
from playground.lens.circuits import head_name
from playground.model.base import Recorder
from playground.model.gpt import KVCache
from playground.model.modes import evaluating

ROTATION_TEXT = ("Each pair of q's and k's features (i and i + d/2) is turned by an angle that grows with the "
                 "position: position × θ_i, θ_i = rope_theta^(-2i/d). Turning q and k both, the score of a query and a "
                 "key depends only on the distance between them, never on where the pair sits.")


def pair_angles(length: int, head_size: int, rope_theta: float, start: int = 0) -> torch.Tensor:
    """(T, d/2): the angle in radians feature pair i (features i and i + d/2, rotate-half's pairing) turns by at each
    of the positions start..start+T-1, position × rope_theta^(-2i/d), as model.llama.rotary_cos_sin computes it."""
    exponents = torch.arange(0, head_size, 2, dtype=torch.int64).float() / head_size
    theta = 1.0 / (rope_theta ** exponents)  # (d/2,)
    positions = torch.arange(start, start + length).float()  # (T,)
    return positions[:, None] * theta[None, :]  # (T, d/2)


def pair_labels(head_size: int) -> list[str]:
    """Each pair's features: ['0 & 4', '1 & 5', ...] for head_size 8."""
    half = head_size // 2
    return [f"{i} & {i + half}" for i in range(half)]


@dataclass
class RotationAt:
    """One query's q and one key's k, before and after their turn, (d,) each, at their positions."""

    query: int
    key: int
    q_before: torch.Tensor
    q_after: torch.Tensor
    k_before: torch.Tensor
    k_after: torch.Tensor

    @property
    def score_before(self) -> float:
        """q·k unturned: what the score would be without positions."""
        return float(self.q_before @ self.k_before)

    @property
    def score_after(self) -> float:
        """q·k turned, the raw score the head takes (before the scaling)."""
        return float(self.q_after @ self.k_after)


def rotation_at(trace, query: int, key: int | None = None) -> RotationAt:
    """The rotation of ``query``'s q and ``key``'s k (the query itself by default) in a rotary HeadTrace."""
    if not trace.rotary:
        raise ValueError("this head has no rotation: its positions entered as learned embeddings in x")
    query = checks.whole_number(query, "the query position", 0, trace.length - 1)
    key = query if key is None else checks.whole_number(key, "the key position", 0, trace.length - 1)
    return RotationAt(query, key, trace.q_before[query], trace.q[query], trace.k_before[key], trace.k[key])


class StartAt(KVCache):
    """An empty KV cache that says ``start`` tokens came before: a forward given it puts its tokens at positions
    start..start+T-1 (both families read their first position from the cache's length), and attends only to them."""

    def __init__(self, layers_num: int, start: int):
        super().__init__([None] * layers_num, [None] * layers_num)
        self.start = start

    @property
    def length(self) -> int:
        return self.start


@dataclass
class ShiftProof:
    """One head's scores on a text at positions 0..T-1 and at shift..shift+T-1 (the same tokens)."""

    layer: int
    head: int
    shift: int
    rotary: bool
    scores: torch.Tensor  # (T, T) the scaled scores at positions 0.., the future at -inf
    shifted_scores: torch.Tensor  # (T, T) at positions shift..
    max_abs_difference: float  # over the scores the query may see (the -inf ones are equal)

    @property
    def sentence(self) -> str:
        moved = (f"{head_name(self.layer, self.head)}: the text moved {checks.count(self.shift, 'position')} on "
                 "(the same tokens)")
        if self.rotary:
            return (f"{moved}: the head's scores changed by at most **{self.max_abs_difference:.2g}**, float32's "
                    "rounding. Rotary positions: a score depends only on the distance between query and key.")
        return (f"{moved}: the head's scores changed by up to **{self.max_abs_difference:.3g}**. Learned positions: "
                "each position adds its own vector to x, so the same tokens elsewhere score differently.")


def shift_proof(model, token_ids: torch.Tensor, layer: int, head: int, shift: int) -> ShiftProof:
    """Run ``model`` on token_ids (T,) twice, at positions 0..T-1 and shift..shift+T-1, and compare head ``head`` of
    ``layer``'s scores (the named point attn.hook_attn_scores). ``shift`` keeps the text within the context."""
    config = model.config
    layer = checks.index(layer, "layer", config.layers_num, "layers")
    head = checks.index(head, "head", config.heads_num, "heads per layer")
    T = token_ids.numel()
    room = config.context_size - T
    shift = checks.whole_number(shift, "the shift", 0)
    if shift > room:
        raise ValueError(f"a shift of {shift} puts the text past this model's context of {config.context_size} "
                         f"tokens: the text has {T}, so shift it by at most {room}")
    ids = token_ids.to(next(model.parameters()).device)[None]  # (1, T)
    name = f"blocks.{layer}.attn.hook_attn_scores"
    found = []
    with evaluating(model):
        for start in (0, shift):
            recorder = Recorder({"attn.hook_attn_scores"}, {layer})
            model(ids, cache=StartAt(config.layers_num, start), capture=recorder)
            found.append(recorder[name][0, head].float().cpu())  # (T, T)
    scores, shifted = found
    seen = torch.isfinite(scores)
    difference = (scores - shifted)[seen].abs().max().item() if seen.any() else 0.0
    return ShiftProof(layer, head, shift, bool(config.is_llama), scores, shifted, difference)
