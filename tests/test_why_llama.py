"""The Why tab's handlers on a Llama-family checkpoint (a tiny LlamaForCausalLM, 4 query heads over 2 K/V heads, saved
by transformers into the weights folder): every view of the GPT checkpoints (the parts, the chain, the circuits, the
knock-outs and the ranking), the logit's parts summing to transformers' logit, and the QK table drawn at the
distance the learner picks, with the sentence that says why it needs one; the box is shown for this family only."""

from __future__ import annotations

import re

import pytest
import torch
from test_llama import make_tiny

from playground.config import Limits
from playground.lens import circuits
from playground.ui import why_reading, why_sentences, why_tab
from playground.ui.common import AppContext

TEXT = "To be, or not to be, that is"


@pytest.fixture(scope="module")
def llama(tiny_weights, tmp_path_factory):
    """(context, transformers' model, its tokenizer): the weights folder holds the shipped GPT and "tiny-llama"."""
    weights = tmp_path_factory.mktemp("why-llama")
    (weights / "shakespeare-char").symlink_to(tiny_weights / "shakespeare-char")
    reference, tokenizer, _ = make_tiny(weights / "tiny-llama", "llama-4over2")
    return AppContext(limits=Limits(), weights=weights), reference, tokenizer


def explain(ctx, distance=None, position=-1, knocked=()):
    return why_tab.explain(ctx, "tiny-llama", TEXT, position, "", why_tab.STRONGEST, list(knocked),
                           "mean over the text", why_reading.ALONE, distance)


def test_the_why_tab_explains_a_llama_with_every_view(llama):
    ctx, reference, tokenizer = llama
    view = explain(ctx, knocked=["L1 H2"])
    ids = tokenizer.encode(TEXT)
    with torch.no_grad():
        logits = reference(ids[None]).logits[0, -1]
    numbers = view.numbers
    assert numbers["target"]["token_id"] == int(logits.argmax())
    assert numbers["logit"] == pytest.approx(float(logits.max()), abs=1e-4)  # transformers' own logit
    names = list(view.parts.data[0].customdata)
    assert names[0] == "token embedding" and "position embedding" not in names and "L1 H3" in names
    assert sum(view.parts.data[0].x) == pytest.approx(float(logits.max()), abs=1e-4)  # the bars sum to it
    assert "at position" in view.head_heading and view.chain is not None
    assert "RMSNorm" in view.circuits_heading and "K/V head it shares" in view.circuits_heading
    assert "Knocked out: L1 H2" in view.knock_heading
    assert len(view.ranking.data[0].x) == 2 * 4  # every head ranked


def test_the_qk_table_is_drawn_at_the_distance_the_learner_picks(llama):
    ctx, _, tokenizer = llama
    near, far = explain(ctx), explain(ctx, distance=3)
    assert ", key 1 back" in near.qk.layout.title.text and ", key 3 back" in far.qk.layout.title.text
    assert "key at the query" in explain(ctx, distance=0).qk.layout.title.text
    head = why_tab.head_on_screen(far.head_heading)[:2]
    loaded = ctx.checkpoint("tiny-llama")
    subset = why_reading._circuit_tokens(loaded.config.vocabulary_size, tokenizer.encode(TEXT))
    table = circuits.qk_circuit(loaded.model, *head, subset, distance=3)
    torch.testing.assert_close(torch.tensor(far.qk.data[0].z).float(), table, atol=1e-4, rtol=1e-3)  # 4 digits
    assert not torch.allclose(torch.tensor(near.qk.data[0].z).float(), torch.tensor(far.qk.data[0].z).float())
    with pytest.raises(ValueError, match="distance 64 is outside 0 to 63"):
        explain(ctx, distance=64)


def test_the_distance_box_is_shown_for_a_rotary_model_only_with_its_reason(llama):
    ctx, _, _ = llama
    assert why_tab.controls(ctx, "tiny-llama")[2].visible is True
    assert why_tab.controls(ctx, "shakespeare-char")[2].visible is False
    assert "how far back the key is" in why_tab.DISTANCE_INFO
    assert "how far back the key is" in why_sentences.ROTARY_MORE
    shipped = why_tab.explain(ctx, "shakespeare-char", TEXT, -1, "", why_tab.STRONGEST, [], "mean over the text",
                              why_reading.ALONE, 5)  # a GPT's tables have no distance: the box's number is not read
    assert "back" not in shipped.qk.layout.title.text and "RMSNorm" not in shipped.circuits_heading


def test_a_new_distance_sends_the_circuits_again_under_a_new_key(llama):
    ctx, _, _ = llama
    settings = ("tiny-llama", TEXT, -1, "", why_tab.STRONGEST, [], "mean over the text")
    *_, shown = why_tab.why_page(ctx, *settings, {}, why_reading.ALONE, 1)
    decks = why_tab.why_page(ctx, *settings, shown, why_reading.ALONE, 1)
    assert decks[2] is not None and not isinstance(decks[2], str)  # the same distance: held, not sent again
    again = why_tab.why_page(ctx, *settings, shown, why_reading.ALONE, 2)
    assert isinstance(again[2], str) and again[-1]["circuits"] != shown["circuits"]


def test_the_look_for_line_says_which_distance_its_qk_rank_reads(llama):
    """A rotary head's QK table holds one distance: the line names it, and where the key the head looked at most
    sits at another, how far back that key is."""
    ctx, _, _ = llama
    for distance in (0, 1, 3):
        heading = explain(ctx, distance=distance).circuits_heading
        assert f"` at distance {distance}" in heading
        back = re.search(r"this key sits (\d+) back: set distance (\d+)", heading)
        if back:
            assert back.group(1) == back.group(2) != str(distance)
    assert "at distance" not in why_tab.explain(ctx, "shakespeare-char", TEXT, -1, "", why_tab.STRONGEST, [],
                                                "mean over the text", why_reading.ALONE, None).circuits_heading
