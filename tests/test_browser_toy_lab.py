"""Notebook 004's lab in Chromium: the toy preset trains the notebook's own attention-only model on a pasted
"hello world", its loss falls as the notebook's printed losses do, its samples and probe show on the run's eight
characters, and the Sample tab writes from the notebook's "w" over its window of 8, with no console error."""

from __future__ import annotations

import re

import pytest
from browser_support import WAIT_MS, expect_no_error, open_tab, plot_titled, screenshot
from playwright.sync_api import expect

from playground.checkpoints import store as checkpoints

pytestmark = pytest.mark.browser

HELLO = "hello world"


def test_the_toy_preset_is_notebook_004s_lab_from_train_to_sample(page, server):
    """"hello world" is too short to hold out a validation split, so the run trains and validates on the whole text
    and says so; the notebook's model has 1,048 parameters there, and no KV cache to sample with."""
    panel = open_tab(page, "Train")
    box = panel.get_by_label("run name (folder in weights/)")
    # the page's own name first, so that the preset's cannot land over it
    expect(box).to_have_value(checkpoints.fresh_run_name(server.weights), timeout=WAIT_MS)
    panel.get_by_label("preset").click()
    page.get_by_role("option", name="toy", exact=True).click()
    expect(panel.get_by_label("context_size", exact=True)).to_have_value("8", timeout=WAIT_MS)
    expect(panel.get_by_role("radio", name="notebook_004")).to_be_checked()
    expect(panel.get_by_role("radio", name="constant")).to_be_checked()  # the notebook's learning rate never falls
    expect(panel.get_by_label("learning rate", exact=True)).to_have_value("0.001")
    expect(box).to_have_value(re.compile(r"^toy-\d+$"))
    name = box.input_value()
    panel.get_by_role("radio", name="pasted text").check()
    panel.get_by_role("textbox", name="pasted text").fill(HELLO)
    expect(panel).to_contain_text("1,048 parameters (with the pasted text's 8 symbols)", timeout=WAIT_MS)
    panel.get_by_role("button", name="Start", exact=True).click()
    expect(panel).to_contain_text(f"FINISHED · run {name}", timeout=4 * WAIT_MS)
    expect(panel).to_contain_text("step 200 / 200")
    expect(panel).to_contain_text("the model trains and validates on the whole text: the validation loss measures "
                                  "memorising, not generalising")
    validation = re.search(r"validation loss ([\d.]+)", panel.inner_text())
    assert validation and float(validation.group(1)) < 1.0, panel.inner_text()  # from ln(8) = 2.08: memorised
    # the samples and the probe read the run's own eight characters: the probe is the text's own first window
    samples = panel.get_by_label("Samples (newest first)")
    expect(samples).to_have_value(re.compile(r"^--- step 200 ---\n"), timeout=WAIT_MS)
    assert set(samples.input_value().split("---\n", 1)[1].split("\n\n---")[0]) <= set(HELLO)
    panel.get_by_label("head", exact=True).fill("1")
    panel.get_by_label("head", exact=True).press("Tab")
    probe = plot_titled(panel, "Probe attention at step 200 · layer 0")  # the title wraps before "head"
    expect(probe).to_contain_text("head 1", timeout=WAIT_MS)
    expect(probe).to_contain_text("hello␣wohello␣wo")  # both axes: "hello wo", the text's own first window
    screenshot(page, "train-toy-lab", publish=False)

    # the finished run's curve, named with the notebook's recipe
    panel.get_by_text("Compare this run's curve with earlier runs").click()
    expect(plot_titled(panel, "Loss against steps")).to_contain_text(
        f"{name} (this run, finished) ·adamw, lr 0.001 (constant), batch 4", timeout=WAIT_MS)

    sample = open_tab(page, "Sample")  # the page's finished run is already picked there
    expect(sample.get_by_role("combobox", name="Checkpoint")).to_have_value(name, timeout=WAIT_MS)
    expect(sample).to_contain_text(f"{name} · 1,048 parameters", timeout=WAIT_MS)
    expect(sample).to_contain_text("notebook 004's attention-only model (2 heads")
    # the offered "ROMEO:\n" has no character of "hello world": the box offers the notebook's own "w"
    prompt = sample.get_by_label("Prompt", exact=True)
    expect(prompt).to_have_value("w", timeout=WAIT_MS)
    tokens = sample.get_by_label("max new tokens", exact=True)
    tokens.fill("40")
    tokens.press("Tab")
    sample.get_by_role("button", name="Generate", exact=True).click()
    expect(sample).to_contain_text(re.compile(r"\b40 characters in"), timeout=2 * WAIT_MS)
    expect(sample).to_contain_text("No KV cache: notebook 004's model re-reads its last 8 characters at every step")
    text = sample.get_by_label("Text", exact=True).input_value()
    assert text.startswith("w") and len(text) == 41 and set(text) <= set(HELLO), text
    # a tapped character shows what it attended to: at most the notebook's 8 before it
    sample.locator(".sample-coloured [data-position='20']").click()
    expect(sample).to_contain_text("the model saw the last 8 characters", timeout=WAIT_MS)
    screenshot(page, "sample-toy-lab", publish=False)
    expect_no_error(page)
