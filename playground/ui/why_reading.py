"""The Why tab's reading of one text: its checks (a checkpoint's heads, a typed character, a target), its price
(what the passes over the text cost before they run), the model run once over the text (every position's parts, the
heads' patterns, the knock-outs and the ranking), and ``Reading``, whose methods answer what the views ask of it
(which head pushed most, where a head looked, what it writes, its tables, its chain). Readings' pieces are kept per
text in a ReadingCache. No Gradio events and no words: why_sentences says what a reading means, why_views draws it,
why_decks packs it for the page, why_tab wires the tab.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Iterator
from typing import NamedTuple

import torch

from playground import budget, checks
from playground.lens import circuits, head_scores
from playground.text.tokenizer import CharTokenizer, escape_text, labels
from playground.ui.common import AppContext, RecentReadings
from playground.ui.why_page import (
    KNOCK_BARELY,
    STRONGEST,
)

# Shakespeare's lines as Tiny Shakespeare sets them: the trained model predicts the question mark (p 0.86) and one head,
# which looks back at the "wh" of "wherefore", writes most of it. Two verse lines, not one: a line longer than any the
# model was trained on lets a head that ends lines dominate the loss
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
LOOKED_AT = 2  # the keys a head's heading names as where it looked most at a query
WRITES_LISTED = 3  # the tokens a head raises most over the text, behind the fold (the first in sight)
LOOKS_RATIO = 1.5  # a place gets this many times an even spread's weight: the head looks there more than chance (word
# starts are a quarter of a text's keys: 49% on them against 25% is a place it looks)
LOOKS_CLEARLY = 0.15  # a place gets this much of a head's weight beyond an even spread: the head looks there (9% on
# newlines against 3% is not a job)
BESIDE = 0.5  # a second place, sharing no key with the first, named beside it where it gets this much of the first's
# weight beyond an even spread (a head can look within its own word with nearly as much weight as at the word before)


class WhyView(NamedTuple):
    heading: str
    parts: object  # the attribution's bar chart
    head_heading: str
    chain: object  # the chosen head's chain, from its pattern to the next character: the page's figure
    numbers: dict  # the parts and the chain as numbers (why_views.numbers): what an API client reads
    circuits_heading: str
    qk: object
    ov: object
    knock_heading: str
    ranking: object  # every head's added loss, or None where ranking is too dear


def head_names(layers: int, heads: int) -> list[str]:
    return [circuits.head_name(layer, head) for layer in range(layers) for head in range(heads)]


def parse_head(name: str, layers: int, heads: int) -> tuple[int, int]:
    names = head_names(layers, heads)
    if name not in names:
        raise ValueError(f"head {checks.shown(name)} is not one of this model's heads (L0 H0 to {names[-1]})")
    layer, head = divmod(names.index(name), heads)
    return layer, head


def every_head(config) -> list[tuple[int, int]]:
    return [(layer, head) for layer in range(config.layers_num) for head in range(config.heads_num)]


def heads_named(heads) -> str:
    """A set of knocked-out heads as the page names it: "L0 H2, L2 H1", in the order ticked ("" for none)."""
    return ", ".join(circuits.head_name(*lh) for lh in heads)


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


def above(look: head_scores.Look) -> bool:
    """Whether a place gets LOOKS_RATIO times what an even spread gives it."""
    return look.share >= LOOKS_RATIO * look.chance


def clear(look: head_scores.Look) -> bool:
    """Whether the head clearly looks there: LOOKS_RATIO times an even spread and LOOKS_CLEARLY beyond it."""
    return above(look) and look.lift >= LOOKS_CLEARLY


def by_position(looks: list[head_scores.Look]) -> bool:
    """Whether the head clearly looks by position (a distance back, or position 0), which its tables leave out."""
    return bool(looks) and clear(looks[0]) and looks[0].kind in ("distance", "first")


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


@dataclasses.dataclass(frozen=True, eq=False)
class Reading:
    """One text read by one checkpoint at every position, from one pass of each kind, and the questions the views
    ask of it. Made by reading_for (checked, priced, admitted); what a question computes beyond the passes (where a
    head looks, what it writes, its tables) is kept in ``memo`` with the text's other pieces."""

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
    writes_per_weight: dict  # (layer, head) -> (T, T): what the head writes from each key onto the query's target
    logits: torch.Tensor  # (T, V): the intact model's logits
    versus: bool  # the parts split logit(target) - logit(rival) (each attribution's rival_id), not the logit alone
    dropped: int = 0  # tokens past what the view reads (the text's last ones): the heading says so
    reads: str = "this view"  # what sets that limit: "this checkpoint" (its context) or "this view"
    # rotary positions: the QK tables' distance from query back to key (a score depends on it); None: positions are
    # embeddings, which the tables leave out
    distance: int | None = None

    @property
    def text_key(self) -> tuple:
        """The memo's key of this checkpoint's reading of this text."""
        return (self.name, tuple(self.ids.tolist()))

    def label(self, token_id: int) -> str:
        """A token as the page shows it: "␣", "\\n", "e"."""
        return escape_text(self.tokenizer.label(token_id))

    def heads(self) -> list[tuple[int, int]]:
        """Every (layer, head) of the model."""
        return every_head(self.model.config)

    def head_at(self, position: int) -> tuple[int, int]:
        """The chosen head, or the head whose part of the logit at ``position`` is largest."""
        return self.head if self.head is not None else self.strongest(position)

    def strongest(self, position: int) -> tuple[int, int]:
        """The head with the longest bar at ``position``: the largest part, up or down."""
        return _strongest_of(self.attributions[position], self.model.config)

    def contest(self, position: int) -> tuple[str, str | None]:
        """The target's label and its rival's at ``position`` (None where the bars split the target's logit
        alone)."""
        parts = self.attributions[position]
        return self.label(parts.target_id), None if parts.rival_id is None else self.label(parts.rival_id)

    def looked_most(self, position: int, layer: int, which: int) -> list[int]:
        """The LOOKED_AT keys the head weighed most at ``position``, the heaviest first."""
        weights = self.keys[(layer, which)][0][position, : position + 1]
        return torch.topk(weights, min(LOOKED_AT, position + 1)).indices.tolist()

    def chain(self, position: int, layer: int, which: int) -> Chain:
        """The chain of head ``which`` of ``layer`` at ``position``, from the passes (nothing computed again)."""
        seen = slice(0, position + 1)
        weights, shares = (keys[position, seen] for keys in self.keys[(layer, which)])
        parts = self.attributions[position]
        index = parts.names.index(circuits.head_name(layer, which))
        others = torch.cat([parts.values[:index], parts.values[index + 1:]]).sum()
        probabilities = self.probabilities[position]
        best, second = torch.topk(probabilities, 2).indices.tolist()
        guessed = best == parts.target_id
        other = second if guessed else best
        if parts.rival_id is not None:
            other = parts.rival_id  # the likeliest other token too, whatever ties make topk choose
        logits = self.logits[position]
        return Chain(self.tokens[seen], weights, self.writes_per_weight[(layer, which)][position, seen], shares,
                     float(parts.values[index]), float(others), parts.logit, parts.target_id,
                     float(probabilities[parts.target_id]), other, float(probabilities[other]), guessed,
                     float(logits[parts.target_id]), float(logits[other]), parts.rival_id is not None)

    def looks(self, layer: int, which: int) -> list[head_scores.Look]:
        """Where the head looks over the text (head_scores.looks_over_text), the clearest first; [] where its weights
        were not read (a model with more heads than MAX_RANKED_HEADS keeps only the heads it shows)."""
        if (layer, which) not in self.keys:
            return []

        def read() -> list[head_scores.Look]:
            words = None
            if isinstance(self.tokenizer, CharTokenizer):  # a BPE token's letters are not its word's
                words = head_scores.word_numbers("".join(self.tokenizer.characters[i] for i in self.ids.tolist()))
            return head_scores.looks_over_text(self.keys[(layer, which)][0], self.ids, words,
                                               self.model.config.sliding_window)

        return self.memo.get(("looks", *self.text_key, layer, which), self.model, read)

    def beside(self, looks: list[head_scores.Look]) -> head_scores.Look | None:
        """The place named beside the first of ``looks``, where the first is clear: one that shares no key with it
        (head_scores.apart), gets LOOKS_RATIO times an even spread's weight and BESIDE times the first's weight
        beyond it; None where none does."""
        if not looks or not clear(looks[0]):
            return None
        first = int(self.ids[0])
        return next((look for look in looks[1:] if head_scores.apart(looks[0], look, first) and above(look)
                     and look.lift >= BESIDE * looks[0].lift), None)

    def writes(self, layer: int, which: int) -> list[tuple[int, float]]:
        """What the head writes over the text (circuits.head_writes: its mean share of each logit, centred), the
        WRITES_LISTED tokens it raises most, the most first: (token id, share). Every head's at once, one piece of
        the memo per text."""
        written = self.memo.get(("writes", *self.text_key), self.model,
                                lambda: circuits.head_writes(self.model, self.ids))[layer, which]
        top = torch.topk(written, min(WRITES_LISTED, written.numel()))
        return list(zip(top.indices.tolist(), top.values.tolist()))

    def tables(self, layer: int, which: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The head's QK and OV tables over the vocabulary (or the subset), kept with the text's other heads'."""
        held = self.memo.get(("tables", *self.text_key, self.distance), self.model, dict)
        if (layer, which) not in held:
            held[(layer, which)] = (circuits.qk_circuit(self.model, layer, which, self.subset, self.distance),
                                    circuits.ov_circuit(self.model, layer, which, self.subset))
        return held[(layer, which)]

    def table_rows(self) -> list[int]:
        """The token ids of the circuit tables' rows (and columns), in order: the vocabulary, or the subset."""
        return self.subset.tolist() if self.subset is not None else list(range(self.model.config.vocabulary_size))

    def vocabulary(self) -> list[str]:
        """The circuit tables' rows (and columns) as the page shows them."""
        rows = self.subset if self.subset is not None else torch.arange(self.model.config.vocabulary_size)
        return [escape_text(label) for label in labels(self.tokenizer, rows)]

    def table_cells(self, position: int, layer: int, which: int) -> tuple[int, ...] | None:
        """The cells of the head's tables this position reads, as their rows' and columns' indices: (the query's QK
        row, the column of the key the head weighed most; that key's OV row, the target's column, or where a BPE guess
        is not in the table the column its row promotes most). None where the query or the key is outside the tables
        (a long BPE text)."""
        index = {token: row for row, token in enumerate(self.table_rows())}
        key = self.looked_most(position, layer, which)[0]
        query, looked, target = int(self.ids[position]), int(self.ids[key]), self.attributions[position].target_id
        if not {query, looked} <= index.keys():
            return None
        _, ov = self.tables(layer, which)
        column = index[target] if target in index else int(ov[index[looked]].argmax())
        return index[query], index[looked], index[looked], column

    def near_knocks(self) -> dict:
        """The knock-outs one tick away from the knocked heads (each other head added after them, each of them taken
        off) that the reading does not hold, by their names: one batched pass, made while the reading is admitted (its
        price counts the ranking's pass, which this one follows); none where the model has more heads than are ranked
        (each would be a forward pass)."""
        every = self.heads()
        knocked = self.knocked_heads
        if not knocked or len(every) > MAX_RANKED_HEADS:
            return {}
        sets = [[*knocked, lh] if lh not in knocked else [k for k in knocked if k != lh] for lh in every]
        sets = [heads for heads in sets if heads and heads_named(heads) not in self.knocks]
        if not sets:
            return {}

        def read():
            means = self.memo.get(("means", *self.text_key), self.model,
                                  lambda: circuits.head_means(self.model, self.ids)) if self.mode == "mean" else None
            return circuits.knock_outs(self.model, self.ids, sets, self.targets, self.mode, means)
        near = self.memo.get(("near", *self.text_key, tuple(self.targets), tuple(knocked), self.mode), self.model,
                             read)
        return {heads_named(knock.heads): knock for knock in near}


# pieces of readings kept (a text's every-position passes, its ranking, each head's looks and circuits): enough for
# several texts on a model of many heads; what they may hold in bytes is bounded by the budget's share (RecentReadings)
READING_CACHE_SIZE = 256


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
    if unknown:  # which characters, and what to do: a count alone does not say how to fix the text
        distinct = list(dict.fromkeys(u.character for u in unknown))
        listed = " ".join(escape_text(c) for c in distinct[:12]) + (" ..." if len(distinct) > 12 else "")
        known = getattr(tokenizer, "characters", None)
        knows = f" ({len(known)}: {escape_text(''.join(known))})" if known and len(known) <= 40 else ""
        raise ValueError(f"the text has {len(unknown)} character(s) this model does not know; the first is "
                         f"{checks.shown(unknown[0].character)} at {unknown[0].position} (unknown: {listed}). Type a "
                         f"text in the characters it knows{knows}, or choose another checkpoint")
    ids = tokenizer.encode(text)
    limit = min(MAX_TOKENS, config.context_size)
    # a text longer than the model reads: its first tokens, said on the page (as the Attention and Model tabs do),
    # rather than a refusal (the toy's context is 8: the Train tab's own "hello world" is longer)
    dropped = max(0, ids.numel() - limit)
    ids = ids[:limit]
    if target:
        _target(tokenizer, target, 0)  # refused here, before any work
    layers, heads = config.layers_num, config.heads_num
    head = checks.text(head, "head", 64) or STRONGEST
    chosen = None if head == STRONGEST else parse_head(head, layers, heads)
    knocked_heads = [parse_head(name, layers, heads) for name in knocked]
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
def reading_for(ctx: AppContext, checkpoint: str, text: str, target: str, head: str, knocked, mode: str,
                position=None, memo: ReadingCache | None = None, split: str = VERSUS,
                distance=None) -> Iterator[tuple[Reading, int | None]]:
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
            yield dataclasses.replace(reading, dropped=dropped, reads=_reads(loaded.config),
                                      distance=distance), position
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


def _intact(probabilities: torch.Tensor, targets: list[int], loss: float | None) -> circuits.KnockOut:
    """The intact model's reading, in a knock-out's terms (nothing knocked out)."""
    chosen = probabilities.gather(1, torch.tensor(targets).view(-1, 1))[:, 0]  # (T,)
    return circuits.KnockOut((), loss, probabilities.argmax(dim=-1).tolist(), chosen.tolist())


def _read(model, tokenizer, ids, target, chosen, knocked_heads, mode, subset, name, memo,
          versus: bool = False) -> Reading:
    config = model.config
    T = ids.numel()
    text_key = (name, tuple(ids.tolist()))
    probabilities, targets, attributions, logits = memo.get(
        ("positions", *text_key, target, versus), model,
        lambda: _every_position(model, tokenizer, ids, target, versus))
    every = every_head(config)
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
        knocks.update((heads_named(knock.heads), knock) for knock in alone)
        effects = sorted((circuits.HeadEffect(*knock.heads[0], knock.loss, knock.loss - intact_loss)
                          for knock in alone), key=lambda effect: -effect.added)
        note = (f"Most needed: {circuits.head_name(effects[0].layer, effects[0].head)} ({effects[0].added:+.3f} "
                "without it).")
        # the loss falls most without the first; a change under KNOCK_BARELY is none
        hurting = [effect for effect in effects if effect.added <= -KNOCK_BARELY][::-1]
        if hurting:  # a head can push this target up and still hurt the text as a whole
            one = len(hurting) == 1
            note += (f" Without {heads_named([(e.layer, e.head) for e in hurting[:3]])}"
                     f"{' and others' if len(hurting) > 3 else ''} the loss falls: on this text "
                     f"{'it hurts' if one else 'they hurt'} more than {'it helps' if one else 'they help'}.")
        barely = sum(abs(effect.added) < KNOCK_BARELY for effect in effects)
        if barely:
            note += f" {barely} of {len(effects)} move the loss by under {KNOCK_BARELY} either way."
    if knocked_heads and heads_named(knocked_heads) not in knocks:
        knocks[heads_named(knocked_heads)] = memo.get(("knocked", *text_key, target, tuple(knocked_heads), mode), model,
                                                 lambda: circuits.knock_outs(model, ids, [knocked_heads], targets,
                                                                             mode, means)[0])
    tokens = [escape_text(label) for label in labels(tokenizer, ids)]
    return Reading(model, tokenizer, ids, tokens, probabilities, targets, attributions, keys, chosen,
                    knocked_heads, mode, knocks, intact_loss, effects, note, subset, name, memo,
                    {lh: writes[i] for i, lh in enumerate(heads)}, logits, versus)


def _strongest_of(parts: circuits.LogitAttribution, config) -> tuple[int, int]:
    """The head whose part is largest in size, for the guess or against it: a red bar thirty times longer than the
    longest green one is the head that decided, and the one a reader looks for."""
    return max(every_head(config), key=lambda lh: abs(parts.head(*lh)))
