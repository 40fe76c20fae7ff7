"""The Train tab's heads forming: every head's pattern scores as lines over a run's probe snapshots, the step each head
became a previous-character head marked; and the probe heatmap's marks (the causal mask grey, a line under the
1-back stripe so it cannot be read as the diagonal).

Reads the scores head_forming.snapshot_scores recorded (one dict per snapshot); draws only.

    forming_chart([{"step": 0, "previous token": [[0.1, 0.1]], ...}, {"step": 25, ...}]) -> one figure, four panels
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from playground.lens import head_scores
from playground.lens.head_forming import PREVIOUS_TOKEN_HEAD, formed_heads
from playground.ui.plots import HIGHLIGHT_COLOUR, _title_layout, heatmap, swipes_scroll

# the panels, top to bottom: the pattern's key in a snapshot and what the panel's title calls it
FORMING_PANELS = (("previous token", "previous character (1 back)"),
                  ("same token", "same character (an earlier copy)"),
                  ("first token", "first position"),
                  ("induction", "induction (a repeated random string)"))
HEAD_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                "#17becf")
LAYER_DASHES = ("solid", "dot", "dash", "longdash", "dashdot")  # heads past the tenth: a layer's own dash
FORMED_NAMED = 3  # the title names the first heads that formed, then counts the rest
PANEL_PX = 170


def head_name(layer: int, head: int) -> str:
    """The one way the app names a head: "L0 H2" (layer 0, head 2, both counted from 0)."""
    return f"L{layer} H{head}"


def formed_title(snapshots: Sequence[dict]) -> str:
    """The chart's title: which heads became previous-character heads, and when."""
    formed = formed_heads(list(snapshots))
    if not formed:
        return (f"Heads forming: no head puts {PREVIOUS_TOKEN_HEAD} of its weight on the character before yet "
                f"(step {snapshots[-1]['step']:,})")
    named = ", ".join(f"{head_name(f['layer'], f['head'])} at step {f['step']:,}" for f in formed[:FORMED_NAMED])
    more = f" and {len(formed) - FORMED_NAMED} more" if len(formed) > FORMED_NAMED else ""
    return f"Heads forming: previous-character head{'s' * (len(formed) > 1)} ★ {named}{more}"


def forming_chart(snapshots: Sequence[dict], chosen: tuple[int, int] | None = None, shown_step: int | None = None,
                  repeat_length: int | None = None, window: int | None = None) -> go.Figure | None:
    """One panel per FORMING_PANELS pattern, one line per head over the snapshots' steps (one colour per head in
    every panel; ``chosen`` (layer, head), the probe heatmap's, drawn bold); a ★ and a dotted line where a head became
    a previous-character head (PREVIOUS_TOKEN_HEAD, drawn dashed); ``shown_step``, the heatmap's snapshot, a grey
    line; ``repeat_length`` (the induction probe's L), the weight an even spread puts on the induction key, dotted
    (over the keys a sliding ``window`` leaves each query, for a model with one).
    None for no snapshot with scores."""
    snapshots = sorted((s for s in snapshots if s), key=lambda s: s["step"])
    if not snapshots:
        return None
    steps = [s["step"] for s in snapshots]
    heads = [(layer, head) for layer, row in enumerate(snapshots[0]["previous token"]) for head in range(len(row))]
    panels = [(key, name) for key, name in FORMING_PANELS if key in snapshots[0]]
    figure = make_subplots(rows=len(panels), cols=1, shared_xaxes=True, vertical_spacing=0.07,
                           subplot_titles=[name for _, name in panels])
    for index, (layer, head) in enumerate(heads):
        colour = HEAD_COLOURS[index % len(HEAD_COLOURS)]
        dash = LAYER_DASHES[(index // len(HEAD_COLOURS)) % len(LAYER_DASHES)]
        bold = chosen == (layer, head)
        name = head_name(layer, head)
        for row, (key, panel) in enumerate(panels, start=1):
            figure.add_trace(go.Scatter(
                x=steps, y=[s[key][layer][head] for s in snapshots], name=name, legendgroup=name,
                showlegend=row == 1, mode="lines+markers" if len(steps) < 30 else "lines",
                line=dict(color=colour, width=3.5 if bold else 1.5, dash=dash), marker=dict(size=4),
                hovertemplate=f"{name} · {panel}<br>step %{{x}}: %{{y:.3f}}<extra></extra>"), row=row, col=1)
    previous_row = next((row for row, (key, _) in enumerate(panels, start=1) if key == "previous token"), None)
    if previous_row is not None:
        figure.add_hline(y=PREVIOUS_TOKEN_HEAD, line=dict(color="#555", width=1, dash="dash"), row=previous_row,
                         col=1, annotation_text=f"a previous-character head from {PREVIOUS_TOKEN_HEAD}",
                         annotation_position="top left", annotation_font=dict(size=10, color="#555"))
        for formed in formed_heads(snapshots):
            layer, head, step = formed["layer"], formed["head"], formed["step"]
            colour = HEAD_COLOURS[heads.index((layer, head)) % len(HEAD_COLOURS)]
            score = snapshots[steps.index(step)]["previous token"][layer][head]
            name = head_name(layer, head)
            figure.add_trace(go.Scatter(
                x=[step], y=[score], mode="markers", name=f"{name} formed", legendgroup=name, showlegend=False,
                marker=dict(symbol="star", size=14, color=colour, line=dict(color="#222", width=1)),
                hovertemplate=f"{name} became a previous-character head at step {step:,}: %{{y:.3f}}"
                              "<extra></extra>"), row=previous_row, col=1)
            figure.add_vline(x=step, line=dict(color=colour, width=1, dash="dot"), row=previous_row, col=1)
    induction_row = next((row for row, (key, _) in enumerate(panels, start=1) if key == "induction"), None)
    if induction_row is not None and repeat_length and repeat_length >= 2:
        chance = head_scores.chance_levels(repeat_length, window)["induction"]
        figure.add_hline(y=chance, line=dict(color="#555", width=1, dash="dot"), row=induction_row, col=1,
                         annotation_text=f"an even spread: {chance:.3f}", annotation_position="top left",
                         annotation_font=dict(size=10, color="#555"))
    if shown_step is not None:
        figure.add_vline(x=shown_step, line=dict(color="#999", width=6), opacity=0.25)
    figure.update_yaxes(range=[0, 1.02], tickvals=[0, 0.5, 1], title_text="weight")
    figure.update_xaxes(title_text="step", row=len(panels), col=1)
    title, top = _title_layout(formed_title(snapshots))
    figure.update_layout(title=title, height=top + 90 + PANEL_PX * len(panels), margin=dict(l=60, r=20, t=top + 10,
                                                                                           b=90),
                         legend=dict(orientation="h", y=-0.06, yanchor="top"), hovermode="closest",
                         meta=dict(forming=dict(steps=steps, formed=formed_heads(snapshots))))
    return swipes_scroll(figure)


ONE_BACK_COLOUR = HIGHLIGHT_COLOUR


def probe_heatmap(weights: torch.Tensor, tokens: Sequence[str], title: str) -> go.Figure:
    """One head's (T, T) probe weights: the cells the causal mask hides grey (not white, "value 0"), and an orange
    dashed line along the lower edge of the 1-back stripe (query p on key p - 1), so a previous-character head's stripe
    is not read as the diagonal (each character on itself); the masked corner says which is which."""
    T = weights.size(-1)
    hidden = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)
    figure = heatmap(weights, tokens, tokens, title, show_values=False, x_title="key (looked at)", y_title="query",
                     masked=hidden, masked_hover="masked: a later character, which the query cannot see")
    if T >= 2:
        # y = x + 2 runs through the lower-left corners of the cells (p, p - 1): under the stripe, never over it
        figure.add_shape(type="line", x0=-0.5, y0=1.5, x1=T - 2.5, y1=T - 0.5,
                         line=dict(color=ONE_BACK_COLOUR, width=2, dash="dash"))
    if T >= 3:
        figure.add_annotation(x=T - 1.5, y=-0.5, xanchor="right", yanchor="top", showarrow=False, align="right",
                              text=("grey: masked (later characters)<br>"
                                    f"<span style='color:{ONE_BACK_COLOUR}'>- - -</span> under it: the 1-back stripe"
                                    "<br>(each query's previous character)"),
                              font=dict(size=10, color="#333"), bgcolor="rgba(255,255,255,0.8)")
    # the axes hold the cells only (a shape would widen Plotly's automatic range by a blank strip)
    figure.update_layout(meta={**(figure.layout.meta or {}), "one_back": True})
    figure.update_xaxes(range=[-0.5, T - 0.5], autorange=False)
    figure.update_yaxes(range=[T - 0.5, -0.5], autorange=False)
    return figure
