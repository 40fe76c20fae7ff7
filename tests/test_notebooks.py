"""playground.textbook against the notebooks' own code (../shared/seeds, run by notebook_seeds.py): every class is
built at random sizes, each state_dict loads strictly into the other, and in eval mode the outputs agree. Notebook
002 joins its heads without a transpose: the textbook's class is right by default (checked against
torch.nn.MultiheadAttention) and gives the notebook's own numbers with forget_transpose=True."""

from __future__ import annotations

import random

import pytest
import torch
from notebook_seeds import notebook
from torch import nn
from torch.testing import assert_close

from playground.textbook import (
    NOTEBOOKS,
    TextbookError,
    notebook_000,
    notebook_001,
    notebook_002,
    notebook_003,
    notebook_004,
)

TOLERANCE = {"rtol": 0.0, "atol": 1e-5}
SIZES_PER_CLASS = 3

# The seeds README's table: what each notebook defines, and so what each module must hold.
NOTEBOOK_NAMES = {
    "000": ["CharTokenizer", "TokenIdsDataset", "AttentionHead", "MultiHeadAttention"],
    "001": ["CausalAttention", "MultiHeadAttentionWrapper", "MultiHeadAttention", "count_parameters"],
    "002": ["scaled_dot_product", "MultiHeadAttention", "LayerNormalization", "PositionwiseFeedForward",
            "EncoderLayer", "Encoder"],
    "003": ["MultiHeadAttention", "FeedForward", "TransformerLayer", "TwoLayerTransformer"],
    "004": ["Head", "MultiHeadAttention", "SimpleLanguageModel", "get_batch", "generate"],
}


def test_each_module_holds_its_notebooks_names_and_the_notebooks_define_them():
    for number, names in NOTEBOOK_NAMES.items():
        theirs = notebook(number)
        for name in names:
            assert name in theirs, f"notebook {number} no longer defines {name}"
            assert hasattr(NOTEBOOKS[number], name), f"playground.textbook.notebook_{number} lacks {name}"


def sizes(rng: random.Random) -> dict:
    heads = rng.choice([1, 2, 3, 4])
    head_size = rng.randint(1, 6)
    context = rng.randint(2, 9)
    return {"heads": heads, "head_size": head_size, "d": heads * head_size, "hidden": rng.randint(1, 12),
            "context": context, "T": rng.randint(1, context), "B": rng.randint(1, 3), "vocab": rng.randint(2, 9),
            "bias": rng.choice([False, True]), "dropout": rng.choice([0.0, 0.1, 0.5]), "layers": rng.randint(1, 3)}


def embeddings(s):
    return torch.randn(s["B"], s["T"], s["d"], generator=torch.Generator().manual_seed(s["T"] * 7 + s["d"]))


def ids(s):
    return torch.randint(0, s["vocab"], (s["B"], s["T"]), generator=torch.Generator().manual_seed(s["T"]))


def causal(s):
    return torch.tril(torch.ones(s["T"], s["T"])).view(1, 1, s["T"], s["T"])


def config_000(s):
    return {"vocabulary_size": s["vocab"], "embedding_dim": s["d"], "heads_num": s["heads"],
            "head_size": s["head_size"], "context_size": s["context"], "dropout_rate": s["dropout"],
            "use_bias": s["bias"]}


# name -> (notebook, build(namespace, sizes), call(module, sizes)); outputs are tensors or tuples of tensors
CASES = {
    "000 AttentionHead": ("000", lambda ns, s: ns.AttentionHead(config_000(s)), lambda m, s: m(embeddings(s))),
    "000 MultiHeadAttention": ("000", lambda ns, s: ns.MultiHeadAttention(config_000(s)),
                               lambda m, s: m(embeddings(s))),
    "001 CausalAttention": ("001", lambda ns, s: ns.CausalAttention(s["d"], s["head_size"], s["context"],
                                                                    s["dropout"], s["bias"]),
                            lambda m, s: m(embeddings(s))),
    "001 MultiHeadAttentionWrapper": ("001", lambda ns, s: ns.MultiHeadAttentionWrapper(
        s["d"], s["head_size"], s["context"], s["dropout"], num_heads=s["heads"], qkv_bias=s["bias"]),
        lambda m, s: m(embeddings(s))),
    "001 MultiHeadAttention": ("001", lambda ns, s: ns.MultiHeadAttention(
        s["d"], s["d"], s["context"], s["dropout"], num_heads=s["heads"], qkv_bias=s["bias"]),
        lambda m, s: m(embeddings(s))),
    "002 LayerNormalization": ("002", lambda ns, s: ns.LayerNormalization(parameters_shape=[s["d"]]),
                               lambda m, s: m(embeddings(s) * 3 + 1)),
    "002 PositionwiseFeedForward": ("002", lambda ns, s: ns.PositionwiseFeedForward(s["d"], s["hidden"], s["dropout"]),
                                    lambda m, s: m(embeddings(s))),
    "003 MultiHeadAttention": ("003", lambda ns, s: ns.MultiHeadAttention(s["d"], s["heads"], s["dropout"]),
                               lambda m, s: m(embeddings(s), embeddings(s), embeddings(s), causal(s))),
    "003 FeedForward": ("003", lambda ns, s: ns.FeedForward(s["d"], s["hidden"], s["dropout"]),
                        lambda m, s: m(embeddings(s))),
    "003 TransformerLayer": ("003", lambda ns, s: ns.TransformerLayer(s["d"], s["heads"], s["hidden"], s["dropout"]),
                             lambda m, s: m(embeddings(s), causal(s))),
    "003 TwoLayerTransformer": ("003", lambda ns, s: ns.TwoLayerTransformer(
        s["vocab"], d_model=s["d"], num_heads=s["heads"], d_ff=s["hidden"], max_seq_len=s["context"],
        dropout=s["dropout"]), lambda m, s: m(ids(s))),
    "004 Head": ("004", lambda ns, s: ns.Head(s["head_size"]),
                 lambda m, s: m(embeddings(s)[..., :s["head_size"]])),
    "004 MultiHeadAttention": ("004", lambda ns, s: ns.MultiHeadAttention(s["d"], s["heads"]),
                               lambda m, s: m(embeddings(s))),
    "004 SimpleLanguageModel": ("004", lambda ns, s: ns.SimpleLanguageModel(s["vocab"], block_size=s["context"],
                                                                            n_embd=s["d"], n_head=s["heads"]),
                                lambda m, s: m(ids(s))),
}
# notebook 002's classes that join heads: the notebook's numbers come with forget_transpose=True
JOINING_002 = {
    "002 MultiHeadAttention": (lambda ns, s, **kw: ns.MultiHeadAttention(s["d"], s["heads"], **kw),
                               lambda m, s: m(embeddings(s))),
    "002 EncoderLayer": (lambda ns, s, **kw: ns.EncoderLayer(s["d"], s["hidden"], s["heads"], s["dropout"], **kw),
                         lambda m, s: m(embeddings(s))),
    "002 Encoder": (lambda ns, s, **kw: ns.Encoder(s["d"], s["hidden"], s["heads"], s["dropout"], s["layers"], **kw),
                    lambda m, s: m(embeddings(s))),
}


class Namespace:
    """A notebook's namespace read as attributes, so one builder serves the notebook and the module."""

    def __init__(self, values: dict):
        self.__dict__.update(values)


def perturbed(module: nn.Module, seed: int) -> nn.Module:
    """Every parameter moved off its initial value (norms start at exactly 1 and 0), in eval mode."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.3)
    return module.eval()


def assert_same(actual, expected):
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_close(a, e, **TOLERANCE)
    else:
        assert_close(actual, expected, **TOLERANCE)


def both_ways(build_theirs, build_ours, call, s, seed):
    """Their state_dict into ours and ours into theirs, strictly; the outputs agree each way."""
    torch.manual_seed(seed)
    theirs = perturbed(build_theirs(), seed)
    torch.manual_seed(seed + 1)
    ours = perturbed(build_ours(), seed + 1)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict(), strict=True)
    with torch.no_grad():
        assert_same(call(ours, s), call(theirs, s))
    torch.manual_seed(seed + 2)
    fresh_theirs = perturbed(build_theirs(), seed + 2)
    fresh_theirs.load_state_dict(perturbed(ours, seed + 3).state_dict(), strict=True)
    with torch.no_grad():
        assert_same(call(fresh_theirs, s), call(ours, s))


@pytest.mark.parametrize("case", CASES)
def test_the_notebooks_classes_load_each_others_weights_and_agree_at_random_sizes(case):
    number, build, call = CASES[case]
    theirs, ours = Namespace(notebook(number)), NOTEBOOKS[number]
    rng = random.Random(case)
    for trial in range(SIZES_PER_CLASS):
        s = sizes(rng)
        both_ways(lambda s=s: build(theirs, s), lambda s=s: build(ours, s), call, s, seed=trial * 10)


@pytest.mark.parametrize("case", JOINING_002)
def test_002_gives_the_notebooks_numbers_with_forget_transpose(case):
    build, call = JOINING_002[case]
    theirs = Namespace(notebook("002"))
    rng = random.Random(case)
    for trial in range(SIZES_PER_CLASS):
        s = sizes(rng)
        both_ways(lambda s=s: build(theirs, s), lambda s=s: build(notebook_002, s, forget_transpose=True), call, s,
                  seed=trial * 10)


def torch_attention(module: notebook_002.MultiHeadAttention) -> nn.MultiheadAttention:
    """torch's own multi-head attention holding a 002 layer's weights: the per-head [q|k|v] rows regrouped."""
    d, h, hd = module.d_model, module.num_heads, module.head_dim
    reference = nn.MultiheadAttention(d, h, batch_first=True)
    rows = torch.arange(3 * d).view(h, 3, hd)  # head, role (q, k, v), feature
    order = rows.permute(1, 0, 2).reshape(-1)  # all q rows (head by head), then all k, then all v
    with torch.no_grad():
        reference.in_proj_weight.copy_(module.qkv_layer.weight[order])
        reference.in_proj_bias.copy_(module.qkv_layer.bias[order])
        reference.out_proj.weight.copy_(module.linear_layer.weight)
        reference.out_proj.bias.copy_(module.linear_layer.bias)
    return reference.eval()


class TorchJoined(nn.Module):
    """torch's attention in the place of a 002 layer's ``attention``, called as the notebook calls it."""

    def __init__(self, module):
        super().__init__()
        self.reference = torch_attention(module)

    def forward(self, x, mask=None):
        return self.reference(x, x, x, need_weights=True, average_attn_weights=False)


def test_002_joins_the_heads_right_by_default():
    rng = random.Random("002 right")
    for trial in range(SIZES_PER_CLASS + 2):
        s = sizes(rng)
        torch.manual_seed(trial)
        ours = perturbed(notebook_002.Encoder(s["d"], s["hidden"], s["heads"], s["dropout"], s["layers"]), trial)
        x = embeddings(s)
        with torch.no_grad():
            out, attention = ours.layers[0].attention(x)
            expected_out, expected_attention = torch_attention(ours.layers[0].attention)(
                x, x, x, need_weights=True, average_attn_weights=False)
            assert_close(out, expected_out, **TOLERANCE)
            assert_close(attention, expected_attention, **TOLERANCE)
            theirs = Namespace(notebook("002")).Encoder(s["d"], s["hidden"], s["heads"], s["dropout"], s["layers"])
            theirs.load_state_dict(ours.state_dict(), strict=True)
            for layer in theirs.layers:
                layer.attention = TorchJoined(layer.attention)  # the notebook's layer with the heads joined right
            assert_close(ours(x), theirs.eval()(x), **TOLERANCE)


def test_002_without_the_transpose_differs_from_the_right_join():
    s = {"d": 8, "heads": 2, "hidden": 6, "dropout": 0.0, "layers": 1, "T": 5, "B": 1}
    torch.manual_seed(0)
    right = perturbed(notebook_002.MultiHeadAttention(8, 2), 0)
    wrong = notebook_002.MultiHeadAttention(8, 2, forget_transpose=True).eval()
    wrong.load_state_dict(right.state_dict(), strict=True)  # the switch is no weight
    with torch.no_grad():
        assert (right(embeddings(s))[0] - wrong(embeddings(s))[0]).abs().max() > 0.05
        assert_close(right(embeddings(s))[1], wrong(embeddings(s))[1], rtol=0, atol=0)  # same attention


def test_002_scaled_dot_product_adds_its_mask_as_the_notebook_does():
    q, k, v = (torch.randn(2, 3, 5, 4, generator=torch.Generator().manual_seed(i)) for i in range(3))
    mask = torch.full((5, 5), float("-inf")).triu(diagonal=1)
    for given in (None, mask):
        assert_same(notebook_002.scaled_dot_product(q, k, v, given),
                    notebook("002")["scaled_dot_product"](q, k, v, given))


def test_002_verbose_prints_the_notebooks_shapes(capsys):
    notebook_002.EncoderLayer(16, 32, 4, 0.1).eval()(torch.randn(2, 5, 16))
    assert capsys.readouterr().out == ""
    notebook_002.EncoderLayer(16, 32, 4, 0.1, verbose=True).eval()(torch.randn(2, 5, 16))
    printed = capsys.readouterr().out
    assert "qkv.size: torch.Size([2, 5, 4, 12])" in printed and "Shape of x :torch.Size([2, 5, 16])" in printed


def test_000_tokenizer_and_dataset_match_the_notebook_on_tiny_shakespeare(shakespeare_text):
    theirs = notebook("000")["CharTokenizer"].train_from_text(shakespeare_text)
    ours = notebook_000.CharTokenizer.train_from_text(shakespeare_text)
    assert ours.vocabulary_size() == theirs.vocabulary_size() == 65
    assert ours.encode("Hello world").tolist() == [20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42]  # as it prints
    sample = shakespeare_text[:5000]
    assert torch.equal(ours.encode(sample), theirs.encode(sample))
    assert ours.decode(theirs.encode(sample)) == sample
    repeated = notebook_000.CharTokenizer("abca"), notebook("000")["CharTokenizer"]("abca")
    assert repeated[0].token_id_for_char == repeated[1].token_id_for_char == {"a": 0, "b": 1, "c": 2}
    with pytest.raises(TextbookError, match="'∑' is not in the vocabulary"):
        ours.encode("a∑")
    data = ours.encode(sample)
    dataset, their_dataset = notebook_000.TokenIdsDataset(data, 16), notebook("000")["TokenIdsDataset"](data, 16)
    assert len(dataset) == len(their_dataset)
    for pos in (0, 1, 777, len(dataset) - 1):
        assert all(torch.equal(a, b) for a, b in zip(dataset[pos], their_dataset[pos]))


def test_001_reproduces_the_notebooks_printed_numbers():
    inputs = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64], [0.22, 0.58, 0.33],
                           [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])
    batch = torch.stack((inputs, inputs), dim=0)
    torch.manual_seed(123)
    wrapper = notebook_001.MultiHeadAttentionWrapper(3, 2, 6, 0.0, num_heads=2)
    with torch.no_grad():
        assert_close(wrapper(batch)[0, 0], torch.tensor([-0.4519, 0.2216, 0.4772, 0.1063]), rtol=0, atol=1e-4)
        torch.manual_seed(123)
        batched = notebook_001.MultiHeadAttention(3, 2, 6, 0.0, num_heads=2)
        assert_close(batched(batch)[0, :2], torch.tensor([[0.3190, 0.4858], [0.2943, 0.3897]]), rtol=0, atol=1e-4)
    gpt2 = notebook_001.MultiHeadAttention(768, 768, 1024, 0.1, 12, qkv_bias=True)
    assert notebook_001.count_parameters(gpt2) == notebook("001")["count_parameters"](gpt2) == 2_362_368


def test_004_generate_draws_what_the_notebooks_generate_draws():
    text = "hello world"
    theirs = notebook("004")
    tokenizer = notebook_000.CharTokenizer.train_from_text(text)
    torch.manual_seed(0)
    model = perturbed(notebook_004.SimpleLanguageModel(tokenizer.vocabulary_size(), 8, 16, 2), 0)
    # the notebook's generate reads encode, decode and device from its globals
    theirs.update(encode=lambda s: tokenizer.encode(s).tolist(), decode=lambda ids: tokenizer.decode(torch.tensor(ids)),
                    device=torch.device("cpu"))
    torch.manual_seed(5)
    expected = theirs["generate"](model, start_str="w", max_new_tokens=40)
    torch.manual_seed(5)
    assert notebook_004.generate(model, "w", 40, tokenizer=tokenizer) == expected
    seeded = notebook_004.generate(model, "w", 40, tokenizer=tokenizer, generator=torch.Generator().manual_seed(1))
    assert seeded == notebook_004.generate(model, "w", 40, tokenizer=tokenizer,
                                           generator=torch.Generator().manual_seed(1))
    assert len(seeded) == 41 and seeded[0] == "w"


def test_004_get_batch_gives_the_batch_asked_for():
    data = notebook_000.CharTokenizer.train_from_text("hello world").encode("hello world")
    x, y = notebook_004.get_batch(data, batch_size=64, block_size=8, generator=torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (64, 8)
    assert torch.equal(x[:, 1:], y[:, :-1])
    starts = {int(row[0]) for row in x}
    assert starts <= {int(data[0]), int(data[1]), int(data[2])}  # windows start at 0, 1 or 2
    notebook("004")["data"] = data  # the global the notebook's get_batch reads
    assert notebook("004")["get_batch"](batch_size=64)[0].shape == (4, 8)  # the notebook's ignores batch_size
    with pytest.raises(TextbookError, match="at least 9"):
        notebook_004.get_batch(data[:8], block_size=8)


def test_004_lab_trains_as_the_notebooks_printed_losses_fall():
    """The notebook's lab: AdamW 1e-3, batches of 4 windows of 8 from "hello world"; it prints 2.18 at step 0 and
    0.38 at step 150. Any seed lands near."""
    tokenizer = notebook_000.CharTokenizer.train_from_text("hello world")
    data = tokenizer.encode("hello world")
    for seed in (0, 1):
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed)
        model = notebook_004.SimpleLanguageModel(tokenizer.vocabulary_size(), block_size=8, n_embd=16, n_head=2)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses = []
        for _ in range(200):
            x, y = notebook_004.get_batch(data, batch_size=4, block_size=8, generator=generator)
            logits = model(x)
            loss = nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        assert 1.7 < losses[0] < 2.7 and losses[150] < 1.0 and losses[199] < losses[150] + 0.2, losses[::50]


def test_004_heads_read_only_their_own_slice():
    torch.manual_seed(0)
    attention = notebook_004.MultiHeadAttention(8, 2).eval()
    x = torch.randn(1, 4, 8)
    changed = x.clone()
    changed[..., 4:] += 1.0  # head 1's slice only
    with torch.no_grad():
        assert torch.equal(attention.weights(x)[:, 0], attention.weights(changed)[:, 0])
        assert not torch.equal(attention.weights(x)[:, 1], attention.weights(changed)[:, 1])


def test_sizes_the_notebooks_cannot_build_are_refused_with_the_reason():
    with pytest.raises(TextbookError, match=r"d_model \(10\) must be divisible by num_heads \(4\)"):
        notebook_002.EncoderLayer(10, 24, 4, 0.1)
    with pytest.raises(TextbookError, match=r"C \(30\) must be divisible by num_heads \(4\)"):
        notebook_004.SimpleLanguageModel(8, 8, 30, 4)
    with pytest.raises(TextbookError, match="dropout"):
        notebook_003.TwoLayerTransformer(8, 16, 4, 32, 8, dropout=1.0)
    with pytest.raises(TextbookError, match=r"9 tokens exceed max_seq_len \(8\)"):
        notebook_003.TwoLayerTransformer(8, 16, 4, 32, 8)(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TextbookError, match=r"block_size \(8\)"):
        notebook_004.SimpleLanguageModel(8, 8, 16, 2)(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TextbookError, match="heads_num · head_size"):
        notebook_000.MultiHeadAttention({**config_000(sizes(random.Random(0))), "head_size": 99})
