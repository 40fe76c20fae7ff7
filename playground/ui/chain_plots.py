"""The Why tab's chain: from one head's pattern to the next character, five panels read top to bottom in one
figure. The base (chain_base) is sent to the page once; each view is changes to it (chain_changes), which the page lays
over the base as ``merged`` does here (chain_figure: the whole figure, for the API and the tests).
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from playground.ui.plots import (
    LABEL_ROOM_PX,
    LABELS_OVERFLOW,
    _bar_ticks,
    _display_label,
    _title_layout,
    swipes_scroll,
    wrap_title,
)

# From a head's pattern to the next character (the Why tab): five panels read top to bottom, one figure. The
# panels' titles are the same for every head and position (the base, sent once); a view's changes carry its numbers.
CHAIN_STEPS = ("① Where the head looked: its attention weight on each key",
               "② What it writes from each key onto the target, per unit of weight",
               "③ = ① × ②: each key's push on the target",
               "④ The pushes add up to the head's bar; with every other part, the logit",
               "⑤ Softmax over every logit: the probability")
# the same five steps where the bars split the guess's logit minus its rival's (the Why tab's default)
CHAIN_VERSUS_STEPS = ("① Where the head looked: its attention weight on each key",
                      "② What it writes from each key onto logit(target) − logit(rival), per unit of weight",
                      "③ = ① × ②: each key's push on the difference",
                      "④ The pushes add up to the head's bar; with every other part, the logit difference",
                      "⑤ Softmax: the difference decides between the two probabilities")
CHAIN_COLOURS = ("#e03131", "#2f9e44")  # down, up: a bar's colour is 1 where it pushes the target up
CHAIN_WEIGHT_COLOUR = "#4c6ef5"
CHAIN_HEIGHT = 1000
# px below panels ① to ④: the keys' labels under ① and ③ (two lines under ④) and the next panel's title, up to
# three lines (on a phone, less room runs the labels of ① and ③ into the titles of ② and ④)
CHAIN_GAPS_PX = (104, 64, 104, 92)
CHAIN_PLOT_PX = CHAIN_HEIGHT - 104 - 40  # the panels' height with gaps: less a two-line title's top margin, the bottom
CHAIN_STEP_WIDTH = 38  # characters per line of a panel's title: a phone's plot
CHAIN_STEP_ROOM = 36  # px between the figure's title and the first panel, for that panel's two-line title


def chain_base(versus: bool = False) -> go.Figure:
    """The figure every view of the chain is changes to (chain_changes): five stacked panels, the first three over
    the keys (one index axis they share), the fourth a running sum, the fifth two probabilities. ``versus``: the
    panels' titles read the target's logit minus its rival's."""
    from plotly.subplots import make_subplots

    steps = CHAIN_VERSUS_STEPS if versus else CHAIN_STEPS
    figure = make_subplots(rows=5, cols=1, vertical_spacing=0.095,
                           subplot_titles=[wrap_title(step, CHAIN_STEP_WIDTH) for step in steps])
    panel = (1 - sum(CHAIN_GAPS_PX) / CHAIN_PLOT_PX) / 5
    top = 1.0
    for row, (annotation, gap) in enumerate(zip(figure.layout.annotations, (*CHAIN_GAPS_PX, 0)), start=1):
        annotation.update(font=dict(size=12.5), align="left", x=0, xanchor="left", y=top)  # a title sits on its panel
        figure.update_yaxes(domain=[max(0.0, top - panel), top], row=row, col=1)
        top -= panel + gap / CHAIN_PLOT_PX
    scale = [[0, CHAIN_COLOURS[0]], [1, CHAIN_COLOURS[1]]]
    by_sign = dict(cmin=0, cmax=1, colorscale=scale)
    key_hover = "key %{x} · %{customdata}: %{y:.4g}<extra>%{fullData.name}</extra>"
    figure.add_trace(go.Bar(name="attention weight", marker=dict(color=CHAIN_WEIGHT_COLOUR), hovertemplate=key_hover),
                     row=1, col=1)
    figure.add_trace(go.Bar(name="write per unit of weight", marker=by_sign,
                            hovertemplate="key %{x}: %{y:.4g}<extra>%{fullData.name}</extra>"), row=2, col=1)
    figure.add_trace(go.Bar(name="push", marker=by_sign, hovertemplate=key_hover), row=3, col=1)
    figure.add_trace(go.Waterfall(name="logit", measure=["relative", "relative", "total"], textposition="outside",
                                  textinfo="text", cliponaxis=False,
                                  increasing=dict(marker=dict(color=CHAIN_COLOURS[1])),
                                  decreasing=dict(marker=dict(color=CHAIN_COLOURS[0])),
                                  totals=dict(marker=dict(color="#495057")), connector=dict(line=dict(width=1)),
                                  hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"), row=4, col=1)
    figure.add_trace(go.Bar(name="probability", textposition="outside", texttemplate="%{y:.3f}", cliponaxis=False,
                            marker=dict(color=["#495057", "#adb5bd"]),
                            hovertemplate="%{customdata}: %{y:.4f}<extra></extra>"), row=5, col=1)
    figure.update_traces(showlegend=False)
    # the keys' labels set 6 px below the panel (an unseen tick): on a phone the y axis's "0" touched the first one
    keys = dict(tickmode="array", automargin=True, ticklabeloverflow=LABELS_OVERFLOW, ticks="outside", ticklen=6,
                tickcolor="rgba(0,0,0,0)")
    figure.update_layout(height=CHAIN_HEIGHT, margin=dict(l=56, r=16, b=40), bargap=0.15,
                         xaxis=dict(keys, matches="x3"), xaxis2=dict(matches="x3", showticklabels=False),
                         xaxis3=keys, xaxis4=dict(tickmode="array", tickvals=[0, 1, 2]),
                         xaxis5=dict(tickmode="array", tickvals=[0, 1]), yaxis5=dict(range=[0, 1.25], dtick=0.5),
                         yaxis4=dict(zeroline=True))
    return swipes_scroll(figure)


def chain_changes(labels: Sequence[str], weights: Sequence[float], writes: Sequence[float], pushes: Sequence[float],
                  *, head: str, target: str, position: int, part: float, others: float, logit: float,
                  probability: float, other: str, other_probability: float, guessed: bool,
                  room_px: int = LABEL_ROOM_PX, important: Sequence[int] = (), versus: bool = False,
                  logits: tuple[float, float] | None = None, decides: bool = True) -> dict:
    """One view of the chain as changes to chain_base(): ``labels`` the keys read (positions 0 to ``position``),
    ``weights`` x ``writes`` = ``pushes``; the pushes summed are ``part`` (the head's bar), ``others`` the rest of
    the parts, ``logit`` the model's; ``probability`` the target's, ``other`` the best other token and its
    ``other_probability`` (``guessed``: the target is the model's guess, so ``other`` is its runner-up). Values to 4
    significant digits, the running sum to 6; the bars' x is left to Plotly (0, 1, ...). ``versus``: ``part``,
    ``others`` and ``logit`` are of logit(target) - logit(other); ``logits``: the two logits, under the
    probabilities (the contest softmax settles). ``decides``: False where the head writes little beside the rest
    (the Why tab's rule): the title gives its part in numbers instead of saying its pattern made the result; a head
    whose ``part`` is below zero favoured ``other`` (or pushed the target down), and the title says so."""
    shown = [_display_label(str(s)) for s in labels]
    tickvals, ticktext, angle = _bar_ticks(shown, room_px, important)
    axis = {"tickvals": tickvals, "ticktext": ticktext, "tickangle": angle}
    if part >= 0:
        made = (f"made '{_display_label(target)}' beat '{_display_label(other)}'" if versus else
                f"became '{_display_label(target)}'")
    else:  # a head that pushed against the target held it back: its pattern did not make the result
        made = (f"favoured '{_display_label(other)}' over '{_display_label(target)}'" if versus else
                f"pushed '{_display_label(target)}' down")
    if not decides:  # "L3 H2's part at position 33: +0.066; all parts: +6.708 ('u' over 'a')"
        made = (f"'{_display_label(target)}' over '{_display_label(other)}'" if versus else
                f"the logit of '{_display_label(target)}'")
        title, top = _title_layout(f"{head}'s part at position {position}: {part:+.3f}; all parts: {logit:+.3f} "
                                   f"({made})")
    else:
        title, top = _title_layout(f"How {head}'s pattern at position {position} {made}")
    title.update(yref="container", y=1, yanchor="top", pad={"t": 12})  # above the first panel's own title
    def rounded(values):
        return [float(f"{v:.4g}") for v in values]

    def signs(values):
        return [1 if v >= 0 else 0 for v in values]

    quoted, other_quoted = f"'{_display_label(target)}'", f"'{_display_label(other)}'"
    total = f"logit of {quoted}" if not versus else f"logit({quoted}) − logit({other_quoted})"
    total_tick = f"logit of<br>{quoted}" if not versus else f"logit({quoted}) −<br>logit({other_quoted})"
    under = ["", ""] if logits is None else [f"<br>logit {value:.3f}" for value in logits]
    sums = [float(f"{v:.6g}") for v in (part, others, logit)]
    low, high = min(0.0, part, logit), max(0.0, part, logit)
    room = 0.3 * (high - low or 1.0)  # above (and below) the bars, for their numbers
    # a bar that goes down has its number under its lower end: room for it inside the panel, or it sits on the
    # names under the axis, and reads as theirs
    ends = [end for end, down in ((part, part < 0), (logit, others < 0), (logit, logit < 0)) if down]
    bottom = min([low, *(end - room for end in ends)])
    return {"data": [{"y": rounded(weights), "customdata": shown},
                     {"y": rounded(writes), "marker": {"color": signs(writes)}},  # its key named in ① and ③
                     {"y": rounded(pushes), "customdata": shown, "marker": {"color": signs(pushes)}},
                     {"y": sums, "text": [f"{part:+.3f}", f"{others:+.3f}", f"{logit:{'+' if versus else ''}.3f}"],
                      "customdata": [f"{head}: the pushes summed", "every other part", f"the {total}"]},
                     {"y": rounded((probability, other_probability)),
                      "customdata": [f"p({quoted})", f"p({other_quoted})"]}],
            "layout": {"title": title, "margin": {"t": top + CHAIN_STEP_ROOM}, "xaxis": axis, "xaxis3": axis,
                       "yaxis4": {"range": [bottom, high + room]},
                       "xaxis4": {"ticktext": [f"{head}<br>(③ summed)", "every other<br>part", total_tick]},
                       "xaxis5": {"ticktext": [f"{quoted}<br>({'its guess' if guessed else 'the target'}){under[0]}",
                                               f"{other_quoted}<br>({'runner-up' if guessed else 'its guess'})"
                                               f"{under[1]}"]}}}


def merged(base, changes, key: str = ""):
    """``changes`` laid over ``base`` as the page's chart deck lays them (chart_deck's merge): objects key by key, a
    figure's traces one by one, anything else replaced."""
    if key == "data" and isinstance(base, list) and isinstance(changes, list):
        return [merged(base[i] if i < len(base) else {}, trace) for i, trace in enumerate(changes)]
    if not isinstance(base, dict) or not isinstance(changes, dict):
        return changes
    return {**base, **{k: merged(base.get(k), v, k) for k, v in changes.items()}}


def chain_figure(labels: Sequence[str], weights: Sequence[float], writes: Sequence[float], pushes: Sequence[float],
                 **numbers) -> go.Figure:
    """The chain as one figure (chain_base with chain_changes laid over it): what the page draws."""
    base = chain_base(numbers.get("versus", False)).to_plotly_json()
    return go.Figure(merged(base, chain_changes(labels, weights, writes, pushes, **numbers)))
