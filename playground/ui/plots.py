"""Plotly figure builders the tabs share: heatmaps, bars, lines, grids (the Why tab's chain: chain_plots).

Heatmaps use index axes with tick labels, so repeated tokens ("l", "l" in "hello") keep their own
rows and columns; masked cells (NaN or -inf, or marked) are grey rather than a colour that reads as a value.
Titles wrap (``wrap_title``) so they fit a phone's plot, and every figure leaves a swipe to the page
(``swipes_scroll``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch

CELL_TEXT_LIMIT = 32
VALUE_ROW_PX = 22  # a heatmap row's height when its cells print their values
MAX_SIDE = 128  # a heatmap draws at most this many rows and columns: the figure's size never grows with T²
MAX_FEATURE_COLUMNS = 384  # a features heatmap's columns (the heads side by side): every head of a 192-wide model
MASKED_COLOUR = "#c7ccd4"  # masked cells: a grey neither colour scale uses
HIGHLIGHT_COLOUR = "#f97316"  # the frame around the chosen query's row
# Plotly's default for outside tick labels ("hide past div") measures every label against the chart at each draw: some
# two thirds of redrawing a 42 x 42 heatmap with its 84 labels. Automargin already makes room for them: none is hidden
LABELS_OVERFLOW = "allow"
TITLE_WIDTH = 40  # characters per title line: a phone's plot is about 340 px wide
TITLE_FONT_SIZE = 15
LABEL_ROOM_PX = 280  # the narrowest plot area a sparse axis must fit (three plots in a row, or a phone)
BAR_LABEL_ROOM_PX = 560  # a bar chart's plot area beside another on a desktop page
COLORBAR_PX = 12  # a heatmap's colour bar (Plotly's own is 30)
LABEL_CHAR_PX, LABEL_GAP_PX = 7, 8  # a tick label's width per character at font size 10-12, and the gap after it
LABEL_STEPS = (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128)


def swipes_scroll(figure: go.Figure) -> go.Figure:
    """No drag-zoom: a swipe over the chart scrolls the page on a phone (Plotly takes a touch for a zoom box
    otherwise, and only the margins scrolled). Hover still works; on a desktop the toolbar's zoom turns it on."""
    figure.update_layout(dragmode=False)
    return figure


def _display_label(label: str) -> str:
    return {"\n": "\\n", " ": "␣", "\t": "\\t"}.get(label, label)


def wrap_title(title: str, width: int = TITLE_WIDTH) -> str:
    """Break a title into lines of at most ``width`` characters at spaces (Plotly never wraps a title itself);
    a "<br>" already in it starts a new line, and a word longer than ``width`` keeps its own line.

        wrap_title("attention weights · row sums 1.0000–1.0000", 20) -> "attention weights ·<br>row sums 1.0000–1.0000"
    """
    lines = []
    for part in title.split("<br>"):
        line = ""
        for word in part.split(" "):
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        lines.append(line)
    return "<br>".join(lines)


def _title_layout(title: str) -> tuple[dict, int]:
    """The layout's title (wrapped, a size that fits a phone) and the top margin its lines need."""
    text = wrap_title(title) if title else ""
    lines = text.count("<br>") + 1 if text else 0
    return dict(text=text, font=dict(size=TITLE_FONT_SIZE)), 24 + 20 * lines


def word_tick_angle(labels: Sequence[str], room_px: int = LABEL_ROOM_PX) -> int:
    """0, or -45 for labels that are words ("embeddings", "block 1") too wide to stand side by side in
    ``room_px`` (a phone's plot): slanted, each keeps its place. Short labels (characters) are thinned instead."""
    longest = max((len(label) for label in labels), default=0)
    if longest <= 3 or len(labels) * (longest * LABEL_CHAR_PX + LABEL_GAP_PX) <= room_px:
        return 0
    return -45


def label_step(count: int, longest: int, room_px: int = LABEL_ROOM_PX, label_px: int | None = None) -> int:
    """Label every k-th of ``count`` ticks so labels ``longest`` characters long (or ``label_px`` wide, gap and all)
    never overlap in ``room_px``.

        label_step(48, 3) -> 5   (d0, d5, ... d45: ten labels of about 29 px in 300 px)
    """
    fits = max(1, room_px // (label_px or longest * LABEL_CHAR_PX + LABEL_GAP_PX))
    for step in LABEL_STEPS:
        if math.ceil(count / step) <= fits:
            return step
    return math.ceil(count / fits)


def heatmap(matrix: torch.Tensor | Sequence[Sequence[float]], row_labels: Sequence[str] | None = None,
            col_labels: Sequence[str] | None = None, title: str = "", *, colorscale: str = "Blues",
            zmid: float | None = None, zmin: float | None = None, zmax: float | None = None,
            show_values: bool | None = None, height: int | None = None, x_title: str = "", y_title: str = "",
            first_row: int = 0, first_col: int = 0, masked: torch.Tensor | None = None,
            masked_hover: str | Sequence[Sequence[str]] = "masked (−∞)", highlight_row: int | None = None,
            sparse_columns: bool = False, max_cols: int = MAX_SIDE) -> go.Figure:
    """A heatmap of a 2-D matrix; hover shows the exact value, row, column and labels.

    Built from numpy arrays (Plotly validates lists element by element, arrays at once): a 64 x 64
    matrix takes a few milliseconds. A matrix larger than MAX_SIDE × MAX_SIDE is drawn as a window of that
    size starting at (``first_row``, ``first_col``), its title saying which rows and columns are shown, so a
    figure costs the same at T = 1024 as at T = 128 (``max_cols`` columns: MAX_FEATURE_COLUMNS for the heads' features
    side by side). ``zmin``/``zmax`` fix the colour scale (to compare two
    figures); otherwise it follows the data.

    Masked cells (−∞ or NaN, and those ``masked`` marks True, e.g. weights that are 0 because their score was
    −∞) are drawn grey, never in a colour that reads as a value, and say ``masked_hover`` on hover: one text, or
    one per cell (the matrix's shape) where grey means more than one thing.
    ``highlight_row`` (a row number of the whole matrix) gets a frame when it is in the window.
    ``sparse_columns`` labels every k-th column so labels never overlap (feature axes: d0, d5, d10...);
    hover still names every column. Titles wrap onto lines that fit a phone.
    """
    values = torch.as_tensor(matrix, dtype=torch.float64).detach().cpu()
    if values.dim() == 1:
        values = values[None, :]
    total_rows, total_cols = values.shape
    if masked is not None:
        masked = torch.as_tensor(masked, dtype=torch.bool).detach().cpu().reshape(values.shape)
    row_labels = list(row_labels) if row_labels is not None else list(range(total_rows))
    col_labels = list(col_labels) if col_labels is not None else list(range(total_cols))
    first_row = max(0, min(int(first_row), max(0, total_rows - MAX_SIDE)))
    first_col = max(0, min(int(first_col), max(0, total_cols - max_cols)))
    row_slice, col_slice = slice(first_row, first_row + MAX_SIDE), slice(first_col, first_col + max_cols)
    v = values[row_slice, col_slice].numpy()
    rows, cols = v.shape
    row_numbers, col_numbers = range(first_row, first_row + rows), range(first_col, first_col + cols)
    row_labels = [_display_label(str(s)) for s in row_labels[row_slice]]
    col_labels = [_display_label(str(s)) for s in col_labels[col_slice]]
    if (rows, cols) != (total_rows, total_cols):  # name the cut side(s) only
        window = [f"rows {first_row}–{first_row + rows - 1} of {total_rows}"] if rows != total_rows else []
        window += [f"columns {first_col}–{first_col + cols - 1} of {total_cols}"] if cols != total_cols else []
        # "all of it)" keeps to one line (no-break spaces): a phone's title read "...all of" above "it)"
        title = f"{title}<br>" * bool(title) + f"({', '.join(window)}; export for all\u00a0of\u00a0it)"
    finite = np.isfinite(v)
    if masked is not None:
        finite &= ~masked[row_slice, col_slice].numpy()
    z = np.where(finite, v, np.nan)
    filled = np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
    # One hover string per cell, as a fixed-width unicode array: Plotly copies such arrays with one memcpy.
    row_part = np.array([f"row {n} ({label}), " for n, label in zip(row_numbers, row_labels)])[:, None]
    col_part = np.array([f"column {n} ({label})<br>value " for n, label in zip(col_numbers, col_labels)])[None, :]
    grey = masked_hover if isinstance(masked_hover, str) else np.asarray(masked_hover)[row_slice, col_slice]
    value_part = np.where(finite, np.char.mod("%.6g", filled), grey)
    hover = np.char.add(np.char.add(row_part, col_part), value_part)
    if show_values is None:
        show_values = rows <= CELL_TEXT_LIMIT and cols <= CELL_TEXT_LIMIT
    text = np.where(finite, np.char.mod("%.2f", filled), "") if show_values else None
    # a 1 px gap between cells where each cell is large enough to print its value; a bigger matrix draws without
    # (Plotly paints gapped cells one by one at full size, gapless ones as one small image: half the drawing time)
    gap = 1 if rows <= CELL_TEXT_LIMIT and cols <= CELL_TEXT_LIMIT else 0
    trace = go.Heatmap(
        z=z, x=np.arange(cols), y=np.arange(rows), colorscale=colorscale, zmid=zmid, zmin=zmin, zmax=zmax,
        customdata=hover,
        hovertemplate="%{customdata}<extra></extra>", text=text, texttemplate="%{text}" if show_values else None,
        hoverongaps=True, xgap=gap, ygap=gap,
    )
    traces = [trace]
    if not finite.all():  # the masked cells, grey: a colour no value on either colour scale takes
        traces.append(go.Heatmap(z=np.where(finite, np.nan, 1.0), x=np.arange(cols), y=np.arange(rows),
                                 colorscale=[[0.0, MASKED_COLOUR], [1.0, MASKED_COLOUR]], showscale=False,
                                 hoverinfo="skip", xgap=gap, ygap=gap))
    # rows of 13 px; 22 px where each cell prints its value (at 13 px the numbers were 5 px tall)
    height = height or min(1800, max(300, 100 + (VALUE_ROW_PX if show_values else 13) * rows))
    # every token keeps its label while there is room: about 12 px per row; every column (MAX_SIDE at most)
    y_step = max(1, math.ceil(rows / max(1, (height - 100) // 12)))
    x_step = label_step(cols, max((len(label) for label in col_labels), default=1)) if sparse_columns else 1
    tick_font = dict(size=10 if max(rows, cols) > 32 else 12)
    title_layout, top = _title_layout(title)
    layout = dict(
        title=title_layout, height=height,
        margin=dict(l=60, r=20, t=top, b=50),
        xaxis=dict(tickmode="array", tickvals=list(range(0, cols, x_step)), tickfont=tick_font, tickangle=0,
                   ticktext=col_labels[::x_step], title=dict(text=x_title), side="bottom", automargin=True,
                   ticklabeloverflow=LABELS_OVERFLOW),
        yaxis=dict(tickmode="array", tickvals=list(range(0, rows, y_step)), tickfont=tick_font,
                   ticktext=row_labels[::y_step], title=dict(text=y_title), autorange="reversed", automargin=True,
                   ticklabeloverflow=LABELS_OVERFLOW),
        plot_bgcolor="#f3f3f3" if not finite.all() else "rgba(0,0,0,0)",
    )
    if highlight_row is not None and first_row <= highlight_row < first_row + rows:
        layout["shapes"] = [row_frame(highlight_row - first_row, cols)]
    figure = go.Figure(traces, layout)
    return swipes_scroll(figure)


TOUCH_COLUMN_PX = 12  # a heatmap column's least width on a touch screen: every key's label stands under its column


def wide_on_touch(figure: go.Figure, columns: int) -> go.Figure:
    """Marks ``figure``, a heatmap ``columns`` wide, to keep TOUCH_COLUMN_PX per column on a touch screen: where its
    slot is narrower, the page's chart deck draws it wider and scrolls it sideways (``meta.touch_columns``)."""
    meta = dict(figure.layout.meta or {})
    figure.update_layout(meta={**meta, "touch_columns": {"count": columns, "px": TOUCH_COLUMN_PX}})
    return figure


def row_frame(row: int, cols: int) -> dict:
    """The frame around row ``row`` (of the window drawn) of a heatmap ``cols`` wide: the chosen query's row."""
    return dict(type="rect", xref="x", yref="y", x0=-0.5, x1=cols - 0.5, y0=row - 0.5, y1=row + 0.5,
                line=dict(color=HIGHLIGHT_COLOUR, width=3), fillcolor="rgba(0,0,0,0)", name="chosen query")


MATCH_COLOUR = "#16a34a"  # the frames around the keys (and their values) the chosen query matches best


def match_frames(rows: Sequence[int], cols: int, first_row: int = 0, total_rows: int = MAX_SIDE) -> list[dict]:
    """Frames around ``rows`` (row numbers of the whole matrix) of a heatmap ``cols`` wide whose window starts at
    ``first_row`` (clamped as heatmap clamps it): the keys the chosen query matches best, on K and on V. Rows outside
    the window get none.

        match_frames([40, 41], 48) -> two green frames, at y 40 and 41
    """
    first_row = max(0, min(int(first_row), max(0, total_rows - MAX_SIDE)))
    return [dict(row_frame(row - first_row, cols), line=dict(color=MATCH_COLOUR, width=3), name="best key")
            for row in rows if first_row <= row < first_row + MAX_SIDE]


def heatmap_traces_json(traces: Sequence[dict]) -> list[dict]:
    """Plotly's own JSON of heatmap traces given as their properties (numpy arrays written as a figure's to_json writes
    them, base64 typed arrays), in one pass: changes to lay over a heatmap that was sent as JSON."""
    if not traces:
        return []
    written = json.loads(go.Figure([go.Heatmap(**trace) for trace in traces]).to_json())["data"]
    return [{name: value for name, value in trace.items() if name != "type"} for trace in written]


def cell_outline(row: int, column: int, n: int) -> list[dict]:
    """Shapes that outline row ``row`` of an (n, n) vocabulary_heatmap and, inside it, the cell at ``column``: the
    cells one position of a text reads (the Why tab's query row and key, the key's row and the target)."""
    band = dict(type="rect", xref="x", yref="y", x0=-0.5, x1=n - 0.5, y0=row - 0.5, y1=row + 0.5,
                line=dict(color="#212529", width=1, dash="dot"), fillcolor="rgba(0,0,0,0)", layer="above")
    cell = dict(band, x0=column - 0.5, x1=column + 0.5, line=dict(color="#212529", width=2))
    return [band, cell]


def vocabulary_heatmap(matrix: torch.Tensor, labels: Sequence[str], title: str = "", *, x_title: str = "",
                       y_title: str = "", hover: str = "%{y} → %{x}: %{z:.3f}") -> go.Figure:
    """A (n, n) table over n distinct tokens (a head's QK or OV circuit), on a red-blue scale centred at 0.

    The labels are distinct, so the axes are categories named by them and the hover reads them from the axes: no
    hover string per cell, a fifth of ``heatmap``'s bytes for a 65 x 65 table (a click waited on moving them).
    Values are sent to 4 significant digits.
    """
    shown = [_display_label(str(label)) for label in labels]
    if len(set(shown)) != len(shown):
        raise ValueError("vocabulary_heatmap needs distinct labels: repeated ones would share a row")
    values = torch.as_tensor(matrix, dtype=torch.float64).detach().cpu().numpy()
    largest = float(np.nanmax(np.abs(values))) if values.size else 1.0
    z = np.vectorize(lambda v: float(f"{v:.4g}"))(values) if values.size else values
    n = len(shown)
    title_layout, top = _title_layout(title)
    step = max(1, math.ceil(n / 48))  # about 48 tick labels at most on each axis; the hover names every cell
    # a thin colour bar: Plotly's own takes a sixth of a phone's chart, the cells squeezed beside it
    figure = go.Figure(go.Heatmap(z=z, x=shown, y=shown, colorscale="RdBu", zmid=0.0, zmin=-largest, zmax=largest,
                                  hovertemplate=hover + "<extra></extra>", xgap=0, ygap=0,
                                  colorbar=dict(thickness=COLORBAR_PX, tickfont=dict(size=10))))
    figure.update_layout(title=title_layout, height=min(900, max(320, 140 + 9 * n)),
                         margin=dict(l=60, r=20, t=top, b=50),
                         xaxis=dict(type="category", tickmode="array", tickvals=shown[::step], tickangle=0,
                                    tickfont=dict(size=10), title=dict(text=x_title)),
                         yaxis=dict(type="category", tickmode="array", tickvals=shown[::step], autorange="reversed",
                                    tickfont=dict(size=10), title=dict(text=y_title)))
    return swipes_scroll(figure)


def line_chart(series: dict[str, Sequence[Sequence[float]]], title: str = "", x_title: str = "step",
               y_title: str = "loss", height: int = 360) -> go.Figure:
    """One line per named series of [x, y] points (y never below zero: a loss, a rate). With no points yet the
    chart says so on axes from 0, instead of Plotly's empty default of -1 to 4."""
    figure = go.Figure()
    for name, points in series.items():
        if points:
            figure.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers"
                                        if len(points) < 30 else "lines", name=name))
    figure.update_layout(title=title, height=height, xaxis_title=x_title, yaxis_title=y_title,
                         margin=dict(l=60, r=20, t=50, b=50), legend=dict(orientation="h", y=1.12))
    figure.update_yaxes(rangemode="nonnegative")
    if not figure.data:
        figure.update_xaxes(range=[0, 1])
        figure.update_yaxes(range=[0, 1])
        figure.add_annotation(text="no points yet", x=0.5, y=0.5, showarrow=False, font=dict(color="#888"))
    return swipes_scroll(figure)


CURVE_COLOURS = ("#e4572e", "#17bebb", "#4c6ef5", "#76b041", "#9c27b0", "#ff9f1c", "#6d6875")


LEGEND_WIDTH = 40  # characters per line of a curve's legend: a phone's width, where a one-line legend was cut off


def legend_lines(label: str, width: int = LEGEND_WIDTH) -> str:
    """A legend label broken between its " · " parts into lines of about ``width`` characters (a part longer than
    that is wrapped at spaces)::

        "tiny-1 (this run) · adamw, lr 0.012 (linear), batch 32 · 240,288 parameters"
        -> "tiny-1 (this run) ·<br>adamw, lr 0.012 (linear), batch 32 ·<br>240,288 parameters"
    """
    lines: list[str] = []
    for part in label.split(" · "):
        if lines and len(lines[-1]) + 3 + len(part) <= width:
            lines[-1] += " · " + part
        else:
            lines.append(part)
    return " ·<br>".join(wrap_title(line, width) for line in lines)


def curve_overlay(runs: Sequence[tuple[str, Sequence[Sequence[float]], Sequence[Sequence[float]]]], title: str = "",
                  x_title: str = "step", height: int = 420) -> go.Figure:
    """Runs' curves on one chart: per run (label, validation [x, loss] points, training [x, loss] points), one
    colour each, validation solid with markers, training thin and faded."""
    figure = go.Figure()
    for index, (label, val, train) in enumerate(runs):
        colour = CURVE_COLOURS[index % len(CURVE_COLOURS)]
        if train:
            figure.add_trace(go.Scatter(x=[p[0] for p in train], y=[p[1] for p in train], mode="lines",
                                        name=f"{label} (train)", line=dict(color=colour, width=1), opacity=0.35,
                                        legendgroup=label, showlegend=False))
        if val:
            figure.add_trace(go.Scatter(x=[p[0] for p in val], y=[p[1] for p in val], mode="lines+markers",
                                        name=legend_lines(label), line=dict(color=colour, width=2.5),
                                        legendgroup=label))
    layout, top = _title_layout(title)
    figure.update_layout(title=layout, height=height, xaxis_title=x_title, yaxis_title="loss",
                         margin=dict(l=60, r=20, t=top, b=50), legend=dict(orientation="h", y=-0.22))
    return swipes_scroll(figure)


BAR_GAP_PX = 4  # between single characters under their bars (8 made 42 characters skip every other one)
SLANTED_LABEL_PX = 18  # the width a label slanted at -45 degrees takes along the axis, however long it is
WRAP_WIDTH = 10  # characters per line of a word label wrapped under its bar ("attention<br>output")


def _bar_ticks(shown: list[str], room_px: int, important: Sequence[int]) -> tuple[list[int], list[str], int]:
    """(tick positions, their text, angle) for bars labelled ``shown``: every label while they fit in ``room_px``
    (words wrapped onto short lines, then slanted); past that the ``important`` positions first (the query, the
    largest weights), then every k-th of the rest where it keeps clear of them.

        42 characters in 560 px -> all 42;  7 block points ("residual add 2 (block output)") -> all 7, slanted
    """
    n, text, angle = len(shown), shown, 0
    longest = max((len(label) for label in shown), default=1)
    if longest > 3:  # words, which a phone cannot thin: wrapped where they fit a phone, else slanted
        text = [wrap_title(label, WRAP_WIDTH) for label in shown]
        longest = max(len(line) for label in text for line in label.split("<br>"))
        if n * (longest * LABEL_CHAR_PX + LABEL_GAP_PX) > min(room_px, LABEL_ROOM_PX):
            text, angle = shown, -45
    width = SLANTED_LABEL_PX if angle else longest * LABEL_CHAR_PX + (BAR_GAP_PX if longest == 1 else LABEL_GAP_PX)
    spacing = label_step(n, longest, room_px, width)
    if spacing == 1:
        return list(range(n)), text, angle
    picked: list[int] = []  # two labels closer than ``spacing`` would overlap
    for position in [i for i in dict.fromkeys(important) if 0 <= i < n] + list(range(0, n, spacing)):
        if all(abs(position - other) >= spacing for other in picked):
            picked.append(position)
    picked.sort()
    return picked, [text[i] for i in picked], angle


def bar_meta(shown: Sequence[str], important: Sequence[int], room_px: int = BAR_LABEL_ROOM_PX) -> dict | None:
    """For bars of characters with ``important`` positions, what the page's chart deck needs to choose their labels
    again where its plot is narrower than the ``room_px`` they were chosen for (``meta.important``, ``label_px``,
    ``room_px``): the page's CSS thinned a phone's labels by their order, and the tallest bar lost its label. None for
    words, which are wrapped or slanted here."""
    longest = max((len(label) for label in shown), default=1)
    if not important or longest > 3:
        return None
    return {"important": [int(i) for i in important], "room_px": room_px,
            "label_px": longest * LABEL_CHAR_PX + (BAR_GAP_PX if longest == 1 else LABEL_GAP_PX)}


def bar_chart(labels: Sequence[str], values: Sequence[float], title: str = "", y_title: str = "",
              height: int = 300, *, masked: Sequence[bool] | None = None,
              masked_hover: str = "masked (−∞)", room_px: int = BAR_LABEL_ROOM_PX,
              important: Sequence[int] = ()) -> go.Figure:
    """Bars at index positions labelled with ``labels`` (repeats keep their own bar).

    Every label is shown while they fit in ``room_px`` (a desktop half-width plot); words wrap onto short lines,
    then slant. Where they cannot all fit, the ``important`` positions are labelled first (the query, the largest
    weights), then evenly spaced others; the hover names every bar with its position.

    Positions ``masked`` marks True get no bar but a grey × on the axis that says ``masked_hover``, so a masked
    score never reads as a score of 0.
    """
    shown = [_display_label(str(s)) for s in labels]
    hidden = [bool(m) for m in masked] if masked is not None else [False] * len(values)
    heights = [None if m else value for value, m in zip(values, hidden)]
    figure = go.Figure(go.Bar(x=list(range(len(values))), y=heights, customdata=shown,
                              hovertemplate="%{x} · %{customdata}: %{y:.6g}<extra></extra>", showlegend=False))
    if any(hidden):
        where = [i for i, m in enumerate(hidden) if m]
        figure.add_trace(go.Scatter(x=where, y=[0.0] * len(where), mode="markers", showlegend=False,
                                    marker=dict(symbol="x-thin", size=9, line=dict(width=2, color="#8b93a1")),
                                    customdata=[shown[i] for i in where],
                                    hovertemplate=f"%{{x}} · %{{customdata}}: {masked_hover}<extra></extra>"))
    title_layout, top = _title_layout(title)
    tickvals, ticktext, angle = _bar_ticks(shown, room_px, important)
    figure.update_layout(title=title_layout, height=height, yaxis_title=y_title,
                         margin=dict(l=60, r=20, t=top, b=50), meta=bar_meta(shown, important, room_px),
                         xaxis=dict(tickmode="array", tickvals=tickvals, ticktext=ticktext, tickangle=angle,
                                    automargin=True, ticklabeloverflow=LABELS_OVERFLOW))
    return swipes_scroll(figure)


def bar_chart_changes(labels: Sequence[str], values: Sequence[float], title: str = "", *,
                      colours: Sequence[str] | None = None, room_px: int = BAR_LABEL_ROOM_PX,
                      important: Sequence[int] = ()) -> dict:
    """What ``bar_chart(labels, values, title)`` (bars coloured ``colours``) holds that another bar chart of the kind
    does not, as a plain dict {"data": [trace], "layout": {...}}: laid over one drawn bar chart (chart_deck's bases),
    it is that chart, with no figure built (a page sent a chart per position of a text builds hundreds of them).
    Values are sent to 4 significant digits."""
    shown = [_display_label(str(s)) for s in labels]
    tickvals, ticktext, angle = _bar_ticks(shown, room_px, important)
    title_layout, top = _title_layout(title)
    trace = {"x": list(range(len(values))), "y": [float(f"{v:.4g}") for v in values], "customdata": shown}
    if colours is not None:
        trace["marker"] = {"color": list(colours)}
    meta = bar_meta(shown, important, room_px)
    return {"data": [trace], "layout": {"title": title_layout, "margin": {"t": top}, **({"meta": meta} if meta else {}),
                                        "xaxis": {"tickvals": tickvals, "ticktext": ticktext, "tickangle": angle}}}


def horizontal_bar_chart(labels: Sequence[str], values: Sequence[float], title: str = "", x_title: str = "", *,
                         colours: Sequence[str] | None = None, row_px: int = 18,
                         touch_row_px: int | None = None) -> go.Figure:
    """One bar a row, the first at the top, each named on the left: a few dozen named parts stay readable on a
    phone, where their names slanted under vertical bars ran into each other. The hover names each bar, and a
    hover or click anywhere in a row picks its bar (``hovermode="y"``): a bar near zero is a few pixels wide.
    ``touch_row_px``: rows this tall on a touch screen, where a tap on a row does something (the layout's
    ``meta.touch_height``, which the page's chart deck draws it at)."""
    shown = [_display_label(str(s)) for s in labels]
    title_layout, top = _title_layout(title)
    figure = go.Figure(go.Bar(x=[float(v) for v in values], y=list(range(len(values))), orientation="h",
                              customdata=shown, hovertemplate="%{customdata}: %{x:.6g}<extra></extra>",
                              showlegend=False, marker=dict(color=list(colours)) if colours is not None else None))
    longest = max((len(label) for label in shown), default=1)
    # a margin that fits the longest name, set here: Plotly's automargin draws the chart twice at every change
    figure.update_layout(title=title_layout, height=top + 50 + row_px * len(values), xaxis_title=x_title, hovermode="y",
                         margin=dict(l=12 + LABEL_CHAR_PX * longest, r=20, t=top, b=50),
                         meta=dict(touch_height=top + 50 + touch_row_px * len(values)) if touch_row_px else None,
                         yaxis=dict(tickmode="array", tickvals=list(range(len(values))), ticktext=shown,
                                    autorange="reversed", automargin=False))
    return swipes_scroll(figure)


def heatmap_grid(matrices: Sequence[Sequence[torch.Tensor]], row_titles: Sequence[str], col_titles: Sequence[str],
                 labels: Sequence[str] | None = None, title: str = "") -> go.Figure:
    """A grid of small heatmaps sharing one colour scale: rows (e.g. implementations) × columns (e.g. heads)."""
    from plotly.subplots import make_subplots

    rows, cols = len(matrices), max(len(r) for r in matrices)
    figure = make_subplots(rows=rows, cols=cols, row_titles=list(row_titles), column_titles=list(col_titles),
                           horizontal_spacing=min(0.02, 0.5 / max(1, cols - 1)),
                           vertical_spacing=min(0.03, 0.5 / max(1, rows - 1)))
    shown = [_display_label(str(s)) for s in labels] if labels else None
    for i, row in enumerate(matrices):
        for j, matrix in enumerate(row):
            values = torch.as_tensor(matrix, dtype=torch.float64).cpu()
            size = values.shape[0]
            ticks = shown or [str(k) for k in range(size)]
            figure.add_trace(go.Heatmap(
                z=values.tolist(), x=list(range(size)), y=list(range(size)), coloraxis="coloraxis",
                customdata=[[f"{ticks[r]} → {ticks[c]}" for c in range(size)] for r in range(size)],
                hovertemplate=f"{row_titles[i]} · {col_titles[j]}<br>%{{customdata}}: %{{z:.6g}}<extra></extra>",
            ), row=i + 1, col=j + 1)
            figure.update_yaxes(autorange="reversed", showticklabels=False, row=i + 1, col=j + 1)
            figure.update_xaxes(showticklabels=False, row=i + 1, col=j + 1)
    figure.update_layout(title=title, height=max(320, 150 * rows + 80), coloraxis=dict(colorscale="Blues"),
                         margin=dict(l=20, r=140, t=60, b=20))
    return swipes_scroll(figure)


# ------------------------------------------------------------------------------------- the Model tab's figures

MAX_GRID_PANELS = 16  # heads drawn side by side in one grid; more are named in the title, not drawn
GRID_CELLS = 4 * MAX_SIDE * MAX_SIDE  # cells one grid draws at most: panels share them, each side at most MAX_SIDE
GRID_COLUMNS = 2  # panels per row: on a phone four in a row were 41 px wide strips, their titles run together


def frame_cell(figure: go.Figure, row: int, col: int, first_row: int = 0, first_col: int = 0) -> go.Figure:
    """Frame cell (row, col) of a ``heatmap`` drawn from (``first_row``, ``first_col``), when it is in the window."""
    r, c = row - first_row, col - first_col
    if 0 <= r < MAX_SIDE and 0 <= c < MAX_SIDE:
        figure.add_shape(type="rect", xref="x", yref="y", x0=c - 0.5, x1=c + 0.5, y0=r - 0.5, y1=r + 0.5,
                         line=dict(color=HIGHLIGHT_COLOUR, width=3), fillcolor="rgba(0,0,0,0)", name="chosen cell")
    return figure


def column_groups(figure: go.Figure, size: int, names: Sequence[str], first_col: int = 0) -> go.Figure:
    """Mark a ``heatmap``'s columns as groups of ``size`` (a head's features): a divider between groups and each
    group's name under its middle, for the groups in the window from ``first_col``; hover still names every column.

        column_groups(figure, 48, ["head 0", ..., "head 3"]) on 192 columns -> 3 dividers, 4 names
    """
    cols = len(figure.data[0].x)
    middles, shown = [], []
    for group, name in enumerate(names):
        start, end = group * size - first_col, (group + 1) * size - first_col  # the window's columns
        if end <= 0 or start >= cols:
            continue
        middles.append((max(start, 0) + min(end, cols) - 1) / 2)
        shown.append(name)
        if 0 < start < cols:
            figure.add_shape(type="line", xref="x", yref="paper", x0=start - 0.5, x1=start - 0.5, y0=0, y1=1,
                             line=dict(color="#111827", width=2), name="between groups")
    figure.update_xaxes(tickmode="array", tickvals=middles, ticktext=shown, tickangle=word_tick_angle(shown))
    return figure


def grid_side(panels: int, length: int) -> int:
    """How many rows and columns of each (length x length) panel a grid of ``panels`` draws: GRID_CELLS shared.

        grid_side(4, 200) -> 128        grid_side(16, 200) -> 64
    """
    panels = max(1, min(panels, MAX_GRID_PANELS))
    return max(1, min(length, MAX_SIDE, math.isqrt(GRID_CELLS // panels)))


def heads_grid(weights: torch.Tensor, labels: Sequence[str], title: str = "", *, masked: torch.Tensor | None = None,
               highlight_row: int | None = None, start: int = 0) -> go.Figure:
    """Every head's (T, T) attention weights side by side, on one 0-1 colour scale: weights (h, T, T).

    At most MAX_GRID_PANELS heads and ``grid_side`` rows and columns of each (a window from position ``start``),
    so the figure's size never grows with h·T²; the title says what was left out. ``masked`` (T, T) cells are
    grey (weights that are 0 because their score was −∞). ``highlight_row`` is framed in every panel.
    """
    from plotly.subplots import make_subplots

    values = torch.as_tensor(weights, dtype=torch.float64).detach().cpu()
    heads, T = values.size(0), values.size(1)
    shown_heads = min(heads, MAX_GRID_PANELS)
    side = grid_side(shown_heads, T)
    start = max(0, min(int(start), T - side))
    window = slice(start, start + side)
    names = [_display_label(str(s)) for s in list(labels)[window]]
    cols = min(GRID_COLUMNS, shown_heads)
    rows = math.ceil(shown_heads / cols)
    notes = []
    if shown_heads < heads:
        notes.append(f"heads 0–{shown_heads - 1} of {heads}")
    if side < T:
        notes.append(f"tokens {start}–{start + side - 1} of {T}")
    if notes:
        title = f"{title}<br>" * bool(title) + f"({', '.join(notes)})"
    figure = make_subplots(rows=rows, cols=cols, subplot_titles=[f"head {i}" for i in range(shown_heads)],
                           horizontal_spacing=0.03, vertical_spacing=0.08 if rows > 1 else 0.0)
    hidden = (torch.as_tensor(masked, dtype=torch.bool).cpu()[window, window].numpy() if masked is not None
              else np.zeros((side, side), dtype=bool))
    ticks = list(range(0, side, max(1, math.ceil(side / 8))))
    positions = np.arange(start, start + side)  # the axes count positions in the whole text, so hover names them
    for head in range(shown_heads):
        z = values[head, window, window].numpy()
        z = np.where(hidden, np.nan, z)
        row, col = head // cols + 1, head % cols + 1
        figure.add_trace(go.Heatmap(z=z, x=positions, y=positions, coloraxis="coloraxis", xgap=1, ygap=1,
                                    hovertemplate=f"head {head}<br>query %{{y}} → key %{{x}}: %{{z:.4f}}"
                                                  "<extra></extra>"), row=row, col=col)
        if hidden.any():
            figure.add_trace(go.Heatmap(z=np.where(hidden, 1.0, np.nan), x=positions, y=positions,
                                        colorscale=[[0.0, MASKED_COLOUR], [1.0, MASKED_COLOUR]], showscale=False,
                                        hoverinfo="skip", xgap=1, ygap=1), row=row, col=col)
        figure.update_yaxes(autorange="reversed", tickmode="array", tickvals=[start + t for t in ticks],
                            ticktext=[names[t] for t in ticks], showticklabels=col == 1, row=row, col=col)
        figure.update_xaxes(tickmode="array", tickvals=[start + t for t in ticks], ticktext=[names[t] for t in ticks],
                            row=row, col=col)
        # square cells: the panel shrinks to a square (constrain="domain"), so its tick labels stay beside it
        figure.update_yaxes(scaleanchor="x" if head == 0 else f"x{head + 1}", constrain="domain", row=row, col=col)
        figure.update_xaxes(constrain="domain", row=row, col=col)
        if highlight_row is not None and start <= highlight_row < start + side:
            figure.add_shape(type="rect", x0=start - 0.5, x1=start + side - 0.5, y0=highlight_row - 0.5,
                             y1=highlight_row + 0.5, row=row, col=col, line=dict(color=HIGHLIGHT_COLOUR, width=2),
                             fillcolor="rgba(0,0,0,0)")
    title_layout, top = _title_layout(title)
    figure.update_layout(title=title_layout, height=min(1400, 80 + top + 300 * rows),
                         coloraxis=dict(colorscale="Blues", cmin=0.0, cmax=1.0, colorbar=dict(thickness=14)),
                         margin=dict(l=50, r=20, t=top + 30, b=40), plot_bgcolor="rgba(0,0,0,0)",
                         meta=dict(grid=dict(panels=shown_heads)))  # the chart deck stacks a few on a phone
    return swipes_scroll(figure)


def _row_window(first_row: int, total_rows: int) -> tuple[int, slice, slice]:
    """At most MAX_SIDE rows from ``first_row`` (clamped so the window stays full) and the first MAX_SIDE columns."""
    first_row = max(0, min(int(first_row), max(0, total_rows - MAX_SIDE)))
    return first_row, slice(first_row, first_row + MAX_SIDE), slice(0, MAX_SIDE)


def _window_title(title: str, first_row: int, rows: int, cols: int, total_rows: int, total_cols: int) -> str:
    """``title`` with the cut named when the window shows less than the whole: "(rows 64–191 of 300)"."""
    if rows == total_rows and cols == total_cols:
        return title
    cut = [f"rows {first_row}–{first_row + rows - 1} of {total_rows}"] if rows != total_rows else []
    cut += [f"columns 0–{cols - 1} of {total_cols}"] if cols != total_cols else []
    return f"{title}<br>" * bool(title) + f"({', '.join(cut)})"


def text_heatmap(values: torch.Tensor | Sequence[Sequence[float]], text: Sequence[Sequence[str]],
                 row_labels: Sequence[str], col_labels: Sequence[str], title: str = "", *, colorscale: str = "Blues",
                 zmin: float | None = 0.0, zmax: float | None = 1.0, x_title: str = "", y_title: str = "",
                 highlight_row: int | None = None, first_row: int = 0, height: int | None = None,
                 show_values: bool = False) -> go.Figure:
    """A heatmap whose cells show a word (a predicted character) over a colour (its probability).

    Index axes with tick labels, like ``heatmap``; at most MAX_SIDE rows (a window from ``first_row``, named in
    the title) and MAX_SIDE columns. Hover shows the row, the column, the word and the value; ``show_values``: each
    cell shows its value under its word too (a few large cells, read on a phone without a tap).
    """
    full = torch.as_tensor(values, dtype=torch.float64).detach().cpu()
    total_rows, total_cols = full.shape
    first_row, rows_shown, cols_shown = _row_window(first_row, total_rows)
    v = full[rows_shown, cols_shown].numpy()
    rows, cols = v.shape
    words = np.array([[_display_label(str(w)) for w in list(line)[cols_shown]] for line in list(text)[rows_shown]],
                     dtype=str).reshape(rows, cols)
    row_names = [_display_label(str(s)) for s in list(row_labels)[rows_shown]]
    col_names = [_display_label(str(s)) for s in list(col_labels)[cols_shown]]
    title = _window_title(title, first_row, rows, cols, total_rows, total_cols)
    row_part = np.array([f"{name}, " for name in row_names])[:, None]
    col_part = np.array([f"{name}: " for name in col_names])[None, :]
    hover = np.char.add(np.char.add(np.char.add(row_part, col_part), words), np.char.mod(" %.4f", v))
    figure = go.Figure(go.Heatmap(
        z=v, x=np.arange(cols), y=np.arange(rows), colorscale=colorscale, zmin=zmin, zmax=zmax, text=words,
        texttemplate="%{text}<br>%{z:.2f}" if show_values else "%{text}", customdata=hover,
        hovertemplate="%{customdata}<extra></extra>", xgap=1, ygap=1,
        # values in the cells: the colour bar's room goes to them, at a size that reads on a phone (they were tiny)
        showscale=not show_values, textfont=dict(size=12) if show_values else None))
    height = height or min(1800, max(260, 110 + 18 * rows))
    y_step = max(1, math.ceil(rows / max(1, (height - 100) // 12)))
    title_layout, top = _title_layout(title)
    figure.update_layout(
        title=title_layout, height=height, margin=dict(l=60, r=20, t=top, b=50),
        xaxis=dict(tickmode="array", tickvals=list(range(cols)), ticktext=col_names, title=dict(text=x_title),
                   tickangle=word_tick_angle(col_names), automargin=True),
        yaxis=dict(tickmode="array", tickvals=list(range(0, rows, y_step)), ticktext=row_names[::y_step],
                   title=dict(text=y_title), autorange="reversed", automargin=True))
    if highlight_row is not None and 0 <= highlight_row - first_row < rows:
        r = highlight_row - first_row
        figure.add_shape(type="rect", x0=-0.5, x1=cols - 0.5, y0=r - 0.5, y1=r + 0.5,
                         line=dict(color=HIGHLIGHT_COLOUR, width=3), fillcolor="rgba(0,0,0,0)")
    return swipes_scroll(figure)


# ------------------------------------------------------------------------------------- categories (which head)

CATEGORY_COLOURS = ("#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3", "#b3de69", "#fccde5", "#ffffb3",
                    "#bc80bd", "#ccebc5", "#ffed6f", "#d9d9d9")  # ColorBrewer Set3: light, so black words read
CATEGORY_TEXT_ROWS, CATEGORY_TEXT_COLUMNS = 64, 16  # cells get their word up to this size


def category_heatmap(categories: torch.Tensor | Sequence[Sequence[int]], words: Sequence[Sequence[str]],
                     hover: Sequence[Sequence[str]], category_names: Sequence[str], row_labels: Sequence[str],
                     col_labels: Sequence[str], title: str = "", *, first_row: int = 0,
                     highlight_row: int | None = None, x_title: str = "", y_title: str = "",
                     height: int | None = None) -> go.Figure:
    """A heatmap of whole-number categories 0..n-1 (e.g. which head a block was read from), one colour each, named
    in the colour bar; each cell shows its word (up to CATEGORY_TEXT_ROWS x CATEGORY_TEXT_COLUMNS cells) and says
    its ``hover`` line. Index axes with tick labels; at most MAX_SIDE rows (a window from ``first_row``) and
    MAX_SIDE columns, the cut named in the title (``words`` and ``hover`` rows outside the window are never read).
    More than len(CATEGORY_COLOURS) categories reuse the colours.
    """
    full = torch.as_tensor(categories, dtype=torch.long).detach().cpu()
    total_rows, total_cols = full.shape
    first_row, rows_shown, cols_shown = _row_window(first_row, total_rows)
    v = full[rows_shown, cols_shown].numpy()
    rows, cols = v.shape
    n = max(1, len(category_names))
    # z is minus the category: a colour bar runs up from its least value, and this one reads category 0 at its top, in
    # the order the rows and the picture's legend read (head 0 at the top, not the last head)
    colours = [CATEGORY_COLOURS[k % len(CATEGORY_COLOURS)] for k in reversed(range(n))]
    scale = [[edge, colour] for k, colour in enumerate(colours) for edge in (k / n, (k + 1) / n)]
    cell_words = np.array([[_display_label(str(w)) for w in list(line)[cols_shown]]
                           for line in list(words)[rows_shown]], dtype=str).reshape(rows, cols)
    cell_hover = np.array([list(line)[cols_shown] for line in list(hover)[rows_shown]], dtype=str).reshape(rows, cols)
    row_names = [_display_label(str(s)) for s in list(row_labels)[rows_shown]]
    col_names = [_display_label(str(s)) for s in list(col_labels)[cols_shown]]
    title = _window_title(title, first_row, rows, cols, total_rows, total_cols)
    show_words = rows <= CATEGORY_TEXT_ROWS and cols <= CATEGORY_TEXT_COLUMNS
    tick_step = max(1, math.ceil(n / 16))
    figure = go.Figure(go.Heatmap(
        z=-v, x=np.arange(cols), y=np.arange(rows), colorscale=scale, zmin=-(n - 0.5), zmax=0.5,
        text=cell_words if show_words else None, texttemplate="%{text}" if show_words else None,
        textfont=dict(size=10 if rows > 32 else 12, color="#1f2937"), customdata=cell_hover,
        hovertemplate="%{customdata}<extra></extra>", xgap=1, ygap=1,
        colorbar=dict(tickmode="array", tickvals=[-k for k in range(0, n, tick_step)],
                      ticktext=[str(name) for name in category_names][::tick_step], thickness=14)))
    height = height or min(1800, max(300, 110 + 16 * rows))
    y_step = max(1, math.ceil(rows / max(1, (height - 100) // 12)))
    x_step = label_step(cols, max((len(name) for name in col_names), default=1))
    title_layout, top = _title_layout(title)
    figure.update_layout(
        title=title_layout, height=height, margin=dict(l=60, r=20, t=top, b=50),
        xaxis=dict(tickmode="array", tickvals=list(range(0, cols, x_step)), ticktext=col_names[::x_step],
                   title=dict(text=x_title), tickangle=0, automargin=True),
        yaxis=dict(tickmode="array", tickvals=list(range(0, rows, y_step)), ticktext=row_names[::y_step],
                   title=dict(text=y_title), autorange="reversed", automargin=True))
    if highlight_row is not None and 0 <= highlight_row - first_row < rows:
        r = highlight_row - first_row
        figure.add_shape(type="rect", x0=-0.5, x1=cols - 0.5, y0=r - 0.5, y1=r + 0.5,
                         line=dict(color=HIGHLIGHT_COLOUR, width=3), fillcolor="rgba(0,0,0,0)", name="chosen query")
    return swipes_scroll(figure)
