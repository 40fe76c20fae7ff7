"""The Attention tab's walkthrough on a Llama-family head: tiny LlamaForCausalLM / Qwen2ForCausalLM models built with
transformers (test-only) at 4:2, 4:1 and 6:3 query heads over K/V heads, opened from their folders. Every stage reads
the head's real numbers through the named points: the pattern is transformers' ``output_attentions``, q and k turned
are hook_rot_q and hook_rot_k, K and V are the shared K/V head's. The rotation stage's angles are transformers'; the
shift proof keeps a rotary head's scores (float32's rounding) and moves a GPT's.
"""

from __future__ import annotations

import pytest
import torch
from test_llama import SHAPES, open_folder

from playground.config import ModelConfig
from playground.lens import walkthrough
from playground.model.base import run_with_cache
from playground.model.families import build_model
from playground.model.llama import rotary_cos_sin

TEXT = "To be, or not to be: that is the question"
GROUPED = ("llama-4over2", "llama-4over1-tied", "llama-6over3-sentencepiece", "qwen2-4over2-tied")


@pytest.mark.parametrize("name", GROUPED)
def test_every_heads_pattern_is_transformers_output_attentions(tiny, name):
    reference, tokenizer, folder = tiny(name)
    model = open_folder(folder).model
    ids = torch.as_tensor(tokenizer.encode(TEXT))
    with torch.no_grad():
        expected = reference(ids[None], output_attentions=True).attentions  # per layer (1, h, T, T)
    _, cache = run_with_cache(model, ids[None])
    heads = SHAPES[name][2]
    for layer in range(model.config.layers_num):
        for head in range(heads):
            inputs = walkthrough.checkpoint_head_inputs(model, ids, layer, head)
            trace = inputs.trace()
            torch.testing.assert_close(trace.weights, expected[layer][0, head], atol=1e-5, rtol=0)
            kv_head = inputs.sharing and walkthrough.kv_sharing(heads, model.config.kv_heads, head).kv_head
            points = {point: cache[f"blocks.{layer}.attn.{point}"][0] for point in
                      ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k")}
            torch.testing.assert_close(trace.q_before, points["hook_q"][head], atol=1e-5, rtol=0)
            torch.testing.assert_close(trace.q, points["hook_rot_q"][head], atol=1e-5, rtol=0)
            # K and V shown are the shared K/V head's
            torch.testing.assert_close(trace.k_before, points["hook_k"][kv_head], atol=1e-5, rtol=0)
            torch.testing.assert_close(trace.k, points["hook_rot_k"][kv_head], atol=1e-5, rtol=0)
            torch.testing.assert_close(trace.v, points["hook_v"][kv_head], atol=1e-5, rtol=0)
            torch.testing.assert_close(trace.output, cache[f"blocks.{layer}.attn.hook_z"][0, head], atol=1e-5,
                                       rtol=0)
    assert trace.rotary and not walkthrough.journey_preset().trace().rotary


@pytest.mark.parametrize(("heads", "kv_heads", "head", "sentence"), [
    (4, 2, 1, "query heads 0 and 1 read K/V head 0"),
    (4, 2, 2, "query heads 2 and 3 read K/V head 1"),
    (6, 3, 5, "query heads 4 and 5 read K/V head 2"),
    (4, 1, 3, "query heads 0, 1, 2 and 3 read K/V head 0"),
    (2, 2, 1, "query head 1 reads K/V head 1 alone"),
])
def test_which_kv_head_a_query_head_reads_and_who_shares_it(heads, kv_heads, head, sentence):
    assert walkthrough.kv_sharing(heads, kv_heads, head).sentence == sentence


def test_a_grouped_heads_inputs_name_its_shared_kv_head(tiny):
    _, tokenizer, folder = tiny("llama-6over3-sentencepiece")
    ids = torch.as_tensor(tokenizer.encode(TEXT))
    inputs = walkthrough.checkpoint_head_inputs(open_folder(folder).model, ids, 1, 3)
    assert inputs.sharing == "query heads 2 and 3 read K/V head 1"
    assert inputs.rope_theta == 1e4


def test_each_pairs_angle_is_position_times_theta_as_transformers_turns_it(tiny):
    reference, _, _ = tiny("qwen2-4over2-tied")
    _, hidden, heads, _, theta, *_ = SHAPES["qwen2-4over2-tied"]
    d = hidden // heads  # 16, rope_theta 1e4
    angles = walkthrough.pair_angles(9, d, theta)  # (T, d/2)
    assert angles.shape == (9, d // 2)
    assert angles[3, 0].item() == pytest.approx(3.0)  # pair 0 turns a radian a token
    assert angles[3, 1].item() == pytest.approx(3 * theta ** (-2 / d))
    positions = torch.arange(9)
    cos, _ = reference.model.rotary_emb(torch.zeros(1, 9, d), positions[None])  # transformers' own angles
    torch.testing.assert_close(torch.cat([angles, angles], dim=-1).cos(), cos[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(rotary_cos_sin(positions, d, theta)[0], cos[0], atol=1e-6, rtol=0)
    assert walkthrough.pair_labels(8) == ["0 & 4", "1 & 5", "2 & 6", "3 & 7"]


def test_the_rotation_stage_shows_q_and_k_before_and_after_their_turn(tiny):
    _, tokenizer, folder = tiny("llama-4over2")
    ids = torch.as_tensor(tokenizer.encode(TEXT))
    trace = walkthrough.checkpoint_head_inputs(open_folder(folder).model, ids, 0, 1).trace()
    turn = walkthrough.rotation_at(trace, 5, 2)
    # a turn keeps each pair's length, and the turned q·k is the raw score the head takes
    half = trace.head_size // 2
    pair = lambda v: v[:half] ** 2 + v[half:] ** 2  # noqa: E731
    torch.testing.assert_close(pair(turn.q_after), pair(turn.q_before), atol=1e-5, rtol=1e-5)
    assert turn.score_after == pytest.approx(trace.scores[5, 2].item(), abs=1e-5)
    assert turn.score_after != pytest.approx(turn.score_before, abs=1e-3)
    with pytest.raises(ValueError, match="no rotation"):
        walkthrough.rotation_at(walkthrough.journey_preset().trace(), 0)


@pytest.mark.parametrize("name", ["llama-4over2", "qwen2-4over2-tied"])
def test_shifting_the_text_keeps_a_rotary_heads_scores(tiny, name):
    _, tokenizer, folder = tiny(name)
    model = open_folder(folder).model
    ids = torch.as_tensor(tokenizer.encode(TEXT))
    room = model.config.context_size - ids.numel()
    for layer, head, shift in ((0, 0, 7), (1, 3, room)):
        proof = walkthrough.shift_proof(model, ids, layer, head, shift)
        assert proof.rotary and proof.max_abs_difference < 1e-4  # float32's rounding of the angles
        assert torch.isfinite(proof.scores).sum() == ids.numel() * (ids.numel() + 1) // 2
        assert "distance" in proof.sentence
    with pytest.raises(ValueError, match=f"at most {room}"):
        walkthrough.shift_proof(model, ids, 0, 0, room + 1)


def test_shifting_the_text_moves_a_gpt_heads_scores():
    torch.manual_seed(0)
    model = build_model(ModelConfig(vocabulary_size=40, context_size=32, embedding_dim=32, heads_num=4,
                                    layers_num=2)).eval()
    ids = torch.randint(0, 40, (12,))
    proof = walkthrough.shift_proof(model, ids, 1, 2, 9)
    assert not proof.rotary and proof.max_abs_difference > 1e-3
    assert "Learned positions" in proof.sentence
    assert walkthrough.shift_proof(model, ids, 1, 2, 0).max_abs_difference == 0.0


def test_a_head_change_on_a_llama_reaches_every_query_head_of_its_kv_group(tiny):
    """Tying W_K to a head's W_Q changes its K/V head, which the group's other query heads read too (4 over 2: head 1
    shares with head 0); the intact pattern is the model's own."""
    _, tokenizer, folder = tiny("llama-4over2")
    ids = torch.as_tensor(tokenizer.encode(TEXT))
    model = open_folder(folder).model
    change = walkthrough.tied_query_key(model, ids, 0, 1)
    assert change.heads == (0, 1)
    with torch.no_grad():
        intact = model(ids[None], return_attention=True).attention_weights[0][0, 1]
    torch.testing.assert_close(change.original_weights, intact, atol=1e-6, rtol=0)
    assert not torch.allclose(change.weights, change.original_weights)
