"""All the walk-through's lesson text: the step titles, and the formulas and explanations that react to a trace.

The ONE place the seven step titles live: the Attention tab's step control, its headings and its API (the
``step`` argument of ``/attention_step`` and ``/attention_export``) all use ``STEP_TITLES``. Also the
sentences the what-if analyses print. Holds words only: the numbers come from trace.py and whatifs.py.

    stages(journey_preset().trace())[2].formula -> "S = Q·Kᵀ  (6 × 6)"
"""

from __future__ import annotations

import math
from typing import NamedTuple

from playground.walkthrough.trace import STAGE_KEYS, HeadTrace

STEP_TITLES = ("1. Input X", "2. Q, K, V", "3. Raw scores QKᵀ", "4. Scaled ÷ √d_k", "5. Causal mask",
               "6. Softmax weights", "7. Output = weights · V")  # one per trace.STAGE_KEYS entry, in order


class Stage(NamedTuple):
    """One step of the walk-through; ``key`` names the HeadTrace field(s) it shows (trace.STAGE_KEYS)."""

    key: str
    title: str
    formula: str
    explanation: str


def stages(trace: HeadTrace) -> list[Stage]:
    """The seven steps in order, with formulas and explanations that reflect this trace's switches."""
    T, C, d = trace.length, trace.embedding_dim, trace.head_size
    divisor_text = f"√{d} = {math.sqrt(d):.3f}"
    temperature_text = f" ÷ τ ({trace.temperature:g})" if trace.temperature != 1.0 else ""
    if trace.scale:
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
    if trace.temperature != 1.0:
        scale_text += (
            f" The temperature τ = {trace.temperature:g} divides the scores too: above 1 flattens the "
            "weights, below 1 sharpens them."
        )
    if trace.mask and trace.mask_before_scaling:
        scale_text += (
            " Here the mask was applied to the raw scores first; −∞ divided by any positive number is "
            "still −∞, so the result is identical."
        )
    if trace.mask:
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
    lessons = [
        (
            f"X  ({T} × {C}: one row per token)",
            "Each row is one token's vector: the numbers this head starts from. For a checkpoint it is "
            "the LayerNorm'd input of the chosen layer, not the raw embedding. Tokens with similar rows "
            "will get similar queries and keys.",
        ),
        (
            f"Q = X·W_q,  K = X·W_k,  V = X·W_v  (each {T} × {d})",
            "Queries, keys and values: the same three weight matrices are applied to every token, so row i "
            "of Q, K and V belongs to token i. A query says what the token is looking for, a key what it "
            "offers, and a value what it passes on when attended to.",
        ),
        (
            f"S = Q·Kᵀ  ({T} × {T})",
            "Entry (i, j) is the dot product of token i's query with token j's key: how well token j "
            "matches what token i is looking for. Read it row by row; each row belongs to one query "
            "token, and its largest entries will become its largest weights.",
        ),
        (scale_formula, scale_text),
        (mask_formula, mask_text),
        (
            "A = softmax of each row of S  (each row sums to 1)",
            "Attention weights: softmax turns each row of scores into positive weights that sum to 1, how "
            "much token i takes from each token j. A row with one weight near 1 is sharp (saturated); a "
            "flat row averages the tokens it sees.",
        ),
        (
            f"out = A·V  ({T} × {d})",
            "Each output row is a weighted average of the value rows, using that token's attention "
            "weights. A token that put most of its weight on one token gets an output close to that "
            "token's value. In the full model the heads' outputs are joined and projected back to C "
            "features.",
        ),
    ]
    return [Stage(key, title, formula, explanation)
            for key, title, (formula, explanation) in zip(STAGE_KEYS, STEP_TITLES, lessons, strict=True)]


def _name_tokens(items: list[tuple[int, str]], limit: int = 8) -> str:
    named = ", ".join(f"{token!r} ({position})" for position, token in items[:limit])
    return named + (f" and {len(items) - limit} more" if len(items) > limit else "")


def mask_leak_summary(tokens: list[str], affected: list[tuple[int, str]], mask: bool) -> str:
    """One sentence on which earlier tokens' outputs changed when the last token changed."""
    T = len(tokens)
    last = f"{tokens[-1]!r} ({T - 1})"
    if T == 1:
        return "There is only one token, so there is no future to leak from."
    if affected:
        how_many = f"all {T - 1}" if len(affected) == T - 1 else f"{len(affected)} of the {T - 1}"
        return (f"With the mask off, {how_many} earlier tokens change their output when the last token {last} "
                f"changes: {_name_tokens(affected)}. They are reading the future.")
    if mask:
        return (f"With the mask on, no earlier token's output changes when the last token {last} changes: "
                "each token sees only itself and the tokens before it.")
    return (f"No earlier token's output changed when the last token {last} changed: their weights on "
            "later tokens are (numerically) zero.")


def saturation_summary(entropy_scaled: float, max_weight_scaled: float, entropy_unscaled: float,
                       max_weight_unscaled: float) -> str:
    """Two sentences comparing the rows' mean entropy (nats) and mean largest weight, unscaled vs scaled."""
    return (
        f"Without scaling the rows average {entropy_unscaled:.3f} nats of entropy and a largest "
        f"weight of {max_weight_unscaled:.3f}; with scaling {entropy_scaled:.3f} nats and "
        f"{max_weight_scaled:.3f}. Lower entropy and a largest weight near 1 mean softmax is saturating."
    )
