"""The Model tab's words for what only the Llama family has: the rotation of q and k, query heads sharing a K/V
head, RMSNorm and the gated (SwiGLU) MLP. Words only: the numbers come from family_levels.py.

    grouped_heads(4, 2) -> "4 query heads over 2 K/V heads: heads 0, 1 read K/V head 0; heads 2, 3 read K/V head 1"
"""

from __future__ import annotations

from playground.lens.anatomy.family_levels import GatedBlockWalk, RotaryHead

FAMILY = "Llama family"
SWITCHES_NOT_APPLIED = ("The switches (post-norm, encoder, ReLU, dropout) rebuild a GPT block; this block is shown as "
                        "it runs: pre-norm, causal, RMSNorm, SwiGLU, no dropout.")
ROTATION_LOOK_FOR = ("q and k are turned by their positions before the dot product, so the score depends on the "
                     "distance between query and key.")
GATED_LOOK_FOR = ("where each head looks from the query; the gated MLP's units at the query (SiLU(gate) opens or "
                  "closes each, up is what passes); how attention, then the MLP, change the guess.")
FINAL_RMSNORM = "The final norm here is RMSNorm (`norm`): a scale per feature, no centring and no bias."


def _names(numbers: list[int]) -> str:
    return ", ".join(str(n) for n in numbers)


def grouped_heads(heads_num: int, kv_heads: int) -> str:
    """Which query heads read which K/V head, for the whole layer."""
    group = heads_num // kv_heads
    if group == 1:
        return f"{heads_num} query heads, each with its own K/V head"
    groups = "; ".join(f"heads {_names(list(range(g * group, (g + 1) * group)))} read K/V head {g}"
                       for g in range(kv_heads))
    return f"{heads_num} query heads over {kv_heads} K/V head{'s' * (kv_heads != 1)}: {groups}"


def head_sharing(head: RotaryHead) -> str:
    """'Head 3 reads K/V head 1, shared with head 2: its keys and values are computed once for both.'"""
    others = [n for n in head.sharing if n != head.head]
    if not others:
        return f"Head {head.head} reads K/V head {head.kv_head}, its own."
    return (f"Head {head.head} reads K/V head {head.kv_head}, shared with head{'s' * (len(others) != 1)} "
            f"{_names(others)}: those keys and values are computed (and cached) once for the {len(head.sharing)} "
            "of them; each query head keeps its own queries.")


def rotation(head: RotaryHead) -> str:
    """Where the rotation happens, with this model's base."""
    d = head.trace.head_size
    return (f"**The rotation (RoPE)** happens between the projections and the scores: q = q_proj(x) and k = k_proj(x) "
            f"are turned by their positions, pair i (features i and i + {d // 2}) by position × "
            f"{head.rope_theta:g}^(−2i/{d}) radians. So the score q_i·k_j depends only on the distance i − j, never "
            "on where the pair sits: there is no position embedding. The Q and K drawn here are after the rotation.")


def score_rotation(head: RotaryHead, query: int, key: int) -> str:
    return (f"q_{query} and k_{key} are after the rotation: q_{query} was turned by position {query}'s angles and "
            f"k_{key} by position {key}'s, so their product reads the distance {query - key}.")


def gated_formula() -> str:
    return ("a = x + Attn(RMSNorm₁(x));   out = a + MLP(RMSNorm₂(a));   MLP(x) = down(SiLU(gate(x)) × up(x))  "
            "(SwiGLU);   RMSNorm(x) = x / √(mean(x²) + ε) × w")


def gated_text(walked: GatedBlockWalk, query: int) -> str:
    """Level 4's fold for a Llama-family block: what RMSNorm and the gated MLP do, with the query's numbers."""
    walk, mlp = walked.walk, walked.mlp
    C, hidden = walk.points[0].values.size(1), mlp.gate.size(1)
    means = " → ".join(f"{point.name} {float(point.norms.mean()):.2f}" for point in walk.points)
    gates = mlp.activated[query]
    shut = float((gates.abs() < 0.05).float().mean())
    return (f"**RMSNorm** divides each token's {C} numbers by their root mean square and multiplies by a learned "
            "scale: unlike LayerNorm it neither subtracts the mean nor adds a bias. **The gated MLP (SwiGLU)** "
            f"computes two {hidden}-wide projections of the normed stream: gate and up. SiLU(gate) = gate × "
            "sigmoid(gate) is near 0 for a negative gate and near the gate for a positive one, so it decides how much "
            f"of each up unit passes; down_proj writes what passes back into the {C}-wide stream. At position "
            f"{query}, {shut:.0%} of the gates are almost shut (|SiLU(gate)| < 0.05). The mean length ‖x‖ at each "
            f"point: {means}.")
