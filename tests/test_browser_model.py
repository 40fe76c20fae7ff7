"""The Model tab in Chromium on a desktop: the shipped model, zoomed through the five levels, a new layer drawn from
the spare decks the page holds, the model map, the block switches (post-norm, encoder, ReLU, seeded dropout), the
textbook inputs with notebook 001's numbers and, at level 3, notebook 002's forgotten transpose. No console error, no
error toast. Screenshots: model-score, model-block, model-lens, model-textbook-heads, model-no-transpose."""

from __future__ import annotations

import json

import pytest
from browser_support import PHONE, WAIT_MS, expect_no_error, open_page, open_tab, plot_titled, screenshot, x_labels
from playwright.sync_api import Locator, expect

from playground.lens.anatomy.lessons import FORGET_TRANSPOSE_LABEL, LEVEL_LABELS, LEVEL_TITLES
from playground.ui.chart_deck import PHONE_WIDTH
from playground.ui.model_tab import BOOK_SOURCES

BOOK_SOURCE_TITLES = list(BOOK_SOURCES)

pytestmark = pytest.mark.browser


def heading(panel: Locator) -> Locator:
    return panel.get_by_role("heading", level=3)


def zoom(panel: Locator, number: int) -> None:
    radio = panel.get_by_role("radio", name=LEVEL_LABELS[number - 1], exact=True)
    picked = not radio.is_checked()
    radio.check()
    expect(heading(panel)).to_have_text(LEVEL_TITLES[number - 1], timeout=WAIT_MS)
    if picked and panel.page.viewport_size["width"] < PHONE_WIDTH:  # a level picked on a phone landed below the
        expect(heading(panel)).to_be_in_viewport()  # screen: the page goes to it
    # chosen, and under the pointer still: filled as a chosen radio is (Gradio's hover rule had painted it white, and
    # two strangers read the level as unselected)
    radio.hover()
    assert radio.evaluate("input => getComputedStyle(input).backgroundColor") != "rgb(255, 255, 255)"


def hold_the_server_once_held(page, *labels: str) -> list:
    """Once the page holds the spares ``labels`` around the deck on screen, every request to the server is held back
    (the page.route is undone by the caller): returns the list the held requests go into."""
    wanted = json.dumps(labels)
    page.wait_for_function(f"() => {{ const d = window.chartDeck?.decks?.model; const held = d && d.spares && "
                           f"d.spares[d.key]; return Boolean(held && {wanted}.every(label => held[label])); }}",
                           timeout=WAIT_MS)
    held = []
    page.route("**/queue/join*", lambda route: held.append(route))
    return held


def test_model_tab_zooms_from_one_score_to_the_whole_model(page):
    panel = open_tab(page, "Model")
    expect(heading(panel)).to_have_text(LEVEL_TITLES[0], timeout=WAIT_MS)  # drawn on arrival
    expect(plot_titled(panel, "Scaled scores: cell (41, 0)")).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text("add up to the raw score")
    expect_no_error(page)
    screenshot(page, "model-score")

    # a new layer is drawn from the spare decks the page holds (the level on screen for the other layers and heads)
    # with every request to the server held back: it waited about 1 s for the server's answer
    held = hold_the_server_once_held(page, "1|0|-1")
    layer = panel.get_by_label("layer", exact=True)
    layer.fill("1")
    layer.press("Enter")
    expect(panel).to_contain_text("layer 1, head 0", timeout=WAIT_MS)
    expect(plot_titled(panel, "Scaled scores: cell (41, 0)")).to_be_visible()
    for route in held:
        route.continue_()
    page.unroute("**/queue/join*")
    assert held  # the server's answer was asked for meanwhile (the other levels, the spares around layer 1)
    layer.fill("0")
    layer.press("Enter")
    expect(panel).to_contain_text("layer 0, head 0", timeout=WAIT_MS)

    zoom(panel, 2)
    expect(panel).to_contain_text("Open the Attention tab (trained checkpoint, layer 0, head 0)")
    zoom(panel, 3)
    expect(plot_titled(panel, "Layer 0: every head's attention weights")).to_be_visible(timeout=WAIT_MS)

    zoom(panel, 4)  # what attention, then the MLP, change in the query's guess
    guesses = plot_titled(panel, "The guess after each part of the block")
    expect(guesses).to_be_visible(timeout=WAIT_MS)
    assert guesses.evaluate("el => [...el.layout.yaxis.ticktext]") == ["block input", "+ attention",
                                                                        "+ MLP (the output)"]
    reads = plot_titled(panel, "Where each head looks from position")  # what attention read, beside what it changed
    expect(reads).to_be_visible()
    assert reads.evaluate("el => [...el.layout.yaxis.ticktext]") == [f"head {n}" for n in range(4)]
    for switch in ("post-norm (notebooks 002/003)", "encoder (no mask)", "ReLU"):
        panel.get_by_role("radio", name=switch, exact=True).check()
    expect(panel).to_contain_text("post-norm (notebooks 002/003), encoder (no mask), ReLU", timeout=WAIT_MS)
    dropout = panel.get_by_label("number input for attention dropout p")
    dropout.fill("0.2")
    dropout.press("Enter")
    expect(plot_titled(panel, "The same after dropout (p = 0.2)")).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text("1/(1−0.2) = 1.2500")
    expect_no_error(page)
    screenshot(page, "model-block")

    zoom(panel, 5)
    expect(plot_titled(panel, "The model's top 10 next characters")).to_be_visible(timeout=WAIT_MS)
    screenshot(page, "model-lens")

    panel.get_by_role("radio", name="Layer 2", exact=True).check()  # the model map
    expect(heading(panel)).to_have_text(LEVEL_TITLES[3], timeout=WAIT_MS)
    expect(panel).to_contain_text("layer 2 of shakespeare-char", timeout=WAIT_MS)
    panel.get_by_role("radio", name="LM head", exact=True).check()
    expect(panel).to_contain_text("Look for: LM head turns the normalised stream", timeout=WAIT_MS)

    panel.get_by_role("radio", name="textbook inputs", exact=True).check()
    zoom(panel, 3)
    expect(panel).to_contain_text("row 0 is [-0.4519, 0.2216, 0.4772, 0.1063]", timeout=WAIT_MS)
    expect(panel).to_contain_text("row 0 is [0.3190, 0.4858]")
    expect(plot_titled(panel, "MultiHeadAttention: after")).to_be_visible()
    expect_no_error(page)
    screenshot(page, "model-textbook-heads")

    panel.get_by_role("checkbox", name=FORGET_TRANSPOSE_LABEL).check()  # notebook 002's missing transpose
    expect(plot_titled(panel, "MultiHeadAttention: where each block")).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text("10 of the 12 blocks")
    expect(panel).to_contain_text("h1·t5 ✓")  # the table: the last row's last block is in its place
    expect_no_error(page)
    screenshot(page, "model-no-transpose")


def test_a_new_query_position_is_drawn_from_the_spares_made_after_the_first(page):
    """A first new query position goes to the server; the positions around it are then made ahead (never on
    arrival), and each later position the page holds is drawn with every request to the server held back (it waited
    about 0.5 s for the server's answer)."""
    panel = open_tab(page, "Model")
    expect(plot_titled(panel, "Scaled scores: cell (41, 0)")).to_be_visible(timeout=WAIT_MS)
    query = panel.get_by_label("query position (-1 = last)", exact=True)
    query.fill("5")
    query.press("Enter")
    expect(plot_titled(panel, "Scaled scores: cell (5, 0)")).to_be_visible(timeout=WAIT_MS)
    held = hold_the_server_once_held(page, "0|0|12", "0|0|3")
    for position in (12, 3):
        query.fill(str(position))
        query.press("Enter")
        expect(plot_titled(panel, f"Scaled scores: cell ({position}, 0)")).to_be_visible(timeout=WAIT_MS)
        expect(panel).to_contain_text(f"q_{position}")
    for route in held:
        route.continue_()
    page.unroute("**/queue/join*")
    assert held  # the server's answers were asked for meanwhile
    query.fill("30")
    query.press("Enter")
    expect(plot_titled(panel, "Scaled scores: cell (30, 0)")).to_be_visible(timeout=WAIT_MS)
    expect_no_error(page)


def test_the_notebooks_own_models_on_the_text_and_on_their_own_inputs(page):
    """Notebook 002's encoder layer, 003's two-layer transformer and 004's sliced heads: their heads, what each
    head reads, and their shapes beside the notebook's. Screenshots: model-book-002, -003, -004."""
    panel = open_tab(page, "Model")
    expect(heading(panel)).to_have_text(LEVEL_TITLES[0], timeout=WAIT_MS)
    for source, notebook, look in (("notebook 002's encoder layer", "002", "no grey cells"),
                                   ("notebook 003's two-layer transformer", "003", "grey upper triangle"),
                                   ("notebook 004's sliced heads", "004", "its own 8 of the 16 features")):
        panel.get_by_role("radio", name=source, exact=True).check()
        expect(heading(panel)).to_have_text(source, timeout=WAIT_MS)
        expect(panel).to_contain_text(look)
        expect(plot_titled(panel, "What each head reads")).to_be_visible(timeout=WAIT_MS)
        expect(plot_titled(panel, f"{source}")).to_have_count(2 if notebook == "003" else 1)
        expect(panel.get_by_role("radio", name=LEVEL_LABELS[0], exact=True)).to_be_hidden()
        expect_no_error(page)
        screenshot(page, f"model-book-{notebook}")
    panel.get_by_role("radio", name="the notebook's own inputs", exact=True).check()
    expect(panel).to_contain_text("the lab's sizes, reading the first 8 characters", timeout=WAIT_MS)
    panel.get_by_role("radio", name="notebook 002's encoder layer", exact=True).check()
    expect(panel).to_contain_text("torch.Size([30, 8, 200, 200])", timeout=WAIT_MS)  # the notebook's own line
    expect(panel).to_contain_text("(1, 8, 200, 200)")  # beside this view's
    expect_no_error(page)
    panel.get_by_role("radio", name="trained checkpoint", exact=True).check()  # back: the levels return
    expect(heading(panel)).to_have_text(LEVEL_TITLES[0], timeout=WAIT_MS)
    expect(panel.get_by_role("radio", name="Layer 0", exact=True)).to_be_visible()
    expect_no_error(page)


def test_the_block_names_every_point_under_its_bar(page):
    """Issue 31: "mean ||x|| at each point" labelled 2 of its 7 bars."""
    panel = open_tab(page, "Model")
    expect(heading(panel)).to_have_text(LEVEL_TITLES[0], timeout=WAIT_MS)
    zoom(panel, 4)
    drawn = x_labels(plot_titled(panel, "Mean ‖x‖ over the tokens"))
    assert [label["text"] for label in drawn] == ["block input", "LayerNorm 1", "attention output", "residual add 1",
                                                  "LayerNorm 2", "MLP output", "residual add 2 (block output)"]
    expect_no_error(page)


SCREENS = {"desktop": dict(viewport={"width": 1366, "height": 768}),
           "phone": dict(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)}


def drawn(panel: Locator, view: str) -> Locator:
    """Figure 1 of ``view`` as the page drew it from its deck: the chart in that view's own host, on screen."""
    return panel.locator(f'#model-chart-0 .chart-deck-plot[data-view="{view}"].js-plotly-plot:visible')


@pytest.mark.parametrize("screen", list(SCREENS))
def test_every_level_of_every_source_draws_its_heading_and_chart(browser, server, tmp_path, screen):
    """Issue 29: each level answered in 0.9-1.4 s, most of it Gradio redrawing up to four charts. The page now draws
    a level from the figures already sent; this steps through every level for the shipped model and the textbook
    inputs, then each notebook's own model, on a desktop (1366 px) and a phone (390 px), with no console error.
    Screenshots go to a temporary folder (never committed)."""
    options = dict(SCREENS[screen])
    pages = open_page(browser, server, options.pop("viewport"), **options)
    page = next(pages)
    try:
        step_through_the_sources(page, tmp_path, screen)
    except BaseException:
        pages.close()
        raise
    next(pages, None)  # closes the page, failing the test on any console error it saw


def keep_screen(page, shown: Locator, path) -> None:
    """A screenshot of the screen with ``shown`` on it. Not the full page: Chromium lays every chart out again at the
    page's full height for one, which took 1 to 10 s each on a busy machine (14 per screen)."""
    shown.scroll_into_view_if_needed()
    page.screenshot(path=str(path))


def step_through_the_sources(page, tmp_path, screen: str) -> None:
    panel = open_tab(page, "Model")
    expect(heading(panel)).to_have_text(LEVEL_TITLES[0], timeout=WAIT_MS)
    for source in ("trained checkpoint", "textbook inputs"):
        panel.get_by_role("radio", name=source, exact=True).check()
        for number, title in enumerate(LEVEL_TITLES, start=1):
            zoom(panel, number)
            expect(panel.get_by_text("Look for:", exact=False).first).to_be_visible()
            if source == "textbook inputs" and title == LEVEL_TITLES[4]:  # six hand-made inputs: nothing to predict
                expect(panel.locator("#model-chart-0 .js-plotly-plot:visible")).to_have_count(0)
                shown = heading(panel)
            else:
                shown = drawn(panel, title)
                expect(shown).to_be_visible(timeout=WAIT_MS)
            keep_screen(page, shown, tmp_path / f"{screen}-{source.split()[0]}-{number}.png")
        expect_no_error(page)
    zoom(panel, 3)
    panel.get_by_role("checkbox", name=FORGET_TRANSPOSE_LABEL).check()  # the blocks moving, one colour per head
    expect(panel.locator(".tp-block")).to_have_count(12, timeout=WAIT_MS)  # the book's 2 heads x 6 tokens
    expect(panel.locator(".tp-caption")).to_be_visible()
    # its titles wrap inside it (on a phone one ran 140 px past its box, cut at "…then .vi"), its axes are named,
    # and a pointer on it holds the blocks still (a learner found each join gone before it was read)
    picture = panel.locator(".tp-picture")
    assert picture.evaluate("p => [...p.querySelectorAll('.tp-title span, .tp-axis')].every(s => "
                            "s.getBoundingClientRect().right <= p.getBoundingClientRect().right + 0.5)")
    expect(picture.locator(".tp-axis")).to_contain_text("each row: 2 blocks of")
    expect(picture.locator(".tp-row").first).to_contain_text("row 0")
    picture.hover()
    expect(picture.locator(".tp-block").first).to_have_css("animation-play-state", "paused")
    # a learner's hold froze whichever join was showing: a choice holds either one, every block at its place there
    for choice, place, title in (("joined right", "0", ".tp-right"), ("notebook 002's join", "1", ".tp-wrong")):
        picture.locator("label", has_text=choice).click()
        page.wait_for_function(
            "([p, n]) => [...p.querySelectorAll('.tp-block')].every(b => { const s = getComputedStyle(b), "
            "m = new DOMMatrix(s.transform); return Math.abs(m.m41 - parseFloat(s.getPropertyValue('--x' + n))) < 0.5 "
            "&& Math.abs(m.m42 - parseFloat(s.getPropertyValue('--y' + n))) < 0.5; })",
            arg=[picture.element_handle(), place], timeout=WAIT_MS)
        expect(picture.locator(f".tp-title {title}")).to_have_css("opacity", "1")
    picture.locator("label", has_text="moving").click()
    expect(picture.locator(".tp-block").first).to_have_css("animation-name", "tp-move")
    keep_screen(page, panel.locator(".tp-caption"), tmp_path / f"{screen}-transpose.png")
    for source in BOOK_SOURCE_TITLES:
        panel.get_by_role("radio", name=source, exact=True).check()
        expect(heading(panel)).to_have_text(source, timeout=WAIT_MS)
        reads = plot_titled(panel, "What each head reads")
        expect(reads).to_be_visible(timeout=WAIT_MS)
        keep_screen(page, reads, tmp_path / f"{screen}-{source.split()[1]}.png")
    expect_no_error(page)
    assert len(list(tmp_path.glob("*.png"))) == 2 * len(LEVEL_TITLES) + 1 + len(BOOK_SOURCE_TITLES)


def test_on_a_phone_a_level_picked_before_its_figures_arrive_is_scrolled_to_when_they_do(phone):
    """A seventh learner picked "4 · block" on a phone as the tab opened and found its heading 1,200 px down: the level
    was drawn when the server's deck arrived, and only a level drawn at the pick was scrolled to."""
    page = phone
    expect(page.get_by_role("tab", name="Model", exact=True)).to_be_visible(timeout=WAIT_MS)
    held = []
    page.route("**/queue/join**", lambda route: held.append(route))  # every answer of the tab's opening held
    panel = open_tab(page, "Model")
    radio = panel.get_by_role("radio", name=LEVEL_LABELS[3], exact=True)
    radio.check()
    page.wait_for_function("() => window.chartDeck && window.chartDeck.revealing.model", timeout=WAIT_MS)
    assert held
    for route in held:
        route.continue_()
    page.unroute("**/queue/join**")
    expect(heading(panel)).to_have_text(LEVEL_TITLES[3], timeout=WAIT_MS)
    expect(heading(panel)).to_be_in_viewport(timeout=WAIT_MS)
    expect_no_error(page)
