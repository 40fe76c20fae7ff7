"""The Attention, Model and Why tabs on a tiny Mistral (MistralForCausalLM built with transformers, test-only: 4 query
heads over 2 K/V heads, a sliding window of 5 keys, shorter than the text), opened by name from a weights folder. The
Attention tab's mask stage hides the keys outside the window and says so, its weights are the model's own; the Model
tab's head levels and the Why tab's views read transformers' numbers."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from test_mistral import PROMPT, make_tiny_mistral
from test_ui_handlers import REPO

from playground.config import Limits
from playground.lens import walkthrough
from playground.lens.anatomy import family_levels
from playground.lens.anatomy.lessons import LEVEL_TITLES
from playground.lens.walkthrough.whatifs import HEAD_CHANGES, _changed_llama_forward, change_head
from playground.model.gpt import causal_mask
from playground.ui import attention_views, model_tab, why_reading, why_tab
from playground.ui.common import AppContext

NAME, WINDOW = "mistral-4over2-w5", 5


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    """(context, transformers' model, its tokenizer): the weights folder holds the shipped GPT and "tiny-mistral"."""
    weights = tmp_path_factory.mktemp("weights")
    reference, tokenizer, _ = make_tiny_mistral(weights / "tiny-mistral", NAME)
    shutil.copytree(REPO / "weights" / "shakespeare-char", weights / "shakespeare-char")
    reference.config._attn_implementation = "eager"
    return AppContext(limits=Limits(), weights=weights), reference, tokenizer


def attention_view(ctx, checkpoint, step, head=3, mask=True):
    return attention_views.stage_view(ctx, attention_views.SOURCES[0], checkpoint, 1, head, 0, 16, 8, "journey",
                                      PROMPT, True, mask, 1.0, False, step, -1)


def test_the_walkthroughs_head_masks_outside_the_window_with_the_models_own_weights(mistral):
    ctx, reference, tokenizer = mistral
    loaded = ctx.checkpoint("tiny-mistral")
    ids = tokenizer.encode(PROMPT)
    T = ids.numel()
    with torch.no_grad():
        attentions = reference(ids[None], output_attentions=True).attentions
    for layer in range(2):
        for head in range(4):
            inputs = walkthrough.checkpoint_head_inputs(loaded.model, ids, layer, head)
            assert inputs.window == WINDOW
            trace = inputs.trace()
            assert torch.equal(trace.masked, ~causal_mask(T, T, window=WINDOW))
            assert trace.masked[T - 1, T - 1 - WINDOW] and not trace.masked[T - 1, T - WINDOW]
            torch.testing.assert_close(trace.weights, attentions[layer][0, head], atol=1e-5, rtol=0)
    assert not inputs.trace(mask=False).masked.any()  # the mask switched off takes the window with it


def test_the_mask_stage_draws_the_window_and_says_so(mistral):
    ctx, _, tokenizer = mistral
    T = tokenizer.encode(PROMPT).numel()
    shown = attention_view(ctx, "tiny-mistral", 5)
    assert "Mistral's sliding window: each query sees at most 5 keys back" in shown.heading
    assert "from row 5 on grey left of a band 5 keys wide" in shown.heading  # the Look-for line
    assert "Click an earlier row: more of it is grey" not in shown.heading  # not true of a window's band
    assert "i − j ≥ 5" in shown.heading  # the formula behind the fold
    grey = np.nan_to_num(np.asarray(shown.plot_a.data[1].z, dtype=float), nan=0.0).astype(bool)  # (rows, cols) shown
    rows, cols = grey.shape
    assert rows == cols == T  # the whole text fits the heatmap
    assert torch.equal(torch.from_numpy(grey), ~causal_mask(T, T, window=WINDOW))
    weights = attention_view(ctx, "tiny-mistral", 6)
    assert "at most 5 keys back" in weights.heading
    for step in (1, 2, 3, 4, 7):
        assert "Mistral's sliding window" not in attention_view(ctx, "tiny-mistral", step).heading
    assert "Mistral's sliding window" not in attention_view(ctx, "tiny-mistral", 5, mask=False).heading
    assert "Mistral's sliding window" not in attention_view(ctx, "shakespeare-char", 5, head=1).heading


def test_the_model_tabs_head_levels_read_transformers_weights_through_the_window(mistral):
    ctx, reference, tokenizer = mistral
    loaded = ctx.checkpoint("tiny-mistral")
    ids = tokenizer.encode(PROMPT)
    with torch.no_grad():
        attentions = reference(ids[None], output_attentions=True).attentions
    for layer in range(2):
        rotary = family_levels.rotary_head(loaded.model, ids, layer, 3)
        T = ids.numel()
        assert torch.equal(rotary.trace.masked, ~causal_mask(T, T, window=WINDOW))
        torch.testing.assert_close(rotary.trace.weights, attentions[layer][0, 3], atol=1e-5, rtol=0)
    settings = ("pre", "decoder", "gelu", 0.0, 0)
    for level in range(1, 6):
        shown = model_tab.model_view(ctx, "trained checkpoint", "tiny-mistral", PROMPT, LEVEL_TITLES[level - 1], 1, 3,
                                     -1, 0, *settings)
        assert shown.plot_a is not None, level


def test_the_why_tab_explains_a_mistral_with_transformers_logit(mistral):
    ctx, reference, tokenizer = mistral
    view = why_tab.explain(ctx, "tiny-mistral", PROMPT, -1, "", why_tab.STRONGEST, ["L1 H2"], "mean over the text",
                           why_reading.ALONE, None)
    with torch.no_grad():
        logits = reference(tokenizer.encode(PROMPT)[None]).logits[0, -1]
    assert view.numbers["target"]["token_id"] == int(logits.argmax())
    assert view.numbers["logit"] == pytest.approx(float(logits.max()), abs=1e-4)
    assert sum(view.parts.data[0].x) == pytest.approx(float(logits.max()), abs=1e-4)
    assert "Knocked out: L1 H2" in view.knock_heading and view.chain is not None
    assert len(view.ranking.data[0].x) == 2 * 4


def test_the_why_tabs_qk_table_past_the_window_says_the_mask_hides_it(mistral):
    """A QK table at a distance of the window or more is what the head would score there, never what it uses: the
    heading and the table's title say so; within the window they say nothing of it."""
    ctx, _, _ = mistral
    inside, outside = (why_tab.explain(ctx, "tiny-mistral", PROMPT, -1, "", "L1 H2", [], "mean over the text",
                                       why_reading.ALONE, distance) for distance in (WINDOW - 1, WINDOW))
    said = f"the sliding window masks keys {WINDOW} or more back, so at distance {WINDOW}"
    titles = [view.qk.layout.title.text.replace("<br>", " ") for view in (inside, outside)]
    assert said in outside.circuits_heading and "masked by the window" in titles[1]
    assert "Outside the window" not in inside.circuits_heading and "masked by the window" not in titles[0]


def test_the_compare_tabs_grouped_ways_mask_with_the_window(mistral):
    from playground.model import grouped_ways
    from playground.ui import compare_tab

    ctx, _, tokenizer = mistral
    loaded = ctx.checkpoint("tiny-mistral")
    ids = tokenizer.encode(PROMPT)
    q, k, v, own = grouped_ways.rotated_qkv(loaded.model, ids, 1)  # own: the model's hook_z, transformers' (above)
    for way in grouped_ways.WAYS:
        with torch.no_grad():
            torch.testing.assert_close(way.compute(q, k, v, WINDOW), own, atol=1e-5, rtol=0)
            assert (way.compute(q, k, v) - own).abs().max() > 1e-3, way.name  # causal alone is not the model
    _, rows = compare_tab.checkpoint_heads(ctx, "tiny-mistral", PROMPT, 1)
    assert all(float(row[1]) < 1e-5 and float(row[2]) < 1e-5 for row in rows["data"])


def test_the_why_tabs_looks_read_against_an_even_spread_over_the_window():
    """A head spreading its weight evenly over each query's window adds nothing anywhere: every Look's lift is 0, and
    no distance of the window or more is scored (read against the causal spread alone, the lifts were not 0)."""
    from playground.lens import head_scores

    T, window = 20, 4
    seen = causal_mask(T, T, window=window).float()
    even = seen / seen.sum(1, keepdim=True)  # (T, T) rows sum to 1
    ids = torch.tensor([1, 2, 3, 1, 2, 3, 4, 5, 1, 2, 6, 7, 1, 3, 2, 4, 5, 6, 1, 2])
    words = head_scores.word_numbers("ab cd efg hi jk lmno")
    looks = head_scores.looks_over_text(even, ids, words, window)
    assert max(abs(look.lift) for look in looks) < 1e-6
    assert max(look.what for look in looks if look.kind == "distance") == window - 1
    assert max(abs(look.lift) for look in head_scores.looks_over_text(even, ids, words)) > 0.05
    peaked = even.clone()
    peaked[9] = 0.0
    peaked[9, 7] = 1.0  # query 9 puts everything on key 7
    assert head_scores.strongest_look(peaked, window) == (9, 7, 1.0)


def test_the_probes_chance_levels_keep_to_the_window(mistral):
    """An even spread over a window of 4 puts nothing 5 or 6 back (the induction and duplicate keys of a repeat of
    6), 1/4 on the previous token once a query sees 4 keys; without a window the causal spread's levels stay."""
    from playground.lens import head_scores

    L = 6
    causal = head_scores.chance_levels(L)
    assert causal["previous token"] == pytest.approx(sum(1 / (p + 1) for p in range(1, 2 * L)) / (2 * L - 1))
    windowed = head_scores.chance_levels(L, 4)
    assert windowed["induction"] == windowed["duplicate token"] == 0.0
    assert windowed["previous token"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4 * (2 * L - 3)) / (2 * L - 1))
    assert windowed["first token"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 4) / (2 * L - 1))
    ctx = mistral[0]
    scored = head_scores.score_heads(ctx.checkpoint("tiny-mistral").model, sequences=2)  # repeats of 32, window 5
    induction = [score for score in scored if score.pattern == "induction"]
    assert len(induction) == 2 * 4 and all(score.chance == 0.0 and score.score < 1e-6 for score in induction)


def test_a_what_if_on_a_mistral_head_keeps_the_window(mistral):
    """The Q, K, V what-ifs' own forward pass masks with the window: unchanged it is transformers' forward, and the
    tied head's weights are zero outside the window."""
    ctx, reference, tokenizer = mistral
    model = ctx.checkpoint("tiny-mistral").model
    ids = tokenizer.encode(PROMPT)[None]
    T = ids.size(1)
    with torch.no_grad():
        expected = reference(ids).logits[0]
        logits, _, _, _ = _changed_llama_forward(model, ids, 1, 3, None)
        torch.testing.assert_close(logits, expected, atol=1e-4, rtol=0)
        tied = change_head(model, ids[0], 1, 3, HEAD_CHANGES[0])
    assert tied.weights[~causal_mask(T, T, window=WINDOW)].abs().max() == 0
