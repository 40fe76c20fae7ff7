"""The Attention tab on a Llama-family checkpoint in Chromium, desktop and phone: a tiny LlamaForCausalLM (4 query
heads over 2 K/V heads) built with transformers and saved as a folder in the user's weights/, opened by name. The K/V
head the picked query head reads is named beside the head picker and on K and V; the rotation stage (2½) draws q and k
before and after their turn and each pair's angle; the shift proof keeps its scores, and on the shipped GPT moves them.
"""

from __future__ import annotations

import shutil

import pytest
from browser_support import SCREENSHOTS, WAIT_MS, cut_labels, expect_no_error, open_tab, plot_titled, screenshot
from playwright.sync_api import expect
from test_browser_attention import arrive, pick_step
from test_llama import make_tiny

from playground.lens.walkthrough import STEP_TITLES
from playground.ui import rotation_views

pytestmark = pytest.mark.browser
LLAMA = "rope-tiny-llama"


@pytest.fixture(scope="module")
def llama_in_weights(server):
    """The tiny Llama's folder (transformers' save_pretrained and its tokenizer.json) in the server's weights/."""
    folder = server.weights / LLAMA
    if not folder.exists():
        make_tiny(folder, "llama-4over2")
    return LLAMA


def choose_checkpoint(panel, name: str) -> None:
    field = panel.get_by_label("Checkpoint", exact=True)
    field.click()
    field.fill(name)
    field.press("Enter")


@pytest.mark.parametrize("viewport", ["page", "phone"])
def test_a_llama_head_steps_through_its_rotation_and_the_shift_proof(request, llama_in_weights, viewport):
    page = request.getfixturevalue(viewport)
    arrive(page)
    panel = open_tab(page, "Attention")
    section = page.locator(f"#{rotation_views.ROTATION_ELEM_ID}")
    expect(section).to_be_hidden()  # the shipped GPT has no rotation
    choose_checkpoint(panel, llama_in_weights)
    expect(panel).to_contain_text("query heads 0 and 1 read K/V head 0", timeout=WAIT_MS)  # beside the head picker
    panel.get_by_label("head", exact=True).fill("3")
    panel.get_by_label("head", exact=True).press("Enter")
    expect(panel).to_contain_text("query heads 2 and 3 read K/V head 1", timeout=WAIT_MS)

    pick_step(panel, 2)
    expect(plot_titled(panel, "K: what each token offers")).to_contain_text("K/V head 1", timeout=WAIT_MS)
    expect(plot_titled(panel, "V: what each token passes on")).to_contain_text("K/V head 1")

    # the rotation stage, between Q/K and the scores
    expect(section).to_be_visible(timeout=WAIT_MS)
    section.scroll_into_view_if_needed()
    expect(section).to_contain_text("2½. Rotation", timeout=WAIT_MS)
    expect(section).to_contain_text("depends only on the distance")
    expect(plot_titled(section, "Query")).to_be_visible(timeout=WAIT_MS)
    expect(plot_titled(section, "Angle (radians)")).to_be_visible(timeout=WAIT_MS)
    assert cut_labels(page) == []

    shift = page.locator(f"#{rotation_views.SHIFT_ELEM_ID}")
    shift.get_by_label("shift the positions by k", exact=True).fill("7")
    shift.get_by_role("button", name="Shift the text").click()
    expect(shift).to_contain_text("moved 7 positions on", timeout=WAIT_MS)
    expect(shift).to_contain_text("Rotary positions")
    pick_step(panel, 3)  # the scores the proof compared
    # the Q, K and V what-ifs on a grouped head (issue 52): the change is its K/V group's, said on screen
    panel.get_by_text("What if Q and K were one matrix, or V were X?").click()
    panel.get_by_role("button", name="Run this what-if", exact=True).click()
    expect(panel).to_contain_text("L0 H3 shares its K/V head with H2", timeout=WAIT_MS)
    expect(panel).to_contain_text("Loss on the text:")
    expect_no_error(page)
    section.screenshot(path=str(SCREENSHOTS / f"attention-rotation-stage{'-phone' if viewport == 'phone' else ''}.png"))
    screenshot(page, f"attention-rotation{'-phone' if viewport == 'phone' else ''}", publish=False)  # back at the top

    # the same control on the shipped GPT: its learned positions move the scores
    choose_checkpoint(panel, "shakespeare-char")
    expect(section).to_be_hidden(timeout=WAIT_MS)
    shift.get_by_role("button", name="Shift the text").click()
    expect(shift).to_contain_text("Learned positions", timeout=WAIT_MS)
    expect(panel.get_by_role("heading", level=3).first).to_have_text(STEP_TITLES[2], timeout=WAIT_MS)
    expect_no_error(page)


def test_a_mistral_folder_opens_and_its_mask_stage_shows_the_sliding_window(request, page, server):
    """A tiny MistralForCausalLM (window 5, shorter than the text) in the weights folder: step 5 says the window and
    greys exactly the cells outside it, those above the diagonal and those 5 or more keys back."""
    from test_mistral import PROMPT, make_tiny_mistral

    from playground.text.subword import BPETokenizer

    folder = server.weights / "tiny-mistral"
    if not folder.exists():
        make_tiny_mistral(folder, "mistral-4over2-w5")
    request.addfinalizer(lambda: shutil.rmtree(folder, ignore_errors=True))  # the session's later tests never see it
    tokens = BPETokenizer.from_str((folder / "tokenizer.json").read_text(encoding="utf-8")).encode(PROMPT).numel()
    panel = arrive(page)
    choose_checkpoint(panel, "tiny-mistral")
    expect(panel).to_contain_text("query heads 0 and 1 read K/V head 0", timeout=WAIT_MS)
    panel.get_by_label("Text (not used by the presets)").fill(PROMPT)
    expect(panel).to_contain_text(f"T = {tokens} tokens", timeout=WAIT_MS)
    pick_step(panel, 5)
    expect(panel).to_contain_text("Mistral's sliding window: each query sees at most 5 keys back", timeout=WAIT_MS)
    chart = plot_titled(panel, "masked scores")
    expect(chart).to_be_visible(timeout=WAIT_MS)
    # the grey layer's cells (1 where masked): every row keeps at most 5 keys, the band ending at its diagonal
    grey = chart.evaluate("plot => [...plot._fullData[1].z].map(row => [...row].map(cell => cell === 1))")
    T = len(grey)
    assert T == tokens > 10 and all(len(row) == T for row in grey)
    for i, row in enumerate(grey):
        assert [j for j, masked in enumerate(row) if not masked] == list(range(max(0, i - 4), i + 1)), i
    expect_no_error(page)
    screenshot(page, "attention-mistral-window", publish=False)
