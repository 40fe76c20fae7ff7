"""Head scores: each pattern's score on hand-made attention, chance on even attention, and the shipped model."""

from __future__ import annotations

import functools

import pytest
import torch

from playground.checkpoints import store as checkpoints
from playground.lens import head_scores
from playground.model.gpt import causal_mask

L = 6
T = 2 * L


def _rows(pairs: dict[int, int]) -> torch.Tensor:
    """(1, 1, T, T) weights: query p puts all its weight on pairs[p] (else on itself)."""
    weights = torch.zeros(1, 1, T, T)
    for p in range(T):
        weights[0, 0, p, pairs.get(p, p)] = 1.0
    return weights


@pytest.mark.parametrize("pattern, pairs", [
    ("previous token", {p: p - 1 for p in range(1, T)}),
    ("induction", {L + i: i + 1 for i in range(L - 1)}),
    ("duplicate token", {L + i: i for i in range(L - 1)}),
    ("first token", {p: 0 for p in range(T)}),
])
def test_a_head_doing_exactly_one_pattern_scores_one_on_it(pattern, pairs):
    scores = head_scores.score_weights(_rows(pairs), L)
    assert scores[pattern].item() == pytest.approx(1.0)


def test_even_causal_attention_scores_exactly_chance():
    even = causal_mask(T, T).float()
    even = (even / even.sum(-1, keepdim=True)).expand(2, 3, T, T)  # (S, h, T, T)
    scores = head_scores.score_weights(even, L)
    chance = head_scores.chance_levels(L)
    for pattern in head_scores.PATTERNS:
        torch.testing.assert_close(scores[pattern], torch.full((3,), chance[pattern]), rtol=0, atol=1e-6)


def test_the_probe_repeats_its_first_half_and_is_seeded():
    tokens = head_scores.probe_tokens(65, 128, sequences=3, seed=5)
    assert tokens.shape == (3, 96)
    assert torch.equal(tokens[:, :48], tokens[:, 48:])
    assert torch.equal(tokens, head_scores.probe_tokens(65, 128, sequences=3, seed=5))
    assert not torch.equal(tokens, head_scores.probe_tokens(65, 128, sequences=3, seed=6))
    assert head_scores.probe_tokens(65, 10).shape == (8, 10)
    with pytest.raises(ValueError, match="too short"):
        head_scores.probe_tokens(65, 3)


def test_the_shipped_model_has_one_clear_previous_token_head_and_the_table_is_ranked():
    model = checkpoints.load_checkpoint("shakespeare-char").model
    scores = head_scores.score_heads(model)
    config = model.config
    assert len(scores) == len(head_scores.PATTERNS) * config.layers_num * config.heads_num
    lifts = [s.lift for s in scores]
    assert lifts == sorted(lifts, reverse=True)
    assert all(0.0 <= s.score <= 1.0 for s in scores)
    top = scores[0]
    assert top.pattern == "previous token" and top.layer == 0 and top.score > 10 * top.chance
    best = head_scores.best_per_pattern(scores, top=2)  # only heads at twice chance or more: no below-chance rows
    assert [s.pattern for s in best] == ["previous token", "previous token", "first token"]
    assert all(s.score >= 2 * s.chance for s in best)
    assert head_scores.missing_patterns(scores) == ["induction", "duplicate token"]


def test_the_attention_tab_table_lists_the_best_heads_and_a_row_opens_its_head(tiny_weights):
    from types import SimpleNamespace

    import gradio as gr

    from playground.budget import MemoryBudget
    from playground.config import Limits
    from playground.ui import head_table
    from playground.ui.common import AppContext, friendly

    ctx = AppContext(limits=Limits(), weights=tiny_weights)
    rows, note = functools.partial(friendly(head_table.score_table), ctx)("shakespeare-char")
    assert len(rows) <= len(head_scores.PATTERNS) * head_table.TOP_PER_PATTERN
    assert [row[0] for row in rows] == sorted((row[0] for row in rows), key=head_scores.PATTERNS.index)
    assert "Strongest: layer" in note
    assert all(row[3] >= head_scores.RECOGNISABLE_RATIO * row[4] for row in rows)
    missing = head_scores.missing_patterns(head_scores.score_heads(ctx.checkpoint("shakespeare-char").model))
    assert all(f"**{pattern}**" in note for pattern in missing) and ("No head reaches" in note) == bool(missing)
    row = ["previous token", 0, 1, 0.5, 0.04, 12.5]  # the test weights are barely trained: maybe no row at all
    # the head opens at its softmax weights, the pattern it was ranked by
    assert head_table.open_head(SimpleNamespace(row_value=row)) == ("trained checkpoint", 0, 1, "6. Softmax weights")
    with pytest.raises(gr.Error, match="(?i)no checkpoint named"):
        functools.partial(friendly(head_table.score_table), ctx)("nobody-trained-this")
    tight = AppContext(limits=Limits(), weights=tiny_weights, budget=MemoryBudget(1024, "test"))
    with pytest.raises(gr.Error, match="(?i)this forward pass needs about"):
        functools.partial(friendly(head_table.score_table), tight)("shakespeare-char")


# where a head looks over a text (looks_over_text): hand-made weights against counts made by hand

TEXT_IDS = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8])  # T = 12, token 5 at 4, 8 and 10


def _look(looks, kind, what):
    return next(look for look in looks if (look.kind, look.what) == (kind, what))


def test_even_attention_looks_nowhere_beyond_chance():
    even = causal_mask(T, T).float()
    even = even / even.sum(-1, keepdim=True)
    looks = head_scores.looks_over_text(even, TEXT_IDS)
    assert {look.kind for look in looks} == set(head_scores.LOOK_KINDS) - set(head_scores.WORD_LOOKS)  # no words given
    assert all(look.lift == pytest.approx(0.0, abs=1e-6) for look in looks)


def test_a_previous_token_head_looks_one_back_with_all_its_weight():
    looks = head_scores.looks_over_text(_rows({p: p - 1 for p in range(1, T)})[0, 0], TEXT_IDS)
    assert (looks[0].kind, looks[0].what, looks[0].share) == ("distance", 1, pytest.approx(1.0))
    # chance one back: queries 1..11 see 2..12 positions
    assert looks[0].chance == pytest.approx(sum(1 / (p + 1) for p in range(1, T)) / (T - 1))
    assert _look(looks, "distance", 0).share == pytest.approx(1 / T)  # the first query sees only itself
    assert looks[0].recognisable


def test_a_head_that_looks_for_a_token_finds_it_wherever_it_stands():
    # queries from 4 on put all their weight on the latest 5; the earlier ones on themselves
    latest = {p: max(k for k in (4, 8, 10) if k <= p) for p in range(4, T)}
    looks = head_scores.looks_over_text(_rows(latest)[0, 0], TEXT_IDS)
    assert (looks[0].kind, looks[0].what) == ("token", 5)
    assert looks[0].share == pytest.approx(8 / T)  # 8 of the 12 queries look at a 5
    # by hand: the weight an even spread puts on the 5s, query by query
    copies_seen = [sum(1 for k in (4, 8, 10) if k <= p) for p in range(T)]
    assert looks[0].chance == pytest.approx(sum(c / (p + 1) for p, c in enumerate(copies_seen)) / T)


def test_the_first_position_is_scored_over_the_queries_after_it():
    looks = head_scores.looks_over_text(_rows({p: 0 for p in range(T)})[0, 0], TEXT_IDS)
    first = _look(looks, "first", 0)
    assert first.share == pytest.approx(1.0)
    assert first.chance == pytest.approx(sum(1 / (p + 1) for p in range(1, T)) / (T - 1))


def test_a_token_found_only_at_position_0_is_that_positions_look_not_a_second_one():
    looks = head_scores.looks_over_text(_rows({p: 0 for p in range(T)})[0, 0], TEXT_IDS)  # 3 is at 0 and at 9
    assert ("token", 3) in {(look.kind, look.what) for look in looks}
    alone_first = torch.tensor([7, *TEXT_IDS[1:].tolist()])  # 7 only at position 0
    looks = head_scores.looks_over_text(_rows({p: 0 for p in range(T)})[0, 0], alone_first)
    assert ("token", 7) not in {(look.kind, look.what) for look in looks}
    assert looks[0].kind == "first"


WORDY = "ab cd, ef gh"  # T = 12: words 0-3 start at 0, 3, 7 and 10
WORDY_IDS = torch.tensor([ord(c) for c in WORDY])
STARTS = {0: 0, 1: 0, 3: 3, 4: 3, 7: 7, 8: 7, 10: 10, 11: 10}  # a letter's word's start


def test_words_are_runs_of_letters_numbered_in_order():
    assert head_scores.word_numbers(WORDY) == [0, 0, -1, 1, 1, -1, -1, 2, 2, -1, 3, 3]
    assert head_scores.word_numbers("O Romeo, x") == [0, -1, 1, 1, 1, 1, 1, -1, -1, 2]
    assert head_scores.word_numbers(" ,\n") == [-1, -1, -1]


def test_even_attention_looks_at_no_word_beyond_chance():
    even = causal_mask(T, T).float()
    even = even / even.sum(-1, keepdim=True)
    looks = head_scores.looks_over_text(even, WORDY_IDS, head_scores.word_numbers(WORDY))
    assert {look.kind for look in looks} >= set(head_scores.WORD_LOOKS)
    assert all(look.lift == pytest.approx(0.0, abs=1e-6) for look in looks)


def test_a_head_that_reads_the_word_before_is_found_whatever_its_distance():
    # each query looks at the first letter of the word before its own (between words: of the last one); the first
    # word's letters, with no word before, at themselves
    before = {2: 0, 3: 0, 4: 0, 5: 3, 6: 3, 7: 3, 8: 3, 9: 7, 10: 7, 11: 7}
    looks = head_scores.looks_over_text(_rows(before)[0, 0], WORDY_IDS, head_scores.word_numbers(WORDY))
    previous = _look(looks, "previous word", 0)
    assert looks[0] == previous and previous.share == pytest.approx(10 / T)
    # by hand: the previous word has two letters, all seen, for every query from 2 on
    assert previous.chance == pytest.approx(sum(2 / (p + 1) for p in range(2, T)) / T)
    assert _look(looks, "word start", 0).share == pytest.approx(11 / T)  # and query 0 on itself, a start
    # its own word: queries 0 and 1 (on themselves, in word 0)
    assert _look(looks, "own word", 0).share == pytest.approx(2 / T)


def test_a_head_that_reads_its_own_word_is_found():
    looks = head_scores.looks_over_text(_rows(STARTS)[0, 0], WORDY_IDS, head_scores.word_numbers(WORDY))
    own = _look(looks, "own word", 0)
    assert own.share == pytest.approx(8 / T)  # the eight letters' queries; spaces and the comma look at themselves
    letters_seen = [0 if p not in STARTS else p - STARTS[p] + 1 for p in range(T)]
    assert own.chance == pytest.approx(sum(n / (p + 1) for p, n in enumerate(letters_seen)) / T)
    with pytest.raises(ValueError, match="word numbers"):
        head_scores.looks_over_text(_rows(STARTS)[0, 0], WORDY_IDS, [0, 1])


def test_looks_refuse_weights_of_another_length():
    with pytest.raises(ValueError, match="do not match"):
        head_scores.looks_over_text(torch.eye(T - 1), TEXT_IDS)


def test_two_places_are_apart_only_where_no_query_can_find_one_key_in_both():
    """head_scores.apart, checked against the keys each place names for every query of a text: no pair it calls apart
    has a key in common for any query (the Why tab adds their weights), and 1 back is not apart from the query's own
    word, with which it shares keys inside a word."""
    text = "ab ba\nab"
    ids = torch.tensor([ord(c) for c in text])
    words = head_scores.word_numbers(text)
    T = len(text)
    keys = {}  # (kind, what) -> the (query, key) pairs it names, causal
    for distance in range(T):
        keys[("distance", distance)] = {(q, q - distance) for q in range(distance, T)}
    keys[("first", 0)] = {(q, 0) for q in range(1, T)}
    for token in set(ids.tolist()):
        keys[("token", token)] = {(q, k) for q in range(T) for k in range(q + 1) if ids[k] == token}
    latest = [max([w for w in words[: q + 1] if w >= 0], default=-1) for q in range(T)]
    before = [words[q] - 1 if words[q] >= 0 else latest[q] for q in range(T)]
    keys[("own word", 0)] = {(q, k) for q in range(T) for k in range(q + 1) if words[q] >= 0 and words[k] == words[q]}
    keys[("previous word", 0)] = {(q, k) for q in range(T) for k in range(q + 1) if before[q] >= 0
                                  and words[k] == before[q]}
    keys[("word start", 0)] = {(q, k) for q in range(T) for k in range(q + 1) if words[k] >= 0
                               and (k == 0 or words[k - 1] != words[k])}
    places = [head_scores.Look(kind, what, 0.0, 0.0) for kind, what in keys]
    kinds = set()
    for a in places:
        for b in places:
            if a == b or not keys[(a.kind, a.what)] or not keys[(b.kind, b.what)]:
                continue
            shared = keys[(a.kind, a.what)] & keys[(b.kind, b.what)]
            if head_scores.apart(a, b, int(ids[0])):
                assert not shared, (a, b)
                kinds.add(frozenset((a.kind, b.kind)))
    assert kinds == {frozenset({"distance"}), frozenset({"token"}), frozenset({"own word", "previous word"}),
                     frozenset({"first", "token"})}
    assert not head_scores.apart(places[1], head_scores.Look("own word", 0, 0.0, 0.0), int(ids[0]))
    assert keys[("distance", 1)] & keys[("own word", 0)]


def test_the_strongest_look_is_the_weight_furthest_beyond_an_even_spread_off_position_0():
    """head_scores.strongest_look: the docstring's example, a sink on position 0 passed over (a head parks weight
    there), and a text of one token has none."""
    weights = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.1, 0.1, 0.8]])
    assert head_scores.strongest_look(weights) == pytest.approx((2, 2, 0.8))
    sink = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.9, 0.1, 0.0, 0.0], [0.95, 0.0, 0.05, 0.0], [0.4, 0.5, 0.1, 0.0]])
    assert head_scores.strongest_look(sink)[:2] == (3, 1)  # 0.5 - 1/4 beats 0.1 - 1/2; position 0's 0.95 is left
    assert head_scores.strongest_look(torch.ones(1, 1)) is None
