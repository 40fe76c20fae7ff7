"""All the walk-through's lesson text: the step titles, and the formulas and explanations that react to a trace.

The ONE place the seven step titles live: the Attention tab's step control, its headings and its API (the
``step`` argument of ``/attention_step`` and ``/attention_export``) all use ``STEP_TITLES``. Also the
sentences the what-if analyses print, and which stage each what-if note belongs to (``WHATIF_NOTES``: a note
appears only once its idea has been met). Holds words only: the numbers come from trace.py and whatifs.py.

    stages(journey_preset().trace())[2].formula -> "S = Q·Kᵀ  (6 × 6)"
    notes_at("scores") -> ()        notes_at("weights") -> ("mask_leak", "saturation")
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from playground.checks import number_text
from playground.lens.walkthrough.trace import DEFAULT_SWITCHES, STAGE_KEYS, SWITCHED_STAGES, HeadTrace

STEP_TITLES = ("1. Input X", "2. Q, K, V", "3. Raw scores QKᵀ", "4. Scaled ÷ √d_k", "5. Causal mask",
               "6. Softmax weights", "7. Output = weights · V")  # one per trace.STAGE_KEYS entry, in order
STEP_LABELS = ("1 · X", "2 · Q K V", "3 · QKᵀ", "4 · ÷√d_k", "5 · mask", "6 · softmax",
               "7 · output")  # the step picker's short labels (its values stay STEP_TITLES), so it fits a phone
# step 1's line, by where the head's input comes from: a checkpoint's X is trained, and says what to see in it
INPUT_LOOK_FOR = {
    "checkpoint": "one row per token, the numbers this head reads: rows of the same character look alike, each "
                  "starting from that character's embedding.",
    "random": "one row per token: random numbers standing in for embeddings, so even a repeated character gets "
              "a row of its own.",
    "textbook": "one row per token: the book's embedding of each word, the numbers this head starts from.",
}
# What to see in each step's picture: the one line shown above it; the formula and the rest sit behind "more"
LOOK_FOR = (
    INPUT_LOOK_FOR["checkpoint"],
    "a query (Q) says what a token looks for, a key (K) what it offers, a value (V) what it passes on. Green: the "
    "framed query's best keys.",
    "dark blue cells: a query (row) meets the key (column) it matches best. Each cell is one dot product q·k.",
    "the same pattern as step 3, paler: on step 3's colour scale each score is ÷√d_k, so softmax does not "
    "saturate.",
    "grey above the diagonal: no token sees a later one. Click an earlier row: more of it is grey.",
    "each row sums to 1; a row's darkest cell is the token that query reads most.",
    "each row adds up step 2's V rows, each weighted by that query's softmax weight (the framed row's: the bars "
    "below).",
)
FOLD = "more"  # the summary of every fold


# steps 4 and 5 with their switch off, where "now" is drawn beside the "default": the line says what "now" shows,
# not the default's words (no "smaller scale" over unscaled scores, no grey over a mask turned off)
SCALING_OFF_LOOK_FOR = ("scaling is off: “now” keeps step 3's size; the “default”, ÷√d_k, is smaller, so softmax "
                        "does not saturate.")
MASK_OFF_LOOK_FOR = ("the mask is off: “now” has no grey, so tokens see later ones; the “default” greys every cell "
                     "above the diagonal.")
# step 6 with a switch off: its line changes with the switch, as steps 4 and 5 do
MASK_OFF_WEIGHTS_LOOK_FOR = ("the mask is off: “now” puts weight on later tokens too, above the diagonal; each row "
                             "still sums to 1.")
SCALING_OFF_WEIGHTS_LOOK_FOR = ("scaling is off: “now”'s rows are more peaked than the “default”'s, a few dark cells "
                                "taking nearly all of each row.")


# a temperature or the mask's order changes the charts: the line says so, not the default's words
SHARPER_LOOK_FOR = ("τ {t:g}, below 1, divides the scores by less than 1: “now”'s rows are more peaked than the "
                    "“default”'s; each still sums to 1.")
FLATTER_LOOK_FOR = ("τ {t:g}, above 1, shrinks the scores: “now”'s rows spread their weight more evenly than the "
                    "“default”'s; each still sums to 1.")
TEMPERATURE_SCORES_LOOK_FOR = "τ {t:g}: “now” is the “default” ÷ {t:g}, so its cells are {way} than the default's."
MASK_FIRST_LOOK_FOR = ("the mask came first: “now” greys the very cells the “default” does, since −∞ ÷ √d_k is still "
                       "−∞.")


def look_for(index: int, source: str, scale: bool = True, mask: bool = True, temperature: float = 1.0,
             mask_before_scaling: bool = False) -> str:
    """Step ``index``'s one line: step 1's for the head's ``source`` (an INPUT_LOOK_FOR key), steps 4, 5 and 6's for a
    switch of theirs turned off, a temperature other than 1 (steps 4 and 6) or the mask put before scaling (step 5)."""
    stage = STAGE_KEYS[index]
    if index == 0:
        return INPUT_LOOK_FOR[source]
    if stage == "scaled_scores" and not scale:
        return SCALING_OFF_LOOK_FOR
    if stage == "masked_scores" and not mask:
        return MASK_OFF_LOOK_FOR
    if stage == "weights" and not (mask and scale):
        return MASK_OFF_WEIGHTS_LOOK_FOR if not mask else SCALING_OFF_WEIGHTS_LOOK_FOR
    if stage == "scaled_scores" and temperature != 1:
        return TEMPERATURE_SCORES_LOOK_FOR.format(t=temperature, way="darker" if temperature < 1 else "paler")
    if stage == "weights" and temperature != 1:
        return (SHARPER_LOOK_FOR if temperature < 1 else FLATTER_LOOK_FOR).format(t=temperature)
    if stage == "masked_scores" and mask_before_scaling:
        return MASK_FIRST_LOOK_FOR
    return LOOK_FOR[index]

# Which stages show each what-if note: the mask leak once the mask has been met (step 5 on), saturation where
# scaling happens and where softmax shows its effect (steps 4 and 6), the order of mask and scaling at the mask.
WHATIF_NOTES: dict[str, tuple[str, ...]] = {
    "mask_leak": ("masked_scores", "weights", "output"),
    "saturation": ("scaled_scores", "weights"),
    "mask_order": ("masked_scores",),
}

MASKED_SCORE_HOVER = "masked (−∞)"
SMALL_HEAD = 4  # d_k up to this: scaling divides by 2 at most, and the lesson says it changes little
# a masked cell's hover, on two lines: on one it runs past a phone's screen
MASKED_WEIGHT_HOVER = "masked: weight exactly 0<br>because the score was −∞"
MASKED_LEGEND = "grey\u00a0=\u00a0masked"  # no-break spaces: a wrapped title keeps it whole


class Stage(NamedTuple):
    """One step of the walk-through; ``key`` names the HeadTrace field(s) it shows (trace.STAGE_KEYS)."""

    key: str
    title: str
    formula: str
    explanation: str


def window_sentence(window: int) -> str:
    """The line a sliding-window head's mask stage shows: window_sentence(4) -> Mistral's sliding window: each query
    sees at most 4 keys back (itself and the 3 before it); older keys are masked too."""
    return (f"Mistral's sliding window: each query sees at most {window} keys back (itself and the {window - 1} "
            "before it); older keys are masked too.")


def window_look_for(window: int) -> str:
    """Step 5's Look-for line where a sliding window masks too: the band of keys each row keeps, then the sentence."""
    return (f"grey above the diagonal, and from row {window} on grey left of a band {window} keys wide. "
            f"{window_sentence(window)}")


def stages(trace: HeadTrace) -> list[Stage]:
    """The seven steps in order, with formulas and explanations that reflect this trace's switches."""
    T, C, d = trace.length, trace.embedding_dim, trace.head_size
    divisor_text = f"√{d} = {math.sqrt(d):.3f}"
    temperature_text = f" ÷ τ ({trace.temperature:g})" if trace.temperature != 1.0 else ""
    if trace.scale:
        scale_formula = f"S_scaled = S / √d_k  (√d_k = {divisor_text}){temperature_text}"
        scale_text = (
            "Dividing by √d_k keeps the scores from growing with the head size: a dot product of d_k terms "
            "spreads like √d_k, and without the division softmax can saturate, putting nearly all the weight on "
            "one token. The pattern in each row stays the same, only its spread shrinks."
        )
        if d <= SMALL_HEAD:
            scale_text += (f" With a head this small (d_k = {d}) the division is by only {math.sqrt(d):.2f}, so "
                           "it changes little here; in GPT-2's heads (d_k = 64) it divides by 8.")
    else:
        scale_formula = f"S_scaled = S  (scaling is off){temperature_text}"
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
            " With “mask before scaling” the −∞ go into the raw scores first; this map still shows every score "
            "scaled, and step 5 shows where the −∞ land. −∞ divided by any positive number is still −∞, so step 5's "
            "masked scores, and the weights, are identical either way."
        )
    if trace.mask:
        mask_formula = "S_masked = S_scaled, with −∞ wherever j > i (above the diagonal)"
        if trace.mask_before_scaling:
            mask_formula = ("S_masked = (S, with −∞ wherever j > i) / the divisor of step 4: the same matrix as "
                            "S_scaled with −∞ wherever j > i")
        mask_text = (
            "Each token may look only at itself and the tokens before it, so every score above the "
            "diagonal becomes −∞. After softmax those entries are exactly 0: nothing flows back from the "
            "future. The diagonal is never masked, so every row keeps at least one score."
        )
        if trace.window is not None:
            W = trace.window
            mask_formula = mask_formula.replace("wherever j > i", f"wherever j > i or i − j ≥ {W}")
            mask_text = (f"{window_sentence(W)} Every score above the diagonal and every score {W} or more "
                         "columns left of it becomes −∞, so each row keeps a band of at most "
                         f"{W} keys ending at the diagonal; a word further back reaches the query only through "
                         "earlier layers, which carried it forward.")
    else:
        mask_formula = "S_masked = S_scaled: no mask, every token sees every token"
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
            "A = softmax of each row of S_masked  (each row sums to 1)",
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


def mask_leak_summary(tokens: list[str], affected: list[tuple[int, str]], mask: bool,
                      unmoved_weight: float = 0.0) -> str:
    """One sentence on which earlier tokens' outputs changed when the text's last token changed, and that this test
    changes the last token whatever the query on screen ("the last token" is not the query);
    when some did not, why: ``unmoved_weight``, the largest weight one of them put on it, is too small to move an
    output in float32."""
    T = len(tokens)
    if T == 1:
        return "There is only one token, so there is no future to leak from."
    last = f"the text's last token, {tokens[-1]!r} ({T - 1}),"
    whatever = " (This test changes the last token, whatever the query.)"
    if affected:
        how_many = f"all {T - 1}" if len(affected) == T - 1 else f"{len(affected)} of the {T - 1}"
        text = (f"With the mask off, when {last} changes, {how_many} earlier tokens change their output: "
                f"{_name_tokens(affected)}. They are reading the future.")
        if len(affected) < T - 1:
            weights = "weights of exactly 0" if unmoved_weight == 0 else f"weights of at most {unmoved_weight:.0e}"
            text += (f" The other {T - 1 - len(affected)} see it too, with {weights} on it: too little to move "
                     "their outputs in float32 (about 7 digits). Softmax gives such weights to scores far apart, so "
                     "without scaling or at a low temperature fewer rows are counted.")
        return text + whatever
    if mask:
        return (f"With the mask on, when {last} changes, no earlier token's output changes: each token sees only "
                f"itself and the tokens before it.{whatever}")
    return (f"When {last} changes, no earlier token's output changes: their weights on later tokens are "
            f"(numerically) zero.{whatever}")


def fixed(number: float, digits: int = 3) -> str:
    """A number to ``digits`` decimals, never "-0.000": a rounded-away minus sign reads as a real negative."""
    text = f"{number:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


# a head whose rows already put this much on one token on average (with scaling) looks the same without it: its maps,
# on a 0-1 colour scale, differ where no one can see it (the shipped model's L0 H0 on Hamlet's line: 0.967)
PEAKED = 0.9


def saturation_summary(entropy_scaled: float, max_weight_scaled: float, entropy_unscaled: float,
                       max_weight_unscaled: float, head_size: int) -> str:
    """Two sentences comparing the rows' mean entropy (nats) and mean largest weight, unscaled vs scaled, and
    whether the difference is worth noticing at this head size."""
    text = (
        f"Without scaling the rows average {fixed(entropy_unscaled)} nats of entropy and a largest "
        f"weight of {fixed(max_weight_unscaled)}; with scaling {fixed(entropy_scaled)} nats and "
        f"{fixed(max_weight_scaled)}. Lower entropy and a largest weight near 1 mean softmax is saturating."
    )
    if abs(max_weight_unscaled - max_weight_scaled) < 0.01 and abs(entropy_unscaled - entropy_scaled) < 0.01:
        text += (f" Here they barely differ: with d_k = {head_size} the scores are divided by only "
                 f"{math.sqrt(head_size):.2f}. Try random weights with a larger head_size (64, say) to see "
                 "saturation.")
    elif max_weight_scaled >= PEAKED:
        text += (f" This head is already peaked: with scaling its rows put {fixed(max_weight_scaled)} of their weight "
                 f"on one token on average, so without it they can only move the last {fixed(1 - max_weight_scaled)} "
                 "onto that token, and on a 0-1 colour scale the two maps look alike. Scaling shows on a head whose "
                 "rows are spread: try another head (its largest weight well under 0.9), or random weights with a "
                 "larger head_size (64, say).")
    return text


def notes_at(key: str) -> tuple[str, ...]:
    """The what-if notes stage ``key`` shows, in the order they are printed."""
    if key not in STAGE_KEYS:
        raise ValueError(f"unknown stage {key!r}; the stages are {', '.join(STAGE_KEYS)}")
    return tuple(name for name, keys in WHATIF_NOTES.items() if key in keys)


def switches_text(switches: dict[str, Any], key: str | None = None) -> str:
    """The switches in a few words: "scaled, masked, τ 1" or "unscaled, no mask, τ 2, mask before scaling".

    At stage ``key`` "scaled_scores" only scaling and τ have acted (the mask comes at step 5), so only they are
    named: "unscaled, τ 1".
    """
    words = ["scaled" if switches["scale"] else "unscaled", "masked" if switches["mask"] else "no mask",
             f"τ {switches['temperature']:g}"]
    if key == "scaled_scores":
        return f"{words[0]}, {words[2]}"
    if switches["mask"] and switches["mask_before_scaling"]:
        words.append("mask before scaling")
    return ", ".join(words)


def comparison_note(trace: HeadTrace, key: str, identical: bool = False) -> str:
    """What the second plot is when a switch differs from its default; "" when they all match. ``identical``: the
    two plots match cell for cell, and the note says so and why."""
    if trace.switches == DEFAULT_SWITCHES:
        return ""
    if key not in SWITCHED_STAGES:
        return (f"**Switches: {switches_text(trace.switches)}.** They act from step 4 on; this step is the same "
                "either way.")
    if identical:
        why = ("the mask comes at step 5, so masking (before or after scaling) cannot change the scaled scores"
               if key == "scaled_scores" else
               "masking before or after scaling hides the same cells (−∞ ÷ √d_k is still −∞) and scales the rest alike")
        return f"**Now and default are identical** (now: {switches_text(trace.switches)}): {why}."
    return (f"**Now vs default.** The first plot is now ({switches_text(trace.switches, key)}); the second is the "
            f"default ({switches_text(DEFAULT_SWITCHES, key)}), on the same colour scale, so you can compare them "
            "cell by cell.")


def mask_leak_note(trace: HeadTrace, summary: str) -> str:
    return f"**Mask ({'on' if trace.mask else 'off'} now).** {summary}"


def saturation_note(key: str, trace: HeadTrace, summary: str, rows: list[tuple[str, float, float, float, float]]
                    ) -> str:
    """The scaling note: at step 4 it looks ahead to softmax; at step 6 it reads the weights on screen.

    ``rows`` are (token, entropy scaled, entropy unscaled, max weight scaled, max weight unscaled), one per
    query, printed as a table when given.
    """
    lead = (f"**Scaling {'on' if trace.scale else 'off'}.** ")
    if key == "scaled_scores":
        lead += ("Why scale? Look ahead to step 6, where softmax turns each row into weights. Entropy (in nats) "
                 "measures how spread a row's weights are: 0 means all on one token, ln n means evenly over n. ")
    else:
        lead += "Entropy (in nats) measures how spread each row's weights are: 0 means all on one token. "
    text = lead + summary
    if rows:
        table = ["| query | entropy scaled | entropy unscaled | max weight scaled | max weight unscaled |",
                 "|---|---|---|---|---|"]
        table += [f"| {i} `{token}` | {fixed(es)} | {fixed(eu)} | {fixed(ms)} | {fixed(mu)} |"
                  for i, (token, es, eu, ms, mu) in enumerate(rows)]
        text += "\n\n" + "\n".join(table)
    return text


def mask_order_note(difference: float) -> str:
    return (f"**Mask before vs after scaling:** largest difference in the weights = **{difference:g}** "
            "(−∞ ÷ √d_k is still −∞, so the order cannot matter).")


def query_clamped(asked: int, length: int) -> str:
    """The warning when a query position is past the end of the text."""
    return (f"Query position {number_text(asked)} is past the end: the text has {length} tokens (0–{length - 1}), "
            f"so the last one, {length - 1}, is shown.")


HEAD_CHANGE_WORDS = {
    "tied query and key": "with one matrix for its query and key (W_K = W_Q), so a token can only look for what it "
                          "offers",
    "value is the input": "passing its input as it is (V = X), so it can only copy, not choose what to pass",
}


def head_change_summary(change: str, layer: int, head: int, original_loss: float, loss: float) -> str:
    """One line on a head changed on the learner's text: what changed and what it cost the model."""
    way = "worse" if loss > original_loss else "better"
    return (f"L{layer} H{head} {HEAD_CHANGE_WORDS[change]}: the loss on your text goes from {fixed(original_loss)} "
            f"to {fixed(loss)} ({fixed(abs(loss - original_loss))} {way}).")
