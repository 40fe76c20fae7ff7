"""Heads forming in the Train tab, and where a learner tripped (issue 52), in Chromium.

One offline app serves every test (so the Hub's `gpt2` cannot load). The Train tab: every head's scores as lines over
the snapshots while a run trains and once it has stopped, the probe heatmap's mask grey and its 1-back stripe marked,
and a snapshot typed in the slider's box (Enter) redrawing the chart. The Attention tab: the "Under it" line holding
still at a heatmap's foot, and a checkpoint that fails to load leaving the name of the charts on screen. The Sample
tab: a sample without spaces wrapping inside its box. On a phone, the forming chart fits the screen.
"""

from __future__ import annotations

import re

import pytest
from browser_support import (
    DESKTOP,
    ERROR_TOAST,
    PHONE,
    WAIT_MS,
    expect_errors,
    expect_no_error,
    open_page,
    open_tab,
    plot_titled,
    screenshot,
)
from playwright.sync_api import Locator, Page, expect

from playground.lens.walkthrough import STEP_LABELS, STEP_TITLES
from playground.ui import attention_tab

pytestmark = pytest.mark.browser

# a small GPT of 2 layers of 2 heads whose snapshots come every 25 steps (the tiny preset's probe interval; at most
# 5,000 steps keeps it so, MAX_PROBE_SNAPSHOTS); no time budget, stopped by the test
SMALL_RUN = [("layers_num", 2), ("embedding_dim", 16), ("heads_num", 2), ("context_size", 16), ("batch size", 8),
             ("steps", 5000), ("time budget (s; 0: none)", 0), ("learning rate", 0.01)]
HEADS = ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]
FORMING = "Heads forming"
PROBE = "Probe attention at step"


@pytest.fixture(scope="module")
def learner(browser, offline_server) -> Page:
    yield from open_page(browser, offline_server, DESKTOP)


def forming_lines(plot: Locator) -> dict[str, list[float]]:
    """The top panel's lines as Plotly drew them: head name -> the steps of its points."""
    return plot.evaluate("""el => Object.fromEntries(el.data
        .filter(t => (t.yaxis || 'y') === 'y' && t.mode !== 'markers').map(t => [t.name, Array.from(t.x)]))""")


def probe_title(panel: Locator) -> str:
    return plot_titled(panel, PROBE).evaluate("el => el.layout.title.text.replace(/<br>/g, ' ')")


@pytest.fixture(scope="module")
def stopped_run(learner) -> Locator:
    """A small run followed while it trains (the forming lines grow with the Timer's polls), then stopped."""
    panel = open_tab(learner, "Train")
    for label, value in SMALL_RUN:
        panel.get_by_label(label, exact=True).fill(str(value))
    panel.get_by_role("button", name="Start", exact=True).click()
    expect(panel).to_contain_text(re.compile(r"RUNNING · run "), timeout=WAIT_MS)
    forming = plot_titled(panel, FORMING)
    expect(forming).to_be_visible(timeout=WAIT_MS)
    # while it trains: every head's line, growing snapshot by snapshot (0, 25, 50, ...)
    learner.wait_for_function("""el => el.data.some(t => t.name === 'L1 H1' && t.x.length >= 3)""",
                              arg=forming.element_handle(), timeout=4 * WAIT_MS)
    lines = forming_lines(forming)
    assert list(lines) == HEADS and lines["L0 H0"][:3] == [0, 25, 50], lines
    panel.get_by_role("button", name="Stop", exact=True).click()
    expect(panel).to_contain_text(re.compile(r"(STOPPED|FINISHED) · run "), timeout=2 * WAIT_MS)
    return panel


def test_heads_forming_lines_while_a_run_trains_and_once_it_stopped(learner, stopped_run):
    panel = stopped_run
    forming = plot_titled(panel, FORMING)
    expect(forming).to_be_visible(timeout=WAIT_MS)
    drawn = forming.evaluate("""el => ({
        panels: el.layout.annotations.map(a => a.text),
        steps: el.layout.meta.forming.steps,
        threshold: (el.layout.shapes || []).filter(s => s.y0 === 0.3 && s.y1 === 0.3).length,
        legend: !!el.querySelector('.legend')})""")
    for name in ("previous character (1 back)", "same character (an earlier copy)", "first position",
                 "induction (a repeated random string)"):
        assert name in drawn["panels"], drawn["panels"]
    assert drawn["steps"][:3] == [0, 25, 50] and drawn["threshold"] == 1 and drawn["legend"]
    # the probe heatmap: the causal mask's cells grey (a second trace, not white "value 0"), a dashed line under
    # the 1-back stripe (y = x + 2: never through the diagonal), the masked corner saying which is which
    probe = plot_titled(panel, PROBE)
    marks = probe.evaluate("""el => ({traces: el.data.length, grey: el.data[1] && el.data[1].colorscale[0][1],
        line: (el.layout.shapes || []).map(s => s.y0 - s.x0),
        note: el.layout.annotations.map(a => a.text).join(' ')})""")
    assert marks["traces"] == 2 and marks["grey"] == "#c7ccd4" and marks["line"] == [2], marks
    assert "1-back stripe" in marks["note"]
    screenshot(learner, "train-forming", publish=False)
    expect_no_error(learner)


def test_a_snapshot_typed_in_the_sliders_box_redraws_the_chart(learner, stopped_run):
    """Enter in the snapshot box moved the slider but not the chart (layer and head did update it)."""
    panel = stopped_run
    expect(plot_titled(panel, PROBE)).to_be_visible(timeout=WAIT_MS)
    box = panel.get_by_role("spinbutton", name=re.compile("^number input for snapshot"))
    box.fill("1")
    box.press("Enter")
    expect(plot_titled(panel, "Probe attention at step 25 ")).to_be_visible(timeout=WAIT_MS)
    # the forming lines mark the snapshot the heatmap shows
    learner.wait_for_function("el => (el.layout.shapes || []).some(s => s.x0 === 25 && s.line.width === 6)",
                              arg=plot_titled(panel, FORMING).element_handle(), timeout=WAIT_MS)
    box.fill("2")
    box.press("Enter")
    expect(plot_titled(panel, "Probe attention at step 50 ")).to_be_visible(timeout=WAIT_MS)
    assert "step 50" in probe_title(panel)
    expect_no_error(learner)


def test_the_forming_chart_fits_a_phone(browser, offline_server, stopped_run):
    pages = open_page(browser, offline_server, PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
    phone = next(pages)
    panel = open_tab(phone, "Train")
    forming = plot_titled(panel, FORMING)
    expect(forming).to_be_visible(timeout=WAIT_MS)
    width = phone.evaluate("() => document.documentElement.clientWidth")
    box = forming.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, (box, width)
    assert forming_lines(forming).keys() == set(HEADS)
    screenshot(phone, "train-forming-phone", publish=False)
    expect_no_error(phone)
    pages.close()


# ------------------------------------------------------------------------------------------------ Attention

PLACE = """async ([plot, stage, gap]) => {
    // the heatmap's foot ``gap`` px under the heading (placed again until it sits there: the heading sticks, and so
    // moves, once the page scrolls)
    const frame = () => new Promise(done => requestAnimationFrame(done));
    for (let tries = 0; tries < 8; tries++) {
        const off = plot.getBoundingClientRect().bottom - stage.getBoundingClientRect().bottom - gap;
        if (Math.abs(off) < 2) break;
        window.scrollBy(0, off);
        await frame(); await frame();
    }
}"""
# the "Under it" line's changes and the page's scroll positions over 30 frames, once a wheel's scroll has settled
WATCH = """async stage => {
    const frame = () => new Promise(done => requestAnimationFrame(done));
    for (let settled = 0, last = -1, frames = 0; settled < 3 && frames < 20; frames++) {
        await frame();
        settled = Math.round(window.scrollY) === last ? settled + 1 : 0;
        last = Math.round(window.scrollY);
    }
    let toggles = 0;
    const observer = new MutationObserver(records => { toggles += records.length; });
    observer.observe(stage, {attributes: true, attributeFilter: ['data-under']});
    const scrolled = new Set();
    for (let count = 0; count < 30; count++) { await frame(); scrolled.add(Math.round(window.scrollY)); }
    observer.disconnect();
    return {toggles, scrolled: scrolled.size, under: stage.dataset.under || ''};
}"""


def wheel_past_the_foot(page: Page, plot: Locator, stage: Locator) -> list[dict]:
    """A wheel's scroll, 8 px a turn, from the heatmap's foot 100 px under the heading to 28 px under it (a person's
    scroll: Chromium anchors the page's scroll position to what is on screen, which a programmed scroll did not show);
    what the line and the page did after each turn."""
    page.evaluate(f"args => ({PLACE})(args)", [plot.element_handle(), stage.element_handle(), 100])
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, 500)
    seen = []
    for _ in range(9):
        page.mouse.wheel(0, 8)
        seen.append(page.evaluate(f"stage => ({WATCH})(stage)", stage.element_handle()))
    return seen


def test_the_under_it_line_holds_still_at_a_heatmaps_foot_and_export_can_be_clicked(learner):
    """At step 6, scrolled so the heatmap's last row sat under the pinned heading, the "Under it" line was added and
    removed about ten times a second, the page jumping 27 px, and "Export this step" could not be clicked."""
    panel = open_tab(learner, "Attention")
    expect(panel.get_by_role("heading", level=3)).to_have_text(STEP_TITLES[0], timeout=WAIT_MS)
    panel.get_by_role("radio", name=STEP_LABELS[5], exact=True).check()
    expect(panel.get_by_role("heading", level=3)).to_have_text(STEP_TITLES[5], timeout=WAIT_MS)
    weights = plot_titled(panel, "attention weights")
    expect(weights).to_be_visible(timeout=WAIT_MS)
    stage = learner.locator(f"#{attention_tab.STAGE_ELEM_ID}")
    seen = wheel_past_the_foot(learner, weights, stage)
    assert seen[0]["under"].startswith("attention weights"), seen
    # at most one change a turn (the line set, or gone once the chart's foot is too near to read), the page still
    assert all(turn["toggles"] <= 1 and turn["scrolled"] == 1 for turn in seen), seen
    panel.get_by_role("button", name="Export this step (CSV + .npy)").click(timeout=WAIT_MS)
    expect(panel.get_by_role("row", name=re.compile("^step6_attention_weights.csv"))).to_be_visible(timeout=WAIT_MS)
    learner.evaluate("window.scrollTo(0, 0)")
    panel.get_by_role("radio", name=STEP_LABELS[0], exact=True).check()
    expect(panel.get_by_role("heading", level=3)).to_have_text(STEP_TITLES[0], timeout=WAIT_MS)
    expect_no_error(learner)


def test_a_checkpoint_that_fails_to_load_leaves_the_name_of_the_charts_on_screen(learner):
    """`gpt2` offline: the box kept "gpt2" above the old model's charts, and the toast named the server's folder."""
    panel = open_tab(learner, "Attention")
    field = panel.get_by_label("Checkpoint", exact=True)
    expect(field).to_have_value("shakespeare-char", timeout=WAIT_MS)
    heading = panel.get_by_role("heading", level=3)
    expect(heading).to_have_text(STEP_TITLES[0], timeout=WAIT_MS)
    expect_errors(learner, "gpt2")
    field.click()
    field.fill("gpt2")
    field.press("Enter")
    toast = learner.locator(ERROR_TOAST).filter(has_text="gpt2")
    expect(toast).to_be_visible(timeout=WAIT_MS)
    text = toast.inner_text()
    assert "Traceback" not in text and not re.search(r"(^|[\s'(])/[A-Za-z]", text), text  # no server path
    expect(field).to_have_value("shakespeare-char", timeout=WAIT_MS)  # the charts' model, named again
    expect(heading).to_have_text(STEP_TITLES[0], timeout=WAIT_MS)
    expect(plot_titled(panel, "X")).to_be_visible(timeout=WAIT_MS)
    for close in learner.locator('[data-testid="toast-close"]').all():  # the next test starts without the toast
        close.click()
    expect(learner.locator(ERROR_TOAST)).to_have_count(0, timeout=WAIT_MS)


# ------------------------------------------------------------------------------------------------ Sample

def test_a_sample_without_spaces_wraps_inside_its_box(learner):
    """"hello worlrlrl..." ran 1,918 px wide in a 1,192 px box with no scrollbar."""
    panel = open_tab(learner, "Sample")
    panel.get_by_label("max new tokens", exact=True).fill("20")
    panel.get_by_role("button", name="Generate", exact=True).click()
    coloured = panel.locator(".sample-coloured")
    expect(coloured.locator("[data-position]").first).to_be_visible(timeout=4 * WAIT_MS)
    expect(panel).to_contain_text("characters/s", timeout=4 * WAIT_MS)
    # the learner's sample: 400 characters without a space, as the page's own spans (the one generated, copied)
    sizes = coloured.evaluate("""el => {
        const span = el.querySelector('[data-position]');
        const copies = Array.from({length: 400}, (_, i) => {
            const copy = span.cloneNode(); copy.textContent = 'rl'[i % 2]; return copy.outerHTML; });
        el.innerHTML = copies.join('');
        const box = el.parentElement.getBoundingClientRect();
        return {scroll: el.scrollWidth, width: el.clientWidth, right: el.getBoundingClientRect().right,
                box: box.right, lines: Math.round(el.getBoundingClientRect().height /
                                                  parseFloat(getComputedStyle(el).lineHeight))};
    }""")
    assert sizes["scroll"] <= sizes["width"] + 1 and sizes["right"] <= sizes["box"] + 1, sizes
    assert sizes["lines"] >= 2, sizes  # wrapped onto lines of its own width
    expect_no_error(learner)
