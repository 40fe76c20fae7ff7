"""The Tokenize tab in Chromium: drawn when the page opens, redrawn as a person types or changes the vocabulary
source or the checkpoint (no click needed), the Tokenize button, unknown characters, and every source."""

from __future__ import annotations

import pytest
from browser_support import (
    ERROR_TOAST,
    WAIT_MS,
    expect_no_error,
    open_tab,
    screenshot,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

HELLO_IDS = "[20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42]"


def test_tokens_are_shown_on_arrival_follow_the_typing_and_every_source(page):
    panel = open_tab(page, "Tokenize")
    chips = panel.locator(".tok-chips")
    expect(chips.locator(".tok-chip")).to_have_count(11, timeout=WAIT_MS)  # "Hello world", before any click
    expect(panel.get_by_label("Token IDs")).to_have_value(HELLO_IDS)

    text = panel.get_by_label("Text", exact=True)
    text.fill("")
    text.press_sequentially("To be", delay=30)  # typed key by key: each key is an edit
    expect(chips.locator(".tok-chip")).to_have_count(5, timeout=WAIT_MS)
    expect(panel.get_by_label("Decoded back (round trip)")).to_have_value("To be", timeout=WAIT_MS)

    text.fill("Hello ∑ world")
    unknown = chips.locator(".tok-unknown")
    expect(unknown).to_have_count(1, timeout=WAIT_MS)
    expect(unknown).to_contain_text("∑")
    expect(panel).to_contain_text("not in this vocabulary")
    expect(panel.get_by_label("Token IDs")).to_have_value("[20, 43, 50, 50, 53, 1, 1, 61, 53, 56, 50, 42]")
    expect(page.locator(ERROR_TOAST)).to_have_count(0)  # typing never pops up errors or warnings

    text.fill("Hello world")
    panel.get_by_role("button", name="Tokenize", exact=True).click()  # the button still works
    expect(panel.get_by_label("Token IDs")).to_have_value(HELLO_IDS, timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "tokenize")

    every_vocabulary_source_and_the_checkpoint_field(page, panel)  # on the same page: one page opened, not two


def every_vocabulary_source_and_the_checkpoint_field(page, panel):
    """From the text box's default: each source, the checkpoint field, and what each refuses in place."""
    ids = panel.get_by_label("Token IDs")
    expect(ids).to_have_value(HELLO_IDS, timeout=WAIT_MS)
    panel.get_by_label("Text", exact=True).fill("abba")

    panel.get_by_role("radio", name="this text", exact=True).check()
    expect(ids).to_have_value("[0, 1, 1, 0]", timeout=WAIT_MS)
    expect(panel).to_contain_text("vocabulary of **2** symbols".replace("**", ""))

    # named as read: the server's home has Tiny Shakespeare cached (a server without it names the Sonnets)
    panel.get_by_role("radio", name="corpus: Tiny Shakespeare", exact=True).check()
    expect(ids).to_have_value("[39, 40, 40, 39]", timeout=WAIT_MS)
    expect(panel).to_contain_text("vocabulary of 65 symbols")

    panel.get_by_role("radio", name="this text", exact=True).check()
    expect(ids).to_have_value("[0, 1, 1, 0]", timeout=WAIT_MS)
    panel.get_by_label("Text", exact=True).fill("")  # nothing to train a vocabulary from: said in place, no pop-up
    expect(panel).to_contain_text("Type some text first", timeout=WAIT_MS)
    expect(page.locator(ERROR_TOAST)).to_have_count(0)

    panel.get_by_label("Text", exact=True).fill("abba")
    panel.get_by_role("radio", name="loaded checkpoint", exact=True).check()
    checkpoint = panel.get_by_label("Checkpoint", exact=True)
    checkpoint.click()
    page.get_by_role("option", name="shakespeare-char", exact=True).click()
    expect(ids).to_have_value("[39, 40, 40, 39]", timeout=WAIT_MS)
    checkpoint.fill("no-such-run")
    checkpoint.press("Enter")
    expect(panel).to_contain_text("No checkpoint named 'no-such-run'", timeout=WAIT_MS)
    expect(page.locator(ERROR_TOAST)).to_have_count(0)
    checkpoint.fill("shakespeare-char")
    checkpoint.press("Enter")
    expect(ids).to_have_value("[39, 40, 40, 39]", timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "tokenize-sources", publish=False)
