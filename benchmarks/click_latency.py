"""How long a learner waits, in Chromium, from a click to the drawn answer: each interaction repeated, median and
90th percentile printed.

Target (issue 29): <= 300 ms median on a quiet 2-core CPU (<= 1 s while a run trains), the first paint <= 3 s.
It starts ``app.py`` on a free port with a private HOME, opens Debian's Chromium through Playwright, and times
inside the page: from the moment before the click until the tab panel's last change, once the expected heading
is on screen and the panel has been still for SETTLE_MS (the settling itself is not counted).

    python benchmarks/click_latency.py [--repeats 7] [--chromium /usr/bin/chromium] [--only Attention]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

from playground.anatomy.lessons import LEVEL_LABELS, LEVEL_TITLES
from playground.walkthrough import STEP_LABELS, STEP_TITLES

REPO = Path(__file__).resolve().parents[1]
SETTLE_MS = 400  # the panel unchanged this long: the answer is drawn
ARM_JS = """() => {
    const panel = document.querySelector('[role="tabpanel"]:not([hidden]):not([style*="display: none"])')
        || document.body;
    window.__last = null;
    window.__observer?.disconnect();
    window.__observer = new MutationObserver(() => { window.__last = performance.now(); });
    window.__observer.observe(panel, {subtree: true, childList: true, attributes: true, characterData: true});
    window.__t0 = performance.now();
}"""
WAIT_JS = """([expected, settle]) => new Promise((resolve, reject) => {
    const started = performance.now();
    const check = () => {
        const headings = [...document.querySelectorAll('[role="tabpanel"] h3')].filter(h => h.offsetParent);
        const shown = headings.some(h => h.textContent.includes(expected));
        if (shown && window.__last !== null && performance.now() - window.__last > settle) {
            window.__observer.disconnect();
            resolve(window.__last - window.__t0);
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


def start_app(home: Path, port: int) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYGROUND_", "GRADIO_", "HF_"))}
    env.update(HOME=str(home), GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False",
               HF_HUB_DISABLE_TELEMETRY="1", PLAYGROUND_OFFLINE="1")
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


def timed(page: Page, action, expected: str) -> float:
    """Milliseconds from just before ``action()`` to the panel's last change, with ``expected`` in a heading."""
    page.evaluate(ARM_JS)
    action()
    return float(page.evaluate(WAIT_JS, [expected, SETTLE_MS]))


def open_tab(page: Page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()
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
    levels = list(zip(LEVEL_LABELS, LEVEL_TITLES))
    yield "Model: a level", "Model", None, [(radio(label), heading) for label, heading in levels[1:] + levels[:1]]
    yield "Why: a new position", "Why", None, [(number("position (-1 = last)", p), "Why ") for p in (10, 40, 70, 20)]

    def choose(label, option):
        def act():
            box = panel().get_by_label(label, exact=True)
            box.click()
            page.get_by_role("option", name=option, exact=True).click()
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
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
        return act

    heads = ("L0 H1", "L1 H2", "L2 H0", "L3 H3")
    yield "Why: a head (chosen)", "Why", None, [(choose("head", name), f"{name} at position") for name in heads]
    yield "Why: a head (its bar clicked)", "Why", None, [(bar(name), f"{name} at position") for name in heads]
    # an option already ticked is unticked by choosing it again
    yield "Why: a knock-out", "Why", None, [(choose("knock out", "L0 H2"), "Knocked out: L0 H2"),
                                            (choose("knock out", "L2 H1"), "Knocked out: L0 H2, L2 H1"),
                                            (choose("knock out", "L0 H2"), "Knocked out: L2 H1"),
                                            (choose("knock out", "L2 H1"), "Knock heads out")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="clicks per interaction")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--only", default="", help="time only the interactions whose name starts with this")
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
                print(f"{'interaction':<36}{'median ms':>10}{'p90 ms':>9}{'clicks':>8}")
                for name, tab, setup, cycle in interactions(page):
                    if not name.startswith(args.only):
                        continue
                    open_tab(page, tab)
                    if setup is not None:
                        setup()
                        page.wait_for_timeout(2 * SETTLE_MS)
                    times = []
                    for i in range(args.repeats + 1):  # the first click of each warms up, and is not counted
                        action, expected = cycle[i % len(cycle)]
                        ms = timed(page, action, expected)
                        if i:
                            times.append(ms)
                    times.sort()
                    p90 = times[min(len(times) - 1, int(round(0.9 * (len(times) - 1))))]
                    print(f"{name:<36}{statistics.median(times):>10.0f}{p90:>9.0f}{len(times):>8}")
                browser.close()
        finally:
            process.terminate()
            process.wait(15)


if __name__ == "__main__":
    main()
