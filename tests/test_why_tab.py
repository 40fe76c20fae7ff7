"""The Why tab's handler on a small trained checkpoint: the attribution sums to the logit on screen, the chosen
head's reading, its circuits in words, knock-outs and the ranking; refusals in words."""

from __future__ import annotations

import functools
import json
import re

import gradio as gr
import pytest
import torch

from playground import circuits
from playground.config import Limits
from playground.ui import why_tab
from playground.ui.common import AppContext, friendly

TEXT = "To be, or not to be: that is"  # 28 characters: the small checkpoint reads 32


@pytest.fixture(scope="module")
def ctx(tiny_weights):
    return AppContext(limits=Limits(), weights=tiny_weights)


def explain(ctx, text=TEXT, position=-1, target="", head=why_tab.STRONGEST, knocked=(), mode="mean over the text"):
    return why_tab.explain(ctx, "shakespeare-char", text, position, target, head, list(knocked), mode)


def test_the_bars_sum_to_the_logit_the_heading_quotes(ctx):
    view = explain(ctx)
    logit = float(re.search(r"its logit (-?[\d.]+) is the sum", view.heading).group(1))
    bars = [trace for trace in view.parts.data if trace.type == "bar"][0]
    assert bars.orientation == "h"  # one named row a part: readable on a phone
    assert sum(bars.x) == pytest.approx(logit, abs=2e-3)  # the heading rounds to 3 places
    loaded = ctx.checkpoint("shakespeare-char")
    assert len(bars.x) == len(circuits.logit_attribution(loaded.model, loaded.tokenizer.encode(TEXT), -1, 0).names)
    for figure in (view.parts, view.weights, view.shares, view.qk, view.ov, view.ranking):
        json.loads(figure.to_json())
    assert view.heading.count("**Look for:**") == 1 and "**Look for:**" in view.knock_heading


def test_the_strongest_head_is_the_one_with_the_largest_part(ctx):
    loaded = ctx.checkpoint("shakespeare-char")
    ids = loaded.tokenizer.encode(TEXT)
    with torch.no_grad():
        guess = int(loaded.model(ids.view(1, -1)).logits[0, -1].argmax())
    parts = circuits.logit_attribution(loaded.model, ids, -1, guess)
    heads = [(name, value) for name, value, kind in zip(parts.names, parts.values.tolist(), parts.kinds)
             if kind == "head"]
    strongest = max(heads, key=lambda item: item[1])[0]
    view = explain(ctx)
    assert view.head_heading.startswith(f"### {strongest} at position {len(TEXT) - 1}")
    assert f"What {strongest} reads and writes" in view.circuits_heading
    assert view.circuits_heading.count(" looks for `") == why_tab.PAIRS
    shares = [trace for trace in view.shares.data if trace.type == "bar"][0]
    assert len(shares.y) == len(TEXT)  # every read position, the future has none


def test_a_chosen_target_and_head_and_position(ctx):
    view = explain(ctx, position=5, target="e", head="L1 H0")
    assert view.heading.startswith("### Why `e` after `,` (position 5)")
    assert view.head_heading.startswith("### L1 H0 at position 5")
    assert "(the direct path" in view.circuits_heading
    shares = [trace for trace in view.shares.data if trace.type == "bar"][0]
    assert len(shares.y) == 6


def test_knocking_out_heads_reports_loss_and_prediction_and_ranks_every_head(ctx):
    view = explain(ctx, knocked=["L0 H0", "L1 H1"], mode="zero")
    assert "| loss on the text |" in view.knock_heading and "without L0 H0, L1 H1" in view.knock_heading
    ranking = [trace for trace in view.ranking.data if trace.type == "bar"][0]
    assert len(ranking.y) == 4  # 2 layers x 2 heads
    assert "Most needed: L" in view.knock_heading


@pytest.mark.parametrize(("changes", "message"), [
    ({"text": ""}, "the text is empty"),
    ({"text": "x" * 20 + "∑"}, "does not know; the first is '∑' at 20"),
    ({"text": "a" * 40}, "this view reads at most 32"),
    ({"position": 99}, "position 99 is outside the text's 28 tokens"),
    ({"target": "∑"}, "not in this model's vocabulary"),
    ({"target": "ab"}, "is 2 tokens"),
    ({"head": "L7 H0"}, "not one of this model's heads"),
    ({"knocked": ["L0 H9"]}, "not one of this model's heads"),
    ({"mode": "half"}, "knock-out"),
])
def test_bad_input_is_a_clear_gradio_error(ctx, changes, message):
    handler = functools.partial(friendly(why_tab.explain), ctx)
    args = dict(text=TEXT, position=-1, target="", head=why_tab.STRONGEST, knocked=[], mode="zero") | changes
    with pytest.raises(gr.Error, match="(?i)" + re.escape(message)):
        handler("shakespeare-char", args["text"], args["position"], args["target"], args["head"], args["knocked"],
                args["mode"])


def test_the_pickers_follow_the_checkpoint(ctx):
    head, knocked = why_tab.controls(ctx, "shakespeare-char")
    assert head.choices[0] == (why_tab.STRONGEST, why_tab.STRONGEST) and len(head.choices) == 5
    assert [choice[0] for choice in knocked.choices] == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"] and knocked.value == []
    assert why_tab.controls(ctx, "no-such-run") == (gr.skip(), gr.skip())


def _merged(base: dict, changes: dict) -> dict:
    """chart_deck's merge in Python: objects key by key, a figure's traces one by one, the rest replaced."""
    if isinstance(base, dict) and isinstance(changes, dict):
        return {**base, **{key: [_merged(b, c) for b, c in zip(base[key], changes[key])] if key == "data" else
                           _merged(base.get(key), value) for key, value in changes.items()}}
    return changes


def test_the_page_is_sent_every_position_once_and_each_is_the_apis_view(ctx):
    """A new position is drawn in the page from the deck: every position's view, figures as changes to one base,
    carries the texts and the numbers /why gives for that position."""
    deck, circuits_deck, shown = why_tab.why_deck(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST, [], "zero",
                                                  {})
    sent = json.loads(deck)
    assert int(sent["key"].split(":")[0]) == len(TEXT) and sorted(map(int, sent["views"])) == list(range(len(TEXT)))
    held = json.loads(circuits_deck)["views"]
    for position in (0, 7, len(TEXT) - 1):
        view = explain(ctx, position=position, mode="zero")
        texts, figures = sent["views"][str(position)]["texts"], sent["views"][str(position)]["figures"]
        assert texts[:3] == [view.heading, view.head_heading, view.knock_heading]
        assert view.head_heading.startswith(f"### {texts[3]} at position {position}")
        parts, looks, pushes = (_merged(sent["bases"][figure["base"]], figure["changes"]) for figure in figures)
        assert parts["data"][0]["x"] == pytest.approx(list(view.parts.data[0].x), abs=1e-4)
        assert looks["data"][0]["y"] == pytest.approx(list(view.weights.data[0].y), rel=1e-3, abs=1e-6)
        assert pushes["data"][0]["y"] == pytest.approx(list(view.shares.data[0].y), rel=1e-3, abs=1e-6)
        assert pushes["layout"]["title"]["text"] == view.shares.layout.title.text
        assert looks["layout"]["xaxis"]["ticktext"] == list(view.weights.layout.xaxis.ticktext)
    assert set(held) <= {sent["views"][str(p)]["texts"][3] for p in range(len(TEXT))} and held
    assert shown["heads"] == list(held)


def test_a_first_answer_sends_only_what_the_page_lacks(ctx):
    args = ("shakespeare-char", TEXT, -1, "", "L1 H0", [], "zero")
    deck, circuits_deck, ranking_deck, shown = why_tab.why_page(ctx, *args, shown=None)
    assert list(json.loads(deck)["views"]) == [str(len(TEXT) - 1)]
    assert list(json.loads(circuits_deck)["views"]) == ["L1 H0"] and json.loads(ranking_deck)["views"]["ranking"]
    deck, circuits_deck, ranking_deck, shown = why_tab.why_page(ctx, "shakespeare-char", TEXT, 5, "", "L1 H0", [],
                                                                "zero", shown)
    assert list(json.loads(deck)["views"]) == ["5"]
    assert circuits_deck == ranking_deck == gr.skip()  # the same head's circuits, the same ranking: held
    _, circuits_deck, ranking_deck, shown = why_tab.why_page(ctx, "shakespeare-char", TEXT, 5, "", "L0 H1",
                                                             ["L0 H0"], "zero", shown)
    assert list(json.loads(circuits_deck)["views"]) == ["L0 H1"] and ranking_deck == gr.skip()
    _, circuits_deck, ranking_deck, _ = why_tab.why_page(ctx, "shakespeare-char", TEXT, 5, "", "L0 H1", [],
                                                         "zero", shown, fresh=True)  # the page asked: it lacks them
    assert circuits_deck != gr.skip() and ranking_deck != gr.skip()


def test_a_knock_out_that_lowers_the_loss_says_the_head_was_hurting(ctx):
    """A learner saw the loss fall without a head and nothing on screen said what that means."""
    loaded = ctx.checkpoint("shakespeare-char")
    ids = loaded.tokenizer.encode(TEXT)
    helping = circuits.head_effects(loaded.model, ids, "mean")[0]  # replaced by its mean, the loss rises
    hurting = circuits.head_effects(loaded.model, ids, "zero")[-1]  # zeroed, this barely trained head's loss falls
    assert helping.added > 0 > hurting.added
    for effect, mode, lower in ((helping, "mean over the text", False), (hurting, "zero", True)):
        name = circuits.head_name(effect.layer, effect.head)
        view = explain(ctx, knocked=[name], mode=mode)
        assert (f"The loss is lower without {name}**: on this text it was hurting" in view.knock_heading) == lower


def test_the_pairs_in_words_are_among_the_texts_characters_and_a_downward_head_is_read_by_its_downward_push(ctx):
    """A learner read "t looks for 3" and "Z promotes &" for heads of a model that never saw '3', 'Z' or '&' (their
    random embeddings made the largest entries), and "pushed most: e (weight 0.00, +0.000)" for a head whose part was
    -0.13, pushed down by one character at weight 0.97."""
    text = "the cat sat on the mat"
    for head in ("L0 H0", "L0 H1", "L1 H0", "L1 H1"):
        view = explain(ctx, text=text, head=head)
        quoted = re.findall(r"`([^`]+)` (?:looks for|promotes) `([^`]+)`", view.circuits_heading)
        assert len(quoted) == 2 * why_tab.PAIRS and {c for pair in quoted for c in pair} <= set(text) | {"␣"}
        part = float(re.search(r"Its part of the logit: ([-+][\d.]+)", view.head_heading).group(1))
        push = float(re.search(r"pushed it (?:up|down) most: `[^`]+` at \d+ \(weight [\d.]+, ([-+][\d.]+)\)",
                               view.head_heading).group(1))
        assert (push >= 0) == (part >= 0) or push == 0, (head, part, push)
        assert ("pushed it down most" in view.head_heading) == (push < 0)
