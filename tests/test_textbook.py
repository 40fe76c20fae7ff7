"""The course notebooks' classes (playground.textbook): sizes, the notebooks' parameter names, strict loading, and
each against what it should equal: nn.LayerNorm, the attention family's batched reference, an explicit loop."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.testing import assert_close

from playground.attention import build, transplant
from playground.attention.batched import BatchedAttention
from playground.textbook import (
    Encoder,
    EncoderLayer,
    FeedForward,
    LayerNormalization,
    MultiHeadAttention,
    MultiHeadSelfAttention,
    PositionwiseFeedForward,
    SimpleLanguageModel,
    TextbookError,
    TransformerLayer,
    TwoLayerTransformer,
    causal_mask,
    forgotten_transpose,
)

D, HEADS, D_FF, VOCAB, MAX_LEN, LAYERS = 16, 4, 24, 11, 8, 2


def count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def randn(*shape, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def token_ids(batch=2, T=6, seed=1):
    return torch.randint(0, VOCAB, (batch, T), generator=torch.Generator().manual_seed(seed))


# Parameter counts by formula, written out here rather than read back from the classes.
LINEAR = D * D + D  # Linear(d, d) with its bias
ATTENTION = 4 * LINEAR  # W_q, W_k, W_v, W_o
FEED_FORWARD = D * D_FF + D_FF + D_FF * D + D
LAYER = ATTENTION + FEED_FORWARD + 2 * (2 * D)  # two norms of 2·d
TOY_EMBD, TOY_HEADS, TOY_BLOCK = 32, 4, 8

# (build, input, output shape, parameters, the notebook's state_dict names)
CASES = {
    "LayerNormalization": (lambda: LayerNormalization(D), lambda: randn(2, 5, D), (2, 5, D), 2 * D,
                           ["gamma", "beta"]),
    "PositionwiseFeedForward": (lambda: PositionwiseFeedForward(D, D_FF), lambda: randn(2, 5, D), (2, 5, D),
                                FEED_FORWARD, ["w_1.weight", "w_1.bias", "w_2.weight", "w_2.bias"]),
    "MultiHeadSelfAttention": (lambda: MultiHeadSelfAttention(D, HEADS), lambda: randn(2, 5, D), (2, 5, D),
                               ATTENTION, [f"W_{r}.{p}" for r in "qkvo" for p in ("weight", "bias")]),
    "EncoderLayer": (lambda: EncoderLayer(D, HEADS, D_FF), lambda: randn(2, 5, D), (2, 5, D), LAYER,
                     [f"self_attn.W_{r}.{p}" for r in "qkvo" for p in ("weight", "bias")]
                     + ["feed_forward.w_1.weight", "feed_forward.w_1.bias", "feed_forward.w_2.weight",
                        "feed_forward.w_2.bias", "norm1.gamma", "norm1.beta", "norm2.gamma", "norm2.beta"]),
    "Encoder": (lambda: Encoder(LAYERS, D, HEADS, D_FF), lambda: randn(2, 5, D), (2, 5, D), LAYERS * LAYER, None),
    "FeedForward": (lambda: FeedForward(D, D_FF), lambda: randn(2, 5, D), (2, 5, D), FEED_FORWARD,
                    ["linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"]),
    "TransformerLayer": (lambda: TransformerLayer(D, HEADS, D_FF), lambda: randn(2, 5, D), (2, 5, D), LAYER,
                         [f"self_attn.W_{r}.{p}" for r in "qkvo" for p in ("weight", "bias")]
                         + ["feed_forward.linear1.weight", "feed_forward.linear1.bias", "feed_forward.linear2.weight",
                            "feed_forward.linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"]),
    "TwoLayerTransformer": (lambda: TwoLayerTransformer(VOCAB, D, HEADS, D_FF, MAX_LEN), token_ids, (2, 6, VOCAB),
                            VOCAB * D + MAX_LEN * D + 2 * LAYER + D * VOCAB + VOCAB, None),
    "SimpleLanguageModel": (lambda: SimpleLanguageModel(VOCAB, TOY_BLOCK, TOY_EMBD, TOY_HEADS), token_ids,
                            (2, 6, VOCAB),
                            VOCAB * TOY_EMBD + TOY_BLOCK * TOY_EMBD + 3 * TOY_EMBD * TOY_EMBD + TOY_EMBD * VOCAB
                            + VOCAB,
                            ["token_embedding_table.weight", "position_embedding_table.weight"]
                            + [f"sa_heads.heads.{i}.{k}" for i in range(TOY_HEADS)
                               for k in ("tril", "key.weight", "query.weight", "value.weight")]
                            + ["lm_head.weight", "lm_head.bias"]),
}


def output_of(module, x):
    out = module(x)
    return out[0] if isinstance(out, tuple) else out  # SimpleLanguageModel returns (logits, loss)


@pytest.mark.parametrize("name", CASES)
def test_shapes_parameter_counts_names_and_strict_round_trip(name):
    build, make_input, shape, parameters, names = CASES[name]
    torch.manual_seed(0)
    module = build().eval()
    with torch.no_grad():  # move every weight off its initial value, so a fresh instance is another function
        for i, p in enumerate(module.parameters()):
            p.add_(randn(*p.shape, seed=10 + i) * 0.1)
    x = make_input()
    out = output_of(module, x)
    assert tuple(out.shape) == shape
    assert count(module) == parameters
    if names is not None:
        assert sorted(module.state_dict()) == sorted(names)
    torch.manual_seed(1)
    fresh = build().eval()
    assert not torch.equal(output_of(fresh, x), out)  # another function...
    fresh.load_state_dict(module.state_dict(), strict=True)
    assert_close(output_of(fresh, x), out, rtol=0, atol=0)  # ...until it loads the weights


def test_the_stacks_name_their_layers_as_the_notebooks_do():
    encoder_keys = Encoder(LAYERS, D, HEADS, D_FF).state_dict()
    layer_keys = EncoderLayer(D, HEADS, D_FF).state_dict()
    assert sorted(encoder_keys) == sorted(f"layers.{i}.{k}" for i in range(LAYERS) for k in layer_keys)
    model_keys = TwoLayerTransformer(VOCAB, D, HEADS, D_FF, MAX_LEN).state_dict()
    block_keys = TransformerLayer(D, HEADS, D_FF).state_dict()
    assert sorted(model_keys) == sorted(
        ["embedding.weight", "position_embedding.weight", "fc_out.weight", "fc_out.bias"]
        + [f"layer{i}.{k}" for i in (1, 2) for k in block_keys])


@pytest.mark.parametrize("eps", [1e-5, 1e-3])
def test_layer_normalization_from_scratch_is_nn_layer_norm(eps):
    ours, torchs = LayerNormalization(D, eps=eps), nn.LayerNorm(D, eps=eps)
    with torch.no_grad():
        ours.gamma.copy_(randn(D, seed=2))
        ours.beta.copy_(randn(D, seed=3))
        torchs.weight.copy_(ours.gamma)
        torchs.bias.copy_(ours.beta)
    x = randn(3, 7, D) * 4 + 2
    assert_close(ours(x), torchs(x))


def test_notebook_003_attention_is_the_batched_family_member_with_its_weights():
    torch.manual_seed(0)
    ours = MultiHeadAttention(D, HEADS).eval()
    reference = BatchedAttention(D, D, MAX_LEN, 0.0, num_heads=HEADS, qkv_bias=True).eval()
    with torch.no_grad():
        for mine, theirs in (("W_q", "W_query"), ("W_k", "W_key"), ("W_v", "W_value"), ("W_o", "out_proj")):
            getattr(reference, theirs).weight.copy_(getattr(ours, mine).weight)
            getattr(reference, theirs).bias.copy_(getattr(ours, mine).bias)
    x = randn(2, 6, D)
    mask = causal_mask(6)
    assert_close(ours(x, x, x, mask), reference(x))
    assert_close(ours.attention_weights(x, x, mask), reference.attention_weights(x))
    # and the family's own transplant carries the same function on to its other members
    sdpa = transplant(reference, "sdpa", build("sdpa", D, D, HEADS, MAX_LEN, qkv_bias=True)).eval()
    assert_close(sdpa(x), ours(x, x, x, mask))
    assert not torch.allclose(ours(x, x, x), reference(x))  # without the mask it is not causal


def changed_last_token(x):
    y = x.clone()
    y[:, -1] = y[:, -1] + 1 if y.is_floating_point() else (y[:, -1] + 1) % VOCAB
    return y


def test_the_002_encoder_is_unmasked_and_the_003_model_is_causal():
    torch.manual_seed(0)
    encoder = Encoder(LAYERS, D, HEADS, D_FF).eval()
    x = randn(1, 6, D)
    earlier = (encoder(changed_last_token(x)) - encoder(x))[:, :-1]
    assert earlier.abs().amax() > 1e-3  # every earlier token read the changed one
    weights = encoder.layers[0].self_attn.attention_weights(x)
    future = torch.ones(6, 6, dtype=torch.bool).triu(diagonal=1)
    assert (weights[..., future] > 0.01).all()  # every query reads every later key
    assert_close(weights.sum(-1), torch.ones(1, HEADS, 6))

    model = TwoLayerTransformer(VOCAB, D, HEADS, D_FF, MAX_LEN).eval()
    ids = token_ids(T=6)
    assert_close(model(changed_last_token(ids))[:, :-1], model(ids)[:, :-1], rtol=0, atol=0)
    assert not torch.equal(model(changed_last_token(ids))[:, -1], model(ids)[:, -1])


def test_post_norm_rows_have_mean_0_and_std_1_before_the_affine():
    torch.manual_seed(0)
    layer = EncoderLayer(D, HEADS, D_FF).eval()
    with torch.no_grad():
        layer.norm2.gamma.copy_(randn(D, seed=2).abs() + 0.5)
        layer.norm2.beta.copy_(randn(D, seed=3))
    out = layer(randn(2, 5, D) * 3)
    before_affine = (out - layer.norm2.beta) / layer.norm2.gamma
    assert_close(before_affine.mean(-1), torch.zeros(2, 5), atol=1e-5, rtol=0)
    assert_close(before_affine.std(-1, unbiased=False), torch.ones(2, 5), atol=1e-4, rtol=0)
    assert out.mean(-1).abs().amax() > 0.05  # the affine does move them: the check above is not trivial


def explicit_wrong_join(heads_output):
    """The notebook's view, element by element: read (h, T, d) in memory order, write (T, h·d) in row order."""
    b, h, t, d = heads_output.shape
    out = torch.empty(b, t, h * d)
    for batch in range(b):
        flat = [heads_output[batch, head, token, feature]
                for head in range(h) for token in range(t) for feature in range(d)]
        for i, value in enumerate(flat):
            out[batch, i // (h * d), i % (h * d)] = value
    return out


def test_forgotten_transpose_against_an_explicit_loop():
    heads = randn(2, 3, 5, 2)  # (B, h, T, d)
    result = forgotten_transpose(heads)
    assert_close(result.wrong, explicit_wrong_join(heads), rtol=0, atol=0)
    assert_close(result.right, torch.cat([heads[:, i] for i in range(3)], dim=-1), rtol=0, atol=0)
    assert result.max_abs_difference == pytest.approx(float((result.wrong - result.right).abs().max()))
    for t in range(5):
        for s in range(6):
            for table, joined in ((result.wrong_source, result.wrong), (result.right_source, result.right)):
                head, token, feature = table[t, s].tolist()
                assert_close(joined[:, t, s], heads[:, head, token, feature], rtol=0, atol=0)
            assert result.source(t, s, forgot=False) == (s // 2, t, s % 2)


def test_forgotten_transpose_rows_say_which_tokens_each_row_mixes():
    result = forgotten_transpose(randn(1, 2, 4, 3))  # the module docstring's example: h 2, T 4, d 3
    rows = result.rows()
    assert rows[0].blocks == ((0, 0), (0, 1)) and rows[0].right_blocks == ((0, 0), (1, 0))
    assert rows[3].blocks == ((1, 2), (1, 3)) and rows[3].source_tokens == (2, 3)
    assert [row.wrong_blocks for row in rows] == [1, 2, 2, 1]  # only row 0's first and row 3's last block are right
    assert not any(row.reads_only_its_token for row in rows)
    one_head = forgotten_transpose(randn(1, 1, 4, 3))
    assert one_head.max_abs_difference == 0 and all(row.reads_only_its_token for row in one_head.rows())
    with pytest.raises(TextbookError, match=r"\(B, h, T, d\)"):
        forgotten_transpose(randn(4, 3))
    with pytest.raises(TextbookError, match="outside"):
        result.source(4, 0)


def test_forget_transpose_changes_the_002_attention_exactly_as_the_map_says():
    torch.manual_seed(0)
    right = MultiHeadSelfAttention(D, HEADS)
    wrong = MultiHeadSelfAttention(D, HEADS, forget_transpose=True)
    wrong.load_state_dict(right.state_dict(), strict=True)
    x = randn(2, 6, D)
    result = forgotten_transpose(right.heads_output(x))
    assert_close(right(x), right.W_o(result.right))
    assert_close(wrong(x), right.W_o(result.wrong))
    assert result.max_abs_difference > 0.05
    encoder_right = Encoder(LAYERS, D, HEADS, D_FF).eval()
    encoder_wrong = Encoder(LAYERS, D, HEADS, D_FF, forget_transpose=True).eval()
    encoder_wrong.load_state_dict(encoder_right.state_dict(), strict=True)  # the flag is no weight
    assert (encoder_wrong(x) - encoder_right(x)).abs().amax() > 0.05


@pytest.mark.parametrize("build, make_input", [
    (lambda p: Encoder(LAYERS, D, HEADS, D_FF, dropout=p), lambda: randn(2, 5, D)),
    (lambda p: TwoLayerTransformer(VOCAB, D, HEADS, D_FF, MAX_LEN, dropout=p), token_ids),
], ids=["encoder", "two_layer"])
def test_dropout_is_off_in_eval_mode_and_on_in_train_mode(build, make_input):
    torch.manual_seed(0)
    module = build(0.5)
    x = make_input()
    module.eval()
    assert_close(module(x), module(x), rtol=0, atol=0)
    module.train()
    assert not torch.equal(module(x), module(x))
    without = build(0.0)
    without.load_state_dict(module.state_dict())
    assert_close(without.train()(x), without.eval()(x), rtol=0, atol=0)


def test_sizes_the_notebooks_cannot_build_are_refused_with_the_reason():
    with pytest.raises(TextbookError, match=r"d_model \(10\) must be divisible by num_heads \(4\)"):
        EncoderLayer(10, 4, D_FF)
    with pytest.raises(TextbookError, match=r"n_embd \(30\) must be divisible by n_head \(4\)"):
        SimpleLanguageModel(VOCAB, 8, 30, 4)
    with pytest.raises(TextbookError, match="dropout"):
        TwoLayerTransformer(VOCAB, D, HEADS, D_FF, MAX_LEN, dropout=1.0)
    with pytest.raises(TextbookError, match=r"9 tokens exceed max_len \(8\)"):
        TwoLayerTransformer(VOCAB, D, HEADS, D_FF, MAX_LEN)(token_ids(T=9))
    with pytest.raises(TextbookError, match=r"block_size \(8\)"):
        SimpleLanguageModel(VOCAB, 8, 32, 4)(token_ids(T=9))


def test_the_004_toy_memorises_hello_world_and_writes_it_back():
    text = "hello world"
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text])
    block_size = 8
    x = torch.stack([data[i:i + block_size] for i in range(len(data) - block_size)])  # (3, 8)
    y = torch.stack([data[i + 1:i + block_size + 1] for i in range(len(data) - block_size)])
    torch.manual_seed(0)
    model = SimpleLanguageModel(len(chars), block_size, n_embd=32, n_head=4)
    logits, loss = model(x, y)
    assert logits.shape == (3, block_size, len(chars)) and model(x)[1] is None
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(100):
        _, loss = model(x, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 1e-2
    start = torch.tensor([[stoi["h"]]])
    first = model.generate(start, len(text) - 1, generator=torch.Generator().manual_seed(0))  # 10 > block_size
    assert "".join(chars[i] for i in first[0].tolist()) == text
    again = model.generate(start, len(text) - 1, generator=torch.Generator().manual_seed(0))
    assert torch.equal(first, again)
    weights = model.attention_weights(first[:, -block_size:])  # attention over the last block_size ids
    assert weights.shape == (1, 4, block_size, block_size)
    assert_close(weights.sum(-1), torch.ones(1, 4, block_size))
    assert torch.count_nonzero(weights.triu(diagonal=1)) == 0  # causal
    with pytest.raises(TextbookError, match="max_new_tokens"):
        model.generate(start, -1)
