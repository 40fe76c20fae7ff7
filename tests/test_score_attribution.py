"""playground.lens.score_attribution: one head's score of one key split by where the query and the key came
from in the stream. The parts sum to the model's own score at every layer, head and position (random models with and
without biases, notebook 004's, the shipped model), and the model's score is the one its softmax turns into the
weights it attends with."""

from __future__ import annotations

import pytest
import torch
from test_circuits import IDS, notebook_model, tiny

from playground.lens.circuits import CircuitError
from playground.lens.score_attribution import HeadVisit, ScorePair, parse_head_name, score_attribution, score_parts


def _every_cell_sums_to_the_score(model, ids) -> None:
    for layer in range(model.config.layers_num):
        for head in range(model.config.heads_num):
            parts = score_parts(model, ids, layer, head)
            summed = torch.einsum("itd,jsd->ts", parts.queries, parts.keys).float()  # every pair, every cell
            torch.testing.assert_close(summed, parts.scores, atol=1e-4, rtol=0)


MODELS = {
    "no-bias": lambda: tiny(False),
    "bias": lambda: tiny(True),
    "gpt2-tied": lambda: tiny(True, tie=True),
    "three-layers-bias": lambda: tiny(True, layers=3, seed=8),
    "notebook-004": notebook_model,
}


@pytest.mark.parametrize("kind", MODELS)
def test_the_parts_sum_to_the_score_at_every_layer_head_and_position(kind):
    _every_cell_sums_to_the_score(MODELS[kind](), IDS)


@pytest.mark.parametrize("kind", MODELS)
def test_the_score_is_the_one_the_models_softmax_turns_into_its_weights(kind):
    model = MODELS[kind]()
    layer = model.config.layers_num - 1
    with torch.no_grad():
        weights = model(IDS.view(1, -1), return_attention=True).attention_weights[layer][0]  # (h, T, T)
    T = IDS.numel()
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for head in range(model.config.heads_num):
        every = score_parts(model, IDS, layer, head)
        scores = every.scores
        torch.testing.assert_close(torch.softmax(scores.masked_fill(~mask, float("-inf")), -1), weights[head],
                                   atol=1e-5, rtol=0)
        one = score_attribution(model, IDS, layer, head, 9, 4)
        assert float(one.values.sum()) == pytest.approx(one.score, abs=1e-4)
        assert one.score == pytest.approx(float(scores[9, 4]), abs=1e-6)
        torch.testing.assert_close(one.values, every.pair(9, 4).float())  # two positions' parts, as every one's


def test_the_parts_are_the_embeddings_each_earlier_head_and_mlp_and_the_layers_own_biases():
    model = tiny(True, layers=3, seed=8)
    first = score_attribution(model, IDS, 0, 1, 5, 2)
    assert first.query_names == ["token embedding", "position embedding", "L0 query bias"]
    assert first.key_names == ["token embedding", "position embedding", "L0 key bias"]
    last = score_attribution(model, IDS, 2, 1, 5, 2)
    heads = [f"L{layer} H{head}" for layer in range(2) for head in range(4)]
    assert [name for name in last.query_names if parse_head_name(name)] == heads
    assert {"L0 MLP", "L1 MLP", "L0 attention bias", "L1 attention bias"} <= set(last.key_names)
    assert last.values.shape == (len(last.query_names), len(last.key_names))
    torch.testing.assert_close(last.query_totals.sum(), last.key_totals.sum())
    without = score_attribution(tiny(False), IDS, 1, 0, 5, 2)  # no biases anywhere: no bias part
    assert not any("bias" in name for name in without.query_names + without.key_names)


def test_a_later_heads_score_is_moved_by_what_earlier_heads_wrote():
    model = tiny(True, layers=3, seed=8)
    parts = score_attribution(model, IDS, 2, 0, 10, 6)
    through_heads = sum(float(value) for name, value in zip(parts.key_names, parts.key_totals)
                        if parse_head_name(name))
    assert abs(through_heads) > 0.05  # composition: the earlier heads' writes into the key carry part of the score


def test_the_largest_pairs_come_first_and_name_the_head_to_go_to():
    model = tiny(True, layers=3, seed=8)
    parts = score_attribution(model, IDS, 2, 0, 10, 6)
    pairs = parts.largest_pairs(len(parts.query_names) * len(parts.key_names))
    sizes = [abs(pair.value) for pair in pairs]
    assert sizes == sorted(sizes, reverse=True)
    assert sum(pair.value for pair in pairs) == pytest.approx(parts.score, abs=1e-4)
    assert ScorePair("token embedding", "L1 H3", 0.5).label == "token embedding -> L1 H3"
    assert parts.head_to_visit(ScorePair("L0 H2", "L1 H3", 0.5)) == HeadVisit(1, 3, 6, "key")
    assert parts.head_to_visit(ScorePair("L0 H2", "L1 MLP", 0.5)) == HeadVisit(0, 2, 10, "query")
    assert parts.head_to_visit(ScorePair("token embedding", "L1 MLP", 0.5)) is None
    assert parse_head_name("L12 H3") == (12, 3) and parse_head_name("L1 MLP") is None


def test_bad_requests_say_what_is_wrong():
    model = tiny(True)
    with pytest.raises(CircuitError, match="layer 2 is out of range"):
        score_attribution(model, IDS, 2, 0, 1, 0)
    with pytest.raises(CircuitError, match="head 4 is out of range"):
        score_attribution(model, IDS, 0, 4, 1, 0)
    with pytest.raises(CircuitError, match="position 11 is outside"):
        score_attribution(model, IDS, 0, 0, 11, 0)
    with pytest.raises(CircuitError, match="reads at most 16"):
        score_attribution(model, torch.zeros(17, dtype=torch.long), 0, 0, 0, 0)


def test_on_the_shipped_model_the_parts_sum_to_the_score_everywhere():
    from conftest import REPO

    from playground.checkpoints.store import load_checkpoint

    loaded = load_checkpoint("shakespeare-char", directory=REPO / "weights")
    _every_cell_sums_to_the_score(loaded.model, loaded.tokenizer.encode("ROMEO:\nWherefore art thou"))
