"""Plotly figure builders. The only module besides ``playground.ui`` that imports plotly.

Heatmaps use index axes with tick labels, so repeated tokens ("l", "l" in "hello") keep their own
rows and columns; masked cells (NaN or -inf, or marked) are grey rather than a colour that reads as a value.
Titles wrap (``wrap_title``) so they fit a phone's plot.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch

CELL_TEXT_LIMIT = 32
MAX_SIDE = 128  # a heatmap draws at most this many rows and columns: the figure's size never grows with T²
MASKED_COLOUR = "#c7ccd4"  # masked cells: a grey neither colour scale uses
HIGHLIGHT_COLOUR = "#f97316"  # the frame around the chosen query's row
TITLE_WIDTH = 40  # characters per title line: a phone's plot is about 340 px wide
TITLE_FONT_SIZE = 15
LABEL_ROOM_PX = 280  # the narrowest plot area a sparse axis must fit (three plots in a row, or a phone)
LABEL_CHAR_PX, LABEL_GAP_PX = 7, 8  # a tick label's width per character at font size 10-12, and the gap after it
LABEL_STEPS = (1, 2, 4, 5, 8, 10, 16, 20, 25, 32, 50, 64, 100, 128)


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


def label_step(count: int, longest: int, room_px: int = LABEL_ROOM_PX) -> int:
    """Label every k-th of ``count`` ticks so labels ``longest`` characters long never overlap in ``room_px``.

        label_step(48, 3) -> 5   (d0, d5, ... d45: ten labels of about 29 px in 300 px)
    """
    fits = max(1, room_px // (longest * LABEL_CHAR_PX + LABEL_GAP_PX))
    for step in LABEL_STEPS:
        if math.ceil(count / step) <= fits:
            return step
    return math.ceil(count / fits)


def heatmap(matrix: torch.Tensor | Sequence[Sequence[float]], row_labels: Sequence[str] | None = None,
            col_labels: Sequence[str] | None = None, title: str = "", *, colorscale: str = "Blues",
            zmid: float | None = None, zmin: float | None = None, zmax: float | None = None,
            show_values: bool | None = None, height: int | None = None, x_title: str = "", y_title: str = "",
            first_row: int = 0, first_col: int = 0, masked: torch.Tensor | None = None,
            masked_hover: str = "masked (−∞)", highlight_row: int | None = None,
            sparse_columns: bool = False) -> go.Figure:
    """A heatmap of a 2-D matrix; hover shows the exact value, row, column and labels.

    Built from numpy arrays (Plotly validates lists element by element, arrays at once): a 64 x 64
    matrix takes a few milliseconds. A matrix larger than MAX_SIDE × MAX_SIDE is drawn as a window of that
    size starting at (``first_row``, ``first_col``), its title saying which rows and columns are shown, so a
    figure costs the same at T = 1024 as at T = 128. ``zmin``/``zmax`` fix the colour scale (to compare two
    figures); otherwise it follows the data.

    Masked cells (−∞ or NaN, and those ``masked`` marks True, e.g. weights that are 0 because their score was
    −∞) are drawn grey, never in a colour that reads as a value, and say ``masked_hover`` on hover.
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
    first_col = max(0, min(int(first_col), max(0, total_cols - MAX_SIDE)))
    row_slice, col_slice = slice(first_row, first_row + MAX_SIDE), slice(first_col, first_col + MAX_SIDE)
    v = values[row_slice, col_slice].numpy()
    rows, cols = v.shape
    row_numbers, col_numbers = range(first_row, first_row + rows), range(first_col, first_col + cols)
    row_labels = [_display_label(str(s)) for s in row_labels[row_slice]]
    col_labels = [_display_label(str(s)) for s in col_labels[col_slice]]
    if (rows, cols) != (total_rows, total_cols):  # name the cut side(s) only
        window = [f"rows {first_row}–{first_row + rows - 1} of {total_rows}"] if rows != total_rows else []
        window += [f"columns {first_col}–{first_col + cols - 1} of {total_cols}"] if cols != total_cols else []
        title = f"{title}<br>" * bool(title) + f"({', '.join(window)}; export for all of it)"
    finite = np.isfinite(v)
    if masked is not None:
        finite &= ~masked[row_slice, col_slice].numpy()
    z = np.where(finite, v, np.nan)
    filled = np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
    # One hover string per cell, as a fixed-width unicode array: Plotly copies such arrays with one memcpy.
    row_part = np.array([f"row {n} ({label}), " for n, label in zip(row_numbers, row_labels)])[:, None]
    col_part = np.array([f"column {n} ({label})<br>value " for n, label in zip(col_numbers, col_labels)])[None, :]
    value_part = np.where(finite, np.char.mod("%.6g", filled), masked_hover)
    hover = np.char.add(np.char.add(row_part, col_part), value_part)
    if show_values is None:
        show_values = rows <= CELL_TEXT_LIMIT and cols <= CELL_TEXT_LIMIT
    text = np.where(finite, np.char.mod("%.2f", filled), "") if show_values else None
    trace = go.Heatmap(
        z=z, x=np.arange(cols), y=np.arange(rows), colorscale=colorscale, zmid=zmid, zmin=zmin, zmax=zmax,
        customdata=hover,
        hovertemplate="%{customdata}<extra></extra>", text=text, texttemplate="%{text}" if show_values else None,
        hoverongaps=True, xgap=1, ygap=1,
    )
    traces = [trace]
    if not finite.all():  # the masked cells, grey: a colour no value on either colour scale takes
        traces.append(go.Heatmap(z=np.where(finite, np.nan, 1.0), x=np.arange(cols), y=np.arange(rows),
                                 colorscale=[[0.0, MASKED_COLOUR], [1.0, MASKED_COLOUR]], showscale=False,
                                 hoverinfo="skip", xgap=1, ygap=1))
    height = height or min(1800, max(300, 100 + 13 * rows))
    # every token keeps its label while there is room: about 12 px per row; every column (MAX_SIDE at most)
    y_step = max(1, math.ceil(rows / max(1, (height - 100) // 12)))
    x_step = label_step(cols, max((len(label) for label in col_labels), default=1)) if sparse_columns else 1
    tick_font = dict(size=10 if max(rows, cols) > 32 else 12)
    title_layout, top = _title_layout(title)
    layout = dict(
        title=title_layout, height=height,
        margin=dict(l=60, r=20, t=top, b=50),
        xaxis=dict(tickmode="array", tickvals=list(range(0, cols, x_step)), tickfont=tick_font, tickangle=0,
                   ticktext=col_labels[::x_step], title=dict(text=x_title), side="bottom", automargin=True),
        yaxis=dict(tickmode="array", tickvals=list(range(0, rows, y_step)), tickfont=tick_font,
                   ticktext=row_labels[::y_step], title=dict(text=y_title), autorange="reversed", automargin=True),
        plot_bgcolor="#f3f3f3" if not finite.all() else "rgba(0,0,0,0)",
    )
    if highlight_row is not None and first_row <= highlight_row < first_row + rows:
        row = highlight_row - first_row
        layout["shapes"] = [dict(type="rect", xref="x", yref="y", x0=-0.5, x1=cols - 0.5, y0=row - 0.5,
                                 y1=row + 0.5, line=dict(color=HIGHLIGHT_COLOUR, width=3), fillcolor="rgba(0,0,0,0)",
                                 name="chosen query")]
    figure = go.Figure(traces, layout)
    return figure


def line_chart(series: dict[str, Sequence[Sequence[float]]], title: str = "", x_title: str = "step",
               y_title: str = "loss", height: int = 360) -> go.Figure:
    """One line per named series of [x, y] points."""
    figure = go.Figure()
    for name, points in series.items():
        if points:
            figure.add_trace(go.Scatter(x=[p[0] for p in points], y=[p[1] for p in points], mode="lines+markers"
                                        if len(points) < 30 else "lines", name=name))
    figure.update_layout(title=title, height=height, xaxis_title=x_title, yaxis_title=y_title,
                         margin=dict(l=60, r=20, t=50, b=50), legend=dict(orientation="h", y=1.12))
    return figure


def bar_chart(labels: Sequence[str], values: Sequence[float], title: str = "", y_title: str = "",
              height: int = 300, *, masked: Sequence[bool] | None = None,
              masked_hover: str = "masked (−∞)") -> go.Figure:
    """Bars at index positions labelled with ``labels`` (repeats keep their own bar).

    Positions ``masked`` marks True get no bar but a grey × on the axis that says ``masked_hover``, so a masked
    score never reads as a score of 0.
    """
    shown = [_display_label(str(s)) for s in labels]
    hidden = [bool(m) for m in masked] if masked is not None else [False] * len(values)
    heights = [None if m else value for value, m in zip(values, hidden)]
    figure = go.Figure(go.Bar(x=list(range(len(values))), y=heights, customdata=shown,
                              hovertemplate="%{customdata}: %{y:.6g}<extra></extra>", showlegend=False))
    if any(hidden):
        where = [i for i, m in enumerate(hidden) if m]
        figure.add_trace(go.Scatter(x=where, y=[0.0] * len(where), mode="markers", showlegend=False,
                                    marker=dict(symbol="x-thin", size=9, line=dict(width=2, color="#8b93a1")),
                                    customdata=[shown[i] for i in where],
                                    hovertemplate=f"%{{customdata}}: {masked_hover}<extra></extra>"))
    title_layout, top = _title_layout(title)
    figure.update_layout(title=title_layout, height=height, yaxis_title=y_title,
                         margin=dict(l=60, r=20, t=top, b=50),
                         xaxis=dict(tickmode="array", tickvals=list(range(len(values))), ticktext=shown))
    return figure


def heatmap_grid(matrices: Sequence[Sequence[torch.Tensor]], row_titles: Sequence[str], col_titles: Sequence[str],
                 labels: Sequence[str] | None = None, title: str = "") -> go.Figure:
    """A grid of small heatmaps sharing one colour scale: rows (e.g. implementations) × columns (e.g. heads)."""
    from plotly.subplots import make_subplots

    rows, cols = len(matrices), max(len(r) for r in matrices)
    figure = make_subplots(rows=rows, cols=cols, row_titles=list(row_titles), column_titles=list(col_titles),
                           horizontal_spacing=0.02, vertical_spacing=0.03)
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
    return figure
