"""The Why tab's decks: a reading packed as the page keeps it (chart_deck's JSON: each view's texts and its figures
as changes to a few base figures), so a new position, head or knock-out is drawn in the page without asking the
server. Every position's parts, heads' chains, their circuits, the knock-out numbers the page writes its heading from
(page/why_page.js's knockText), the other split's decks. The keys say which inputs a deck answers.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections import Counter

import numpy as np

from playground.lens import circuits
from playground.ui import chain_plots, chart_deck
from playground.ui.why_page import DECK, HEADS_DECK
from playground.ui.why_reading import SPLITS, Reading
from playground.ui.why_sentences import head_heading, heading, in_the_tables
from playground.ui.why_views import cell_shapes, chain_changes, circuits_view, parts_changes, parts_figure

MAX_SENT_CIRCUITS = 4  # heads whose circuits the page is sent ahead where every head's would be too many
# every head's QK and OV tables are sent ahead while they hold at most this many cells (the shipped model's 16 heads
# over its 65 characters: 135,200 cells, about 0.8 MB), so a head chosen in the list is drawn in the page
MAX_SENT_CIRCUIT_CELLS = 150_000


def deck_key(*settings) -> str:
    return hashlib.sha1(repr(settings).encode()).hexdigest()[:16]


def circuits_key(reading: Reading, checkpoint: str, text: str) -> str:
    """The key of a text's circuits: a rotary model's are drawn at a distance, and change with it."""
    return deck_key(checkpoint, text) if reading.distance is None else deck_key(checkpoint, text, reading.distance)


def base_figures(reading: Reading) -> dict:
    """The figures every view's figures are changes to (position 0's): a base carries only the charts' kind, the
    parts' names and its look; every view's changes carry the rest."""
    def build():
        figures = (parts_figure(reading, 0), chain_plots.chain_base(reading.versus))
        return {name: json.loads(figure.to_json()) for name, figure in zip(("parts", "chain"), figures)}
    return reading.memo.get(("bases", reading.name, reading.versus), reading.model, build)


def settings_of(checkpoint: str, text: str, target: str, split: str) -> dict:
    """The inputs a view was made for, as the page holds them: it leaves an answer for inputs it no longer shows."""
    return {"checkpoint": checkpoint, "text": text, "target": target, "split": split}


def position_deck(reading: Reading, key: str, positions, settings: dict | None = None) -> str:
    """The deck of these positions' parts, keyed "<T>:<key>" (the page reads the text's length from it): each view's
    texts are its heading and the name of the head with the longest bar there. ``settings``: the inputs it answers
    (settings)."""
    views = {str(p): ([heading(reading, p), circuits.head_name(*reading.strongest(p))],
                      [{"base": "parts", "changes": parts_changes(reading, p)}]) for p in positions}
    return chart_deck.deck_json(f"{reading.ids.numel()}:{key}", views, {"parts": base_figures(reading)["parts"]},
                                settings=settings)


def heads_deck(reading: Reading, key: str, views) -> str:
    """The deck of heads' readings, one view "<head>@<position>" per (layer, head, position) in ``views``: its
    heading and its chain, from where it looked to the next character's probability."""
    sent = {f"{circuits.head_name(layer, which)}@{p}": ([head_heading(reading, p, layer, which),
                                                         in_the_tables(reading, p, layer, which),
                                                         json.dumps(cell_shapes(reading, p, layer, which))],
                                                        [{"base": "chain",
                                                          "changes": chain_changes(reading, p, layer, which)}])
            for layer, which, p in views}
    return chart_deck.deck_json(key, sent, {"chain": base_figures(reading)["chain"]})


def heatmap_changes(figure) -> dict:
    """A circuit's heatmap as changes to another of its kind (a base): its table, as float32 in base64 (Plotly's
    typed arrays; the values already rounded to 4 significant digits), its colour range and its title."""
    trace = figure.data[0]
    table = np.asarray(trace.z, dtype=np.float32)
    return {"data": [{"z": {"dtype": "f4", "bdata": base64.b64encode(table.tobytes()).decode(),
                            "shape": ", ".join(map(str, table.shape))}, "zmin": trace.zmin, "zmax": trace.zmax}],
            "layout": {"title": figure.layout.title.to_plotly_json(), "margin": {"t": figure.layout.margin.t}}}


def circuits_deck(reading: Reading, checkpoint: str, text: str, heads) -> str:
    """The circuits of these heads, each table as changes to one QK and one OV base (the labels and the look, sent
    once): every head of the shipped model is some 0.7 MB."""
    views, bases = {}, {}
    for layer, which in heads:
        heading, qk, ov = circuits_view(reading, layer, which)
        for name, figure in (("qk", qk), ("ov", ov)):
            if name not in bases:
                bases[name] = json.loads(figure.to_json())
                del bases[name]["data"][0]["z"]
        views[circuits.head_name(layer, which)] = ([heading], [{"base": "qk", "changes": heatmap_changes(qk)},
                                                               {"base": "ov", "changes": heatmap_changes(ov)}])
    return chart_deck.deck_json(circuits_key(reading, checkpoint, text), views, bases)


def every_circuit_fits(reading: Reading) -> bool:
    config = reading.model.config
    n = config.vocabulary_size if reading.subset is None else reading.subset.numel()
    return config.layers_num * config.heads_num * 2 * n * n <= MAX_SENT_CIRCUIT_CELLS


def knock_json(reading: Reading, key: str, names: str | None = None, near: dict | None = None) -> str:
    """The numbers the page writes the knock-out heading from (page/why_page.js's knockText, as
    why_sentences.knock_text does): per set of heads knocked out ("" the intact model; ``names``: only that set), the
    loss and, at each position, the guess and the target's probability. Every head alone comes with the ranking, so
    ticking one asks the server nothing. ``near``: the sets one tick away from ``names`` (Reading.near_knocks), sent
    with it ("near" names it: the page asks no more)."""
    knocks = reading.knocks if names is None else {name: reading.knocks[name] for name in ("", names)}
    if near is not None:
        knocks = {**near, **knocks}
    guessed = sorted({guess for knock in knocks.values() for guess in knock.guesses})
    return json.dumps({
        "key": key, "note": reading.ranking_note,
        "targets": [reading.label(target) for target in reading.targets],
        "labels": {str(i): reading.label(i) for i in guessed},
        "sets": {name: {"loss": knock.loss, "guesses": knock.guesses, "p": knock.target_probabilities}
                 for name, knock in knocks.items()},
        **({"near": [names]} if near is not None else {})})


def every_position_decks(reading: Reading, checkpoint: str, text: str, target: str,
                          split: str) -> tuple[str, str]:
    """(every position's parts, the reading of the head that pushed most and of the chosen head at every position),
    as the decks the page keeps."""
    T = reading.ids.numel()
    text_key = deck_key(checkpoint, text, target, reading.versus)
    views = {(*reading.strongest(p), p) for p in range(T)}
    if reading.head is not None:
        views |= {(*reading.head, p) for p in range(T)}
    return (position_deck(reading, text_key, range(T), settings_of(checkpoint, text, target, split)),
            heads_deck(reading, text_key, sorted(views, key=lambda v: (v[2], v[0], v[1]))))


def circuits_wanted(reading: Reading) -> list[tuple[int, int]]:
    """The heads whose circuits the page is sent ahead: every head where they fit (every_circuit_fits), else the
    MAX_SENT_CIRCUITS heads that push most somewhere in the text."""
    if every_circuit_fits(reading):
        return reading.heads()
    pushed = Counter(reading.strongest(p) for p in range(reading.ids.numel()))
    return [lh for lh, _ in pushed.most_common()][:MAX_SENT_CIRCUITS]


def split_spare_json(reading: Reading, checkpoint: str, text: str, target: str, split: str) -> str:
    """The other split's decks at every position (``reading`` is read that way; ``split`` is the one on screen), for
    the page to keep beside the split on screen: ``{"around": the deck on screen's key, "label": the split they are,
    "from": the split on screen, "decks": {deck name: deck}}``."""
    other = next(each for each in SPLITS if each != split)
    deck, heads = every_position_decks(reading, checkpoint, text, target, other)
    # The split on screen reads the same tokens, the other way: its key needs no second reading.
    around = f"{reading.ids.numel()}:{deck_key(checkpoint, text, target, not reading.versus)}"
    return (f'{{"around": {json.dumps(around)}, "label": {json.dumps(other)}, "from": {json.dumps(split)}, '
            f'"decks": {{{json.dumps(DECK)}: {deck}, {json.dumps(HEADS_DECK)}: {heads}}}}}')
