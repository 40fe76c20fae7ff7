"""Heatmaps: index axes with token labels, grey masked cells, a framed row, sparse feature labels, wrapped titles."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from playground.ui import plots
from playground.ui.plots import (
    CELL_TEXT_LIMIT,
    LABEL_CHAR_PX,
    LABEL_GAP_PX,
    LABEL_ROOM_PX,
    TITLE_WIDTH,
    bar_chart,
    heatmap,
    label_step,
    line_chart,
    wrap_title,
)


def test_repeated_tokens_keep_their_own_rows_and_columns():
    tokens = list("hello")
    figure = heatmap(torch.arange(25.0).view(5, 5), tokens, tokens)
    trace = figure.data[0]
    assert list(trace.x) == list(range(5)) and list(trace.y) == list(range(5))
    assert list(figure.layout.yaxis.ticktext) == tokens and list(figure.layout.xaxis.tickvals) == list(range(5))
    assert figure.layout.yaxis.autorange == "reversed"  # row 0 on top, as the matrix is printed


def test_spaces_and_newlines_are_visible_labels():
    figure = heatmap(torch.zeros(3, 3), ["a", " ", "\n"], ["a", " ", "\n"])
    assert list(figure.layout.xaxis.ticktext) == ["a", "␣", "\\n"]


def test_masked_cells_are_blank_and_say_so_on_hover():
    scores = torch.tensor([[1.0, float("-inf")], [2.0, 3.0]])
    trace = heatmap(scores, ["a", "b"], ["a", "b"]).data[0]
    assert math.isnan(trace.z[0][1]) and trace.z[1][0] == 2.0  # no colour that reads as a value
    assert trace.text[0][1] == "" and trace.text[1][1] == "3.00"
    assert "masked" in trace.customdata[0][1] and "row 1 (b), column 0 (a)" in trace.customdata[1][0]


def test_values_printed_in_cells_only_up_to_the_limit():
    small = heatmap(torch.rand(CELL_TEXT_LIMIT, CELL_TEXT_LIMIT)).data[0]
    large = heatmap(torch.rand(CELL_TEXT_LIMIT + 1, CELL_TEXT_LIMIT + 1)).data[0]
    assert small.text is not None and large.text is None


def test_every_token_keeps_its_label_up_to_64():
    tokens = [chr(ord("a") + i % 26) for i in range(64)]
    figure = heatmap(torch.rand(64, 64), tokens, tokens)
    assert list(figure.layout.yaxis.ticktext) == tokens and list(figure.layout.xaxis.ticktext) == tokens


def test_bars_keep_repeated_labels_apart():
    figure = bar_chart(list("aa"), [0.25, 0.75])
    assert list(figure.data[0].x) == [0, 1] and list(figure.layout.xaxis.ticktext) == ["a", "a"]


def test_many_bars_label_every_kth_and_hover_names_each():
    """128 characters of context side by side: every label ran into one smear; now every 4th is written."""
    labels = [chr(ord("a") + i % 26) for i in range(128)]
    figure = bar_chart(labels, [1 / 128] * 128)
    assert list(figure.layout.xaxis.tickvals) == list(range(0, 128, 4))
    assert list(figure.layout.xaxis.ticktext) == labels[::4] and list(figure.data[0].customdata) == labels
    assert len(bar_chart(list("abcdefghij"), [0.1] * 10).layout.xaxis.tickvals) == 10  # a short row: every one
    assert len(bar_chart(list("To be, or not to be: that is the question."), [0.1] * 42).layout.xaxis.tickvals) == 42
    kept = bar_chart(labels, [1 / 128] * 128, important=[61, 126]).layout.xaxis.tickvals  # a top weight, the query
    assert {126, 61} <= set(kept) and 60 not in kept and 124 not in kept  # and nothing crowds them
    assert figure.data[0].hovertemplate.startswith("%{x} · %{customdata}")  # a skipped bar's position and label


def test_a_large_matrix_is_drawn_as_a_bounded_window():
    from playground.ui.plots import MAX_SIDE

    tokens = [f"t{i}" for i in range(1024)]
    values = torch.arange(1024 * 1024, dtype=torch.float64).view(1024, 1024)
    figure = heatmap(values, tokens, tokens, "weights", first_row=500, first_col=2000)
    trace = figure.data[0]
    assert len(trace.z) == MAX_SIDE and len(trace.z[0]) == MAX_SIDE
    assert trace.z[0][0] == 500 * 1024 + (1024 - MAX_SIDE)  # the column start is clamped to the last window
    assert "row 500 (t500), column 896 (t896)" in trace.customdata[0][0]
    assert "rows 500–627 of 1024" in figure.layout.title.text and "export" in figure.layout.title.text
    only_columns = heatmap(torch.rand(42, 192)).layout.title.text.replace("<br>", " ")
    assert only_columns == "(columns 0–127 of 192; export for all\u00a0of\u00a0it)"  # the rows are all there
    assert len(figure.to_json()) < 4_000_000  # the same size at T = 1024 as at T = 128
    assert list(figure.layout.xaxis.ticktext) == tokens[896:]  # every column keeps its label


def test_a_fixed_colour_scale_for_comparisons():
    trace = heatmap(torch.rand(4, 4), zmin=0.0, zmax=1.0).data[0]
    assert (trace.zmin, trace.zmax) == (0.0, 1.0)


def test_marked_cells_are_grey_and_say_why_on_hover():
    weights = torch.tensor([[1.0, 0.0], [0.25, 0.75]])
    masked = torch.tensor([[False, True], [False, False]])
    figure = heatmap(weights, ["a", "b"], ["a", "b"], masked=masked,
                     masked_hover="masked: weight exactly 0 because the score was −∞")
    values, grey = figure.data
    assert math.isnan(values.z[0][1]) and values.z[0][0] == 1.0 and values.text[0][1] == ""
    assert values.customdata[0][1].endswith("masked: weight exactly 0 because the score was −∞")
    assert values.customdata[1][0].endswith("value 0.25")
    assert grey.z[0][1] == 1.0 and math.isnan(grey.z[0][0]) and grey.hoverinfo == "skip" and not grey.showscale
    assert len(heatmap(weights).data) == 1  # nothing masked: no grey layer


def test_the_chosen_row_is_framed_and_the_frame_follows_the_window():
    figure = heatmap(torch.rand(6, 6), highlight_row=2)
    (frame,) = figure.layout.shapes
    assert (frame.y0, frame.y1, frame.x0, frame.x1) == (1.5, 2.5, -0.5, 5.5)
    paged = heatmap(torch.rand(300, 300), highlight_row=250, first_row=186, first_col=186)
    assert paged.layout.shapes[0].y0 == 250 - 172 - 0.5  # the window starts at 172 = 300 - 128
    assert heatmap(torch.rand(300, 300), highlight_row=250).layout.shapes == ()  # outside the window: no frame


def test_the_best_keys_are_framed_in_green_where_the_window_shows_them():
    """Step 2 frames the rows of the keys a query matches best on K and V: in the window's own row numbers."""
    frames = plots.match_frames([40, 3], 48, total_rows=42)
    assert [(f["y0"], f["y1"], f["x1"], f["line"]["color"]) for f in frames] == [
        (39.5, 40.5, 47.5, plots.MATCH_COLOUR), (2.5, 3.5, 47.5, plots.MATCH_COLOUR)]
    paged = plots.match_frames([250, 10], 8, first_row=186, total_rows=300)  # the window starts at 172
    assert [f["y0"] for f in paged] == [250 - 172 - 0.5]  # row 10 is outside it: no frame


def test_heatmap_traces_are_written_as_a_figure_writes_them():
    """Changes laid over a heatmap sent as JSON must name its arrays as the figure's own JSON does (base64)."""
    z = torch.rand(3, 5, dtype=torch.float64)
    written = json.loads(heatmap(z).to_json())["data"][0]
    (changes,) = plots.heatmap_traces_json([dict(z=z.numpy(), y=np.arange(3), zmin=-1.0)])
    assert changes["z"] == written["z"] and changes["y"] == written["y"] and changes["zmin"] == -1.0
    assert "type" not in changes and plots.heatmap_traces_json([]) == []


def test_feature_axes_are_labelled_sparsely_so_labels_never_overlap():
    features = [f"d{i}" for i in range(48)]
    figure = heatmap(torch.rand(5, 48), list("abcde"), features, sparse_columns=True)
    xaxis = figure.layout.xaxis
    step = label_step(48, 3)
    assert step > 1 and list(xaxis.tickvals) == list(range(0, 48, step)) and list(xaxis.ticktext) == features[::step]
    assert len(xaxis.tickvals) * (3 * LABEL_CHAR_PX + LABEL_GAP_PX) <= LABEL_ROOM_PX
    assert "column 47 (d47)" in figure.data[0].customdata[0][47]  # hover still names every feature
    assert list(figure.layout.yaxis.ticktext) == list("abcde")  # the token axis keeps every label
    assert label_step(8, 3) == 1  # room for all
    assert math.ceil(1024 / label_step(1024, 5)) * (5 * LABEL_CHAR_PX + LABEL_GAP_PX) <= LABEL_ROOM_PX


def test_titles_wrap_to_fit_a_phone():
    long = "now (unscaled, no mask, τ 2): attention weights · row sums 1.0000–1.0000 · grey\u00a0=\u00a0masked"
    lines = wrap_title(long).split("<br>")
    assert len(lines) > 1 and all(len(line) <= TITLE_WIDTH for line in lines) and " ".join(lines) == long
    assert wrap_title("a<br>b") == "a<br>b" and wrap_title("x" * 50) == "x" * 50
    figure = heatmap(torch.rand(3, 3), title=long)
    assert figure.layout.title.text == wrap_title(long) and figure.layout.margin.t >= 20 * len(lines)


def test_masked_bars_are_marked_not_drawn_as_zero():
    figure = bar_chart(list("abc"), [0.5, 0.0, 0.0], masked=[False, True, True], masked_hover="masked (−∞)")
    bars, marks = figure.data
    assert list(bars.y) == [0.5, None, None] and list(marks.x) == [1, 2] and "masked (−∞)" in marks.hovertemplate
    assert len(bar_chart(list("ab"), [0.5, 0.5]).data) == 1


def test_a_loss_chart_never_reaches_below_zero_and_an_empty_one_says_so():
    empty = line_chart({"train": [], "validation": []}, "Loss")
    assert not empty.data and tuple(empty.layout.yaxis.range) == (0, 1)
    assert [a.text for a in empty.layout.annotations] == ["no points yet"]
    drawn = line_chart({"train": [(1, 4.2), (2, 3.9)]}, "Loss")
    assert drawn.layout.yaxis.rangemode == "nonnegative" and drawn.layout.yaxis.range is None
    assert not drawn.layout.annotations


def test_a_long_curve_legend_breaks_between_its_parts_to_fit_a_phone():
    """A phone cut the one-line legend off ("... adamw, lr 0.012 (linear"): it breaks at " · ", never mid-number."""
    label = "tiny-1 (this run, finished) · adamw, lr 0.012 (linear), batch 32 · 240,288 parameters"
    figure = plots.curve_overlay([(label, [(1, 2.0), (2, 1.5)], [(1, 2.1)])])
    shown = [trace.name for trace in figure.data if trace.showlegend is not False]
    assert shown == ["tiny-1 (this run, finished) ·<br>adamw, lr 0.012 (linear), batch 32 ·<br>240,288 parameters"]
    assert all(len(line) <= plots.LEGEND_WIDTH for line in shown[0].split("<br>"))
    assert plots.legend_lines("old · 5,168 parameters") == "old · 5,168 parameters"  # short: one line


def test_a_cut_heatmaps_title_never_breaks_all_of_it():
    """Issue 31: a title wrapped as "...all of" above "it)" on a phone."""
    figure = plots.heatmap(torch.zeros(300, 300), title="Attention weights, a long text")
    for width in range(8, 70):
        lines = plots.wrap_title(figure.layout.title.text.replace("<br>", " "), width).split("<br>")
        assert not any(line.startswith("it)") for line in lines), (width, lines)
        assert any(line.endswith("all\u00a0of\u00a0it)") for line in lines), (width, lines)


def test_a_vocabulary_heatmap_names_its_cells_from_its_axes():
    table = torch.tensor([[0.5, -1.25], [2.0, 0.0]])
    figure = plots.vocabulary_heatmap(table, ["a", " "], "QK")
    trace = figure.data[0]
    assert list(trace.x) == ["a", "␣"] and trace.customdata is None  # no hover string per cell
    assert trace.zmin == -2.0 and trace.zmax == 2.0 and trace.z[0][1] == -1.25
    assert figure.layout.xaxis.type == "category" and "%{y}" in trace.hovertemplate
    with pytest.raises(ValueError, match="distinct labels"):
        plots.vocabulary_heatmap(table, ["a", "a"])


def test_no_hover_or_text_template_asks_plotly_for_a_signed_fixed_format():
    """Plotly 3.3 leaves a value unformatted under "+.3f" ("+" with the fixed type f), though ".3f" and "+.3" work: a
    learner's tap on the OV table read "1.0180000066757202". Every template in the package keeps to formats it
    applies."""
    package = Path(__file__).resolve().parents[1] / "playground"
    signed_fixed = re.compile(r"%\{[^}:]*:\+[^}]*f\}")
    found = [f"{path.relative_to(package)}: {match.group(0)}" for path in sorted(package.rglob("*.py"))
             for match in signed_fixed.finditer(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_look_for_lines_name_the_strongest_cells_by_the_colour_the_scales_give_them():
    """A learner read "bright cells" over step 3's scores, whose best matches are dark blue: the scales the heatmaps
    use (Blues for weights, RdBu for scores and tables) put their largest values in a dark blue, and the lines that
    point at the strongest cells say so."""
    import plotly.graph_objects as go

    from playground.lens.anatomy.lessons import HEAD_LOOK_FOR
    from playground.lens.walkthrough.lessons import LOOK_FOR
    from playground.ui.why_sentences import LOOK_FOR_CIRCUITS

    for name in ("Blues", "RdBu"):
        red, green, blue = map(int, re.findall(r"\d+", go.Heatmap(z=[[0]], colorscale=name).colorscale[-1][1]))
        assert blue > max(red, green) and 0.2126 * red + 0.7152 * green + 0.0722 * blue < 80, name
    lines = [*LOOK_FOR, HEAD_LOOK_FOR, LOOK_FOR_CIRCUITS]
    assert not [line for line in lines if "bright" in line]
    assert "dark blue cells" in LOOK_FOR[2] and "dark blue cells" in LOOK_FOR_CIRCUITS and "dark diagonal" in \
        HEAD_LOOK_FOR
