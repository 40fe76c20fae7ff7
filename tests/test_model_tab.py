"""The Model tab's handlers called directly, on the shipped checkpoint and on the textbook inputs."""

from __future__ import annotations

import functools
import json
import re

import gradio as gr
import numpy as np
import pytest
import torch
from conftest import REPO
from text_support import visible_words
from torch.testing import assert_close

from playground.budget import MemoryBudget
from playground.config import Limits
from playground.lens import anatomy, walkthrough
from playground.lens.anatomy import lessons
from playground.lens.anatomy.lessons import LEVEL_TITLES
from playground.ui import model_tab, model_views, plots, transpose_picture
from playground.ui.common import AppContext, friendly

SCORE, HEAD, HEADS, BLOCK, MODEL = LEVEL_TITLES
TEXT = "To be, or not to be: that is the question."
GPT_SWITCHES = ("pre", "decoder", "gelu", 0.0, 0)


@pytest.fixture(scope="module")
def ctx() -> AppContext:
    return AppContext(limits=Limits(), weights=REPO / "weights")


def view(ctx, level, *, source="trained checkpoint", text=TEXT, layer=1, head=2, query=-1, key=3,
         switches=GPT_SWITCHES, forget=False, part="Layer 1", handler=model_tab.model_view):
    return handler(ctx, source, "shakespeare-char", text, level, layer, head, query, key, *switches, forget,
                   part=part)


def figures(result: model_tab.View) -> list:
    return [f for f in (result.plot_a, result.plot_b, result.plot_c, result.plot_d) if f is not None]


def titles(result: model_tab.View) -> list[str]:
    return [f.layout.title.text.replace("<br>", " ") for f in figures(result)]


@pytest.mark.parametrize(("level", "count"), [(SCORE, 3), (HEAD, 2), (HEADS, 3), (BLOCK, 3), (MODEL, 4)])
def test_every_level_draws_its_figures_and_says_what_to_look_for(ctx, level, count):
    result = view(ctx, level)
    assert result.heading.startswith(f"### {level}") and "**Look for:**" in result.heading
    assert len(figures(result)) == count
    assert result.parts == lessons.map_parts(4)  # the shipped model: 4 blocks
    assert result.part == ("Next-character probabilities" if level == MODEL else "Layer 1")
    for figure in figures(result):
        json.loads(figure.to_json())  # each figure serialises as the browser receives it


def test_one_score_shows_the_products_and_their_sum(ctx):
    result = view(ctx, SCORE, query=10, key=4)
    assert "Scaled scores: cell (10, 4)" in titles(result)[2]
    assert "| **sum** |" in result.numbers and result.numbers.count("| d") == 48  # head_size 192 / 4
    assert "After softmax over the row, this cell's weight is" in result.heading
    # the products' feature labels fit a phone's plot side by side (d12d16d20... ran together at 390 px)
    shown = result.plot_b.layout.xaxis.ticktext
    assert len(shown) * (3 * plots.LABEL_CHAR_PX + plots.LABEL_GAP_PX) <= plots.LABEL_ROOM_PX
    assert shown[:2] == ("d0", "d8")
    masked = view(ctx, SCORE, query=2, key=5)
    assert "causal mask replaces this score with −∞" in masked.heading


def test_one_head_points_to_the_attention_tab(ctx):
    assert "Open the Attention tab** (trained checkpoint, layer 1, head 2)" in view(ctx, HEAD).heading


def test_all_heads_of_a_layer(ctx):
    result = view(ctx, HEADS, layer=3)
    assert titles(result) == ["Layer 3: every head's attention weights",
                              "Layer 3: the heads' outputs side by side (4 × 48)",
                              "Layer 3: after the output projection"]
    assert "concat(head₀, …, head₃)" in result.heading


@pytest.mark.parametrize("head", [0, 3])
def test_the_heads_side_by_side_draws_every_head_with_dividers_between(ctx, head):
    """Issue 31: "side by side (4 x 48)" drew columns 0-127 of 192 (head 3 missing), nothing marking where a head
    ends."""
    result = view(ctx, HEADS, layer=3, head=head)
    joined, projected = result.plot_b, result.plot_c
    for figure in (joined, projected):
        assert len(figure.data[0].x) == 192 and "columns" not in figure.layout.title.text
    assert list(joined.layout.xaxis.ticktext) == ["head 0", "head 1", "head 2", "head 3"]
    dividers = [shape.x0 for shape in joined.layout.shapes if shape.name == "between groups"]
    assert dividers == [47.5, 95.5, 143.5]
    assert "column 191 (h3·d47)" in joined.data[0].customdata[0][191]
    assert not [shape for shape in projected.layout.shapes if shape.name == "between groups"]  # it mixes the heads
    wide = view(ctx, HEADS, source="textbook inputs", query=0)  # a narrow join: every column, one divider a head
    assert len([shape for shape in wide.plot_b.layout.shapes if shape.name == "between groups"]) == \
        len(wide.plot_b.layout.xaxis.ticktext) - 1


def test_all_heads_forgetting_the_transpose_shows_the_notebooks_numbers_and_the_map(ctx):
    result = view(ctx, HEADS, layer=3, query=5, forget=True)
    loaded = ctx.checkpoint("shakespeare-char")
    ids = walkthrough.prepare_text(TEXT, loaded.tokenizer, loaded.config.context_size).ids
    heads = anatomy.all_heads(loaded.model, ids, 3, forget_transpose=True)  # what the view showed, recomputed
    assert titles(result)[1].startswith("Layer 3: the heads joined without the transpose (4 blocks of 48")
    assert titles(result)[2].startswith("Layer 3: the output projection of the join without the transpose")
    assert titles(result)[3].startswith("Layer 3: where each block came from without the transpose")
    shown = result.plot_c.data[0].z  # the projection: every column
    assert_close(torch.tensor(shown[5], dtype=torch.float32), heads.projected[5])
    assert "contiguous().view(B, T, h·d)  ← no .transpose(1, 2)" in result.heading
    assert "**166 of the 168 blocks**" in result.heading and "**42 of the 42 rows**" in result.heading
    assert f"up to **{heads.forgotten.output_difference:.2f}**" in result.heading
    assert "Row **5** `,` now holds: block 0 ← head 0, token 20" in result.heading
    sources = heads.forgotten.block_sources
    assert (-result.plot_d.data[0].z).tolist() == sources[..., 0].tolist()  # coloured by the source head (minus it)
    assert result.plot_d.data[0].text[5][1] == "h0·t21"
    assert "block 1 (d48–d95) ← head 0, token 21" in result.plot_d.data[0].customdata[5][1]
    assert "| 5 `,` | h0·t20 | h0·t21 | h0·t22 | h0·t23 |" in result.numbers
    textbook = view(ctx, HEADS, source="textbook inputs", query=0, forget=True)
    assert "**10 of the 12 blocks**" in textbook.heading and lessons.WRAPPER_HAS_NO_TRANSPOSE in textbook.heading
    for number in ("0.1351", "0.3790", "0.3190", "0.4858"):  # without the transpose, then the book's own row 0
        assert number in textbook.numbers
    assert len(figures(textbook)) == 4
    assert view(ctx, SCORE, forget=True).heading == view(ctx, SCORE).heading  # the switch belongs to level 3


def test_the_block_with_dropout_names_the_dropped_weights(ctx):
    result = view(ctx, BLOCK, switches=("post", "encoder", "relu", 0.2, 5))
    assert "post-norm (notebooks 002/003), encoder (no mask), ReLU, attention dropout p = 0.2 (seed 5)" in \
        result.heading
    assert "multiplied every kept one by 1/(1−0.2) = **1.2500**" in result.heading
    assert "These weights were trained as pre-norm, causal, GELU" in result.heading
    after = result.plot_b
    assert after.layout.title.text.startswith("The same after dropout")
    grey = after.data[1].z  # the masked (dropped) cells' layer: every head's row at the query
    dropped = sum(1 for row in grey for value in row if value == 1.0)
    assert len(grey) == 4 and f"zeroed **{dropped} of the {4 * len(grey[0])}** weights the 4 heads give" in \
        result.heading
    assert result.heading == view(ctx, BLOCK, switches=("post", "encoder", "relu", 0.2, 5)).heading  # seeded


def test_after_dropout_in_a_decoder_the_future_stays_grey_and_each_grey_cell_says_why(ctx):
    """The dropout figure greyed only the dropped cells: the causally masked ones were white zeros, as if tiny
    weights."""
    query = 20
    result = view(ctx, BLOCK, query=query, switches=("pre", "decoder", "gelu", 0.3, 0))
    after = result.plot_b
    assert "grey = dropped or masked" in after.layout.title.text.replace("<br>", " ")
    grey, hover = after.data[1].z, after.data[1].customdata  # the grey layer says why a cell is grey
    assert len(grey) == 4  # one row per head
    for row, hovers in zip(grey, hover):
        for j in range(query + 1, len(row)):  # the future: grey, and masked
            assert row[j] == 1.0 and hovers[j].endswith(lessons.MASKED_WEIGHT_HOVER)
    dropped = [(k, j) for k in range(4) for j in range(query + 1) if grey[k][j] == 1.0]
    assert dropped and all(hover[k][j].endswith(lessons.DROPPED_HOVER) for k, j in dropped)
    assert f"zeroed **{len(dropped)} of the {4 * (query + 1)}** weights" in result.heading


@pytest.mark.parametrize("layer", [1, 3])
def test_a_checkpoints_block_shows_how_attention_then_the_mlp_change_the_querys_guess(ctx, layer):
    """A learner could say neither what the output projection nor what the MLP adds: the block's second figure is the
    query's next-character guesses read after each of its parts (anatomy.block_lens), drawn from the lens itself;
    of the last block the last row is the model's own guesses, as level 5 shows them."""
    result = view(ctx, BLOCK, layer=layer, query=7)
    guesses = result.plot_c
    trace = guesses.data[0]
    assert guesses.layout.title.text.replace("<br>", " ").startswith("The guess after each part of the block, at "
                                                                      "position 7 (")
    loaded = ctx.checkpoint("shakespeare-char")
    ids = walkthrough.prepare_text(TEXT, loaded.tokenizer, loaded.config.context_size).ids
    walk = anatomy.block_walk(loaded.model.blocks[layer], anatomy.block_input(loaded.model, ids, layer))
    lens = anatomy.block_lens(loaded.model, walk, 7)
    rows = [lessons.BLOCK_POINTS.get(name, name) for name in lens.names]
    assert rows == ["block input", "+ attention", "+ MLP (the output)"]
    assert list(guesses.layout.yaxis.ticktext) == rows
    shown = [[model_views.token_label(loaded.tokenizer.decode([t])) for t in row] for row in lens.top_ids.tolist()]
    assert [list(row) for row in trace.text] == shown
    assert np.allclose(np.array(trace.z, dtype=float), lens.top_probs.numpy(), atol=1e-6)
    assert trace.texttemplate == "%{text}<br>%{z:.2f}"  # each cell's probability in sight (a phone's cells are small)
    if layer == loaded.config.layers_num - 1:
        final = view(ctx, MODEL, query=7)
        assert [list(row) for row in final.plot_c.data[0].text][-1][:anatomy.BLOCK_TOP] == shown[-1]
    assert "how attention, then the MLP, change its next-character guess" in result.heading
    # the textbook's block has no LM head: each token's length at each point instead
    textbook = view(ctx, BLOCK, source="textbook inputs")
    assert textbook.plot_c.layout.title.text.startswith("‖x‖ of each token")
    assert "change its next-character guess" not in textbook.heading


def test_level_ones_line_goes_from_the_bars_sum_to_the_framed_cell_as_its_chart_names_it(ctx):
    """A ninth learner read "the raw score −1.6285, the framed cell" over a framed cell titled −0.2350: the frame is
    on the scaled scores. The line says the sum, then ÷ √d_k, the framed cell's own value."""
    result = view(ctx, SCORE, query=41, key=0)
    total = float(re.search(r"they add up to (-?\d+\.\d+)", titles(result)[1]).group(1))
    framed = float(re.search(r"cell \(41, 0\) = (-?\d+\.\d+)", titles(result)[2]).group(1))
    assert framed == pytest.approx(total / 48 ** 0.5, abs=1e-4)
    assert f"add up to the raw score {total:.4f}; ÷ √48 it is the framed cell, {framed:.4f}." in result.heading


def test_the_blocks_line_on_layernorm_holds_on_the_shipped_model(ctx):
    """"each LayerNorm brings its copy back to scale" read as shrinking it, where ‖x‖ rose from 2.6 to 9.3: the line
    says a LayerNorm's copy has a length of its own, longer or shorter than the stream's, and on the shipped model it
    is both (layer 0 lengthens the embeddings' short vectors, the last layer shortens a long stream)."""
    assert "longer or shorter than the stream's" in view(ctx, BLOCK).heading
    loaded = ctx.checkpoint("shakespeare-char")
    ids = walkthrough.prepare_text(TEXT, loaded.tokenizer, loaded.config.context_size).ids
    ratios = []
    for layer in range(loaded.config.layers_num):
        walk = anatomy.block_walk(loaded.model.blocks[layer], anatomy.block_input(loaded.model, ids, layer))
        norms = {point.name: float(point.norms.mean()) for point in walk.points}
        ratios += [norms["LayerNorm 1"] / norms["block input"], norms["LayerNorm 2"] / norms["residual add 1"]]
    assert max(ratios) > 1.5 and min(ratios) < 0.5


@pytest.mark.parametrize("source,heads", [("trained checkpoint", 4), ("textbook inputs", 1)])
def test_the_blocks_first_figure_is_what_every_head_reads_at_the_query(ctx, source, heads):
    """A seventh learner could tell what the block changed in the guess, not what attention read: its first figure was
    head 0's whole pattern. It is every head's row of weights at the query, the keys after it grey, the head picked
    framed, each row the weights the block itself computes there."""
    query = 3
    result = view(ctx, BLOCK, source=source, query=query, head=min(2, heads - 1))
    reads = result.plot_a
    assert reads.layout.title.text.replace("<br>", " ").startswith(f"Where each head looks from position {query} (")
    assert list(reads.layout.yaxis.ticktext) == [f"head {n}" for n in range(heads)]
    z = np.array(reads.data[0].z, dtype=float)
    assert np.isnan(z[:, query + 1:]).all() and (reads.data[1].z[0][query + 1] == 1.0)  # the future, grey
    assert np.allclose(z[:, :query + 1].sum(axis=1), 1.0, atol=1e-5)  # each head's row: a distribution
    if source == "trained checkpoint":
        loaded = ctx.checkpoint("shakespeare-char")
        ids = walkthrough.prepare_text(TEXT, loaded.tokenizer, loaded.config.context_size).ids
        walk = anatomy.block_walk(loaded.model.blocks[1], anatomy.block_input(loaded.model, ids, 1))
        assert np.allclose(z[:, :query + 1], walk.weights[:, query, :query + 1].numpy(), atol=1e-6)
        assert reads.layout.shapes[0].y0 == 1.5  # head 2's row framed
        assert reads.data[0].customdata[2][3] == "head 2 · key 3 (b)"  # the weight itself comes from the colour's z
    assert "where each head looks from the query" in result.heading


def test_the_model_level_reads_each_block_through_the_lm_head(ctx):
    result = view(ctx, MODEL, query=5, part="LM head")
    assert result.part == "LM head"
    # the part clicked is said in the Look-for line, where the pictures show it (each part had the same line)
    looks = {part: re.search(r"\*\*Look for:\*\* (.*)", view(ctx, MODEL, query=5, part=part).heading).group(1)
             for part in lessons.MODEL_PARTS}
    assert len(set(looks.values())) == len(lessons.MODEL_PARTS)
    for part in lessons.MODEL_PARTS[:3]:
        assert looks[part].startswith(f"**{part}**")
    assert "embeddings: `" in result.heading and "layer 3: `" in result.heading
    assert titles(result)[1] == "The model's top 10 next characters at every position"


def test_textbook_levels_reproduce_notebook_001(ctx):
    result = view(ctx, HEADS, source="textbook inputs", query=0)
    for number in ("-0.4519", "0.2216", "0.4772", "0.1063", "0.3190", "0.4858"):
        assert number in result.numbers
    assert "row 0 is **[-0.4519, 0.2216, 0.4772, 0.1063]**" in result.heading
    assert "row 0 is **[0.3190, 0.4858]**" in result.heading
    assert len(figures(result)) == 4 and result.parts == lessons.map_parts(1)
    score = view(ctx, SCORE, source="textbook inputs", query=1, key=0, head=7)  # the head box is not used
    assert "Query **1** `journey` asks, key **0** `Your` answers" in score.heading
    block = view(ctx, BLOCK, source="textbook inputs", head=3)
    assert "seeded random weights" in block.heading and len(figures(block)) == 3
    model = view(ctx, MODEL, source="textbook inputs")
    assert lessons.TEXTBOOK_NO_MODEL in model.heading and figures(model) == []


def test_unknown_characters_are_named_not_fatal(ctx):
    result = view(ctx, SCORE, text="hi ∑")
    assert "not in the vocabulary" in result.heading and figures(result) == []


def test_positions_past_the_end_are_clamped_with_a_notice(ctx):
    result = view(ctx, SCORE, text="To be", query=40, key=99)
    assert "Query position 40 is past the end" in result.heading
    assert "Key position 99 is past the end" in result.heading


@pytest.mark.parametrize(("changes", "message"), [
    ({"layer": 9}, "layer 9 is out of range: this model has 4 layers"),
    ({"head": -1}, "head -1 is out of range"),
    ({"level": "6. Everything"}, "not one of the levels"),
    ({"switches": ("pre", "decoder", "gelu", 0.99, 0)}, "dropout must be at most 0.95"),
    ({"switches": ("sandwich", "decoder", "gelu", 0.0, 0)}, "norm order"),
    ({"text": "x" * 3000}, "The text is 3,000 characters long"),
    ({"source": "a hat"}, "source"),
    ({"query": "two"}, "query must be a whole number"),
])
def test_bad_input_is_a_clear_gradio_error(ctx, changes, message):
    handler = functools.partial(friendly(model_tab.model_view), ctx)
    args = {"level": SCORE, **changes}
    level = args.pop("level")
    with pytest.raises(gr.Error, match="(?i)" + message):
        view(ctx, level, handler=lambda _ctx, *rest, **named: handler(*rest, **named), **args)


def test_a_view_over_the_memory_budget_says_what_to_lower(tmp_path):
    small = AppContext(limits=Limits(), weights=REPO / "weights", budget=MemoryBudget(8 * 2**20, "a test budget"))
    with pytest.raises(ValueError, match=r"over this server's memory budget.*use a shorter text \(it is 42 tokens\)"):
        view(small, MODEL)


def test_the_model_map_navigates():
    assert model_tab.navigate("Layer 2", SCORE, 0) == (SCORE, 2, "Layer 2")  # inside a block: keep the level
    assert model_tab.navigate("Layer 0", MODEL, 3) == (BLOCK, 0, "Layer 0")
    assert model_tab.navigate("LM head", HEADS, 1) == (MODEL, 1, "LM head")
    assert model_tab.navigate("Embeddings", BLOCK, 2) == (MODEL, 2, "Embeddings")
    with pytest.raises(gr.Error, match="Unknown part of the model"):
        friendly(model_tab.navigate)("the tail", SCORE, 0)


def test_the_shown_view_and_the_controls_follow_the_level_and_the_model(ctx):
    texts, drawn = model_tab._deck_view(view(ctx, HEAD))
    assert texts[3] == "Layer 1" and [figure is not None for figure in drawn] == [True, True, False, False]
    checkpoint, layer, head, key, switches, forget, model_map, level, book_inputs, _ = model_tab.controls(
        ctx, "textbook inputs", None, BLOCK)
    assert not checkpoint.visible and not layer.visible and not head.visible and switches.visible
    assert not forget.visible and model_tab.controls(ctx, "textbook inputs", None, HEADS)[5].visible
    assert model_map.choices == [(part, part) for part in lessons.map_parts(1)]
    assert level.visible and not book_inputs.visible
    *visible, model_map, level, book_inputs, query = model_tab.controls(ctx, "trained checkpoint", "shakespeare-char",
                                                                        SCORE)
    assert query.visible
    assert [c.visible for c in visible] == [True, True, True, True, False, False]
    assert model_map.choices == [(part, part) for part in lessons.map_parts(4)]
    *_, unchanged, _, _, query = model_tab.controls(ctx, "trained checkpoint", "no-such-run", MODEL)
    assert query.visible  # the logit lens frames the query's row  # the view says why
    assert unchanged.visible and "choices" not in unchanged.constructor_args  # shown again, its parts as they were
    # a notebook's own model: one view, so no map, no level and no pickers; its inputs instead
    *pickers, model_map, level, book_inputs, query = model_tab.controls(ctx, "notebook 004's sliced heads", None,
                                                                        SCORE)
    pickers.append(query)
    assert not any(c.visible for c in pickers) and not model_map.visible and not level.visible
    assert book_inputs.visible
    assert model_tab._deck_view(book_view(ctx, "notebook 004's sliced heads"))[0][3] == ""  # no part: no map


# ------------------------------------------------------------------------------------------------ its figures

def test_the_heads_grid_never_grows_with_heads_times_t_squared():
    weights = torch.softmax(torch.randn(20, 300, 300), dim=-1)  # 20 heads of 300 tokens
    figure = plots.heads_grid(weights, [f"t{i}" for i in range(300)], "grid", highlight_row=150, start=120)
    heatmaps = [trace for trace in figure.data if trace.type == "heatmap"]
    assert len(heatmaps) == plots.MAX_GRID_PANELS and plots.grid_side(20, 300) == 64
    assert all(len(trace.z) == 64 and len(trace.z[0]) == 64 for trace in heatmaps)
    assert sum(len(t.z) * len(t.z[0]) for t in heatmaps) <= plots.GRID_CELLS
    assert "(heads 0–15 of 20, tokens 120–183 of 300)" in figure.layout.title.text.replace("<br>", " ")
    assert list(heatmaps[0].x[:2]) == [120, 121]  # hover names positions in the whole text
    assert plots.grid_side(4, 42) == 42 and plots.grid_side(4, 1000) == plots.MAX_SIDE


def test_the_heads_grid_fits_a_phone_two_square_panels_a_row():
    """Four heads in a row were 41 px wide strips on a phone, their titles run together ("head 0head 1...")."""
    figure = plots.heads_grid(torch.softmax(torch.randn(4, 42, 42), dim=-1), list("x" * 42), "grid")
    rows = {(trace.xaxis, trace.yaxis) for trace in figure.data}
    assert len(rows) == 4 and figure.layout.xaxis2.domain[1] == 1.0 and figure.layout.xaxis3.domain[0] == 0.0
    assert [figure.layout[f"yaxis{'' if i == 1 else i}"].scaleanchor for i in range(1, 5)] == ["x", "x2", "x3", "x4"]


def test_word_labels_that_cannot_stand_side_by_side_on_a_phone_are_slanted():
    names = ["embeddings", "layer 0", "layer 1", "layer 2", "layer 3", "final norm"]
    assert plots.word_tick_angle(names) == -45 and plots.word_tick_angle(names[:2]) == 0
    assert plots.word_tick_angle(list("abcdefghijklmnopqrstuvwxyz")) == 0  # characters are thinned, not slanted
    assert plots.bar_chart(names, [0.1] * 6).layout.xaxis.tickangle == -45
    assert plots.text_heatmap(torch.rand(3, 6), [["a"] * 6] * 3, list("abc"), names).layout.xaxis.tickangle == -45


def test_the_text_heatmap_windows_its_rows_and_writes_its_words():
    words = [[f"w{r}.{c}" for c in range(10)] for r in range(200)]
    figure = plots.text_heatmap(torch.rand(200, 10), words, [str(r) for r in range(200)], list("0123456789"),
                                "top 10", first_row=150, highlight_row=160)
    assert len(figure.data[0].z) == plots.MAX_SIDE and figure.data[0].text[0][0] == "w72.0"  # rows 72-199
    assert "(rows 72–199 of 200)" in figure.layout.title.text.replace("<br>", " ")
    assert figure.layout.shapes[0].y0 == 160 - 72 - 0.5


def test_the_category_heatmap_windows_its_rows_and_names_its_categories():
    categories = torch.arange(200 * 3).view(200, 3) // 150  # 0..3: four categories
    words = [[f"w{r}.{c}" for c in range(3)] for r in range(200)]
    figure = plots.category_heatmap(categories, words, words, ["a", "b", "c", "d"], [str(r) for r in range(200)],
                                    ["x", "y", "z"], "blocks", first_row=150, highlight_row=160)
    trace = figure.data[0]
    assert len(trace.z) == plots.MAX_SIDE and trace.customdata[0][0] == "w72.0"  # rows 72-199
    assert trace.text is None  # 128 rows: too many for a word per cell
    assert list(trace.colorbar.ticktext) == ["a", "b", "c", "d"] and (trace.zmin, trace.zmax) == (-3.5, 0.5)
    # the first category at the top of the colour bar (a learner found the last there, the rows' order reversed):
    # its value, the bar's greatest, takes the scale's top colour, which is its own
    assert list(trace.colorbar.tickvals) == [0, -1, -2, -3] and trace.colorscale[-1][1] == plots.CATEGORY_COLOURS[0]
    assert [trace.colorscale[2 * k][1] for k in range(4)] == [plots.CATEGORY_COLOURS[k] for k in (3, 2, 1, 0)]
    assert "(rows 72–199 of 200)" in figure.layout.title.text.replace("<br>", " ")


def book_view(ctx, source, inputs="your text", text=TEXT):
    return model_tab.model_view(ctx, source, None, text, SCORE, 0, 0, -1, 0, *GPT_SWITCHES, False, inputs)


@pytest.mark.parametrize("source", list(model_tab.BOOK_SOURCES))
@pytest.mark.parametrize("inputs", model_tab.BOOK_INPUTS)
def test_each_notebooks_own_model_draws_its_heads_what_they_read_and_its_shapes(ctx, source, inputs):
    notebook = model_tab.BOOK_SOURCES[source]
    result = book_view(ctx, source, inputs)
    book = anatomy.book_model(notebook, TEXT, inputs == model_tab.BOOK_INPUTS[1])
    assert result.heading.startswith(f"### {source}") and "**Look for:**" in result.heading
    assert len(result.heading.split("<details>")[0].split()) <= 60 + len(book.description.split())
    drawn = figures(result)
    assert len(drawn) == len(book.weights) + 1  # a grid of heads per layer, then what each head reads
    for figure in drawn:
        json.loads(figure.to_json())
    heads_num = book.weights[0].shape[0]
    grid = drawn[0]
    panels = sum((trace.hovertemplate or "").startswith("head ") for trace in grid.data)
    assert panels == min(heads_num, plots.MAX_GRID_PANELS)
    table = [line for line in result.numbers.splitlines() if line.startswith("|")]
    assert len(table) == len(book.shapes) + 2  # the header, its rule and one row per shape
    for row in book.shapes:
        assert f"`{row.notebook}`" in result.numbers and f"`{tuple(row.here)}`" in result.numbers
    if notebook == "002" and inputs == model_tab.BOOK_INPUTS[1]:  # the notebook's own sizes: its shapes, batch 1
        for row in book.shapes:
            assert row.notebook.replace("[30, ", "[1, ") == f"torch.Size({list(row.here)})"


def test_the_notebooks_printed_shapes_are_what_notebook_002_prints():
    from notebook_seeds import seed_file
    printed = seed_file("002").read_text(encoding="utf-8")
    for step, shape in anatomy.book_models.NOTEBOOK_002_PRINTED:
        assert f"{step}: {shape}" in printed


def test_004s_heads_read_their_own_slices_and_002s_read_everything(ctx):
    sliced = anatomy.book_model("004", TEXT)
    assert sliced.reads.tolist() == [[1.0] * 8 + [0.0] * 8, [0.0] * 8 + [1.0] * 8]
    assert bool((anatomy.book_model("002", TEXT).reads == 1).all())
    for book in (sliced, anatomy.book_model("003", TEXT)):  # causal: nothing above the diagonal
        for weights in book.weights:
            assert torch.count_nonzero(weights.triu(diagonal=1)) == 0
            assert_close(weights.sum(-1), torch.ones(weights.shape[:2]))
    encoder = anatomy.book_model("002", TEXT).weights[0]
    future = torch.ones(encoder.shape[-2:], dtype=torch.bool).triu(diagonal=1)
    assert bool((encoder[:, future] > 0).all())  # unmasked: every query reads every later token


def test_a_book_model_reads_at_most_64_characters_and_refuses_an_empty_text(ctx):
    result = book_view(ctx, "notebook 004's sliced heads", text="abc" * 40)
    assert "first 64 characters" in result.heading
    assert anatomy.book_model("004", "abc" * 40).weights[0].shape == (2, 64, 64)
    handler = functools.partial(friendly(model_tab.model_view), ctx)
    with pytest.raises(gr.Error, match="(?i)the text is empty"):
        handler("notebook 003's two-layer transformer", None, "", SCORE, 0, 0, -1, 0, *GPT_SWITCHES, False)
    with pytest.raises(gr.Error, match="inputs"):
        handler("notebook 003's two-layer transformer", None, TEXT, SCORE, 0, 0, -1, 0, *GPT_SWITCHES, False,
                "a hat")


# ------------------------------------------------------------------------------------------------ pictures first

def deck_settings(source, level=SCORE, forget=False, inputs=model_tab.BOOK_INPUTS[0]):
    return [source, "shakespeare-char", TEXT, level, 1, 2, -1, 3, *GPT_SWITCHES, forget, inputs, ""]


def unlevelled(settings):
    return settings[:3] + settings[4:]


@pytest.mark.parametrize("source,forget", [("trained checkpoint", False), ("trained checkpoint", True),
                                           ("textbook inputs", False), ("textbook inputs", True)])
def test_every_level_opens_with_its_picture_and_one_look_for_line(ctx, source, forget):
    """Pictures first (issue 29): the transpose note was 321 words in one paragraph, level 4 with its switches 241.
    Now each level shows its title, one "Look for:" line and its figures; the rest (and the numbers) fold away."""
    every = json.loads(model_tab.model_deck(ctx, *unlevelled(deck_settings(source, forget=forget))))
    assert list(every["views"]) == list(LEVEL_TITLES)
    for title, shown in every["views"].items():
        heading, picture, numbers, _ = shown["texts"]
        lines = heading.split("\n\n")
        assert lines[0] == f"### {title}" and lines[1].startswith("**Look for:**"), (title, heading)
        assert "<details><summary>more</summary>" in heading, title
        caption = " ".join(re.findall(r'<p class="tp-caption">(.*?)</p>', picture))  # the rest: labels, a fold
        assert visible_words(heading) + visible_words(caption) + visible_words(numbers) <= 60, (title, heading)
        if not (source == "textbook inputs" and title == MODEL):  # the book's inputs have no LM head: no chart
            assert shown["figures"][0] is not None, title
        assert bool(picture) == (forget and title == HEADS), title  # the blocks moving: the what-if's picture
    assert visible_words("a <details><summary>more: b c</summary>\n\nd e f\n\n</details> g <p>h</p>") == 6
    forgotten = every["views"][HEADS]["texts"][1]
    assert forgotten.count('<p class="tp-caption">') == forgotten.count("<summary>more</summary>") == int(forget)


@pytest.mark.parametrize("source", list(model_tab.BOOK_SOURCES))
def test_each_notebooks_own_model_opens_with_its_pictures_and_one_look_for_line(ctx, source):
    page = json.loads(model_tab.model_page(ctx, *deck_settings(source)))
    (heading, picture, numbers, part), = [shown["texts"] for shown in page["views"].values()]
    assert heading.split("\n\n")[1].startswith("**Look for:**") and part == ""
    assert visible_words(heading) + visible_words(numbers) <= 60, heading
    assert model_tab.model_deck(ctx, *unlevelled(deck_settings(source))) == gr.skip()  # one view, already sent


def test_the_block_sends_its_figures_first_with_no_empty_slot_between(ctx):
    """Without dropout the block's second figure is absent: its figures come first, so no empty column sits between
    two charts (a stranger once saw them numbered 1, 3, 4)."""
    result = view(ctx, BLOCK)
    assert result.plot_b is None  # no dropout: no "after dropout" figure
    texts, drawn = model_tab._deck_view(result)
    assert [figure is not None for figure in drawn] == [True, True, True, False]
    assert [figure.layout.title.text for figure in drawn[:3]] == [figure.layout.title.text
                                                                  for figure in figures(result)]
    page = json.loads(model_tab.model_page(ctx, *deck_settings("trained checkpoint", BLOCK)))
    assert [figure is None for figure in page["views"][BLOCK]["figures"]] == [False, False, False, True]


def test_the_first_answer_and_the_deck_share_a_key_that_every_setting_but_the_level_changes(ctx):
    first = json.loads(model_tab.model_page(ctx, *deck_settings("trained checkpoint", HEAD)))
    every = json.loads(model_tab.model_deck(ctx, *unlevelled(deck_settings("trained checkpoint"))))
    assert list(first["views"]) == [HEAD] and first["key"] == every["key"]
    assert first["views"][HEAD] == every["views"][HEAD]  # the page draws the same view either way
    other = json.loads(model_tab.model_page(ctx, *deck_settings("trained checkpoint", HEAD, forget=True)))
    assert other["key"] != first["key"]


@pytest.mark.parametrize("source,layer", [("trained checkpoint", 3), ("textbook inputs", 0)])
def test_the_forgotten_transpose_picture_moves_each_block_where_the_reshape_puts_it(ctx, source, layer):
    """Each (head, token) block sits at (row token, column head) joined right and moves to where notebook 002's
    .view without .transpose puts it: checked against torch's own reshape of labelled blocks and ForgottenJoin."""
    result = model_tab.model_view(ctx, source, "shakespeare-char", TEXT, HEADS, layer, 0, -1, 0, *GPT_SWITCHES, True)
    if source == "textbook inputs":
        forgotten = anatomy.textbook_heads("batched", forget_transpose=True).forgotten
    else:
        loaded = ctx.checkpoint("shakespeare-char")
        ids = walkthrough.prepare_text(TEXT, loaded.tokenizer, loaded.config.context_size).ids
        forgotten = anatomy.all_heads(loaded.model, ids, layer, forget_transpose=True).forgotten
    h, T = forgotten.heads_num, forgotten.length
    labels = torch.arange(h * T).view(1, h, T, 1)  # (B, h, T, d=1): block (head, token) labelled head·T + token
    right = labels.transpose(1, 2).contiguous().view(1, T, h)[0]  # notebook 001: transpose, then view
    wrong = labels.contiguous().view(1, T, h)[0]  # notebook 002: the view alone
    blocks = re.findall(r'<div class="tp-block" data-head="(\d+)" data-token="(\d+)" data-right="(\d+),(\d+)" '
                        r'data-wrong="(\d+),(\d+)"[^>]*style="[^"]*background:([^;]+);--x0:(\d+)px;--y0:(\d+)px;'
                        r'--x1:(\d+)px;--y1:(\d+)px', result.picture)
    assert len(blocks) == h * T
    width = height = None
    for head, token, right_row, right_block, row, block, colour, x0, y0, x1, y1 in (map(_number, b) for b in blocks):
        assert right[right_row, right_block] == head * T + token and wrong[row, block] == head * T + token
        assert forgotten.block_sources[row, block].tolist() == [head, token]
        assert colour == transpose_picture.colour(head) == plots.CATEGORY_COLOURS[head % len(plots.CATEGORY_COLOURS)]
        width = width or (x0 // head if head else None)
        height = height or (y0 // token if token else None)
        assert (x0, y0) == (right_block * (width or 0), right_row * (height or 0)) or not (width and height)
        assert (x1, y1) == (block * (width or 0), row * (height or 0)) or not (width and height)
    assert width and height  # the positions were checked at the blocks' own size
    assert len(transpose_picture.CAPTION.split()) <= 60


def _number(text: str):
    return int(text) if text.isdigit() else text


def test_a_spare_deck_is_the_servers_own_answer_for_that_layer_or_head(ctx):
    """The page draws a new layer or head from the spare decks it holds, and the server's answer for it must then
    draw nothing again: each spare is model_page's answer for its layer and head (the same key, the same view), made
    around the deck on screen and named as the page names those values. None for the model level (it reads neither)
    or a notebook's model."""
    settings = deck_settings("trained checkpoint")  # level 1 at layer 1, head 2 of a 4 x 4 model
    sent = json.loads(model_tab.model_spare(ctx, *settings))
    assert sent["key"] == json.loads(model_tab.model_page(ctx, *settings))["key"] and sent["label"] == "1|2|-1"
    # the nearest: a layer or a head on either side, at the query on screen
    assert sorted(sent["spares"]) == ["0|2|-1", "1|1|-1", "1|3|-1", "2|2|-1"]
    for label in ("0|2|-1", "1|3|-1"):  # another layer, another head
        layer, head, _ = map(int, label.split("|"))
        assert sent["spares"][label] == json.loads(model_tab.model_page(ctx, *settings[:4], layer, head, *settings[6:]))
    assert model_tab.spare_label(1.0, 2, -1) == "1|2|-1" and model_tab.spare_label(0.5, 2, 3.0) == "0.5|2|3"
    assert model_tab.model_spare(ctx, *deck_settings("trained checkpoint", MODEL)) == gr.skip()
    assert model_tab.model_spare(ctx, *deck_settings(next(iter(model_tab.BOOK_SOURCES)))) == gr.skip()


def _laid_over(base, changes, key=None):
    """The page's merge (page/chart_deck.js), to read a spare sent as changes: objects key by key (null removes the
    key), a figure's traces one by one, anything else replaced."""
    if key == "data" and isinstance(base, list) and isinstance(changes, list):
        return [_laid_over(base[i] if i < len(base) else {}, trace) for i, trace in enumerate(changes)]
    if not (isinstance(base, dict) and isinstance(changes, dict)):
        return changes
    out = dict(base)
    for name, value in changes.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = _laid_over(base.get(name), value, name)
    return out


@pytest.mark.parametrize("level", [SCORE, LEVEL_TITLES[1], LEVEL_TITLES[3]])
def test_a_query_spare_is_the_servers_own_answer_for_that_position(ctx, level):
    """A new query position is drawn from the spares the page holds, and the server's answer for it then draws
    nothing again: each spare, laid over the view on screen it is sent as changes to, is model_page's answer for its
    position (the same key, the same view). The nearest positions the page lacks come first; those it holds
    (``held``, its labels) are not made again."""
    settings = deck_settings("trained checkpoint", level)  # layer 1, head 2, the last query position
    raw = model_tab.model_page(ctx, *settings)
    page = json.loads(raw)
    sent = json.loads(model_tab.model_query_spare(ctx, *settings, "[]"))
    assert sent["key"] == page["key"] and sent["label"] == "1|2|-1"
    T = len(TEXT)
    nearest = [T - 2 - n for n in range(model_tab.QUERY_SPARES_PER_ROUND)]
    assert sorted(sent["spares"]) == sorted(f"1|2|{p}" for p in nearest)
    bases = sent["bases"]
    assert len(json.dumps(sent)) < len(raw) * model_tab.QUERY_SPARES_PER_ROUND / 3  # changes, not whole views
    for position in (nearest[0], nearest[-1]):
        spare = sent["spares"][f"1|2|{position}"]
        answer = json.loads(model_tab.model_page(ctx, *settings[:6], position, *settings[7:]))
        assert spare["key"] == answer["key"]
        (name, view), = spare["views"].items()
        whole = [figure if figure is None or "base" not in figure else
                 _laid_over(bases[figure["base"]], figure["changes"]) for figure in view["figures"]]
        assert name in answer["views"] and whole == answer["views"][name]["figures"]
        assert view["texts"] == answer["views"][name]["texts"]

    held = json.dumps([f"1|2|{p}" for p in nearest])
    again = json.loads(model_tab.model_query_spare(ctx, *settings, held))
    assert sorted(again["spares"]) == sorted(f"1|2|{nearest[-1] - 1 - n}"
                                             for n in range(model_tab.QUERY_SPARES_PER_ROUND))
    every = json.dumps([f"1|2|{p}" for p in range(T)])
    assert model_tab.model_query_spare(ctx, *settings, every) == gr.skip()


@pytest.mark.parametrize("held", ["[[[[" * 5000 + "]]]]" * 5000, "{}", "not json", "x" * 100_000, None, "[1, 2]"])
def test_a_list_of_spares_held_that_is_not_one_makes_a_round_as_if_none_were_held(ctx, held):
    """The labels held come from the page, so anything can arrive: the round is made as if none were held."""
    settings = deck_settings("trained checkpoint")
    sent = json.loads(model_tab.model_query_spare(ctx, *settings, held))
    assert len(sent["spares"]) == model_tab.QUERY_SPARES_PER_ROUND


def test_no_query_spares_for_the_levels_that_do_not_make_them_or_without_a_checkpoint(ctx):
    for settings in (deck_settings("trained checkpoint", LEVEL_TITLES[2]), deck_settings("trained checkpoint", MODEL),
                     deck_settings("textbook inputs"), deck_settings(next(iter(model_tab.BOOK_SOURCES)))):
        assert model_tab.model_query_spare(ctx, *settings, "[]") == gr.skip()
