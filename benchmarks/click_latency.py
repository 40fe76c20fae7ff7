"""How long a learner waits, in Chromium, from a click to the drawn answer: each interaction repeated, median and
90th percentile printed.

Target (issue 29): <= 300 ms median on a quiet 2-core CPU (<= 1 s while a run trains), the first paint <= 3 s.
It starts ``app.py`` on a free port with a private HOME, opens Debian's Chromium through Playwright, and times
inside the page: from the moment before the click until the tab panel's last change, once the expected heading
is on screen and the panel has been still for SETTLE_MS (the settling itself is not counted). A second column,
"chart ms", ends at the last change inside a chart instead (the chart drawn, while Gradio may still be marking the
end of a server answer that follows it, in elements it keeps hidden). A third, "seen ms", ends at the last change
inside a chart on screen: the Model tab draws the levels not shown out of sight while the page is idle (chart_deck's
hosts per view), which "chart ms" counts. Each is printed as its median, then its 90th percentile ("settled" is the
first column, the panel still).

"Why this score" (the Why tab's, on L3 H1, and the Attention tab's, on layer 3) and the Q, K and V what-ifs are timed
from the button's click (the key typed first, untimed) to the picture and its words.

"Why: step through a head" is timed from the click to the Attention tab's heatmap drawn with the Why tab's position
framed (the tab changes on the way), by Playwright from outside the page.

Before the clicks it times each chart tab's first opening (Attention, Model, Why), from the click to its first chart
drawn, once the load's own answers are in.

``--while-training`` starts a training run first (the tiny preset on Tiny Shakespeare, through the Train tab of a
second page, with steps enough to outlast the clicks), waits for its first step, times the clicks, then stops it.

    python benchmarks/click_latency.py [--repeats 7] [--chromium /usr/bin/chromium] [--only Attention]
                                       [--while-training]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, expect, sync_playwright

from playground.lens.anatomy.lessons import LEVEL_LABELS, LEVEL_TITLES
from playground.lens.walkthrough import STEP_LABELS, STEP_TITLES
from playground.ui.attention_tab import DECK as ATTENTION_DECK
from playground.ui.why_reading import ALONE, VERSUS

REPO = Path(__file__).resolve().parents[1]
SETTLE_MS = 400  # the panel unchanged this long: the answer is drawn
SAMPLED = 60  # characters generated for the Inspect clicks
ARM_JS = """() => {
    const panel = document.querySelector('[role="tabpanel"]:not([hidden]):not([style*="display: none"])')
        || document.body;
    window.__last = null;
    window.__chart = null;
    window.__drawn = null;
    window.__observer?.disconnect();
    // a chart drawn out of sight (chart_deck's host for a view not on screen, [data-view], drawn while the page is
    // idle) is a chart change, not one the learner sees
    const away = node => {
        const element = node.nodeType === 1 ? node : node.parentElement;
        const host = element && element.closest('[data-view]');
        return Boolean(host) && host.style.visibility === 'hidden';
    };
    window.__seen = null;
    window.__observer = new MutationObserver(changes => {
        window.__last = performance.now();
        const charts = changes.filter(change => change.target.closest?.('.js-plotly-plot')
                                                || change.target.ownerSVGElement);
        if (charts.length) window.__chart = window.__last;
        if (charts.some(change => !away(change.target))) window.__seen = window.__last;
    });
    window.__observer.observe(panel, {subtree: true, childList: true, attributes: true, characterData: true});
    window.__t0 = performance.now();
}"""
# An answer that is text alone (no chart changes): "drawn" when a heading of the panel first shows ``expected``,
# instead of at the panel's last change (a dropdown's own closing, say)
DRAWN_JS = """expected => {
    const panel = document.querySelector('[role="tabpanel"]:not([hidden]):not([style*="display: none"])')
        || document.body;
    const seen = () => [...panel.querySelectorAll('h3')].some(h => h.innerText.includes(expected));
    window.__drawnObserver?.disconnect();
    window.__drawnObserver = new MutationObserver(() => {
        if (window.__drawn === null && seen()) {
            window.__drawn = performance.now();
            window.__drawnObserver.disconnect();
        }
    });
    window.__drawnObserver.observe(panel, {subtree: true, childList: true, characterData: true});
}"""
WAIT_JS = """([expected, settle, anywhere]) => new Promise((resolve, reject) => {
    const started = performance.now();
    const check = () => {
        // expected: in a heading of the panel, or (anywhere) in any text the panel shows
        const places = anywhere ? [...document.querySelectorAll('[role="tabpanel"]')]
            : [...document.querySelectorAll('[role="tabpanel"] h3')];
        const shown = places.filter(h => h.offsetParent).some(h => h.innerText.includes(expected));
        if (shown && window.__last !== null && performance.now() - window.__last > settle) {
            window.__observer.disconnect();
            resolve([window.__last - window.__t0,
                     (window.__chart ?? window.__drawn ?? window.__last) - window.__t0,
                     (window.__seen ?? window.__drawn ?? window.__last) - window.__t0]);
        } else if (performance.now() - started > 60000) {
            reject(new Error('no heading ' + expected + ' within 60 s'));
        } else {
            setTimeout(check, 10);
        }
    };
    check();
})"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def own_weights(home: Path) -> Path:
    """A weights folder of the benchmark's own, under its temporary HOME, holding the checkpoints the repository
    ships (git's tracked ones): a run started by --while-training is saved there and goes with it, never left in the
    repository's weights/ (it left a my-run-N there at every run)."""
    tracked = subprocess.run(["git", "ls-files", "weights"], cwd=REPO, capture_output=True, text=True).stdout.split()
    shipped = sorted({Path(path).parts[1] for path in tracked if len(Path(path).parts) > 2})
    if not shipped:  # not a git checkout (an unpacked copy): every checkpoint folder there is taken as shipped
        shipped = [path.name for path in (REPO / "weights").iterdir() if path.is_dir()]
    weights = home / "weights"
    weights.mkdir()
    for name in shipped:
        shutil.copytree(REPO / "weights" / name, weights / name)
    return weights


def start_app(home: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYGROUND_", "GRADIO_", "HF_"))}
    env.update(HOME=str(home), GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False",
               HF_HUB_DISABLE_TELEMETRY="1", PLAYGROUND_OFFLINE="1", PLAYGROUND_WEIGHTS_DIR=str(own_weights(home)))
    shared = REPO.parent / "shared" / "data" / "tinyshakespeare.txt"
    if shared.is_file():
        env["PLAYGROUND_TINY_SHAKESPEARE"] = str(shared)
    process = subprocess.Popen([sys.executable, "app.py"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)
            return process
        except OSError:
            time.sleep(0.25)
    process.kill()
    raise SystemExit("app.py did not answer within 120 s")


ANYWHERE = "text:"  # an expected text starting so is looked for in all the panel's text, not in its headings


def timed(page: Page, action, expected: str) -> tuple[float, float, float]:
    """Milliseconds from just before ``action()`` to the panel's last change, to its charts' last change and to the
    last change of a chart on screen, with ``expected`` in a heading (or, prefixed with ANYWHERE, anywhere in the
    panel)."""
    page.evaluate(ARM_JS)
    action()
    anywhere = expected.startswith(ANYWHERE)
    settled, chart, seen = page.evaluate(WAIT_JS, [expected.removeprefix(ANYWHERE), SETTLE_MS, anywhere])
    return float(settled), float(chart), float(seen)


ARRIVED = {  # a tab's first answer is in the page (its arrival is not timed: on a busy server it can take seconds)
    "Attention": f"() => Object.keys(window.chartDeck?.decks?.attention?.views || {{}}).length === {len(STEP_TITLES)}",
}


FIRST_OPENED = {"Attention": "attention", "Model": "model", "Why": "why"}  # a tab, and the deck of its first chart
FIRST_CHART_JS = """deck => [...document.querySelectorAll('#' + deck + '-chart-0 .js-plotly-plot')]
    .some(plot => plot.offsetParent && plot._fullLayout && plot.data && plot.data.length)"""


def first_opens(page: Page) -> None:
    """Milliseconds from a click on each chart tab, opened for the first time, to its first chart drawn: a tab's charts
    stayed blank 1.3-1.5 s while it loaded Plotly itself. A tab's first answer is held until it is shown
    (events.once_shown), so it is in the time; waiting for the Attention tab's answer before its click, as this did,
    waited for ever."""
    for tab, deck in FIRST_OPENED.items():
        started = time.perf_counter()
        page.get_by_role("tab", name=tab, exact=True).click()
        page.wait_for_function(FIRST_CHART_JS, arg=deck, timeout=120_000)
        print(f"{tab} opened, first chart drawn: {(time.perf_counter() - started) * 1000:.0f} ms")


def open_tab(page: Page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()
    if name in ARRIVED:
        page.wait_for_function(ARRIVED[name], timeout=120_000)
    page.wait_for_timeout(SETTLE_MS)  # the tab's own arrival, not timed here


def interactions(page: Page):
    """(name, tab, setup, [(action, expected heading)]) per interaction, cycling so each click changes something;
    ``setup`` (or None) puts the tab where the interaction shows something, untimed."""
    panel = lambda: page.locator('[role="tabpanel"]:visible')  # noqa: E731

    def radio(label):
        return lambda: panel().get_by_role("radio", name=label, exact=True).check()

    def number(label, value):
        def act():
            box = panel().get_by_label(label, exact=True)
            box.fill(str(value))
            box.press("Enter")
        return act

    steps = list(zip(STEP_LABELS, STEP_TITLES))
    yield "Attention: a step", "Attention", None, [(radio(label), heading)
                                                   for label, heading in steps[1:] + steps[:1]]
    def toggle(label):
        return lambda: panel().get_by_label(label, exact=True).click()

    yield "Attention: a what-if switch", "Attention", radio(STEP_LABELS[5]), [(toggle("causal mask"), STEP_TITLES[5])]
    yield "Attention: a new query position", "Attention", radio(STEP_LABELS[5]), [
        (number("query position (-1 = the last token)", q), STEP_TITLES[5]) for q in (5, 12, 30, 3)]
    # step 2 draws a new heatmap per position (the query's q beside the keys it matches best)
    yield "Attention: a new query at step 2", "Attention", radio(STEP_LABELS[1]), [
        (number("query position (-1 = the last token)", q), STEP_TITLES[1]) for q in (5, 12, 30, 3)]
    def generated():  # a finished text of SAMPLED characters to inspect (its last character drawn: it has ended)
        number("max new tokens", SAMPLED)()
        panel().get_by_role("button", name="Generate", exact=True).click()
        panel().locator(f'.sample-coloured [data-position="{SAMPLED - 1}"]').wait_for(timeout=120_000)

    def inspect(position):
        return lambda: panel().locator(f'.sample-coloured [data-position="{position}"]').click()

    yield "Sample: Inspect a character", "Sample", generated, [
        (inspect(p), f"{ANYWHERE}Character #{p} (") for p in (5, 40, 12, 30)]
    levels = list(zip(LEVEL_LABELS, LEVEL_TITLES))
    yield "Model: a level", "Model", None, [(radio(label), heading) for label, heading in levels[1:] + levels[:1]]
    # at the level that opens (one score), which reads the layer, the head and the query position
    yield "Model: a layer", "Model", radio(LEVEL_LABELS[0]), [(number("layer", n), LEVEL_TITLES[0])
                                                              for n in (1, 2, 3, 0)]
    yield "Model: a head", "Model", radio(LEVEL_LABELS[0]), [(number("head", n), LEVEL_TITLES[0]) for n in (1, 2, 3, 0)]
    yield "Model: a query position", "Model", radio(LEVEL_LABELS[0]), [
        (number("query position (-1 = last)", q), LEVEL_TITLES[0]) for q in (5, 12, 30, 3)]
    yield "Why: a new position", "Why", None, [(number("position (-1 = last)", p), "Why ") for p in (10, 40, 70, 20)]

    def choose(label, option, expected=None):
        def act():
            box = panel().get_by_label(label, exact=True)
            box.click()
            choice = page.get_by_role("option", name=option, exact=True)
            choice.wait_for()
            choice.scroll_into_view_if_needed()
            spot = choice.bounding_box()
            x, y = spot["x"] + spot["width"] / 2, spot["y"] + spot["height"] / 2
            page.mouse.move(x, y)
            # the clock starts at the press on the option (as at the click on a bar), not at opening the list, nor
            # before Playwright's checks that the option is still (two frames and a hit test: 140-580 ms on a busy
            # machine, counted as the page's until the option was pressed where it is drawn)
            page.evaluate(ARM_JS)
            if expected:  # a text answer is drawn when its heading shows
                page.evaluate(DRAWN_JS, expected)
            page.mouse.click(x, y)
            page.keyboard.press("Escape")
            box.blur()  # a focused box does not open again on the next click
        return act

    def bar(name):
        def act():  # a person's click where the head's bar is drawn (Plotly's hover names the bar first)
            chart = panel().locator(".js-plotly-plot").filter(
                has=page.locator(".gtitle", has_text="The logit of")).first
            point = chart.locator(".barlayer .point").nth(chart.evaluate("el => el.data[0].customdata").index(name))
            point.scroll_into_view_if_needed()  # the last click took the page down to the head's reading
            box = point.bounding_box()
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.evaluate(ARM_JS)  # the clock starts at the click (as at the click on an option)
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        return act

    heads = ("L0 H1", "L1 H2", "L2 H0", "L3 H3")
    yield "Why: a head (chosen)", "Why", None, [(choose("head", name, f"{name} at position"), f"{name} at position")
                                                for name in heads]
    yield "Why: a head (its bar clicked)", "Why", None, [(bar(name), f"{name} at position") for name in heads]
    # an option already ticked is unticked by choosing it again
    knocks = [("L0 H2", "Knocked out: L0 H2"), ("L2 H1", "Knocked out: L0 H2, L2 H1"), ("L0 H2", "Knocked out: L2 H1"),
              ("L2 H1", "Knock heads out")]
    yield "Why: a knock-out", "Why", None, [(choose("knock out", head, heading), heading) for head, heading in knocks]
    # the split switch (issue 29): the bars of the guess against the runner-up, or of the guess's logit alone; each
    # heading says which ("... and not ..." against the runner-up, "its logit ... is the sum" alone)
    yield "Why: the split switch", "Why", None, [(radio(ALONE), f"{ANYWHERE}its logit "), (radio(VERSUS), " and not ")]

    # why this score (issue 52): the key typed untimed, the clock from the button's click to the picture and its words
    def score(key, button="Why this score"):
        def act():
            panel().get_by_label("key position", exact=True).fill(str(key))
            page.evaluate(ARM_JS)
            panel().get_by_role("button", name=button, exact=True).click()
        return act

    keys = (10, 40, 70, 20)
    yield "Why: why this score", "Why", choose("head", "L3 H1"), [(score(k), f"{ANYWHERE}@{k} from ") for k in keys]
    yield "Attention: why this score", "Attention", number("layer", 3), [(score(k), f"{ANYWHERE}@{k} from ")
                                                                         for k in (5, 20, 30, 12)]

    def what_if(label):
        def act():
            fold = panel().get_by_role("button", name="Run this what-if", exact=True)
            if not fold.is_visible():
                panel().get_by_text("What if Q and K were one matrix, or V were X?").click()
            panel().get_by_role("radio", name=label, exact=True).check()
            page.evaluate(ARM_JS)
            fold.click()
        return act

    yield "Attention: a Q, K, V what-if", "Attention", None, [
        (what_if("tie W_K to W_Q (one matrix for Q and K)"), f"{ANYWHERE}on the token itself"),
        (what_if("V = X (no value matrix)"), f"{ANYWHERE}only what it passes on changed")]


# the Attention tab's framed row is the query the Why tab sent, drawn on a chart on screen
FRAMED_JS = """query => [...document.querySelectorAll("[id^='""" + ATTENTION_DECK + """-chart-'] .js-plotly-plot")]
  .some(plot => {
    if (!plot.offsetParent || !plot._fullLayout || !(plot.layout.shapes || []).length) return false;
    const trace = plot.data.find(t => t.type === 'heatmap' && Array.isArray(t.customdata));
    const shape = plot.layout.shapes[0], row = Math.round((shape.y0 + shape.y1) / 2);
    const cells = trace && trace.customdata[row];
    return Boolean(cells) && String(cells[0]).startsWith('row ' + query + ' ');
})"""
STEP_THROUGH = "Step through this head in the Attention tab"


def step_through(page: Page, repeats: int) -> list[float]:
    """Milliseconds from a click on the Why tab's "Step through this head" to the Attention tab's heatmap drawn with
    the Why tab's position framed, for a new position each time (set on the Why tab, untimed)."""
    times = []
    positions = (70, 30, 50, 10)
    for i in range(repeats + 1):  # the first click warms up, not counted
        open_tab(page, "Why")
        panel = page.locator('[role="tabpanel"]:visible')
        position = positions[i % len(positions)]
        box = panel.get_by_label("position (-1 = last)", exact=True)
        box.fill(str(position))
        box.press("Enter")
        expect(panel.get_by_role("heading", name=re.compile(f" at position {position}$"))).to_be_visible(
            timeout=120_000)
        page.wait_for_timeout(SETTLE_MS)
        button = panel.get_by_role("button", name=STEP_THROUGH, exact=True)
        started = time.perf_counter()
        button.click()
        page.wait_for_function(FRAMED_JS, arg=position, timeout=120_000, polling="raf")
        if i:
            times.append((time.perf_counter() - started) * 1000)
    return times


TRAIN_STEPS = 20_000  # the server's limit (PLAYGROUND_MAX_STEPS), some 13 minutes: more than the clicks take
RUNNING = re.compile(r"RUNNING · run ")  # the Train tab's status while its run goes


def start_training(page: Page) -> None:
    """In ``page`` (a second visitor's): the Train tab's tiny preset on Tiny Shakespeare, with TRAIN_STEPS steps and
    no time budget, started; returns once the status shows it running."""
    page.get_by_role("tab", name="Train", exact=True).click()
    panel = page.locator('[role="tabpanel"]:visible')
    for label, value in (("steps", TRAIN_STEPS), ("time budget (s; 0: none)", 0)):
        box = panel.get_by_label(label, exact=True)
        box.fill(str(value))
        box.press("Enter")
    panel.get_by_role("button", name="Start", exact=True).click()
    expect(panel).to_contain_text(RUNNING, timeout=120_000)


def stop_training(page: Page) -> None:
    panel = page.locator('[role="tabpanel"]:visible')
    panel.get_by_role("button", name="Stop", exact=True).click()
    expect(panel).not_to_contain_text(RUNNING, timeout=120_000)


def percentiles(times: list[float]) -> tuple[float, float]:
    """(median, 90th percentile)."""
    times = sorted(times)
    return statistics.median(times), times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="clicks per interaction")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--only", default="", help="time only the interactions whose name starts with this (several: "
                                                   "separated by |)")
    parser.add_argument("--while-training", action="store_true",
                        help="time the clicks while a training run (the tiny preset) goes")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        process = start_app(Path(home), port)
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                started = time.perf_counter()
                page.goto(f"http://127.0.0.1:{port}/")
                page.get_by_role("tab", name="Tokenize", exact=True).wait_for()
                page.locator(".tok-chips .tok-chip").first.wait_for()
                print(f"first paint with the Tokenize chips: {(time.perf_counter() - started) * 1000:.0f} ms")
                first_opens(page)
                trainer = None
                if args.while_training:
                    trainer = browser.new_context(viewport={"width": 1440, "height": 900}).new_page()
                    trainer.goto(f"http://127.0.0.1:{port}/")
                    start_training(trainer)
                    print(f"while a run trains (the tiny preset, {TRAIN_STEPS:,} steps, stopped after the clicks)")
                print(f"{'interaction':<36}{'settled':>10}{'p90':>9}{'chart ms':>10}{'chart p90':>10}"
                      f"{'seen ms':>9}{'seen p90':>9}{'clicks':>8}")
                try:
                    for name, tab, setup, cycle in interactions(page):
                        if not name.startswith(tuple(args.only.split("|"))):
                            continue
                        open_tab(page, tab)
                        if setup is not None:
                            setup()
                            page.wait_for_timeout(2 * SETTLE_MS)
                        settled, charts, seen = [], [], []
                        try:
                            for i in range(args.repeats + 1):  # the first click of each warms up, not counted
                                action, expected = cycle[i % len(cycle)]
                                ms, chart_ms, seen_ms = timed(page, action, expected)
                                if i:
                                    settled.append(ms)
                                    charts.append(chart_ms)
                                    seen.append(seen_ms)
                        except PlaywrightError as exc:  # one interaction with no answer: said, and the rest timed
                            print(f"{name:<36}no answer: {str(exc).splitlines()[0]}")
                            continue
                        widths = (10, 9, 10, 10, 9, 9)
                        figures = (*percentiles(settled), *percentiles(charts), *percentiles(seen))
                        print(f"{name:<36}" + "".join(f"{value:>{width}.0f}" for width, value in zip(widths, figures))
                              + f"{len(settled):>8}")
                    name = "Why: step through a head"
                    if name.startswith(tuple(args.only.split("|"))):
                        try:
                            print(f"{name:<36}" + "".join(f"{value:>{width}.0f}" for width, value in
                                                          zip((10, 9), percentiles(step_through(page, args.repeats))))
                                  + " (to the framed row, in the Attention tab)")
                        except PlaywrightError as exc:
                            print(f"{name:<36}no answer: {str(exc).splitlines()[0]}")
                finally:
                    if trainer is not None:
                        stop_training(trainer)
                browser.close()
        finally:
            process.terminate()
            process.wait(15)


if __name__ == "__main__":
    main()
