"""The Why tab's handler on a small trained checkpoint: the attribution sums to the logit on screen, the chosen
head's reading, its circuits in words, knock-outs and the ranking; refusals in words."""

from __future__ import annotations

import functools
import json
import re
from collections import Counter

import gradio as gr
import pytest
import torch

from playground import circuits
from playground.config import Limits
from playground.ui import why_tab
from playground.ui.common import AppContext, friendly

TEXT = "To be, or not to be: that is"  # 28 characters: the small checkpoint reads 32


@pytest.fixture(scope="module")
def ctx(tiny_weights):
    return AppContext(limits=Limits(), weights=tiny_weights)


def save_toy_checkpoint(weights, name: str) -> None:  # the browser test's too
    """The toy preset's model (notebook 004's, 2 sliced heads, context 8) trained a few steps on "hello world"."""
    import torch

    from playground.architectures import build_model
    from playground.checkpoints import save_checkpoint
    from playground.config import ModelConfig
    from playground.presets import TRAIN_PRESETS
    from playground.tokenizer import CharTokenizer

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
            split=why_tab.ALONE):
    """The view through /why's handler; the logit-alone split unless told (test_against_the_runner_up_* read the
    default, the guess against the runner-up)."""
    return why_tab.explain(ctx, "shakespeare-char", text, position, target, head, list(knocked), mode, split)


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
    strongest = max(heads, key=lambda item: item[1])[0]
    view = explain(ctx)
    assert view.head_heading.startswith(f"### {strongest} at position {len(TEXT) - 1}")
    assert f"What {strongest} reads and writes" in view.circuits_heading
    assert view.circuits_heading.count(" looks for `") == why_tab.PAIRS
    pushes = [trace for trace in view.chain.data if trace.type == "bar"][2]
    assert len(pushes.y) == len(view.numbers["head"]["keys"]) == len(TEXT)  # every read position, no future
    assert view.numbers["head"]["name"] == strongest


def test_a_chosen_target_and_head_and_position(ctx):
    view = explain(ctx, position=5, target="e", head="L1 H0")
    assert view.heading.startswith("### Why `e` after `,` (position 5)")
    assert view.head_heading.startswith("### L1 H0 at position 5")
    assert "(the direct path" in view.circuits_heading
    pushes = [trace for trace in view.chain.data if trace.type == "bar"][2]
    assert len(pushes.y) == len(view.numbers["head"]["keys"]) == 6


def test_knocking_out_heads_reports_loss_and_prediction_and_ranks_every_head(ctx):
    view = explain(ctx, knocked=["L0 H0", "L1 H1"], mode="zero")
    assert "| loss on the text |" in view.knock_heading and "without L0 H0, L1 H1" in view.knock_heading
    ranking = [trace for trace in view.ranking.data if trace.type == "bar"][0]
    assert len(ranking.y) == 4  # 2 layers x 2 heads
    assert "Most needed: L" in view.knock_heading


@pytest.mark.parametrize(("changes", "message"), [
    ({"text": ""}, "the text is empty"),
    ({"text": "x" * 20 + "∑"}, "does not know; the first is '∑' at 20"),
    ({"text": "a" * 40}, "this view reads at most 32"),
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
    assert why_tab.read_character(typed) == character
    if character.isprintable() and len(character) == 1 and character not in "\\":
        assert why_tab.read_character(why_tab.escape_text(character)) == character


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
        assert " − the logit of " in view.parts.layout.title.text and "beat" in view.chain.layout.title.text
        alone = explain(ctx, position=position)
        assert alone.numbers["split"] == "alone" and alone.numbers["total"] == pytest.approx(
            float(logits[position, guess]), abs=1e-4)


def test_the_look_for_line_says_when_no_head_decides(ctx):
    """A stranger found the named head writing 1-2% of the logit while the MLPs wrote most, and nothing said so.
    The line is computed from the bars: the heads together, or the strongest, against the largest other part."""
    said = Counter()
    for split in (why_tab.VERSUS, why_tab.ALONE):
        reading, _ = why_tab._reading(ctx, "shakespeare-char", TEXT, "", why_tab.STRONGEST, [], "zero", split=split)
        for position, attribution in enumerate(reading.attributions):
            parts = list(zip(attribution.names, attribution.kinds, attribution.values.tolist()))
            heads = sum(value for _, kind, value in parts if kind == "head")
            strongest = max((part for part in parts if part[1] == "head"), key=lambda part: part[2])
            largest = max((part for part in parts if part[1] != "head"), key=lambda part: abs(part[2]))
            look_for = why_tab._heading(reading, position).split("\n\n")[1]
            if abs(heads) < why_tab.QUIET_HEADS * abs(largest[2]):
                said["heads"] += 1
                assert f"the heads together write {heads:+.2f} of {attribution.logit:+.2f}; " \
                       f"{largest[0]} writes {largest[2]:+.2f}" in look_for
            elif abs(strongest[2]) < why_tab.QUIET_HEADS * abs(largest[2]):
                said["head"] += 1
                assert f"the strongest, {strongest[0]}, writes {strongest[2]:+.2f}" in look_for
            else:
                said["none"] += 1
                assert "decides" not in look_for
    assert said["heads"] + said["head"] > 0 and said["none"] > 0, said
