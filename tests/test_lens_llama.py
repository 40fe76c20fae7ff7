"""The lens on the Llama family (playground/lens: circuits.py, score_attribution.py, head_scores.py), checked against
transformers' own tiny LlamaForCausalLM and Qwen2ForCausalLM (test_llama.py's SHAPES: 4:2, 4:1 tied, 6:3 tied,
Qwen2 2:2 and 4:2 tied with q/k/v biases): the logit attribution's parts sum to transformers' logit with the final
RMSNorm's scale frozen, a grouped head's part goes through its own W_O slice and its shared K/V head, a knocked-out
head is a forward with its output removed by hand, the QK circuit at distance d is the model's own score of a pair d
apart, and a score's parts sum to the head's score at every layer, head and position."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from test_llama import PROMPT, SHAPES, llama_config, make_tiny, open_folder

from playground.config import ModelConfig
from playground.lens import circuits, head_scores
from playground.lens.score_attribution import score_attribution, score_parts
from playground.model.base import run_with_cache
from playground.model.families import build_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """name -> (transformers' model, the playground's, the prompt's ids (T,)), each built once for the module."""
    built = {}

    def get(name: str):
        if name not in built:
            reference, tokenizer, folder = make_tiny(tmp_path_factory.mktemp(name), name)
            built[name] = (reference, open_folder(folder).model.eval(), tokenizer.encode(PROMPT))
        return built[name]
    return get


def group_of(model, head: int) -> int:
    return head // (model.config.heads_num // model.config.kv_heads)


@pytest.mark.parametrize("name", SHAPES)
def test_the_logit_attribution_sums_to_transformers_logit_at_every_position(tiny, name):
    reference, model, ids = tiny(name)
    with torch.no_grad():
        expected = reference(ids[None]).logits[0]  # (T, V)
    targets = expected.argmax(dim=-1)
    rivals = expected.argsort(dim=-1)[:, -2]  # the runner-up
    parts = circuits.logit_attributions(model, ids, targets)
    against = circuits.logit_attributions(model, ids, targets, rivals)
    T, layers, heads = ids.numel(), model.config.layers_num, model.config.heads_num
    for p in range(T):
        torch.testing.assert_close(parts[p].values.sum(), expected[p, targets[p]], atol=1e-4, rtol=0)
        torch.testing.assert_close(against[p].values.sum(), expected[p, targets[p]] - expected[p, rivals[p]],
                                   atol=1e-4, rtol=0)
    # no position embedding and no biases in the family: the embedding, every head, every MLP
    assert parts[0].names == ["token embedding", *[n for layer in range(layers) for n in (
        *[f"L{layer} H{h}" for h in range(heads)], f"L{layer} MLP")]]
    assert parts[0].kinds.count("head") == layers * heads and "bias" not in parts[0].kinds


@pytest.mark.parametrize("name", ["llama-4over2", "qwen2-4over2-tied"])
def test_a_grouped_heads_part_is_its_own_z_through_its_own_w_o_slice_over_the_frozen_rmsnorm(tiny, name):
    """The part read from transformers' weights by hand, TransformerLens's way: z of the head (its weights times the
    V of the K/V head it shares), through its columns of o_proj, over the final RMSNorm's frozen scale, times the
    norm's weight, read by the target's row of the LM head."""
    reference, model, ids = tiny(name)
    d = model.config.head_size
    position, target = ids.numel() - 1, 7
    z_in: dict[int, torch.Tensor] = {}
    hooks = [layer.self_attn.o_proj.register_forward_pre_hook(
        lambda _m, args, i=i: z_in.__setitem__(i, args[0][0])) for i, layer in enumerate(reference.model.layers)]
    hooks.append(reference.model.norm.register_forward_pre_hook(lambda _m, args: z_in.__setitem__("final", args[0])))
    with torch.no_grad():
        reference(ids[None])
    for hook in hooks:
        hook.remove()
    final = z_in["final"][0, position]  # (C,): the stream before the final norm
    scale = torch.sqrt(final.pow(2).mean() + reference.config.rms_norm_eps)
    reader = reference.lm_head.weight[target] * reference.model.norm.weight
    parts = circuits.logit_attribution(model, ids, position, target)
    for layer in range(model.config.layers_num):
        o_proj = reference.model.layers[layer].self_attn.o_proj.weight
        for head in range(model.config.heads_num):
            z = z_in[layer][position, head * d:(head + 1) * d]
            with torch.no_grad():
                by_hand = float((z @ o_proj[:, head * d:(head + 1) * d].T) @ reader / scale)
            assert parts.head(layer, head) == pytest.approx(by_hand, abs=1e-5)


def knocked_reference(reference, ids, layer: int, head: int, mode: str) -> torch.Tensor:
    """transformers' logits with head ``head`` of ``layer`` removed by hand: its features of o_proj's input zeroed, or
    set to their mean over the text."""
    d = reference.config.hidden_size // reference.config.num_attention_heads
    o_proj = reference.model.layers[layer].self_attn.o_proj
    features = slice(head * d, (head + 1) * d)
    seen = []
    hook = o_proj.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    with torch.no_grad():
        reference(ids[None])
    hook.remove()
    mean = seen[0][0, :, features].mean(dim=0)

    def remove(_module, args):
        y = args[0].clone()
        y[..., features] = 0.0 if mode == "zero" else mean
        return (y,)
    hook = o_proj.register_forward_pre_hook(remove)
    with torch.no_grad():
        logits = reference(ids[None]).logits[0]
    hook.remove()
    return logits


@pytest.mark.parametrize("name, layer, head", [("llama-4over2", 0, 3), ("llama-4over1-tied", 1, 2),
                                               ("qwen2-4over2-tied", 1, 1)])
@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_a_knocked_out_head_is_the_forward_with_its_output_removed_by_hand(tiny, name, layer, head, mode):
    reference, model, ids = tiny(name)
    expected = knocked_reference(reference, ids, layer, head, mode)  # (T, V)
    with circuits.ablated(model, [(layer, head)], mode=mode, token_ids=ids), torch.no_grad():
        torch.testing.assert_close(model(ids[None]).logits[0], expected, atol=1e-4, rtol=0)
    targets = ids.roll(-1)
    [knocked] = circuits.knock_outs(model, ids, [[(layer, head)]], targets, mode=mode)
    loss = F.cross_entropy(expected[:-1], ids[1:])
    assert knocked.loss == pytest.approx(float(loss), abs=1e-4)
    assert knocked.guesses == expected.argmax(dim=-1).tolist()
    with torch.no_grad():
        intact = reference(ids[None]).logits[0]
    assert not torch.allclose(intact, expected, atol=1e-3)  # the head mattered: the test can tell


@pytest.mark.parametrize("name", ["llama-4over2", "llama-6over3-sentencepiece", "qwen2-4over2-tied"])
@pytest.mark.parametrize("distance", [0, 1, 5])
def test_the_qk_circuit_at_a_distance_is_the_models_own_score_of_a_pair_that_far_apart(tiny, name, distance):
    """Layer 0 reads the embeddings alone: a query token i at position p and a key token j at p - distance get the
    score the circuit gives (i, j) at that distance, wherever the pair sits."""
    _, model, _ = tiny(name)
    V, heads = model.config.vocabulary_size, model.config.heads_num
    generator = torch.Generator().manual_seed(distance)
    i, j = (int(t) for t in torch.randint(V, (2,), generator=generator))
    j = i if distance == 0 else j  # a token's score of itself
    for position in (distance, 11):
        ids = torch.randint(V, (12,), generator=generator)
        ids[position], ids[position - distance] = i, j
        _, points = run_with_cache(model, ids[None], {"attn.hook_attn_scores"}, {0})
        scores = points["blocks.0.attn.hook_attn_scores"][0]  # (h, T, T)
        for head in range(heads):
            table = circuits.qk_circuit(model, 0, head, torch.tensor([i, j]), distance=distance)  # (2, 2)
            assert float(table[0, 1]) == pytest.approx(float(scores[head, position, position - distance]), abs=1e-4)


def test_the_qk_circuit_turns_with_the_distance_and_only_a_rotary_model_takes_one(tiny):
    _, model, _ = tiny("llama-4over2")
    near, far = circuits.qk_circuit(model, 0, 1), circuits.qk_circuit(model, 0, 1, distance=4)
    assert torch.equal(near, circuits.qk_circuit(model, 0, 1, distance=circuits.DEFAULT_DISTANCE))
    assert (near - far).abs().max() > 1e-3
    with pytest.raises(circuits.CircuitError, match="whole number from 0 to 63"):
        circuits.qk_circuit(model, 0, 1, distance=64)
    gpt = build_model(ModelConfig(vocabulary_size=40, context_size=16, embedding_dim=32, heads_num=4, layers_num=2))
    with pytest.raises(circuits.CircuitError, match="no distance"):
        circuits.qk_circuit(gpt, 0, 1, distance=2)


@pytest.mark.parametrize("name, layer, head", [("llama-4over2", 1, 3), ("qwen2-4over2-tied", 0, 2)])
def test_the_ov_circuit_reads_the_shared_kv_heads_value(tiny, name, layer, head):
    reference, model, _ = tiny(name)
    d, group = model.config.head_size, group_of(model, head)
    attention = reference.model.layers[layer].self_attn
    tokens = torch.tensor([3, 8, 21])
    with torch.no_grad():
        x = reference.model.layers[layer].input_layernorm(reference.model.embed_tokens(tokens))  # (3, C)
        v = x @ attention.v_proj.weight[group * d:(group + 1) * d].T
        if attention.v_proj.bias is not None:
            v = v + attention.v_proj.bias[group * d:(group + 1) * d]
        expected = reference.lm_head(reference.model.norm(v @ attention.o_proj.weight[:, head * d:(head + 1) * d].T))
    torch.testing.assert_close(circuits.ov_circuit(model, layer, head, tokens), expected[:, tokens], atol=1e-5,
                               rtol=0)


def random_family(qkv_bias: bool) -> torch.nn.Module:
    """A random Llama (or, with q/k/v biases, Qwen2-style) of three layers, 6 query heads over 2 K/V heads, tied,
    its norms off their ones."""
    torch.manual_seed(5)
    model = build_model(llama_config(layers_num=3, heads_num=6, kv_heads_num=2, embedding_dim=48, qkv_bias=qkv_bias,
                                     tie_embeddings=qkv_bias)).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                parameter.add_(0.2 * torch.randn_like(parameter))
    return model


@pytest.mark.parametrize("source", ["llama-4over1-tied", "qwen2-4over2-tied", "random-llama", "random-qwen2"])
def test_a_scores_parts_sum_to_the_heads_score_at_every_layer_head_and_position(tiny, source):
    if source.startswith("random"):
        model = random_family(qkv_bias=source == "random-qwen2")
        ids = torch.randint(model.config.vocabulary_size, (14,), generator=torch.Generator().manual_seed(1))
    else:
        _, model, ids = tiny(source)
    _, points = run_with_cache(model, ids[None], {"attn.hook_attn_scores"})
    causal = torch.ones(ids.numel(), ids.numel(), dtype=torch.bool).tril()
    for layer in range(model.config.layers_num):
        for head in range(model.config.heads_num):
            parts = score_parts(model, ids, layer, head)
            own = points[f"blocks.{layer}.attn.hook_attn_scores"][0, head]  # (T, T), masked above the diagonal
            torch.testing.assert_close(parts.scores[causal], own[causal], atol=1e-5, rtol=0)
            sums = torch.einsum("ptd,qsd->ts", parts.queries, parts.keys)  # every pair of parts, every cell
            torch.testing.assert_close(sums.float(), parts.scores, atol=1e-4, rtol=0)
    top, heads = model.config.layers_num - 1, model.config.heads_num
    last = score_attribution(model, ids, top, 1, ids.numel() - 1, 3)
    assert last.values.sum().item() == pytest.approx(last.score, abs=1e-4)
    assert last.key_names[:2] == ["token embedding", "L0 H0"] and f"L{top - 1} H{heads - 1}" in last.key_names
    assert (f"L{top} query bias" in last.query_names) == (source in ("qwen2-4over2-tied", "random-qwen2"))


@pytest.mark.parametrize("name", ["llama-4over2", "qwen2-4over2-tied"])
def test_the_heads_are_scored_from_the_patterns_named_points_which_are_transformers_attentions(tiny, name):
    reference, model, _ = tiny(name)
    probe = head_scores.probe_tokens(model.config.vocabulary_size, model.config.context_size, 2)
    patterns = head_scores.attention_patterns(model, probe)
    with torch.no_grad():
        expected = reference(probe, output_attentions=True).attentions
    for mine, theirs in zip(patterns, expected, strict=True):
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)
    scores = head_scores.score_heads(model, sequences=2)
    assert len(scores) == len(head_scores.PATTERNS) * model.config.layers_num * model.config.heads_num
    previous = head_scores.previous_token_score(patterns[1])  # (h,)
    assert {(s.layer, s.head): s.score for s in scores if s.pattern == "previous token"}[(1, 2)] == \
        pytest.approx(float(previous[2]), abs=1e-6)
    assert math.isfinite(sum(s.score for s in scores))
