"""Tab handlers called directly, without a browser or a server."""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import re
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest
import torch
from conftest import REPO
from text_support import visible_words

from playground import device
from playground.budget import MIB, BudgetError, MemoryBudget
from playground.config import ConfigError, Limits, ModelConfig
from playground.lens import walkthrough
from playground.lens.walkthrough import STEP_TITLES, journey_preset, lessons
from playground.server import tenancy
from playground.server.admission import BusyError, LongWork
from playground.server.jobs import NotYourRunError
from playground.training.presets import DECAY_FLOORS, TRAIN_PRESETS
from playground.ui import attention_tab, attention_views, compare_tab, sample_tab, tokenize_tab, train_tab
from playground.ui.common import AppContext, friendly, message_for


@pytest.fixture
def ctx(tiny_weights):
    return AppContext(limits=Limits(), weights=tiny_weights)


def test_tokenize_unknown_characters_are_highlighted_not_fatal(ctx):
    chips, ids, decoded, stats, table = tokenize_tab.tokenize(ctx, "a∑b", "loaded checkpoint", "shakespeare-char")
    assert chips.count("tok-unknown") == 1 and ids == "[39, 40]" and decoded == "ab"
    assert "'∑' at 1" in stats
    assert table["headers"][3] == "count in Tiny Shakespeare" and len(table["data"]) == 65


def test_tokenize_corpus_vocabulary_counts(ctx):
    *_, table = tokenize_tab.tokenize(ctx, "e", "corpus (Tiny Shakespeare)", None)
    counts = {row[1]: row[3] for row in table["data"]}
    assert counts["e"] == 94611 and counts["\n"] == 40000


def test_attention_every_step_and_notice_of_truncation(ctx):
    long_text = "To be, or not to be, that is the question: whether 'tis nobler"
    for step in STEP_TITLES:
        heading, a, b, c, whatif, *_ = attention_tab.attention_step(
            ctx, "trained checkpoint", "shakespeare-char", 0, 1, 0, 16, 8, "journey", long_text, True, True, 1.0,
            False, step, None)
        assert a is not None
        assert (b is not None) == (step == STEP_TITLES[1])
    assert "30 characters were dropped (context_size is 32)" in heading


def test_each_step_shows_only_what_has_been_introduced_by_then(ctx):
    """Issue 31: at "1 · X" the query's panel already showed raw scores and softmax bars."""
    for number, step in enumerate(STEP_TITLES, start=1):
        *_, score_bars, weight_bars, query_md, _ = attention_tab.attention_step(
            ctx, "textbook preset", None, 0, 0, 0, 16, 8, "journey", "", True, True, 1.0, False, step, 2)
        assert (score_bars is not None) == (number >= 2) and (weight_bars is not None) == (number >= 6), number
        if number == 2:  # Q and K as what they are for: the query's row beside the keys it matches best
            trace = journey_preset().trace()
            assert score_bars.layout.title.text.startswith("The keys query 2 (starts) matches best")
            assert score_bars.layout.yaxis.ticktext == ("q of 2 (starts)", "k of 1 (journey): q·k 0.26",
                                                        "k of 2 (starts): q·k 0.26", "k of 0 (Your): q·k 0.17")
            torch.testing.assert_close(torch.as_tensor(score_bars.data[0].z),
                                       torch.stack([trace.q[2], trace.k[1], trace.k[2], trace.k[0]]).double())
        assert query_md.startswith("Query **2** `starts`")
        assert ("mixes the value vectors" in query_md) == (number >= 6), query_md  # the weights say how much
        assert ("at step 6" in query_md) == (number < 6), query_md
    first = attention_tab.attention_step(ctx, "textbook preset", None, 0, 0, 0, 16, 8, "journey", "", True, True,
                                         1.0, False, STEP_TITLES[0], 2)
    assert first[-2].endswith("(framed in orange): its scores come at step 3, its softmax weights at step 6.")


def test_mask_before_scaling_at_step_4_says_its_two_maps_are_identical_and_why(ctx):
    """Issue 31: "mask before scaling" at step 4 drew two identical maps with nothing said."""
    def note(step, before=True, scale=True):
        return attention_tab.attention_step(ctx, "textbook preset", None, 0, 0, 0, 16, 8, "journey", "", scale, True,
                                            1.0, before, STEP_TITLES[step - 1], None)[4]

    assert "**Now and default are identical** (now: scaled, masked, τ 1, mask before scaling): the mask comes at " \
           "step 5, so masking (before or after scaling) cannot change the scaled scores." in note(4)
    assert "(−∞ ÷ √d_k is still −∞)" in note(6)
    assert "identical" not in note(4, scale=False) and "**Now vs default.**" in note(4, scale=False)


def test_step_ones_line_says_what_the_rows_are_where_they_come_from_and_a_checkpoints_claim_holds():
    """A sixth learner found a checkpoint's X "looks random": its line said only "one row per token". Each source
    gets its own line; the shipped checkpoint's (rows of one character look alike) holds on its layer 0 input:
    rows of the same character point the same way far more than rows of different ones."""
    shipped = AppContext(limits=Limits(), weights=REPO / "weights")
    text = "To be, or not to be: that is the question."
    for source, kind in attention_views.SOURCE_KINDS.items():
        heading = attention_tab.attention_step(shipped, source, "shakespeare-char", 0, 0, 0, 16, 8, "journey", text,
                                               True, True, 1.0, False, STEP_TITLES[0], None)[0]
        assert f"**Look for:** {lessons.INPUT_LOOK_FOR[kind]}" in heading
    loaded = shipped.checkpoint("shakespeare-char")
    ids = walkthrough.prepare_text(text, loaded.tokenizer, loaded.config.context_size).ids
    x = torch.nn.functional.normalize(walkthrough.checkpoint_head_inputs(loaded.model, ids, 0, 0).x, dim=1)
    cosine = x @ x.T
    same = torch.tensor([[a == b for b in text] for a in text]) & ~torch.eye(len(text), dtype=torch.bool)
    differ = torch.tensor([[a != b for b in text] for a in text])
    assert cosine[same].mean() > 2 * cosine[differ].mean()
    random = walkthrough.random_head(text, 16, 8, 0).x  # a repeated character's rows: unrelated
    assert not torch.equal(random[3], random[17])  # the "b" of "be" twice


def test_steps_4_and_5_say_what_to_look_for_with_their_switch_off(ctx):
    """An eighth learner read "on a smaller scale" over unscaled scores, and "grey above the diagonal" with the mask
    off: with its switch off, a step's line speaks of "now" beside the "default"."""
    def heading(step, scale=True, mask=True):
        return attention_tab.attention_step(ctx, "trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8, "journey",
                                            "To be", scale, mask, 1.0, False, STEP_TITLES[step], None)[0]

    assert f"**Look for:** {lessons.LOOK_FOR[3]}" in heading(3)
    assert f"**Look for:** {lessons.SCALING_OFF_LOOK_FOR}" in heading(3, scale=False)
    assert f"**Look for:** {lessons.LOOK_FOR[4]}" in heading(4, scale=False)  # its own switch on
    assert f"**Look for:** {lessons.MASK_OFF_LOOK_FOR}" in heading(4, mask=False)
    assert f"**Look for:** {lessons.MASK_OFF_WEIGHTS_LOOK_FOR}" in heading(5, mask=False)
    assert f"**Look for:** {lessons.SCALING_OFF_WEIGHTS_LOOK_FOR}" in heading(5, scale=False)
    assert f"**Look for:** {lessons.LOOK_FOR[6]}" in heading(6, mask=False, scale=False)


def test_a_temperature_and_the_mask_first_say_what_they_change_and_it_holds_on_the_shipped_model(ctx):
    """A tenth learner changed the temperature and put the mask before scaling: the charts changed, the line stayed
    the default's. Steps 4 and 6 speak of τ, step 5 of the mask's order; and on the shipped model what they say holds:
    τ 0.2's rows are more peaked than the default's, τ 3's less, and the mask first greys the same cells."""
    def heading(step, temperature=1.0, first=False):
        return attention_tab.attention_step(ctx, "trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8, "journey",
                                            "To be", True, True, temperature, first, STEP_TITLES[step], None)[0]

    assert "**Look for:** τ 0.2: “now” is the “default” ÷ 0.2, so its cells are darker" in heading(3, 0.2)
    assert f"**Look for:** {lessons.SHARPER_LOOK_FOR.format(t=0.2)}" in heading(5, 0.2)
    assert f"**Look for:** {lessons.FLATTER_LOOK_FOR.format(t=3)}" in heading(5, 3.0)
    assert f"**Look for:** {lessons.MASK_FIRST_LOOK_FOR}" in heading(4, first=True)
    assert f"**Look for:** {lessons.LOOK_FOR[5]}" in heading(5, first=True)  # softmax's line: nothing changed there
    loaded = ctx_shipped().checkpoint("shakespeare-char")
    ids = walkthrough.prepare_text("To be, or not to be: that is the question.", loaded.tokenizer, 256).ids
    inputs = walkthrough.checkpoint_head_inputs(loaded.model, ids, 3, 1)
    peak = {t: inputs.trace(temperature=t).weights.amax(dim=1) for t in (0.2, 1.0, 3.0)}
    assert bool((peak[0.2] >= peak[1.0] - 1e-6).all()) and bool((peak[3.0] <= peak[1.0] + 1e-6).all())
    assert torch.equal(inputs.trace(mask_before_scaling=True).masked, inputs.trace().masked)


def test_step_4_is_drawn_on_step_3s_colour_scale():
    """A ninth learner found step 4 the same picture as step 3, only the colour bar's numbers changed: the scaled
    scores are drawn on the raw scores' scale, so they look paler, as the line says."""
    def figure(step):
        return attention_tab.attention_step(ctx_shipped(), "trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8,
                                            "journey", "To be, or not to be", True, True, 1.0, False,
                                            STEP_TITLES[step], None)[1]

    raw, scaled = figure(2).data[0], figure(3).data[0]
    assert scaled.zmax == raw.zmax and scaled.zmin == raw.zmin
    assert np.nanmax(np.abs(np.asarray(scaled.z, dtype=float))) < raw.zmax / 4  # ÷ √48, the shipped head's d_k
    assert "paler" in lessons.LOOK_FOR[3]


def ctx_shipped() -> AppContext:
    return AppContext(limits=Limits(), weights=REPO / "weights")


def test_step_6s_line_with_scaling_off_holds_on_the_shipped_model():
    """"now's rows are more peaked than the default's": on the shipped model's heads, unscaled, every row's largest
    weight is at least the scaled row's, and on average well above it."""
    shipped = AppContext(limits=Limits(), weights=REPO / "weights")
    loaded = shipped.checkpoint("shakespeare-char")
    ids = walkthrough.prepare_text("To be, or not to be: that is the question.", loaded.tokenizer, 256).ids
    for layer, head in ((0, 0), (3, 1)):
        inputs = walkthrough.checkpoint_head_inputs(loaded.model, ids, layer, head)
        scaled, unscaled = (inputs.trace(scale=scale).weights.amax(dim=1) for scale in (True, False))
        assert bool((unscaled >= scaled - 1e-6).all()) and float(unscaled.mean()) > float(scaled.mean()) + 0.1


def test_attention_unknown_characters_are_highlighted(ctx):
    result = attention_tab.attention_step(ctx, "trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8, "journey",
                                          "hi ∑", True, True, 1.0, False, STEP_TITLES[0], None)
    assert "tok-unknown" in result[-1] and "not in the vocabulary" in result[0]


def test_the_scaling_what_if_on_a_head_already_peaked_says_why_its_maps_look_alike():
    """Issue 52, trip 8: scaling switched off on the shipped model's L0 H2 (the strongest previous-character head, which
    the ranked table opens) drew two maps a learner could not tell apart (largest weight 0.967 scaled, 1.000 without),
    and nothing said why. A head whose rows are spread (L1 H0: 0.293 -> 0.788) is not called peaked."""
    def note(layer, head):
        return attention_tab.attention_step(ctx_shipped(), "trained checkpoint", "shakespeare-char", layer, head, 0, 16,
                                            8, "journey", "To be, or not to be: that is the question.", False, True,
                                            1.0, False, STEP_TITLES[5], None)[4]

    peaked = note(0, 2)
    assert "This head is already peaked" in peaked and "0.967 of their weight" in peaked
    assert "look alike" in peaked and "another head" in peaked
    assert "already peaked" not in note(1, 0)


def test_a_query_left_past_the_end_by_a_change_of_text_follows_it_without_a_warning(ctx):
    """Issue 52, trip 7: the Why tab's "Step through this head" left position 85 in the query box; the textbook preset
    (6 tokens) then warned "Query position 85 is past the end", a position the learner never typed there. A change of
    the text under the query (``moved``) clamps it quietly; a typed position past the end is still said."""
    settings = ["textbook preset", "shakespeare-char", 0, 0, 0, 16, 8, "journey", "", True, True, 1.0, False,
                STEP_TITLES[5], 85, []]
    _, _, query, warned = attention_tab.attention_page(ctx, *settings, moved=True)
    assert query == 5 and warned == []
    _, _, query, warned = attention_tab.attention_page(ctx, *settings)
    assert query == 5 and [w for w in warned if "Query position 85 is past the end" in w]


@pytest.mark.parametrize("source", ["trained checkpoint", "random weights"])
def test_emptying_the_text_box_clears_the_attention_plots_on_the_page_and_is_refused_through_the_api(ctx, source):
    """The old text's heatmaps stayed beside an empty box (a toast said why, then went)."""
    settings = [source, "shakespeare-char", 0, 0, 0, 16, 8, "journey", "", True, True, 1.0, False, STEP_TITLES[3]]
    deck = json.loads(attention_tab.attention_page(ctx, *settings, None, [])[0])
    (shown,) = deck["views"].values()
    assert shown["texts"][0].startswith("### Type some text first") and shown["figures"] == [None] * 5
    assert attention_tab.attention_deck(ctx, *settings[:-1], None) == gr.skip()  # no other step to send
    with pytest.raises(ValueError, match="Type some text first"):
        attention_tab.attention_step(ctx, *settings, None)


def test_attention_random_and_preset_sources(ctx):
    random = attention_tab.attention_step(ctx, "random weights", None, 0, 0, 5, 12, 4, "journey", "abcabc", False,
                                          False, 2.0, False, STEP_TITLES[5], 2)
    assert "T = 6 tokens · C = 12 · d_k = 4" in random[0]
    assert "With the mask off, when the text's last token" in random[4] and "whatever the query" in random[4]
    with pytest.raises(ValueError, match="not divisible|unknown preset"):
        attention_tab.attention_step(ctx, "textbook preset", None, 0, 0, 0, 16, 8, "nope", "", True, True, 1.0,
                                     False, STEP_TITLES[0], None)


def test_attention_export_lands_where_gradio_serves_files(ctx, monkeypatch):
    """With a user's defaults (no PLAYGROUND_CACHE_DIR, no GRADIO_TEMP_DIR) the files go to Gradio's temp space,
    which a launched app serves without allowed_paths, and read back to the stage's numbers."""
    monkeypatch.delenv("PLAYGROUND_CACHE_DIR", raising=False)
    monkeypatch.delenv("GRADIO_TEMP_DIR", raising=False)
    paths = [Path(p) for p in attention_tab.export_step(ctx, "textbook preset", None, 0, 0, 0, 16, 8, "journey", "",
                                                        True, True, 1.0, False, STEP_TITLES[1])]
    try:
        upload_folder = gr.utils.get_upload_folder()
        assert [p.name for p in paths] == [f"step2_{m}.{ext}" for m in "QKV" for ext in ("csv", "npy")]
        for path in paths:
            assert path.resolve().is_relative_to(Path(upload_folder).resolve())
            assert gr.utils.is_allowed_file(path, blocked_paths=[], allowed_paths=[],
                                            created_paths=[upload_folder]) == (True, "created")
        trace = journey_preset().trace()
        for (csv_path, npy_path), expected in zip(zip(paths[::2], paths[1::2]), (trace.q, trace.k, trace.v)):
            rows = list(csv.reader(csv_path.read_text(encoding="utf-8").splitlines()))
            assert rows[0] == ["", "d0", "d1"]
            assert [row[0] for row in rows[1:]] == [f"{i}:{token}" for i, token in enumerate(trace.tokens)]
            assert np.array_equal(np.array([[np.float32(v) for v in row[1:]] for row in rows[1:]]), expected.numpy())
            assert np.array_equal(np.load(npy_path, allow_pickle=False), expected.numpy())
    finally:
        shutil.rmtree(paths[0].parent, ignore_errors=True)


def test_move_step_stays_in_range():
    assert attention_tab.move_step(STEP_TITLES[0], -1) == STEP_TITLES[0]
    assert attention_tab.move_step(STEP_TITLES[6], 1) == STEP_TITLES[6]
    assert attention_tab.move_step(STEP_TITLES[2], 1) == STEP_TITLES[3]


def test_sample_then_inspect_a_position(ctx):
    outputs = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 12, 1.0, 5, 0.9, 3, False, True))
    text, coloured, stats, state = outputs[-1]
    assert len(text) == len("ROMEO:") + 12 and coloured.count("<span") == 12
    assert [f'data-position="{i}"' in coloured for i in (0, 11, 12)] == [True, True, False]  # what a tap sends
    top, attention, note = sample_tab.inspect_position(ctx, state, 4, 1, 1)
    assert sum(p > 0 for p in top.data[0].y) == 5 and abs(sum(attention.data[0].y) - 1) < 1e-4
    assert "saw the last 10 characters" in note
    # a phone chooses the labels again, in this order: the tallest bar's first, before the last token read (trial 16
    # found a tallest bar 1 back unlabelled beside it)
    looked_back = 0
    for position, layer, head in itertools.product(range(12), range(2), range(2)):
        _, attention, _ = sample_tab.inspect_position(ctx, state, position, layer, head)
        weights = list(attention.data[0].y)
        tallest = weights.index(max(weights))
        assert attention.layout.meta["important"][0] == tallest
        looked_back += tallest != len(weights) - 1
    assert looked_back
    with pytest.raises(ValueError, match=r"^position 12 is past the end: this text has 12 generated characters, "
                                         r"at positions 0 to 11"):
        sample_tab.inspect_position(ctx, state, 12, 0, 0)
    with pytest.raises(ValueError, match="Generate some text first"):
        sample_tab.inspect_position(ctx, {}, 0, 0, 0)
    with pytest.raises(ValueError, match="no finished text to inspect yet"):
        sample_tab.inspect_position(ctx, outputs[0][3], 0, 0, 0)  # tapped while it is still generating


def test_inspecting_past_the_context_reads_the_window_the_kv_cache_drew_with(ctx):
    """"ROMEO:" + 150 new characters outgrows the model's context, and the cache is rebuilt from its last half.
    Inspecting a character drawn after that reads the cache's window, not the whole context."""
    context = ctx.checkpoint("shakespeare-char").config.context_size
    *_, stats, state = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 150, 1.0, 0, 1.0, 3, False, True))[-1]
    windows = [token["context"] for token in state["tokens"]]
    rebuilds = sum(later < earlier for earlier, later in zip(windows, windows[1:]))
    assert windows[:context - 5] == list(range(6, context + 1)) and windows[context - 5] == context // 2
    assert all(context // 2 <= window <= context for window in windows[context - 5:]) and rebuilds >= 1
    assert f"was rebuilt from the last {context // 2} characters {rebuilds} times, first before new character " \
           f"{context - 4}:" in stats  # the first drawn from the rebuilt cache: windows[context - 5]
    assert "the two texts can part from there (switch the KV cache off for the sliding-window text" in stats
    top, attention, note = sample_tab.inspect_position(ctx, state, 140, 0, 0)
    assert len(attention.data[0].y) == windows[140] < context
    assert f"saw the last {windows[140]} characters (the KV cache's window" in note
    *_, plain_stats, plain = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 150, 1.0, 0, 1.0, 3, False,
                                                    False))[-1]
    assert "rebuilt" not in plain_stats and [token["context"] for token in plain["tokens"]][-1] == context
    top, attention, note = sample_tab.inspect_position(ctx, plain, 140, 0, 0)
    assert len(attention.data[0].y) == context and f"saw the last {context} characters." in note


def test_a_tapped_character_the_page_does_not_hold_is_asked_for(ctx):
    """The page draws a tapped character from the views sent with the text; one it lacks comes as "<position>
    #<stamp>" and is answered with the position and its view's deck."""
    *_, state = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 8, 1.0, 0, 1.0, 3, False, True))[-1]
    position, deck = sample_tab.inspect_need(ctx, state, "7 #1712345678901", 0, 1)
    view = json.loads(deck)["views"]["7"]
    assert position == 7 and "Top-10 candidates at #7" in view["figures"][0]["layout"]["title"]["text"]
    assert view["texts"][0].startswith("Character #7")
    with pytest.raises(ValueError, match="Tap or click a character"):
        sample_tab.inspect_need(ctx, state, "", 0, 0)
    for forged in ("7; alert(1) #1", -1, 1.5, True):
        with pytest.raises(ValueError, match="position"):
            sample_tab.inspect_need(ctx, state, forged, 0, 0)


def test_every_characters_view_sent_with_a_text_is_the_servers_figure(ctx):
    """inspect_all's views (changes laid over the first view's figures, as the page's chart deck lays them) carry
    the same labels, numbers and titles as inspect_position's figures, past a rebuilt KV cache too."""
    *_, state = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 60, 1.0, 0, 1.0, 3, False, True))[-1]
    deck = json.loads(sample_tab.inspect_all(ctx, state, 1, 1))
    assert deck["key"].endswith("|1|1") and sorted(map(int, deck["views"])) == list(range(60))
    for position in (0, 31, 59):
        view = deck["views"][str(position)]
        figures = sample_tab.inspect_position(ctx, state, position, 1, 1)
        assert view["texts"] == [figures[2]]
        for sent, figure in zip(view["figures"], figures[:2]):
            base = deck["bases"][sent["base"]]
            trace, changes = {**base["data"][0], **sent["changes"]["data"][0]}, sent["changes"]["layout"]
            assert trace["y"] == list(figure.data[0].y) and trace["customdata"] == list(figure.data[0].customdata)
            assert changes["title"]["text"] == figure.layout.title.text
            assert changes["xaxis"]["ticktext"] == list(figure.layout.xaxis.ticktext)
    # after a text (or while it grows), fields that name no head send nothing rather than a message
    assert sample_tab.inspect_all(ctx, state, 9, 0) == sample_tab.inspect_all(ctx, {"generating": True}, 0, 0) \
        == gr.skip()


class StepClock:
    """A clock that moves ``step`` seconds each time it is read: generation at a known pace."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


@pytest.mark.parametrize("use_cache", [True, False])
def test_sample_streams_in_batches_and_ends_with_the_whole_text(ctx, use_cache):
    """At one character every 30 ms and an update every 80 ms, 40 characters show as about 13 growing updates."""
    outputs = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 40, 1.0, 0, 1.0, 3, False, use_cache,
                                     update_seconds=0.08, clock=StepClock(0.03)))
    texts = [text for text, *_ in outputs]
    intermediate = texts[1:-1]
    assert texts[0] == "ROMEO:" and 8 <= len(intermediate) <= 20
    assert all(len(a) < len(b) for a, b in zip(texts, texts[1:]))  # it grows at every update
    assert all(isinstance(state, type(gr.skip())) for *_, state in outputs[1:-1])
    text, coloured, stats, state = outputs[-1]
    assert text == "ROMEO:" + "".join(t["text"] for t in state["tokens"]) and len(text) == len("ROMEO:") + 40
    assert coloured.count("<span") == 40 and all(c.count("<span") < 40 for _, c, *_ in outputs[:-1])
    assert coloured.startswith(outputs[-2][1])  # the coloured text only appends: Gradio streams the difference
    assert "40 characters in" in stats
    fast = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 40, 1.0, 0, 1.0, 3, False, use_cache,
                                  update_seconds=10.0, clock=StepClock(0.001)))
    assert len(fast) == 2 and fast[-1][0] == text  # faster than the updates: the start and the whole text


def test_sample_says_its_speed_plainly(ctx):
    *_, cached_stats, state = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 10, 1.0, 0, 1.0, 3,
                                                      False, True))[-1]
    assert re.search(r"[\d,]+ characters/s with the KV cache; switch it off to compare", cached_stats)
    *_, uncached_stats, state = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 10, 1.0, 0, 1.0, 3,
                                                        False, False, False, state))[-1]
    assert re.search(r"[\d,]+ characters/s without the KV cache \([\d,]+ with it last time: [\d.,]+× faster\)",
                     uncached_stats)
    assert "(with cache" not in uncached_stats
    assert sample_tab.speed_sentence(836, False) == "836 tokens/s without the KV cache; switch it on to compare"
    assert sample_tab.speed_sentence(836, True, unit="characters").startswith("836 characters/s with the KV cache")
    assert sample_tab.speed_sentence(836, True, 95) == ("836 tokens/s with the KV cache (95 without it last time: "
                                                        "8.8× faster)")


def test_the_kv_cache_speed_up_is_quoted_only_between_like_runs(ctx):
    """Issue 31: "48 characters/s ... (521 with it last time: 10.8x faster)", the 521 from a run at another
    temperature."""
    def stats_of(temperature, use_cache, state, new=10, prompt="ROMEO:"):
        *_, stats, state = list(sample_tab.sample(ctx, "shakespeare-char", prompt, new, temperature, 0, 1.0, 3,
                                                  False, use_cache, False, state))[-1]
        return stats.split("\n")[0], state

    _, state = stats_of(0.8, True, None)
    unlike, state = stats_of(0.1, False, state)
    assert "faster" not in unlike and re.search(r"[\d,]+ with it last time, but at temperature 0.8: draw again "
                                                r"with the same settings to compare\)", unlike), unlike
    _, state = stats_of(0.1, True, state)
    like, state = stats_of(0.1, False, state)  # the same settings: the ratio
    assert re.search(r"\([\d,]+ with it last time: [\d.,]+× faster\)", like), like
    longer, _ = stats_of(0.1, True, state, new=12, prompt="JULIET:")
    assert "but at prompt length 6, max new tokens 10:" in longer, longer
    assert sample_tab.speed_sentence(48, False, 521, "characters", "temperature 0.8") == (
        "48 characters/s without the KV cache (521 with it last time, but at temperature 0.8: draw again with the same "
        "settings to compare)")


def test_small_sizes_and_short_times_are_said_to_what_is_meaningful(ctx):
    """Issue 31: "0 KiB" and "40 characters in 0.0 s"."""
    one = ModelConfig(vocabulary_size=10, layers_num=1, heads_num=1, embedding_dim=16, context_size=8)
    assert "(160 numbers, 640 bytes in fp32)" in sample_tab._cache_line(one, 5, True)
    *_, stats, _ = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 40, 1.0, 0, 1.0, 3, False, True,
                                         clock=StepClock(0.0005)))[-1]
    assert re.search(r"40 characters in \d+ ms on", stats), stats
    assert [sample_tab.duration(s) for s in (0.0004, 0.0456, 2.345)] == ["under 1 ms", "46 ms", "2.3 s"]


def test_the_kv_cache_line_of_a_one_layer_model_says_one_layer():
    """'each of the 1 layers holds 5 keys' (a stranger's toy run)."""
    one = ModelConfig(vocabulary_size=10, layers_num=1, heads_num=1, embedding_dim=16, context_size=8)
    assert sample_tab._cache_line(one, 5, True).startswith("KV cache: the model's one layer holds 5 keys and 5 values")
    two = ModelConfig(vocabulary_size=10, layers_num=2, heads_num=1, embedding_dim=16, context_size=8)
    assert sample_tab._cache_line(two, 5, True).startswith("KV cache: each of the 2 layers holds 5 keys")


def test_sample_refuses_what_would_take_too_long_and_says_what_to_lower(ctx, monkeypatch):
    ctx.limits = dataclasses.replace(ctx.limits, max_new_tokens=5000)
    monkeypatch.setattr(sample_tab, "max_request_seconds", lambda ctx: 2)
    args = ("shakespeare-char", "ROMEO:", 5000, 1.0, 0, 1.0, 3, False)
    with pytest.raises(ValueError, match=r"^5000 new characters without the KV cache would take about \d+ s on "
                                         r"this server, over its limit of 2 s per request "
                                         r"\(PLAYGROUND_MAX_REQUEST_SECONDS\): lower max_new_tokens to \d+ or fewer"):
        next(sample_tab.sample(ctx, *args, False))
    assert ctx.budget.reserved == 0


def test_an_empty_seed_box_draws_a_seed_and_says_which(ctx):
    text, _, stats, _ = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 12, 1.0, 0, 1.0, None, False,
                                               True))[-1]
    drawn = re.search(r"the seed box was empty, so seed (\d+) was drawn: type it there to draw this text again", stats)
    assert drawn, stats
    again = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 12, 1.0, 0, 1.0, int(drawn.group(1)), False,
                                   True))[-1][0]
    assert again == text  # the seed it names draws the very same text
    greedy = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 5, 1.0, 0, 1.0, None, True, True))[-1][2]
    assert "seed box was empty" not in greedy  # greedy draws nothing


@pytest.mark.parametrize("max_new_tokens,top_k,message", [
    (-5, 0, "max new tokens must be positive, got -5"),
    (5000, 0, "max new tokens must be at most 2000, got 5000"),
    (10, -3, "top-k (0 = off) must be at least 0, got -3"),
    (10, 2.5, "top-k (0 = off) must be a whole number, got 2.5"),
])
def test_sample_refusals_name_the_fields_as_the_page_labels_them(ctx, max_new_tokens, top_k, message):
    ctx.limits = dataclasses.replace(ctx.limits, max_new_tokens=2000)
    with pytest.raises(ValueError) as refused:
        next(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", max_new_tokens, 1.0, top_k, 1.0, 3, False, True))
    assert str(refused.value) == message
    assert message_for(refused.value) == message[0].upper() + message[1:]


@pytest.mark.parametrize("exc,logged,traceback", [
    (ValueError("steps must be positive, got 0"), "handler handler refused: steps must be positive, got 0", False),
    (NotYourRunError("this run belongs to another visitor"), "handler handler refused: this run belongs to another "
                                                              "visitor", False),
    (OSError("No space left on device"), "handler handler failed: No space left on device", True),
    (ZeroDivisionError("division by zero"), "handler handler failed", True),
])
def test_friendly_logs_a_refusal_as_one_line_and_a_failure_with_its_traceback_once(caplog, exc, logged, traceback):
    def handler():
        raise exc

    caplog.set_level("INFO", logger="playground.ui.common")
    with pytest.raises(gr.Error) as raised:
        friendly(handler)()
    assert raised.value.print_exception is False  # Gradio would print a second traceback
    [record] = caplog.records
    assert record.getMessage() == logged and bool(record.exc_info) is traceback


def test_the_compare_tab_opens_with_the_defaults_comparison_computed_once_per_server(ctx):
    from playground.ui import compare_tab

    first = compare_tab.first_comparison(ctx, *compare_tab.DEFAULTS)
    assert "6 of 6 compared implementations agree" in first[0] and "input 2 × 16 × 64" in first[0]
    assert compare_tab.first_comparison(ctx, *compare_tab.DEFAULTS) is first  # from memory
    other = compare_tab.first_comparison(ctx, 32, 2, 8, 1, 0, False, "fp32", "cpu")  # a quick visitor's own values
    assert "input 1 × 8 × 32, 2 heads of width 16" in other[0]
    assert compare_tab.first_comparison(ctx, 32, 2, 8, 1, 0, False, "fp32", "cpu") is not other  # never stored


def test_messages_keep_a_field_name_spelt_as_the_page_shows_it():
    assert message_for(ValueError("embedding_dim must be at most 1024, got 5000")) == \
        "embedding_dim must be at most 1024, got 5000"
    assert message_for(ValueError("the prompt is empty")) == "The prompt is empty"
    assert message_for(ValueError("fp16 is not supported on CPU")) == "fp16 is not supported on CPU"
    assert message_for(KeyError()) == "KeyError"


def test_sample_stops_at_the_time_limit_when_the_server_is_slower_than_estimated(ctx, monkeypatch):
    monkeypatch.setattr(sample_tab, "max_request_seconds", lambda ctx: 2)
    *_, (text, coloured, stats, state) = sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 40, 1.0, 0, 1.0, 3,
                                                           False, False, clock=StepClock(0.1))  # 10 tokens/s
    assert 5 <= len(state["tokens"]) < 40 and text == "ROMEO:" + "".join(t["text"] for t in state["tokens"])
    assert re.search(r"stopped after \d+ of 40 characters at this server's limit of 2 s per request "
                     r"\(PLAYGROUND_MAX_REQUEST_SECONDS\).*or switch the KV cache on", stats)
    assert ctx.budget.reserved == 0


def test_sample_holds_its_memory_while_it_runs(ctx):
    generation = sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 30, 1.0, 0, 1.0, 3, False, True)
    next(generation)
    held = ctx.budget.reserved
    loaded = ctx.checkpoint("shakespeare-char")
    config = loaded.config
    assert held >= 4 * loaded.model.parameter_count() + 2 * config.layers_num * config.context_size * \
        config.embedding_dim * 4
    list(generation)
    assert ctx.budget.reserved == 0
    stopped = sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 30, 1.0, 0, 1.0, 3, False, True)
    next(stopped)
    stopped.close()  # the visitor left mid-way
    assert ctx.budget.reserved == 0
    ctx.budget = MemoryBudget(held - 1, "a test budget")
    with pytest.raises(BudgetError, match="generating text needs about"):
        next(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 30, 1.0, 0, 1.0, 3, False, True))


def test_a_short_sample_never_waits_behind_two_long_ones(ctx, monkeypatch):
    """Two long samples held the long lane, so a 200-character sample waited 33 s instead of 0.6 s: a sample
    estimated at SHORT_SECONDS or less takes no long place, a long one is refused at once when none comes free."""
    work = LongWork(places=2, waiting=0, per_client=1, short_seconds=2.0, wait_seconds=30.0)
    monkeypatch.setattr(ctx, "long_work", work)
    others = [work.hold(f"another-client-{index}", 40.0) for index in range(2)]
    for held in others:
        held.__enter__()
    *_, (text, _, _, state) = sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 200, 1.0, 0, 1.0, 3, False, True)
    assert len(state["tokens"]) == 200
    work.short_seconds = 0.0  # the same request, now long: no place free and no room to wait
    with pytest.raises(BusyError, match="2 long requests are running and 0 more wait for a place"):
        next(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 200, 1.0, 0, 1.0, 3, False, True))
    for held in others:
        held.__exit__(None, None, None)
    placed = sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 200, 1.0, 0, 1.0, 3, False, True)
    next(placed)  # a place came free: it runs
    placed.close()
    assert work._running == 0
    assert ctx.sample_lane == dict(concurrency_id="sample", concurrency_limit=ctx.long_work.workers)


def in_sight(estimate: str) -> str:
    """The estimate's words before its fold: the numbers and the warnings."""
    return estimate.split("\n\n<details>")[0]


def test_train_estimate_and_presets(tmp_path):
    assert "parameters" in train_tab.estimate(2, 4, 128, 64, 32, 1000)
    assert "not divisible" in train_tab.estimate(2, 3, 128, 64, 32, 1000)
    # the estimate's calibration agrees with the presets' descriptions: tiny about a minute, small about half an hour
    tiny, small = (train_tab.preset_fields(name) for name in ("tiny", "small"))
    assert re.search(r"about (4\ds|5\ds|1m \d\ds) of training steps on a quiet 2-core CPU",
                     train_tab.estimate(*(tiny[name] for name in train_tab.ESTIMATE_FIELDS)))
    assert re.search(r"about (2\dm|3\dm) \d\ds",
                     train_tab.estimate(*(small[name] for name in train_tab.ESTIMATE_FIELDS)))
    assert "about 2h 04m" in train_tab.estimate(4, 4, 192, 128, 32, 15_000)  # hours past 60 minutes
    toy = train_tab.preset_fields("toy")
    toy_estimate = train_tab.estimate(*(toy[name] for name in train_tab.ESTIMATE_FIELDS))
    assert "· under a second of training steps" in toy_estimate
    run_name = train_tab.PRESET_FIELDS.index("run_name")
    assert train_tab.preset_values("small", tmp_path)[run_name] == "small-1"  # a fresh run name: never someone's run
    (tmp_path / "small-1").mkdir()
    assert train_tab.preset_values("small", tmp_path)[run_name] == "small-2"
    text = train_tab.estimate(4, 4, 192, 128, 32, 15_000, limits=Limits(max_train_seconds=1800))
    assert re.search(r"needs about \d+\.\d MiB of memory · ⚠️ over this server's 30m 00s limit", text)
    # what Start would refuse is said before it is pressed, in Start's words
    huge = in_sight(train_tab.estimate(500, 4, 1024, 64, 32, 10, limits=Limits(max_parameters=10_000_000)))
    assert re.search(r"⚠️ this model would have 6,\d{3},\d{3},\d{3} parameters; this server's limit is 10,000,000 "
                     r"\(PLAYGROUND_MAX_PARAMETERS\)$",
                     huge)
    assert in_sight(train_tab.estimate(2, 4, 128, 64, 32, 10**6, limits=Limits(max_steps=100_000))).endswith(
        "⚠️ steps 1000000 is above this server's limit of 100000 (PLAYGROUND_MAX_STEPS)")
    assert "⚠️" not in train_tab.estimate(2, 4, 128, 64, 32, 1000, limits=Limits())
    with pytest.raises(ValueError, match="unknown preset"):
        train_tab.preset_values("huge")


def test_the_estimate_counts_the_symbols_of_the_corpus_a_run_reads(tmp_path, monkeypatch):
    """Issue 31: offline without Tiny Shakespeare a run reads the built-in Sonnets (60 symbols), and the estimate
    counted Tiny Shakespeare's 65."""
    from playground.model.gpt import GPT
    from playground.text.data import load_corpus

    monkeypatch.delenv("PLAYGROUND_TINY_SHAKESPEARE")  # offline (conftest), nothing cached: what a run reads
    read = load_corpus()
    assert read.source == "builtin"
    symbols = len(set(read.text))
    tiny = train_tab.preset_fields("tiny")
    fields = [tiny[name] for name in train_tab.ESTIMATE_FIELDS]
    shape = {name: tiny[name] for name in ("layers_num", "heads_num", "embedding_dim", "context_size")}
    count = GPT(ModelConfig(vocabulary_size=symbols, **shape)).parameter_count()
    expected = f"**{count:,} parameters** (with the built-in Sonnets' {symbols} symbols)"
    assert symbols == 60 and train_tab.estimate(*fields, train_tab.CORPORA[0]).startswith(expected)
    ctx = AppContext(limits=Limits(), weights=tmp_path)  # the page's estimate reads the server's corpus
    assert train_tab.estimate(*fields, train_tab.CORPORA[0], limits=ctx.limits,
                              default_corpus=ctx.corpus).startswith(expected)


def test_the_estimate_counts_the_chosen_texts_symbols(tmp_path):
    """A toy run on pasted "hello world" was estimated with Tiny Shakespeare's 65 symbols (5,328 parameters; the run
    had 3,504)."""
    from playground.model.families import build_model

    toy = train_tab.preset_fields("toy")
    fields = [toy[name] for name in train_tab.ESTIMATE_FIELDS]
    pasted = train_tab.estimate(*fields, train_tab.CORPORA[2], None, "hello world")
    shape = {name: toy[name] for name in ("layers_num", "heads_num", "embedding_dim", "context_size", "architecture")}
    count = build_model(ModelConfig(vocabulary_size=8, **shape)).parameter_count()
    assert count == 1048  # notebook 004's SimpleLanguageModel(8, 8, 16, 2)
    assert pasted.startswith(f"**{count:,} parameters** (with the pasted text's 8 symbols)")
    upload = tmp_path / "notes.txt"
    upload.write_text("abcabc\n", encoding="utf-8")
    assert "(with the upload's 4 symbols)" in train_tab.estimate(*fields, train_tab.CORPORA[1], str(upload), None)
    # nothing uploaded or pasted yet, or a file a run would refuse: what Start would say, never Shakespeare's 65
    assert train_tab.estimate(*fields, train_tab.CORPORA[2], None, "  \n") == "⚠️ the pasted text is empty"
    assert train_tab.estimate(*fields, train_tab.CORPORA[1], None, None).startswith("⚠️ choose a .txt file to upload")
    assert "(with Tiny Shakespeare's 65 symbols)" in train_tab.estimate(*fields, train_tab.CORPORA[0], None, "x")
    upload.write_bytes(b"\x00\x01binary")
    assert train_tab.estimate(*fields, train_tab.CORPORA[1], str(upload), None).startswith("⚠️ 'notes.txt'")
    assert train_tab.preset_note("toy").startswith("**toy**: notebook 004's toy")
    # the time budget: the estimate says when it ends the run first, and whose time the steps would have taken
    budgeted = train_tab.estimate(2, 4, 128, 64, 32, 3000, 0.0, "muon", 8)
    assert "about 8s of training steps" in budgeted and " · time budget 8s" in in_sight(budgeted)
    assert "The time budget ends the run once its training steps have taken that long" in budgeted
    assert "all 3,000 steps would take about" in budgeted
    assert "its 10 steps should end it first" in train_tab.estimate(2, 4, 128, 64, 32, 10, 0.0, "muon", 8)
    assert "time budget" not in train_tab.estimate(2, 4, 128, 64, 32, 3000, 0.0, "muon", 0)
    assert "⚠️ time budget (seconds) must be at least 0.0, got -1" in train_tab.estimate(2, 4, 128, 64, 32, 10, 0.0,
                                                                                      "muon", -1)
    assert train_tab.time_budget(None) == 0.0 and train_tab.time_budget(0.5) == 0.5
    with pytest.raises(ValueError, match=r"time budget \(seconds\) must be at most 1800, got 1000000000000"):
        train_tab.time_budget(1e12, Limits(max_train_seconds=1800))
    with pytest.raises(ValueError, match=r"the preset: 'huge' is not one of the choices \(toy, tiny"):
        train_tab.preset_note("huge")


def _step(ctx, *, source="random weights", text="abcdefgh", scale=True, mask=True, temperature=1.0,
          mask_before=False, step=STEP_TITLES[5], query=None, seed=0, embedding_dim=12, head_size=4, preset="journey"):
    return attention_tab.attention_step(ctx, source, "shakespeare-char", 0, 0, seed, embedding_dim, head_size, preset,
                                        text, scale, mask, temperature, mask_before, step, query)


def test_attention_a_switch_off_draws_now_beside_the_default_on_one_scale(ctx):
    heading, now, default, third, whatif, *_ = _step(ctx, mask=False)
    assert third is None and "Now vs default" in whatif
    assert now.layout.title.text.startswith("now (scaled, no mask") and "default (scaled, masked" in \
        default.layout.title.text.replace("<br>", " ")
    for figure in (now, default):  # weights: always 0 to 1, so on and off read alike
        assert (figure.data[0].zmin, figure.data[0].zmax) == (0.0, 1.0)
    _, scaled_now, scaled_default, *_ = _step(ctx, scale=False, step=STEP_TITLES[3])
    assert (scaled_now.data[0].zmin, scaled_now.data[0].zmax) == (scaled_default.data[0].zmin,
                                                                   scaled_default.data[0].zmax)
    largest = max(abs(v) for figure in (scaled_now, scaled_default) for row in figure.data[0].z for v in row)
    assert scaled_now.data[0].zmax == -scaled_now.data[0].zmin == pytest.approx(largest)  # covers both
    assert _step(ctx)[2] is None  # every switch at its default: one plot
    assert _step(ctx, mask=False, step=STEP_TITLES[2])[2] is None  # raw scores: the switches change nothing


def test_attention_masked_weights_are_grey_and_say_why(ctx):
    _, weights, *_ = _step(ctx, step=STEP_TITLES[5])
    values = weights.data[0]
    assert math.isnan(values.z[0][1]) and values.z[1][0] > 0
    assert values.customdata[0][1].endswith(lessons.MASKED_WEIGHT_HOVER) and len(weights.data) == 2
    *_, score_bars, weight_bars, _, _ = _step(ctx, step=STEP_TITLES[4], query=2)
    assert list(score_bars.data[0].y[3:]) == [None] * 5 and list(score_bars.data[1].x) == [3, 4, 5, 6, 7]
    assert weight_bars is None  # softmax comes at step 6
    *_, weight_bars, _, _ = _step(ctx, step=STEP_TITLES[5], query=2)
    assert lessons.MASKED_WEIGHT_HOVER in weight_bars.data[1].hovertemplate


def test_attention_the_score_row_is_the_step_on_screen(ctx):
    """The bars under the heatmap follow the step: raw scores at step 3 (no mask yet), scaled at step 4, what goes
    into softmax from step 5 on. They showed the masked, scaled row at every step."""
    inputs = attention_views.head_inputs(ctx, "random weights", None, 0, 0, 0, 12, 4, "journey", "abcdefgh")[0]
    trace = inputs.trace()
    for step, title, row, masked in ((3, "Raw scores of query 2", trace.scores[2], False),
                                     (4, "Scaled scores of query 2", trace.scaled_scores[2], False),
                                     (5, "Scores into softmax of query 2", trace.scaled_scores[2], True)):
        *_, bars, _, _, _ = _step(ctx, step=STEP_TITLES[step - 1], query=2)
        assert bars.layout.title.text.startswith(title)
        shown = list(bars.data[0].y)
        assert shown[:3] == pytest.approx(row[:3].tolist(), abs=1e-6)
        assert (shown[3:] == [None] * 5) if masked else shown[3:] == pytest.approx(row[3:].tolist(), abs=1e-6)
    *_, bars, _, _, _ = _step(ctx, step=STEP_TITLES[3], scale=False, query=2)
    assert bars.layout.title.text.startswith("Scores (not scaled) of query 2")


def test_attention_step_4_with_scaling_off_names_only_what_has_acted(ctx):
    _, now, default, *_ = _step(ctx, scale=False, step=STEP_TITLES[3])
    assert now.layout.title.text.replace("<br>", " ").startswith("now (unscaled, τ 1): scores, not scaled")
    assert default.layout.title.text.replace("<br>", " ").startswith("default (scaled, τ 1): scaled scores")


def test_attention_the_query_sentence_counts_negligible_weights_instead_of_listing_them(ctx):
    *_, sentence, _ = _step(ctx, step=STEP_TITLES[5], scale=False, embedding_dim=64, head_size=64,
                            text="the quick brown fox jumps")
    assert "× 0.000" not in sentence and re.search(r"and \d+ more \(\d+ of them with weights below 0.0005\)",
                                                    sentence)


def test_attention_what_if_notes_appear_only_at_their_stages(ctx):
    notes = [_step(ctx, step=title)[4] for title in STEP_TITLES]
    assert notes[:3] == ["", "", ""]
    assert [i + 1 for i, note in enumerate(notes) if "nats" in note] == [4, 6]
    assert [i + 1 for i, note in enumerate(notes) if "Mask (on now)" in note] == [5, 6, 7]
    assert [i + 1 for i, note in enumerate(notes) if "Mask before vs after" in note] == [5]
    assert "same either way" in _step(ctx, mask=False, step=STEP_TITLES[0])[4]


def test_attention_query_past_the_end_is_clamped_framed_and_said_once(ctx, monkeypatch):
    said = []
    monkeypatch.setattr(gr, "Warning", said.append)
    settings = ["random weights", None, 0, 0, 0, 12, 4, "journey", "abcdefgh", True, True, 1.0, False]
    deck, _, box, sent = attention_tab.attention_page(ctx, *settings, STEP_TITLES[5], 500, [])
    shown = json.loads(deck)["views"][STEP_TITLES[5]]
    assert box == 7 and said == [lessons.query_clamped(500, 8)] and sent == said
    # the deck names the box's value it was made for (500), so the page draws it while the box holds 500 and only
    # then writes the position shown (7): an answer for a value the box has left writes nothing (attention.js)
    assert json.loads(deck)["settings"] == [*settings, 500]
    assert "Query **7**" in shown["texts"][2] and shown["figures"][0]["layout"]["shapes"][0]["y0"] == 6.5
    attention_tab.attention_page(ctx, *settings, STEP_TITLES[4], 500, sent)
    assert len(said) == 1  # the next keystroke does not repeat it
    assert attention_tab.attention_page(ctx, *settings, STEP_TITLES[4], -1, [])[2] == -1
    said.clear()
    assert attention_tab._warn(["a", "b", "a"], ["b"]) == ["a", "b"] and said == ["a"]


def test_the_attention_page_gets_the_step_on_screen_then_every_step_under_one_key(ctx):
    """The first answer holds the step on screen; the second every step, as /attention_step draws each, under the
    same key, so the page adds them to what it holds and steps through them without asking again."""
    settings = ["trained checkpoint", "shakespeare-char", 1, 1, 0, 16, 8, "journey", "To be, or not", True, False,
                1.0, False]
    first = json.loads(attention_tab.attention_page(ctx, *settings, STEP_TITLES[5], 3, [])[0])
    every = json.loads(attention_tab.attention_deck(ctx, *settings, 3))
    assert list(first["views"]) == [STEP_TITLES[5]] and list(every["views"]) == list(STEP_TITLES)
    assert first["key"] == every["key"] and first["views"][STEP_TITLES[5]] == every["views"][STEP_TITLES[5]]
    for title, shown in every["views"].items():
        api = attention_tab.attention_step(ctx, *settings, title, 3)
        assert shown["texts"] == [api[0], api[4], api[7]]
        assert [figure is not None for figure in shown["figures"]] == [api[n] is not None for n in (1, 2, 3, 5, 6)]
        drawn = [figure["layout"]["title"]["text"] for figure in shown["figures"] if figure]
        assert drawn == [api[n].layout.title.text for n in (1, 2, 3, 5, 6) if api[n] is not None]
    other = json.loads(attention_tab.attention_deck(ctx, *settings[:-2], 2.0, False, 3))
    assert other["key"] != every["key"]  # another temperature: the page drops the views it holds


def _laid_over(base, changes, key=None):
    """The page's merge (page/attention.js, page/chart_deck.js): objects key by key, traces one by one."""
    if key == "data" and isinstance(base, list) and isinstance(changes, list):
        return [_laid_over(base[i] if i < len(base) else {}, trace) for i, trace in enumerate(changes)]
    if not isinstance(base, dict) or not isinstance(changes, dict):
        return changes
    return {**base, **{name: _laid_over(base.get(name), value, name) for name, value in changes.items()}}


@pytest.mark.parametrize("source, switches", [("random weights", (False, True, 2.0, True)),  # now beside default
                                              ("textbook preset", (True, False, 1.0, False)),
                                              ("trained checkpoint", (True, True, 1.0, False))])
def test_the_page_is_sent_the_step_at_every_query_position_and_each_is_the_servers_view(ctx, source, switches):
    """A new query position is drawn in the page: each position's figures, laid over the step the page holds (the
    last token's), are the figures the server draws for that position, its sentence the server's, under the key the
    server's deck for that position has (so its later answers add to what is drawn)."""
    settings = [source, "shakespeare-char", 0, 1, 3, 12, 4, "journey", "To be, ", *switches]
    length = 6 if source == "textbook preset" else len("To be, ")
    decks = {query: json.loads(attention_tab.attention_deck(ctx, *settings, query)) for query in range(-1, length)}
    held = decks[-1]["views"]
    for title in STEP_TITLES:
        # step 2 too: its q beside its best keys, a new heatmap per position, sent as changes from position 0's
        sent = json.loads(attention_tab.attention_positions(ctx, *settings, title))
        assert sent["step"] == title and sent["length"] == length
        assert sent["keys"] == {str(query): deck["key"] for query, deck in decks.items()}
        for position, at in enumerate(sent["positions"]):
            view = decks[position]["views"][title]
            assert at["text"] == view["texts"][2] and f"Query **{position}**" in at["text"]
            drawn = [None if changes is None else _laid_over(sent["bases"][slot] or held[title]["figures"][slot],
                                                              changes) for slot, changes in enumerate(at["changes"])]
            assert drawn == view["figures"], (title, position)
    assert attention_tab._deck_key(*settings, 5.0) == attention_tab._deck_key(*settings, 5)  # the box's 5.0 is 5


def test_every_query_position_is_sent_only_for_a_text_whose_heatmaps_stay_put(ctx):
    """Up to POSITIONS_MAX_LENGTH tokens the heatmaps keep their window and only the frame moves, so what is sent is
    bounded (a few hundred KB at the longest); past it each position would be new heatmaps: the server answers."""
    settings = ["random weights", None, 0, 0, 0, 16, 8, "journey"]
    longest = "ab" * (attention_tab.POSITIONS_MAX_LENGTH // 2)
    raw = attention_tab.attention_positions(ctx, *settings, longest, True, True, 1.0, False, STEP_TITLES[5])
    assert len(json.loads(raw)["positions"]) == attention_tab.POSITIONS_MAX_LENGTH and len(raw) < 1_000_000
    assert attention_tab.attention_positions(ctx, *settings, longest + "a", True, True, 1.0, False,
                                             STEP_TITLES[5]) == gr.skip()
    assert attention_tab.attention_positions(ctx, *settings, "", True, True, 1.0, False, STEP_TITLES[5]) == gr.skip()


def test_a_checkpoint_head_runs_the_model_once_per_text(ctx, monkeypatch):
    """Stepping or moving the query on one text reuses the head's inputs; another text, layer or head builds anew."""
    built = []
    real = attention_tab.walkthrough.checkpoint_head_inputs
    monkeypatch.setattr(attention_tab.walkthrough, "checkpoint_head_inputs",
                        lambda *args, **kwargs: built.append(args[2:4]) or real(*args, **kwargs))
    heads = attention_tab.HeadCache(size=2)
    settings = ["trained checkpoint", "shakespeare-char", 0, 1, 0, 16, 8, "journey", "To be", True, True, 1.0, False]
    for step, query in ((STEP_TITLES[0], -1), (STEP_TITLES[5], 2), (STEP_TITLES[6], 3)):
        attention_tab.attention_page(ctx, *settings, step, query, [], heads=heads)
    attention_tab.attention_deck(ctx, *settings, 3, heads=heads)
    assert built == [(0, 1)]
    attention_tab.attention_page(ctx, *settings[:2], 1, *settings[3:], STEP_TITLES[0], -1, [], heads=heads)
    attention_tab.attention_page(ctx, *settings[:8], "or not", *settings[9:], STEP_TITLES[0], -1, [], heads=heads)
    attention_tab.attention_page(ctx, *settings, STEP_TITLES[0], -1, [], heads=heads)  # dropped: two are kept
    assert built == [(0, 1), (1, 1), (0, 1), (0, 1)]


def test_attention_a_long_text_pages_the_heatmaps_to_the_query(ctx):
    text = "".join(chr(ord("a") + i % 26) for i in range(300))
    _, weights, *_ = _step(ctx, text=text, query=250)
    assert "rows 186–299 of 300" not in weights.layout.title.text  # a full window, not a stub
    assert "rows 172–299 of 300" in weights.layout.title.text and weights.layout.shapes[0].y0 == 250 - 172 - 0.5


def test_attention_feature_axes_are_labelled_sparsely(ctx):
    _, q, k, v, *_ = attention_tab.attention_step(ctx, "trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8,
                                                  "journey", "To be, or not to be", True, True, 1.0, False,
                                                  STEP_TITLES[1], None)
    for figure in (q, k, v):
        ticks = list(figure.layout.xaxis.tickvals)
        assert ticks[1] - ticks[0] > 1 and len(figure.data[0].customdata[0]) == 16  # hover keeps every feature
        # every token, after its position: a framed row is found by number as well as by character
        assert list(figure.layout.yaxis.ticktext) == [f"{i} {c}" for i, c in enumerate("To␣be,␣or␣not␣to␣be")]


def test_attention_view_and_export_reserve_their_cost_first(ctx, monkeypatch):
    reserved = []
    original = ctx.budget.reserve

    def spy(cost, hint=""):
        reserved.append(cost)
        return original(cost, hint)

    monkeypatch.setattr(ctx.budget, "reserve", spy)
    _step(ctx, mask=False)
    assert dict(reserved[-1].parts)["6 traces of the head"] > 0  # shown, default, mask leak x2, saturation x2
    _step(ctx, step=STEP_TITLES[0])
    assert "1 trace of the head" in dict(reserved[-1].parts)
    attention_tab.attention_step(ctx, "trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8, "journey", "To be",
                                 True, True, 1.0, False, STEP_TITLES[0], None)
    assert "attention maps" in dict(reserved[-1].parts)  # a checkpoint's forward pass is counted too
    small = AppContext(limits=Limits(), weights=ctx.weights, budget=MemoryBudget(64 * MIB, "test"))
    text = "x" * 1024
    with pytest.raises(BudgetError, match=r"this attention view needs about .*over this server's memory budget "
                                          r"of 64.0 MiB.*shorter text \(it is 1024 tokens\) or lower embedding_dim "
                                          r"\(1024\)"):
        _step(small, text=text, embedding_dim=1024, head_size=1024)
    assert small.budget.reserved == 0
    with pytest.raises(BudgetError, match="this export needs about"):
        attention_tab.export_step(small, "random weights", None, 0, 0, 0, 1024, 1024, "journey", text, True, True,
                                  1.0, False, STEP_TITLES[5])
    assert _step(small, text="short")[1] is not None  # the same server still answers what fits
# ------------------------------------------------------------------------------------ train: whose run it is
RUN = dict(layers_num=1, heads_num=1, embedding_dim=8, context_size=8, batch_size=2, steps=400, learning_rate=3e-3,
           warmup_steps=0, dropout_rate=0.0, seed=0, device="cpu", corpus_choice="pasted text", upload=None,
           pasted="to be or not to be\n" * 20)


def session(name):
    return SimpleNamespace(session_hash=name)  # what identify reads of a gr.Request


@pytest.fixture
def train_ctx(tmp_path):
    context = AppContext(limits=Limits(max_steps=500), weights=tmp_path, admin_token="the-space-owner")
    yield context
    context.jobs.stop()
    context.jobs.wait(60)


def test_a_run_belongs_to_the_browser_that_started_it(train_ctx):
    ctx = train_ctx
    text = train_tab.start_run(ctx, **RUN, run_name="browser-run", browser_token="token-of-browser-a",
                               request=session("s1"))[0]
    assert "· your run ·" in text
    deadline = time.monotonic() + 60
    while ctx.jobs.status().step == 0 and time.monotonic() < deadline:  # a step, so it leaves a checkpoint
        time.sleep(0.05)
    # another visitor sees whose it is not, and cannot stop it
    other = train_tab.poll_status(ctx, 0, 0, 0, [], "", "token-of-browser-b", session("s2"))[0]
    assert "another visitor's run: it ends by itself at step 400 (or after 1h 00m" in other
    for args in [("", "token-of-browser-b", session("s2")), ("", None, session("s1")),
                 ("token-of-browser-b", "token-of-browser-a", session("s1"))]:
        with pytest.raises(RuntimeError, match="^this run belongs to another visitor; it ends by itself at step "
                                               "400 .* or when its owner stops it$"):
            train_tab.stop_run(ctx, *args)
    status = ctx.jobs.status()
    assert status.active and "token-of-browser-a" not in repr(status) and tenancy.owner_hash(
        "token-of-browser-a") not in repr(status)
    # the same browser after a reload (a new session, its token back from localStorage) owns it still
    assert "· your run ·" in train_tab.poll_status(ctx, 0, 0, 0, [], "", "token-of-browser-a", session("s3"))[0]
    train_tab.stop_run(ctx, "", "token-of-browser-a", session("s3"))
    assert ctx.jobs.wait(60).state == "stopped"
    # a reloaded page shows its owner the run's name and the settings it started with, so Resume goes on as it began
    mine = dict(zip(train_tab.PRESET_FIELDS, train_tab.arrival_fields(ctx, "token-of-browser-a", session("s3"))))
    assert mine == dict(layers_num=1, heads_num=1, embedding_dim=8, context_size=8, batch_size=2, steps=400,
                        learning_rate=3e-3, warmup_steps=0, dropout_rate=0.0, seed=0, device="cpu",
                        run_name="browser-run", optimizer="adamw", time_budget_seconds=0.0,
                        learning_rate_decay="cosine", architecture="gpt", family="gpt", kv_heads_num=0)
    # another visitor's page keeps its own values and gets a name no run has
    theirs = dict(zip(train_tab.PRESET_FIELDS, train_tab.arrival_fields(ctx, "token-of-browser-b", session("s2"))))
    assert theirs.pop("run_name") == "my-run-1" and all(value == gr.skip() for value in theirs.values())
    # a reloaded page proposes a fresh run name; Resume on it points the owner at the run the page shows
    with pytest.raises(ValueError, match="no checkpoint named 'my-run-1' to resume; the run on this page is "
                                         "browser-run: put browser-run in the run name box to resume it"):
        train_tab.start_run(ctx, **RUN, run_name="my-run-1", browser_token="token-of-browser-a",
                            request=session("s4"), resume=True)
    with pytest.raises(ValueError, match="^no checkpoint named 'my-run-1' to resume$"):  # not someone else's run
        train_tab.start_run(ctx, **RUN, run_name="my-run-1", browser_token="token-of-browser-b",
                            request=session("s5"), resume=True)
    assert json.loads((ctx.weights / "browser-run" / "training.json").read_text())["owner"] == \
        tenancy.owner_hash("token-of-browser-a")


def test_an_api_client_is_known_by_its_session_and_the_admin_token_stops_any_run(train_ctx):
    ctx = train_ctx
    train_tab.start_run(ctx, **RUN, run_name="api-run", request=session("client-1"))
    deadline = time.monotonic() + 60
    while ctx.jobs.status().step == 0 and time.monotonic() < deadline:  # a step, so it leaves a checkpoint
        time.sleep(0.05)
    with pytest.raises(RuntimeError, match="belongs to another visitor"):
        train_tab.stop_run(ctx, "", None, session("client-2"))
    train_tab.stop_run(ctx, "", None, session("client-1"))  # the Client that started it
    assert ctx.jobs.wait(60).state == "stopped"
    train_tab.start_run(ctx, **RUN, run_name="api-run-2", request=session("client-1"))
    with pytest.raises(ValueError, match="the owner or admin token is 201 characters long"):
        train_tab.stop_run(ctx, "x" * 201, None, session("client-2"))
    train_tab.stop_run(ctx, "the-space-owner", None, session("client-2"))
    assert ctx.jobs.wait(60).state == "stopped"
    # replacing needs the box ticked, and ownership
    with pytest.raises(ValueError, match='already exists: tick "replace it"'):
        train_tab.start_run(ctx, **RUN, run_name="api-run", request=session("client-1"))
    with pytest.raises(ValueError, match="belongs to another visitor: only its owner can replace it"):
        train_tab.start_run(ctx, **RUN, run_name="api-run", replace=True, request=session("client-2"))
    assert "your run" in train_tab.start_run(ctx, **RUN, run_name="api-run", replace=True,
                                             request=session("client-1"))[0]


def test_pasted_text_is_capped_in_utf8_bytes_and_an_upload_is_your_uploaded_file(train_ctx, tmp_path):
    """4.8M characters of CJK text are 14.4 MB: the 5 MB cap refuses them (it counted characters before)."""
    ctx = AppContext(limits=Limits(), weights=train_ctx.weights)
    pasted = "中" * 4_800_000
    with pytest.raises(ValueError, match="The pasted text is 14,400,000 bytes of UTF-8; this server's limit is "
                                         "5,000,000 bytes"):
        train_tab.start_run(ctx, **{**RUN, "pasted": pasted}, run_name="cjk", request=session("s"))
    upload = tmp_path / "notes.txt"
    upload.write_text("to be or not to be, that is the question\n" * 40, encoding="utf-8")
    try:
        text = train_tab.start_run(ctx, **{**RUN, "corpus_choice": "uploaded .txt", "upload": str(upload),
                                           "pasted": None}, run_name="uploaded", request=session("s"))[0]
        assert "training on an uploaded file" in text and "corpus an uploaded file (1,640 characters)" in text
    finally:
        ctx.jobs.stop()
        ctx.jobs.wait(60)


def test_the_optimizer_comes_last_and_a_run_records_it(train_ctx):
    """start_run's optimizer follows the request Gradio fills in: calls that leave it out train with AdamW."""
    ctx = train_ctx
    with pytest.raises(ValueError, match="optimizer must be adamw or muon, got 'sgd'"):
        train_tab.start_run(ctx, **RUN, run_name="sgd-run", request=session("s"), optimizer="sgd")
    assert not ctx.jobs.status().active
    assert "your run" in train_tab.start_run(ctx, **RUN, run_name="muon-run", request=session("s"),
                                             optimizer="muon")[0]
    deadline = time.monotonic() + 60
    while ctx.jobs.status().step == 0 and time.monotonic() < deadline:  # a step, so it leaves a checkpoint
        time.sleep(0.05)
    train_tab.stop_run(ctx, "", None, session("s"))
    assert ctx.jobs.wait(60).state == "stopped"
    record = json.loads((ctx.weights / "muon-run" / "training.json").read_text())
    assert record["train_config"]["optimizer"] == "muon"
    with pytest.raises(ValueError, match="the run 'muon-run' was trained with the optimizer muon, not adamw"):
        train_tab.start_run(ctx, **RUN, run_name="muon-run", request=session("s"), resume=True)


def test_the_decay_comes_last_and_each_preset_fills_its_own(train_ctx, monkeypatch):
    """The Train tab offers the decay (its floor follows: DECAY_FLOORS), so each preset's decay and floor are the
    ones it fills; a call that leaves the decay out trains with cosine to a tenth, as such calls always did."""
    for name, preset in TRAIN_PRESETS.items():
        assert preset.train.min_learning_rate_ratio == DECAY_FLOORS[preset.train.learning_rate_decay], name
        assert train_tab.preset_fields(name)["learning_rate_decay"] == preset.train.learning_rate_decay
    started = []
    monkeypatch.setattr(train_ctx.jobs, "start", lambda request, visitor, **options: started.append(request))
    train_tab.start_run(train_ctx, **RUN, run_name="old-call", request=session("s"), optimizer="muon",
                        time_budget_seconds=0.0)
    train_tab.start_run(train_ctx, **RUN, run_name="linear", request=session("s"), optimizer="muon",
                        time_budget_seconds=0.0, learning_rate_decay="linear")
    assert [(r.train.learning_rate_decay, r.train.min_learning_rate_ratio) for r in started] == [
        ("cosine", 0.1), ("linear", 0.0)]
    with pytest.raises(ConfigError, match="learning rate decay must be cosine, linear or constant, got 'step'"):
        train_tab.start_run(train_ctx, **RUN, run_name="step", request=session("s"), optimizer="muon",
                            time_budget_seconds=0.0, learning_rate_decay="step")


def test_the_modern_preset_starts_a_llama_family_run_and_its_estimate_prices_the_grouped_heads(train_ctx,
                                                                                                monkeypatch):
    """The `modern` preset fills the family and K/V heads boxes; Start hands the run the Llama family's settings,
    the estimate counts that model's parameters, and K/V heads that do not divide the heads are refused before Start."""
    from playground.config import ModelConfig
    from playground.model.families import build_model, family_settings

    fields = train_tab.preset_fields("modern")
    assert (fields["family"], fields["kv_heads_num"]) == ("llama", 2)
    assert (train_tab.preset_fields("tiny")["family"], train_tab.preset_fields("tiny")["kv_heads_num"]) == ("gpt", 0)
    started = []
    monkeypatch.setattr(train_ctx.jobs, "start", lambda request, visitor, **options: started.append(request))
    form = {**{name: fields[name] for name in train_tab.PRESET_FIELDS if name != "run_name"}, "steps": 100}
    train_tab.start_run(train_ctx, **form, corpus_choice=train_tab.CORPORA[0], run_name="modern-1",
                        request=session("s"))
    assert {k: started[0].model[k] for k in ("family", "kv_heads_num", "heads_num")} == {
        "family": "llama", "kv_heads_num": 2, "heads_num": 4}
    estimate = train_tab.estimate(*(fields[name] for name in train_tab.ESTIMATE_FIELDS), limits=train_ctx.limits,
                                  default_corpus=train_ctx.corpus)
    symbols = train_tab.CharTokenizer.train_from_text(train_ctx.corpus().text).vocabulary_size
    config = ModelConfig(vocabulary_size=symbols, **family_settings({**started[0].model, "use_bias": False}))
    assert estimate.startswith(f"**{build_model(config).parameter_count():,} parameters**")
    odd = {**fields, "kv_heads_num": 3}  # said under the fields, before Start
    assert "heads_num 4 is not divisible by kv_heads_num 3" in train_tab.estimate(
        *(odd[name] for name in train_tab.ESTIMATE_FIELDS), limits=train_ctx.limits, default_corpus=train_ctx.corpus)


def test_the_train_tab_says_before_start_when_tiny_shakespeare_is_not_here(train_ctx, monkeypatch):
    """Offline, "Tiny Shakespeare" trains on the built-in Sonnets: said under the choice, not only once running."""
    from playground.text import data

    monkeypatch.setattr(train_ctx, "corpus", lambda: data.builtin_corpus(
        "offline and Tiny Shakespeare is not cached, so the built-in Sonnets are used"))
    note = train_tab.corpus_note(train_ctx, train_tab.CORPORA[0])
    size = len(data.builtin_corpus().text)
    assert note.startswith("⚠️ Tiny Shakespeare is not on this server: offline and Tiny Shakespeare is not cached, so "
                           f"the built-in Sonnets are used. A run on it trains on those {size:,} characters")
    for visitors_own in train_tab.CORPORA[1:]:  # an upload or pasted text: that every visitor can read it back
        assert train_tab.corpus_note(train_ctx, visitors_own).startswith("⚠️ What you upload or paste is not private")
    monkeypatch.setattr(train_ctx, "corpus", lambda: data.Corpus(data.TINY_SHAKESPEARE_NAME, "x" * 100, "cache"))
    assert train_tab.corpus_note(train_ctx, train_tab.CORPORA[0]) == ""


def test_the_corpus_choice_is_labelled_with_what_it_reads():
    """A stranger saw "Tiny Shakespeare" ticked while the run trained on the built-in Sonnets: offline the first
    choice says what it reads; its value stays the API's "Tiny Shakespeare" either way."""
    from playground.text import data

    offline = train_tab.corpus_choices(data.builtin_corpus("offline"))
    assert offline[0] == ("the built-in Sonnets (no Tiny Shakespeare)", "Tiny Shakespeare")
    online = train_tab.corpus_choices(data.Corpus(data.TINY_SHAKESPEARE_NAME, "x" * 100, "cache"))
    assert online[0] == ("Tiny Shakespeare", "Tiny Shakespeare")
    assert [value for _, value in offline] == [value for _, value in online] == list(train_tab.CORPORA)


def test_the_tokenize_tabs_corpus_choice_is_labelled_with_what_it_counts_in():
    """Trial 15 saw "corpus (Tiny Shakespeare)" ticked on the Tokenize tab over the built-in Sonnets' counts: the
    choice names the corpus read; its value stays the API's either way."""
    from playground.text import data
    from playground.ui import tokenize_tab

    offline = tokenize_tab.source_choices(data.builtin_corpus("offline"))
    online = tokenize_tab.source_choices(data.Corpus(data.TINY_SHAKESPEARE_NAME, "x" * 100, "cache"))
    assert offline[1] == ("corpus: the built-in Sonnets (no Tiny Shakespeare)", "corpus (Tiny Shakespeare)")
    assert online[1] == ("corpus: Tiny Shakespeare", "corpus (Tiny Shakespeare)")
    assert [value for _, value in offline] == [value for _, value in online] == list(tokenize_tab.SOURCES)


def test_a_resumed_runs_status_counts_its_whole_time_and_says_this_sessions():
    from playground.server.jobs import JobStatus
    status = JobStatus(state="running", run_name="r", step=130, start_step=100, steps=200, elapsed_seconds=20.0,
                       seconds_before=90.0)
    text = train_tab.render_status(status)[0]
    assert "elapsed 1m 50s (20s since resuming at step 100)" in text and "30 steps this session" in text
    fresh = train_tab.render_status(dataclasses.replace(status, start_step=0, seconds_before=0.0))[0]
    assert "elapsed 20s ·" in fresh and "since resuming" not in fresh
    # the probe snapshots are this session's, unlike the curve, which training.json carries over
    slider = train_tab.render_status(status)[4]
    assert slider.label == "snapshot (0 saved since resuming at step 100, at each evaluation)"


def test_a_failed_runs_error_is_shown_to_its_owner_only():
    """The error can name the server's paths or quote the owner's text: other visitors read that it failed."""
    from playground.server.jobs import FAILED, JobStatus
    status = JobStatus(state=FAILED, run_name="r", step=3, steps=10,
                       message="training failed: [Errno 28] No space left on device: '/data/weights/.tmp-r'")
    assert "/data/weights" in train_tab.render_status(status, owned=True)[0]
    other = train_tab.render_status(status, owned=False)[0]
    assert "/data/weights" not in other and "another visitor's run · it failed; its owner sees why" in other


def test_the_status_warns_of_overfitting_only_when_validation_is_held_out():
    from playground.server.jobs import JobStatus

    train = tuple((step, 3.0 - step / 250) for step in range(1, 501))
    val = ((100, 2.2), (200, 2.0), (300, 2.1), (400, 2.3), (500, 2.6))
    status = JobStatus(state="finished", run_name="r", step=500, steps=500, train_loss=train, val_loss=val)
    assert "⚠️ Validation loss has risen from 2.000 at step 200 to 2.600" in train_tab.render_status(status)[0]
    whole_text = dataclasses.replace(status, held_out=False)  # the same text validates: memorising is the point
    assert "Validation loss has risen" not in train_tab.render_status(whole_text)[0]


def test_the_probe_plot_says_when_its_layer_or_head_box_is_out_of_range():
    """The status timer redraws the probe every poll, so an out-of-range layer or head box is clamped and the title
    says so (a toast would repeat every poll)."""
    from playground.server.jobs import JobStatus
    from playground.training.probes import ProbeSnapshot

    probe = ProbeSnapshot(step=20, tokens=["a", "b", "c"], weights=torch.full((2, 3, 3, 3), 1 / 3))
    status = JobStatus(state="finished", run_name="r", step=20, steps=20, probes=(probe,))
    title = train_tab.render_status(status, -5, 99)[3].layout.title.text.replace("<br>", " ")  # wrapped
    assert "layer 0 head 2 (asked for layer -5 head 99: this model has layers 0-1, heads 0-2)" in title
    assert "asked" not in train_tab.render_status(status, 1, 2)[3].layout.title.text
    for layer, message in ((1.5, "layer must be a whole number, got 1.5"), (None, "layer is empty")):
        title = train_tab.render_status(status, layer, 2)[3].layout.title.text.replace("<br>", " ")
        assert f"layer 0 head 0 ({message}; layer 0 head 0 shown)" in title


def test_the_probe_plot_names_the_characters_the_runs_text_lacks():
    """After a run on a text without R, O, M, B or ?, the probe read "E : \\n u t ␣ s o f t" with no word why."""
    from playground.server.jobs import JobStatus
    from playground.training.probes import ProbeSnapshot

    probe = ProbeSnapshot(step=5, tokens=list("E:\nut"), weights=torch.full((1, 1, 5, 5), 0.2), left_out="ROMB?\n")
    status = JobStatus(state="finished", run_name="r", step=5, steps=5, probes=(probe,))
    title = train_tab.render_status(status, 0, 0)[3].layout.title.text.replace("<br>", " ")
    assert "(without 'R', 'O', 'M', 'B', '?', '\\n': not in this run's vocabulary)" in title
    whole = dataclasses.replace(probe, left_out="")
    assert "without" not in train_tab.render_status(dataclasses.replace(status, probes=(whole,)), 0, 0)[3] \
        .layout.title.text


@pytest.mark.parametrize("field,value,message", [
    ("learning_rate", 0.0, "learning rate must be in (0, 1], got 0.0"),
    ("learning_rate", 2, "learning rate must be in (0, 1], got 2.0"),
    ("batch_size", 2.5, "batch size must be a whole number, got 2.5"),
    ("layers_num", 1.5, "layers_num must be a whole number, got 1.5"),
])
def test_train_refusals_name_the_fields_as_the_page_labels_them(train_ctx, field, value, message):
    """TrainConfig's own checks speak of learning_rate; the page's box says "learning rate"."""
    with pytest.raises(ValueError) as refused:
        train_tab.start_run(train_ctx, **{**RUN, field: value}, run_name="labelled", request=session("l"))
    assert str(refused.value) == message
    assert not train_ctx.jobs.status().active
    assert train_tab.in_labels("warmup_steps must be at least 0, got -1") == "warmup steps must be at least 0, got -1"
    assert train_tab.in_labels("device 'tpu' is not known") == "device 'tpu' is not known"
    for name, said in (("  ", "the run name is empty"), ("../x", "run name '../x' is not allowed")):  # as labelled
        with pytest.raises(ValueError, match=re.escape(said)):
            train_tab.start_run(train_ctx, **RUN, run_name=name, request=session("l"))


def test_a_warm_up_past_the_servers_step_limit_is_refused_by_name(train_ctx):
    """One longer than the run is the caller's choice (docker-smoke asks for 50 in 30 steps); one past the server's
    step limit could not end in any run it allows."""
    with pytest.raises(ValueError, match="warmup steps must be at most 500, got 99999999"):
        train_tab.start_run(train_ctx, **{**RUN, "warmup_steps": 99999999}, run_name="long-warm-up",
                            request=session("w"))
    assert not train_ctx.jobs.status().active


def test_compare_offers_the_devices_and_dtypes_this_server_runs(monkeypatch):
    for module in (compare_tab, device):
        monkeypatch.setattr(module, "available_devices", lambda: ["cpu"])
    assert compare_tab.offered_devices() == ["auto", "cpu"] and compare_tab.offered_dtypes() == ["fp32", "bf16"]
    for module in (compare_tab, device):
        monkeypatch.setattr(module, "available_devices", lambda: ["mps", "cpu"])
    assert compare_tab.offered_devices() == ["auto", "mps", "cpu"]
    assert compare_tab.offered_dtypes() == ["fp32", "bf16", "fp16"]


def test_the_gpu_preset_on_a_server_without_one_picks_auto_and_says_so(monkeypatch):
    """The train tab's device box offers what this server has; a preset asking for more gets "auto" and a note."""
    monkeypatch.setattr(device, "available_devices", lambda: ["cpu"])
    assert train_tab.preset_fields("gpu")["device"] == "auto"
    assert "This server has no CUDA device, so the device is auto (CPU" in train_tab.preset_note("gpu")
    assert "This server has" not in train_tab.preset_note("tiny")
    monkeypatch.setattr(device, "available_devices", lambda: ["cuda", "cpu"])
    assert train_tab.preset_fields("gpu")["device"] == "cuda" and "no CUDA" not in train_tab.preset_note("gpu")


@pytest.mark.parametrize("heads", [51, 64])
def test_compare_draws_a_few_heads_of_many_and_the_tables_compare_them_all(ctx, heads):
    """64 heads at T 5 failed after the whole comparison ("Horizontal spacing cannot be greater than ...")."""
    summary, equivalence, _, grid = compare_tab.run_comparison(ctx, heads, heads, 5, 1, 0, False, "fp32", "cpu")
    assert f"{heads} heads of width 1" in summary
    columns = [note.text for note in grid.layout.annotations if note.text.startswith("head ")]
    assert columns == [f"head {i}" for i in range(compare_tab.MAX_MAP_HEADS)]
    assert len({trace.xaxis for trace in grid.data}) == len(equivalence["data"]) * compare_tab.MAX_MAP_HEADS
    assert f"heads 0–5 of {heads} (the tables compare every head)" in grid.layout.title.text.replace("<br>", " ")
    compared = [row for row in equivalence["data"] if row[1] != "—"]  # the tables compare all the heads
    assert len(compared) >= 5 and all(row[1] == "yes" and row[2] != "—" for row in compared)


def test_compare_refusals_suggest_only_what_can_be_lowered(ctx):
    with pytest.raises(ValueError) as refused:
        compare_tab.run_comparison(ctx, 4096, 1, 1024, 64, 0, False, "fp32", "cpu")
    said = str(refused.value).split("PLAYGROUND_MAX_REQUEST_SECONDS):")[-1]
    assert "1 head would take" in str(refused.value) and "the batch to 1 and T to at most" in said
    assert "embedding_dim (4096)" in said and "heads_num" not in said  # a single head cannot be fewer
    with pytest.raises(ValueError, match=r"or heads_num \(8\)"):
        compare_tab.run_comparison(ctx, 4096, 8, 1024, 64, 0, False, "fp32", "cpu")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_gpt2_preset_fills_a_largest_t_its_own_sweep_may_time(ctx, dtype, monkeypatch):
    """Issue 31: the preset left "largest T" at 1024, and "Time them" was refused at once (about 144 s, over 60)."""
    monkeypatch.setattr(compare_tab, "time_implementations", lambda *a, **k: [])
    d, h, T, B, bias, largest = compare_tab.gpt2_preset(ctx, dtype, "cpu")
    assert (d, h, T, B, bias) == (768, 12, 64, 1, True) and largest < 1024
    assert compare_tab.timing_refusal(ctx, d, h, B, dtype, "cpu", largest) == ""
    compare_tab.run_timing(ctx, d, h, B, dtype, "cpu", largest)  # not refused
    refusal = compare_tab.timing_refusal(ctx, d, h, B, dtype, "cpu", 2 * largest)
    assert refusal.startswith("**Not timed:** Timing 7 implementations") and f"at most {largest}" in refusal
    with pytest.raises(ValueError, match=f"at most {largest}"):
        compare_tab.run_timing(ctx, d, h, B, dtype, "cpu", 2 * largest)


def test_sample_at_temperature_zero_is_greedy_and_says_so(ctx):
    *_, stats, _ = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 12, 0.0, 0, 1.0, "", False, True))[-1]
    greedy = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 12, 0.8, 0, 1.0, 3, True, True))[-1]
    zero = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 12, 0.0, 0, 1.0, "", False, True))[-1]
    assert zero[0] == greedy[0] and "temperature 0 is greedy decoding" in stats
    assert "seed box was empty" not in stats  # greedy draws nothing, so no seed is drawn


def test_a_runs_notes_are_its_owners_alone():
    """A note may name the owner's other runs ("to make room, this server removed the run c-mine"): another visitor
    sees the run's state and message without them."""
    from playground.server.jobs import JobStatus
    status = JobStatus(state="running", run_name="mine", steps=10, message="training on the pasted text on cpu",
                       notes=("to make room, this server removed the run c-mine (a visitor keeps at most 5 runs)",))
    assert "training on the pasted text on cpu; to make room, this server removed the run c-mine" in \
        train_tab.render_status(status, owned=True)[0]
    theirs = train_tab.render_status(status, owned=False)[0]
    assert "training on the pasted text on cpu" in theirs and "c-mine" not in theirs


def test_the_offered_prompt_follows_the_checkpoints_vocabulary(tmp_path):
    """A toy run on "hello world" picked with the default "ROMEO:\\n" raised an unknown-characters toast."""
    from playground.training.run import RunRequest, prepare_run, run_training

    shutil.copytree(REPO / "weights" / "shakespeare-char", tmp_path / "shakespeare-char")
    preset = TRAIN_PRESETS["toy"]
    run_training(prepare_run(RunRequest(run_name="hello", model=preset.model.to_dict(),
                                        train=dataclasses.replace(preset.train, steps=2), corpus_text="hello world",
                                        corpus_name="pasted text", weights_dir=tmp_path)))
    ctx = AppContext(limits=Limits(), weights=tmp_path)
    default = sample_tab.DEFAULT_PROMPT
    fitted, replaced, offered = sample_tab.fitting_prompt(ctx, "hello", default, default)
    assert fitted == offered == "w" and replaced == default  # none of "ROMEO:\n" is in "hello world": the notebook's
    # own "w"
    assert sample_tab.fitting_prompt(ctx, "hello", "hello\n", default) == ("", "", default)  # typed: kept
    assert sample_tab.fitting_prompt(ctx, "hello", "ROMEO: wo", "ROMEO: wo") == (" wo", "ROMEO: wo", " wo")
    # a prompt the next model reads is left alone
    assert sample_tab.fitting_prompt(ctx, "shakespeare-char", offered, offered) == ("", "", offered)
    *_, last = sample_tab.sample(ctx, "hello", fitted, 5, 0.8, 0, 1.0, 1, False, True, False, {})
    assert last[0].startswith(fitted) and len(last[0]) == 6  # Generate takes what was offered, without a refusal
    assert sample_tab.fitting_prompt(ctx, "no-such-run", default, default) == ("", "", default)


def test_the_estimate_warns_before_start_when_a_run_will_memorise_its_text():
    """Issue 31: the tiny preset on the offline Sonnets (20,400 characters) ended at validation 3.98, training 0.23,
    with no word before Start; on Tiny Shakespeare its ~2 passes are fine."""
    from playground.text.data import builtin_corpus, load_corpus

    tiny = train_tab.preset_fields("tiny")
    fields = [tiny[name] for name in train_tab.ESTIMATE_FIELDS]
    sonnets = train_tab.estimate(*fields, train_tab.CORPORA[0], default_corpus=builtin_corpus)
    assert re.search(r"⚠️ about [\d,]+ passes over the built-in Sonnets' 20,\d{3} characters: the model will "
                     "memorise them", sonnets)
    assert "passes over" not in train_tab.estimate(*fields, train_tab.CORPORA[0], default_corpus=load_corpus)
    toy = train_tab.preset_fields("toy")
    pasted = train_tab.estimate(*[toy[name] for name in train_tab.ESTIMATE_FIELDS], train_tab.CORPORA[2], None,
                                "hello world")
    assert "passes over the pasted text's 11 characters" in pasted  # the toy lab memorises, and is told so


@pytest.mark.parametrize("source,mask", [("trained checkpoint", False), ("textbook preset", True)])
def test_every_attention_step_opens_with_its_picture_and_one_look_for_line(ctx, source, mask):
    """Pictures first (issue 29): step 6 carried 4-5 paragraphs; now at most 60 words show before the folds, the
    longest case a switch off (its comparison notes fold away too)."""
    settings = [source, "shakespeare-char", 0, 0, 0, 16, 8, "journey", "To be, or not", True, mask, 1.0, False, 3]
    every = json.loads(attention_tab.attention_deck(ctx, *settings))
    for title, view in every["views"].items():
        heading, whatif, query = view["texts"]
        assert heading.split("\n\n")[1].startswith("**Look for:**") and view["figures"][0] is not None, title
        assert "<details><summary>more</summary>" in heading, title  # the formula and the rest, on request
        assert visible_words(heading) + visible_words(whatif) + visible_words(query) <= 60, (title, heading, whatif,
                                                                                            query)
    assert visible_words("a <details><summary>more: b c</summary>\n\nd e f\n\n</details> g") == 5


def test_spare_decks_are_the_page_answer_one_switch_away(ctx):
    """A what-if click is drawn in the page from a spare deck: each spare is exactly the deck the page's answer for that
    switch brings (the same key, so that answer draws nothing again, and the same view), under the page's label of
    its switches; a text that cannot be traced sends none."""
    settings = ["trained checkpoint", "shakespeare-char", 1, 1, 0, 16, 8, "journey", "To be, or not", True, True,
                1.0, False]
    sent = json.loads(attention_tab.attention_spare(ctx, *settings, STEP_TITLES[5], 3))
    around = json.loads(attention_tab.attention_page(ctx, *settings, STEP_TITLES[5], 3, [])[0])
    assert sent["key"] == around["key"] and sent["label"] == attention_tab.switch_label(True, True, False, 1.0)
    assert set(sent["spares"]) == {"010|1.00", "100|1.00", "111|1.00"}
    for label, spare in sent["spares"].items():
        scale, mask, before = (flag == "1" for flag in label[:3])
        assert label == attention_tab.switch_label(scale, mask, before, 1.0)
        answer, warned = attention_tab.attention_switched(ctx, *settings[:9], scale, mask, 1.0, before,
                                                          STEP_TITLES[5], 3, [])
        answered = json.loads(answer)  # the page's answer names the inputs it was made for (chart_deck.late)
        assert answered.pop("settings") == [*settings[:9], scale, mask, 1.0, before, 3]  # the query asked too
        assert answered == spare and list(spare["views"]) == [STEP_TITLES[5]] and warned == []
    assert spare["key"] != around["key"]
    empty = [*settings[:8], "", *settings[9:]]
    assert attention_tab.attention_spare(ctx, *empty, STEP_TITLES[5], 3) == gr.skip()


def test_the_train_estimate_shows_its_numbers_and_warnings_within_60_words_and_folds_the_rest():
    """Pictures first: a stranger counted over 100 words in the estimate with no fold. Its numbers, the time budget
    and every warning stay in sight; why the time is rough, what a budget does and what memorising means are behind
    "more"."""
    from playground.text.data import builtin_corpus

    tiny = train_tab.preset_fields("tiny")
    fields = [tiny[name] for name in train_tab.ESTIMATE_FIELDS]
    fields[train_tab.ESTIMATE_FIELDS.index("time_budget_seconds")] = 8
    text = train_tab.estimate(*fields, train_tab.CORPORA[0], default_corpus=builtin_corpus)
    shown = in_sight(text)
    assert "· time budget 8s" in shown and "the model will memorise them" in shown
    assert "<details><summary>more</summary>" in text and "The time is rough" in text.split(shown)[1]
    assert "validation loss rise while its training loss falls" in text.split(shown)[1]
    assert visible_words(text) <= 60, visible_words(text)
