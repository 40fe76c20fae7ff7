"""Heatmaps: index axes with token labels, blank masked cells, values in cells only while they fit."""

from __future__ import annotations

import math

import torch

from playground.plots import CELL_TEXT_LIMIT, bar_chart, heatmap


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


def test_a_large_matrix_is_drawn_as_a_bounded_window():
    from playground.plots import MAX_SIDE

    tokens = [f"t{i}" for i in range(1024)]
    values = torch.arange(1024 * 1024, dtype=torch.float64).view(1024, 1024)
    figure = heatmap(values, tokens, tokens, "weights", first_row=500, first_col=2000)
    trace = figure.data[0]
    assert len(trace.z) == MAX_SIDE and len(trace.z[0]) == MAX_SIDE
    assert trace.z[0][0] == 500 * 1024 + (1024 - MAX_SIDE)  # the column start is clamped to the last window
    assert "row 500 (t500), column 896 (t896)" in trace.customdata[0][0]
    assert "rows 500–627 of 1024" in figure.layout.title.text and "export" in figure.layout.title.text
    assert len(figure.to_json()) < 4_000_000  # the same size at T = 1024 as at T = 128
    assert list(figure.layout.xaxis.ticktext) == tokens[896:]  # every column keeps its label


def test_a_fixed_colour_scale_for_comparisons():
    trace = heatmap(torch.rand(4, 4), zmin=0.0, zmax=1.0).data[0]
    assert (trace.zmin, trace.zmax) == (0.0, 1.0)
