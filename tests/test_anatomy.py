"""The Model tab's core (playground.lens.anatomy): each zoom level's numbers, pinned against the model and the book."""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing import assert_close

from playground.attention import MultiHeadAttentionWrapper
from playground.attention.batched import BatchedAttention
from playground.config import ModelConfig
from playground.lens.anatomy import (
    AllHeads,
    all_heads,
    block_input,
    block_lens,
    block_walk,
    forgotten_join,
    lessons,
    logit_lens,
    one_score,
    position,
    textbook_block,
    textbook_heads,
    textbook_inputs,
)
from playground.lens.walkthrough import checkpoint_head_inputs, journey_preset
from playground.model.gpt import GPT
from playground.textbook import notebook_002

# Notebook 001 (chapter 3 of Raschka's book), torch.manual_seed(123), the batch of two copies of the 6 x 3 inputs
BOOK_WRAPPER_ROWS = torch.tensor([  # MultiHeadAttentionWrapper(d_in=3, d_out=2, context_length=6, 0.0, num_heads=2)
    [-0.4519, 0.2216, 0.4772, 0.1063], [-0.5874, 0.0058, 0.5891, 0.3257], [-0.6300, -0.0632, 0.6202, 0.3860],
    [-0.5675, -0.0843, 0.5478, 0.3589], [-0.5526, -0.0981, 0.5321, 0.3428], [-0.5299, -0.1081, 0.5077, 0.3493]])
BOOK_BATCHED_ROWS = torch.tensor([  # MultiHeadAttention(d_in=3, d_out=2, 6, 0.0, num_heads=2)
    [0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593], [0.2693, 0.3873], [0.2639, 0.3928], [0.2575, 0.4028]])


@pytest.fixture(scope="module", params=[False, True], ids=["no-bias", "bias"])
def model(request) -> GPT:
    torch.manual_seed(7)
    config = ModelConfig(vocabulary_size=11, context_size=16, embedding_dim=24, heads_num=4, layers_num=3,
                         use_bias=request.param)
    gpt = GPT(config).eval()
    with torch.no_grad():  # GPT's init is nearly silent (std 0.02): louder weights make every comparison meaningful
        for parameter in gpt.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    return gpt


IDS = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])


# ------------------------------------------------------------------------------------------------ notebook 001

def test_textbook_wrapper_reproduces_notebook_001():
    heads = textbook_heads("wrapper")
    assert_close(heads.concatenated, BOOK_WRAPPER_ROWS, atol=1e-4, rtol=0)
    assert heads.projected is None and heads.batch_rows_equal
    assert heads.weights.shape == (2, 6, 6) and heads.head_outputs.shape == (2, 6, 2)
    assert_close(torch.cat(list(heads.head_outputs), dim=-1), heads.concatenated)  # concat = heads side by side
    # head 0 is the book's single CausalAttention (journey_preset draws the same three Linear layers)
    assert_close(heads.head_outputs[0], journey_preset(123).trace().output)


def test_textbook_wrapper_is_the_familys_class_as_notebook_001_calls_it():
    """The family counts d_out as the total width: the book's d_out=2 per head is d_out=4 here."""
    x, _ = textbook_inputs()
    torch.manual_seed(123)
    wrapper = MultiHeadAttentionWrapper(3, 4, 6, 0.0, num_heads=2)
    with torch.no_grad():
        assert_close(wrapper(torch.stack((x, x)))[1], textbook_heads("wrapper").concatenated)


def test_textbook_batched_reproduces_notebook_001_and_restores_the_rng():
    state = torch.random.get_rng_state()
    heads = textbook_heads("batched")
    assert torch.equal(torch.random.get_rng_state(), state)
    assert_close(heads.projected, BOOK_BATCHED_ROWS, atol=1e-4, rtol=0)
    assert heads.batch_rows_equal and heads.weights.shape == (2, 6, 6) and heads.head_outputs.shape == (2, 6, 1)
    assert_close(heads.concatenated, heads.head_outputs.transpose(0, 1).reshape(6, 2))
    assert torch.equal(heads.weights.triu(diagonal=1), torch.zeros(2, 6, 6))  # causal
    with pytest.raises(ValueError, match="textbook layer"):
        textbook_heads("transformer")
    text = lessons.textbook_heads_text(textbook_heads("wrapper"), heads)  # one sentence, read as one
    assert "Run on a batch of two copies of the input, both gave the same rows." in text


def test_one_layer_or_block_is_not_each_of_one():
    """'after each of the 1 blocks' read as a slip; a one-block model's lens says so in words."""
    assert lessons.lens_formula(1).startswith("after the model's one block: probabilities = softmax(")
    assert lessons.lens_formula(4).startswith("after each of the 4 blocks: ")


# ------------------------------------------------------------------------------------------------ 1. one score

def test_one_score_keeps_every_product():
    cell = one_score(torch.tensor([1.0, 2.0]), torch.tensor([3.0, -1.0]))
    assert cell.products.tolist() == [3.0, -2.0] and cell.total == 1.0
    assert cell.scaled == pytest.approx(1 / math.sqrt(2))
    with pytest.raises(ValueError, match="same positive length"):
        one_score(torch.ones(2), torch.ones(3))


def test_one_score_is_the_cell_of_the_heads_scaled_scores(model):
    trace = checkpoint_head_inputs(model, IDS, 1, 2).trace()
    for i, j in [(0, 0), (7, 3), (2, 9)]:
        cell = one_score(trace.q[i], trace.k[j])
        assert cell.total == pytest.approx(float(trace.scores[i, j]), rel=1e-5, abs=1e-6)
        assert cell.scaled == pytest.approx(float(trace.scaled_scores[i, j]), rel=1e-5, abs=1e-6)


def test_positions_count_from_the_end_and_clamp():
    assert position(-1, "query", 6) == (5, False) and position(None, "key", 6) == (5, False)
    assert position(9, "query", 6) == (5, True) and position(2, "key", 6) == (2, False)
    with pytest.raises(ValueError, match="query must be at least -1"):
        position(-2, "query", 6)


# ------------------------------------------------------------------------------------------------ 3. all heads

def test_all_heads_are_the_models_own_heads(model):
    layer = 2
    heads = all_heads(model, IDS, layer)
    h, T, d = model.config.heads_num, IDS.numel(), model.config.head_size
    assert heads.weights.shape == (h, T, T) and heads.head_outputs.shape == (h, T, d)
    for head in range(h):  # the same head the Attention tab traces
        trace = checkpoint_head_inputs(model, IDS, layer, head).trace()
        assert_close(heads.weights[head], trace.weights)
        assert_close(heads.concatenated[:, head * d:(head + 1) * d], trace.output)
    block = model.blocks[layer]
    with torch.no_grad():
        attended = block.attn(block.ln_1(block_input(model, IDS, layer))[None])[0][0]
    assert_close(heads.projected, attended)


# ------------------------------------------------------------------------------------------------ 3. no transpose

def test_forgotten_join_is_what_notebook_002s_attention_computes():
    """Run notebook 002's class with forget_transpose=True and the same weights: forgotten_join gives its output."""
    torch.manual_seed(5)
    right = notebook_002.MultiHeadAttention(24, 4)
    wrong = notebook_002.MultiHeadAttention(24, 4, forget_transpose=True)
    wrong.load_state_dict(right.state_dict(), strict=True)
    x = torch.randn(1, 7, 24, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        q, k, v = right.queries_keys_values(x)
        heads_output, _ = notebook_002.scaled_dot_product(q, k, v)  # (1, h, T, d)
        join = forgotten_join(heads_output[0], right.linear_layer)
        (wrong_out, _), (right_out, _) = wrong(x), right(x)  # (1, T, d) each, with the attention
        assert_close(join.wrong_projected, wrong_out[0])
        assert_close(join.right_projected, right_out[0])
        assert join.output_difference == pytest.approx(float((wrong_out - right_out).abs().max()), rel=1e-5)
    assert join.output_difference > 0.05 and join.concatenated_difference > 0.05
    with pytest.raises(ValueError, match=r"\(h, T, d\)"):
        forgotten_join(torch.ones(1, 2, 3, 4))


def test_all_heads_without_the_transpose_is_the_notebooks_reshape_of_the_same_heads(model):
    layer = 1
    right, wrong = all_heads(model, IDS, layer), all_heads(model, IDS, layer, forget_transpose=True)
    h, T, d = model.config.heads_num, IDS.numel(), model.config.head_size
    assert torch.equal(wrong.weights, right.weights) and torch.equal(wrong.head_outputs, right.head_outputs)
    explicit = right.head_outputs.contiguous().view(1, h, T, d).view(1, T, h * d)[0]  # the notebook's line, B = 1
    assert_close(wrong.concatenated, explicit, rtol=0, atol=0)
    with torch.no_grad():
        assert_close(wrong.projected, model.blocks[layer].attn.proj(explicit))
    forgotten = wrong.forgotten
    assert right.forgotten is None
    assert_close(forgotten.right_concatenated, right.concatenated) and assert_close(forgotten.right_projected,
                                                                                   right.projected)
    assert forgotten.output_difference == pytest.approx(float((wrong.projected - right.projected).abs().max()))
    for t in range(T):  # the map says where every block came from
        for i, (head, token) in enumerate(forgotten.block_sources[t].tolist()):
            assert torch.equal(wrong.concatenated[t, i * d:(i + 1) * d], right.head_outputs[head, token])
            assert (head, token) == divmod(t * h + i, T)
    # block i of row t is in its place only where t·h + i = i·T + t, i.e. t·3 = i·9 for h 4, T 10
    assert forgotten.misplaced.logical_not().nonzero().tolist() == [[0, 0], [3, 1], [6, 2], [9, 3]]
    assert forgotten.mixed_rows == list(range(T))  # every row reads some other token


def test_textbook_batched_without_the_transpose_is_the_books_layer_minus_one_line():
    heads = textbook_heads("batched", forget_transpose=True)
    x, _ = textbook_inputs()
    batch = torch.stack((x, x))
    torch.manual_seed(123)
    module = BatchedAttention(3, 2, 6, 0.0, num_heads=2)
    with torch.no_grad():  # notebook 001's forward with `.transpose(1, 2)` left out of the context vectors
        queries, keys, values = module._queries_keys_values(batch)
        context = (module._attention_weights(queries, keys) @ values).contiguous().view(2, 6, 2)
        expected = module.out_proj(context)
    assert_close(heads.projected, expected[0]) and assert_close(heads.concatenated, context[0])
    assert heads.batch_rows_equal
    assert_close(heads.forgotten.right_projected, BOOK_BATCHED_ROWS, atol=1e-4, rtol=0)  # the book's own rows
    assert heads.forgotten.block_sources.tolist() == [[[0, 0], [0, 1]], [[0, 2], [0, 3]], [[0, 4], [0, 5]],
                                                      [[1, 0], [1, 1]], [[1, 2], [1, 3]], [[1, 4], [1, 5]]]
    assert int(heads.forgotten.misplaced.sum()) == 10
    with pytest.raises(ValueError, match="no transpose to forget"):
        textbook_heads("wrapper", forget_transpose=True)


def test_forgotten_text_counts_the_misplaced_blocks_and_names_the_rows_sources():
    heads = textbook_heads("batched", forget_transpose=True)
    _, tokens = textbook_inputs()
    text = lessons.forgotten_text(heads, 4, tokens)
    assert "head 0's 6 rows of 1 feature first" in text and "**10 of the 12 blocks**" in text
    assert "**6 of the 6 rows** mix other tokens' features" in text
    assert f"up to **{heads.forgotten.output_difference:.2f}**" in text
    assert "Row **4** `one` now holds: block 0 ← head 1, token 2 `starts`; block 1 ← head 1, token 3 `with`" in text
    table = lessons.forgotten_table(heads.forgotten, tokens)
    assert "| 0 `Your` | h0·t0 ✓ | h0·t1 |" in table and "| 5 `step` | h1·t4 | h1·t5 ✓ |" in table
    one_head = torch.randn(1, 5, 3)  # (h, T, d): one head, nothing to scramble
    single = AllHeads(torch.zeros(5, 3), torch.zeros(1, 5, 5), one_head, one_head[0], None,
                      forgotten=forgotten_join(one_head))
    assert single.forgotten.output_difference == 0 and not single.forgotten.misplaced.any()
    assert "both joins agree" in lessons.forgotten_text(single, 0, list("abcde"))
    assert "the first 3 rows hold head 0 alone" in text and "horizontal bands, about 3 rows per head" in text
    # fewer tokens than heads: no row holds one head alone; each takes every token of two heads (a stranger's "ab")
    outputs = torch.randn(4, 2, 3)  # (h, T, d)
    short = AllHeads(torch.zeros(2, 12), torch.zeros(4, 2, 2), outputs, outputs.transpose(0, 1).reshape(2, 12), None,
                     forgotten=forgotten_join(outputs))
    text = lessons.forgotten_text(short, 0, list("ab"))
    assert "row 0 takes head 0's rows for tokens 0–1, then head 1's rows for tokens 0–1, row 1 the next ones" in text
    assert "alone" not in text and "change every 2 blocks along a row (one head's 2 tokens)" in text
    assert short.forgotten.block_sources[0].tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]  # what the text says


# ------------------------------------------------------------------------------------------------ 4. the block

@pytest.mark.parametrize("layer", [0, 2])
def test_block_walk_with_gpt_switches_is_block_forward(model, layer):
    x = block_input(model, IDS, layer)
    walk = block_walk(model.blocks[layer], x)
    with torch.no_grad():
        expected = model.blocks[layer](x[None])[0][0]
    assert_close(walk.output, expected)
    assert [p.name for p in walk.points] == ["block input", "LayerNorm 1", "attention output", "residual add 1",
                                             "LayerNorm 2", "MLP output", "residual add 2 (block output)"]
    assert_close(walk.points[0].norms, x.norm(dim=-1))
    if layer == 2:  # the input of block 2 is block 1's output: the walk chains like the model
        assert_close(block_walk(model.blocks[1], block_input(model, IDS, 1)).output, x, atol=1e-5, rtol=1e-5)


def test_post_norm_normalises_after_each_residual_add(model):
    block = model.blocks[1]
    x = block_input(model, IDS, 1)
    walk = block_walk(block, x, norm_order="post")
    with torch.no_grad():
        a = block.ln_1(x + block.attn(x[None])[0][0])
        expected = block.ln_2(a + block.mlp(a))
    assert_close(walk.output, expected)
    assert walk.points[-1].name == "LayerNorm 2 (block output)"
    assert not torch.allclose(walk.output, block_walk(block, x).output)


def test_attention_dropout_is_seeded_zeroes_weights_and_rescales_the_rest(model):
    block = model.blocks[0]
    x = block_input(model, IDS, 0)
    p = 0.25
    walk = block_walk(block, x, dropout_p=p, seed=3)
    dropped = ~walk.kept
    assert 0 < int(walk.dropped.sum()) < int(walk.visible.sum()) * model.config.heads_num
    assert torch.equal(walk.dropped_weights[dropped], torch.zeros(int(dropped.sum())))  # exactly zero
    assert_close(walk.dropped_weights[walk.kept], walk.weights[walk.kept] / (1 - p))  # kept: × 1/(1-p)
    again = block_walk(block, x, dropout_p=p, seed=3)
    assert torch.equal(again.kept, walk.kept) and torch.equal(again.output, walk.output)
    assert not torch.equal(block_walk(block, x, dropout_p=p, seed=4).kept, walk.kept)
    off = block_walk(block, x)
    assert walk.kept.shape == off.kept.shape and bool(off.kept.all())
    assert torch.equal(off.dropped_weights, off.weights)
    assert torch.equal(walk.weights, off.weights)  # the weights before dropout do not change
    assert not torch.allclose(walk.output, off.output)


def test_relu_changes_the_mlp_and_leaves_no_negative_hidden_unit(model):
    block = model.blocks[1]
    x = block_input(model, IDS, 1)
    gelu, relu = block_walk(block, x), block_walk(block, x, activation="relu")
    assert bool((relu.mlp_hidden >= 0).all()) and bool((gelu.mlp_hidden < 0).any())
    assert_close(gelu.points[4].values, relu.points[4].values)  # the same LayerNorm 2 input...
    assert not torch.allclose(gelu.points[5].values, relu.points[5].values)  # ...a different MLP output


def test_encoder_mode_lets_earlier_tokens_see_later_ones(model):
    block = model.blocks[0]
    x = block_input(model, IDS, 0)
    changed = x.clone()
    changed[-1] = -3 * x[-1]  # change the last token only
    decoder, encoder = block_walk(block, x), block_walk(block, x, causal=False)
    assert torch.equal(decoder.weights[:, 0, 1:], torch.zeros_like(decoder.weights[:, 0, 1:]))
    assert bool((encoder.weights[:, 0, 1:] > 0).all())
    assert_close(block_walk(block, changed).output[:-1], decoder.output[:-1])  # the future cannot leak back
    leaked = block_walk(block, changed, causal=False).points[2].values[0] - encoder.points[2].values[0]
    assert float(leaked.abs().max()) > 1e-2  # token 0's attention output reads the last token


def test_block_walk_refuses_bad_switches(model):
    x = block_input(model, IDS, 0)
    for kwargs, message in [({"norm_order": "sandwich"}, "norm order"), ({"activation": "tanh"}, "activation"),
                            ({"dropout_p": 1.0}, "below 1"), ({"seed": -1}, "dropout seed")]:
        with pytest.raises(ValueError, match=message):
            block_walk(model.blocks[0], x, **kwargs)
    with pytest.raises(ValueError, match=r"shape \(T, 24\)"):
        block_walk(model.blocks[0], torch.ones(3, 5))
    with pytest.raises(ValueError, match="layer 3 is out of range: this model has 3 layers"):
        block_input(model, IDS, 3)


def test_textbook_block_is_seeded_and_runs_on_the_books_inputs():
    x, tokens = textbook_inputs()
    first, second = textbook_block(), textbook_block()
    assert torch.equal(block_walk(first, x).output, block_walk(second, x).output)
    with torch.no_grad():
        assert_close(block_walk(first, x).output, first(x[None])[0][0])
    assert len(tokens) == 6


# ------------------------------------------------------------------------------------------------ 5. the model

def test_logit_lens_last_stage_is_the_models_prediction(model):
    lens = logit_lens(model, IDS, top=5)
    assert [s.name for s in lens.stages] == ["embeddings", "layer 0", "layer 1", "layer 2"]
    with torch.no_grad():
        probs = torch.softmax(model(IDS[None]).logits[0], dim=-1)  # (T, V)
        first = torch.softmax(model.lm_head(model.ln_f(model.embed(IDS[None])))[0], dim=-1)
    top_probs, top_ids = probs.topk(5, dim=-1)
    last = lens.stages[-1]
    assert torch.equal(last.top_ids, top_ids)
    assert_close(last.top_probs, top_probs)
    assert_close(last.next_probs, probs[torch.arange(9), IDS[1:]])
    assert_close(last.final_choice_probs, top_probs[:, 0])
    assert_close(lens.stages[0].top_probs, first.topk(5, dim=-1).values)
    assert_close(lens.stages[0].final_choice_probs, first.gather(1, top_ids[:, :1])[:, 0])
    with pytest.raises(ValueError, match="top must be at most 11"):
        logit_lens(model, IDS, top=12)


@pytest.mark.parametrize("layer,position", [(0, 3), (2, 9), (2, 0)])
def test_block_lens_reads_the_stream_the_model_passes_through_its_final_norm_and_head(model, layer, position):
    """The guesses at a block's three stream points, each against an independent reading: the input is logit_lens's
    stage before the block, after attention is the block's own attention added to its input, and the last block's
    output is the model's prediction."""
    x = block_input(model, IDS, layer)
    lens = block_lens(model, block_walk(model.blocks[layer], x), position, top=4)
    assert lens.names == ["block input", "residual add 1", "residual add 2 (block output)"]
    block = model.blocks[layer]
    with torch.no_grad():
        after_attention = x + block.attn(block.ln_1(x[None]))[0][0]
        output = block(x[None])[0][0]
        read = [torch.softmax(model.lm_head(model.ln_f(stream[position])), dim=-1) for stream in (x, after_attention,
                                                                                              output)]
    for point, probabilities in enumerate(read):
        top_probs, top_ids = probabilities.topk(4)
        assert torch.equal(lens.top_ids[point], top_ids), point
        assert_close(lens.top_probs[point], top_probs, atol=1e-6, rtol=1e-5)
    stages = logit_lens(model, IDS, top=4).stages
    assert torch.equal(lens.top_ids[0], stages[layer].top_ids[position])
    if layer == model.config.layers_num - 1:
        assert torch.equal(lens.top_ids[-1], stages[-1].top_ids[position])
    with pytest.raises(ValueError, match="position"):
        block_lens(model, block_walk(block, x), IDS.numel())


def test_token_ids_are_checked(model):
    with pytest.raises(ValueError, match="Type some text first"):
        logit_lens(model, torch.tensor([], dtype=torch.long))
    with pytest.raises(ValueError, match="context_size is 16"):
        all_heads(model, torch.zeros(17, dtype=torch.long), 0)
    with pytest.raises(ValueError, match="token id 11 is outside"):
        logit_lens(model, torch.tensor([1, 11]))


# ------------------------------------------------------------------------------------------------ the words

def test_level_titles_and_the_model_map():
    assert lessons.level_key("3. All heads") == "heads" and lessons.level_key("block") == "block"
    with pytest.raises(ValueError, match="not one of the levels"):
        lessons.level_key("6. Everything")
    assert lessons.map_parts(2) == ["Embeddings", "Layer 0", "Layer 1", "Final norm", "LM head",
                                    "Next-character probabilities"]


def test_block_text_names_the_dropped_weights_and_the_rescale(model):
    walk = block_walk(model.blocks[0], block_input(model, IDS, 0), dropout_p=0.5, seed=1)
    query = 3
    text = lessons.block_text(walk, query, "pre-norm (GPT)")
    h = walk.weights.size(0)
    dropped = sum(int(walk.dropped[k, query, j]) for k in range(h) for j in range(query + 1))
    assert f"zeroed **{dropped} of the {h * (query + 1)}** weights the {h} heads give at position {query}" in text
    assert "1/(1−0.5) = **2.0000**" in text


@pytest.mark.parametrize("activation", ["gelu", "relu"])
def test_block_text_says_what_the_output_projection_and_the_mlp_add_with_the_models_sizes(model, activation):
    """A learner had MLP(x) = W₂·GELU(W₁·x) and could not say what the output projection or the MLP add."""
    walk = block_walk(model.blocks[0], block_input(model, IDS, 0), activation=activation)
    text = lessons.block_text(walk, 0, "pre-norm (GPT)")
    C, h = model.config.embedding_dim, model.config.heads_num
    assert text.startswith("**What each part adds.** Attention moves information *between* positions")
    assert f"each of the {h} heads" in text and f"{C // h} numbers wide" in text and f"all {h} back into the {C}-wide" \
        in text
    named = {"gelu": "GELU", "relu": "ReLU"}[activation]
    assert f"compares the stream with {4 * C} learned patterns, {named} keeps" in text


def test_a_gpt2_blocks_walk_uses_its_own_tanh_gelu():
    """A GPT-2 block (activation gelu_tanh): the walk's GELU is the block's own, so it equals Block.forward."""
    from playground.config import ModelConfig
    from playground.lens.anatomy import block_walk
    from playground.model.gpt import GPT

    torch.manual_seed(0)
    model = GPT(ModelConfig(vocabulary_size=11, context_size=8, embedding_dim=16, heads_num=2, layers_num=1,
                            activation="gelu_tanh", use_bias=True)).eval()
    x = torch.randn(5, 16)
    with torch.no_grad():
        expected, _, _ = model.blocks[0](x[None])
    walked = block_walk(model.blocks[0], x)
    torch.testing.assert_close(walked.output, expected[0])
    erf = block_walk(model.blocks[0], x, activation="relu")  # a different switch does change it
    assert not torch.allclose(erf.output, expected[0])
