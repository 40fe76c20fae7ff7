"""A Llama-family checkpoint in Chromium (issue 51): a tiny LlamaForCausalLM (4 query heads over 2 K/V heads) built
with transformers and put in the app's weights folder, opened by name in the Model tab (every level: the rotation,
the shared K/V head, RMSNorm and SwiGLU named) and in the Compare tab (its own layer computed the grouped ways). No
console error, no error toast. Screenshots: family-model-score, family-model-block, family-compare."""

from __future__ import annotations

import pytest
from browser_support import WAIT_MS, expect_no_error, open_tab, plot_titled, screenshot
from playwright.sync_api import Locator, expect
from test_browser_model import heading, zoom

from playground.lens.anatomy.lessons import LEVEL_TITLES

pytestmark = pytest.mark.browser

NAME = "tiny-llama"


@pytest.fixture
def llama(server) -> str:
    """The tiny Llama in the server's weights folder, as a learner's converted folder sits there."""
    from test_llama import make_tiny

    if not (server.weights / NAME).exists():
        make_tiny(server.weights / NAME, "llama-4over2")
    return NAME


def pick(panel: Locator, name: str) -> None:
    field = panel.get_by_label("Checkpoint", exact=True).first
    field.click()
    field.fill(name)
    field.press("Enter")


def test_the_model_tab_draws_a_llama_at_every_level(page, llama):
    panel = open_tab(page, "Model")
    expect(heading(panel)).to_have_text(LEVEL_TITLES[0], timeout=WAIT_MS)  # the shipped model, drawn on arrival
    pick(panel, llama)
    panel.get_by_label("head", exact=True).fill("3")
    panel.get_by_label("head", exact=True).press("Enter")
    expect(panel).to_contain_text("K/V head 1, shared with head 2", timeout=WAIT_MS, use_inner_text=False)
    expect(plot_titled(panel, "The rotation: q_")).to_be_visible(timeout=WAIT_MS)
    expect(plot_titled(panel, "Scaled scores: cell")).to_be_visible()
    expect_no_error(page)
    screenshot(page, "family-model-score", publish=False)
    zoom(panel, 2)
    expect(plot_titled(panel, "The rotation: the angle")).to_be_visible(timeout=WAIT_MS)
    zoom(panel, 3)
    expect(panel).to_contain_text("heads 2, 3 read K/V head 1", timeout=WAIT_MS, use_inner_text=False)
    expect(plot_titled(panel, "Layer 0: every head's attention weights")).to_be_visible(timeout=WAIT_MS)
    zoom(panel, 4)
    expect(plot_titled(panel, "The gated MLP (SwiGLU)")).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text("RMSNorm₁", timeout=WAIT_MS, use_inner_text=False)
    screenshot(page, "family-model-block", publish=False)
    zoom(panel, 5)
    expect(plot_titled(panel, "Top guess for the next character")).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text("The final norm here is RMSNorm", use_inner_text=False)
    expect_no_error(page)


def test_the_compare_tab_computes_a_llamas_own_layer_each_grouped_way(page, llama):
    panel = open_tab(page, "Compare")
    panel.get_by_text("A checkpoint's own heads: grouped K/V heads, each way").click()
    pick(panel, llama)
    panel.get_by_role("button", name="Compare its heads").click()
    expect(panel).to_contain_text("4 query heads over 2 K/V heads", timeout=WAIT_MS)
    table = panel.get_by_role("grid", name="Each way on the checkpoint's layer")
    for way in ("repeat_kv, then matmul", "sdpa, enable_gqa", "sdpa after repeat_kv", "grouped matmul"):
        expect(table.get_by_role("gridcell", name=way, exact=True)).to_be_visible(timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "family-compare", publish=False)
