"""The Why tab in Chromium on a Llama-family checkpoint: a tiny LlamaForCausalLM (4 query heads over 2 K/V heads,
rotary positions, RMSNorm, SwiGLU) saved by transformers into the user's weights folder, chosen by name. Every view the
GPT checkpoints get (the parts, the chain, the circuits, a head knocked out and the ranking), the distance box shown
for this model only, and the QK table drawn again at the distance typed. No console error, no error toast.
Screenshot: why-llama."""

from __future__ import annotations

import pytest
from browser_support import WAIT_MS, expect_no_error, open_tab, screenshot
from playwright.sync_api import expect
from test_browser_why import CIRCUITS_JS, check_three_views, plot_titled
from test_llama import make_tiny

from playground.config import Limits
from playground.ui import why_reading
from playground.ui.common import AppContext

pytestmark = pytest.mark.browser

TEXT = "To be, or not to be, that is"


def test_a_tiny_llama_explained_with_its_qk_table_at_a_distance(server, page):
    if not (server.weights / "tiny-llama").exists():
        make_tiny(server.weights / "tiny-llama", "llama-4over2")
    loaded = AppContext(limits=Limits(), weights=server.weights).checkpoint("tiny-llama")
    ids = loaded.tokenizer.encode(TEXT)
    subset = why_reading._circuit_tokens(loaded.config.vocabulary_size, ids)
    rows = loaded.config.vocabulary_size if subset is None else subset.numel()
    panel = open_tab(page, "Why")
    expect(panel.get_by_role("heading", level=3).first).to_contain_text("Why ", timeout=WAIT_MS)
    distance = panel.get_by_label("distance", exact=True)
    expect(distance).to_be_hidden()  # the shipped GPT's positions are embeddings: its tables have no distance
    panel.get_by_label("Text", exact=True).fill(TEXT)
    field = panel.get_by_label("Checkpoint", exact=True)
    field.click()
    field.fill("tiny-llama")
    field.press("Enter")
    expect(distance).to_be_visible(timeout=WAIT_MS)
    expect(distance).to_have_value("1")
    expect(panel).to_contain_text("how far back the key is")  # the box's one sentence of why
    parts = plot_titled(panel, "The logit of")
    # the Llama's bars, in place of the shipped GPT's: one embedding, no position embedding
    expect(parts.locator(".ytick text").filter(has_text="position embedding")).to_have_count(0, timeout=WAIT_MS)
    expect(parts.locator(".ytick text").first).to_have_text("token embedding", timeout=WAIT_MS)
    labels = parts.locator(".ytick text").all_text_contents()
    assert "position embedding" not in labels and "L1 H3" in labels and "L1 MLP" in labels
    check_three_views(page, panel, "L0 H1", rows, "why-llama")
    qk_title = "() => (" + CIRCUITS_JS + ")()[0].title.replace(/<br>/g, ' ')"
    assert ", key 1 back" in page.evaluate(qk_title)
    distance.fill("3")
    distance.press("Enter")
    page.wait_for_function(f"() => {{ try {{ return ({qk_title})().includes(', key 3 back'); }} "
                           "catch (drawing) { return false; } }", timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "why-llama", publish=False)
