import pytest
import torch
import torch.nn.functional as F

from playground.config import ModelConfig
from playground.model.gpt import GPT, KVCache, causal_mask
from playground.text.tokenizer import CharTokenizer


def tiny_model(**changes) -> GPT:
    torch.manual_seed(0)
    config = dict(vocabulary_size=11, context_size=16, embedding_dim=24, heads_num=3, layers_num=2)
    return GPT(ModelConfig(**{**config, **changes})).eval()


def test_causal_mask_with_offset():
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]


def test_causality_changing_token_j_leaves_earlier_outputs_unchanged():
    model = tiny_model()
    idx = torch.randint(0, 11, (2, 12))
    changed = idx.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 11
    before, after = model(idx).logits, model(changed).logits
    torch.testing.assert_close(before[:, :7], after[:, :7], rtol=0, atol=0)
    assert not torch.allclose(before[:, 7:], after[:, 7:])


def test_attention_weights_are_causal_distributions_and_match_sdpa_path():
    model = tiny_model()
    idx = torch.randint(0, 11, (2, 10))
    out = model(idx, return_attention=True)
    assert len(out.attention_weights) == 2 and len(out.attention_inputs) == 2
    for weights in out.attention_weights:
        assert weights.shape == (2, 3, 10, 10)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 10))
        assert torch.all(weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(out.logits, model(idx).logits, atol=1e-5, rtol=1e-5)


def test_attention_inputs_are_each_layers_layernormed_stream():
    model = tiny_model()
    idx = torch.randint(0, 11, (1, 6))
    out = model(idx, return_attention=True)
    torch.testing.assert_close(out.attention_inputs[0], model.blocks[0].ln_1(model.embed(idx)))


def test_kv_cache_gives_the_same_logits_as_full_forward():
    model = tiny_model()
    idx = torch.randint(0, 11, (1, 14))
    full = model(idx).logits
    cache = KVCache.empty(2)
    pieces = [model(idx[:, :5], cache=cache).logits]
    for t in range(5, 14):
        pieces.append(model(idx[:, t:t + 1], cache=cache).logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 14


def test_sequence_longer_than_context_is_refused():
    with pytest.raises(ValueError, match="longer than context_size 16"):
        tiny_model()(torch.zeros(1, 17, dtype=torch.long))


def test_loss_is_cross_entropy():
    model = tiny_model()
    idx, targets = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 8))
    out = model(idx, targets)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits.reshape(-1, 11), targets.reshape(-1)))


def test_tiny_gpt_overfits_hello_world():
    text = "hello world"
    tokenizer = CharTokenizer.train_from_text(text)
    ids = tokenizer.encode(text)[None]
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=16, embedding_dim=32,
                            heads_num=2, layers_num=2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(300):
        loss = model(ids[:, :-1], ids[:, 1:]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1


def _seeded_gpt(**changes) -> GPT:
    torch.manual_seed(0)
    config = ModelConfig(**{**dict(vocabulary_size=20, context_size=12, embedding_dim=24, heads_num=3, layers_num=2,
                                   use_bias=True), **changes})
    return GPT(config).eval()


def test_the_named_points_are_the_forward_pass_itself():
    """GPT keeps TransformerLens's named points as the Llama family does (model.base.Recorder): each is the tensor the
    pass computed, read back here from the modules' own weights, and keeping them changes no logit."""
    from playground.model.base import POINTS, run_with_cache

    model = _seeded_gpt()
    ids = torch.randint(0, 20, (2, 10), generator=torch.Generator().manual_seed(1))
    output, cache = run_with_cache(model, ids)
    with torch.no_grad():
        plain = model(ids, return_attention=True)
        torch.testing.assert_close(output.logits, plain.logits)
        assert set(cache.values) == {f"blocks.{layer}.{point}" for layer in range(2) for point in POINTS
                                     if "rot_" not in point}  # GPT has no rotation: its q and k are the ones it scores
        for layer, block in enumerate(model.blocks):
            def at(point, layer=layer):
                return cache[f"blocks.{layer}.{point}"]
            torch.testing.assert_close(at("ln1.hook_normalized"), block.ln_1(at("hook_resid_pre")))
            q, k, v = block.attn.project_qkv(at("ln1.hook_normalized"))
            for name, tensor in (("attn.hook_q", q), ("attn.hook_k", k), ("attn.hook_v", v)):
                torch.testing.assert_close(at(name), tensor)
            torch.testing.assert_close(at("attn.hook_pattern"), plain.attention_weights[layer])
            torch.testing.assert_close(at("attn.hook_pattern"), torch.softmax(at("attn.hook_attn_scores"), dim=-1))
            torch.testing.assert_close(at("attn.hook_z"), at("attn.hook_pattern") @ v)
            joined = at("attn.hook_z").transpose(1, 2).reshape(2, 10, 24)  # (B, T, h·d): the heads side by side
            torch.testing.assert_close(at("hook_attn_out"), block.attn.proj(joined))
            torch.testing.assert_close(at("hook_resid_mid"), at("hook_resid_pre") + at("hook_attn_out"))
            torch.testing.assert_close(at("hook_mlp_out"), block.mlp(block.ln_2(at("hook_resid_mid"))))
            torch.testing.assert_close(at("hook_resid_post"), at("hook_resid_mid") + at("hook_mlp_out"))
        torch.testing.assert_close(model.lm_head(model.ln_f(cache["blocks.1.hook_resid_post"])), plain.logits)


def test_a_recorder_keeps_only_what_it_is_asked_for_and_a_pass_without_one_keeps_nothing():
    from playground.model.base import Recorder

    model = _seeded_gpt(use_bias=False)
    ids = torch.arange(8)[None]
    recorder = Recorder({"attn.hook_pattern"}, layers={1})
    with torch.no_grad():
        model(ids, capture=recorder)
    assert list(recorder.values) == ["blocks.1.attn.hook_pattern"] and recorder.values[
        "blocks.1.attn.hook_pattern"].shape == (1, 3, 8, 8)
    with pytest.raises(ValueError, match="no point named attn.hook_nothing"):
        Recorder({"attn.hook_nothing"})


@pytest.mark.parametrize("family", ["gpt", "llama"])
def test_run_with_cache_stops_once_it_holds_what_it_asked_for(family):
    """stop_when_kept: the blocks above the last layer asked for are not run (the Attention tab reads one layer's
    input), and what is kept equals a whole pass's."""
    from playground.model.base import run_with_cache
    from playground.model.families import build_model, family_settings

    torch.manual_seed(0)
    config = ModelConfig(**family_settings(dict(vocabulary_size=20, context_size=12, embedding_dim=24, heads_num=4,
                                                layers_num=4, family=family,
                                                **({"kv_heads_num": 2} if family == "llama" else {}))))
    model = build_model(config).eval()
    ids = torch.randint(0, 20, (1, 10), generator=torch.Generator().manual_seed(1))
    ran = []
    for layer, block in enumerate(model.blocks):
        block.register_forward_pre_hook(lambda module, args, layer=layer: ran.append(layer))
    output, cache = run_with_cache(model, ids, {"ln1.hook_normalized"}, {1}, stop_when_kept=True)
    assert output is None and ran == [0, 1]
    ran.clear()
    _, whole = run_with_cache(model, ids, {"ln1.hook_normalized"}, {1})
    assert ran == [0, 1, 2, 3]
    torch.testing.assert_close(cache["blocks.1.ln1.hook_normalized"], whole["blocks.1.ln1.hook_normalized"])
