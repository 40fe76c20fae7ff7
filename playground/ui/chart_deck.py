"""A deck of charts the page draws itself: the server sends a view's figures once, as JSON in a hidden textbox,
and stepping between views already sent is done in the page, without asking the server again.

Why: a Gradio ``gr.Plot`` rebuilds its chart on every new value and then waits 100 ms to resize it, and every click
went to the server and back; a step through the Attention tab's stages waited about 450 ms, most of it drawing.
Here each chart lives in a ``gr.HTML`` host that Gradio never re-renders, and ``Plotly.react`` updates it in place.

A deck is a JSON object ``{"key": ..., "views": {name: {"texts": [...], "figures": [figure JSON or null, ...]}}}``;
optionally ``"bases": {name: figure JSON}``, figures sent once that a view's figure ``{"base": name, "changes": {...}}``
is laid over (objects merged key by key, a figure's traces one by one; a deck of many alike charts stays small).
``key`` names the settings the views were made with: a deck arriving with the key already held adds its views to
those held (a first answer sends the view on screen, a second all the others), another key replaces them.
``draw_js(deck)`` is the page-side function for a ``js=`` event whose inputs are (the deck's textbox, the view's
name) and whose outputs are the Markdown that goes with the figures; it draws the named view's figures into the
hosts (hiding the hosts of figures that are null) and returns its texts, or leaves everything as it is while that
view has not arrived. On a touch screen the charts do not capture a swipe (no drag-zoom: the page scrolls), and a tap
shows the value under it as a hover would (Plotly shows none once a chart takes no drag).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence

import gradio as gr
import plotly.graph_objects as go

HOST_CLASS = "chart-deck-plot"
WIDE_CLASS = "chart-deck-wide"  # a heatmap drawn wider than its slot, scrolled sideways (meta.touch_columns)
PINNED_CLASS = "chart-deck-pinned"  # the strip behind a wide heatmap's row labels, kept at its slot's left edge
TICKED_CLASS = "chart-deck-ticked"  # bars whose labels the page chose at the chart's width (meta.important)
NARROW_WIDTH = 480  # px: a screen this narrow or less thins every chart's x labels (the page's CSS) but TICKED_CLASS's
# the event a chart's host sends, bubbling, for a tap on a touch screen (chartDeck.touch; detail: the tap's clientX,
# clientY): there a pick listens for it, not for clicks, as Chromium sent no click with a place for a third of the
# taps on a heatmap after a sideways swipe
TAP_EVENT = "chartdecktap"
DRAWN_EVENT = "chartdeckdrawn"  # sent on the document once a deck's view is drawn (detail: the deck's name)
WAITING_ATTR = "data-deck-waiting"  # on the page's html element: the decks whose view is of settings the page left
WAITING_NOTE = "Drawing the view for the new settings…"
WAITING_AFTER_S = 0.3  # an answer this quick shows no sign of waiting (a flicker on every change)
TAP_READ_MS = 60  # a tap's value is drawn this long after the tap, once its own events have run (a pick's among them)



PHONE_WIDTH = 640  # px: below this the page is a phone's, where an answer can land below the screen
# an answer whose start lands below this fraction of a phone's screen is scrolled to: under a heading at 57% its
# picture falls below the screen
REVEAL_BELOW = 0.4


def draw_js(deck: str, texts: int, reveal: str = "", more: bool = False, settings: bool = False,
            call: str = "window.chartDeck.drawEvent") -> str:
    """A ``js=`` function (deck textbox, view name) -> ``texts`` Markdown values: draws that view of ``deck``.
    ``more``: the textbox holds more views for the settings of the last first answer, and is ignored where the
    settings have changed since (a slow answer for the old settings arriving after the new ones' first answer).
    ``settings``: the event's inputs go on with the components whose values the deck names (deck_json's
    ``settings``, a list in the same order), and a first answer made for values the page has left is not drawn: two
    changes answered by two events run side by side, and the first change's answer, for the page before the
    second, could come back last and be drawn over the second's.
    ``reveal``: the id of the element that starts the answer; on a phone, where it lands low on the screen
    (REVEAL_BELOW) or below it, the page scrolls it to the top (never up, away from a control the visitor is using
    further down, nor while they type).
    ``call``: the page's function that draws (a tab's own wraps chartDeck.drawEvent to write more outputs)."""
    options = json.dumps({"deck": deck, "texts": texts, "reveal": reveal, "more": more, "settings": settings})
    if settings:
        return f"async (raw, view, ...now) => {call}({options}, raw, view, now)"
    return f"async (raw, view) => {call}({options}, raw, view)"


HOST_MIN_WIDTH = 300  # px: hosts in a row stand side by side on a desktop and one under another on a phone


def hosts(deck: str, slots: Sequence[int], views: Sequence[str] = ()) -> None:
    """One empty host per slot, in a column ``<deck>-chart-<slot>`` of its own (laid out where it is called): the page
    draws into the host and hides the column while its slot has no figure (each chart's own title is its caption).
    ``views``: a host per view in each slot instead: the views not on screen are drawn out of sight while the page
    is idle, so showing one costs no drawing; the columns then stay (a slot with no figure is left empty), so every
    view is drawn at the width it is shown at."""
    if views:
        inner = "".join(f'<div class="{HOST_CLASS}" data-view="{html.escape(view, quote=True)}"></div>'
                        for view in views)
        body = f'<div style="position: relative">{inner}</div>'
    else:
        body = f'<div class="{HOST_CLASS}"></div>'
    for slot in slots:
        with gr.Column(min_width=HOST_MIN_WIDTH, elem_id=f"{deck}-chart-{slot}"):
            gr.HTML(body, padding=False, js_on_load=f"window.chartDeck.redraw({json.dumps(deck)});")


def plotly_loader(after_js: str) -> None:
    """A hidden chart that makes Gradio load Plotly into the page (window.Plotly), which the decks draw with: put in
    the page once ``after_js`` (a ``js=`` function whose promise resolves when the page may spend a second on it)
    does: a tab's own hidden chart would load Plotly only when the tab is first opened, its charts blank 1.3-2.3 s
    meanwhile, and one mounted with the page delays the first paint (2.4-2.8 s against 3.4-3.9 s measured)."""
    loader = gr.Plot(go.Figure(), visible=False, show_label=False, label="chart library")
    gr.on(None, None, None, js=after_js, api_name="chart_library_wait", api_visibility="private",
          show_progress="hidden", queue=False).then(
        lambda: gr.Plot(visible="hidden"), None, loader, api_name="chart_library", api_visibility="private",
        show_progress="hidden", queue=False)


def _figure_json(figure) -> str:
    if figure is None:
        return "null"
    return json.dumps(figure) if isinstance(figure, dict) else figure.to_json()


def deck_json(key: str, views: dict[str, tuple[Sequence[str], Sequence[go.Figure | dict | None]]],
              bases: dict[str, go.Figure] | None = None, label: str | None = None,
              settings: dict | list | None = None) -> str:
    """The deck ``{"key": key, "views": {name: {"texts": [...], "figures": [...]}}}``, each figure as Plotly's
    own JSON (or null), written without parsing it again. ``bases``: figures a view's figure may be given as changes
    to, ``{"base": name, "changes": {...}}`` (from plots.bar_chart_changes, say). ``label``: the page's label of the
    deck's settings, as its spares are named (the spares of the deck it replaces go with it). ``settings``: the
    inputs the deck was made for, as the page holds them (by name, or in the order draw_js's event lists them), so a
    page whose inputs changed since can leave it."""
    parts = []
    for name, (texts, figures) in views.items():
        drawn = ", ".join(_figure_json(figure) for figure in figures)
        parts.append(f'{json.dumps(name)}: {{"texts": {json.dumps(list(texts))}, "figures": [{drawn}]}}')
    sent_bases = ""
    if bases:
        sent_bases = ', "bases": {' + ", ".join(f"{json.dumps(name)}: {_figure_json(figure)}"
                                                for name, figure in bases.items()) + "}"
    sent_label = f', "label": {json.dumps(label)}' if label is not None else ""
    sent_settings = f', "settings": {json.dumps(settings)}' if settings is not None else ""
    return f'{{"key": {json.dumps(key)}, "views": {{{", ".join(parts)}}}{sent_bases}{sent_label}{sent_settings}}}'


def keep_js(deck: str) -> str:
    """A ``js=`` function (spare textbox) -> nothing: the page keeps the spare decks sent (see ``spare_json``)."""
    return f"(raw) => {{ window.chartDeck.keep({json.dumps(deck)}, raw); }}"


def held_js(deck: str) -> str:
    """A ``js=`` function with no inputs -> the labels of the spares the page holds around ``deck``'s view on screen,
    as a JSON list (for a textbox the server reads: it makes only the spares the page lacks)."""
    return f"() => window.chartDeck.heldJson({json.dumps(deck)})"


def forget_js(deck: str) -> str:
    """A ``js=`` function with no inputs or outputs: the page drops ``deck``'s spares (its settings are changing)."""
    return f"() => {{ window.chartDeck.forget({json.dumps(deck)}); }}"


def wait_js(deck: str) -> str:
    """A ``js=`` function for an event that asks the server for ``deck``'s view of new settings, passing its inputs on
    as they are: it marks the deck as waiting (page/app.css shows it) until a first answer made for the settings on
    screen (draw_js's ``settings``) is drawn, or settle_js says it was refused. On a busy server the Why tab's "Step
    through this head" showed the old head for 4-8 s, and nothing said a new one was coming. In the event itself: Gradio
    runs the events of one change one after another, so a separate one ran only once the answer was drawn."""
    return f"(...values) => window.chartDeck.waitEvent({json.dumps(deck)}, values)"


def settle_js(deck: str) -> str:
    """A ``js=`` function with no inputs or outputs, for a first answer that failed: ``deck`` waits no more (the
    refusal's toast says why, and the view before stays)."""
    return f"() => {{ window.chartDeck.waiting({json.dumps(deck)}, false); }}"


def adopt_js(deck: str, texts: int, label_js: str) -> str:
    """A ``js=`` function (the labelled settings' values..., the view's name) -> ``texts`` Markdown values: draws the
    spare deck that ``label_js`` (a JS function of the settings' values, as a list) names, where the page holds it,
    and leaves everything as it is otherwise (the server's answer draws it)."""
    return f"async (...values) => window.chartDeck.adoptEvent({json.dumps(deck)}, {texts}, {label_js}, values)"


def spare_json(around: str, label: str, spares: dict[str, str], bases: dict[str, dict] | None = None) -> str:
    """The spare decks ``{"key": around, "label": label, "spares": {label: deck}}``: ``around`` is the key of the
    deck they neighbour and ``label`` the page's label of its settings; each deck (``deck_json``'s) is named by the
    page's label of its own settings. ``bases``: figures (as dicts) that the spares' figures
    ``{"base": name, "changes": figure_changes(...)}`` are laid over when the page keeps them, sent once."""
    held = ", ".join(f"{json.dumps(name)}: {deck}" for name, deck in spares.items())
    sent_bases = f', "bases": {json.dumps(bases)}' if bases else ""
    return f'{{"key": {json.dumps(around)}, "label": {json.dumps(label)}, "spares": {{{held}}}{sent_bases}}}'


def figure_changes(base, new, key: str | None = None):
    """What the page's merge lays over ``base`` to give ``new`` (both a figure's JSON as dicts): the keys that differ,
    objects key by key, the traces of ``data`` one by one (an unchanged trace is ``{}``), anything else whole; a key
    ``new`` has not is null (the page removes it). A spare view that differs from the view on screen by a frame and a
    title is sent as those, not as its heatmaps again."""
    if key == "data" and isinstance(base, list) and isinstance(new, list):
        return [figure_changes(base[i] if i < len(base) else {}, trace) for i, trace in enumerate(new)]
    if not (isinstance(base, dict) and isinstance(new, dict)):
        return new
    changes = {name: figure_changes(base.get(name), value, name) for name, value in new.items()
               if base.get(name) != value}
    changes.update((name, None) for name in base.keys() - new.keys())
    return changes
