"""The page's chart deck (playground.ui.chart_deck) run in Chromium by itself: the order its answers arrive in.

No app: a blank page holds the deck's hosts, a stand-in Plotly records what is drawn, and the ``js=`` functions the
tabs wire are called in the orders a busy server produces (the answer for one click landing after the next click).
"""

from __future__ import annotations

import json

import pytest

from playground.ui import chart_deck

pytestmark = pytest.mark.browser

DECK = "deck"
STEPS = ("4", "6")

# Plotly stand-in: each host remembers the title it was drawn with
PLOTLY = "window.Plotly = {react: (host, data, layout) => { host.dataset.title = layout.title; }, relayout() {}};"
HOSTS = f'<div id="{DECK}-chart-0"><div class="{chart_deck.HOST_CLASS}"></div></div>'


def _deck(key: str) -> str:
    """A deck of both steps, each with one figure titled by its settings and step, and its heading as text."""
    return chart_deck.deck_json(key, {step: ([f"{key} step {step}"], [_figure(f"{key} {step}")]) for step in STEPS})


def _figure(title: str) -> dict:
    return {"data": [], "layout": {"title": title}}


@pytest.fixture
def deck_page(browser):
    page = browser.new_page()
    page.set_content(f"<html><body>{HOSTS}<script>{PLOTLY}</script></body></html>")
    yield page
    page.close()


def call(page, js: str, *args):
    return page.evaluate(f"args => ({js})(...args)", list(args))


def drawn(page) -> str:
    return page.evaluate(f"() => document.querySelector('.{chart_deck.HOST_CLASS}').dataset.title")


def test_a_view_picked_while_the_textbox_holds_the_deck_before_a_what_if_is_drawn(deck_page):
    """A what-if drawn from a spare leaves the deck's textbox on the old settings until the server answers; a step
    picked then (its draw reads that textbox) is drawn from the spare. It stayed on the step before, for good: a
    fresh-clone CI's Attention test saw '6. Softmax weights' for 30 s after picking step 4."""
    first, more = chart_deck.draw_js(DECK, 1), chart_deck.draw_js(DECK, 1, more=True)
    assert call(deck_page, first, _deck("off"), "6") == ["off step 6"]
    spare = chart_deck.spare_json("off", "mask off", {"mask on": _deck("on")})
    call(deck_page, chart_deck.keep_js(DECK), spare)
    adopt = chart_deck.adopt_js(DECK, 1, "values => values[0]")
    assert call(deck_page, adopt, "mask on", "6") == ["on step 6"]
    assert drawn(deck_page) == "on 6"

    assert call(deck_page, more, _deck("off"), "4") == ["on step 4"]  # the textbox still holds the "off" deck
    assert drawn(deck_page) == "on 4"


def test_more_views_for_the_view_drawn_leave_its_texts_alone(deck_page):
    """The rest of a deck arriving for the view on screen sets nothing: a control clicked since keeps its value (the
    Model tab's map reverted under a click on 'Block 3')."""
    first, more = chart_deck.draw_js(DECK, 1), chart_deck.draw_js(DECK, 1, more=True)
    only_six = chart_deck.deck_json("on", {"6": (["on step 6"], [_figure("on 6")])})
    assert call(deck_page, first, only_six, "6") == ["on step 6"]
    assert call(deck_page, more, _deck("on"), "6") == [None]  # left as it is
    assert call(deck_page, more, _deck("on"), "4") == ["on step 4"]  # another view: drawn from what arrived
    assert drawn(deck_page) == "on 4"
    assert json.loads(deck_page.evaluate(f"() => JSON.stringify(Object.keys(window.chartDeck.decks.{DECK}.views))")) \
        == list(STEPS)
