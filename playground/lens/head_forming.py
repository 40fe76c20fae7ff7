"""Heads forming as a model trains: every head's pattern scores at one probe snapshot of a run, and the step at which
each head became a previous-character head. What the Train tab draws as lines over the steps.

Owns which scores a snapshot keeps and the threshold; each score's rule is head_scores.py's (one place per rule).
On the run's probe sentence (the one the Train tab's attention chart shows): previous token, same token, first token
and spread; on head_scores' repeated random probe (``r1 .. rL r1 .. rL``): induction. Knows nothing about the UI.

    snapshot = {"step": 200, "previous token": [[0.08, 0.12, 0.41], [...]], ...}   per pattern (layers, heads)
    formed_heads([snapshot_at_100, snapshot_at_200]) -> [{"layer": 0, "head": 2, "step": 200}]
"""

from __future__ import annotations

from typing import Any

import torch

from playground.lens import head_scores

FORMING_PATTERNS = ("previous token", "same token", "first token", "spread", "induction")
# A head is a previous-character head from the first snapshot at which it puts this much weight, on average, on the
# character just before each query of the probe sentence: about five times what an even spread puts there on a
# sentence of 57 characters (0.065). Trial 16's L0 H2 on the tiny preset went 0.13 (a smear) -> 0.41 (a stripe).
PREVIOUS_TOKEN_HEAD = 0.3
INDUCTION_SEQUENCES = 4  # rows of the repeated random probe: small, as a snapshot comes every few steps


def _rounded(scores: torch.Tensor) -> list[float]:
    return [round(float(value), 4) for value in scores]


@torch.no_grad()
def snapshot_scores(model, token_ids: torch.Tensor, weights: torch.Tensor, step: int, seed: int = 0) -> dict[str, Any]:
    """Every head's FORMING_PATTERNS scores at ``step``: ``weights`` (layers, heads, T, T) are the model's attention
    over ``token_ids`` (T,), the probe sentence; induction runs the model once on the repeated random probe.
    -> {"step": step, pattern: [[score per head] per layer]}, rounded to 4 places (it goes into training.json)."""
    ids = torch.as_tensor(token_ids).view(1, -1).cpu()
    weights = weights.float().cpu()
    record: dict[str, Any] = {"step": int(step)}
    per_layer = [w[None] for w in weights]  # (1, h, T, T) each
    record["previous token"] = [_rounded(head_scores.previous_token_score(w)) for w in per_layer]
    record["same token"] = [_rounded(head_scores.same_token_score(w, ids)) for w in per_layer]
    record["first token"] = [_rounded(head_scores.first_token_score(w)) for w in per_layer]
    record["spread"] = [_rounded(head_scores.spread_score(w)) for w in per_layer]
    config = model.config
    probe = head_scores.probe_tokens(config.vocabulary_size, config.context_size, INDUCTION_SEQUENCES, seed)
    attention = head_scores.attention_patterns(model, probe)
    L = probe.size(1) // 2
    record["induction"] = [_rounded(head_scores.score_weights(w.float().cpu(), L)["induction"]) for w in attention]
    return record


def series(snapshots: list[dict[str, Any]], pattern: str, layer: int, head: int) -> tuple[list[int], list[float]]:
    """One head's line over the steps: (steps, scores) of ``pattern``."""
    if pattern not in FORMING_PATTERNS:
        raise ValueError(f"the pattern must be one of {', '.join(FORMING_PATTERNS)}, got {pattern!r}")
    return [s["step"] for s in snapshots], [s[pattern][layer][head] for s in snapshots]


def formed_heads(snapshots: list[dict[str, Any]], threshold: float = PREVIOUS_TOKEN_HEAD) -> list[dict[str, int]]:
    """Each head that became a previous-character head, with the first snapshot's step at which its previous-token
    score reached ``threshold``; heads in the order they formed (then by layer and head)."""
    formed = {}
    for snapshot in sorted(snapshots, key=lambda s: s["step"]):
        for layer, heads in enumerate(snapshot["previous token"]):
            for head, score in enumerate(heads):
                if score >= threshold and (layer, head) not in formed:
                    formed[(layer, head)] = snapshot["step"]
    return [{"layer": layer, "head": head, "step": step}
            for (layer, head), step in sorted(formed.items(), key=lambda item: (item[1], item[0]))]
