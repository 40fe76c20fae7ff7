"""Why Q, K and V are three projections, as what-ifs on a model and a text (playground.lens.walkthrough.whatifs):
W_K tied to W_Q makes a head's scores symmetric; V = X makes it copy its normed input into the stream; each changes
the loss on the text, and neither touches the weights."""

from __future__ import annotations

import pytest
import torch
from test_circuits import IDS, notebook_model, tiny

from playground.lens.walkthrough import HeadChangeError, tied_query_key, value_is_input
from playground.lens.walkthrough.whatifs import _changed_forward


def _mask(T: int) -> torch.Tensor:
    return torch.ones(T, T, dtype=torch.bool).tril()


@pytest.mark.parametrize("use_bias", [False, True], ids=["no-bias", "bias"])
def test_the_forward_pass_without_a_change_is_the_models(use_bias):
    model = tiny(use_bias)
    with torch.no_grad():
        expected = model(IDS.view(1, -1), return_attention=True)
        logits, _, weights, _ = _changed_forward(model, IDS.view(1, -1), 1, 2, None)
    torch.testing.assert_close(logits, expected.logits[0])
    torch.testing.assert_close(weights, expected.attention_weights[1][0, 2])


@pytest.mark.parametrize("use_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("layer", [0, 1])
def test_one_matrix_for_query_and_key_makes_the_scores_symmetric(use_bias, layer):
    model = tiny(use_bias)
    before = {name: p.clone() for name, p in model.state_dict().items()}
    changed = tied_query_key(model, IDS, layer, 1)
    torch.testing.assert_close(changed.scores, changed.scores.T)  # score(i, j) = score(j, i), before the mask
    T = IDS.numel()
    assert not torch.allclose(changed.weights, changed.original_weights, atol=1e-3)
    assert bool((changed.weights[~_mask(T)] == 0).all())
    torch.testing.assert_close(changed.weights.sum(1), torch.ones(T))
    assert abs(changed.loss_change) > 1e-3
    assert all(torch.equal(p, before[name]) for name, p in model.state_dict().items())  # the weights untouched


@pytest.mark.parametrize("use_bias", [False, True], ids=["no-bias", "bias"])
@pytest.mark.parametrize("layer", [0, 1])
def test_value_as_the_input_copies_the_attended_normed_input_into_the_stream(use_bias, layer):
    model = tiny(use_bias)
    with torch.no_grad():
        normed = model(IDS.view(1, -1), return_attention=True).attention_inputs[layer][0]  # (T, C): what it reads
    changed = value_is_input(model, IDS, layer, 3)
    torch.testing.assert_close(changed.weights, changed.original_weights)  # where it looks is unchanged
    torch.testing.assert_close(changed.written, changed.weights @ normed)  # what it writes is a copy of what it read
    assert abs(changed.loss_change) > 1e-3


def test_on_the_shipped_model_both_changes_cost_loss_and_say_so():
    from conftest import REPO

    from playground.checkpoints.store import load_checkpoint

    loaded = load_checkpoint("shakespeare-char", directory=REPO / "weights")
    ids = loaded.tokenizer.encode("ROMEO:\nWherefore art thou Romeo? Deny thy father")
    tied = tied_query_key(loaded.model, ids, 0, 0)
    copied = value_is_input(loaded.model, ids, 0, 0)
    assert tied.loss_change > 0.01 and copied.loss_change > 0.01
    assert tied.original_loss == pytest.approx(copied.original_loss)
    assert tied.summary.startswith("L0 H0 with one matrix for its query and key") and "worse" in tied.summary


def test_bad_requests_say_what_is_wrong():
    model = tiny(True)
    with pytest.raises(HeadChangeError, match="layer 2, head 0 is not in this model"):
        tied_query_key(model, IDS, 2, 0)
    with pytest.raises(HeadChangeError, match="2 to 16 tokens"):
        value_is_input(model, IDS[:1], 0, 0)
    with pytest.raises(HeadChangeError, match="notebook 004"):
        tied_query_key(notebook_model(), IDS, 0, 0)
