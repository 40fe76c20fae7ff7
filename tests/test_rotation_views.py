"""The Attention tab's handlers on a Llama-family checkpoint (a tiny LlamaForCausalLM, 4 query heads over 2 K/V heads,
saved by transformers into a weights folder) beside the shipped GPT: the stage view opens it (notebook 004's model is
still refused), names the shared K/V head on K and V, the rotation stage is drawn for it alone, and the shift proof
keeps its scores and moves the GPT's."""

from __future__ import annotations

import shutil

import pytest
from test_llama import make_tiny
from test_ui_handlers import REPO

from playground.config import Limits
from playground.ui import attention_views, rotation_views
from playground.ui.common import AppContext

TEXT = "To be, or not to be: that is the question"
CHECKPOINT = attention_views.SOURCES[0]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    weights = tmp_path_factory.mktemp("weights")
    make_tiny(weights / "tiny-llama", "llama-4over2")
    shutil.copytree(REPO / "weights" / "shakespeare-char", weights / "shakespeare-char")
    return AppContext(limits=Limits(), weights=weights)


def view(ctx, checkpoint, head, step, text=TEXT):
    return attention_views.stage_view(ctx, CHECKPOINT, checkpoint, 1, head, 0, 16, 8, "journey", text, True, True,
                                      1.0, False, step, -1)


def test_a_llama_head_steps_through_every_stage_with_its_shared_kv_head_named(ctx):
    for step in range(1, 8):
        shown = view(ctx, "tiny-llama", 3, step)
        assert "L1 H3" in shown.heading and shown.plot_a is not None
    qkv = view(ctx, "tiny-llama", 3, 2)
    assert "query heads 2 and 3 read K/V head 1" in qkv.heading and "2½. Rotation" in qkv.heading
    titles = [figure.layout.title.text.replace("<br>", " ") for figure in (qkv.plot_a, qkv.plot_b, qkv.plot_c)]
    assert "K/V head 1" not in titles[0] and all("K/V head 1" in title for title in titles[1:])
    gpt = view(ctx, "shakespeare-char", 1, 2)
    assert "K/V" not in gpt.heading and "Rotation" not in gpt.heading


def test_the_rotation_stage_is_drawn_for_the_rotary_checkpoint_only(ctx):
    section, text, turned, angles, kv_line, shift_group = rotation_views.rotation_view(
        ctx, CHECKPOINT, "tiny-llama", 0, 1, TEXT, 4)
    assert section["visible"] and shift_group["visible"]
    assert "2½. Rotation" in text and "depends only on the distance" in text and "rope_theta 10000" in text
    assert turned.layout.title.text.replace("<br>", " ").startswith("Query 4")
    rows = list(turned.layout.yaxis.ticktext)
    assert rows[:2] == ["q of 4 before", "q of 4 turned"] and rows[2].startswith("k of") and rows[3].endswith("turned")
    assert angles.data[0].z.shape == (19, 4)  # 19 tokens, head size 8: four pairs
    assert kv_line.startswith("**K/V head:** query heads 0 and 1 read K/V head 0")
    gpt = rotation_views.rotation_view(ctx, CHECKPOINT, "shakespeare-char", 0, 1, TEXT, 4)
    assert not gpt[0]["visible"] and gpt[2] is None and gpt[4] == "" and gpt[5]["visible"]
    preset = rotation_views.rotation_view(ctx, attention_views.SOURCES[2], "tiny-llama", 0, 1, TEXT, 4)
    assert not preset[0]["visible"] and not preset[5]["visible"]


def test_the_shift_proof_keeps_the_rotary_scores_and_moves_the_gpts(ctx):
    kept = rotation_views.shift_view(ctx, CHECKPOINT, "tiny-llama", 1, 3, TEXT, 7)
    assert "moved 7 positions on" in kept and "Rotary positions" in kept
    moved = rotation_views.shift_view(ctx, CHECKPOINT, "shakespeare-char", 0, 0, TEXT, 7)
    assert "Learned positions" in moved
    change = float(moved.split("up to **")[1].split("**")[0])
    assert change > 0.1


def test_a_shift_past_the_context_is_refused_with_the_most_it_may_be(ctx):
    with pytest.raises(ValueError, match="shift it by at most 45"):
        rotation_views.shift_view(ctx, CHECKPOINT, "tiny-llama", 0, 0, TEXT, 46)


def test_the_q_k_and_v_what_ifs_run_on_a_llama_head_and_say_what_its_shared_kv_head_changes(ctx):
    """The what-ifs ran on GPT only ("the head changes run a GPT's blocks so far"); on a Llama head the change is its
    K/V group's (one W_K, one V for query heads 2 and 3), said on screen with what V = X's width leaves out."""
    from playground.lens.walkthrough.whatifs import change_head
    from playground.ui import score_views

    tie, copy = score_views.CHANGE_LABELS
    tied = score_views.attention_change(ctx, CHECKPOINT, "tiny-llama", TEXT, 1, 3, tie)
    loaded = ctx.checkpoint("tiny-llama")
    expected = change_head(loaded.model, loaded.tokenizer.encode(TEXT), 1, 3, "tied query and key")
    assert f"{expected.original_loss:.3f} → {expected.loss:.3f}" in tied[1]
    assert "L1 H3 shares its K/V head with H2" in tied[1] and "one W_K" in tied[1] and "symmetric" in tied[1]
    assert [a.text for a in tied[0].layout.annotations] == ["intact", "W_K = W_Q"]
    copied = score_views.head_change_view(ctx, "tiny-llama", TEXT, 1, 3, copy)
    assert copied.numbers["heads_changed"] == [2, 3]
    assert "X is 32 wide and the head's values 8" in copied.text and "W_O left out" in copied.text
    assert "the group has one V" in copied.text
