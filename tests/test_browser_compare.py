"""The Compare tab in Chromium: equivalence and per-head maps."""

from __future__ import annotations

import pytest
from browser_support import (
    WAIT_MS,
    expect_no_error,
    open_tab,
    plot_titled,
    screenshot,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_compare_agrees_and_draws_head_maps(page):
    panel = open_tab(page, "Compare")
    panel.get_by_role("button", name="Compare", exact=True).click()
    expect(panel).to_contain_text("6 of 6 compared implementations agree", timeout=WAIT_MS)
    equivalence = panel.get_by_role("grid").filter(has=page.get_by_role("columnheader", name="agrees"))
    expect(equivalence.get_by_role("gridcell", name="yes", exact=True)).to_have_count(6)
    expect(equivalence.get_by_role("gridcell", name="NO", exact=True)).to_have_count(0)
    expect(plot_titled(panel, "Per-head attention maps")).to_be_visible(timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "compare")
