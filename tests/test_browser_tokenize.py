"""The Tokenize tab in Chromium: IDs, the round trip, unknown characters."""

from __future__ import annotations

import pytest
from browser_support import (
    WAIT_MS,
    expect_no_error,
    open_tab,
    screenshot,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_tokenize_shows_ids_and_flags_unknown_characters(page):
    panel = open_tab(page, "Tokenize")
    text = panel.get_by_label("Text", exact=True)
    text.fill("Hello world")
    panel.get_by_role("button", name="Tokenize", exact=True).click()
    chips = panel.locator(".tok-chips")
    expect(chips.locator(".tok-chip")).to_have_count(11, timeout=WAIT_MS)
    expect(chips).to_contain_text("20")
    expect(panel.get_by_label("Token IDs")).to_have_value("[20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42]")
    expect(panel.get_by_label("Decoded back (round trip)")).to_have_value("Hello world")

    text.fill("Hello ∑ world")
    panel.get_by_role("button", name="Tokenize", exact=True).click()
    unknown = chips.locator(".tok-unknown")
    expect(unknown).to_have_count(1, timeout=WAIT_MS)
    expect(unknown).to_contain_text("∑")
    expect(panel).to_contain_text("not in this vocabulary")
    expect(panel.get_by_label("Token IDs")).to_have_value("[20, 43, 50, 50, 53, 1, 1, 61, 53, 56, 50, 42]")
    expect_no_error(page)
    screenshot(page, "tokenize")
