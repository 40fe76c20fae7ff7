"""The Compare tab in Chromium: every control (each field, the GPT-2 preset, dtype, qkv bias, seed, device, the
timing sweep and the source viewer), the equivalence table, the per-head maps, and a refusal that says what to
lower."""

from __future__ import annotations

import re

import pytest
from browser_support import (
    ERROR_TOAST,
    WAIT_MS,
    expect_errors,
    expect_no_error,
    open_tab,
    plot_titled,
    reload,
    screenshot,
)
from playwright.sync_api import expect

pytestmark = pytest.mark.browser
GPT2_INPUT = "input 1 × 64 × 768, 12 heads of width 64"


def _equivalence(page, panel):
    return panel.get_by_role("grid").filter(has=page.get_by_role("columnheader", name="agrees"))


def test_the_first_views_wait_for_their_tab_and_compare_agrees_and_draws_head_maps(page):
    """Every page load made the Compare tab's comparison (in the long lane), the Model tab's levels and the Attention
    tab's seven stages, opened or not. Now they are asked for once the visitor opens the tab (events.once_shown): by
    the time the Why tab's first view (still asked for at load) is asked for, none of them was; opening each tab asks
    for its own."""
    import json

    asked = []

    def record(route) -> None:
        asked.append(json.loads(route.request.post_data or "{}").get("fn_index"))
        route.continue_()
    page.route("**/queue/join*", record)
    reload(page)  # the load itself recorded (what the reload cuts off of the first load is forgiven)
    ids = {dependency.get("api_name"): dependency["id"]
           for dependency in page.evaluate("() => window.gradio_config.dependencies")}
    for _ in range(WAIT_MS // 100):  # the page's load events sent: the Why tab's arrival among them
        if ids["why_load"] in asked:
            break
        page.wait_for_timeout(100)
    assert ids["why_load"] in asked, "the Why tab's first view was never asked for"
    page.wait_for_timeout(500)  # an arrival sent beside it would be recorded by now
    held = [name for name in ("attention_load", "compare_load", "model_load_page") if ids[name] in asked]
    assert held == [], f"asked for on page load, before their tab was opened: {held}"
    open_tab(page, "Attention")
    page.wait_for_function("() => Boolean(window.chartDeck?.decks?.attention?.drawn)", timeout=WAIT_MS)
    assert ids["attention_load"] in asked
    assert ids["compare_load"] not in asked and ids["model_load_page"] not in asked
    panel = open_tab(page, "Compare")
    expect(panel).to_contain_text("6 of 6 compared implementations agree", timeout=WAIT_MS)
    assert ids["compare_load"] in asked
    open_tab(page, "Model")
    page.wait_for_function("() => Boolean(window.chartDeck?.decks?.model?.key)", timeout=WAIT_MS)
    assert ids["model_load_page"] in asked
    page.unroute("**/queue/join*")
    compare_agrees_and_draws_head_maps(page)  # on this page: its Compare tab's first view is the one to read


def compare_agrees_and_draws_head_maps(page):
    panel = open_tab(page, "Compare")
    # on arrival, without a click: the defaults' comparison (the tables were blank until Compare was pressed)
    expect(panel).to_contain_text("6 of 6 compared implementations agree", timeout=WAIT_MS)
    expect(panel).to_contain_text("input 2 × 16 × 64, 4 heads of width 16, seed 0")
    expect(plot_titled(panel, "Per-head attention maps")).to_be_visible(timeout=WAIT_MS)
    panel.get_by_role("button", name="Compare", exact=True).click()
    expect(panel).to_contain_text("6 of 6 compared implementations agree", timeout=WAIT_MS)
    equivalence = _equivalence(page, panel)
    expect(equivalence.get_by_role("gridcell", name="yes", exact=True)).to_have_count(6)
    expect(equivalence.get_by_role("gridcell", name="NO", exact=True)).to_have_count(0)
    expect(plot_titled(panel, "Per-head attention maps")).to_be_visible(timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "compare")


def test_every_field_the_preset_and_dtype_change_what_is_compared(page):
    panel = open_tab(page, "Compare")
    for label, value in [("embedding_dim", 48), ("heads_num", 3), ("T", 12), ("batch", 1), ("seed", 7)]:
        panel.get_by_label(label, exact=True).fill(str(value))
    panel.get_by_label("qkv bias", exact=True).check()
    panel.get_by_role("radio", name="bf16", exact=True).check()
    panel.get_by_label("device", exact=True).click()
    page.get_by_role("option", name="cpu", exact=True).click()
    panel.get_by_role("button", name="Compare", exact=True).click()
    expect(panel).to_contain_text("within the bf16 tolerance on CPU", timeout=WAIT_MS)
    expect(panel).to_contain_text("input 1 × 12 × 48, 3 heads of width 16, seed 7")
    expect(plot_titled(panel, "Per-head attention maps").locator(".annotation-text",
                                                                  has_text="head 2").first).to_be_visible(
        timeout=WAIT_MS)

    panel.get_by_role("button", name="GPT-2 small preset").click()
    expect(panel.get_by_label("embedding_dim", exact=True)).to_have_value("768", timeout=WAIT_MS)
    expect(panel.get_by_label("heads_num", exact=True)).to_have_value("12")
    expect(panel.get_by_label("T", exact=True)).to_have_value("64")
    # the preset compares too (its tables once kept the last comparison until Compare was pressed)
    expect(panel).to_contain_text(re.compile(rf"within the bf16 tolerance on CPU[^(]*\({GPT2_INPUT}"), timeout=WAIT_MS)
    panel.get_by_role("radio", name="fp32", exact=True).check()
    panel.get_by_role("button", name="Compare", exact=True).click()
    expect(panel).to_contain_text(re.compile(rf"within the fp32 tolerance on CPU[^(]*\({GPT2_INPUT}"), timeout=WAIT_MS)
    parameters = panel.get_by_role("grid").filter(has=page.get_by_role("columnheader", name="formula"))
    expect(parameters.get_by_role("gridcell", name="2,362,368").first).to_be_visible()
    expect(panel).to_contain_text("Per-head maps are drawn for T ≤ 48")
    expect_no_error(page)
    screenshot(page, "compare-gpt2", publish=False)


def test_the_timing_sweep_and_the_source_viewer(page):
    panel = open_tab(page, "Compare")
    panel.get_by_text("Cost curves").click()
    panel.get_by_label("largest T", exact=True).fill("32")
    panel.get_by_role("button", name="Time them").click()
    expect(plot_titled(panel, "Median time vs T")).to_be_visible(timeout=2 * WAIT_MS)
    expect(plot_titled(panel, "Attention-matrix memory vs T")).to_be_visible()
    expect(panel).to_contain_text("Medians after warm-up, batch 2, embedding 64, 4 heads, fp32")

    panel.get_by_text("Source code (the module that ran)").click()
    panel.get_by_label("implementation", exact=True).click()
    page.get_by_role("option", name="fused_qkv", exact=True).click()
    expect(panel.locator(".cm-content")).to_contain_text("class FusedQKVAttention", timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "compare-timing", publish=False)


def test_a_sweep_too_long_for_the_server_is_refused_with_what_to_lower(page):
    panel = open_tab(page, "Compare")
    for label, value in [("embedding_dim", 1024), ("heads_num", 64), ("batch", 8)]:
        panel.get_by_label(label, exact=True).fill(str(value))
    expect_errors(page, "PLAYGROUND_MAX_REQUEST_SECONDS")
    panel.get_by_text("Cost curves").click()
    panel.get_by_role("button", name="Time them").click()
    toast = page.locator(ERROR_TOAST)
    expect(toast).to_contain_text("over its limit of 60 s a request", timeout=WAIT_MS)
    expect(toast).to_contain_text("lower")
    screenshot(page, "compare-refused", publish=False)


def test_the_gpt2_preset_fills_a_largest_t_that_fits_and_a_refusal_stays_beside_the_button(page):
    """Issue 31: the preset kept "largest T" at 1024, its own sweep was refused at once, and the reason went with
    the toast, leaving two empty plots."""
    panel = open_tab(page, "Compare")
    panel.get_by_text("Cost curves").click()
    largest = panel.get_by_label("largest T", exact=True)
    expect(largest).to_have_value("1024")  # the defaults' sweep fits
    panel.get_by_role("button", name="GPT-2 small preset").click()
    expect(largest).to_have_value("512", timeout=WAIT_MS)  # 1024 would take about 144 s here, over 60
    expect(panel).to_contain_text(GPT2_INPUT, timeout=WAIT_MS)
    expect(panel).to_contain_text("Per-head maps are drawn for T ≤ 48")  # T 1024: no maps, and no empty box
    expect(panel.locator(".js-plotly-plot").filter(has_text="Per-head")).to_have_count(0)
    expect(panel.get_by_text("Per-head attention maps", exact=True)).to_be_hidden()  # the box's own label
    largest.fill("1024")
    expect_errors(page, "PLAYGROUND_MAX_REQUEST_SECONDS")
    button = panel.get_by_role("button", name="Time them")
    button.click()
    toast = page.locator(ERROR_TOAST)
    expect(toast).to_contain_text("over its limit of 60 s a request", timeout=WAIT_MS)
    expect(toast).to_have_count(0, timeout=WAIT_MS)  # the toast fades
    note = panel.get_by_text("Not timed:")
    expect(note).to_be_visible()
    expect(note.locator("..")).to_contain_text("lower the largest T to at most 512")
    note_box, button_box = note.bounding_box(), button.bounding_box()
    assert note_box["y"] < button_box["y"] + button_box["height"] + 60, (note_box, button_box)  # beside it
    screenshot(page, "compare-refusal-stays", publish=False)


def test_a_compare_pressed_while_one_runs_is_not_dropped(page):
    """A button's default trigger mode ("once") ignored a click while the last one ran, so the result shown stopped
    matching the fields; the last click now runs after it (found by a stranger's test in Chromium)."""
    panel = open_tab(page, "Compare")
    expect(panel).to_contain_text("input 2 × 16 × 64", timeout=WAIT_MS)  # the arrival's comparison
    compare = panel.get_by_role("button", name="Compare", exact=True)
    panel.get_by_label("embedding_dim", exact=True).fill("768")
    panel.get_by_label("heads_num", exact=True).fill("12")
    compare.click()  # a slower one, so the next click comes while it runs
    panel.get_by_label("T", exact=True).fill("7")
    compare.click()
    expect(panel).to_contain_text("input 2 × 7 × 768, 12 heads of width 64", timeout=WAIT_MS)
    expect_no_error(page)


def test_a_long_map_title_stays_clear_of_the_heads_names_and_the_charts_label(page):
    """With more heads than the maps draw, the title wraps to three lines; it once ran over "head 0"."""
    panel = open_tab(page, "Compare")
    # the arrival's comparison first: it reads the fields when it starts, and on a busy machine read embedding_dim 7
    # beside the default heads_num 4 (an error toast, run on two workers)
    expect(panel).to_contain_text("input 2 × 16 × 64", timeout=WAIT_MS)
    for label, value in [("embedding_dim", 7), ("heads_num", 7)]:
        panel.get_by_label(label, exact=True).fill(str(value))
    panel.get_by_role("button", name="Compare", exact=True).click()
    expect(panel).to_contain_text("7 heads of width 1", timeout=WAIT_MS)
    grid = plot_titled(panel, "Per-head attention maps")
    title = grid.locator(".gtitle")
    expect(title).to_contain_text("heads 0–5 of 7", timeout=WAIT_MS)
    head_0 = grid.locator(".annotation-text", has_text="head 0").first
    label = panel.locator("label", has_text="Per-head attention maps").first
    title_box, head_box, label_box = title.bounding_box(), head_0.bounding_box(), label.bounding_box()
    assert title_box["y"] + title_box["height"] <= head_box["y"], (title_box, head_box)
    assert label_box["y"] + label_box["height"] <= title_box["y"] + 2, (label_box, title_box)
    expect_no_error(page)
