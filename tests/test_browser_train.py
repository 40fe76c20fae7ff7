"""The Train tab in Chromium: start, progress, stop."""

from __future__ import annotations

import re

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


def test_train_starts_shows_progress_and_stops(page):
    panel = open_tab(page, "Train")
    for label, value in [("layers_num", 1), ("embedding_dim", 16), ("heads_num", 2), ("context_size", 16),
                         ("batch size", 4), ("steps", 2000)]:
        panel.get_by_label(label, exact=True).fill(str(value))
    panel.get_by_label("run name (folder in weights/)").fill("browser-run")
    panel.get_by_role("button", name="Start", exact=True).click()
    expect(panel).to_contain_text("RUNNING · run browser-run", timeout=WAIT_MS)
    expect(panel).to_contain_text(re.compile(r"step [1-9]\d* / 2000"), timeout=WAIT_MS)  # the timer polls
    loss = plot_titled(panel, "Loss")
    expect(loss.locator(".legendtext", has_text="train")).to_be_visible(timeout=WAIT_MS)
    expect(loss.locator(".scatterlayer .trace").first).to_be_attached()

    panel.get_by_role("button", name="Stop", exact=True).click()
    expect(panel).to_contain_text(re.compile(r"(STOPPED|FINISHED) · run browser-run"), timeout=2 * WAIT_MS)
    expect_no_error(page)
    screenshot(page, "train")
