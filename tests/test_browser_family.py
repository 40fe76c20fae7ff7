"""A Llama-family checkpoint in Chromium (issue 51): a tiny LlamaForCausalLM (4 query heads over 2 K/V heads) built
with transformers and put in the app's weights folder, opened by name in the Model tab (every level: the rotation,
the shared K/V head, RMSNorm and SwiGLU named) and in the Compare tab (its own layer computed the grouped ways). No
console error, no error toast. Screenshots: family-model-score, family-model-block, family-compare."""

from __future__ import annotations

import re

import pytest
from browser_support import WAIT_MS, expect_no_error, open_tab, plot_titled, screenshot
from playwright.sync_api import Locator, expect
from test_browser_model import heading, zoom

from playground.lens.anatomy.lessons import LEVEL_TITLES
from playground.ui import train_tab

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


def sample(panel: Locator, checkpoint: str, prompt: str, new_tokens: int) -> str:
    """Generate ``new_tokens`` from ``checkpoint`` with the KV cache on; the finished text."""
    pick(panel, checkpoint)
    expect(panel).to_contain_text(f"{checkpoint} · ", timeout=WAIT_MS)
    panel.get_by_label("Prompt", exact=True).fill(prompt)
    panel.get_by_label("max new tokens", exact=True).fill(str(new_tokens))
    cache = panel.get_by_label("KV cache", exact=True)
    if not cache.is_checked():
        cache.click()
    panel.get_by_role("button", name="Generate", exact=True).click()
    expect(panel).to_contain_text(re.compile(rf"with the KV cache.*\b{new_tokens} (characters|tokens) in"),
                                  timeout=2 * WAIT_MS)
    return panel.get_by_label("Text", exact=True).input_value()


def test_the_sample_tab_generates_from_a_llama_and_prices_its_grouped_cache(page, llama):
    panel = open_tab(page, "Sample")
    text = sample(panel, llama, "ROMEO:", 12)
    assert text.startswith("ROMEO:") and len(text) > len("ROMEO:")
    # the cache the sampler kept: 2 layers x (K and V) x 2 K/V heads x head size 8 x 4 bytes a token
    expect(panel).to_contain_text("2 K/V heads for 4 query heads", use_inner_text=False)
    expect_no_error(page)


def test_the_modern_preset_trains_a_llama_in_the_train_tab_and_the_sample_tab_samples_it(page, server):
    panel = open_tab(page, "Train")
    panel.get_by_label("preset").click()
    page.get_by_role("option", name="modern", exact=True).click()
    expect(panel.get_by_label("Llama's blocks", exact=True)).to_be_checked(timeout=WAIT_MS)
    expect(panel.get_by_label(train_tab.KV_HEADS_LABEL, exact=True)).to_have_value("2")
    for label, value in (("steps", 30), (train_tab.TIME_BUDGET_LABEL, 0)):
        panel.get_by_label(label, exact=True).fill(str(value))
    name = panel.get_by_label("run name (folder in weights/)").input_value()
    panel.get_by_role("button", name="Start", exact=True).click()
    expect(panel).to_contain_text(re.compile(rf"FINISHED · run {re.escape(name)}"), timeout=4 * WAIT_MS)
    assert (server.weights / name / "config.json").is_file()
    panel = open_tab(page, "Sample")
    text = sample(panel, name, "ROMEO:", 20)
    assert text.startswith("ROMEO:") and len(text) == len("ROMEO:") + 20  # a character model: a token a character
    expect(panel).to_contain_text("2 K/V heads for 4 query heads", use_inner_text=False)
    expect_no_error(page)


def test_the_tokenize_tab_reads_a_llamas_own_tokenizer(page, llama, server):
    from playground.checkpoints.loading import open_checkpoint

    expected = open_checkpoint(llama, directory=server.weights).tokenizer.encode("Hello world").tolist()
    panel = open_tab(page, "Tokenize")
    panel.get_by_label("Text", exact=True).fill("Hello world")
    panel.get_by_role("radio", name="loaded checkpoint", exact=True).check()
    pick(panel, llama)
    expect(panel.get_by_label("Token IDs")).to_have_value(str(expected), timeout=WAIT_MS)
    expect(panel).to_contain_text("the checkpoint's own tokenizer")
    expect_no_error(page)
