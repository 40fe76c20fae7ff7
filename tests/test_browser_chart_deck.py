"""The page's chart deck (playground.ui.chart_deck) run in Chromium by itself: the order its answers arrive in.

No app: a blank page holds the page's scripts and the deck's hosts, a stand-in Plotly records what is drawn, and the
``js=`` functions the tabs wire are called in the orders a busy server produces (the answer for one click landing
after the next click).
"""

from __future__ import annotations

import json

import pytest

from playground.ui import chart_deck, page_scripts

pytestmark = pytest.mark.browser

DECK = "deck"
STEPS = ("4", "6")

# Plotly stand-in: each host remembers the title it was drawn with
PLOTLY = "window.Plotly = {react: (host, data, layout) => { host.dataset.title = layout.title; }, relayout() {}};"
HEAD = page_scripts.head()  # the page's scripts, as the app sends them
HOSTS = f'<div id="{DECK}-chart-0"><div class="{chart_deck.HOST_CLASS}"></div></div>'


def _deck(key: str) -> str:
    """A deck of both steps, each with one figure titled by its settings and step, and its heading as text."""
    return chart_deck.deck_json(key, {step: ([f"{key} step {step}"], [_figure(f"{key} {step}")]) for step in STEPS})


def _figure(title: str) -> dict:
    return {"data": [], "layout": {"title": title}}


@pytest.fixture
def deck_page(browser):
    page = browser.new_page()
    page.set_content(f"<html><head>{HEAD}</head><body>{HOSTS}<script>{PLOTLY}</script></body></html>")
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


def test_a_views_texts_come_at_once_while_the_chart_library_loads_and_its_charts_once_it_is_in(browser):
    """A tab opened just after the page loaded waited 2-3.5 s for Plotly with no heading at all: its texts come at
    once, its charts once the library is in, and they are the view asked for last."""
    page = browser.new_page()
    page.set_content(f"<html><head>{HEAD}</head><body>{HOSTS}</body></html>")  # no Plotly yet
    first, more = chart_deck.draw_js(DECK, 1), chart_deck.draw_js(DECK, 1, more=True)
    for js, view in ((first, "4"), (more, "6")):  # answered, not left waiting for the library (a bound: 10 s)
        answered = page.evaluate(f"args => Promise.race([({js})(...args), new Promise(resolve => setTimeout("
                                 "() => resolve('still waiting'), 10000))])", [_deck("on"), view])
        assert answered == [f"on step {view}"]
    assert page.evaluate(f"() => document.querySelector('.{chart_deck.HOST_CLASS}').dataset.title") is None
    page.evaluate(PLOTLY)
    page.wait_for_function(f"() => document.querySelector('.{chart_deck.HOST_CLASS}').dataset.title === 'on 6'")
    page.close()


def test_a_first_answer_made_for_inputs_the_page_has_left_is_not_drawn(deck_page):
    """Two changes answered by two events side by side (a text typed, then the mask switched): the text's answer,
    made for the mask as it was, came back last and was drawn over the switch's. A first answer names the inputs it
    was made for, and the page draws it only while they are the ones on screen, value for value."""
    first = chart_deck.draw_js(DECK, 1, settings=True)
    now = ["To be", False, 1.0]  # a text, a switch, a slider, as the page's components hold them
    here = chart_deck.deck_json("here", {"6": (["here"], [_figure("here 6")])}, settings=now)
    assert call(deck_page, first, here, "6", *now) == ["here"]
    for field, other in enumerate(["To be or", True, 0.5]):
        made = [*now[:field], other, *now[field + 1:]]
        left = chart_deck.deck_json(f"left {field}", {"6": ([f"left {field}"], [_figure(f"left {field}")])},
                                    settings=made)
        assert call(deck_page, first, left, "6", *now) == [None]  # left as it is
        assert drawn(deck_page) == "here 6"
        assert deck_page.evaluate(f"() => window.chartDeck.decks.{DECK}.key") == "here"


def test_more_views_for_the_view_drawn_leave_its_texts_alone(deck_page):
    """The rest of a deck arriving for the view on screen sets nothing: a control clicked since keeps its value (the
    Model tab's map reverted under a click on 'Layer 2')."""
    first, more = chart_deck.draw_js(DECK, 1), chart_deck.draw_js(DECK, 1, more=True)
    only_six = chart_deck.deck_json("on", {"6": (["on step 6"], [_figure("on 6")])})
    assert call(deck_page, first, only_six, "6") == ["on step 6"]
    assert call(deck_page, more, _deck("on"), "6") == [None]  # left as it is
    assert call(deck_page, more, _deck("on"), "4") == ["on step 4"]  # another view: drawn from what arrived
    assert drawn(deck_page) == "on 4"
    assert json.loads(deck_page.evaluate(f"() => JSON.stringify(Object.keys(window.chartDeck.decks.{DECK}.views))")) \
        == list(STEPS)


def test_a_spare_drawn_carries_the_others_and_the_deck_left(deck_page):
    """Spares are named by their settings in full (a layer, a head, a query position): one drawn differs from the
    deck it leaves only there, so the other spares neighbour the new deck too, and the deck left is one of them. A
    query position after another is drawn from the page, never the server; held() lists what the page holds."""
    first = chart_deck.draw_js(DECK, 1)
    assert call(deck_page, first, _deck("q41"), "6") == ["q41 step 6"]
    spares = {f"0|0|{q}": _deck(f"q{q}") for q in (3, 5, 12)}
    call(deck_page, chart_deck.keep_js(DECK), chart_deck.spare_json("q41", "0|0|41", spares))
    held = json.loads(call(deck_page, chart_deck.held_js(DECK)))
    assert sorted(held) == ["0|0|12", "0|0|3", "0|0|5"]
    adopt = chart_deck.adopt_js(DECK, 1, "values => values.join('|')")
    for q in (5, 12, 3, 41):  # each from the page: the deck left (41) is held too
        assert call(deck_page, adopt, 0, 0, q, "6") == [f"q{q} step 6"]
        assert drawn(deck_page) == f"q{q} 6"
    assert call(deck_page, adopt, 0, 0, 7, "6") == [None]  # not held: left for the server's answer
    assert drawn(deck_page) == "q41 6"


def test_a_spare_sent_as_changes_is_the_figure_it_was_made_from(deck_page):
    """figure_changes and the page's merge: a query spare is sent as its changes to the view on screen (a frame
    moved, a title rewritten, a trace's values or a shape gone) and the page lays them over it when it keeps it."""
    import plotly.graph_objects as go

    from playground.ui import plots

    def heatmap(row, title, **extra):
        figure = plots.heatmap([[0.1, 0.2], [0.3, float("nan")]], ["a", "b"], ["c", "d"], title, highlight_row=row)
        figure.update_layout(**extra)
        return json.loads(figure.to_json())

    base = heatmap(0, "row 0", xaxis_title="keys")
    figures = [heatmap(1, "row 1", xaxis_title="keys"), heatmap(None, "no row"),
               json.loads(go.Figure(go.Bar(x=["a"], y=[1.0])).to_json()),
               json.loads(go.Figure([go.Bar(x=["a"], y=[2.0]), go.Bar(x=["b"], y=[3.0])]).to_json())]
    bases = {"b": base}
    spares = {}
    for n, figure in enumerate(figures):
        changes = chart_deck.figure_changes(base, figure)
        assert len(json.dumps(changes)) < len(json.dumps(figure)) or n >= 2
        spares[str(n)] = chart_deck.deck_json(f"k{n}", {"6": (["t"], [{"base": "b", "changes": changes}])})
    call(deck_page, chart_deck.keep_js(DECK), chart_deck.spare_json("k", "x", spares, bases))
    kept = json.loads(deck_page.evaluate(
        f"() => JSON.stringify(Object.values(window.chartDeck.decks.{DECK}.spares.k)"
        ".map(spare => spare.views['6'].figures[0]))"))
    assert kept == figures


def test_a_deck_the_server_sends_with_its_label_keeps_the_spares_unless_another_setting_changed(deck_page):
    """A query position the page lacks is drawn from the server's answer; that answer names its settings (label),
    so the spares of the deck it replaces stay, the deck left among them. After another setting changed (forget),
    nothing is carried, and spares made around the settings left, arriving late, are not kept."""
    first = chart_deck.draw_js(DECK, 1)

    def labelled(key, label):
        return chart_deck.deck_json(key, {"6": ([f"{key} step 6"], [_figure(f"{key} 6")])}, label=label)

    call(deck_page, first, labelled("q41", "0|0|41"), "6")
    call(deck_page, chart_deck.keep_js(DECK), chart_deck.spare_json("q41", "0|0|41", {"0|0|3": _deck("q3")}))
    call(deck_page, first, labelled("q30", "0|0|30"), "6")  # the server's answer for a position not held
    assert sorted(json.loads(call(deck_page, chart_deck.held_js(DECK)))) == ["0|0|3", "0|0|41"]
    adopt = chart_deck.adopt_js(DECK, 1, "values => values.join('|')")
    assert call(deck_page, adopt, 0, 0, 3, "6") == ["q3 step 6"]

    call(deck_page, chart_deck.forget_js(DECK))  # the text changes
    late = chart_deck.spare_json("q3", "0|0|3", {"0|0|9": _deck("q9")})  # made for the old text, arriving now
    call(deck_page, chart_deck.keep_js(DECK), late)
    call(deck_page, first, labelled("other text", "0|0|3"), "6")
    assert json.loads(call(deck_page, chart_deck.held_js(DECK))) == []
    assert call(deck_page, adopt, 0, 0, 9, "6") == [None]
