"""Plotly figure builders. The only module besides ``playground.ui`` that imports plotly.

Heatmaps use index axes with tick labels, so repeated tokens ("l", "l" in "hello") keep their own
rows and columns; masked cells (NaN or -inf) stay blank rather than taking a colour that reads as a value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go
import torch

CELL_TEXT_LIMIT = 32
MAX_SIDE = 128  # a heatmap draws at most this many rows and columns: the figure's size never grows with T²


def _display_label(label: str) -> str:
    return {"\n": "\\n", " ": "␣", "\t": "\\t"}.get(label, label)


def heatmap(matrix: torch.Tensor | Sequence[Sequence[float]], row_labels: Sequence[str] | None = None,
            col_labels: Sequence[str] | None = None, title: str = "", *, colorscale: str = "Blues",
            zmid: float | None = None, zmin: float | None = None, zmax: float | None = None,
            show_values: bool | None = None, height: int | None = None, x_title: str = "", y_title: str = "",
            first_row: int = 0, first_col: int = 0) -> go.Figure:
    """A heatmap of a 2-D matrix; hover shows the exact value, row, column and labels.

    Built from numpy arrays (Plotly validates lists element by element, arrays at once): a 64 x 64
    matrix takes a few milliseconds. A matrix larger than MAX_SIDE × MAX_SIDE is drawn as a window of that
    size starting at (``first_row``, ``first_col``), its title saying which rows and columns are shown, so a
    figure costs the same at T = 1024 as at T = 128. ``zmin``/``zmax`` fix the colour scale (to compare two
    figures); otherwise it follows the data.
    """
    values = torch.as_tensor(matrix, dtype=torch.float64).detach().cpu()
    if values.dim() == 1:
        values = values[None, :]
    total_rows, total_cols = values.shape
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
    if (rows, cols) != (total_rows, total_cols):
        title = (f"{title} (rows {first_row}–{first_row + rows - 1} of {total_rows}, columns {first_col}–"
                 f"{first_col + cols - 1} of {total_cols}; export for all of it)")
    finite = np.isfinite(v)
    z = np.where(finite, v, np.nan)
    filled = np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)
    # One hover string per cell, as a fixed-width unicode array: Plotly copies such arrays with one memcpy.
    row_part = np.array([f"row {n} ({label}), " for n, label in zip(row_numbers, row_labels)])[:, None]
    col_part = np.array([f"column {n} ({label})<br>value " for n, label in zip(col_numbers, col_labels)])[None, :]
    value_part = np.where(finite, np.char.mod("%.6g", filled), "masked (−∞)")
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
    height = height or min(1800, max(300, 100 + 13 * rows))
    # every token keeps its label while there is room: about 12 px per row; every column (MAX_SIDE at most)
    y_step = max(1, math.ceil(rows / max(1, (height - 100) // 12)))
    x_step = 1
    tick_font = dict(size=10 if max(rows, cols) > 32 else 12)
    layout = dict(
        title=dict(text=title), height=height,
        margin=dict(l=60, r=20, t=50, b=50),
        xaxis=dict(tickmode="array", tickvals=list(range(0, cols, x_step)), tickfont=tick_font, tickangle=0,
                   ticktext=col_labels[::x_step], title=dict(text=x_title), side="bottom"),
        yaxis=dict(tickmode="array", tickvals=list(range(0, rows, y_step)), tickfont=tick_font,
                   ticktext=row_labels[::y_step], title=dict(text=y_title), autorange="reversed"),
        plot_bgcolor="#f3f3f3" if not finite.all() else "rgba(0,0,0,0)",
    )
    figure = go.Figure(trace, layout)
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
              height: int = 300) -> go.Figure:
    """Bars at index positions labelled with ``labels`` (repeats keep their own bar)."""
    shown = [_display_label(str(s)) for s in labels]
    figure = go.Figure(go.Bar(x=list(range(len(values))), y=list(values), customdata=shown,
                              hovertemplate="%{customdata}: %{y:.6g}<extra></extra>"))
    figure.update_layout(title=title, height=height, yaxis_title=y_title, margin=dict(l=60, r=20, t=50, b=50),
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
