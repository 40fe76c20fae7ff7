"""Why tab: from a head's pattern to the model's next character, on the learner's own text.

Three views of one checkpoint at one position: **why this character** (the target's logit split into the parts that
wrote it, and for the chosen head one picture from its pattern to the next character: its weights, what it writes
from each key, their product, the sum that is its bar, the logit and the probability), **what the head reads and
writes** (its QK and OV circuits over the vocabulary, the strongest pairs in words) and **knock heads out** (the
loss and the prediction without them, and every head ranked by the loss it adds). The maths is playground.circuits;
this module checks the inputs, prices the view and lays it out. Renders on arrival and on every edit (``/why`` for
API clients).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import itertools
import json
import re
from collections import Counter
from collections.abc import Iterator
from typing import NamedTuple

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import torch

from playground import budget, checkpoints, checks, circuits, head_scores
from playground.tokenizer import CharTokenizer, escape_text, labels
from playground.ui import chain_plots, chart_deck, plots
from playground.ui import why_page as script  # the page's own script: what the browser runs
from playground.ui.common import AppContext, RecentReadings, checkpoint_dropdown, fold, keep_on_refusal
from playground.ui.events import wire
from playground.ui.why_page import (
    CIRCUITS_DECK,
    DECK,
    HEADS_DECK,
    HERE,
    KNOCK_BARELY,
    KNOCK_BARELY_MOVES,
    KNOCK_COLUMNS,
    KNOCK_FALLS,
    KNOCK_FOLD,
    KNOCK_HINT,
    KNOCK_NAMED,
    LOOK_FOR_KNOCK,
    RANKING_DECK,
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
QUIET_HEADS = 0.5  # the heads (or the named head) write less than this fraction of the largest other part: said
MAX_TOKENS = 256  # the text a view reads: its attention maps and its figures stay small whatever the model
MAX_CIRCUIT_TOKENS = 96  # rows and columns of a QK or OV table drawn: a character vocabulary fits whole
MAX_RANKED_HEADS = 48  # knock-out ranking costs a forward pass a head: GPT-2's 144 are knocked out by hand
PAIRS = 5
STEP_THROUGH_PX = 320  # the step-through button's width: its words on one line, within a phone's 358 px
# px: a part's row on a touch screen, where a tap on it opens that head: a finger's smallest target (WCAG 2.5.8; the
# rows were 18 px), and the shipped model's 27 parts still fit one phone screen; the head list is the 44 px way there
PART_TOUCH_ROW_PX = 24
# "this character": the heading's, the model's guess or the target typed (with a target the line said "the guess")
HEAD_NAMES_INFO = "L3 H1 is layer 3's head 1, L2 MLP layer 2's MLP (both counted from 0)"  # the bars' names
LOOK_FOR_PARTS = "**Look for:** the longest bars. Green pushed this character up, red down."
# the two characters by name: with a target typed, "the guess" read as the model's (a learner's `!` against the
# model's `?`)
LOOK_FOR_VERSUS = "**Look for:** the longest bars. Green favours `{target}`, red `{rival}`."
LOOK_FOR_HEAD = ("**Look for:** read down: weight (①) × write (②) = push (③); pushes sum to the head's bar (④); "
                 "softmax (⑤).")
TABLE_RANK_SHOWN = 3  # a rank past this and past a quarter of the row in a head's tables (QK: the key; OV: the
# target, where the head pushed it up) is called low, with its reason: the head looks by position, or (past the first
# layer) reads what the layers before wrote, neither of which the tables read
LOOKED_AT = 2  # the keys the head's heading names as where it looked most at this query
CHAIN_MORE = ("② is what the head would add to the target's logit if all its weight were on that key: the key's "
              "value, through the head's share of the output projection, read the way the bars above read every "
              "part. The weights add up to 1, so the pushes add up to exactly this head's bar. \"Every other part\" "
              "is the embeddings, the other heads, the MLPs and the biases. Softmax compares every character's "
              "logit: a push helps the probability only as far as it lifts this logit above the others.")
IMPORTANT_BARS = 3  # bars labelled first in each chart of a head's reading: the tallest, the strongest pushes
LOOK_FOR_CIRCUITS = "**Look for:** dark blue cells: strong pairs."  # where no cell is outlined (_in_the_tables)
LOOKS_LISTED = 4  # more places a head looks over the text, behind the fold
WRITES_LISTED = 3  # the tokens a head raises most over the text, behind the fold (the first in sight)
NEAREST = {"own word": "its own word"}  # a place named after "one place:" (WORD_PLACES' "within" does not read there)
# a head with no one place over the text: where it looked at the position on screen is the chain's, above (a learner
# read "most weight: the word before" in sight as a second answer beside the chain's key there)
CHAIN_HOLDS = "trust the chain above"  # where the tables' ranks are low (_in_the_tables): it is what the head did
NO_ONE_PLACE = "No one place: where it looks changes with the query"
WORD_PLACES = {"own word": "within its own word", "previous word": "at the word before", "word start": "at word starts"}
LOOKS_RATIO = 1.5  # a place gets this many times an even spread's weight: the head looks there more than chance (word
# starts are a quarter of a text's keys: a head with 49% on them against 25% was said to look nowhere in particular)
BESIDE = 0.5  # a second place, sharing no key with the first, named beside it where it gets this much of the first's
# weight beyond an even spread (a learner read layer 2's "at the word before" where, at the default position, the
# heads looked within their own word, with nearly as much of their weight there over the text)
LOOKS_CLEARLY = 0.15  # a place gets this much of a head's weight beyond an even spread: the head looks there (a
# learner read L3 H1's 9% on newlines, against 3%, as its job, which no chain of it showed)
# when the Look-for line calls a rank low (_low, _in_the_tables), said behind the fold: a stranger found "18th" low at
# one position and "39th of 65" unremarked at another (where the head had pushed the guess down)
LOW_RANKS = (f"The Look-for line calls a rank low past the {TABLE_RANK_SHOWN}rd and past a quarter of its row; the "
             "guess's rank in OV only where the head pushed it up, since one it pushed down ranks low as the chain "
             "says.")
CIRCUIT_MORE = ("Both tables read each character's token embedding alone, without its position, through the "
                "layer's LayerNorm: for a layer past the first that is the direct path, as if the head read the input "
                "itself. QK: the scaled score a query character gives a key character (softmax runs over a row). OV: "
                "the logits the head writes when all its weight is on one character, through W_V, W_O, the final "
                "norm and the LM head.")

NOTEBOOK_MORE = ("Notebook 004's model: one layer of heads, each reading its own slice of the embedding, then the "
                 "output projection and the output layer, with no norm, MLP or residual. Both tables read each "
                 "character's token embedding alone, without its position. QK: the scaled score a query character "
                 "gives a key character. OV: the logits the head writes when all its weight is on one character, "
                 "through W_V, its columns of the projection and the output layer (without its bias).")


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


READING_CACHE_SIZE = 24  # pieces of readings kept: a text's every-position pass, its ranking, a few heads' circuits


class ReadingCache(RecentReadings):
    """The last READING_CACHE_SIZE pieces of the Why tab's readings (a text's attribution at every position, its
    ranking, a knock-out's pass, a head's circuits): a new head, knock-out or position reads the text once, not at
    every click."""

    def __init__(self, size: int = READING_CACHE_SIZE) -> None:
        super().__init__(size)

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
             position=None, memo: ReadingCache | None = None,
             split: str = VERSUS) -> Iterator[tuple[_Reading, int | None]]:
    """The text read at every position for these settings (priced and admitted first), and ``position`` checked
    against it (None stays None), held admitted while the caller works with it: the price counts a head's circuit
    tables, its figures and the knock-outs one tick away, which the handlers make from the reading. ``memo``: pieces
    read before (none kept when None)."""
    loaded, ids, target, chosen, knocked_heads, mode, versus, dropped = _prepare(ctx, checkpoint, text, target, head,
                                                                                 knocked, mode, split)
    T = ids.numel()
    if position is not None:
        position = _position(position, T)
    subset = _circuit_tokens(loaded.config.vocabulary_size, ids)
    memo = memo if memo is not None else ReadingCache(0)
    with ctx.budget.reserve(_cost(loaded.config, T, subset), hint=f"use a shorter text (it is {T} tokens)"):
        reading = _read(loaded.model, loaded.tokenizer, ids, target, chosen, knocked_heads, mode, subset,
                        loaded.name, memo, versus)
        yield reading._replace(dropped=dropped, reads=_reads(loaded.config)), position


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


def _colours(values: list[float]) -> list[str]:
    return ["#2f9e44" if v >= 0 else "#e03131" for v in values]


def _who_decides(parts: circuits.LogitAttribution, named: tuple[int, int]) -> str:
    """A sentence where the heads together, or the head named, write little beside the largest other part (an MLP,
    an embedding, a bias), from the numbers: "No head decides this one: the heads together write +0.30, L2 MLP
    +2.90; all bars sum to +4.10; the longest head bar is L2 H3's." (the head the list opens, which may have pushed
    against the guess: a learner expected a green one); "" where a head does decide."""
    values = parts.values.tolist()
    others = [(abs(v), name, v) for name, kind, v in zip(parts.names, parts.kinds, values) if kind != "head"]
    heads = [v for kind, v in zip(parts.kinds, values) if kind == "head"]
    if not others or not heads:
        return ""
    _, largest, written = max(others)
    together, own = sum(heads), parts.head(*named)
    if abs(together) < QUIET_HEADS * abs(written):
        return (f" **No head decides this one:** the heads together write {together:+.2f}, {largest} {written:+.2f}; "
                f"all bars sum to {parts.logit:+.2f}; the longest head bar is {circuits.head_name(*named)}'s.")
    if abs(own) < QUIET_HEADS * abs(written):
        return (f" **No one head decides this one:** {circuits.head_name(*named)} writes {own:+.2f}, {largest} "
                f"{written:+.2f}; all bars sum to {parts.logit:+.2f}.")
    return ""


def _who_pushed(parts: circuits.LogitAttribution, named: tuple[int, int], target: str) -> str:
    """Where the head named decides (_who_decides says nothing), that it pushed hardest, its part and which way:
    " **L3 H1 pushed hardest** for `?`: +2.81." (a learner read "-2.66" under a typed target as a push for it; the
    character last, "against `.`." read as "..")."""
    part = parts.head(*named)
    way = "for" if part >= 0 else "against"
    return f" **{circuits.head_name(*named)} pushed hardest** {way} `{target}`: {part:+.2f}."


def _heading(reading: _Reading, position: int) -> str:
    parts = reading.attributions[position]
    target_id = parts.target_id
    probabilities = reading.probabilities[position]
    name = _label(reading.tokenizer.label(target_id))
    rank = int((probabilities > probabilities[target_id]).sum()) + 1
    strongest = _strongest(reading, position)
    said = _who_decides(parts, strongest) or _who_pushed(parts, strongest, name)
    quiet = said + _dropped_line(reading)
    if parts.rival_id is None:
        return (f"### Why `{name}` after `{reading.tokens[position]}` (position {position})\n\n{LOOK_FOR_PARTS}"
                f"{quiet}\n\nThe model gives `{name}` probability {float(probabilities[target_id]):.3f} (its choice "
                f"number {rank}); its logit {parts.logit:.3f} is the sum of these {len(parts.names)} bars.")
    rival = _label(reading.tokenizer.label(parts.rival_id))
    role = "the runner-up" if rank == 1 else "the model's guess"
    logits = reading.logits[position]
    return (f"### Why `{name}` and not `{rival}` after `{reading.tokens[position]}` (position {position})\n\n"
            f"{LOOK_FOR_VERSUS.format(target=name, rival=rival)}{quiet}\n\n"
            f"`{name}` (p {float(probabilities[target_id]):.3f}) against {role} "
            f"`{rival}` ({float(probabilities[parts.rival_id]):.3f}): logits {float(logits[target_id]):.3f} − "
            f"{float(logits[parts.rival_id]):.3f} = {parts.logit:+.3f} is the sum of these {len(parts.names)} bars.")


def _head_heading(reading: _Reading, position: int, layer: int, which: int) -> str:
    weights, shares = (keys[position] for keys in reading.keys[(layer, which)])
    seen = slice(0, position + 1)
    # the character whose push has the head's own sign: a head that lowers the logit is read by what pushed down
    part = reading.attributions[position].head(layer, which)
    top = int((shares[seen] if part >= 0 else -shares[seen]).argmax())
    pushed = "Pushed it up most" if float(shares[top]) >= 0 else "Pushed it down most"
    parts = reading.attributions[position]
    what = "the logit" if parts.rival_id is None else "the logit difference"
    # what the head looked for at this query, beside the circuits' pair over the vocabulary (a stranger read "␣ looks
    # for a" as what it did here)
    looked = _looked_most(reading, position, layer, which)
    at = " and ".join(f"{_at(reading, i)} ({float(weights[i]):.2f})" for i in looked)
    # a head below zero said in words: where no head decides, the head with the longest bar can be one that worked
    # against the guess, and a stranger found only its sign saying so
    against = f", **against** `{_label(reading.tokenizer.label(parts.target_id))}`" if part < 0 else ""
    return (f"### {circuits.head_name(layer, which)} at position {position}\n\n{LOOK_FOR_HEAD}\n\nIts part "
            f"of {what}: {part:+.3f} of {parts.logit:+.3f}{against}. After `{reading.tokens[position]}` it looked most "
            f"at {at}. {pushed}: `{reading.tokens[top]}` at {top} (weight {float(weights[top]):.2f}, "
            f"{float(shares[top]):+.3f}).")


def _looked_most(reading: _Reading, position: int, layer: int, which: int) -> list[int]:
    """The LOOKED_AT keys the head weighed most at ``position``, the heaviest first."""
    weights = reading.keys[(layer, which)][0][position, : position + 1]
    return torch.topk(weights, min(LOOKED_AT, position + 1)).indices.tolist()


def _texts(reading: _Reading, position: int) -> tuple[str, str, str]:
    """(heading, the head's heading, the knock-out heading) at ``position``."""
    return (_heading(reading, position), _head_heading(reading, position, *_head_at(reading, position)),
            _knock_text(reading, position))


def _knock_text(reading: _Reading, position: int) -> str:
    """The knock-out heading at ``position``. The page writes the same from the same numbers (why_page's
    knockText): keep the two alike."""
    names = _names(reading.knocked_heads)
    more = len(reading.knocked_heads) - KNOCK_NAMED + 1  # past KNOCK_NAMED: three named, the rest counted
    titled = f"{_names(reading.knocked_heads[:KNOCK_NAMED - 1])} and {more} more" if more > 1 else names
    lines = [f"### {f'Knocked out: {titled}' if names else 'Knock heads out'}\n\n{LOOK_FOR_KNOCK}"]
    if names:
        target = _label(reading.tokenizer.label(reading.targets[position]))
        intact, knocked = reading.knocks[""], reading.knocks[names]
        guess, knocked_guess = (_label(reading.tokenizer.label(k.guesses[position])) for k in (intact, knocked))
        p_target, knocked_p = intact.target_probabilities[position], knocked.target_probabilities[position]
        table = [KNOCK_COLUMNS, "|---|---|---|---|"]
        if intact.loss is not None:
            change = knocked.loss - intact.loss
            table.append(f"| loss on the text | {intact.loss:.3f} | {knocked.loss:.3f} | {change:+.3f} |")
        table.append(f"| guess at position {position} | `{guess}` | `{knocked_guess}` | "
                     f"{'same' if guess == knocked_guess else 'changed'} |")
        table.append(f"| p(`{target}`) | {p_target:.3f} | {knocked_p:.3f} | {knocked_p - p_target:+.3f} |")
        lines.append("\n".join(table))
        if intact.loss is not None and abs(change) < KNOCK_BARELY:
            lines.append(KNOCK_BARELY_MOVES[len(reading.knocked_heads) > 1])
        elif intact.loss is not None and change < 0:
            lines.append(KNOCK_FALLS[len(reading.knocked_heads) > 1])
    else:
        lines.append(KNOCK_HINT)
    lines.append(KNOCK_FOLD[0] + reading.ranking_note + KNOCK_FOLD[1])  # the ranking's words, behind the fold
    return "\n\n".join(lines)


def _contest(reading: _Reading, position: int) -> tuple[str, str | None]:
    """The target's label and its rival's at ``position`` (None where the bars split the target's logit alone)."""
    parts = reading.attributions[position]
    rival = None if parts.rival_id is None else _label(reading.tokenizer.label(parts.rival_id))
    return _label(reading.tokenizer.label(parts.target_id)), rival


def _parts_title(reading: _Reading, position: int) -> str:
    target, rival = _contest(reading, position)
    if rival is None:
        return f"The logit of '{target}', part by part"
    return f"The logit of '{target}' − the logit of '{rival}', part by part"


def _parts_axis(reading: _Reading, position: int) -> str:
    """What the parts' bars are, under them: "added to logit('u') − logit('a')", in the logit's own units (a stranger
    read a bare "logit" as the model's; another read "share of" as a fraction, where the bars add up to +2.852)."""
    target, rival = _contest(reading, position)
    return f"added to logit('{target}')" if rival is None else f"added to logit('{target}') − logit('{rival}')"


def _parts_figure(reading: _Reading, position: int):
    values = reading.attributions[position].values.tolist()
    return plots.horizontal_bar_chart(reading.attributions[position].names, values, _parts_title(reading, position),
                                      _parts_axis(reading, position), colours=_colours(values),
                                      touch_row_px=PART_TOUCH_ROW_PX)


class Chain(NamedTuple):
    """One head at one position, from its pattern to the next character: the model's own numbers (float32)."""

    labels: list[str]  # the keys read, positions 0 to the position
    weights: torch.Tensor  # (position + 1,): where the head looked
    writes: torch.Tensor  # (position + 1,): what it writes from each key onto the target, per unit of weight
    pushes: torch.Tensor  # weights * writes: each key's share of the head's part
    part: float  # the head's part of the logit (its bar)
    others: float  # every other part, summed
    logit: float  # the model's logit of the target
    target: int
    probability: float  # the target's probability
    other: int  # the best other token: the runner-up where the target is the guess, else the guess
    other_probability: float
    guessed: bool  # the target is the model's guess
    target_logit: float = 0.0  # the model's logits of the target and of the other token
    other_logit: float = 0.0
    versus: bool = False  # the chain reads logit(target) - logit(other): part, others and logit are differences


def _chain(reading: _Reading, position: int, layer: int, which: int) -> Chain:
    """The chain of head ``which`` of ``layer`` at ``position``, from the reading (nothing computed again)."""
    seen = slice(0, position + 1)
    weights, shares = (keys[position, seen] for keys in reading.keys[(layer, which)])
    parts = reading.attributions[position]
    index = parts.names.index(circuits.head_name(layer, which))
    others = torch.cat([parts.values[:index], parts.values[index + 1:]]).sum()
    probabilities = reading.probabilities[position]
    best, second = torch.topk(probabilities, 2).indices.tolist()
    guessed = best == parts.target_id
    other = second if guessed else best
    if parts.rival_id is not None:
        other = parts.rival_id  # the likeliest other token too, whatever ties make topk choose
    logits = reading.logits[position]
    return Chain(reading.tokens[seen], weights, reading.writes[(layer, which)][position, seen], shares,
                 float(parts.values[index]), float(others), parts.logit, parts.target_id,
                 float(probabilities[parts.target_id]), other, float(probabilities[other]), guessed,
                 float(logits[parts.target_id]), float(logits[other]), parts.rival_id is not None)


def _chain_arguments(reading: _Reading, position: int, layer: int, which: int) -> dict:
    """The chain at ``position`` as chain_changes' (and chain_figure's) arguments. Where not every key's label
    fits a phone, the tallest weights and the strongest pushes keep theirs, then the query (a stranger found the
    tallest bar unlabelled)."""
    chain = _chain(reading, position, layer, which)
    name = reading.tokenizer.label
    tallest = sorted(range(position + 1), key=lambda i: -float(chain.weights[i]))[:IMPORTANT_BARS]
    strongest = sorted(range(position + 1), key=lambda i: -abs(float(chain.pushes[i])))[:IMPORTANT_BARS]
    return dict(labels=chain.labels, weights=chain.weights.tolist(), writes=chain.writes.tolist(),
                pushes=chain.pushes.tolist(), head=circuits.head_name(layer, which),
                target=_label(name(chain.target)), position=position, part=chain.part, others=chain.others,
                logit=chain.logit, probability=chain.probability, other=_label(name(chain.other)),
                other_probability=chain.other_probability, guessed=chain.guessed, room_px=plots.LABEL_ROOM_PX,
                versus=chain.versus, logits=(chain.target_logit, chain.other_logit),
                decides=not _who_decides(reading.attributions[position], (layer, which)),
                important=[*(i for pair in zip(tallest, strongest) for i in pair), position])


def _chain_changes(reading: _Reading, position: int, layer: int, which: int) -> dict:
    """The chain's picture at ``position`` as changes to chain_plots.chain_base (what the heads deck sends a view)."""
    return chain_plots.chain_changes(**_chain_arguments(reading, position, layer, which))


def _numbers(reading: _Reading, position: int, layer: int, which: int) -> dict:
    """The parts and the chain of head ``which`` of ``layer`` at ``position`` as plain numbers (what /why's figures
    draw, unrounded float32): the parts sum to ``logit``; the keys' pushes (weight x write) sum to the head's
    ``part``, which with ``others`` is the logit. A worked key: weight 0.7, write +2.0 -> push +1.4."""
    parts = reading.attributions[position]
    chain = _chain(reading, position, layer, which)
    tokenizer, ids = reading.tokenizer, reading.ids.tolist()

    def token(token_id: int) -> dict:
        return {"character": tokenizer.decode([token_id]), "token_id": token_id}

    return {
        # what the parts split: "versus", logit(target) - logit(runner_up); "alone", the target's logit. ``total`` is
        # what they sum to (the difference, or the logit), as ``part`` + ``others`` of the head does
        "split": "versus" if chain.versus else "alone", "total": chain.logit,
        "position": position, "target": token(chain.target), "logit": chain.target_logit,
        "probability": chain.probability, "guessed": chain.guessed,
        # the likeliest token other than the target: the runner-up where the target is the guess, else the guess
        "runner_up": {**token(chain.other), "probability": chain.other_probability, "logit": chain.other_logit},
        "parts": [{"name": name, "kind": kind, "value": value}
                  for name, kind, value in zip(parts.names, parts.kinds, parts.values.tolist())],
        "head": {"name": circuits.head_name(layer, which), "part": chain.part, "others": chain.others,
                 "keys": [{"position": key, **token(ids[key]), "weight": weight, "write": write, "push": push}
                          for key, (weight, write, push) in enumerate(zip(chain.weights.tolist(),
                                                                          chain.writes.tolist(),
                                                                          chain.pushes.tolist()))]},
    }


def _parts_changes(reading: _Reading, position: int) -> dict:
    """The parts' figure at ``position`` as changes to the deck's base figure (no figure built)."""
    values = [float(f"{v:.6g}") for v in reading.attributions[position].values.tolist()]  # they sum to the logit
    title, top = plots._title_layout(_parts_title(reading, position))
    return {"data": [{"x": values, "marker": {"color": _colours(values)}}],
            "layout": {"title": title, "margin": {"t": top},
                       "xaxis": {"title": {"text": _parts_axis(reading, position)}}}}


def _circuits_view(reading: _Reading, layer: int, which: int) -> tuple[str, object, object]:
    """(heading, QK heatmap, OV heatmap) of one head over the vocabulary (or the subset). The text's heads are kept
    together, one piece of the memo (every head's are sent to the page, and would push the rest out one by one)."""
    held = reading.memo.get(("circuits", reading.name, tuple(reading.ids.tolist())), reading.model, dict)
    if (layer, which) not in held:
        held[(layer, which)] = _read_circuits(reading, layer, which)
    return held[(layer, which)]


def _tables(reading: _Reading, layer: int, which: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The head's QK and OV tables over the vocabulary (or the subset), kept with the text's other heads'."""
    held = reading.memo.get(("tables", reading.name, tuple(reading.ids.tolist())), reading.model, dict)
    if (layer, which) not in held:
        held[(layer, which)] = (circuits.qk_circuit(reading.model, layer, which, reading.subset),
                                circuits.ov_circuit(reading.model, layer, which, reading.subset))
    return held[(layer, which)]


def _table_rows(reading: _Reading) -> list[int]:
    """The token ids of the circuit tables' rows (and columns), in order: the vocabulary, or the subset."""
    return (reading.subset.tolist() if reading.subset is not None
            else list(range(reading.model.config.vocabulary_size)))


def _table_cells(reading: _Reading, position: int, layer: int, which: int) -> tuple[int, ...] | None:
    """The cells of the head's tables this position reads, as their rows' and columns' indices: (the query's QK row,
    the column of the key the head weighed most; that key's OV row, the target's column, or where a BPE guess is not
    in the table the column its row promotes most). None where the query or the key is outside the tables (a long
    BPE text)."""
    index = {token: row for row, token in enumerate(_table_rows(reading))}
    key = _looked_most(reading, position, layer, which)[0]
    query, looked, target = (int(reading.ids[position]), int(reading.ids[key]),
                             reading.attributions[position].target_id)
    if not {query, looked} <= index.keys():
        return None
    _, ov = _tables(reading, layer, which)
    column = index[target] if target in index else int(ov[index[looked]].argmax())
    return index[query], index[looked], index[looked], column


def _in_the_tables(reading: _Reading, position: int, layer: int, which: int) -> str:
    """The circuits' Look-for line: where this position's query and the key it looked at most sit in the head's
    tables below, in words: "**Look for:** outlined cells, position 30: QK row `e` ranks `f` 4th of the text's 32;
    OV row `f` ranks `␣` 39th of 65.", and where they are low "… QK row `o` ranks `h` 29th; OV row `h` ranks `?` 18th.
    Both low: tables read characters, not layers 0–2; trust the chain above." A stranger read the tables' strongest
    pairs, unrelated to the position, as what the head did here; a second, shown the ranks, found them contradicting
    the chain (the head put 0.55 on `h` and wrote `?` from it), with the reason behind the fold; a later one, given
    the reason, still read two answers. A low rank (_low: the key in QK, or the target in OV where the head pushed it
    up) is named, its reason said, and that the chain holds: a head that looks by position (_by_position), at any
    layer, reads what the tables leave out; past the first layer, the layers before. A target outside the tables (a
    BPE guess) gives what the key's OV row promotes most instead. Where the query or the key is outside them (a long
    BPE text) nothing is outlined, and the line is LOOK_FOR_CIRCUITS. The same cells are outlined on the tables
    (_cell_shapes)."""
    cells = _table_cells(reading, position, layer, which)
    if cells is None:
        return f"\n\n{LOOK_FOR_CIRCUITS}"
    query, key, _, column = cells
    rows = _table_rows(reading)
    index = {token: row for row, token in enumerate(rows)}
    qk, ov = _tables(reading, layer, which)
    in_text = sorted({index[token] for token in reading.ids.tolist() if token in index})
    qk_rank = int((qk[query, in_text] > qk[query, key]).sum()) + 1
    name = lambda row: _label(reading.tokenizer.label(rows[row]))  # noqa: E731
    ov_rank = None
    if rows[column] == reading.attributions[position].target_id:
        ov_rank = int((ov[key] > ov[key, column]).sum()) + 1
    # a target the head pushed down ranks low in the key's OV row as the chain says: no reason to give
    pushed_up = reading.attributions[position].head(layer, which) > 0
    lows = [kind for kind, low in (("QK", _low(qk_rank, len(in_text))),
                                   ("OV", ov_rank is not None and pushed_up and _low(ov_rank, len(rows)))) if low]
    low = " Both low:" if len(lows) == 2 else f" {''.join(lows)} low:"  # which rank (a learner could not tell)
    # which answer holds, said with the reason: a learner given low ranks beside the chain's key read two answers.
    # Then the ranks go without their rows' lengths ("29th", not "29th of the text's 32"): "low" says as much, and
    # the words in sight stay within 60
    why = ""
    if lows and _by_position(_looks(reading, layer, which)):
        why = f"{low} tables leave out position; {CHAIN_HOLDS}."
    elif layer > 0 and lows:  # the tables read embeddings alone (the direct path), not what the layers before wrote
        before = f"layers 0–{layer - 1}" if layer > 1 else "layer 0"
        why = f"{low} tables read characters, not {before}; {CHAIN_HOLDS}."
    of_text, of_rows = ("", "") if why else (f" of the text's {len(in_text)}", f" of {len(rows)}")
    promotes = (f"ranks `{name(column)}` {_ordinal(ov_rank)}{of_rows}" if ov_rank is not None
                else f"promotes `{name(column)}` most")  # a BPE guess outside the table's tokens: its row's first
    return (f"\n\n**Look for:** outlined cells, position {position}: QK row `{name(query)}` ranks `{name(key)}` "
            f"{_ordinal(qk_rank)}{of_text}; OV row `{name(key)}` {promotes}.{why}")


def _looks(reading: _Reading, layer: int, which: int) -> list[head_scores.Look]:
    """Where the head looks over the text (head_scores.looks_over_text), the clearest first; [] where its weights
    were not read (a model with more heads than MAX_RANKED_HEADS keeps only the heads it shows)."""
    if (layer, which) not in reading.keys:
        return []

    def read() -> list[head_scores.Look]:
        words = None
        if isinstance(reading.tokenizer, CharTokenizer):  # a BPE token's letters are not its word's
            words = head_scores.word_numbers("".join(reading.tokenizer.characters[i] for i in reading.ids.tolist()))
        return head_scores.looks_over_text(reading.keys[(layer, which)][0], reading.ids, words)

    return reading.memo.get(("looks", reading.name, tuple(reading.ids.tolist()), layer, which), reading.model, read)


def _above(look: head_scores.Look) -> bool:
    """Whether a place gets LOOKS_RATIO times what an even spread gives it."""
    return look.share >= LOOKS_RATIO * look.chance


def _clear(look: head_scores.Look) -> bool:
    """Whether the head clearly looks there: LOOKS_RATIO times an even spread and LOOKS_CLEARLY beyond it."""
    return _above(look) and look.lift >= LOOKS_CLEARLY


def _by_position(looks: list[head_scores.Look]) -> bool:
    """Whether the head clearly looks by position (a distance back, or position 0), which its tables leave out."""
    return bool(looks) and _clear(looks[0]) and looks[0].kind in ("distance", "first")


def _look_name(reading: _Reading, look: head_scores.Look) -> str:
    """A Look's place in words: "1 back", "at itself", "at position 0", "at `\\n`", "within its own word", "at the
    word before", "at word starts"."""
    if look.kind in WORD_PLACES:
        return WORD_PLACES[look.kind]
    if look.kind == "distance":
        return "at itself" if look.what == 0 else f"{look.what} back"
    if look.kind == "first":
        return "at position 0"
    return f"at `{_label(reading.tokenizer.label(look.what))}`"


def _beside(reading: _Reading, looks: list[head_scores.Look]) -> head_scores.Look | None:
    """The place named beside the first, where the first is clear (_clear): one that shares no key with it
    (head_scores.apart), gets LOOKS_RATIO times an even spread's weight and BESIDE times the first's weight beyond it;
    None where none does."""
    if not looks or not _clear(looks[0]):
        return None
    first = int(reading.ids[0])
    return next((look for look in looks[1:] if head_scores.apart(looks[0], look, first) and _above(look)
                 and look.lift >= BESIDE * looks[0].lift), None)


def _looks_line(reading: _Reading, layer: int, which: int) -> str:
    """What the head does over the learner's text, in sight under "What L0 H2 does over your text": "Looks 1 back (92%
    of its weight overall; by chance: 5%); writes `␣` most.", with a second place where one shares no key with the first
    and comes near it (_beside: "Looks at `\\n` (23% …) and at position 0 (20%; 5%)"); where no place gets LOOKS_RATIO
    times an even spread and LOOKS_CLEARLY beyond it (_clear), that where it looks changes from query to query, the
    chain above being what it did at the position on screen; its strongest look and the place that comes nearest are
    behind the fold (_looks_more): in sight, "most weight: the word before" read as a second answer beside the chain's
    key at that position. The QK and OV tables cannot say either: a previous-token head looks by position, which
    they leave out, and a later layer's head reads what the layers before wrote. What it writes is the token _writes
    puts first. Only what it writes where its weights were not read."""
    looks = _looks(reading, layer, which)
    writes = f"writes `{_label(reading.tokenizer.label(_writes(reading, layer, which)[0][0]))}` most"
    if not looks:
        return f"\n\n{writes.capitalize()}."
    top = looks[0]
    if _clear(top):
        second = _beside(reading, looks)
        beside = "" if second is None else \
            f" and {_look_name(reading, second)} ({second.share:.0%}; {second.chance:.0%})"
        # "overall": a learner read the text's average as where the head looked at the position on screen
        return (f"\n\nLooks {_look_name(reading, top)} ({top.share:.0%} of its weight overall; by "
                f"chance: {top.chance:.0%}){beside}; {writes}.")
    return f"\n\n{NO_ONE_PLACE}; {writes}."


def _no_one_place_more(reading: _Reading, layer: int, which: int) -> str:
    """For the fold of a head with no one place (_looks_line): its strongest look over the text (one concrete look,
    head_scores.strongest_look: "`␣`@54 to `R`@48 (0.94)") and the place that comes nearest to one; "" for a head
    that has one."""
    looks = _looks(reading, layer, which)
    if not looks or _clear(looks[0]):
        return ""
    top = looks[0]
    nearest = NEAREST.get(top.kind) or _look_name(reading, top).removeprefix("at ")
    strongest = head_scores.strongest_look(reading.keys[(layer, which)][0])
    example = "" if strongest is None else \
        f"Its strongest look: {_at(reading, strongest[0])} to {_at(reading, strongest[1])} ({strongest[2]:.2f}). "
    return (f"{example}Nearest to one place: {nearest}, {top.share:.0%} of its weight (by chance: "
            f"{top.chance:.0%}).\n\n")


def _at(reading: _Reading, position: int) -> str:
    """A token of the text at its position, as the chain names its keys: "`h`@63"."""
    return f"`{reading.tokens[position]}`@{position}"


def _writes(reading: _Reading, layer: int, which: int) -> list[tuple[int, float]]:
    """What the head writes over the text (circuits.head_writes: its mean share of each logit, centred), the
    WRITES_LISTED tokens it raises most, the most first: (token id, share). Every head's at once, one piece of the memo
    per text."""
    written = reading.memo.get(("writes", reading.name, tuple(reading.ids.tolist())), reading.model,
                               lambda: circuits.head_writes(reading.model, reading.ids))[layer, which]
    top = torch.topk(written, min(WRITES_LISTED, written.numel()))
    return list(zip(top.indices.tolist(), top.values.tolist()))


def _looks_more(reading: _Reading, layer: int, which: int) -> str:
    """For the fold: the next LOOKS_LISTED places the head looks over the text, those with LOOKS_RATIO times an even
    spread (a learner read "at itself 8% (6%)" as a place it looks). A character model's words are said to be runs of
    letters (a learner asked whether the space after a word is in it). Then the WRITES_LISTED tokens it writes
    most, with their shares."""
    writes = ", ".join(f"`{_label(reading.tokenizer.label(token))}` {value:+.2f}"
                       for token, value in _writes(reading, layer, which))
    wrote = (f"What it writes most over your text, its mean share of each logit less the mean over every logit: "
             f"{writes}.\n\n")
    first = _no_one_place_more(reading, layer, which)
    every = _looks(reading, layer, which)
    named = [*every[:1], _beside(reading, every)]  # in sight already (_looks_line), or just before (_no_one_place_more)
    looks = [look for look in every if look not in named and _above(look)][:LOOKS_LISTED]
    if not looks:
        return first + wrote
    listed = "; ".join(f"{_look_name(reading, look)} {look.share:.0%} ({look.chance:.0%})" for look in looks)
    words = " A word is a run of letters: spaces and punctuation are in none." if isinstance(
        reading.tokenizer, CharTokenizer) else ""
    return (f"{first}Where else it looks over your text, weight (and by chance): {listed}. \"By chance\" is what a "
            f"place would get if the head spread its weight evenly over every position a query may see. The line above "
            f"names a place that gets at least {LOOKS_RATIO:g} times its chance and {LOOKS_CLEARLY * 100:g} points of "
            f"weight more than chance.{words}\n\n{wrote}")


def _low(rank: int, of: int) -> bool:
    """A rank in a table's row the chain would not lead a reader to expect: past TABLE_RANK_SHOWN and a quarter of
    the row (a learner read "4th of 32" called low as a contradiction)."""
    return rank > max(TABLE_RANK_SHOWN, of // 4)


def _cell_shapes(reading: _Reading, position: int, layer: int, which: int) -> list[list[dict]]:
    """The outlines of _table_cells on the QK and the OV table (Plotly shapes, [QK's, OV's]): the row this position
    reads and, inside it, the cell. Empty where _table_cells is None."""
    cells = _table_cells(reading, position, layer, which)
    if cells is None:
        return [[], []]
    n = len(_table_rows(reading))
    return [plots.cell_outline(row, column, n) for row, column in (cells[:2], cells[2:])]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _read_circuits(reading: _Reading, layer: int, which: int) -> tuple[str, object, object]:
    model, tokenizer, subset = reading.model, reading.tokenizer, reading.subset
    config = model.config
    chosen = circuits.head_name(layer, which)
    vocabulary = [_label(label) for label in labels(tokenizer, subset if subset is not None else
                                                    torch.arange(config.vocabulary_size))]
    qk, ov = _tables(reading, layer, which)
    direct = " (direct path: embeddings only)" if layer > 0 else ""  # on the tables themselves; more: CIRCUIT_MORE
    shown_of = "" if subset is None else f" ({subset.numel()} of the {config.vocabulary_size:,} tokens: the text's, " \
                                         "then the lowest ids)"
    # the pairs in words are among the text's own characters: one the model never saw keeps a random embedding,
    # whose entries can be the table's largest and mean nothing
    in_text = set(reading.ids.tolist())
    among = [k for k, token in enumerate(subset.tolist() if subset is not None else range(config.vocabulary_size))
             if token in in_text]
    looks, promotes = (_pairs_in_words(qk, vocabulary, "looks for", among),
                       _pairs_in_words(ov, vocabulary, "promotes", among))
    # a learner read layer 0's "`!` looks for `!`" against its line in sight, "1 back: 74%"
    by_position = ("This head looks by position, which the tables leave out: their pairs say little of it. "
                   if _by_position(_looks(reading, layer, which)) else "")
    # past the first layer the pairs are the direct path's, like the tables: a stranger read "`o` looks for `J`" as a
    # second answer beside the chain
    direct_pairs = ("Like the tables, the pairs below read the characters alone, not what the layers before wrote; the "
                    "chain above is what the head did. " if layer > 0 else "")
    # the strongest pairs in sight, the rest behind the fold (a stranger counted 94 words before it)
    heading = (f"### What {chosen} does over your text{_looks_line(reading, layer, which)}{HERE}\n\n"
               f"<details><summary>more</summary>\n\n{_looks_more(reading, layer, which)}"
               f"{by_position}{direct_pairs}The strongest pairs among your text's characters: "
               f"{'; '.join(looks)}; {'; '.join(promotes)}.{shown_of}\n\n"
               f"{CIRCUIT_MORE if config.is_gpt else NOTEBOOK_MORE} {LOW_RANKS}\n\n</details>")
    qk_map = plots.vocabulary_heatmap(qk, vocabulary, f"QK of {chosen}{direct}: query (row) → key character",
                                      x_title="key", y_title="query", hover="query %{y} → key %{x}: score %{z:.3f}")
    ov_map = plots.vocabulary_heatmap(ov, vocabulary, f"OV of {chosen}{direct}: attended (row) → next character",
                                      x_title="promoted", y_title="attended",
                                      hover="attending to %{y}, the logit of %{x}: %{z:.3f}")
    return heading, qk_map, ov_map


def _ranking(reading: _Reading):
    if reading.effects is None:
        return None
    ordered = sorted(reading.effects, key=lambda e: (e.layer, e.head))
    return plots.horizontal_bar_chart([circuits.head_name(e.layer, e.head) for e in ordered],
                                      [e.added for e in ordered], "Loss added when each head alone is knocked out",
                                      "added loss")


def explain(ctx: AppContext, checkpoint: str, text: str, position, target: str, head: str = STRONGEST,
            knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS, *,
            memo: ReadingCache | None = None) -> WhyView:
    """Plain handler (``/why``): why the model gives ``target`` (empty: its own guess) after
    ``text[: position + 1]``, the chosen head's chain and circuits, and what knocking out the ``knocked`` heads
    changes, as the page shows them (its texts and figures), with the parts and the chain as numbers too.
    ``split``: VERSUS, the parts of logit(target) - logit(runner-up); ALONE, of the target's logit (numbers' "split"
    says which)."""
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, position, memo, split) as (reading, position):
        heading, head_heading, knock_heading = _texts(reading, position)
        layer, which = _head_at(reading, position)
        chain = chain_plots.chain_figure(**_chain_arguments(reading, position, layer, which))
        circuits_heading, qk, ov = _circuits_view(reading, layer, which)
        circuits_heading = circuits_heading.replace(HERE, _in_the_tables(reading, position, layer, which))
        # the tables are the head's, kept for every position: this position's outlines go on copies
        qk, ov = (go.Figure(figure).update_layout(shapes=shapes)
                  for figure, shapes in zip((qk, ov), _cell_shapes(reading, position, layer, which)))
        return WhyView(heading, _parts_figure(reading, position), head_heading, chain,
                       _numbers(reading, position, layer, which), circuits_heading, qk, ov, knock_heading,
                       _ranking(reading))


MAX_SENT_CIRCUITS = 4  # heads whose circuits the page is sent ahead where every head's would be too many
# every head's QK and OV tables are sent ahead while they hold at most this many cells (the shipped model's 16 heads
# over its 65 characters: 135,200 cells, about 0.8 MB), so a head chosen in the list is drawn in the page
MAX_SENT_CIRCUIT_CELLS = 150_000


def _key(*settings) -> str:
    return hashlib.sha1(repr(settings).encode()).hexdigest()[:16]


def _bases(reading: _Reading) -> dict:
    """The figures every view's figures are changes to (position 0's): a base carries only the charts' kind, the
    parts' names and its look; every view's changes carry the rest."""
    def build():
        figures = (_parts_figure(reading, 0), chain_plots.chain_base(reading.versus))
        return {name: json.loads(figure.to_json()) for name, figure in zip(("parts", "chain"), figures)}
    return reading.memo.get(("bases", reading.name, reading.versus), reading.model, build)


def _settings(checkpoint: str, text: str, target: str, split: str) -> dict:
    """The inputs a view was made for, as the page holds them: it leaves an answer for inputs it no longer shows."""
    return {"checkpoint": checkpoint, "text": text, "target": target, "split": split}


def _position_deck(reading: _Reading, key: str, positions, settings: dict | None = None) -> str:
    """The deck of these positions' parts, keyed "<T>:<key>" (the page reads the text's length from it): each view's
    texts are its heading and the name of the head with the longest bar there. ``settings``: the inputs it answers
    (_settings)."""
    views = {str(p): ([_heading(reading, p), circuits.head_name(*_strongest(reading, p))],
                      [{"base": "parts", "changes": _parts_changes(reading, p)}]) for p in positions}
    return chart_deck.deck_json(f"{reading.ids.numel()}:{key}", views, {"parts": _bases(reading)["parts"]},
                                settings=settings)


def _heads_deck(reading: _Reading, key: str, views) -> str:
    """The deck of heads' readings, one view "<head>@<position>" per (layer, head, position) in ``views``: its
    heading and its chain, from where it looked to the next character's probability."""
    sent = {f"{circuits.head_name(layer, which)}@{p}": ([_head_heading(reading, p, layer, which),
                                                         _in_the_tables(reading, p, layer, which),
                                                         json.dumps(_cell_shapes(reading, p, layer, which))],
                                                        [{"base": "chain",
                                                          "changes": _chain_changes(reading, p, layer, which)}])
            for layer, which, p in views}
    return chart_deck.deck_json(key, sent, {"chain": _bases(reading)["chain"]})


def _heatmap_changes(figure) -> dict:
    """A circuit's heatmap as changes to another of its kind (a base): its table, as float32 in base64 (Plotly's
    typed arrays; the values already rounded to 4 significant digits), its colour range and its title."""
    trace = figure.data[0]
    table = np.asarray(trace.z, dtype=np.float32)
    return {"data": [{"z": {"dtype": "f4", "bdata": base64.b64encode(table.tobytes()).decode(),
                            "shape": ", ".join(map(str, table.shape))}, "zmin": trace.zmin, "zmax": trace.zmax}],
            "layout": {"title": figure.layout.title.to_plotly_json(), "margin": {"t": figure.layout.margin.t}}}


def _circuits_deck(reading: _Reading, checkpoint: str, text: str, heads) -> str:
    """The circuits of these heads, each table as changes to one QK and one OV base (the labels and the look, sent
    once): every head of the shipped model is some 0.7 MB."""
    views, bases = {}, {}
    for layer, which in heads:
        heading, qk, ov = _circuits_view(reading, layer, which)
        for name, figure in (("qk", qk), ("ov", ov)):
            if name not in bases:
                bases[name] = json.loads(figure.to_json())
                del bases[name]["data"][0]["z"]
        views[circuits.head_name(layer, which)] = ([heading], [{"base": "qk", "changes": _heatmap_changes(qk)},
                                                               {"base": "ov", "changes": _heatmap_changes(ov)}])
    return chart_deck.deck_json(_key(checkpoint, text), views, bases)


def _every_circuit_fits(reading: _Reading) -> bool:
    config = reading.model.config
    n = config.vocabulary_size if reading.subset is None else reading.subset.numel()
    return config.layers_num * config.heads_num * 2 * n * n <= MAX_SENT_CIRCUIT_CELLS


def _knock_json(reading: _Reading, key: str, names: str | None = None, near: dict | None = None) -> str:
    """The numbers the page writes the knock-out heading from (why_page's knockText, as _knock_text does): per set
    of heads knocked out ("" the intact model; ``names``: only that set), the loss and, at each position, the guess
    and the target's probability. Every head alone comes with the ranking, so ticking one asks the server nothing.
    ``near``: the sets one tick away from ``names`` (_near_knocks), sent with it ("near" names it: the page asks no
    more)."""
    knocks = reading.knocks if names is None else {name: reading.knocks[name] for name in ("", names)}
    if near is not None:
        knocks = {**near, **knocks}
    guessed = sorted({guess for knock in knocks.values() for guess in knock.guesses})
    return json.dumps({
        "key": key, "note": reading.ranking_note,
        "targets": [_label(reading.tokenizer.label(target)) for target in reading.targets],
        "labels": {str(i): _label(reading.tokenizer.label(i)) for i in guessed},
        "sets": {name: {"loss": knock.loss, "guesses": knock.guesses, "p": knock.target_probabilities}
                 for name, knock in knocks.items()},
        **({"near": [names]} if near is not None else {})})


def _near_knocks(reading: _Reading) -> dict:
    """The knock-outs one tick away from the knocked heads (each other head added after them, each of them taken off)
    that the reading does not hold, by their names: one batched pass, made while the reading is admitted (its price
    counts the ranking's pass, which this one follows); none where the model has more heads than are ranked (each
    would be a forward pass)."""
    every = _every_head(reading.model.config)
    knocked = reading.knocked_heads
    if not knocked or len(every) > MAX_RANKED_HEADS:
        return {}
    sets = [[*knocked, lh] if lh not in knocked else [k for k in knocked if k != lh] for lh in every]
    sets = [heads for heads in sets if heads and _names(heads) not in reading.knocks]
    if not sets:
        return {}
    model, ids = reading.model, reading.ids
    text_key = (reading.name, tuple(ids.tolist()))

    def read():
        means = reading.memo.get(("means", *text_key), model, lambda: circuits.head_means(model, ids)) \
            if reading.mode == "mean" else None
        return circuits.knock_outs(model, ids, sets, reading.targets, reading.mode, means)
    near = reading.memo.get(("near", *text_key, tuple(reading.targets), tuple(knocked), reading.mode), model, read)
    return {_names(knock.heads): knock for knock in near}


def why_page(ctx: AppContext, checkpoint: str, text: str, position, target: str, head: str = STRONGEST,
             knocked: list[str] | None = None, mode: str = "mean over the text", shown: dict | None = None,
             split: str = VERSUS, *, fresh: bool = False, memo: ReadingCache | None = None):
    """The page's first answer to a change: (the parts at the position on screen, every head's reading there, the
    circuits of its head, the ranking, the knock-out numbers, ``shown`` updated). Circuits, a ranking and knock-out
    numbers the page holds (``shown``) are not sent again unless ``fresh``; why_deck follows with every other
    position."""
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, position, memo, split) as (reading, position):
        shown = dict(shown or {}) if not fresh else {}
        text_key = _key(checkpoint, text, target, reading.versus)
        deck = _position_deck(reading, text_key, [position], _settings(checkpoint, text, target, split))
        heads_deck = _heads_deck(reading, text_key, [(layer, which, position) for layer, which in reading.keys])
        layer, which = _head_at(reading, position)
        circuits_key, ranking_key = _key(checkpoint, text), _key(checkpoint, text, mode)
        knock_key = _key(checkpoint, text, target, mode)
        held = shown.get("heads", []) if shown.get("circuits") == circuits_key else []
        circuits_deck = gr.skip()
        if circuits.head_name(layer, which) not in held:
            circuits_deck = _circuits_deck(reading, checkpoint, text, [(layer, which)])
            held = [*held, circuits.head_name(layer, which)]
        ranking_deck = gr.skip()
        if shown.get("ranking") != ranking_key:
            ranking_deck = chart_deck.deck_json(ranking_key, {"ranking": ([], [_ranking(reading)])})
        names = _names(reading.knocked_heads)
        knock = _knock_json(reading, knock_key) if shown.get("knock") != knock_key else \
            _knock_json(reading, knock_key, names) if names else gr.skip()
        return deck, heads_deck, circuits_deck, ranking_deck, knock, {"circuits": circuits_key, "heads": held,
                                                                      "ranking": ranking_key, "knock": knock_key}


def why_deck(ctx: AppContext, checkpoint: str, text: str, target: str, head: str = STRONGEST,
             knocked: list[str] | None = None, mode: str = "mean over the text", shown: dict | None = None,
             split: str = VERSUS, *, memo: ReadingCache | None = None):
    """Every position's parts, the reading of the head that pushed most (and of the chosen head) at every position,
    and the circuits of every head (where they fit; else of the heads that push most somewhere in the text): the
    page then draws a new position or head by itself. (deck, heads deck, circuits deck, ``shown`` updated)."""
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=split) as (reading, _):
        T = reading.ids.numel()
        deck, heads_deck = _every_position_decks(reading, checkpoint, text, target, split)
        shown = dict(shown or {})
        circuits_key = _key(checkpoint, text)
        held = shown.get("heads", []) if shown.get("circuits") == circuits_key else []
        if _every_circuit_fits(reading):
            wanted = _every_head(reading.model.config)
        else:
            pushed = Counter(_strongest(reading, p) for p in range(T))
            wanted = [lh for lh, _ in pushed.most_common()][:MAX_SENT_CIRCUITS]
        missing = [lh for lh in wanted if circuits.head_name(*lh) not in held]
        circuits_deck = gr.skip()
        if missing:
            circuits_deck = _circuits_deck(reading, checkpoint, text, missing)
            held = [*held, *(circuits.head_name(*lh) for lh in missing)]
        return deck, heads_deck, circuits_deck, {**shown, "circuits": circuits_key, "heads": held}


def _every_position_decks(reading: _Reading, checkpoint: str, text: str, target: str,
                          split: str) -> tuple[str, str]:
    """(every position's parts, the reading of the head that pushed most and of the chosen head at every position),
    as the decks the page keeps."""
    T = reading.ids.numel()
    text_key = _key(checkpoint, text, target, reading.versus)
    views = {(*_strongest(reading, p), p) for p in range(T)}
    if reading.head is not None:
        views |= {(*reading.head, p) for p in range(T)}
    return (_position_deck(reading, text_key, range(T), _settings(checkpoint, text, target, split)),
            _heads_deck(reading, text_key, sorted(views, key=lambda v: (v[2], v[0], v[1]))))


def why_split_spare(ctx: AppContext, checkpoint: str, text: str, target: str, head: str = STRONGEST,
                    knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS, *,
                    memo: ReadingCache | None = None) -> str:
    """The other split's decks at every position (why_deck's parts and heads' readings, split the other way), for
    the page to keep beside the split on screen: a switch of the split is drawn there at once (why_page.SPLIT_JS),
    and the server's answer for it, under the same keys, draws nothing again. Asking the server took 0.6 s a switch,
    most of it making these figures again. ``{"around": the deck on screen's key, "label": the split they are, "from":
    the split on screen, "decks": {deck name: deck}}``."""
    split = split or VERSUS
    other = next(each for each in SPLITS if each != checks.choice(split, "split", SPLITS))
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=other) as (reading, _):
        deck, heads_deck = _every_position_decks(reading, checkpoint, text, target, other)
        # The split on screen reads the same tokens, the other way: its key needs no second reading.
        around = f"{reading.ids.numel()}:{_key(checkpoint, text, target, not reading.versus)}"
        return (f'{{"around": {json.dumps(around)}, "label": {json.dumps(other)}, "from": {json.dumps(split)}, '
                f'"decks": {{{json.dumps(DECK)}: {deck}, {json.dumps(HEADS_DECK)}: {heads_deck}}}}}')


def why_head_views(ctx: AppContext, checkpoint: str, text: str, target: str, head: str,
                   knocked: list[str] | None = None, mode: str = "mean over the text", split: str = VERSUS, *,
                   memo: ReadingCache | None = None):
    """A head chosen in the page (drawn there from what it holds): its reading at every position, so that a new
    position is drawn in the page too (the heads deck; nothing for the head that pushed most, sent already)."""
    if (head or STRONGEST) == STRONGEST:
        return gr.skip()
    with _reading(ctx, checkpoint, text, target, head, knocked, mode, memo=memo, split=split) as (reading, _):
        return _heads_deck(reading, _key(checkpoint, text, target, reading.versus),
                           [(*reading.head, p) for p in range(reading.ids.numel())])


def why_knock(ctx: AppContext, checkpoint: str, text: str, target: str, knocked: list[str] | None = None,
              mode: str = "mean over the text", split: str = VERSUS, *, memo: ReadingCache | None = None):
    """A set of heads knocked out (several heads: one forward pass) and the sets one tick away from it (one more
    batched pass), which the page writes the knock-out heading from: the next tick is drawn in the page."""
    with _reading(ctx, checkpoint, text, target, STRONGEST, knocked, mode, memo=memo, split=split) as (reading, _):
        names = _names(reading.knocked_heads)
        if not names:
            return gr.skip()
        return _knock_json(reading, _key(checkpoint, text, target, mode), names, _near_knocks(reading))


def controls(ctx: AppContext, checkpoint: str) -> tuple:
    """The head pickers for this checkpoint's layers and heads (left as they are when it does not load)."""
    try:
        config = ctx.checkpoint(checkpoint or "").config
    except (ValueError, OSError, RuntimeError):
        return gr.skip(), gr.skip()
    names = _head_names(config.layers_num, config.heads_num)
    return (gr.Dropdown(choices=_head_choices(names), value=STRONGEST),
            gr.Dropdown(choices=names, value=[], multiselect=True))


def _head_choices(names: list[str]) -> list[tuple[str, str]]:
    """The head list's (label, value) pairs: the head with the longest bar at each position, then every head."""
    return [(script.STRONGEST_SHOWN, STRONGEST), *((name, name) for name in names)]


def _first_heads(ctx: AppContext) -> list[str]:
    """The default checkpoint's head names, from its config alone (nothing is loaded at build time)."""
    names = ctx.checkpoint_names()
    if names:
        try:
            config = checkpoints.read_config(checkpoints.resolve(names[0], ctx.weights))
            return _head_names(config.layers_num, config.heads_num)
        except checkpoints.CheckpointError:
            pass
    return []


class ToAttention(NamedTuple):
    """The button that opens the head on screen in the Attention tab, and what it reads there."""

    button: gr.Button
    checkpoint: gr.Dropdown
    text: gr.Textbox
    head_heading: gr.Markdown


# the head and position on screen, as the page's head heading names them ("L3 H1 at position 85 …"): the page draws
# a chosen head itself, so its heading, not the head box (which may say "strongest"), is what the learner sees
HEAD_ON_SCREEN_JS = "(checkpoint, text, heading) => window.whyPage.headOnScreen(checkpoint, text, heading)"


def head_on_screen(heading: str) -> tuple[int, int, int]:
    """(layer, head, position) of the head heading "### L3 H1 at position 85 …"; a clear error without one."""
    found = re.match(r"(?:#+\s*)?L(\d+) H(\d+) at position (\d+)", heading or "")
    if not found:
        raise gr.Error("No head is on screen to open: wait for the head's chain, or, where this tab has no view of "
                       "the checkpoint, change the text or the checkpoint first.", print_exception=False)
    layer, head, position = map(int, found.groups())
    return layer, head, position


def build(ctx: AppContext) -> ToAttention:
    # the other tabs start from "To be, or not to be"; "the guess's lead": knocked out, the head leaves the guess
    # standing, and a stranger read "writes most of the guess" against that
    gr.Markdown("Which parts of the model wrote its guess for the next character, what one head looks for and "
                "writes, and what the model loses without it. The text starts as Juliet's line, where one head "
                "writes most of the guess's lead over the runner-up; type your own.")
    with gr.Row():
        checkpoint = checkpoint_dropdown(ctx, "why", scale=2)
        position = gr.Number(-1, label="position (-1 = last)", info="the model guesses what comes after it")
        target = gr.Textbox("", label="target", info="empty: the model's own guess", max_length=16)
    text = gr.Textbox(DEFAULT_TEXT, label="Text", lines=2)
    split = gr.Radio(list(SPLITS), value=VERSUS, label="split",
                     info="a guess wins against the other characters: softmax ignores what every logit shares")
    heading = gr.Markdown(label="why this character", elem_id=script.HEADING_ELEM_ID)
    # the page draws the figures itself (chart_deck): the parts here, the head's bars, its circuits, the ranking
    with gr.Row():
        chart_deck.hosts(DECK, [0])
    # what a clicked MLP, embedding or bias bar is, and the script that picks a head by its bar: one element of no
    # height until a note is written (two empty ones left a gap under the chart that a learner took for a failure)
    gr.HTML("", elem_id=script.PART_NOTE_ELEM_ID, js_on_load=script.PICK_JS, padding=False, min_height=0)
    picked = gr.Textbox(visible="hidden", label="head picked on the chart", elem_id=script.PICKED_ELEM_ID)
    heads = _first_heads(ctx)
    # choices follow the checkpoint; an API caller's head names are checked by the handler against its model
    head = gr.Dropdown(_head_choices(heads), value=STRONGEST, label="head", allow_custom_value=True,
                       info=HEAD_NAMES_INFO, elem_id=script.PICKER_ELEM_ID)
    head_heading = gr.Markdown(label="the head's reading", elem_id=script.HEAD_ELEM_ID)
    # a learner who found the deciding head here retyped the text, the layer, the head and the position to see its
    # seven stages in the Attention tab
    # as wide as its words (on one line: at Gradio's 160 px they wrapped), in the primary colour: a thin grey bar
    # across the page was easy to miss
    with gr.Row():
        to_attention = gr.Button("Step through this head in the Attention tab", size="sm", variant="primary", scale=0,
                                 min_width=STEP_THROUGH_PX)
    with gr.Row():
        chart_deck.hosts(HEADS_DECK, [0])  # the chain: from the head's pattern to the next character
    gr.Markdown(fold(CHAIN_MORE, "how the chain is read"))  # the same for every head: not sent with each
    circuits_heading = gr.Markdown(label="what the head reads and writes")
    with gr.Row():  # a host per head: every head's tables drawn out of sight while the page is idle
        chart_deck.hosts(CIRCUITS_DECK, [0, 1], views=heads)
    with gr.Row():
        knocked = gr.Dropdown(heads, value=[], multiselect=True, allow_custom_value=True, label="knock out",
                              info="heads whose output is replaced", scale=3, elem_id=script.KNOCKED_ELEM_ID)
        mode = gr.Radio(list(MODES), value=next(iter(MODES)), label="replace a knocked-out head's output by",
                        scale=1)
    knock_heading = gr.Markdown(label="knocked out")
    with gr.Row():
        chart_deck.hosts(RANKING_DECK, [0])
    # /why's answer, for API clients: never shown in the page, which draws the same from the decks
    with gr.Group(visible=False):
        api_button = gr.Button("explain", visible=False)
        api_outputs = [gr.Markdown(visible=False, label=field) if field.endswith("heading") else
                       gr.JSON(visible=False, label=field) if field == "numbers" else
                       gr.Plot(label=field, visible=False) for field in WhyView._fields]
    decks = [gr.Textbox(visible=False, label=f"{name} deck") for name in (DECK, HEADS_DECK, CIRCUITS_DECK,
                                                                          RANKING_DECK)]
    decks.append(gr.Textbox(visible=False, label="knock-out numbers"))
    need = gr.Textbox(visible=False, label="view the page asks for")
    need_knock = gr.Textbox(visible=False, label="knock-out the page asks for")
    want_head = gr.Textbox(visible=False, label="head whose every position the page asks for")
    shown = gr.State({})  # the circuits, ranking and knock-out numbers the page holds: they are not sent again
    other_split = gr.Textbox(visible=False, label="the other split's decks")  # why_split_spare's, kept in the page

    settings = [checkpoint, text, position, target, head, knocked, mode]  # then split, after shown where sent
    texts = [heading, head_heading, knock_heading, circuits_heading]
    on_screen = [position, head, knocked]
    quick = dict(show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane)
    # an answer is drawn only while the page still shows the inputs it was made for (why_page.take_js)
    draw = dict(fn=None, inputs=[*decks, checkpoint, text, target, split, *on_screen], outputs=texts,
                show_progress="hidden", queue=False)
    in_page = dict(inputs=on_screen, outputs=[*texts, need, need_knock, want_head], js=script.SHOW_EVENT_JS,
                   api_visibility="private", show_progress="hidden", queue=False)

    memo = ReadingCache()

    def answer(listener, name: str, fresh: bool = False):
        """``listener`` answers with the position on screen (drawn at once), then every other position. Returns the
        first answer's event."""
        first = wire(listener, why_page, ctx, [*settings, shown, split], [*decks, shown],
                     fixed=dict(fresh=fresh, memo=memo),
                     api_name=name, api_visibility="private", **quick)
        keep_on_refusal(first, [*decks, shown], f"{name}_refused")
        first.success(**draw, js=script.take_js(False), api_name=f"{name}_draw", api_visibility="private")
        drawn = wire(first.success, why_deck, ctx, [checkpoint, text, target, head, knocked, mode, shown, split],
                     [*decks[:3], shown], fixed=dict(memo=memo), api_name=f"{name}_deck", api_visibility="private",
                     **quick).then(
            **draw, js=script.take_js(True), api_name=f"{name}_deck_draw", api_visibility="private")
        wire(drawn.then, why_split_spare, ctx, [checkpoint, text, target, head, knocked, mode, split], other_split,
             fixed=dict(memo=memo), api_name=f"{name}_split_spare", api_visibility="private", **quick).then(
            None, other_split, None, js=script.KEEP_SPLIT_JS, api_name=f"{name}_split_keep", api_visibility="private",
            show_progress="hidden", queue=False)
        return first

    def pickers(listener, **options):
        return wire(listener, controls, ctx, [checkpoint], [head, knocked], show_progress="hidden", **options)

    wire(api_button.click, explain, ctx, [*settings, split], api_outputs, fixed=dict(memo=memo), api_name="why",
         **quick)
    arrival = gr.on(None, None, api_name="why_arrival", api_visibility="private")
    answer(pickers(arrival.then, api_name="why_arrival_controls", api_visibility="private").then, "why_load")
    # a new checkpoint resets the head pickers first, so the view never reads another model's head names
    refused = answer(pickers(checkpoint.change, api_name="why_controls", api_visibility="private").then,
                     "why_checkpoint")
    # a checkpoint that cannot read the text: the old model's view is taken off, not left under the new name
    refused.failure(None, None, texts, js=script.STALE_JS, api_name="why_checkpoint_stale", api_visibility="private",
                    show_progress="hidden", queue=False)
    # a split switched is drawn at once from the other split's decks where the page holds them; the server's answer
    # follows either way (under the same keys it draws nothing again)
    split.change(None, [split, *on_screen], texts, js=script.SPLIT_JS, api_name="why_split_switch",
                 api_visibility="private", show_progress="hidden", queue=False)
    answer(functools.partial(gr.on, [text.change, target.change, mode.change, split.change]), "why_update")
    # a head chosen in the list, or by a click on its bar in the attribution chart, is drawn in the page from the
    # readings and circuits it holds; then its reading at every position follows, asked for once (the list's
    # input event comes twice: at the choice, and again as the box loses focus)
    head.input(None, **in_page, api_name="why_head")
    picked.change(None, [picked, head], head, js=script.PICK_HEAD_JS, api_name="why_pick_head",
                  api_visibility="private", show_progress="hidden", queue=False).success(
        None, **in_page, api_name="why_picked")
    wire(want_head.change, why_head_views, ctx, [checkpoint, text, target, head, knocked, mode, split], decks[1],
         fixed=dict(memo=memo), api_name="why_head_views", api_visibility="private", **quick).success(
        None, [decks[1], *on_screen], texts, js=script.TAKE_HEADS_JS, api_name="why_head_views_draw",
        api_visibility="private", show_progress="hidden", queue=False)
    # heads ticked or unticked: drawn in the page from the numbers it holds (every head alone, sent with the
    # ranking); a set it lacks is asked for, and answered with numbers alone
    knocked.change(None, **in_page, api_name="why_knocked")
    knocked.select(None, None, None, js=script.KNOCK_CHOSEN_JS, api_name="why_knock_chosen", api_visibility="private",
                   show_progress="hidden", queue=False)
    wire(need_knock.change, why_knock, ctx, [checkpoint, text, target, knocked, mode, split], decks[4],
         fixed=dict(memo=memo), api_name="why_knock", api_visibility="private", **quick).success(
        None, [decks[4], *on_screen], texts, js=script.TAKE_KNOCK_JS, api_name="why_knock_draw",
        api_visibility="private", show_progress="hidden", queue=False)
    # a new position is drawn in the page from the decks it holds; one not there yet is asked for
    position.change(None, **in_page, api_name="why_position")
    answer(need.change, "why_need", fresh=True)
    return ToAttention(to_attention, checkpoint, text, head_heading)
