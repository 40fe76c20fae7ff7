"""The Attention tab in Chromium: every stage, the what-ifs, refusals."""

from __future__ import annotations

import re

import pytest
from browser_support import (
    ERROR_TOAST,
    WAIT_MS,
    answers,
    expect_errors,
    expect_no_error,
    open_tab,
    plot_titled,
    screenshot,
)
from playwright.sync_api import expect

from playground.walkthrough import STEP_TITLES

pytestmark = pytest.mark.browser

PLOTS = [["X"], ["Q", "K", "V"], ["raw scores"], ["scaled scores"], ["masked scores"],
         ["attention weights · row sums"], ["output"]]  # the titles of each step's matrix plots
ATTENTION_STAGES = list(zip(STEP_TITLES, PLOTS))


def test_attention_steps_through_every_stage(page):
    panel = open_tab(page, "Attention")
    panel.get_by_role("button", name="Show", exact=True).click()
    heading = panel.get_by_role("heading", level=3)
    for number, (title, plots) in enumerate(ATTENTION_STAGES):
        if number:
            panel.get_by_role("button", name="Next ▶").click()
        expect(heading).to_have_text(title, timeout=WAIT_MS)
        for plot in plots:
            expect(plot_titled(panel, plot)).to_be_visible(timeout=WAIT_MS)
        expect(panel.get_by_role("radio", name=re.compile(rf"^{number + 1}\. "))).to_be_checked()
    expect(panel).to_contain_text("Mask (on now).")
    panel.get_by_role("button", name="◀ Previous").click()
    expect(heading).to_have_text(STEP_TITLES[5], timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "attention")  # the softmax weights, masked: the README's picture

    panel.get_by_label("causal mask", exact=True).uncheck()
    expect(panel).to_contain_text("Mask (off now).", timeout=WAIT_MS)
    expect(heading).to_have_text(STEP_TITLES[5])
    expect_no_error(page)
    screenshot(page, "attention-mask-off", publish=False)


def test_attention_bad_layer_is_a_readable_error_and_the_server_stays_up(page, server):
    panel = open_tab(page, "Attention")
    layer = panel.get_by_label("layer", exact=True)
    expect_errors(page, "out of range")
    layer.fill("99")
    panel.get_by_role("button", name="Show", exact=True).click()
    toast = page.locator(ERROR_TOAST)
    expect(toast).to_be_visible(timeout=WAIT_MS)
    expect(toast).to_contain_text("out of range")
    expect(toast).not_to_contain_text("Traceback")
    expect(toast).to_have_css("opacity", "1")  # faded in, so the screenshot shows it
    screenshot(page, "attention-error", publish=False)

    layer.fill("0")
    panel.get_by_role("button", name="Show", exact=True).click()
    expect(panel.get_by_role("heading", level=3)).to_have_text("1. Input X", timeout=WAIT_MS)
    expect(plot_titled(panel, "X")).to_be_visible(timeout=WAIT_MS)
    assert answers(server.url)
