"""The Why tab's reading of one text: its checks (a checkpoint's heads, a typed character, a target), its price
(what the passes over the text cost before they run), and the model run once over the text for every position's
parts, a chosen head's pattern, the knock-outs and the ranking (why_reading's Reading, kept per text in a
ReadingCache). No Gradio events and no words: why_views says what a reading means, why_tab wires the tab.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from typing import NamedTuple

import torch

from playground import budget, checks
from playground.lens import circuits
from playground.text.tokenizer import escape_text, labels
from playground.ui.common import AppContext, RecentReadings
from playground.ui.why_page import (
    KNOCK_BARELY,
    STRONGEST,
)

# Shakespeare's lines as Tiny Shakespeare sets them: the trained model predicts the question mark (p 0.86) and one head,
# which looks back at the "wh" of "wherefore", writes most of it. The earlier default joined two verse lines into one of
# 87 characters, longer than any the model was trained on; on it a head that ends lines hurt the loss by 0.21
DEFAULT_TEXT = "And sails upon the bosom of the air.\n\nJULIET:\nO Romeo, Romeo! wherefore art thou Romeo"
MODES = {"mean over the text": "mean", "zero": "zero"}
# what the bars split: a logit alone decides nothing (softmax ignores a shift of every logit); a guess is made against
# its rivals, so by default the bars split logit(guess) - logit(runner-up) (TransformerLens's logit difference)
VERSUS, ALONE = "the guess against the runner-up", "the guess's logit alone"
SPLITS = {VERSUS: "versus", ALONE: "alone"}
# the characters the page shows for invisible ones (tokenizer.escape_char), and ⏎, read back as the character
ESCAPES = {"\\n": "\n", "\\t": "\t", "\\r": "\r", "␣": " ", "⏎": "\n"}
MAX_TOKENS = 256  # the text a view reads: its attention maps and its figures stay small whatever the model
MAX_CIRCUIT_TOKENS = 96  # rows and columns of a QK or OV table drawn: a character vocabulary fits whole
MAX_RANKED_HEADS = 48  # knock-out ranking costs a forward pass a head: GPT-2's 144 are knocked out by hand
PAIRS = 5
STEP_THROUGH_PX = 320  # the step-through button's width: its words on one line, within a phone's 358 px
# "this character": the heading's, the model's guess or the target typed (with a target the line said "the guess")
HEAD_NAMES_INFO = "L3 H1 is layer 3's head 1, L2 MLP layer 2's MLP (both counted from 0)"  # the bars' names
TABLE_RANK_SHOWN = 3  # a rank past this and past a quarter of the row in a head's tables (QK: the key; OV: the
CHAIN_MORE = ("② is what the head would add to the target's logit if all its weight were on that key: the key's "
              "value, through the head's share of the output projection, read the way the bars above read every "
              "part. The weights add up to 1, so the pushes add up to exactly this head's bar. \"Every other part\" "
              "is the embeddings, the other heads, the MLPs and the biases. Softmax compares every character's "
              "logit: a push helps the probability only as far as it lifts this logit above the others.")
WORD_PLACES = {"own word": "within its own word", "previous word": "at the word before", "word start": "at word starts"}


class WhyView(NamedTuple):
    heading: str
    parts: object  # the attribution's bar chart
    head_heading: str
    chain: object  # the chosen head's chain, from its pattern to the next character: the page's figure
    numbers: dict  # the parts and the chain as numbers (_numbers): what an API client reads
    circuits_heading: str
    qk: object
    ov: object
    knock_heading: str
    ranking: object  # every head's added loss, or None where ranking is too dear


def _label(text: str) -> str:
    return escape_text(text)


def _head_names(layers: int, heads: int) -> list[str]:
    return [circuits.head_name(layer, head) for layer in range(layers) for head in range(heads)]


def _parse_head(name: str, layers: int, heads: int) -> tuple[int, int]:
    names = _head_names(layers, heads)
    if name not in names:
        raise ValueError(f"head {checks.shown(name)} is not one of this model's heads (L0 H0 to {names[-1]})")
    layer, head = divmod(names.index(name), heads)
    return layer, head


def read_character(typed: str) -> str:
    """A target as typed, with the page's own escapes read back (one rule wherever a target is read): "\\n" or "⏎"
    is a newline, "␣" a space, "\\t" and "\\r" themselves, "\\x07", "\\u200d" and "\\U0001f600" the characters
    they name, "◌́" the mark alone; anything else as typed."""
    if typed in ESCAPES:
        return ESCAPES[typed]
    coded = {"\\x": 2, "\\u": 4, "\\U": 8}.get(typed[:2])
    if coded and len(typed) == 2 + coded:
        try:
            return chr(int(typed[2:], 16))
        except ValueError:
            return typed
    if len(typed) == 2 and typed[0] == "◌":
        return typed[1]
    return typed


def _target(tokenizer, target: str, predicted: int) -> int:
    """The target's id: the model's own guess when the box is empty, else the one token the text encodes to (the
    page's escapes read back: read_character)."""
    if not target:
        return predicted
    typed, target = target, read_character(target)
    if tokenizer.find_unknown(target):
        raise ValueError(f"the target {checks.shown(typed)} is not in this model's vocabulary (for an invisible "
                         "character type what the page shows: \\n or ⏎ a newline, ␣ a space)")
    ids = tokenizer.encode(target)
    if ids.numel() != 1:
        raise ValueError(f"the target {checks.shown(target)} is {ids.numel()} tokens: give one "
                         f"{tokenizer.token_name}")
    return int(ids[0])


def _circuit_tokens(vocabulary: int, ids: torch.Tensor) -> torch.Tensor | None:
    """Every token of a small vocabulary; for a large one the text's own tokens, then the lowest ids, up to
    MAX_CIRCUIT_TOKENS."""
    if vocabulary <= MAX_CIRCUIT_TOKENS:
        return None
    chosen = list(dict.fromkeys(ids.tolist()))[:MAX_CIRCUIT_TOKENS]
    taken = set(chosen)
    lowest = (i for i in range(vocabulary) if i not in taken)
    chosen += itertools.islice(lowest, MAX_CIRCUIT_TOKENS - len(chosen))
    return torch.tensor(sorted(chosen))


def _pairs_in_words(table: torch.Tensor, names: list[str], verb: str, among=None) -> list[str]:
    """The PAIRS strongest pairs of ``table`` in words, strongest first: "`q` looks for `u` (+1.23)"."""
    pairs = circuits.strongest_pairs(table, PAIRS, among)
    return [f"`{names[row]}` {verb} `{names[col]}` ({value:+.2f})" for row, col, value in pairs]


class _Reading(NamedTuple):
    """Everything a view of the text needs, at every position, from one pass of each kind."""

    model: object
    tokenizer: object
    ids: torch.Tensor  # (T,)
    tokens: list[str]  # shown labels, one per position
    probabilities: torch.Tensor  # (T, V): the intact model's next-token probabilities
    targets: list[int]  # the target after each position (the model's guess there when none is given)
    attributions: list  # circuits.LogitAttribution per position
    keys: dict  # (layer, head) -> ((T, T) attention weights, (T, T) each read key's push on the query's target)
    head: tuple[int, int] | None  # the chosen head; None: the one that pushed most, position by position
    knocked_heads: list[tuple[int, int]]
    mode: str
    knocks: dict  # the knocked heads' names joined by ", " ("" the intact model) -> circuits.KnockOut
    intact_loss: float | None
    effects: list | None  # circuits.HeadEffect per head, most needed first, or None where not ranked
    ranking_note: str  # the ranking's line (or why there is none)
    subset: torch.Tensor | None  # the circuit tables' tokens (None: the whole vocabulary)
    name: str  # the checkpoint's
    memo: ReadingCache
    writes: dict  # (layer, head) -> (T, T): what the head writes from each key onto the query's target, per weight
    logits: torch.Tensor  # (T, V): the intact model's logits
    versus: bool  # the parts split logit(target) - logit(rival) (each attribution's rival_id), not the logit alone
    dropped: int = 0  # tokens past what the view reads (the text's last ones): the heading says so
    reads: str = "this view"  # what sets that limit: "this checkpoint" (its context) or "this view"
    # rotary positions: the QK tables' distance from query back to key (a score depends on it); None: positions are
    # embeddings, which the tables leave out
    distance: int | None = None


READING_CACHE_SIZE = 24  # pieces of readings kept: a text's every-position pass, its ranking, a few heads' circuits


class ReadingCache(RecentReadings):
    """The last READING_CACHE_SIZE pieces of the Why tab's readings (a text's attribution at every position, its
    ranking, a knock-out's pass, a head's circuits): a new head, knock-out or position reads the text once, not at
    every click."""

    def __init__(self, size: int = READING_CACHE_SIZE, budget=None) -> None:
        super().__init__(size, budget, what="the Why tab's readings")

def _prepare(ctx: AppContext, checkpoint: str, text: str, target: str, head: str, knocked, mode: str,
             split: str = VERSUS):
    """The checked inputs: (the loaded checkpoint, ids, the target text, the head choice, the knocked heads, mode,
    whether the parts split the logit difference against the runner-up)."""
    text = checks.text(text, "The text", ctx.limits.max_text_chars)
    target = checks.text(target, "The target", 16)
    mode = MODES[checks.choice(mode, "knock-out", MODES)]
    versus = SPLITS[checks.choice(split or VERSUS, "split", SPLITS)] == "versus"
    knocked = list(knocked or [])
    loaded = ctx.checkpoint(checkpoint or "")
    tokenizer, config = loaded.tokenizer, loaded.config
    if not text:
        raise ValueError("the text is empty: type a few characters for the model to read")
    unknown = tokenizer.find_unknown(text)
    if unknown:  # what to do, with the characters: a stranger switched to the toy and read only a count
        distinct = list(dict.fromkeys(u.character for u in unknown))
        listed = " ".join(escape_text(c) for c in distinct[:12]) + (" ..." if len(distinct) > 12 else "")
        known = getattr(tokenizer, "characters", None)
        knows = f" ({len(known)}: {escape_text(''.join(known))})" if known and len(known) <= 40 else ""
        raise ValueError(f"the text has {len(unknown)} character(s) this model does not know; the first is "
                         f"{checks.shown(unknown[0].character)} at {unknown[0].position} (unknown: {listed}). Type a "
                         f"text in the characters it knows{knows}, or choose another checkpoint")
    ids = tokenizer.encode(text)
    limit = min(MAX_TOKENS, config.context_size)
    # a text longer than the model reads: its first tokens, said on the page (as the Attention and Model tabs
    # do). A stranger pasted the Train tab's own "hello world" into the toy (context 8) and read only a refusal.
    dropped = max(0, ids.numel() - limit)
    ids = ids[:limit]
    if target:
        _target(tokenizer, target, 0)  # refused here, before any work
    layers, heads = config.layers_num, config.heads_num
    head = checks.text(head, "head", 64) or STRONGEST
    chosen = None if head == STRONGEST else _parse_head(head, layers, heads)
    knocked_heads = [_parse_head(name, layers, heads) for name in knocked]
    return loaded, ids, target, chosen, knocked_heads, mode, versus, dropped


def _position(position, length: int) -> int:
    position = checks.whole_number(position, "position")
    if not -length <= position < length:
        raise ValueError(f"position {position} is outside the text's {length} tokens (-1 is the last)")
    return position % length


def _cost(config, T: int, subset) -> budget.Cost:
    """The reading's peak (_read, then a head's circuits), from what it runs: one pass with every head's maps
    (every_key_reading), every part of the stream at every position, (parts, T, C), twice (logit_attributions stacks
    and centres them), the key shares it keeps, and the knock-outs: a batch of one row per knocked set, as many rows as
    KNOCK_OUT_LOGITS allows, whose pass holds a batch's activations and three (rows, T, V) (the logits, their softmax
    and the loss's log-softmax). Measured in memory-limited children (tests/test_inference_budget.py)."""
    n = config.vocabulary_size if subset is None else subset.numel()
    L, h, C, V = config.layers_num, config.heads_num, config.embedding_dim, config.vocabulary_size
    heads_total = L * h
    rows = min(heads_total, max(1, circuits.KNOCK_OUT_LOGITS // (T * V)))
    parts = 2 + heads_total + 2 * L  # the two embeddings, every head, each layer's attention bias and MLP
    return budget.combined("this view", budget.inference_cost(
        parameters=config.parameter_count(), layers_num=L, heads_num=h, embedding_dim=C, context_size=T,
        vocabulary_size=V, attention_maps=True),
        budget.Cost("", (("circuit tables", 4 * 4 * n * max(n, V)),
                         ("every part of the stream", 2 * 4 * parts * T * C),
                         ("what every head writes", 2 * 4 * heads_total * V),  # head_writes: centred, and its copy
                         ("every head's key shares", 3 * 4 * heads_total * T * T),  # weights, writes, shares
                         ("every head knocked out", 4 * rows * T * (16 * C + 3 * V)),
                         ("figures", (2 * n * n) * budget.BYTES_PER_HEATMAP_CELL))))


@contextlib.contextmanager
def _reading(ctx: AppContext, checkpoint: str, text: str, target: str, head: str, knocked, mode: str,
             position=None, memo: ReadingCache | None = None, split: str = VERSUS,
             distance=None) -> Iterator[tuple[_Reading, int | None]]:
    """The text read at every position for these settings (priced and admitted first), and ``position`` checked
    against it (None stays None), held admitted while the caller works with it: the price counts a head's circuit
    tables, its figures and the knock-outs one tick away, which the handlers make from the reading. ``memo``: pieces
    read before (none kept when None). ``distance``: the QK tables' distance between query and key, for a model
    with rotary positions (ignored by one whose positions are embeddings)."""
    loaded, ids, target, chosen, knocked_heads, mode, versus, dropped = _prepare(ctx, checkpoint, text, target, head,
                                                                                 knocked, mode, split)
    distance = _distance(loaded.config, distance)
    T = ids.numel()
    if position is not None:
        position = _position(position, T)
    subset = _circuit_tokens(loaded.config.vocabulary_size, ids)
    memo = memo if memo is not None else ReadingCache(0)
    with ctx.budget.reserve(_cost(loaded.config, T, subset), hint=f"use a shorter text (it is {T} tokens)"):
        reading = _read(loaded.model, loaded.tokenizer, ids, target, chosen, knocked_heads, mode, subset,
                        loaded.name, memo, versus)
        try:
            yield reading._replace(dropped=dropped, reads=_reads(loaded.config), distance=distance), position
        finally:  # what the handler added to the reading's pieces is held from the budget before its own is let go
            memo.measure()


def _distance(config, distance) -> int | None:
    """The QK tables' distance from query back to key, checked: a whole number from 0 to the context's last
    position (circuits.DEFAULT_DISTANCE where none is given), for a model with rotary positions; None for one whose
    positions are embeddings (the tables leave them out)."""
    if not config.is_llama:
        return None
    if distance is None or distance == "":
        return circuits.DEFAULT_DISTANCE
    distance = checks.whole_number(distance, "distance")
    if not 0 <= distance < config.context_size:
        raise ValueError(f"distance {distance} is outside 0 to {config.context_size - 1}: the key sits that many "
                         "tokens before the query, within the model's context")
    return distance


def _reads(config) -> str:
    """Who sets how many tokens a view reads: "this checkpoint" (its context) or "this view" (MAX_TOKENS)."""
    return "this checkpoint" if config.context_size <= MAX_TOKENS else "this view"


def _dropped_line(reading: _Reading) -> str:
    """The line that says the view reads only the text's first tokens, and what to do ("" where it reads it all)."""
    if not reading.dropped:
        return ""
    kept = reading.ids.numel()
    return (f"\n\n**Reads the first {kept} of {kept + reading.dropped} tokens** ({reading.reads}'s most): shorten "
            "the text.")


def _every_position(model, tokenizer, ids, target, versus: bool = False):
    """(probabilities (T, V), the target after each position, each position's attribution, the logits (T, V)), from
    one pass each. ``versus``: each attribution splits logit(target) - logit(its rival), the likeliest other token
    (the runner-up where the target is the guess, else the guess)."""
    device_ids = ids.view(1, -1).to(next(model.parameters()).device)
    with torch.no_grad():
        logits = model(device_ids).logits[0].float().cpu()  # (T, V)
    probabilities = torch.softmax(logits, dim=-1)
    T = ids.numel()
    targets = ([_target(tokenizer, target, 0)] * T) if target else probabilities.argmax(dim=-1).tolist()
    rivals = _rivals(probabilities, targets) if versus else None
    return probabilities, targets, circuits.logit_attributions(model, ids, targets, rivals), logits


def _rivals(probabilities: torch.Tensor, targets: list[int]) -> list[int]:
    """The likeliest token other than the target at each position (T,)."""
    others = probabilities.clone()
    others[torch.arange(len(targets)), torch.tensor(targets)] = -1.0
    return others.argmax(dim=-1).tolist()


def _every_head(config) -> list[tuple[int, int]]:
    return [(layer, head) for layer in range(config.layers_num) for head in range(config.heads_num)]


def _intact(probabilities: torch.Tensor, targets: list[int], loss: float | None) -> circuits.KnockOut:
    """The intact model's reading, in a knock-out's terms (nothing knocked out)."""
    chosen = probabilities.gather(1, torch.tensor(targets).view(-1, 1))[:, 0]  # (T,)
    return circuits.KnockOut((), loss, probabilities.argmax(dim=-1).tolist(), chosen.tolist())


def _names(heads) -> str:
    """A set of knocked-out heads as the page names it: "L0 H2, L2 H1", in the order ticked ("" for none)."""
    return ", ".join(circuits.head_name(*lh) for lh in heads)


def _read(model, tokenizer, ids, target, chosen, knocked_heads, mode, subset, name, memo,
          versus: bool = False) -> _Reading:
    config = model.config
    T = ids.numel()
    text_key = (name, tuple(ids.tolist()))
    probabilities, targets, attributions, logits = memo.get(
        ("positions", *text_key, target, versus), model,
        lambda: _every_position(model, tokenizer, ids, target, versus))
    every = _every_head(config)
    if len(every) <= MAX_RANKED_HEADS:  # every head at every position: the page draws any head by itself
        heads = every
    else:  # the chosen head, and the head that pushed most, position by position
        strongest = (_strongest_of(a, config) for a in attributions)
        heads = list(dict.fromkeys([*([chosen] if chosen is not None else []), *strongest]))
    weights, writes, shares = memo.get(("keys", *text_key, target, versus, tuple(heads)), model,
                                       lambda: circuits.every_key_reading(model, ids, attributions, heads))
    keys = {lh: (weights[i], shares[i]) for i, lh in enumerate(heads)}
    intact_loss = memo.get(("loss", *text_key), model, lambda: circuits.text_loss(model, ids) if T > 1 else None)
    knocks = {"": _intact(probabilities, targets, intact_loss)}
    means = memo.get(("means", *text_key), model, lambda: circuits.head_means(model, ids)) if mode == "mean" else None
    effects = None
    if intact_loss is None:
        note = "The text needs two tokens for a loss to rank heads by."
    elif len(every) > MAX_RANKED_HEADS:
        note = (f"Ranking all {len(every)} heads would take {len(every)} forward passes: knock heads out by hand "
                "instead.")
    else:  # every head knocked out alone, each in a row of one batch: the ranking, and what ticking one shows
        alone = memo.get(("alone", *text_key, target, mode), model, lambda: circuits.knock_outs(
            model, ids, [[lh] for lh in every], targets, mode, means))
        knocks.update((_names(knock.heads), knock) for knock in alone)
        effects = sorted((circuits.HeadEffect(*knock.heads[0], knock.loss, knock.loss - intact_loss)
                          for knock in alone), key=lambda effect: -effect.added)
        note = (f"Most needed: {circuits.head_name(effects[0].layer, effects[0].head)} ({effects[0].added:+.3f} "
                "without it).")
        # the loss falls most without the first; a change under KNOCK_BARELY is none
        hurting = [effect for effect in effects if effect.added <= -KNOCK_BARELY][::-1]
        if hurting:  # a head can push this target up and still hurt the text as a whole
            one = len(hurting) == 1
            note += (f" Without {_names([(e.layer, e.head) for e in hurting[:3]])}"
                     f"{' and others' if len(hurting) > 3 else ''} the loss falls: on this text "
                     f"{'it hurts' if one else 'they hurt'} more than {'it helps' if one else 'they help'}.")
        barely = sum(abs(effect.added) < KNOCK_BARELY for effect in effects)
        if barely:
            note += f" {barely} of {len(effects)} move the loss by under {KNOCK_BARELY} either way."
    if knocked_heads and _names(knocked_heads) not in knocks:
        knocks[_names(knocked_heads)] = memo.get(("knocked", *text_key, target, tuple(knocked_heads), mode), model,
                                                 lambda: circuits.knock_outs(model, ids, [knocked_heads], targets,
                                                                             mode, means)[0])
    tokens = [_label(label) for label in labels(tokenizer, ids)]
    return _Reading(model, tokenizer, ids, tokens, probabilities, targets, attributions, keys, chosen,
                    knocked_heads, mode, knocks, intact_loss, effects, note, subset, name, memo,
                    {lh: writes[i] for i, lh in enumerate(heads)}, logits, versus)


def _head_at(reading: _Reading, position: int) -> tuple[int, int]:
    """The chosen head, or the head whose part of the logit at ``position`` is largest."""
    return reading.head if reading.head is not None else _strongest(reading, position)


def _strongest(reading: _Reading, position: int) -> tuple[int, int]:
    """The head with the longest bar at ``position``: the largest part, up or down."""
    return _strongest_of(reading.attributions[position], reading.model.config)


def _strongest_of(parts: circuits.LogitAttribution, config) -> tuple[int, int]:
    """The head whose part is largest in size, for the guess or against it. A learner was shown the head that pushed
    the guess up most (+0.07) beside a head whose red bar (-2.3) was thirty times longer, and could not tell which
    head decided."""
    return max(_every_head(config), key=lambda lh: abs(parts.head(*lh)))
