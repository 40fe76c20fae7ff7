"""A checkpoint that fails to load, in every tab that draws a checkpoint's views (issue 52, trip 4), in Chromium.

Offline, a learner typed `gpt2` in the Checkpoint box: the old model's charts stayed under the new name (the Why tab
took its view off instead), and the toast named the server's folder. Each tab now says why in a toast without a
server path, puts the name of the charts on screen back in the box, and leaves its view as it was
(common.checkpoint_loaded, one mechanism for the Attention, Model, Why and Sample tabs). One offline server and one
desktop page go through the four tabs.
"""

from __future__ import annotations

import re

import pytest
from browser_support import (
    DESKTOP,
    ERROR_TOAST,
    WAIT_MS,
    expect_errors,
    expect_no_error,
    open_page,
    open_tab,
    plot_titled,
)
from playwright.sync_api import Locator, Page, expect

from playground.lens.anatomy.lessons import LEVEL_TITLES
from playground.lens.walkthrough import STEP_TITLES
from playground.ui import chart_deck

pytestmark = pytest.mark.browser

SHIPPED = "shakespeare-char"


@pytest.fixture(scope="module")
def learner(browser, offline_server) -> Page:
    yield from open_page(browser, offline_server, DESKTOP)


def settled(page: Page) -> None:
    page.wait_for_function(f"() => !document.documentElement.hasAttribute('{chart_deck.WAITING_ATTR}')",
                           timeout=WAIT_MS)


def on_screen(panel: Locator) -> tuple[list[str], list[str]]:
    """The tab's headings and its drawn charts' titles (those folded away too): what a learner reads as "the view"."""
    headings = [text.strip() for text in panel.get_by_role("heading").all_inner_texts()]
    titles = panel.evaluate("""el => [...el.querySelectorAll('.js-plotly-plot')]
        .filter(p => p.layout)
        .map(p => String((p.layout.title && p.layout.title.text) || ''))""")
    return headings, titles


def fails_to_load(page: Page, panel: Locator) -> None:
    """Type `gpt2` (the Hub is out of reach) in the tab's Checkpoint box; the toast says why without a server path,
    the box names the shipped model again and the view on screen stays as it was."""
    settled(page)
    before = on_screen(panel)
    summary = panel.locator(".prose").all_inner_texts()
    field = panel.get_by_label("Checkpoint", exact=True)
    expect(field).to_have_value(SHIPPED, timeout=WAIT_MS)
    field.click()
    field.fill("gpt2")
    field.press("Enter")
    toast = page.locator(ERROR_TOAST).filter(has_text="gpt2")
    expect(toast).to_be_visible(timeout=WAIT_MS)
    text = toast.inner_text()
    assert "Traceback" not in text and not re.search(r"(^|[\s'(])/[A-Za-z]", text), text  # no server path
    expect(field).to_have_value(SHIPPED, timeout=WAIT_MS)  # the charts' model, named again
    field.blur()
    settled(page)
    (headings, titles), (headings_before, titles_before) = on_screen(panel), before
    assert headings == headings_before
    assert set(titles_before) <= set(titles)  # the charts drawn stay (the Why tab's circuits may still be coming)
    assert panel.locator(".prose").all_inner_texts() == summary
    for close in page.locator('[data-testid="toast-close"]').all():  # the next tab starts without the toast
        close.click()
    expect(page.locator(ERROR_TOAST)).to_have_count(0, timeout=WAIT_MS)


def test_a_checkpoint_that_fails_to_load_leaves_each_tabs_view_under_its_own_name(learner):
    expect_errors(learner, "gpt2")
    attention = open_tab(learner, "Attention")
    expect(attention.get_by_role("heading", level=3)).to_have_text(STEP_TITLES[0], timeout=WAIT_MS)
    expect(plot_titled(attention, "X")).to_be_visible(timeout=WAIT_MS)
    fails_to_load(learner, attention)

    model = open_tab(learner, "Model")
    expect(model.get_by_role("heading", name=LEVEL_TITLES[0])).to_be_visible(timeout=WAIT_MS)
    expect(plot_titled(model, "Scaled scores: cell (41, 0)")).to_be_visible(timeout=WAIT_MS)
    fails_to_load(learner, model)

    why = open_tab(learner, "Why")
    expect(why.get_by_role("heading", name=re.compile(r"^L\d+ H\d+ at position"))).to_be_visible(timeout=WAIT_MS)
    expect(plot_titled(why, "QK of L0 H0")).to_be_attached(timeout=WAIT_MS)
    fails_to_load(learner, why)

    sample = open_tab(learner, "Sample")
    expect(sample).to_contain_text(f"{SHIPPED} ·", timeout=WAIT_MS)  # the checkpoint's summary
    fails_to_load(learner, sample)
    expect_no_error(learner)
