"""A deck of charts the page draws itself: the server sends a view's figures once, as JSON in a hidden textbox,
and stepping between views already sent is done in the page, without asking the server again.

Why: a Gradio ``gr.Plot`` rebuilds its chart on every new value and then waits 100 ms to resize it, and every click
went to the server and back; a step through the Attention tab's stages waited about 450 ms, most of it drawing.
Here each chart lives in a ``gr.HTML`` host that Gradio never re-renders, and ``Plotly.react`` updates it in place.

A deck is a JSON object ``{"key": ..., "views": {name: {"texts": [...], "figures": [figure JSON or null, ...]}}}``.
``key`` names the settings the views were made with: a deck arriving with the key already held adds its views to
those held (a first answer sends the view on screen, a second all the others), another key replaces them.
``draw_js(deck)`` is the page-side function for a ``js=`` event whose inputs are (the deck's textbox, the view's
name) and whose outputs are the Markdown that goes with the figures; it draws the named view's figures into the
hosts (hiding the hosts of figures that are null) and returns its texts, or leaves everything as it is while that
view has not arrived. On a touch screen the charts do not capture a swipe (no drag-zoom: the page scrolls).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import gradio as gr
import plotly.graph_objects as go

HOST_CLASS = "chart-deck-plot"

# Defines window.chartDeck once per page: take(name, raw) keeps a deck's views, draw(name, view) draws one.
DECK_JS = """
window.chartDeck = window.chartDeck || (() => {
  const decks = {};
  const touch = window.matchMedia('(pointer: coarse)').matches;
  const plotly = () => new Promise(resolve => {
    const wait = () => window.Plotly ? resolve(window.Plotly) : setTimeout(wait, 20);
    wait();
  });
  function take(name, raw, more) {  // more: views added to those of the same key, never replacing them
    const deck = decks[name] = decks[name] || {key: null, views: {}, raw: null, shown: null};
    if (raw && raw !== deck.raw) {
      const sent = JSON.parse(raw);
      if (more && deck.key !== null && sent.key !== deck.key) return deck;  // late: the settings changed since
      deck.raw = raw;
      if (sent.key !== deck.key) { deck.key = sent.key; deck.views = {}; }
      Object.assign(deck.views, sent.views);
    }
    return deck;
  }
  function touchLayout(layout) {  // a swipe over the chart scrolls the page: no drag, no zoom
    const out = {...layout, dragmode: false};
    for (const axis of Object.keys(layout)) {
      if (/^[xy]axis\\d*$/.test(axis)) out[axis] = {...layout[axis], fixedrange: true};
    }
    return out;
  }
  async function draw(name, view) {
    const deck = decks[name];
    if (!deck) return null;
    if (view !== undefined) deck.shown = String(view);
    const shown = deck.views[deck.shown];
    if (!shown) return null;
    const stamp = deck.key + '|' + deck.shown;
    const Plotly = await plotly();
    const slots = shown.figures.map((figure, slot) => {
      const block = document.getElementById(name + '-chart-' + slot);
      return {figure, block, host: block && block.querySelector('.""" + HOST_CLASS + """')};
    });
    // columns shown or hidden first, so each chart is drawn at the width it keeps
    slots.forEach(({figure, block}) => { if (block) block.style.display = figure ? '' : 'none'; });
    slots.forEach(({figure, host}) => {
      if (!host || host.dataset.stamp === stamp) return;
      host.dataset.stamp = stamp;
      // a slot with no figure is hidden (its column, above) and emptied, never purged: Plotly finishes a drawing's
      // automatic margins later, and a chart purged before then threw "Cannot read properties of undefined" (a
      // what-if drawn from a spare deck, then turned back at once)
      if (!figure) { Plotly.react(host, [], {}); host.signatures = []; return; }
      const layout = {...figure.layout, autosize: true, width: host.clientWidth || undefined};
      // a trace equal to the one drawn keeps the drawn object: Plotly.react then skips it (a new query position
      // moves a heatmap's frame without computing the heatmap again)
      const signatures = figure.data.map(trace => JSON.stringify(trace));
      const before = host.data || [], known = host.signatures || [];
      const data = figure.data.map((trace, i) => known[i] === signatures[i] && before[i] ? before[i] : trace);
      host.signatures = signatures;
      Plotly.react(host, data, touch ? touchLayout(layout) : layout,
                   {displaylogo: false, scrollZoom: false});
      if (!host.clientWidth) {  // drawn while its tab was hidden: fit it once it has a width
        const watch = new ResizeObserver(() => {
          if (host.clientWidth) { watch.disconnect(); Plotly.relayout(host, {width: host.clientWidth}); }
        });
        watch.observe(host);
      }
    });
    return shown;
  }
  let resizing = null;  // the charts are drawn at their host's width: a new window width (a phone turned) redraws
  window.addEventListener('resize', () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => document.querySelectorAll('.""" + HOST_CLASS + """.js-plotly-plot').forEach(host => {
      if (host.clientWidth && window.Plotly) window.Plotly.relayout(host, {width: host.clientWidth});
    }), 150);
  });
  // Spare decks: views made ahead for settings one switch away, kept by the key of the deck they neighbour and
  // named by the page's own label of those settings. adopt() draws one at once where the page holds it (a what-if
  // switch answered without asking the server); the server's answer for those settings then has the same key and
  // draws nothing again. The deck left behind becomes the new deck's spare under its own label (a switch turned
  // back is drawn at once too).
  function keep(name, raw) {
    const deck = decks[name] = decks[name] || {key: null, views: {}, raw: null, shown: null};
    if (!raw) return deck;
    const sent = JSON.parse(raw);
    deck.spares = deck.spares || {};
    deck.labels = deck.labels || {};
    deck.labels[sent.key] = sent.label;
    const held = deck.spares[sent.key] = deck.spares[sent.key] || {};
    for (const [label, spare] of Object.entries(sent.spares)) {
      held[label] = held[label] || {key: spare.key, views: {}};
      if (held[label].key === spare.key) Object.assign(held[label].views, spare.views);
    }
    const keys = Object.keys(deck.spares);
    if (keys.length > 8) delete deck.spares[keys[0]];  // a few settings' neighbours are enough
    return deck;
  }
  function forget(name) {  // the settings the spares were made around are changing: none of them is right now
    if (decks[name]) decks[name].spares = {};
  }
  async function adopt(name, label, view) {
    const deck = decks[name];
    const spare = deck && deck.spares && deck.spares[deck.key] && deck.spares[deck.key][label];
    if (!spare || !spare.views[String(view)]) return null;
    const here = deck.labels[deck.key];
    deck.spares[spare.key] = deck.spares[spare.key] || {};
    if (here !== undefined) deck.spares[spare.key][here] = {key: deck.key, views: deck.views};
    deck.labels[spare.key] = label;
    deck.key = spare.key; deck.views = {...spare.views}; deck.raw = null;
    return draw(name, view);
  }
  function redraw(name) {  // a host just mounted (its tab opened): draw what the deck shows
    const deck = decks[name];
    if (!deck || deck.shown === null) return;
    document.querySelectorAll('[id^="' + name + '-chart-"] .""" + HOST_CLASS + """')
      .forEach(host => { delete host.dataset.stamp; });
    draw(name);
  }
  return {take, draw, redraw, decks, keep, forget, adopt};
})();
"""


PHONE_WIDTH = 640  # px: below this the page is a phone's, where an answer can land below the screen


def draw_js(deck: str, texts: int, reveal: str = "", more: bool = False) -> str:
    """A ``js=`` function (deck textbox, view name) -> ``texts`` Markdown values: draws that view of ``deck``.
    ``more``: the textbox holds more views for the settings of the last first answer, and is ignored where the
    settings have changed since (a slow answer for the old settings arriving after the new ones' first answer).
    ``reveal``: the id of the element that starts the answer; on a phone, where it lands below the screen, the page
    scrolls it into view (never up, away from a control the visitor is using further down, nor while they type)."""
    scroll = (f"  const start = document.getElementById({json.dumps(reveal)});\n"
              "  const typing = document.activeElement && document.activeElement.matches("
              "'textarea, input:not([type=radio]):not([type=checkbox]):not([type=range])');\n"
              f"  if (shown && start && !typing && window.innerWidth < {PHONE_WIDTH} && "
              "start.getBoundingClientRect().top > window.innerHeight - 80) "
              "start.scrollIntoView({behavior: 'smooth', block: 'start'});\n") if reveal else ""
    unchanged = "[" + ", ".join(["undefined"] * texts) + "]"
    return (f"async (raw, view) => {{ {DECK_JS}\n"
            f"  window.chartDeck.take({json.dumps(deck)}, raw, {json.dumps(more)});\n"
            f"  const shown = await window.chartDeck.draw({json.dumps(deck)}, view);\n{scroll}"
            f"  return shown ? shown.texts : {unchanged};\n}}")


HOST_MIN_WIDTH = 300  # px: hosts in a row stand side by side on a desktop and one under another on a phone


def hosts(deck: str, slots: Sequence[int]) -> None:
    """One empty host per slot, in a column ``<deck>-chart-<slot>`` of its own (laid out where it is called): the page
    draws into the host and hides the column while its slot has no figure."""
    for slot in slots:
        with gr.Column(min_width=HOST_MIN_WIDTH, elem_id=f"{deck}-chart-{slot}"):
            gr.HTML(f'<div class="{HOST_CLASS}"></div>', padding=False,
                    js_on_load=f"{DECK_JS}\nwindow.chartDeck.redraw({json.dumps(deck)});")


def plotly_loader() -> gr.Plot:
    """A hidden chart that makes Gradio load Plotly into the page (window.Plotly), which the decks draw with."""
    return gr.Plot(go.Figure(), visible="hidden", show_label=False, label="chart library")


def deck_json(key: str, views: dict[str, tuple[Sequence[str], Sequence[go.Figure | None]]]) -> str:
    """The deck ``{"key": key, "views": {name: {"texts": [...], "figures": [...]}}}``, each figure as Plotly's
    own JSON (or null), written without parsing it again."""
    parts = []
    for name, (texts, figures) in views.items():
        drawn = ", ".join(figure.to_json() if figure is not None else "null" for figure in figures)
        parts.append(f'{json.dumps(name)}: {{"texts": {json.dumps(list(texts))}, "figures": [{drawn}]}}')
    return f'{{"key": {json.dumps(key)}, "views": {{{", ".join(parts)}}}}}'


def keep_js(deck: str) -> str:
    """A ``js=`` function (spare textbox) -> nothing: the page keeps the spare decks sent (see ``spare_json``)."""
    return f"(raw) => {{ {DECK_JS}\n  window.chartDeck.keep({json.dumps(deck)}, raw);\n}}"


def forget_js(deck: str) -> str:
    """A ``js=`` function with no inputs or outputs: the page drops ``deck``'s spares (its settings are changing)."""
    return f"() => {{ {DECK_JS}\n  window.chartDeck.forget({json.dumps(deck)});\n}}"


def adopt_js(deck: str, texts: int, label_js: str) -> str:
    """A ``js=`` function (the labelled settings' values..., the view's name) -> ``texts`` Markdown values: draws the
    spare deck that ``label_js`` (a JS function of the settings' values, as a list) names, where the page holds it,
    and leaves everything as it is otherwise (the server's answer draws it)."""
    unchanged = "[" + ", ".join(["undefined"] * texts) + "]"
    return (f"async (...values) => {{ {DECK_JS}\n"
            f"  const label = {label_js};\n"
            f"  const shown = await window.chartDeck.adopt({json.dumps(deck)}, label(values.slice(0, -1)), "
            f"values[values.length - 1]);\n"
            f"  return shown ? shown.texts : {unchanged};\n}}")


def spare_json(around: str, label: str, spares: dict[str, str]) -> str:
    """The spare decks ``{"key": around, "label": label, "spares": {label: deck}}``: ``around`` is the key of the
    deck they neighbour and ``label`` the page's label of its settings; each deck (``deck_json``'s) is named by the
    page's label of its own settings."""
    held = ", ".join(f"{json.dumps(name)}: {deck}" for name, deck in spares.items())
    return f'{{"key": {json.dumps(around)}, "label": {json.dumps(label)}, "spares": {{{held}}}}}'
