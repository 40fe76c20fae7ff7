"""The Why tab's handler on a small trained checkpoint: the attribution sums to the logit on screen, the chosen
head's reading, its circuits in words, knock-outs and the ranking; refusals in words."""

from __future__ import annotations

import base64
import dataclasses
import functools
import json
import re
from collections import Counter

import gradio as gr
import numpy as np
import plotly.graph_objects as go
import pytest
import torch
from text_support import MOST_WORDS, visible_words

from playground.config import Limits
from playground.lens import circuits, head_scores
from playground.text.tokenizer import escape_text, labels
from playground.ui import chain_plots, plots, why_decks, why_page, why_reading, why_sentences, why_tab, why_views
from playground.ui.common import AppContext, friendly

TEXT = "To be, or not to be: that is"  # 28 characters: the small checkpoint reads 32


@pytest.fixture(scope="module")
def ctx(tiny_weights):
    return AppContext(limits=Limits(), weights=tiny_weights)


def save_toy_checkpoint(weights, name: str) -> None:  # the browser test's too
    """The toy preset's model (notebook 004's, 2 sliced heads, context 8) trained a few steps on "hello world"."""
    import torch

    from playground.checkpoints.store import save_checkpoint
    from playground.config import ModelConfig
    from playground.model.families import build_model
    from playground.text.tokenizer import CharTokenizer
    from playground.training.presets import TRAIN_PRESETS

    tokenizer = CharTokenizer.train_from_text("hello world")
    torch.manual_seed(0)
    model = build_model(ModelConfig(vocabulary_size=8, **TRAIN_PRESETS["toy"].model.to_dict()))
    ids = tokenizer.encode("hello world")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(60):
        loss = model(ids[:8].view(1, -1), ids[1:9].view(1, -1)).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    save_checkpoint(model.eval(), tokenizer, name, directory=weights)


@pytest.fixture(scope="module")
def kinds(tiny_weights, tmp_path_factory):
    """The three kinds of checkpoint the Why tab explains: (context, checkpoint, text) by kind."""
    from test_gpt2 import make_tiny_gpt2

    weights = tmp_path_factory.mktemp("why-kinds")
    for name in ("shakespeare-char",):
        (weights / name).symlink_to(tiny_weights / name)
    save_toy_checkpoint(weights, "why-toy")
    (weights / "tiny-gpt2").mkdir()
    for name, data in make_tiny_gpt2(tmp_path_factory.mktemp("gpt2"))[2].items():
        (weights / "tiny-gpt2" / name).write_bytes(data)
    ctx = AppContext(limits=Limits(), weights=weights)
    return {"shipped": (ctx, "shakespeare-char", TEXT), "toy": (ctx, "why-toy", "hello wo"),
            "gpt2": (ctx, "tiny-gpt2", "To be, or not to be, that is")}


def explain(ctx, text=TEXT, position=-1, target="", head=why_tab.STRONGEST, knocked=(), mode="mean over the text",
            split=why_reading.ALONE):
    """The view through /why's handler; the logit-alone split unless told (test_against_the_runner_up_* read the
    default, the guess against the runner-up)."""
    return why_tab.explain(ctx, "shakespeare-char", text, position, target, head, list(knocked), mode, split)


def read(ctx, *arguments, **settings):
    """why_reading.reading_for's (reading, position), admitted and then given back: the tests look at it afterwards."""
    with why_reading.reading_for(ctx, *arguments, **settings) as answer:
        return answer


def test_every_handler_makes_its_tables_and_knock_outs_while_the_reading_is_admitted(ctx, monkeypatch):
    """The view's price counts a head's QK and OV tables and the knock-outs one tick away (why_reading._cost), but they
    were made after the reservation had ended, unpriced: a visitor's circuits ran beside other requests' full
    budget. Each table and each knock-out pass must be made while the budget holds the reading's price."""
    held = []
    for name in ("qk_circuit", "ov_circuit", "knock_outs"):
        def spy(*arguments, made=getattr(circuits, name), **settings):
            held.append((made.__name__, ctx.budget.reserved))
            return made(*arguments, **settings)
        monkeypatch.setattr(circuits, name, spy)
    page = why_tab.ReadingCache()  # kept across the handlers, as the app keeps it
    explain(ctx, head="L1 H0")
    why_tab.why_page(ctx, "shakespeare-char", TEXT, 3, "", "L0 H1", [], "zero", memo=page)
    why_tab.why_deck(ctx, "shakespeare-char", TEXT, "", memo=page)
    why_tab.why_knock(ctx, "shakespeare-char", TEXT, "", ["L0 H0"], "zero", memo=page)
    assert {made for made, _ in held} == {"qk_circuit", "ov_circuit", "knock_outs"}
    assert all(reserved > 0 for _, reserved in held), held
    assert ctx.budget.reserved == 0  # and given back after


def test_the_bars_sum_to_the_logit_the_heading_quotes(ctx):
    view = explain(ctx)
    logit = float(re.search(r"its logit (-?[\d.]+) is the sum", view.heading).group(1))
    bars = [trace for trace in view.parts.data if trace.type == "bar"][0]
    assert bars.orientation == "h"  # one named row a part: readable on a phone
    assert sum(bars.x) == pytest.approx(logit, abs=2e-3)  # the heading rounds to 3 places
    loaded = ctx.checkpoint("shakespeare-char")
    assert len(bars.x) == len(circuits.logit_attribution(loaded.model, loaded.tokenizer.encode(TEXT), -1, 0).names)
    for figure in (view.parts, view.chain, view.qk, view.ov, view.ranking):
        json.loads(figure.to_json())
    assert view.heading.count("**Look for:**") == 1 and "**Look for:**" in view.knock_heading


def test_the_apis_numbers_are_the_parts_and_the_chain_of_an_independent_pass(ctx):
    """/why answered the two bar charts the page's chain replaced: an API client now reads what the page shows, as
    numbers. The parts are logit_attribution's own (a pass of their own) and sum to the logit; each key's push is its
    weight x its write, the pushes sum to the head's part (1e-4), the head's part and the rest make the logit; the
    probabilities are softmax's, and the chain figure is the page's."""
    loaded = ctx.checkpoint("shakespeare-char")
    ids = loaded.tokenizer.encode(TEXT)
    with torch.no_grad():
        probabilities = torch.softmax(loaded.model(ids.view(1, -1)).logits[0, 5].float(), dim=-1)
    target = loaded.tokenizer.encode("e")[0].item()
    view = explain(ctx, position=5, target="e", head="L1 H0")
    numbers = json.loads(json.dumps(view.numbers))  # plain JSON, as a client gets it
    parts = circuits.logit_attribution(loaded.model, ids, 5, target)
    assert numbers["position"] == 5 and numbers["target"] == {"character": "e", "token_id": target}
    assert [part["name"] for part in numbers["parts"]] == parts.names
    assert [part["kind"] for part in numbers["parts"]] == parts.kinds
    assert [part["value"] for part in numbers["parts"]] == pytest.approx(parts.values.tolist(), abs=1e-5)
    assert sum(part["value"] for part in numbers["parts"]) == pytest.approx(numbers["logit"], abs=1e-4)
    assert numbers["logit"] == pytest.approx(parts.logit, abs=1e-5)
    head = numbers["head"]
    assert head["name"] == "L1 H0" and head["part"] == pytest.approx(parts.head(1, 0), abs=1e-6)
    keys = head["keys"]
    assert [key["position"] for key in keys] == list(range(6))
    assert "".join(key["character"] for key in keys) == TEXT[:6]
    assert [key["token_id"] for key in keys] == ids[:6].tolist()
    assert sum(key["weight"] for key in keys) == pytest.approx(1, abs=1e-5)
    assert all(key["push"] == pytest.approx(key["weight"] * key["write"], rel=1e-6, abs=1e-9) for key in keys)
    assert sum(key["push"] for key in keys) == pytest.approx(head["part"], abs=1e-4)
    assert head["part"] + head["others"] == pytest.approx(numbers["logit"], abs=1e-4)
    assert numbers["probability"] == pytest.approx(float(probabilities[target]), abs=1e-6)
    best_other = max((i for i in range(probabilities.numel()) if i != target), key=lambda i: probabilities[i])
    assert numbers["runner_up"]["token_id"] == best_other
    assert numbers["runner_up"]["probability"] == pytest.approx(float(probabilities[best_other]), abs=1e-6)
    assert numbers["guessed"] == (int(probabilities.argmax()) == target)
    # the figure is the page's chain: its pushes are the numbers', rounded to 4 digits
    assert list(view.chain.data[2].y) == pytest.approx([key["push"] for key in keys], rel=1e-3, abs=1e-6)
    assert view.chain.layout.title.text.replace("<br>", " ") == "How L1 H0's pattern at position 5 became 'e'"


def test_the_strongest_head_is_the_one_with_the_largest_part(ctx):
    loaded = ctx.checkpoint("shakespeare-char")
    ids = loaded.tokenizer.encode(TEXT)
    with torch.no_grad():
        guess = int(loaded.model(ids.view(1, -1)).logits[0, -1].argmax())
    parts = circuits.logit_attribution(loaded.model, ids, -1, guess)
    heads = [(name, value) for name, value, kind in zip(parts.names, parts.values.tolist(), parts.kinds)
             if kind == "head"]
    strongest = max(heads, key=lambda item: abs(item[1]))[0]  # the longest bar, up or down
    view = explain(ctx)
    assert view.head_heading.startswith(f"### {strongest} at position {len(TEXT) - 1}")
    assert f"What {strongest} does over your text" in view.circuits_heading
    assert view.circuits_heading.count(" looks for `") == why_sentences.PAIRS
    pushes = [trace for trace in view.chain.data if trace.type == "bar"][2]
    assert len(pushes.y) == len(view.numbers["head"]["keys"]) == len(TEXT)  # every read position, no future
    assert view.numbers["head"]["name"] == strongest


def test_a_chosen_target_and_head_and_position(ctx):
    view = explain(ctx, position=5, target="e", head="L1 H0")
    assert view.heading.startswith("### Why `e` after `,` (position 5)")
    assert view.head_heading.startswith("### L1 H0 at position 5")
    # past the first layer, the tables say they are the direct path
    for kind, figure in (("QK", view.qk), ("OV", view.ov)):
        assert figure.layout.title.text.replace("<br>", " ").startswith(f"{kind} of L1 H0 (direct path: embeddings "
                                                                        "only)")
    pushes = [trace for trace in view.chain.data if trace.type == "bar"][2]
    assert len(pushes.y) == len(view.numbers["head"]["keys"]) == 6


def test_knocking_out_heads_reports_loss_and_prediction_and_ranks_every_head(ctx):
    view = explain(ctx, knocked=["L0 H0", "L1 H1"], mode="zero")
    assert "| loss on the text |" in view.knock_heading and "### Knocked out: L0 H0, L1 H1" in view.knock_heading
    ranking = [trace for trace in view.ranking.data if trace.type == "bar"][0]
    assert len(ranking.y) == 4  # 2 layers x 2 heads
    assert "Most needed: L" in view.knock_heading


@pytest.mark.parametrize(("changes", "message"), [
    ({"text": ""}, "the text is empty"),
    ({"text": "x" * 20 + "∑"}, "does not know; the first is '∑' at 20"),
    ({"position": 99}, "position 99 is outside the text's 28 tokens"),
    ({"target": "∑"}, "not in this model's vocabulary"),
    ({"target": "ab"}, "is 2 tokens"),
    ({"head": "L7 H0"}, "not one of this model's heads"),
    ({"knocked": ["L0 H9"]}, "not one of this model's heads"),
    ({"mode": "half"}, "knock-out"),
    ({"split": "both"}, "split"),
    ({"target": "\\q"}, "\\n or ⏎ a newline, ␣ a space"),
])
def test_bad_input_is_a_clear_gradio_error(ctx, changes, message):
    handler = functools.partial(friendly(why_tab.explain), ctx)
    args = dict(text=TEXT, position=-1, target="", head=why_tab.STRONGEST, knocked=[], mode="zero",
                split=why_tab.VERSUS) | changes
    with pytest.raises(gr.Error, match="(?i)" + re.escape(message)):
        handler("shakespeare-char", args["text"], args["position"], args["target"], args["head"], args["knocked"],
                args["mode"], args["split"])


@pytest.mark.parametrize(("typed", "character"), [("\\n", "\n"), ("⏎", "\n"), ("␣", " "), ("\\t", "\t"),
                                                  ("\\x07", "\x07"), ("\\u200d", "\u200d"), ("e", "e"),
                                                  ("\\", "\\"), ("\\xzz", "\\xzz")])
def test_a_target_is_read_with_the_escapes_the_page_shows(typed, character):
    """A stranger could not set the target to a newline: the box is one line and "\\n" was refused. The page shows
    invisible characters as tokenizer.escape_char writes them; read_character reads them back (what it shows, typed,
    is what it means)."""
    assert why_reading.read_character(typed) == character
    if character.isprintable() and len(character) == 1 and character not in "\\":
        assert why_reading.read_character(why_reading.escape_text(character)) == character


def test_a_newline_target_typed_as_the_page_shows_it(ctx):
    text = "To be,\nor not"
    typed = explain(ctx, text=text, position=5, target="\\n").numbers
    assert typed["target"]["character"] == "\n"
    assert explain(ctx, text=text, position=5, target="⏎").numbers == typed


def test_against_the_runner_up_the_bars_split_the_logit_difference_and_name_the_head_that_pushed_it(ctx):
    """Issue 29's stranger: the head named for a guess pushed the runner-up harder (a logit alone decides nothing:
    softmax ignores a shift). By default the bars split logit(guess) - logit(runner-up): they sum to the model's own
    difference (1e-4), the heading quotes the two logits and the probabilities, and the head named is the one whose
    part of the difference is largest; the numbers say which split they are."""
    loaded = ctx.checkpoint("shakespeare-char")
    ids = loaded.tokenizer.encode(TEXT)
    with torch.no_grad():
        logits = loaded.model(ids.view(1, -1)).logits[0].float()
    for position in (5, len(TEXT) - 1):
        guess, runner_up = torch.topk(logits[position], 2).indices.tolist()
        difference = float(logits[position, guess] - logits[position, runner_up])
        view = explain(ctx, position=position, split=why_tab.VERSUS)
        numbers = view.numbers
        assert (numbers["split"], numbers["target"]["token_id"], numbers["runner_up"]["token_id"]) == \
            ("versus", guess, runner_up)
        assert sum(part["value"] for part in numbers["parts"]) == pytest.approx(difference, abs=1e-4)
        assert numbers["total"] == pytest.approx(difference, abs=1e-4)
        assert numbers["logit"] == pytest.approx(float(logits[position, guess]), abs=1e-4)
        assert numbers["runner_up"]["logit"] == pytest.approx(float(logits[position, runner_up]), abs=1e-4)
        heads = {part["name"]: part["value"] for part in numbers["parts"] if part["kind"] == "head"}
        strongest = max(heads, key=heads.get)
        assert numbers["head"]["name"] == strongest
        assert sum(key["push"] for key in numbers["head"]["keys"]) == pytest.approx(heads[strongest], abs=1e-4)
        quoted = f"{float(logits[position, guess]):.3f} − {float(logits[position, runner_up]):.3f} = {difference:+.3f}"
        assert quoted in view.heading and "against the runner-up" in view.heading
        assert " − the logit of " in view.parts.layout.title.text
        chain_title = view.chain.layout.title.text.replace("<br>", " ")
        assert "beat" in chain_title or f"({quoted_target(view)} over " in chain_title  # hedged: see below
        alone = explain(ctx, position=position)
        assert alone.numbers["split"] == "alone" and alone.numbers["total"] == pytest.approx(
            float(logits[position, guess]), abs=1e-4)


def quoted_target(view) -> str:
    return f"'{plots._display_label(view.numbers['target']['character'])}'"


def test_the_look_for_line_says_when_no_head_decides(ctx):
    """A stranger found the named head writing 1-2% of the logit while the MLPs wrote most, and nothing said so.
    The line is computed from the bars: the heads together, or the strongest, against the largest other part."""
    said = Counter()
    for split in (why_tab.VERSUS, why_reading.ALONE):
        reading, _ = read(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST, [], "zero", split=split)
        for position, attribution in enumerate(reading.attributions):
            parts = list(zip(attribution.names, attribution.kinds, attribution.values.tolist()))
            heads = sum(value for _, kind, value in parts if kind == "head")
            strongest = max((part for part in parts if part[1] == "head"), key=lambda part: abs(part[2]))
            largest = max((part for part in parts if part[1] != "head"), key=lambda part: abs(part[2]))
            look_for = why_sentences.heading(reading, position).split("\n\n")[1]
            if abs(heads) < why_sentences.QUIET_HEADS * abs(largest[2]):
                said["heads"] += 1
                assert f"the heads together write {heads:+.2f}, {largest[0]} {largest[2]:+.2f}; " \
                       f"all bars sum to {attribution.logit:+.2f};" in look_for
            elif abs(strongest[2]) < why_sentences.QUIET_HEADS * abs(largest[2]):
                said["head"] += 1
                assert f"decides this one:** {strongest[0]} writes {strongest[2]:+.2f}, {largest[0]} " \
                       f"{largest[2]:+.2f}; all bars sum to {attribution.logit:+.2f}." in look_for
            else:  # the head that decides is named, with its part
                said["none"] += 1
                assert "decides" not in look_for
                way = "for" if strongest[2] >= 0 else "against"
                assert f"**{strongest[0]} pushed hardest** {way} `" in look_for
                assert f"`: {strongest[2]:+.2f}." in look_for
    assert said["heads"] + said["head"] > 0 and said["none"] > 0, said


def test_the_pickers_follow_the_checkpoint(ctx):
    head, knocked, distance = why_tab.controls(ctx, "shakespeare-char")
    assert head.choices[0] == (why_page.STRONGEST_SHOWN, why_tab.STRONGEST) and len(head.choices) == 5
    assert [choice[0] for choice in knocked.choices] == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"] and knocked.value == []
    assert distance.visible is False  # learned positions: the QK tables have no distance (test_why_llama's have)
    assert why_tab.controls(ctx, "no-such-run") == (gr.skip(), gr.skip(), gr.skip())


def _merged(base: dict, changes: dict) -> dict:
    """chart_deck's merge in Python: objects key by key, a figure's traces one by one, the rest replaced."""
    if isinstance(base, dict) and isinstance(changes, dict):
        return {**base, **{key: [_merged(b, c) for b, c in zip(base[key], changes[key])] if key == "data" else
                           _merged(base.get(key), value) for key, value in changes.items()}}
    return changes


def test_the_page_is_sent_every_position_once_and_each_is_the_apis_view(ctx):
    """A new position is drawn in the page from the decks: every position's parts and the reading of the head that
    pushed most there, figures as changes to one base, carry the texts and the numbers /why gives there; every
    head's circuits come along (a head chosen in the list is drawn in the page too). The default split, the guess
    against the runner-up."""
    deck, heads_deck, circuits_deck, shown = why_tab.why_deck(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST,
                                                              [], "zero", {})
    sent, heads = json.loads(deck), json.loads(heads_deck)
    assert int(sent["key"].split(":")[0]) == len(TEXT) and sorted(map(int, sent["views"])) == list(range(len(TEXT)))
    assert sent["key"].split(":")[1] == heads["key"]  # one text, one target: the two decks go together
    held = json.loads(circuits_deck)["views"]
    for position in (0, 7, len(TEXT) - 1):
        view = explain(ctx, position=position, mode="zero", split=why_tab.VERSUS)
        assert view.numbers["split"] == "versus"
        texts, figures = sent["views"][str(position)]["texts"], sent["views"][str(position)]["figures"]
        strongest = texts[1]
        assert texts[0] == view.heading and view.head_heading.startswith(f"### {strongest} at position {position}")
        reading = heads["views"][f"{strongest}@{position}"]
        # the second text is the line the circuits' heading takes at this position (the page puts it in, as /why)
        assert reading["texts"][0] == view.head_heading
        assert reading["texts"][1] in view.circuits_heading and reading["texts"][1].startswith(
            f"\n\n**Look for:** outlined cells, position {position}: QK row")
        # the third, the outlines the page lays on the tables: /why's
        assert [[go.layout.Shape(shape) for shape in shapes] for shapes in json.loads(reading["texts"][2])] == \
            [list(view.qk.layout.shapes), list(view.ov.layout.shapes)]
        (parts,) = (_merged(sent["bases"][figure["base"]], figure["changes"]) for figure in figures)
        (chain,) = (_merged(heads["bases"][figure["base"]], figure["changes"]) for figure in reading["figures"])
        assert parts["data"][0]["x"] == pytest.approx(list(view.parts.data[0].x), abs=1e-4)
        # the chain's first panel is where the head looks, its third each key's push: /why's numbers and figure
        keys = view.numbers["head"]["keys"]
        assert chain["data"][0]["y"] == pytest.approx([key["weight"] for key in keys], rel=1e-3, abs=1e-6)
        assert chain["data"][2]["y"] == pytest.approx([key["push"] for key in keys], rel=1e-3, abs=1e-6)
        assert chain["layout"]["title"]["text"] == view.chain.layout.title.text  # hedged or not, as /why's
        assert f"{strongest}'s pat" in chain["layout"]["title"]["text"].replace("<br>", " ") or \
            f"{strongest}'s part at position {position}:" in chain["layout"]["title"]["text"].replace("<br>", " ")
        for axis in ("xaxis", "xaxis3"):
            assert chain["layout"][axis]["ticktext"] == list(view.chain.layout[axis].ticktext)
        assert chain["data"][2]["y"] == list(view.chain.data[2].y)
    assert sorted(held) == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"] and shown["heads"] == list(held)  # every head's
    chosen = explain(ctx, position=3, head="L1 H1", mode="zero")
    reading, _ = read(ctx, "shakespeare-char", TEXT, "", "L1 H1", [], "zero")
    line = why_sentences.in_the_tables(reading, 3, 1, 1)
    assert line and held["L1 H1"]["texts"][0].count(why_tab.HERE) == 1
    assert held["L1 H1"]["texts"][0].replace(why_tab.HERE, line) == chosen.circuits_heading
    bases = json.loads(circuits_deck)["bases"]
    for sent_map, drawn in zip(held["L1 H1"]["figures"], (chosen.qk, chosen.ov)):
        figure = _merged(bases[sent_map["base"]], sent_map["changes"])
        z = figure["data"][0]["z"]
        table = np.frombuffer(base64.b64decode(z["bdata"]), dtype=z["dtype"]).reshape(65, 65)
        np.testing.assert_allclose(table, np.asarray(drawn.data[0].z), rtol=1e-6)  # float32 of the same rounding
        assert figure["data"][0]["x"] == list(drawn.data[0].x) and figure["data"][0]["zmax"] == drawn.data[0].zmax
        assert figure["layout"]["title"]["text"] == drawn.layout.title.text
        assert figure["data"][0]["hovertemplate"] == drawn.data[0].hovertemplate


@pytest.mark.parametrize("split", list(why_tab.SPLITS))
def test_the_other_splits_decks_are_why_decks_own_beside_the_deck_on_screen(ctx, split):
    """The split switch is drawn in the page from why_split_spare's decks: they are why_deck's for the other split,
    kept by the key of the parts deck on screen (the page swaps them in where that is the deck it shows)."""
    args = ("shakespeare-char", TEXT, "", "L1 H0", ["L0 H1"], "zero")
    spare = json.loads(why_tab.why_split_spare(ctx, *args, split))
    other = next(each for each in why_tab.SPLITS if each != split)
    here = json.loads(why_tab.why_deck(ctx, *args, {}, split)[0])
    deck, heads_deck = why_tab.why_deck(ctx, *args, {}, other)[:2]
    assert (spare["around"], spare["label"], spare["from"]) == (here["key"], other, split)
    assert spare["decks"] == {why_tab.DECK: json.loads(deck), why_tab.HEADS_DECK: json.loads(heads_deck)}
    assert spare["decks"][why_tab.DECK]["key"] != here["key"]  # the server's answer for the other split: its own key


def test_a_first_answer_sends_every_heads_reading_at_the_position_and_only_what_the_page_lacks(ctx):
    args = ("shakespeare-char", TEXT, -1, "", "L1 H0", [], "zero")
    deck, heads_deck, circuits_deck, ranking_deck, knock, shown = why_tab.why_page(ctx, *args, shown=None)
    last = len(TEXT) - 1
    assert list(json.loads(deck)["views"]) == [str(last)]
    assert sorted(json.loads(heads_deck)["views"]) == [f"{head}@{last}" for head in ("L0 H0", "L0 H1", "L1 H0",
                                                                                     "L1 H1")]
    assert list(json.loads(circuits_deck)["views"]) == ["L1 H0"] and json.loads(ranking_deck)["views"]["ranking"]
    assert sorted(json.loads(knock)["sets"]) == ["", "L0 H0", "L0 H1", "L1 H0", "L1 H1"]  # every head alone
    deck, _, circuits_deck, ranking_deck, knock, shown = why_tab.why_page(ctx, "shakespeare-char", TEXT, 5, "",
                                                                          "L1 H0", [], "zero", shown)
    assert list(json.loads(deck)["views"]) == ["5"]
    assert circuits_deck == ranking_deck == knock == gr.skip()  # the same head's circuits, ranking, numbers: held
    _, _, circuits_deck, ranking_deck, knock, shown = why_tab.why_page(ctx, "shakespeare-char", TEXT, 5, "", "L0 H1",
                                                                       ["L0 H0", "L1 H1"], "zero", shown)
    assert list(json.loads(circuits_deck)["views"]) == ["L0 H1"] and ranking_deck == gr.skip()
    assert sorted(json.loads(knock)["sets"]) == ["", "L0 H0, L1 H1"]  # the set ticked, with the intact model's
    _, _, circuits_deck, ranking_deck, knock, _ = why_tab.why_page(ctx, "shakespeare-char", TEXT, 5, "", "L0 H1", [],
                                                                   "zero", shown, fresh=True)  # the page lacks them
    assert circuits_deck != gr.skip() and ranking_deck != gr.skip() and knock != gr.skip()


@pytest.mark.parametrize("mode", ["zero", "mean over the text"])
def test_the_knock_out_numbers_the_page_writes_from_are_the_model_under_ablated(ctx, mode):
    """The page writes the knock-out heading itself, from numbers sent with the ranking (every head alone) or asked
    for (a set): each equals the model run under circuits.ablated on the same text (1e-5), and the heading /why
    writes from them quotes them."""
    loaded = ctx.checkpoint("shakespeare-char")
    model, ids = loaded.model, loaded.tokenizer.encode(TEXT)
    *_, knock, _ = why_tab.why_page(ctx, "shakespeare-char", TEXT, -1, "", why_tab.STRONGEST, [], mode, None)
    sent = json.loads(knock)
    both = why_tab.why_knock(ctx, "shakespeare-char", TEXT, "", ["L1 H1", "L0 H0"], mode)
    # with the set, the sets one tick away that the page lacks (a head added; one taken off is a head alone, held)
    assert json.loads(both)["key"] == sent["key"] and sorted(json.loads(both)["sets"]) == [
        "", "L1 H1, L0 H0", "L1 H1, L0 H0, L0 H1", "L1 H1, L0 H0, L1 H0"]
    assert json.loads(both)["near"] == ["L1 H1, L0 H0"]
    sets = {**sent["sets"], **json.loads(both)["sets"]}
    labels = {**sent["labels"], **json.loads(both)["labels"]}
    with torch.no_grad():
        intact = torch.softmax(model(ids.view(1, -1)).logits[0], dim=-1)
    guesses = intact.argmax(-1)
    assert sent["targets"] == [escape_text(loaded.tokenizer.label(int(g))) for g in guesses]
    for names in ("L0 H1", "L1 H0", "L1 H1, L0 H0", "L1 H1, L0 H0, L0 H1"):
        heads = [why_reading.parse_head(name, 2, 2) for name in names.split(", ")]
        with circuits.ablated(model, heads, why_tab.MODES[mode], token_ids=ids), torch.no_grad():
            logits = model(ids.view(1, -1)).logits[0]  # (T, V)
        probabilities = torch.softmax(logits, dim=-1)
        numbers = sets[names]
        assert numbers["loss"] == pytest.approx(float(torch.nn.functional.cross_entropy(logits[:-1], ids[1:])),
                                                abs=1e-5)
        assert numbers["p"] == pytest.approx(probabilities[torch.arange(len(TEXT)), guesses].tolist(), abs=1e-5)
        assert numbers["guesses"] == probabilities.argmax(-1).tolist()
        view = explain(ctx, knocked=names.split(", "), mode=mode)
        guess = labels[str(numbers["guesses"][-1])]
        assert f"| loss on the text | {sets['']['loss']:.3f} | {numbers['loss']:.3f} |" in view.knock_heading
        assert f"| `{labels[str(sets['']['guesses'][-1])]}` | `{guess}` |" in view.knock_heading
    assert sets[""]["p"] == pytest.approx(intact[torch.arange(len(TEXT)), guesses].tolist(), abs=1e-6)


def test_a_knock_out_that_lowers_the_loss_says_the_head_was_hurting(ctx):
    """A learner saw the loss fall without a head and nothing on screen said what that means; another read a fall of a
    few thousandths as a broken head. A change under KNOCK_BARELY is said as none, a fall past it as hurting this text
    though trained to help, a rise as nothing more than the table; the page writes the same (test_browser_why)."""
    loaded = ctx.checkpoint("shakespeare-char")
    ids = loaded.tokenizer.encode(TEXT)
    name = circuits.head_name(*next(iter(why_reading.every_head(loaded.model.config))))
    reading, _ = read(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST, [name], "zero")
    intact, out = reading.knocks[""], reading.knocks[name]
    said = {}
    for change in (-0.5, -0.011, -0.009, 0.0, 0.009, 0.011, 0.5):
        changed = dataclasses.replace(out, loss=intact.loss + change)
        shown = dataclasses.replace(reading, knocks={**reading.knocks, name: changed})
        text = why_sentences.knock_text(shown, 0)
        assert f"### Knocked out: {name}" in text and f"| {change:+.3f} |" in text
        said[change] = ("falls" if why_sentences.KNOCK_FALLS[0] in text else
                        "barely" if why_sentences.KNOCK_BARELY_MOVES[0] in text else "")
    assert said == {-0.5: "falls", -0.011: "falls", -0.009: "barely", 0.0: "barely", 0.009: "barely", 0.011: "",
                    0.5: ""}
    # before any knock-out, the ranking's line names the heads the text is better without past KNOCK_BARELY, and
    # counts those that barely matter (a stranger saw the head that pushed most ranked below zero)
    for mode, named in (("zero", "zero"), ("mean", "mean over the text")):
        effects = circuits.head_effects(loaded.model, ids, mode)
        barely_moves = why_sentences.KNOCK_BARELY
        worse = [circuits.head_name(e.layer, e.head) for e in effects if e.added <= -barely_moves][::-1][:3]
        barely = sum(abs(e.added) < why_sentences.KNOCK_BARELY for e in effects)
        heading = explain(ctx, mode=named).knock_heading
        assert "Choose heads in the **knock out** list" in heading
        assert ("the loss falls: on this text" in heading) == bool(worse)
        if worse:
            assert f"Without {', '.join(worse)}" in heading
        assert (f"{barely} of {len(effects)} move the loss by under {barely_moves} either way" in heading) \
            == bool(barely)


def test_the_pairs_in_words_are_among_the_texts_characters_and_a_downward_head_is_read_by_its_downward_push(ctx):
    """A learner read "t looks for 3" and "Z promotes &" for heads of a model that never saw '3', 'Z' or '&' (their
    random embeddings made the largest entries), and "pushed most: e (weight 0.00, +0.000)" for a head whose part was
    -0.13, pushed down by one character at weight 0.97."""
    text = "the cat sat on the mat"
    for head in ("L0 H0", "L0 H1", "L1 H0", "L1 H1"):
        view = explain(ctx, text=text, head=head)
        quoted = re.findall(r"`([^`]+)` (?:looks for|promotes) `([^`]+)`", view.circuits_heading)
        assert len(quoted) == 2 * why_sentences.PAIRS and {c for pair in quoted for c in pair} <= set(text) | {"␣"}
        part = float(re.search(r"Its part of the logit: ([-+][\d.]+)", view.head_heading).group(1))
        push = float(re.search(r"Pushed it (?:up|down) most: `[^`]+` at \d+ \(weight [\d.]+, ([-+][\d.]+)\)",
                               view.head_heading).group(1))
        assert (push >= 0) == (part >= 0) or push == 0, (head, part, push)
        assert ("Pushed it down most" in view.head_heading) == (push < 0)


def test_the_bars_that_matter_keep_their_labels_where_not_all_fit(ctx):
    """A stranger read "the head read `a` at 19" and found that bar unlabelled between every other character's: where
    the labels are thinned, the tallest weights and the strongest pushes keep theirs."""
    text = "ROMEO:\nBut soft, what light thr"  # "\\n" is a wide label: 21 bars do not all fit at position 20
    for position in (20, -1):
        view = explain(ctx, text, position=position, head="L0 H0")
        weights, shares = (np.array(view.chain.data[panel].y) for panel in (0, 2))
        ticks = list(view.chain.layout.xaxis.tickvals)
        assert len(ticks) < len(weights)  # thinned: the case that hid the tallest bar
        assert int(weights.argmax()) in ticks and int(np.abs(shares).argmax()) in ticks


@pytest.mark.parametrize("split", ["alone", "versus"])
@pytest.mark.parametrize("kind", ["shipped", "toy", "gpt2"])
def test_the_chain_from_a_heads_pattern_to_the_probability_is_the_models_own_numbers(kinds, kind, split):
    """Issue 29: a stranger could not say how a head's pattern becomes the next character. The chain the page draws
    for a head at a position: its weights (the model's attention) x what it writes from each key = the pushes, which
    add up to its bar of the logit split (circuits' own pass, 1e-4 in float32); with every other part, the model's
    logit; softmax, the model's probability of its guess and of the runner-up. Keys keep their own bars (the toy's
    "hello wo" has two l's and two o's). Against the runner-up (the default split), the same with every number of
    the guess's logit minus the runner-up's: the pushes onto the difference sum to the head's bar of it."""
    from torch.testing import assert_close

    ctx, name, text = kinds[kind]
    loaded = ctx.checkpoint(name)
    model, ids = loaded.model, loaded.tokenizer.encode(text)
    T = ids.numel()
    with torch.no_grad():
        logits = model(ids.view(1, -1)).logits[0].float()  # (T, V)
    probabilities = torch.softmax(logits, dim=-1)
    versus = split == "versus"
    reading, _ = read(ctx, name, text, "", why_tab.STRONGEST, [], "zero",
                      split=why_tab.VERSUS if versus else why_reading.ALONE)
    layers, heads = model.config.layers_num, model.config.heads_num
    for position in (0, T // 2, T - 1):
        best = torch.topk(probabilities[position], 2)
        target, rival = best.indices.tolist()
        expected = float(logits[position, target] - (logits[position, rival] if versus else 0))
        parts = circuits.logit_attribution(model, ids, position, target, rival if versus else None)  # its own pass
        for layer in range(layers):
            for head in range(heads):
                chain = reading.chain(position, layer, head)
                assert chain.target == target and chain.guessed
                assert len(chain.labels) == chain.weights.numel() == chain.writes.numel() == position + 1
                assert torch.equal(chain.pushes, chain.weights * chain.writes)  # drawn as computed
                assert float(chain.pushes.sum()) == pytest.approx(parts.head(layer, head), abs=1e-4)
                assert chain.part == pytest.approx(parts.head(layer, head), abs=1e-6)
                assert chain.part + chain.others == pytest.approx(expected, abs=1e-4)
                assert chain.logit == pytest.approx(expected, abs=1e-4)
                assert (chain.target_logit, chain.other_logit) == (
                    pytest.approx(float(logits[position, target]), abs=1e-4),
                    pytest.approx(float(logits[position, rival]), abs=1e-4))
                weights, shares = circuits.key_contributions(model, ids, position, target, layer, head, parts)
                assert_close(chain.weights, weights[:position + 1].float(), atol=1e-6, rtol=1e-5)
                assert_close(chain.pushes, shares[:position + 1].float(), atol=1e-5, rtol=1e-5)
                assert chain.probability == pytest.approx(float(best.values[0]), abs=1e-6)
                assert (chain.other, chain.other_probability) == (int(best.indices[1]),
                                                                  pytest.approx(float(best.values[1]), abs=1e-6))
    layer, head = reading.strongest(T - 1)
    figure = chain_plots.chain_figure(**why_views.chain_arguments(reading, T - 1, layer, head))
    bars = [trace for trace in figure.data if trace.type == "bar"]
    assert [len(trace.y) for trace in bars] == [T, T, T, 2]  # one bar per key read (no x: at 0, 1, ...)
    assert all(trace.x is None for trace in bars[:3])
    shown = [escape_text(label) for label in labels(loaded.tokenizer, ids)]
    assert list(bars[0].customdata) == [plots._display_label(label) for label in shown]
    waterfall = next(trace for trace in figure.data if trace.type == "waterfall")
    assert waterfall.y[0] == pytest.approx(float(reading.chain(T - 1, layer, head).pushes.sum()), abs=1e-4)
    assert sum(waterfall.y[:2]) == pytest.approx(waterfall.y[2], abs=1e-4)  # the head's bar + the rest = the logit


@pytest.mark.parametrize("split", [why_reading.ALONE, why_tab.VERSUS])
def test_the_head_heading_shows_at_most_60_words_before_its_fold(ctx, split):
    """Pictures first: the chain opens with one "Look for:" line and its numbers; the rest sits behind "more". So do
    the parts (with the line saying no head decides), the circuits (a stranger counted 94 words: the strongest pair
    of each table in sight, the rest folded) and the knock-out block (the ranking's words folded)."""
    for head in ("L0 H0", "L1 H1"):
        view = explain(ctx, head=head, split=split)
        heading = view.head_heading
        for text in (view.heading, heading, view.circuits_heading, view.knock_heading):
            assert visible_words(text) <= 60, text
        assert heading.count("**Look for:**") == 1 and "Its part of the logit" in heading
        assert "<details><summary>more</summary>" in view.circuits_heading
        assert "<details><summary>more</summary>" in view.knock_heading and "Most needed" in view.knock_heading


def test_the_knock_out_block_shows_at_most_60_words_before_its_fold_with_heads_knocked_out(ctx):
    """Issue 29: with a head knocked out the block showed about 65 words before its fold (the heads' names in the
    heading, the table's column and the sentence under it). At every position, one head, three and every head knocked
    out, and each set as if it lowered the loss (the longest block: a head can hurt a text): at most 60 words. Past
    four heads the heading names three and counts the rest; the list above it names them all."""
    every = why_reading.head_names(2, 2)
    assert visible_words("a | b |\n|---|:---:|\n| -0.5 | p(`c`) |") == 4
    for knocked in ([every[1]], every[:3], every, [*every, "L1 H1"]):  # 4 heads: one named twice makes five
        reading, _ = read(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST, knocked, "mean over the text")
        names = why_reading.heads_named(reading.knocked_heads)
        intact, out = reading.knocks[""], reading.knocks[names]
        falls = dataclasses.replace(out, loss=intact.loss - 0.5)
        hurting = dataclasses.replace(reading, knocks={**reading.knocks, names: falls})
        for position in range(len(TEXT)):
            for shown in (reading, hurting):
                text = why_sentences.knock_text(shown, position)
                assert visible_words(text) <= 60, text
        assert "the loss falls" in why_sentences.knock_text(hurting, 0)
        heading = why_sentences.knock_text(reading, 0).splitlines()[0]
        assert heading == ("### Knocked out: L0 H0, L0 H1, L1 H0 and 2 more" if len(knocked) == 5
                           else f"### Knocked out: {names}")


def test_a_text_longer_than_the_context_is_read_to_the_context_and_the_heading_says_so(kinds):
    """Issue 29's stranger pasted the Train tab's own advice, "hello world" (11 tokens), into the toy preset
    (context 8): the view refused it, the toast faded and the heading said only that it could not read the text.
    Like the Attention and Model tabs (walkthrough.prepare_text), the view reads the first tokens, and its heading
    keeps the limit, the reason and what to do in sight (within the 60 words)."""
    ctx, checkpoint, _ = kinds["toy"]
    for split in (why_tab.VERSUS, why_reading.ALONE):
        view = why_tab.explain(ctx, checkpoint, "hello world", -1, "", why_tab.STRONGEST, [], "zero", split)
        assert view.numbers["position"] == 7  # -1: the last token read, "o" of "wo"
        assert "**Reads the first 8 of 11 tokens** (this checkpoint's most): shorten the text." \
            in view.heading
        reading, _ = read(ctx, checkpoint, "hello world", "", why_tab.STRONGEST, [], "zero", split=split)
        for position in range(8):  # with the line saying no head decides, where it does
            heading = why_sentences.heading(reading, position)
            assert visible_words(heading) <= 60, heading
    assert "reads at most" not in why_tab.explain(ctx, checkpoint, "hello wo", -1, "").heading
    with pytest.raises(ValueError, match="outside the text's 8 tokens"):
        why_tab.explain(ctx, checkpoint, "hello world", 9, "")
    ctx, checkpoint, _ = kinds["shipped"]  # 40 characters, context 32: the same, in the page's decks too
    reading, _ = read(ctx, checkpoint, "a" * 40, "", why_tab.STRONGEST, [], "zero")
    assert reading.ids.numel() == 32 and reading.dropped == 8
    deck = json.loads(why_decks.position_deck(reading, "k", [31]))
    assert "the first 32 of 40 tokens** (this checkpoint's most)" in json.dumps(deck)


def test_the_chain_title_hedges_where_no_head_decides_by_the_look_for_lines_rule(ctx):
    """Issue 29's stranger read "No head decides this one" above a chain titled "How L3 H2's pattern at position 33
    made 'u' beat 'a'", where L3 H2 wrote +0.066 of +6.708. Where _who_decides speaks for the chain's head, the title
    gives the head's part in numbers; elsewhere it says the pattern made the result. The parts' x axis says what the
    bars are."""
    said = Counter()
    for split in (why_tab.VERSUS, why_reading.ALONE):
        reading, _ = read(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST, [], "zero", split=split)
        for position, parts in enumerate(reading.attributions):
            layer, head = reading.strongest(position)
            title = why_views.chain_changes(reading, position, layer, head)["layout"]["title"]["text"]
            title = title.replace("<br>", " ")
            target = escape_text(reading.tokenizer.label(parts.target_id))
            if why_sentences.who_decides(parts, (layer, head)):
                said["hedged"] += 1
                part = parts.head(layer, head)
                assert (f"L{layer} H{head}'s part at position {position}: {part:+.3f}; "
                        f"all parts: {parts.logit:+.3f}") in title
                assert "How" not in title and "beat" not in title
            else:
                said["made"] += 1
                assert title.startswith(f"How L{layer} H{head}'s pattern at position {position}")
            axis = why_views.parts_changes(reading, position)["layout"]["xaxis"]["title"]["text"]
            if split == why_tab.VERSUS:
                rival = escape_text(reading.tokenizer.label(parts.rival_id))
                assert axis == f"added to logit('{target}') − logit('{rival}')"
            else:
                assert axis == f"added to logit('{target}')"
    assert said["hedged"] > 0 and said["made"] > 0, said
    assert why_views.parts_figure(reading, 3).layout.xaxis.title.text == why_sentences.parts_axis(reading, 3)


def test_the_heads_heading_says_where_it_looked_at_this_query_from_its_attention_row(ctx):
    """Issue 29's stranger read the circuits' "␣ looks for a" (the strongest pair over the vocabulary) as what the head
    did at the chosen query. The head's heading says where it looked most there: its two largest attention weights at
    that position, each key's character and position (from an independent pass: circuits.key_contributions)."""
    loaded = ctx.checkpoint("shakespeare-char")
    ids = loaded.tokenizer.encode(TEXT)
    reading, _ = read(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST, [], "zero")
    for position in (0, 9, len(TEXT) - 1):
        for layer, head in ((0, 1), (1, 0)):
            heading = why_sentences.head_heading(reading, position, layer, head)
            said = re.search(r"After `([^`]+)` it looked most at (.*?)\. ", heading)
            assert said and said.group(1) == reading.tokens[position], heading
            keys = re.findall(r"`([^`]+)`@(\d+) \(([\d.]+)\)", said.group(2))
            weights, _ = circuits.key_contributions(loaded.model, ids, position, reading.targets[position], layer,
                                                    head, reading.attributions[position])
            best = torch.topk(weights[:position + 1].float(), min(2, position + 1))
            assert [int(key[1]) for key in keys] == best.indices.tolist()
            assert [key[0] for key in keys] == [reading.tokens[i] for i in best.indices.tolist()]
            assert [float(key[2]) for key in keys] == pytest.approx(best.values.tolist(), abs=5e-3)


def test_the_default_text_on_the_shipped_model_is_decided_by_the_head_that_looks_back_at_the_question_word():
    """The comment on DEFAULT_TEXT says what a learner sees first, read from the shipped weights: the model guesses
    the question mark, the head with the longest bar (L3 H1) writes most of it, pushing it up, and looks back at the
    "wh" of "wherefore"; no head's knock-out lowers the loss by more than a few hundredths (the old default, a verse
    joined into one long line, made a line-ending head hurt the text by 0.21)."""
    from conftest import REPO

    ctx = AppContext(limits=Limits(), weights=REPO / "weights")
    view = why_tab.explain(ctx, "shakespeare-char", why_tab.DEFAULT_TEXT, -1, "")
    where = why_tab.DEFAULT_TEXT.index("wherefore")
    assert view.numbers["target"]["character"] == "?"
    assert view.numbers["head"]["name"] == "L3 H1"
    assert "**L3 H1 pushed hardest** for `?`: +" in view.heading
    assert f"it looked most at `h`@{where + 1}" in view.head_heading
    # its tables rank that key and the guess low, and say why in sight (a learner read them as contradicting it)
    in_sight = view.circuits_heading.split("<details>")[0]
    # "tables skip layers 0–2" read as jargon that said the head did not do this (a ninth learner); with the reason,
    # a fifteenth still read two answers: the line says which one holds
    assert " Both low: tables read characters, not layers 0–2; trust the chain above." in in_sight
    # what it looks for over the text, in sight (a learner could say what it did here, not what it looks for)
    # and, over the whole text, what it writes: the question mark it wrote here (a learner found no general line)
    # "nowhere in particular" read as contradicting the chain's 55% on one key: where it looks varies by position
    # with no one place, that where it looks changes with the query (a tenth learner read "no one place" as nothing
    # to say), the chain being what it did here: a fifteenth read "most weight: the word before" in sight as a second
    # answer beside the chain's `h`. That place and its strongest look over the text, from the space after "Romeo," to
    # its R, the start of the word before, are behind the fold
    assert "\n\nNo one place: where it looks changes with the query; writes `?` most." in in_sight
    assert ("Its strongest look: `␣`@54 to `R`@48 (0.94). Nearest to one place: the word before, 24% of its weight (by "
            "chance: 14%).\n\nWhere else it looks" in view.circuits_heading.split("<details>")[1])
    assert visible_words(in_sight) <= MOST_WORDS
    # at position 30 the head with the longest bar (L2 H3) pushed the guess down, and its key ranks 4th of 32: the
    # tables agree with the chain, and a learner was told otherwise
    thirty = why_tab.explain(ctx, "shakespeare-char", why_tab.DEFAULT_TEXT, 30, "")
    assert thirty.numbers["head"]["name"] == "L2 H3" and "ranks `f` 4th of the text's 32" in thirty.circuits_heading
    assert " low: " not in thirty.circuits_heading
    # it pushed the guess down, and its heading says so in words (trial 16 found only the sign saying it); L3 H1, which
    # pushed it up, is said as no head against anything
    assert "Its part of the logit difference: -0.559 of +1.947, **against** `␣`." in thirty.head_heading
    assert "against" not in view.head_heading
    # behind the fold, past the first layer, the pairs are said to be the tables' (trial 16 read "`o` looks for `J`" as
    # a second answer), with the rule for a low rank
    fold = view.circuits_heading.split("<details>")[1]
    assert "Like the tables, the pairs below read the characters alone" in fold and why_sentences.LOW_RANKS in fold
    reading, _ = read(ctx, "shakespeare-char", why_tab.DEFAULT_TEXT, "", why_tab.STRONGEST, [], "mean over the text")
    assert reading.effects[0].layer == 3 and reading.effects[0].head == 1  # the most needed head, too
    assert min(effect.added for effect in reading.effects) > -0.05


def test_every_head_of_the_shipped_model_says_what_it_looks_for_within_60_words_at_every_position():
    """What each head looks for over the default text, read from its weights there (head_scores.looks_over_text), in
    sight above its tables; with the Look-for line of every position, at most 60 words before the fold. The first
    layer's heads look by position (1 or 2 back), as the head scores' probes find; later ones at the starts of words,
    the word before the query's, the newlines."""
    from conftest import REPO

    ctx = AppContext(limits=Limits(), weights=REPO / "weights")
    reading, _ = read(ctx, "shakespeare-char", why_tab.DEFAULT_TEXT, "", why_tab.STRONGEST, [], "mean over the text")
    said = {}
    for layer, head in why_reading.every_head(reading.model.config):
        heading, _, _ = why_views.read_circuits(reading, layer, head)
        top = reading.looks(layer, head)[0]
        with torch.no_grad():
            weights = reading.model(reading.ids[None], return_attention=True).attention_weights[layer][0, head]
        words = head_scores.word_numbers(why_tab.DEFAULT_TEXT)
        assert top == head_scores.looks_over_text(weights, reading.ids, words)[0]
        said[circuits.head_name(layer, head)] = heading.split("\n\n")[1].replace(why_page.HERE, "")
        for position in range(reading.ids.numel()):
            shown = heading.replace(why_page.HERE, why_sentences.in_the_tables(reading, position, layer, head))
            assert visible_words(shown.split("<details>")[0]) <= MOST_WORDS, shown
        assert "Where else it looks over your text" in heading.split("<details>")[1]
    assert said["L0 H2"] == "Looks 1 back (92% of its weight overall; by chance: 5%); writes `␣` most."
    assert said["L0 H3"] == "Looks 2 back (96% of its weight overall; by chance: 4%); writes `o` most."
    assert said["L1 H1"].startswith("Looks at word starts (58% of its weight overall; by chance: 23%);")
    # a second place, sharing no key with the first, where it comes near it: a learner read layer 2's "at the word
    # before" at a position where the heads looked within their own word; L3 H2 falls back to position 0 before the
    # text's first newline (named `\n`, as every line of the tab names it)
    assert said["L0 H1"].startswith("Looks 2 back (35% of its weight overall; by chance: 4%) and 1 back (27%; 5%);")
    assert said["L3 H2"].startswith("Looks at `\\n` (23% of its weight overall; by chance: 3%) and at position 0 (20%; "
                                    "5%);")
    # behind the fold, a positional head's character pairs come with a warning (a learner read layer 0's "`!` looks
    # for `!`" against "1 back: 74%")
    folds = {name: why_views.read_circuits(reading, *why_reading.parse_head(name, 4, 4))[0].split("<details>")[1]
             for name in ("L0 H2", "L2 H1")}
    assert "This head looks by position" in folds["L0 H2"] and "This head looks by position" not in folds["L2 H1"]
    assert said["L2 H1"].startswith("Looks at the word before (30% of its weight overall; by chance: 14%) and within "
                                    "its own word (22%; 11%);")
    # not a place that shares keys with the first: 1 back is within the word for most of L1 H2's queries
    assert said["L1 H2"].startswith("Looks 1 back (52% of its weight overall; by chance: 5%);")
    # what each writes is the token its mean share raises most (circuits.head_writes), named in sight
    written = circuits.head_writes(reading.model, reading.ids)
    for name, line in said.items():
        layer, head = why_reading.parse_head(name, 4, 4)
        top = reading.tokenizer.label(int(written[layer, head].argmax()))
        assert line.endswith(f"; writes `{escape_text(top)}` most."), line


def test_the_circuits_heading_says_where_this_positions_query_and_key_sit_in_the_tables(ctx):
    """A stranger read the tables' strongest pairs, unrelated to the position, as what the head did there. The line in
    sight is this position's: the query's row of QK ranks the key the head weighed most among the text's characters,
    the key's row of OV ranks the target over the vocabulary, from the tables themselves."""
    loaded = ctx.checkpoint("shakespeare-char")
    tokenizer, model = loaded.tokenizer, loaded.model
    ids = tokenizer.encode(TEXT).tolist()
    reading, _ = read(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST, [], "zero")
    lines = whys = 0
    for layer, head in why_reading.every_head(model.config):
        qk, ov = circuits.qk_circuit(model, layer, head), circuits.ov_circuit(model, layer, head)
        for position in (0, 9, len(ids) - 1):
            with torch.no_grad():
                weights = model(torch.tensor([ids[: position + 1]]), return_attention=True).attention_weights
            key = int(weights[layer][0, head, position].argmax())
            query, looked, target = ids[position], ids[key], reading.attributions[position].target_id
            in_text = sorted(set(ids))
            qk_rank = int((qk[query, in_text] > qk[query, looked]).sum()) + 1
            ov_rank = int((ov[looked] > ov[looked, target]).sum()) + 1
            line = why_sentences.in_the_tables(reading, position, layer, head)
            name = lambda i: escape_text(tokenizer.label(i))  # noqa: E731
            ranks, why = (re.split(r" (?=(?:Both|QK|OV) low: )", line) + [""])[:2]
            # where they are low the line says which answer holds, and leaves out the rows' lengths
            of_text, of_rows = ("", "") if why else (f" of the text's {len(in_text)}",
                                                     f" of {model.config.vocabulary_size}")
            assert ranks == (f"\n\n**Look for:** outlined cells, position {position}: QK row `{name(query)}` ranks "
                             f"`{name(looked)}` {why_sentences.ordinal(qk_rank)}{of_text}; OV row `{name(looked)}` "
                             "ranks "
                             f"`{name(target)}` {why_sentences.ordinal(ov_rank)}{of_rows}.")
            # a second stranger read low ranks as the tables contradicting the chain: past the first layer they say
            # why, naming the layers whose writes the tables do not read
            # a third found "4th of 32" called low, and a target the head pushed down called low though the chain
            # says as much: past a quarter of the row, and OV's only where the head pushed the target up
            pushed_up = reading.attributions[position].head(layer, head) > 0
            lows = [kind for kind, low in (("QK", qk_rank > max(3, len(in_text) // 4)),
                                           ("OV", pushed_up and ov_rank > max(3, len(ov) // 4))) if low]
            low = bool(lows)
            # a head that looks by position (a distance back, position 0) ranks low for that reason at any layer
            with torch.no_grad():
                every = model(torch.tensor([ids]), return_attention=True).attention_weights[layer][0, head]
            top = head_scores.looks_over_text(every, torch.tensor(ids), head_scores.word_numbers(TEXT))[0]
            clear = top.share >= why_reading.LOOKS_RATIO * top.chance and top.lift >= why_reading.LOOKS_CLEARLY
            by_position = clear and top.kind in ("distance", "first")
            assert bool(why) == (low and (by_position or layer > 0))
            if why:
                # and which of the two ranks is low (a fourth stranger could not tell)
                assert why == ("Both" if len(lows) == 2 else lows[0]) + " low: " + (
                    "tables leave out position; " if by_position else "tables read characters, not layer 0; ") + \
                    "trust the chain above."
                whys += 1
            lines += 1
            # the same cells outlined on /why's tables, as the heads deck sends them to the page
            shapes = why_views.cell_shapes(reading, position, layer, head)
            V = model.config.vocabulary_size
            assert shapes == [plots.cell_outline(query, looked, V), plots.cell_outline(looked, target, V)]
            view = why_tab.explain(ctx, "shakespeare-char", TEXT, position, "", circuits.head_name(layer, head), [],
                                   "zero")
            assert [list(view.qk.layout.shapes), list(view.ov.layout.shapes)] == [
                [go.layout.Shape(shape) for shape in outlines] for outlines in shapes]
    assert lines == 12 and whys > 0
    assert [why_sentences.ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 101, 111)] == \
        ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th"]


@pytest.mark.parametrize("versus", [False, True])
def test_a_chain_whose_head_pushed_against_the_target_is_titled_by_what_it_favoured(versus):
    """The default head is the longest bar, up or down: a head whose pushes sum below zero did not make the target
    win, and its chain's title says what it did instead."""
    arguments = dict(labels=["a", "b"], weights=[0.25, 0.75], writes=[2.0, -4.0], pushes=[0.5, -3.0], head="L3 H2",
                     target="x", position=1, part=-2.5, others=3.0, logit=0.5, probability=0.4, other="y",
                     other_probability=0.3, guessed=True, versus=versus)
    against = chain_plots.chain_changes(**arguments)["layout"]["title"]["text"].replace("<br>", " ")
    assert against == ("How L3 H2's pattern at position 1 favoured 'y' over 'x'" if versus else
                       "How L3 H2's pattern at position 1 pushed 'x' down")
    up = chain_plots.chain_changes(**{**arguments, "part": 2.5})["layout"]["title"]["text"].replace("<br>", " ")
    assert up == ("How L3 H2's pattern at position 1 made 'x' beat 'y'" if versus else
                  "How L3 H2's pattern at position 1 became 'x'")


@pytest.mark.parametrize("part, others", [(0.153, -0.144), (-0.5, 0.2), (0.3, -0.9), (0.4, 0.2)])
def test_the_sums_panel_keeps_room_inside_it_under_every_bar_that_goes_down(part, others):
    """④'s numbers sit outside their bars: a bar that goes down has its number under its lower end, and where that
    end was near the panel's floor the number sat on the names under the axis (a learner saw "-0.144" over "every
    other part", whose bar ended at +0.009). The panel reaches below each such end by the room it keeps above."""
    logit = part + others
    changes = chain_plots.chain_changes(["a", "b"], [0.5, 0.5], [1.0, 1.0], [0.5, 0.5], head="L1 H1", target="x",
                                  position=1, part=part, others=others, logit=logit, probability=0.2, other="y",
                                  other_probability=0.1, guessed=True)
    bottom, top = changes["layout"]["yaxis4"]["range"]
    room = top - max(0.0, part, logit)
    ends = [part] * (part < 0) + [logit] * (others < 0 or logit < 0)
    assert room > 0 and all(bottom <= end - room + 1e-12 for end in ends)
    assert bottom <= min(0.0, part, logit)
    if not ends:  # nothing goes down: the bars stand on the floor
        assert bottom == 0.0


def test_over_a_bpe_vocabulary_the_tables_line_names_what_the_key_promotes_where_the_guess_is_not_in_the_tables(kinds):
    """GPT-2's tables are over the text's tokens and the lowest ids: a guess outside them has no column, so the line
    names the column the key's OV row promotes most, read from the table; a target inside is ranked as for
    characters."""
    ctx, checkpoint, text = kinds["gpt2"]
    reading, _ = read(ctx, checkpoint, text, "", why_tab.STRONGEST, [], "zero")
    rows = reading.subset.tolist()
    said = Counter()
    for position in range(reading.ids.numel()):
        layer, head = reading.strongest(position)
        line = why_sentences.in_the_tables(reading, position, layer, head)
        looked = int(reading.ids[reading.looked_most(position, layer, head)[0]])
        written = circuits.ov_circuit(reading.model, layer, head, reading.subset)[rows.index(looked)]
        name = lambda token: escape_text(reading.tokenizer.label(token))  # noqa: E731
        target = reading.attributions[position].target_id
        if target in rows:
            said["ranked"] += 1
            assert f"ranks `{name(target)}` " in line.split("; OV row")[1]
        else:
            said["most"] += 1
            assert f"OV row `{name(looked)}` promotes `{name(rows[int(written.argmax())])}` most." in line
            assert "Low:" not in line or layer > 0  # a rank past TABLE_RANK_SHOWN; "most" is first
    assert said["most"] > 0, said


def test_a_head_looks_somewhere_with_half_again_an_even_spread_and_15_points_beyond_it():
    """A fifth learner saw a head's chains point at word starts every time while its line said it looked nowhere in
    particular: 49% of its weight there against an even spread's 25% (word starts are a quarter of a text's keys).
    A fourth had read 9% on newlines, against 3%, as a head's job, which none of its chains showed."""
    look = lambda kind, share, chance: head_scores.Look(kind, 0, share, chance)  # noqa: E731
    assert why_reading.clear(look("word start", 0.49, 0.25))
    assert not why_reading.clear(look("token", 0.09, 0.03))  # three times an even spread, 6 points beyond it
    assert not why_reading.clear(look("previous word", 0.24, 0.14))  # 10 points beyond
    assert not why_reading.clear(look("own word", 0.60, 0.44))  # 16 points beyond, but under 1.5 times


def test_a_second_place_is_named_where_it_shares_no_key_with_the_first_and_comes_within_half_its_lift():
    """Layer 2's heads were said to look "at the word before" where, at the default position, they looked within
    their own word: a place that shares no key with the first (the two add) and gets half the first's weight beyond
    an even spread is named beside it, and left out of the fold's list of other places."""
    look = lambda kind, share, chance, what=0: head_scores.Look(kind, what, share, chance)  # noqa: E731
    text = dataclasses.make_dataclass("Text", ["ids"])(torch.tensor([7, 3, 5]))  # all beside reads of a reading
    beside = functools.partial(why_reading.Reading.beside, text)
    before, own = look("previous word", 0.30, 0.14), look("own word", 0.22, 0.11)
    assert beside([before, own]) == own
    assert beside([before, look("own word", 0.17, 0.11)]) is None  # 6 points: under half of 16
    assert beside([before, look("word start", 0.40, 0.23)]) is None  # starts are in both words
    newline = look("token", 0.23, 0.03, what=5)
    assert beside([newline, look("first", 0.20, 0.05)]).kind == "first"
    # a token at position 0 shares that key with it
    assert beside([look("token", 0.23, 0.03, what=7), look("first", 0.20, 0.05)]) is None
    assert beside([look("distance", 0.35, 0.04, 2), look("distance", 0.27, 0.05, 1)]).what == 1


def test_the_head_on_screen_is_read_from_its_heading_and_opens_in_the_attention_tab():
    """The button under a head's chain opens it in the Attention tab: the head and position are the heading's (the
    head box may say "strongest"), at the softmax weights, on the same checkpoint and text; no head on screen yet is
    a clear error, not a traceback."""
    from types import SimpleNamespace

    from playground.config import Limits
    from playground.ui import _open_in_attention, attention_tab

    ctx = SimpleNamespace(limits=Limits())

    assert why_tab.head_on_screen("### L3 H1 at position 85: looked most at `h`@63") == (3, 1, 85)
    assert why_tab.head_on_screen("L0 H2 at position 0") == (0, 2, 0)
    for shown in ("", "### Why `?` after `o`", None):
        with pytest.raises(gr.Error, match="No head is on screen to open"):
            why_tab.head_on_screen(shown)
    assert _open_in_attention(ctx, "shakespeare-char", "To be", "### L2 H3 at position 30 …") == (
        attention_tab.SOURCES[0], "shakespeare-char", "To be", 2, 3, 30, "6. Softmax weights")
    # it skips the queue and Gradio's checks (preprocess=False): a value of the wrong kind is refused, no traceback
    for values in ((1, "To be", "L0 H0 at position 0"), ("shakespeare-char", "x" * 10**6, "L0 H0 at position 0")):
        with pytest.raises(gr.Error, match="must be text|this server's limit") as refused:
            _open_in_attention(ctx, *values)
        assert not refused.value.print_exception
    assert list(attention_tab.Opened._fields) == ["source", "checkpoint", "text", "layer", "head", "query", "step"]


def test_a_head_of_notebook_004s_model_is_refused_before_the_attention_tab_opens(kinds):
    """The Why tab explains notebook 004's model, whose heads the Attention tab's step view cannot read: the button
    that opens the head on screen there said so only after the tab changed, in four toasts, under the last model's
    head. Now one refusal, before the tab changes, that says where to go; a GPT checkpoint opens the tab."""
    from playground.ui import _attention_tab

    ctx, toy, _ = kinds["toy"]
    with pytest.raises(gr.Error, match="notebook 004's attention-only model.*step-by-step view needs a GPT"):
        _attention_tab(ctx, toy, "hello wo", "### L0 H1 at position 7 …")
    for kind in ("shipped", "gpt2"):
        ctx, checkpoint, text = kinds[kind]
        assert _attention_tab(ctx, checkpoint, text, "### L0 H0 at position 3 …").selected == "attention"
