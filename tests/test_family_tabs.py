"""The Model and Sample tabs on a Llama-family checkpoint (issue 51): tiny LlamaForCausalLM / Qwen2ForCausalLM built
with transformers (test-only, as tests/test_llama.py builds them) at several query/K-V head ratios, put in a weights
folder and opened by name as a learner opens them. The Model tab's five levels read the named points; their numbers
are transformers' own hidden states, attentions and modules within 1e-5. The Sample tab's cache line says the bytes
of the cache the sampler really keeps, against a cache with one K/V head per query head."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from test_llama import PROMPT, make_tiny

from playground.config import Limits
from playground.lens import anatomy, walkthrough
from playground.lens.anatomy import family_levels, lessons
from playground.lens.anatomy.lessons import LEVEL_TITLES
from playground.model.gpt import KVCache
from playground.ui import model_tab, sample_tab
from playground.ui.common import AppContext

REPO_WEIGHTS = Path(__file__).resolve().parents[1] / "weights"
NAMES = ("llama-4over2", "qwen2-4over2-tied", "llama-6over3-sentencepiece", "llama-4over1-tied")


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """A weights folder holding each tiny model of NAMES under its name; -> (folder, {name: (reference, tokenizer)})."""
    folder = tmp_path_factory.mktemp("weights")
    built = {}
    for name in NAMES:
        reference, tokenizer, _ = make_tiny(folder / name, name)
        built[name] = (reference, tokenizer)
    return folder, built


@pytest.fixture(scope="module")
def ctx(weights):
    return AppContext(limits=Limits(), weights=weights[0])


def reference_pass(reference, ids: torch.Tensor):
    from transformers import AutoModelForCausalLM  # noqa: F401 (transformers is test-only)

    reference.config._attn_implementation = "eager"
    with torch.no_grad():
        return reference(ids[None], output_hidden_states=True, output_attentions=True)


@pytest.mark.parametrize("name", NAMES)
def test_every_level_reads_transformers_numbers(ctx, weights, name):
    reference, tokenizer = weights[1][name]
    loaded = ctx.checkpoint(name)
    model, config = loaded.model, loaded.config
    ids = tokenizer.encode(PROMPT)
    expected = reference_pass(reference, ids)
    hidden, attentions = expected.hidden_states, expected.attentions  # (1, T, C) x L+1; (1, h, T, T) x L
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    T, d, group = ids.numel(), config.head_size, config.heads_num // config.kv_heads
    positions = torch.arange(T)[None]
    for layer in range(config.layers_num):
        theirs = reference.model.layers[layer]
        with torch.no_grad():
            normed = theirs.input_layernorm(hidden[layer])  # (1, T, C)
            q = theirs.self_attn.q_proj(normed).view(1, T, -1, d).transpose(1, 2)  # (1, h, T, d)
            k = theirs.self_attn.k_proj(normed).view(1, T, -1, d).transpose(1, 2)  # (1, h_kv, T, d)
            cos, sin = reference.model.rotary_emb(hidden[layer], positions)
            q_rotated, k_rotated = apply_rotary_pos_emb(q, k, cos, sin)
        # levels 1-2: one head (the last, which reads the last K/V head)
        head = config.heads_num - 1
        rotary = family_levels.rotary_head(model, ids, layer, head)
        assert rotary.kv_head == config.kv_heads - 1 == head // group
        assert rotary.sharing == list(range(head - group + 1, head + 1))
        torch.testing.assert_close(rotary.trace.x, normed[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(rotary.q_before, q[0, head], atol=1e-5, rtol=0)
        torch.testing.assert_close(rotary.k_before, k[0, rotary.kv_head], atol=1e-5, rtol=0)
        torch.testing.assert_close(rotary.trace.q, q_rotated[0, head], atol=1e-5, rtol=0)
        torch.testing.assert_close(rotary.trace.k, k_rotated[0, rotary.kv_head], atol=1e-5, rtol=0)
        torch.testing.assert_close(rotary.trace.weights, attentions[layer][0, head], atol=1e-5, rtol=0)
        torch.testing.assert_close(torch.softmax(rotary.trace.masked_scores, -1), attentions[layer][0, head],
                                   atol=1e-5, rtol=0)
        # level 3: every head, joined and projected
        heads = anatomy.all_heads(model, ids, layer)  # every family's, at its named points
        torch.testing.assert_close(heads.weights, attentions[layer][0], atol=1e-5, rtol=0)
        with torch.no_grad():
            projected = theirs.self_attn.o_proj(heads.concatenated[None])[0]
        torch.testing.assert_close(heads.projected, projected, atol=1e-5, rtol=0)
        # level 4: the block's points and the gated MLP's parts
        walked = family_levels.gated_block_walk(model, ids, layer)
        points = {point.name: point.values for point in walked.walk.points}
        torch.testing.assert_close(points["block input"], hidden[layer][0], atol=1e-5, rtol=0)
        torch.testing.assert_close(anatomy.block_input(model, ids, layer), hidden[layer][0], atol=1e-5, rtol=0)
        torch.testing.assert_close(points["residual add 1"], hidden[layer][0] + heads.projected, atol=1e-5, rtol=0)
        with torch.no_grad():
            mlp_input = theirs.post_attention_layernorm(points["residual add 1"][None])
            gate, up = theirs.mlp.gate_proj(mlp_input)[0], theirs.mlp.up_proj(mlp_input)[0]
            mlp_out = theirs.mlp(mlp_input)[0]
        torch.testing.assert_close(points["RMSNorm 2"], mlp_input[0], atol=1e-5, rtol=0)
        torch.testing.assert_close(walked.mlp.gate, gate, atol=1e-5, rtol=0)
        torch.testing.assert_close(walked.mlp.up, up, atol=1e-5, rtol=0)
        torch.testing.assert_close(walked.mlp.activated * walked.mlp.up, walked.mlp.gated, atol=0, rtol=0)
        torch.testing.assert_close(walked.mlp.output, mlp_out, atol=1e-5, rtol=0)
        torch.testing.assert_close(points["MLP output (SwiGLU)"], mlp_out, atol=1e-5, rtol=0)
        if layer + 1 < config.layers_num:  # transformers' last hidden state is after the final norm
            torch.testing.assert_close(points["residual add 2 (block output)"], hidden[layer + 1][0], atol=1e-5,
                                       rtol=0)
        else:
            with torch.no_grad():
                normed_out = model.norm(points["residual add 2 (block output)"][None])[0]
            torch.testing.assert_close(normed_out, hidden[-1][0], atol=1e-5, rtol=0)
    # level 5: the logit lens ends at transformers' probabilities
    lens = anatomy.logit_lens(model, ids)
    probabilities = torch.softmax(expected.logits[0], -1)
    top = probabilities.topk(anatomy.TOP, dim=-1)
    torch.testing.assert_close(lens.stages[-1].top_probs, top.values, atol=1e-5, rtol=0)
    assert [stage.name for stage in lens.stages] == ["embeddings", *(f"layer {n}" for n in
                                                                     range(config.layers_num))]


def view(ctx, name, level, layer=0, head=3, query=-1, key=0, **switches):
    settings = dict(norm_order="pre", attention="decoder", activation="gelu", dropout=0.0, dropout_seed=0)
    settings.update(switches)
    return model_tab.model_view(ctx, "trained checkpoint", name, PROMPT, LEVEL_TITLES[level - 1], layer, head, query,
                                key, settings["norm_order"], settings["attention"], settings["activation"],
                                settings["dropout"], settings["dropout_seed"])


def figure_titles(shown) -> list[str]:
    return [figure.layout.title.text.replace("<br>", " ") for figure in (shown.plot_a, shown.plot_b, shown.plot_c,
                                                                         shown.plot_d) if figure is not None]


def test_the_model_tab_draws_every_level_of_a_llama_with_what_the_family_has(ctx):
    """Each level opens (the tab refused the family with 'draws GPT checkpoints only so far'), says the K/V head a
    query head reads and which heads share it, names the rotation where it happens, and RMSNorm and the SwiGLU MLP as
    they are."""
    score = view(ctx, "llama-4over2", 1, head=3, key=2)
    assert "K/V head 1, shared with head 2" in score.heading and "rotation (RoPE)" in score.heading
    assert "reads the distance" in score.heading
    titles = figure_titles(score)
    assert any("q_" in title and "before and after" in title for title in titles), titles
    one = view(ctx, "llama-4over2", 2, head=0)
    assert "K/V head 0, shared with head 1" in one.heading
    assert any("The rotation: the angle" in title for title in figure_titles(one))
    heads = view(ctx, "llama-4over2", 3)
    assert "heads 0, 1 read K/V head 0; heads 2, 3 read K/V head 1" in heads.heading
    block = view(ctx, "llama-4over2", 4, head=1)
    assert "SwiGLU" in block.heading and "RMSNorm" in block.heading
    assert any("gated MLP (SwiGLU)" in title for title in figure_titles(block))
    assert "rebuild a GPT block" not in block.heading
    switched = view(ctx, "llama-4over2", 4, head=1, norm_order="post")
    assert "rebuild a GPT block" in switched.heading  # the switches are said not to apply, never silently ignored
    lens = view(ctx, "llama-4over2", 5)
    assert "RMSNorm (`norm`)" in lens.heading and lens.plot_a is not None
    clicked = model_tab.model_view(ctx, "trained checkpoint", "llama-4over2", PROMPT, LEVEL_TITLES[4], 0, 3, -1, 0,
                                   "pre", "decoder", "gelu", 0.0, 0, part="Final norm")
    assert "**Final norm** (RMSNorm `norm`)" in clicked.heading  # it said LayerNorm ln_f for every family
    assert "**Final norm** (LayerNorm `ln_f`)" in lessons.lens_look_for("Final norm")  # a GPT's
    alone = view(ctx, "llama-4over1-tied", 1, head=2)
    assert "K/V head 0, shared with heads 0, 1, 3" in alone.heading


def test_the_block_levels_stream_points_are_the_models_own(ctx):
    loaded = ctx.checkpoint("qwen2-4over2-tied")
    ids = walkthrough.prepare_text(PROMPT, loaded.tokenizer, loaded.config.context_size).ids
    walked = family_levels.gated_block_walk(loaded.model, ids, 1)
    with torch.no_grad():
        logits = loaded.model(ids[None]).logits[0]
        guesses = anatomy.block_lens(loaded.model, walked.walk, ids.numel() - 1)
    assert [point.name for point in walked.walk.points][1::3] == ["RMSNorm 1", "RMSNorm 2"]
    # the last block's last stream point read through the final RMSNorm and LM head is the model's own guess
    assert int(guesses.top_ids[-1, 0]) == int(logits[-1].argmax())
    torch.testing.assert_close(guesses.top_probs[-1, 0], torch.softmax(logits[-1], -1).max(), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name, kv_heads, heads, share", [("llama-4over2", 2, 4, "half"),
                                                           ("llama-4over1-tied", 1, 4, "a quarter"),
                                                           ("llama-6over3-sentencepiece", 3, 6, "half")])
def test_the_sample_tab_says_the_grouped_caches_bytes_a_token_from_the_real_cache(ctx, name, kv_heads, heads, share):
    loaded = ctx.checkpoint(name)
    config = loaded.config
    *_, stats, _ = list(sample_tab.sample(ctx, name, PROMPT, 6, 1.0, 0, 1.0, 3, True, True))[-1]
    # the bytes of a cache the model fills itself, from its tensors' own sizes
    cache = KVCache.empty(config.layers_num)
    with torch.no_grad():
        loaded.model(loaded.tokenizer.encode(PROMPT)[None], cache=cache)
    per_token = sum(t.numel() * t.element_size() for t in (*cache.keys, *cache.values)) // cache.length
    assert per_token == 2 * config.layers_num * kv_heads * config.head_size * 4  # fp32 keys and values
    match = re.search(r"(\d+) K/V heads? for (\d+) query heads: ([\d,]+) bytes a token, (.+?) of ([\d,]+) with one "
                      r"K/V head per query head", stats)
    assert match, stats
    assert (int(match[1]), int(match[2]), int(match[3].replace(",", "")), match[4],
            int(match[5].replace(",", ""))) == (kv_heads, heads, per_token, share, per_token * heads // kv_heads)


def test_a_cache_with_one_kv_head_per_query_head_says_no_saving(ctx, weights):
    from playground.config import ModelConfig

    gpt = ModelConfig(vocabulary_size=10, layers_num=1, heads_num=2, embedding_dim=16, context_size=8)
    assert sample_tab.grouped_cache_sentence(gpt, 5, 640) == ""
    assert "per head," in sample_tab._cache_line(gpt, 5, True, cache_bytes=640)
    grouped = ctx.checkpoint("llama-4over2").config
    assert sample_tab.grouped_cache_sentence(grouped, 4, 4 * 4096).startswith(
        "2 K/V heads for 4 query heads: 4,096 bytes a token, half of 8,192")


@pytest.mark.parametrize("name", NAMES)
def test_each_grouped_way_is_transformers_eager_attention_on_the_layers_own_weights(ctx, weights, name):
    """The Compare tab's ways on a checkpoint's layer: its rotated q and grouped k, v are transformers' own, and every
    way's heads are transformers' eager_attention_forward's (repeat_kv, then matmul) within 1e-5."""
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb, eager_attention_forward

    from playground.model import grouped_ways

    reference, tokenizer = weights[1][name]
    loaded = ctx.checkpoint(name)
    config = loaded.config
    ids = tokenizer.encode(PROMPT)
    expected = reference_pass(reference, ids)
    T, d = ids.numel(), config.head_size
    layer = config.layers_num - 1
    theirs = reference.model.layers[layer].self_attn
    with torch.no_grad():
        normed = reference.model.layers[layer].input_layernorm(expected.hidden_states[layer])
        q = theirs.q_proj(normed).view(1, T, -1, d).transpose(1, 2)
        k = theirs.k_proj(normed).view(1, T, -1, d).transpose(1, 2)
        v = theirs.v_proj(normed).view(1, T, -1, d).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, *reference.model.rotary_emb(normed, torch.arange(T)[None]))
        future = torch.full((T, T), float("-inf")).triu(1)[None, None]
        heads, _ = eager_attention_forward(theirs, q, k, v, future, d ** -0.5)  # (1, T, h, d)
    ours_q, ours_k, ours_v, own = grouped_ways.rotated_qkv(loaded.model, ids, layer)
    for ours, theirs_tensor in ((ours_q, q), (ours_k, k), (ours_v, v), (own, heads.transpose(1, 2))):
        torch.testing.assert_close(ours, theirs_tensor, atol=1e-5, rtol=0)
    for way in grouped_ways.WAYS:
        with torch.no_grad():
            torch.testing.assert_close(way.compute(ours_q, ours_k, ours_v), heads.transpose(1, 2), atol=1e-5, rtol=0)


def test_the_compare_tab_lists_each_way_with_its_differences_and_bytes(ctx):
    from playground.ui import compare_tab

    summary, rows = compare_tab.checkpoint_heads(ctx, "llama-4over2", PROMPT, 1)
    assert "4 query heads over 2 K/V heads" in summary
    table = {row[0]: row for row in rows["data"]}
    assert list(table) == ["repeat_kv, then matmul", "sdpa, enable_gqa", "sdpa after repeat_kv", "grouped matmul"]
    assert all(float(row[1]) < 1e-5 and float(row[2]) < 1e-5 for row in rows["data"])
    loaded = ctx.checkpoint("llama-4over2")
    T = loaded.tokenizer.encode(PROMPT).numel()
    d = loaded.config.head_size
    kv_bytes = {name: int(row[4].replace(",", "")) for name, row in table.items()}
    assert kv_bytes["sdpa, enable_gqa"] == 2 * 2 * T * d * 4 == kv_bytes["repeat_kv, then matmul"] // 2
    assert table["sdpa, enable_gqa"][5] == "0" and int(table["grouped matmul"][5].replace(",", "")) == 4 * T * T * 4
    with pytest.raises(ValueError, match="Pick a Llama-family checkpoint"):
        compare_tab.checkpoint_heads(AppContext(limits=Limits(), weights=REPO_WEIGHTS), "shakespeare-char", PROMPT, 0)
