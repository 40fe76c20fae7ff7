"""The Attention tab in Chromium, as a learner uses it: every control, on a desktop and on a phone.

It renders on arrival and on every edit (no button needed); each source, layer and head; every what-if switch
and the temperature; the query box (a position past the end comes back clamped); Previous, Next and the step
picker; Export, with the downloaded CSV read back; and a refusal that leaves the figures as they were.
Figures are read from the page's own Plotly objects (their title, colour scale, frame and hover text).
"""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from browser_support import (
    DESKTOP,
    ERROR_BADGE,
    ERROR_TOAST,
    WAIT_MS,
    answers,
    cut_labels,
    expect_errors,
    expect_no_error,
    open_tab,
    overlapping,
    plot_titled,
    screenshot,
    swipe,
    tap_the_margin,
    x_labels,
)
from playwright.sync_api import Locator, Page, expect
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from test_browser_phone import covered_labels

from playground.checkpoints import store as checkpoints
from playground.lens import head_scores
from playground.lens.walkthrough import STEP_LABELS, STEP_TITLES, journey_preset, lessons
from playground.ui import attention_tab, attention_views, chart_deck
from playground.ui.plots import TOUCH_COLUMN_PX, _display_label

pytestmark = pytest.mark.browser

PLOTS = [["X"], ["Q", "K", "V"], ["raw scores"], ["scaled scores"], ["masked scores"],
         ["attention weights · row sums"], ["output"]]  # the titles of each step's matrix plots
ATTENTION_STAGES = list(zip(STEP_TITLES, PLOTS))
DEFAULT_TOKENS = len("To be, or not to be: that is the question.")  # the text box's default: 42 tokens
WARNING_TOAST = ".toast-body.warning"


# ------------------------------------------------------------------------------------------------ helpers

def figure(plot: Locator) -> dict:
    """What Plotly drew: the title, each trace's colour range and hover text, the frames (shapes), the x ticks."""
    expect(plot).to_be_visible(timeout=WAIT_MS)
    return plot.evaluate("""el => ({
        title: el.layout.title.text,
        traces: el._fullData.map(t => ({zmin: t.zmin, zmax: t.zmax, customdata: t.customdata})),
        shapes: (el.layout.shapes || []).map(s => ({y0: s.y0, y1: s.y1})),
        ticks: el._fullLayout.xaxis.ticktext,
    })""")


def title(plot: Locator) -> str:
    """A plot's title as one line (Plotly draws each wrapped line as its own text, with nothing between)."""
    return figure(plot)["title"].replace("<br>", " ")


def plots_in(panel: Locator) -> Locator:
    return panel.locator(".js-plotly-plot:visible")


def heading(panel: Locator) -> Locator:
    return panel.get_by_role("heading", level=3)


def shown_error_badges(page: Page) -> list[str]:
    """The "Error" badges a person can see: Gradio keeps a hidden-progress event's badge at opacity 0."""
    return page.evaluate("""sel => [...document.querySelectorAll(sel)]
        .filter(e => e.offsetParent && getComputedStyle(e.closest('[data-testid=status-tracker]')).opacity !== '0')
        .map(e => e.innerText)""", ERROR_BADGE)


def squeezed_switch_labels(panel: Locator) -> list[str]:
    """Checkbox labels that wrap or spill out of their box (cut_labels misses a label squeezed to a sliver)."""
    return panel.evaluate("""root => [...root.querySelectorAll('label.checkbox-container .label-text')]
        .filter(span => span.offsetParent)
        .filter(span => span.getClientRects().length > 1
                || span.getBoundingClientRect().right > span.closest('label').getBoundingClientRect().right + 1)
        .map(span => span.innerText)""")


def clipped_titles(panel: Locator) -> list[str]:
    """Plot titles wider than their plot."""
    return panel.evaluate("""root => [...root.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent)
        .filter(p => { const t = p.querySelector('.gtitle'); if (!t) return false;
                       const box = t.getBoundingClientRect(), plot = p.getBoundingClientRect();
                       return box.left < plot.left - 1 || box.right > plot.right + 1; })
        .map(p => p.querySelector('.gtitle').textContent)""")


def arrive(page: Page) -> Locator:
    """Open the tab and wait for the view the page rendered on its own (no button pressed)."""
    panel = open_tab(page, "Attention")
    expect(heading(panel)).to_have_text(STEP_TITLES[0], timeout=WAIT_MS)
    expect(plot_titled(panel, "X")).to_be_visible(timeout=WAIT_MS)
    return panel


def pick_step(panel: Locator, number: int) -> None:
    panel.get_by_role("radio", name=STEP_LABELS[number - 1], exact=True).check()
    expect(heading(panel)).to_have_text(STEP_TITLES[number - 1], timeout=WAIT_MS)


def set_number(panel: Locator, label: str, value) -> None:
    box = panel.get_by_label(label, exact=True)
    box.fill(str(value))
    box.press("Enter")


# ------------------------------------------------------------------------------------------------ desktop

def test_attention_renders_on_arrival_and_steps_through_every_stage(page):
    panel = arrive(page)
    expect(panel).not_to_contain_text("nats")  # no softmax note before softmax has been met
    for number, (title, plots) in enumerate(ATTENTION_STAGES):
        if number:
            panel.get_by_role("button", name="Next ▶").click()
        expect(heading(panel)).to_have_text(title, timeout=WAIT_MS)
        for plot in plots:
            expect(plot_titled(panel, plot)).to_be_visible(timeout=WAIT_MS)
        # the query's row beside its best keys at step 2, its score bars from step 3, its softmax bars from step 6
        bars = (number >= 1) + (number >= 5)
        expect(plots_in(panel).filter(has=page.locator(".gtitle"))).to_have_count(len(plots) + bars)
        expect(panel.get_by_role("radio", name=STEP_LABELS[number], exact=True)).to_be_checked()
    expect(panel).to_contain_text("Mask (on now).")
    expect(panel).not_to_contain_text("Mask before vs after")  # that note is step 5's
    panel.get_by_role("button", name="◀ Previous").click()
    expect(heading(panel)).to_have_text(STEP_TITLES[5], timeout=WAIT_MS)
    expect(panel).to_contain_text("nats")

    weights = figure(plot_titled(panel, "attention weights"))
    values, grey = weights["traces"]
    assert (values["zmin"], values["zmax"]) == (0, 1)
    assert values["customdata"][0][1].endswith(lessons.MASKED_WEIGHT_HOVER)  # row 0 cannot see token 1
    assert weights["shapes"] == [{"y0": DEFAULT_TOKENS - 1.5, "y1": DEFAULT_TOKENS - 0.5}]  # the last query
    assert len(weights["ticks"]) == DEFAULT_TOKENS  # every token named on the token axis
    expect_no_error(page)
    assert cut_labels(page) == [] and squeezed_switch_labels(panel) == [] and clipped_titles(panel) == []
    screenshot(page, "attention")  # the softmax weights, masked: the README's picture

    pick_step(panel, 2)
    for name in "QKV":
        ticks = figure(plot_titled(panel, name))["ticks"]
        step = int(ticks[1][1:])  # d0..d47 labelled every k-th (hover names each): no smear
        assert 1 < step and ticks == [f"d{i}" for i in range(0, 48, step)] and len(ticks) <= 10
    # Plotly's toolbar, shown while the pointer is on a chart, lay over the first line of each two-line title
    for size in ({"width": 1280, "height": 800}, DESKTOP):
        page.set_viewport_size(size)
        for name in "QKV":
            plot = plot_titled(panel, f"{name}:")
            plot.hover()
            expect(plot.locator(".modebar")).to_have_css("opacity", "1")  # shown (it fades in)
            assert covered_labels(page) == [], size
    pick_step(panel, 5)
    expect(panel).to_contain_text("Mask before vs after scaling")
    expect(panel).not_to_contain_text("nats")
    panel.get_by_role("button", name="Show", exact=True).click()  # still works, and changes nothing
    expect(heading(panel)).to_have_text(STEP_TITLES[4], timeout=WAIT_MS)
    expect_no_error(page)


def test_the_query_bars_label_every_token_that_fits_and_the_ones_that_matter(page):
    """Issue 31: the query's bar charts labelled every other token ("the cat sat on" read "t e c t s t o")."""
    panel = arrive(page)
    pick_step(panel, 6)
    default = [{" ": "␣"}.get(c, c) for c in "To be, or not to be: that is the question."]
    for name in ("Scores into softmax of query", "Softmax weights of query"):
        drawn = x_labels(plot_titled(panel, name))
        assert [label["text"] for label in drawn] == default and overlapping(drawn) == []
    panel.get_by_role("radio", name="random weights", exact=True).check()  # weights spread along the row
    text = panel.get_by_label("Text (not used by the presets)")
    text.fill("the cat sat on the mat; " * 5)  # 120 tokens: not every label fits
    expect(panel).to_contain_text("random head (seed 0): 120 tokens", timeout=WAIT_MS)
    bars = plot_titled(panel, "Softmax weights of query 119")
    drawn = x_labels(bars)
    assert 10 < len(drawn) < 120 and overlapping(drawn) == []
    shown = bars.evaluate("""el => ({ticks: el._fullLayout.xaxis.tickvals, weights: el.data[0].y,
                                     hover: el.data[0].customdata.length})""")
    # the largest weights keep their labels, then the query where it keeps clear of them
    spacing, kept = shown["ticks"][1] - shown["ticks"][0], []
    for top in [*sorted(range(120), key=lambda i: -(shown["weights"][i] or 0))[:3], 119]:
        if all(abs(top - other) >= spacing for other in kept):
            assert top in shown["ticks"], (top, shown["ticks"])
            kept.append(top)
    assert len(kept) > 1
    assert shown["hover"] == 120  # the hover names every bar
    expect_no_error(page)


def test_attention_every_switch_redraws_now_beside_the_default(page):
    panel = arrive(page)
    text = panel.get_by_label("Text (not used by the presets)")
    text.fill("hello world")
    expect(panel).to_contain_text("T = 11 tokens", timeout=WAIT_MS)  # an edit renders without a click
    pick_step(panel, 6)
    expect(plots_in(panel)).to_have_count(3)  # one heatmap + the query's two bars: all switches at default

    panel.get_by_label("causal mask", exact=True).uncheck()
    expect(panel).to_contain_text("Mask (off now).", timeout=WAIT_MS)
    now, default = figure(plot_titled(panel, "now")), figure(plot_titled(panel, "default"))
    assert "no mask" in now["title"] and "masked" in default["title"].replace("<br>", " ")
    for drawn in (now, default):  # one colour scale: on and off can be compared cell by cell
        assert (drawn["traces"][0]["zmin"], drawn["traces"][0]["zmax"]) == (0, 1)
    assert len(now["traces"]) == 1 and len(default["traces"]) == 2  # only the default has masked (grey) cells
    expect(panel).to_contain_text("Now vs default.")
    screenshot(page, "attention-mask-off", publish=False)
    panel.get_by_label("causal mask", exact=True).check()
    expect(panel).to_contain_text("Mask (on now).", timeout=WAIT_MS)
    expect(plot_titled(panel, "default")).to_have_count(0)

    pick_step(panel, 4)
    panel.get_by_label("scale by 1/√d_k", exact=True).uncheck()
    expect(panel).to_contain_text("Scaling off.", timeout=WAIT_MS)
    now, default = figure(plot_titled(panel, "now")), figure(plot_titled(panel, "default"))
    assert "unscaled" in now["title"]
    assert (now["traces"][0]["zmin"], now["traces"][0]["zmax"]) == (default["traces"][0]["zmin"],
                                                                     default["traces"][0]["zmax"])
    panel.get_by_label("scale by 1/√d_k", exact=True).check()
    expect(panel).to_contain_text("Scaling on.", timeout=WAIT_MS)

    pick_step(panel, 5)
    panel.get_by_label("mask before scaling", exact=True).check()
    expect(plot_titled(panel, "now")).to_be_visible(timeout=WAIT_MS)
    assert "mask before scaling" in title(plot_titled(panel, "now"))
    expect(panel).to_contain_text("largest difference in the weights = 0")
    panel.get_by_label("mask before scaling", exact=True).uncheck()
    expect(plot_titled(panel, "now")).to_have_count(0, timeout=WAIT_MS)

    set_number(panel, "number input for temperature on the scores", 2)
    expect(plot_titled(panel, "now")).to_be_visible(timeout=WAIT_MS)
    assert "τ 2" in title(plot_titled(panel, "now"))
    assert cut_labels(page) == []
    expect_no_error(page)


def test_attention_every_source_layer_head_and_the_query_box(page):
    panel = arrive(page)
    set_number(panel, "layer", 1)
    set_number(panel, "head", 2)
    expect(panel).to_contain_text("layer 1, head 2 of the model", timeout=WAIT_MS)

    query = panel.get_by_label("query position (-1 = the last token)")
    query.fill("500")
    expect(query).to_have_value(str(DEFAULT_TOKENS - 1), timeout=WAIT_MS)  # clamped, and the box says so
    toasts = page.locator(WARNING_TOAST)
    expect(toasts).to_contain_text("Query position 500 is past the end", timeout=WAIT_MS)
    expect(toasts).to_have_count(1)  # said once
    query.fill("3")
    expect(panel).to_contain_text("Query 3", timeout=WAIT_MS)
    assert figure(plot_titled(panel, "X"))["shapes"] == [{"y0": 2.5, "y1": 3.5}]  # its row is framed

    panel.get_by_role("radio", name="random weights", exact=True).check()
    set_number(panel, "embedding_dim", 24)
    set_number(panel, "head_size", 6)
    set_number(panel, "seed", 3)
    expect(panel).to_contain_text("a random head (seed 3): 42 tokens, C 24, d_k 6", timeout=WAIT_MS)

    panel.get_by_role("radio", name="textbook preset", exact=True).check()
    expect(panel).to_contain_text("seed 123", timeout=WAIT_MS)
    expect(query).to_have_value("3")
    for choice, description in (("journey_v2", "seed 789"), ("lab", "seed 1337"), ("journey", "seed 123")):
        preset = panel.get_by_label("preset", exact=True)
        preset.click()
        page.get_by_role("option", name=re.compile(f"^{choice}:")).click()
        expect(panel).to_contain_text(description, timeout=WAIT_MS)
    expect(panel).to_contain_text("T = 6 tokens")

    panel.get_by_role("radio", name="trained checkpoint", exact=True).check()
    expect(panel).to_contain_text("layer 1, head 2 of the model", timeout=WAIT_MS)
    expect_no_error(page)


def test_the_ranked_head_table_opens_the_strongest_head(page):
    """Score every head of the shipped model; its strongest (a previous-character head) opens on a click."""
    top = head_scores.score_heads(checkpoints.load_checkpoint("shakespeare-char").model)[0]  # what the core ranks first
    assert top.pattern == "previous token" and top.score > 10 * top.chance
    panel = arrive(page)
    panel.get_by_text("Heads that do something recognisable").click()
    panel.get_by_role("button", name="Score every head of this checkpoint").click()
    expect(panel).to_contain_text(re.compile(rf"Strongest: layer {top.layer} head {top.head}, previous token, "
                                             rf"{top.score:.2f} against {top.chance:.2f}"), timeout=WAIT_MS)
    table = panel.get_by_label("ranked heads")
    strongest = table.get_by_role("row").filter(has_text="previous token").first  # ranked first
    expect(strongest).to_contain_text(f"{top.score:.3f}", timeout=WAIT_MS)
    strongest.get_by_role("gridcell").nth(2).click()
    expect(panel.get_by_label("head", exact=True)).to_have_value(str(top.head), timeout=WAIT_MS)
    expect(panel).to_contain_text(f"layer {top.layer}, head {top.head} of the model", timeout=WAIT_MS)
    expect(heading(panel)).to_be_in_viewport(timeout=WAIT_MS)  # the page goes back up to the head it opened
    expect(heading(panel)).to_contain_text(STEP_TITLES[5], timeout=WAIT_MS)  # at its pattern, not at step 1's X
    # its pattern itself from its top, not only the heading, which stays at the top of a wide screen wherever the
    # page is (and which a scroll to it there took for in view already)
    pattern = plot_titled(panel, "attention weights").element_handle()
    page.wait_for_function("el => { const top = el.getBoundingClientRect().top; return top >= 0 && "
                           "top < window.innerHeight / 2; }", arg=pattern, timeout=WAIT_MS)
    expect_no_error(page)


def test_attention_export_downloads_the_numbers_shown(page):
    panel = arrive(page)
    panel.get_by_role("radio", name="textbook preset", exact=True).check()
    expect(panel).to_contain_text("seed 123", timeout=WAIT_MS)
    pick_step(panel, 6)
    shown = figure(plot_titled(panel, "attention weights"))["traces"][0]["customdata"]
    panel.get_by_role("button", name="Export this step (CSV + .npy)").click()
    link = panel.get_by_role("row", name=re.compile("^step6_attention_weights.csv")).get_by_role("link")
    expect(link).to_be_visible(timeout=WAIT_MS)
    # the link's own click, dispatched: a pointer's click waits for the link to hold still under it, and on a busy
    # machine the page was still moving it (charts drawn above it) when the wait ran out
    with page.expect_download() as download:
        link.dispatch_event("click")
    rows = list(csv.reader(io.StringIO(open(download.value.path(), encoding="utf-8").read())))
    trace = journey_preset().trace()
    labels = [f"{i}:{token}" for i, token in enumerate(trace.tokens)]  # positions keep repeated tokens apart
    assert rows[0] == ["", *labels] and [row[0] for row in rows[1:]] == labels
    for i, row in enumerate(rows[1:]):
        for j, value in enumerate(row[1:]):
            assert float(value) == pytest.approx(trace.weights[i, j].item(), abs=1e-7)
            if not trace.masked[i, j]:  # the hover text shows the same number, to 6 digits
                assert shown[i][j].endswith(f"value {float(value):.6g}")
    expect(panel.get_by_role("row", name=re.compile("^step6_attention_weights.npy"))).to_be_visible()
    pick_step(panel, 7)  # the files were step 6's: they leave with it
    expect(panel.get_by_role("row", name=re.compile("^step6_attention_weights"))).to_have_count(0, timeout=WAIT_MS)
    expect_no_error(page)


# records each value the page's chart_deck.WAITING_ATTR takes from now on in window.waitsSeen
WAITS_SEEN_JS = f"""() => {{ window.waitsSeen = []; const root = document.documentElement;
    new MutationObserver(() => window.waitsSeen.push(root.getAttribute('{chart_deck.WAITING_ATTR}')))
        .observe(root, {{attributes: true, attributeFilter: ['{chart_deck.WAITING_ATTR}']}}); }}"""


def test_attention_a_refusal_leaves_the_view_as_it_was(page, server):
    panel = arrive(page)
    before = figure(plot_titled(panel, "X"))["title"]
    expect_errors(page, "out of range")
    page.evaluate(WAITS_SEEN_JS)
    set_number(panel, "layer", 99)
    toast = page.locator(ERROR_TOAST)
    expect(toast).to_be_visible(timeout=WAIT_MS)
    expect(toast).to_contain_text("Layer 99 is out of range: this model has 4 layers (0-3)")
    expect(toast).not_to_contain_text("Traceback")
    expect(toast).to_have_css("opacity", "1")  # faded in, so the screenshot shows it
    assert shown_error_badges(page) == []  # no red "Error" on the old figures
    assert figure(plot_titled(panel, "X"))["title"] == before and heading(panel).inner_text() == STEP_TITLES[0]
    # and, once refused, does not wait for a view that will not come (the change had marked it waiting)
    page.wait_for_function(f"() => !document.documentElement.hasAttribute('{chart_deck.WAITING_ATTR}')",
                           timeout=WAIT_MS)
    seen = page.evaluate("() => window.waitsSeen")
    assert attention_tab.DECK in seen and seen[-1] is None, seen
    screenshot(page, "attention-error", publish=False)

    # a decimal in a whole-number box is refused by name, not rounded (1.5 used to show layer 2 without a word)
    expect_errors(page, "must be a whole number")
    set_number(panel, "layer", 1.5)
    expect(page.locator(ERROR_TOAST).filter(has_text="Layer must be a whole number, got 1.5").first).to_be_visible(
        timeout=WAIT_MS)
    assert figure(plot_titled(panel, "X"))["title"] == before

    set_number(panel, "layer", 1)
    expect(panel).to_contain_text("layer 1, head 0 of the model", timeout=WAIT_MS)
    expect(plot_titled(panel, "X")).to_be_visible()
    expect(page.locator(ERROR_BADGE)).to_have_count(0)
    assert answers(server.url)


SPARE_HELD = """step => { const deck = window.chartDeck && window.chartDeck.decks.attention;
    const spares = deck && deck.spares && deck.spares[deck.key];
    return !!spares && Object.values(spares).some(spare => spare.views[step]); }"""
FULL_DECK = f"() => Object.keys(window.chartDeck.decks.attention.views).length === {len(STEP_TITLES)}"


def test_a_what_if_switch_is_drawn_in_the_page_before_the_server_answers(page):
    """The page holds the step on screen one switch away (spare decks): with every request to the server held back,
    a click on the causal mask still draws the comparison; the server's answer, let through, keeps it."""
    panel = arrive(page)
    pick_step(panel, 6)
    page.wait_for_function(SPARE_HELD, arg=STEP_TITLES[5], timeout=WAIT_MS)
    held = []
    page.route("**/queue/join**", lambda route: held.append(route))
    panel.get_by_label("causal mask", exact=True).uncheck()
    expect(plot_titled(panel, "now")).to_be_visible(timeout=WAIT_MS)
    expect(panel).to_contain_text("Mask (off now).")
    assert "no mask" in title(plot_titled(panel, "now")) and held  # drawn while the server's request waits
    drawn = title(plot_titled(panel, "now"))
    for route in held:
        route.continue_()
    page.unroute("**/queue/join**")
    page.wait_for_function(FULL_DECK, timeout=WAIT_MS)  # the server's answers, every step, under the spare's key
    assert title(plot_titled(panel, "now")) == drawn
    pick_step(panel, 5)  # the other steps came from the server, for the mask now off
    expect(panel).to_contain_text("Mask (off now).")
    # and back: the deck left behind is the spare of the one drawn, so turning the switch back is drawn at once
    pick_step(panel, 6)
    page.wait_for_function(SPARE_HELD, arg=STEP_TITLES[5], timeout=WAIT_MS)
    held.clear()
    page.route("**/queue/join**", lambda route: held.append(route))
    panel.get_by_label("causal mask", exact=True).check()
    expect(plot_titled(panel, "now")).to_have_count(0, timeout=WAIT_MS)
    expect(panel).to_contain_text("Mask (on now).")
    for route in held:
        route.continue_()
    page.unroute("**/queue/join**")
    page.wait_for_function(FULL_DECK, timeout=WAIT_MS)
    expect_no_error(page)


POSITIONS_HELD = """step => { const deck = window.chartDeck && window.chartDeck.decks.attention;
    return !!deck && !!window.attentionPositions
        && window.attentionPositions.held.some(sent => sent.step === step && sent.known.has(deck.key)); }"""
DRAWN_IS_THE_SERVERS = """([step, slot]) => { const deck = window.chartDeck.decks.attention;
    const host = document.querySelector(`#attention-chart-${slot} .js-plotly-plot`);
    return JSON.stringify(host.data.map(trace => trace.y)) ===
        JSON.stringify(deck.views[step].figures[slot].data.map(trace => trace.y)); }"""


DRAWN_HEATMAP_IS_THE_SERVERS = """([step, slot]) => { const deck = window.chartDeck.decks.attention;
    const host = document.querySelector(`#attention-chart-${slot} .js-plotly-plot`);
    const sent = deck.views[step].figures[slot], drawn = host._fullData[0];
    const shown = figure => [figure.layout.title.text, figure.layout.yaxis.ticktext];
    return JSON.stringify([...shown(host), drawn.zmin, drawn.zmax])
        === JSON.stringify([...shown(sent), sent.data[0].zmin, sent.data[0].zmax]); }"""


def test_a_new_query_position_is_drawn_in_the_page_before_the_server_answers(page):
    """The page holds the step on screen at every query position of the text: with every request to the server held
    back, a new position is drawn (the frame moved, its bars, its sentence); the server's answer, let through, brings
    the other steps at that position and draws nothing again. A position past the end is still the server's."""
    panel = arrive(page)
    pick_step(panel, 6)
    page.wait_for_function(POSITIONS_HELD, arg=STEP_TITLES[5], timeout=WAIT_MS)
    held = []
    page.route("**/queue/join**", lambda route: held.append(route))
    set_number(panel, "query position (-1 = the last token)", 5)
    expect(plot_titled(panel, "Softmax weights of query 5 (,)")).to_be_visible(timeout=WAIT_MS)
    expect(plot_titled(panel, "Scores into softmax of query 5 (,)")).to_be_visible()
    expect(panel).to_contain_text("Query 5 ,: its output is the weighted sum")
    assert figure(plot_titled(panel, "attention weights"))["shapes"] == [{"y0": 4.5, "y1": 5.5}]
    assert held  # drawn while the server's requests (for the other steps) wait
    for route in held:
        route.continue_()
    page.unroute("**/queue/join**")
    page.wait_for_function(FULL_DECK, timeout=WAIT_MS)  # the server's answers, every step, for query 5
    for slot in (3, 4):  # the bars drawn in the page are the server's, number for number
        assert page.evaluate(DRAWN_IS_THE_SERVERS, [STEP_TITLES[5], slot])
    pick_step(panel, 5)
    expect(plot_titled(panel, "Scores into softmax of query 5 (,)")).to_be_visible(timeout=WAIT_MS)
    # and at step 5, once its positions are held, the last token again (-1)
    page.wait_for_function(POSITIONS_HELD, arg=STEP_TITLES[4], timeout=WAIT_MS)
    set_number(panel, "query position (-1 = the last token)", -1)
    expect(plot_titled(panel, f"Scores into softmax of query {DEFAULT_TOKENS - 1} (.)")).to_be_visible(
        timeout=WAIT_MS)
    assert figure(plot_titled(panel, "masked scores"))["shapes"] == [{"y0": DEFAULT_TOKENS - 1.5,
                                                                       "y1": DEFAULT_TOKENS - 0.5}]
    # step 2 too (a stranger waited 5.7 s there): the q beside its best keys is drawn for the new position, the query
    # framed on Q and its best keys framed on K and V, before the server answers, and it is the server's picture
    pick_step(panel, 2)
    page.wait_for_function(POSITIONS_HELD, arg=STEP_TITLES[1], timeout=WAIT_MS)
    held = []
    page.route("**/queue/join**", lambda route: held.append(route))
    set_number(panel, "query position (-1 = the last token)", 12)
    beside = plot_titled(panel, "The keys query 12 (t) matches best")
    expect(beside).to_be_visible(timeout=WAIT_MS)
    labels = beside.evaluate("el => el.layout.yaxis.ticktext")
    best = [int(re.match(r"k of (\d+) ", label).group(1)) for label in labels[1:]]
    assert labels[0] == "q of 12 (t)" and len(best) == 3 and all(key <= 12 for key in best)  # keys it may see
    assert figure(plot_titled(panel, "Q:"))["shapes"] == [{"y0": 11.5, "y1": 12.5}]
    for name in ("K:", "V:"):
        assert figure(plot_titled(panel, name))["shapes"] == [{"y0": key - 0.5, "y1": key + 0.5} for key in best]
    assert held
    for route in held:
        route.continue_()
    page.unroute("**/queue/join**")
    page.wait_for_function(FULL_DECK, timeout=WAIT_MS)
    assert page.evaluate(DRAWN_HEATMAP_IS_THE_SERVERS, [STEP_TITLES[1], 3])
    screenshot(page, "attention-qkv", publish=False)
    expect_no_error(page)


# wraps the chart deck's draw: window.firstAnswers gets the query position each first answer names (its settings)
RECORD_FIRST_ANSWERS = """() => { window.firstAnswers = []; const deck = window.chartDeck, draw = deck.drawEvent;
    deck.drawEvent = (options, raw, ...rest) => {
        const made = options.settings && raw ? JSON.parse(raw).settings : null;
        if (made) window.firstAnswers.push(made[made.length - 1]);
        return draw(options, raw, ...rest); }; }"""


def test_an_answer_made_for_the_query_boxs_old_value_does_not_write_it_back(page):
    """A head changed, and while its answer (made for the box's -1) is on the way the query box gets 30: the
    answer for 30 is drawn, and the late one for -1 leaves the box at 30 and the view at query 30. When the answer
    wrote the box itself, the Why tab's "Step through this head" (which writes the tab's head, then its query) ended
    at the last token with -1 in the box under load."""
    panel = arrive(page)
    page.wait_for_function(f"() => !document.documentElement.hasAttribute('{chart_deck.WAITING_ATTR}')",
                           timeout=WAIT_MS)
    page.evaluate(RECORD_FIRST_ANSWERS)
    names = page.evaluate("() => window.gradio_config.dependencies.map(d => d.api_name)")
    inputs_changed = names.index("attention_update_inputs")
    held = []

    def hold_the_heads_answer(route):
        if not held and (json.loads(route.request.post_data or "{}")).get("fn_index") == inputs_changed:
            held.append(route)
        else:
            route.continue_()

    page.route("**/queue/join**", hold_the_heads_answer)
    set_number(panel, "head", 1)
    page.wait_for_function(f"() => document.documentElement.hasAttribute('{chart_deck.WAITING_ATTR}')",
                           timeout=WAIT_MS)
    set_number(panel, "query position (-1 = the last token)", 30)
    expect(panel).to_contain_text("layer 0, head 1 of the model", timeout=WAIT_MS)
    expect(panel).to_contain_text("Query 30", timeout=WAIT_MS)
    assert len(held) == 1
    held[0].continue_()
    page.unroute("**/queue/join**")
    page.wait_for_function("() => window.firstAnswers.includes(-1)", timeout=WAIT_MS)  # the late one came back
    page.evaluate("() => new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(resolve)))")
    expect(panel.get_by_label("query position (-1 = the last token)", exact=True)).to_have_value("30")
    expect(panel).to_contain_text("Query 30")
    expect(plot_titled(panel, "X")).to_be_visible()
    assert page.evaluate(f"() => !document.documentElement.hasAttribute('{chart_deck.WAITING_ATTR}')")
    expect_no_error(page)


def row_point(plot: Locator, row: int) -> tuple[float, float]:
    """Where on the screen a heatmap's row ``row`` (of the window drawn) is, a third of the way across its plot."""
    plot.scroll_into_view_if_needed()
    return tuple(plot.evaluate("""(el, row) => { const x = el._fullLayout.xaxis, y = el._fullLayout.yaxis;
        const box = el.querySelector('.main-svg').getBoundingClientRect();
        return [box.left + x._offset + x._length / 3, box.top + y._offset + y.c2p(row)]; }""", row))


def test_a_click_on_a_heatmaps_row_makes_its_token_the_query(page):
    """A learner could choose a query only by typing its position, and counted to 85 by hand: a click on a row of
    any step's heatmap makes that row's token the query, drawn as a typed position is."""
    panel = arrive(page)
    pick_step(panel, 6)
    page.wait_for_function(POSITIONS_HELD, arg=STEP_TITLES[5], timeout=WAIT_MS)
    page.mouse.click(*row_point(plot_titled(panel, "attention weights"), 12))
    expect(panel.get_by_label("query position (-1 = the last token)")).to_have_value("12")
    expect(plot_titled(panel, "Softmax weights of query 12 (t)")).to_be_visible(timeout=WAIT_MS)
    assert figure(plot_titled(panel, "attention weights"))["shapes"] == [{"y0": 11.5, "y1": 12.5}]
    pick_step(panel, 1)  # the inputs' rows are tokens too
    page.mouse.click(*row_point(plot_titled(panel, "X"), 3))
    expect(panel.get_by_label("query position (-1 = the last token)")).to_have_value("3")
    expect(panel).to_contain_text("Query 3 ", timeout=WAIT_MS)
    expect_no_error(page)


def test_show_with_an_emptied_text_says_why_once(page):
    """A stranger emptied the text and pressed Show: a warning (the text's change) and an error (Show) came, for one
    thing. Now the heading says it, in one warning, and no error."""
    panel = arrive(page)
    text = panel.get_by_label("Text (not used by the presets)")
    text.fill("")
    expect(heading(panel)).to_have_text(attention_views.EMPTY_TEXT, timeout=WAIT_MS)
    panel.get_by_role("button", name="Show", exact=True).click()
    text.fill("ab")  # its answer comes after Show's
    expect(panel).to_contain_text("T = 2 tokens", timeout=WAIT_MS)
    expect(page.locator(WARNING_TOAST)).to_have_count(1)
    expect(page.locator(WARNING_TOAST)).to_contain_text(attention_views.EMPTY_TEXT)
    expect_no_error(page)


# ------------------------------------------------------------------------------------------------ phone

LONG_TEXT = "Shall I compare thee to a summer's day? Thou art more lovely and more temperate: Rough"
# the weights heatmap on a phone, as drawn: its width and its slot's, its plot's columns, the key labels shown, where
# its title and colour bar are, the slot's sideways scroll
WIDE_JS = """el => { const slot = el.parentElement, box = slot.getBoundingClientRect(), x = el._fullLayout.xaxis;
    const inside = node => { const r = node.getBoundingClientRect();
                             return r.width > 0 && r.left >= box.left - 1 && r.right <= box.right + 1; };
    return {width: el.clientWidth, room: slot.clientWidth, plot: x._length, tall: el._fullLayout.yaxis._length,
            shown: [...el.querySelectorAll('.xaxislayer-above .xtick text')]
                .filter(t => getComputedStyle(t).display !== 'none').map(t => t.textContent),
            title: el.querySelector('.gtitle').textContent, titleInside: inside(el.querySelector('.gtitle')),
            barInside: inside(el.querySelector('.colorbar')), left: slot.scrollLeft}; }"""


# a wide heatmap's row labels as drawn: how many, how many lie within its slot's first 100 px, where the strip under
# them starts from the slot's left edge, and whether the strip covers every label
PINNED_JS = """(el, pinned) => { const slot = el.parentElement.getBoundingClientRect();
    const labels = [...el.querySelectorAll('.yaxislayer-above .ytick text')].map(t => t.getBoundingClientRect());
    const strip = el.querySelector('.yaxislayer-above rect.' + pinned)?.getBoundingClientRect();
    return {labels: labels.length, strip: strip ? strip.left - slot.left : null,
            inside: labels.filter(r => r.left >= slot.left - 1 && r.right <= slot.left + 100).length,
            under: Boolean(strip) && labels.every(r => r.left >= strip.left - 1 && r.right <= strip.right + 1)}; }"""


def test_on_a_phone_a_long_texts_pattern_scrolls_sideways_with_every_key_named(phone):
    """Trial 11 found an 86-token pattern fitted into 160 px on a phone, each key's column 2 px wide and every sixth
    key named. On a touch screen its columns keep TOUCH_COLUMN_PX: the chart is wider than the screen and a
    sideways swipe scrolls it, its title (saying so) and colour bar over its left edge, beside the row labels; an
    upward swipe still scrolls the page."""
    panel = arrive(phone)
    panel.get_by_label("Text (not used by the presets)").fill(LONG_TEXT)
    expect(panel).to_contain_text(f"T = {len(LONG_TEXT)} tokens", timeout=WAIT_MS)
    pick_step(panel, 6)
    chart = plot_titled(panel, "attention weights")
    expect(chart).to_contain_text(f"swipe sideways: all {len(LONG_TEXT)} keys", timeout=WAIT_MS)
    chart.scroll_into_view_if_needed()
    drawn = chart.evaluate(WIDE_JS)
    assert drawn["width"] > drawn["room"] and drawn["left"] == 0, drawn
    assert drawn["plot"] / len(LONG_TEXT) >= TOUCH_COLUMN_PX - 0.5, drawn
    # and its rows as tall as elsewhere: turned wide from step 1's upright colour bar, a phone drew 42 rows in 63 px
    assert drawn["tall"] / len(LONG_TEXT) >= 12, drawn
    assert drawn["shown"] == [_display_label(c) for c in LONG_TEXT]  # every key named, in order
    assert drawn["titleInside"] and drawn["barInside"], drawn
    box = chart.bounding_box()
    before = phone.evaluate("() => window.scrollY")
    swipe(phone, 300, box["y"] + 400 if box["y"] + 400 < 800 else 500, dx=-200, dy=0)
    phone.wait_for_function("el => el.parentElement.scrollLeft > 100", arg=chart.element_handle(), timeout=WAIT_MS)
    # settled: a tap while the scroll still glides stops it and makes no click
    phone.wait_for_function("""el => new Promise(done => { const at = el.parentElement.scrollLeft;
        setTimeout(() => done(el.parentElement.scrollLeft === at), 200); })""", arg=chart.element_handle(),
                            timeout=WAIT_MS)
    assert abs(phone.evaluate("() => window.scrollY") - before) < 20  # sideways only
    # the row labels stay at the slot's left edge, over a strip of background (swiped to the last keys, a learner
    # could not tell which row was which)
    pinned = chart.evaluate(PINNED_JS, chart_deck.PINNED_CLASS)
    assert pinned["labels"] == len(LONG_TEXT) and pinned["inside"] == pinned["labels"], pinned
    assert abs(pinned["strip"]) <= 1 and pinned["under"], pinned
    # scrolled so, a tap that picks a row picks it, and leaves no value over it (Plotly's own hover, from the
    # browser's made-up mouse events, drew one); a second tap there reads the cell. Clicks on the charts are stopped
    # here: in CI Chromium sent none with a place for a third of these taps, and those picked nothing
    phone.evaluate(NO_TOUCH_CLICKS_JS)
    phone.wait_for_function(POSITIONS_HELD, arg=STEP_TITLES[5], timeout=WAIT_MS)
    row = chart.evaluate("""el => { const y = el._fullLayout.yaxis, slot = el.parentElement.getBoundingClientRect();
        const svg = el.querySelector('.main-svg').getBoundingClientRect();
        return [slot.left + slot.width / 2, svg.top + y._offset + y.c2p(10)]; }""")
    phone.touchscreen.tap(*row)
    expect(panel.get_by_label("query position (-1 = the last token)")).to_have_value("10", timeout=WAIT_MS)
    expect(plot_titled(panel, "Softmax weights of query 10 ")).to_be_visible(timeout=WAIT_MS)
    phone.evaluate("() => new Promise(done => requestAnimationFrame(() => setTimeout(done, 100)))")
    labels = chart.locator(".hoverlayer .hovertext")
    expect(labels).to_have_count(0)
    phone.touchscreen.tap(*row)
    expect(labels).to_contain_text("row 10 ")
    tap_the_margin(phone)
    expect(labels).to_have_count(0)
    swipe(phone, 200, 600)
    phone.wait_for_function(f"() => window.scrollY > {before + 100}", timeout=WAIT_MS)
    expect(labels).to_have_count(0)  # a swipe is not a tap
    # the query's bars name its largest weight on the phone too (the page's CSS thinned the labels by their order,
    # and trial 14's tallest bar had none)
    bars = plot_titled(panel, "Softmax weights of query")
    bars.scroll_into_view_if_needed()
    named = bars.evaluate("""el => { const weights = el.data[0].y, top = weights.indexOf(Math.max(...weights));
        const shown = [...el.querySelectorAll('.xaxislayer-above .xtick')]
            .filter(tick => getComputedStyle(tick.querySelector('text')).display !== 'none')
            .map(tick => tick.querySelector('text').textContent);
        return {top: el.data[0].customdata[top], ticks: el._fullLayout.xaxis.tickvals, at: top, shown}; }""")
    assert named["at"] in named["ticks"] and named["top"] in named["shown"], named
    assert overlapping(x_labels(bars)) == []
    expect_no_error(phone)
    screenshot(phone, "attention-phone-long-text", publish=False)


# counts the clicks the browser sends for a finger's taps (Plotly sends clicks of its own, with no pointer type)
NO_TOUCH_CLICKS_JS = """() => window.addEventListener('click', event => {
    if (event.target.closest && event.target.closest('.js-plotly-plot')) event.stopImmediatePropagation(); }, true)"""
TOUCH_CLICKS_JS = """() => { window.touchClicks = 0; document.addEventListener('click', event => {
    if (event.pointerType === 'touch') window.touchClicks += 1; }, true); }"""


def test_attention_on_a_phone(phone):
    panel = arrive(phone)
    previous, following = (panel.get_by_role("button", name=name) for name in ("◀ Previous", "Next ▶"))
    # the buttons side by side once the page has laid the view out (a full run measured 580 px while it still was)
    near = """() => { const shown = [...document.querySelectorAll('[role="tabpanel"] button')]
        .filter(b => b.offsetParent);
        const [p, n] = ['◀ Previous', 'Next ▶'].map(name => shown.find(b => b.innerText.trim() === name));
        return Boolean(p && n) && Math.abs(p.getBoundingClientRect().top - n.getBoundingClientRect().top) <= 400; }"""
    try:
        phone.wait_for_function(near, timeout=WAIT_MS)
    except PlaywrightTimeout:
        gap = abs(previous.bounding_box()["y"] - following.bounding_box()["y"])
        raise AssertionError(f"Previous and Next are {gap:.0f} px apart") from None
    following.click()
    expect(heading(panel)).to_have_text(STEP_TITLES[1], timeout=WAIT_MS)
    expect(plot_titled(panel, "V")).to_be_visible(timeout=WAIT_MS)
    pick_step(panel, 6)
    # a tap on a row makes its token the query, as a click does
    phone.wait_for_function(POSITIONS_HELD, arg=STEP_TITLES[5], timeout=WAIT_MS)
    phone.evaluate(TOUCH_CLICKS_JS)
    phone.touchscreen.tap(*row_point(plot_titled(panel, "attention weights"), 5))
    expect(plot_titled(panel, "Softmax weights of query 5 (,)")).to_be_visible(timeout=WAIT_MS)
    # the tap that picked the row shows no value over the frame it moved, even after the browser's own click for the
    # touch (a stranger's label of the tapped cell stayed over the new frame)
    phone.wait_for_function("() => window.touchClicks >= 1", timeout=WAIT_MS)
    phone.evaluate("() => new Promise(done => requestAnimationFrame(() => setTimeout(done, 100)))")
    labels = plot_titled(panel, "attention weights").locator(".hoverlayer .hovertext")
    expect(labels).to_have_count(0)
    # a tap on the row already chosen reads its cell, and that value goes at a tap on the page's margin
    phone.touchscreen.tap(*row_point(plot_titled(panel, "attention weights"), 5))
    expect(labels).to_have_count(1)
    tap_the_margin(phone)
    expect(labels).to_have_count(0)
    panel.get_by_label("causal mask", exact=True).uncheck()
    expect(plot_titled(panel, "default")).to_be_visible(timeout=WAIT_MS)
    assert cut_labels(phone) == []
    assert squeezed_switch_labels(panel) == []
    assert clipped_titles(panel) == []
    for label in ("scale by 1/√d_k", "causal mask", "mask before scaling"):  # a full-width row each
        assert panel.get_by_label(label, exact=True).locator("xpath=ancestor::label").bounding_box()["width"] > 250
    expect_no_error(phone)
    screenshot(phone, "attention-phone", publish=False)
