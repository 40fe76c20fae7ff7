"""The Why tab in Chromium on a desktop, on the shipped model: the logit split into its parts on arrival, the
strongest head's reading and its circuits, another head picked, heads knocked out and every head ranked. No
console error, no error toast. Screenshots: why-parts, why-knocked."""

from __future__ import annotations

import pytest
from browser_support import WAIT_MS, expect_no_error, open_tab, plot_titled, screenshot
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_why_this_character_from_the_parts_to_a_knocked_out_head(page):
    panel = open_tab(page, "Why")
    expect(panel.get_by_role("heading", level=3).first).to_contain_text("Why ", timeout=WAIT_MS)  # on arrival
    for title in ("The logit of", "Where position", "Each read character's push", "QK of ", "OV of ",
                  "Loss added when each head alone"):
        expect(plot_titled(panel, title)).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text("is the sum of these")
    expect(panel).to_contain_text("Most needed: L")
    expect_no_error(page)
    screenshot(page, "why-parts")

    panel.get_by_label("head", exact=True).click()
    page.get_by_role("option", name="L0 H1", exact=True).click()
    expect(panel.get_by_role("heading", name="L0 H1 at position", exact=False)).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text("What L0 H1 reads and writes")

    panel.get_by_label("knock out", exact=True).click()
    page.get_by_role("option", name="L0 H2", exact=True).click()
    page.keyboard.press("Escape")
    expect(panel).to_contain_text("without L0 H2", timeout=WAIT_MS)
    expect(panel).to_contain_text("loss on the text")

    position = panel.get_by_label("position (-1 = last)", exact=True)
    position.fill("3")
    position.press("Enter")
    expect(panel.get_by_role("heading", level=3).first).to_contain_text("(position 3)", timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "why-knocked")


def test_a_click_on_a_heads_bar_opens_that_head(page):
    """Issue 29: the attribution chart names every head's part of the logit; clicking its bar opens the head."""
    panel = open_tab(page, "Why")
    chart = plot_titled(panel, "The logit of")
    expect(chart).to_be_visible(timeout=WAIT_MS)
    expect(panel.get_by_role("heading", name="at position", exact=False)).to_be_visible(timeout=WAIT_MS)
    names = chart.evaluate("el => el.data[0].customdata")
    shown = panel.get_by_role("heading", name="at position", exact=False).inner_text()
    wanted = next(name for name in names if name.startswith("L1 H") and not shown.startswith(name))
    bar = chart.locator(".barlayer .point").nth(names.index(wanted))
    bar.scroll_into_view_if_needed()
    box = bar.bounding_box()  # a person's click where the bar is drawn (Plotly's drag layer lies over it)
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(panel.get_by_role("heading", name=f"{wanted} at position", exact=False)).to_be_visible(timeout=WAIT_MS)
    expect(panel.get_by_label("head", exact=True)).to_have_value(wanted)
    expect(panel).to_contain_text(f"What {wanted} reads and writes", timeout=WAIT_MS)
    expect_no_error(page)
