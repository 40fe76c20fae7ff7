"""The views of "why this score" and of the Q, K and V what-ifs (playground.ui.score_views), on the shipped model:
the bars add up to the score the model gives, the key is the one the query weights most, the sentence names the pair
that did most and what the earlier heads gave, a click's target is a head in the picture; the tied head's scores are
symmetric and the loss on the text is the model's own; bad input is a clear message."""

from __future__ import annotations

import math
import re

import pytest
import torch
from conftest import REPO

from playground.config import Limits
from playground.lens.score_attribution import score_attribution
from playground.lens.walkthrough.whatifs import change_head
from playground.ui import score_views
from playground.ui.common import AppContext

TEXT = "And sails upon the bosom of the air.\n\nJULIET:\nO Romeo, Romeo! wherefore art thou Romeo"


@pytest.fixture(scope="module")
def shipped() -> AppContext:
    return AppContext(limits=Limits(), weights=REPO / "weights")


def _bars(figure) -> tuple[list[float], list[str], list[str]]:
    trace = figure.data[0]
    return [float(x) for x in trace.x], [cell[0] for cell in trace.customdata], [cell[1] for cell in trace.customdata]


def test_the_bars_add_up_to_the_models_score_of_the_key_the_query_weights_most(shipped):
    loaded = shipped.checkpoint("shakespeare-char")
    ids = loaded.tokenizer.encode(TEXT)
    T = ids.numel()
    view = score_views.why_score(shipped, "shakespeare-char", TEXT, 3, 1, -1)
    with torch.no_grad():
        weights = loaded.model(ids.view(1, -1), return_attention=True).attention_weights[3][0, 1, T - 1]
    key = int(weights.argmax())
    assert (view.numbers["query"], view.numbers["key"]) == (T - 1, key)
    expected = score_attribution(loaded.model, ids, 3, 1, T - 1, key)
    values, labels, where = _bars(view.figure)
    assert len(values) == score_views.SCORE_PAIRS + 1 and labels[-1].startswith("every other pair (")
    assert sum(values) == pytest.approx(expected.score, abs=1e-4)
    assert view.numbers["score"] == pytest.approx(expected.score, abs=1e-6)
    # the title says the score, and that it is the bars' sum
    assert f"{expected.score:+.2f}, the bars' sum" in view.figure.layout.title.text
    top = expected.largest_pairs(1)[0]
    assert labels[0] == f"key: {top.key_part} × query: {top.query_part}"
    assert values[0] == pytest.approx(top.value, abs=1e-6)
    # every head named in the picture is where a click goes: an earlier layer's, at the key's or the query's position
    heads = [w for w in where if w]
    assert heads and set(heads) == set(view.heads)
    for w in heads:
        name, position = w.split("@")
        assert int(name.split()[0][1:]) < 3 and int(position) in (key, T - 1)
    said = re.search(r"The (\d+) pairs add up to the score: ([+-]\d+\.\d+)", view.text)
    assert int(said.group(1)) == expected.values.numel()
    assert float(said.group(2)) == pytest.approx(math.fsum(values), abs=1e-4)
    assert "**Why more than one layer:**" in view.text and "earlier head" in view.text
    assert "**L3 H1 looked at" in view.text and "Look for:" in view.text


def test_a_layer_0_head_reads_the_embeddings_alone_and_says_so(shipped):
    view = score_views.why_score(shipped, "shakespeare-char", "To be, or not to be", 0, 2, 10, 4)
    values, labels, where = _bars(view.figure)
    assert not any(where) and view.heads == []
    assert view.numbers["key"] == 4 and view.numbers["query"] == 10
    assert "a layer-0 head reads the embeddings alone" in view.text


def test_the_why_tabs_view_reads_the_head_on_screen(shipped):
    figure, text = score_views.why_score_on_screen(shipped, "shakespeare-char", TEXT,
                                                   "### L2 H3 at position 30 · looked most at ...", -1)
    assert figure.layout.title.text.startswith("Why L2 H3 scored")
    assert "@30 (weight" in text
    with pytest.raises(ValueError, match="No head is on screen yet"):
        score_views.why_score_on_screen(shipped, "shakespeare-char", TEXT, "", -1)


@pytest.mark.parametrize(("layer", "head", "query", "key", "words"), [
    (4, 0, -1, -1, "layer 4, head 0 is not in this model: it has 4 layers of 4 heads"),
    (1, 0, 99, -1, "query position 99 is outside the text's 19 tokens"),
    (1, 0, 3, 7, "key position 7 is after the query \\(3\\)"),
])
def test_bad_input_is_a_clear_message(shipped, layer, head, query, key, words):
    with pytest.raises(ValueError, match=words):
        score_views.why_score(shipped, "shakespeare-char", "To be, or not to be", layer, head, query, key)


def test_the_attention_tab_asks_for_a_checkpoint(shipped):
    with pytest.raises(ValueError, match='choose "trained checkpoint"'):
        score_views.attention_score(shipped, "textbook preset", "shakespeare-char", "To be", 0, 0, -1, -1)
    with pytest.raises(ValueError, match='choose "trained checkpoint"'):
        score_views.attention_change(shipped, "random weights", "shakespeare-char", "To be", 0, 0,
                                     next(iter(score_views.CHANGE_LABELS)))


def test_tying_w_k_to_w_q_makes_the_scores_symmetric_and_the_head_look_at_itself(shipped):
    """L0 H2 is the shipped model's strongest previous-character head; tied, a query is its own key and the head
    looks at the token itself. The loss is the model's own with the change (head by head it moves either way: one
    head of 16 on a memorised line)."""
    tie, copy = score_views.CHANGE_LABELS
    view = score_views.head_change_view(shipped, "shakespeare-char", TEXT, 0, 2, tie)
    loaded = shipped.checkpoint("shakespeare-char")
    expected = change_head(loaded.model, loaded.tokenizer.encode(TEXT), 0, 2, "tied query and key")
    assert view.numbers["asymmetry"] < 1e-4
    (self_before, self_after), (previous_before, previous_after) = (view.numbers["self_weight"],
                                                                    view.numbers["previous_weight"])
    assert previous_before > 0.8 and self_before < 0.2 and self_after > 0.9 and previous_after < 0.1
    assert f"itself {self_before:.2f} → {self_after:.2f}" in view.text
    assert view.numbers["loss"] == pytest.approx(expected.loss)
    assert f"{expected.original_loss:.3f} → {expected.loss:.3f}" in view.text
    assert "symmetric" in view.text and "what it offers" in view.text
    assert [a.text for a in view.figure.layout.annotations] == ["intact", "W_K = W_Q"]
    same = score_views.head_change_view(shipped, "shakespeare-char", TEXT, 0, 2, copy)
    torch.testing.assert_close(torch.as_tensor(same.figure.data[0].z), torch.as_tensor(same.figure.data[2].z),
                               equal_nan=True)  # V = X leaves the head's pattern: only what it passes changes
    assert same.numbers["loss"] > same.numbers["original_loss"] + 1  # 0.83 -> 4.74: layer 0 writes a copy
    assert "only what it passes on changed" in same.text and "no longer *what* to take" in same.text
