"""The Sample tab in Chromium: generation."""

from __future__ import annotations

import re

import pytest
from browser_support import (
    WAIT_MS,
    expect_no_error,
    open_tab,
    screenshot,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_sample_generates_text(page):
    panel = open_tab(page, "Sample")
    prompt = panel.get_by_label("Prompt", exact=True).input_value()
    assert prompt
    panel.get_by_role("button", name="Generate", exact=True).click()
    expect(panel).to_contain_text("tokens/s", timeout=WAIT_MS)
    expect(panel.get_by_label("Text", exact=True)).to_have_value(re.compile("^" + re.escape(prompt) + r"[\s\S]+"),
                                                                 timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "sample")
