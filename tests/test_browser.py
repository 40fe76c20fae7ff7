"""End to end in a real browser: `python app.py` in a subprocess, Debian's Chromium driven by Playwright.

Each test opens a fresh page, clicks one tab (tabs render lazily), runs its main action as a person would and
checks what a person sees; then that no error toast is up, and saves a full-page screenshot to
test-artifacts/screenshots/<tab>.png (and to assets/screenshots/ when PLAYGROUND_UPDATE_SCREENSHOTS=1).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import REPO, SHARED_CORPUS
from playwright.sync_api import Locator, Page, expect, sync_playwright

pytestmark = pytest.mark.browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
README_SCREENSHOTS = REPO / "assets" / "screenshots"
STARTUP_SECONDS = 60
WAIT_MS = 30_000  # for anything the server computes; the machine may be busy
ERROR_TOAST = ".toast-body.error"  # Gradio 6: <div data-testid="toast-body" class="toast-body error">
ERROR_BADGE = '[data-testid="status-tracker"] .error'  # the red "Error" pill on an output whose event failed
ATTENTION_STAGES = [  # (heading, titles of the matrix plots) for the seven steps
    ("1. Input X", ["X"]), ("2. Queries, keys and values", ["Q", "K", "V"]), ("3. Raw scores", ["raw scores"]),
    ("4. Scaled scores", ["scaled scores"]), ("5. Causal mask", ["masked scores"]),
    ("6. Attention weights", ["attention weights · row sums"]), ("7. Output", ["output"]),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy for 127.0.0.1
    try:
        with opener.open(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tiny_weights, tmp_path_factory):
    """`python app.py` on a free port, serving a copy of the tiny checkpoint; yields its URL.

    When the screenshots are being updated for the README it serves a copy of the shipped weights instead, so
    the pictures show the trained model (both are named shakespeare-char).
    """
    root = tmp_path_factory.mktemp("browser-server")
    weights = root / "weights"
    source = REPO / "weights" if os.environ.get("PLAYGROUND_UPDATE_SCREENSHOTS") == "1" else tiny_weights
    shutil.copytree(source, weights, ignore=shutil.ignore_patterns(".*"))
    port = _free_port()
    env = {**os.environ, "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
           "PLAYGROUND_WEIGHTS_DIR": str(weights), "PLAYGROUND_OFFLINE": "1",
           "PLAYGROUND_TINY_SHAKESPEARE": str(SHARED_CORPUS), "PLAYGROUND_CACHE_DIR": str(root / "cache"),
           "GRADIO_ANALYTICS_ENABLED": "False", "HF_HUB_DISABLE_TELEMETRY": "1", "PYTHONUNBUFFERED": "1"}
    log_path = root / "app.log"
    url = f"http://127.0.0.1:{port}/"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "app.py"], cwd=REPO, env=env, stdout=log,
                                   stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + STARTUP_SECONDS
            while not _answers(url):
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace")[-3000:]
                    pytest.fail(f"app.py did not answer on {url} within {STARTUP_SECONDS}s "
                                f"(exit code {process.poll()}); its log ends:\n{tail}")
                time.sleep(0.25)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.is_file():
        pytest.fail(f"Debian's Chromium is needed for the browser tests and {CHROMIUM} is missing: "
                    "apt-get install chromium (tests/run.sh does this)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, server):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(server)
    expect(page.get_by_role("heading", name="Attention Playground")).to_be_visible(timeout=WAIT_MS)
    yield page
    context.close()


def open_tab(page: Page, name: str) -> Locator:
    """Click the tab by its name; returns the visible tab panel (the only one rendered and shown)."""
    tab = page.get_by_role("tab", name=name, exact=True)
    tab.click()
    expect(tab).to_have_attribute("aria-selected", "true")
    panel = page.locator('[role="tabpanel"]:visible')
    expect(panel).to_have_count(1)
    return panel


def expect_no_error(page: Page) -> None:
    expect(page.locator(ERROR_TOAST)).to_have_count(0)
    expect(page.locator(ERROR_BADGE)).to_have_count(0)


def screenshot(page: Page, name: str, publish: bool = True) -> Path:
    """A full-page screenshot in test-artifacts/; copied for the README when PLAYGROUND_UPDATE_SCREENSHOTS=1."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path), full_page=True)
    if publish and os.environ.get("PLAYGROUND_UPDATE_SCREENSHOTS") == "1":
        README_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, README_SCREENSHOTS / path.name)
    return path


def plot_titled(panel: Locator, title: str) -> Locator:
    """The Plotly figure whose title starts with ``title``."""
    return panel.locator(".js-plotly-plot").filter(
        has=panel.page.locator(".gtitle", has_text=re.compile("^" + re.escape(title))))


def test_tokenize_shows_ids_and_flags_unknown_characters(page):
    panel = open_tab(page, "Tokenize")
    text = panel.get_by_label("Text", exact=True)
    text.fill("Hello world")
    panel.get_by_role("button", name="Tokenize", exact=True).click()
    chips = panel.locator(".tok-chips")
    expect(chips.locator(".tok-chip")).to_have_count(11, timeout=WAIT_MS)
    expect(chips).to_contain_text("20")
    expect(panel.get_by_label("Token IDs")).to_have_value("[20, 43, 50, 50, 53, 1, 61, 53, 56, 50, 42]")
    expect(panel.get_by_label("Decoded back (round trip)")).to_have_value("Hello world")

    text.fill("Hello ∑ world")
    panel.get_by_role("button", name="Tokenize", exact=True).click()
    unknown = chips.locator(".tok-unknown")
    expect(unknown).to_have_count(1, timeout=WAIT_MS)
    expect(unknown).to_contain_text("∑")
    expect(panel).to_contain_text("not in this vocabulary")
    expect(panel.get_by_label("Token IDs")).to_have_value("[20, 43, 50, 50, 53, 1, 1, 61, 53, 56, 50, 42]")
    expect_no_error(page)
    screenshot(page, "tokenize")


def test_attention_steps_through_every_stage(page):
    panel = open_tab(page, "Attention")
    panel.get_by_role("button", name="Show", exact=True).click()
    heading = panel.get_by_role("heading", level=3)
    for number, (title, plots) in enumerate(ATTENTION_STAGES):
        if number:
            panel.get_by_role("button", name="Next ▶").click()
        expect(heading).to_have_text(title, timeout=WAIT_MS)
        for plot in plots:
            expect(plot_titled(panel, plot)).to_be_visible(timeout=WAIT_MS)
        expect(panel.get_by_role("radio", name=re.compile(rf"^{number + 1}\. "))).to_be_checked()
    expect(panel).to_contain_text("Mask (on now).")
    panel.get_by_role("button", name="◀ Previous").click()
    expect(heading).to_have_text("6. Attention weights", timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "attention")  # the softmax weights, masked: the README's picture

    panel.get_by_label("causal mask", exact=True).uncheck()
    expect(panel).to_contain_text("Mask (off now).", timeout=WAIT_MS)
    expect(heading).to_have_text("6. Attention weights")
    expect_no_error(page)
    screenshot(page, "attention-mask-off", publish=False)


def test_attention_bad_layer_is_a_readable_error_and_the_server_stays_up(page, server):
    panel = open_tab(page, "Attention")
    layer = panel.get_by_label("layer", exact=True)
    layer.fill("99")
    panel.get_by_role("button", name="Show", exact=True).click()
    toast = page.locator(ERROR_TOAST)
    expect(toast).to_be_visible(timeout=WAIT_MS)
    expect(toast).to_contain_text("out of range")
    expect(toast).not_to_contain_text("Traceback")
    expect(toast).to_have_css("opacity", "1")  # faded in, so the screenshot shows it
    screenshot(page, "attention-error", publish=False)

    layer.fill("0")
    panel.get_by_role("button", name="Show", exact=True).click()
    expect(panel.get_by_role("heading", level=3)).to_have_text("1. Input X", timeout=WAIT_MS)
    expect(plot_titled(panel, "X")).to_be_visible()
    assert _answers(server)


def test_compare_agrees_and_draws_head_maps(page):
    panel = open_tab(page, "Compare")
    panel.get_by_role("button", name="Compare", exact=True).click()
    expect(panel).to_contain_text("6 of 6 compared implementations agree", timeout=WAIT_MS)
    equivalence = panel.get_by_role("grid").filter(has=page.get_by_role("columnheader", name="agrees"))
    expect(equivalence.get_by_role("gridcell", name="yes", exact=True)).to_have_count(6)
    expect(equivalence.get_by_role("gridcell", name="NO", exact=True)).to_have_count(0)
    expect(plot_titled(panel, "Per-head attention maps")).to_be_visible(timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "compare")


def test_train_starts_shows_progress_and_stops(page):
    panel = open_tab(page, "Train")
    for label, value in [("layers_num", 1), ("embedding_dim", 16), ("heads_num", 2), ("context_size", 16),
                         ("batch size", 4), ("steps", 2000)]:
        panel.get_by_label(label, exact=True).fill(str(value))
    panel.get_by_label("run name (folder in weights/)").fill("browser-run")
    panel.get_by_role("button", name="Start", exact=True).click()
    expect(panel).to_contain_text("RUNNING · run browser-run", timeout=WAIT_MS)
    expect(panel).to_contain_text(re.compile(r"step [1-9]\d* / 2000"), timeout=WAIT_MS)  # the timer polls
    loss = plot_titled(panel, "Loss")
    expect(loss.locator(".legendtext", has_text="train")).to_be_visible(timeout=WAIT_MS)
    expect(loss.locator(".scatterlayer .trace").first).to_be_attached()

    panel.get_by_role("button", name="Stop", exact=True).click()
    expect(panel).to_contain_text(re.compile(r"(STOPPED|FINISHED) · run browser-run"), timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "train")


def test_sample_generates_text(page):
    panel = open_tab(page, "Sample")
    prompt = panel.get_by_label("Prompt", exact=True).input_value()
    assert prompt
    panel.get_by_role("button", name="Generate", exact=True).click()
    expect(panel).to_contain_text("tokens/s", timeout=WAIT_MS)
    expect(panel.get_by_label("Text", exact=True)).to_have_value(re.compile("^" + re.escape(prompt) + r"[\s\S]+"),
                                                                 timeout=WAIT_MS)
    expect_no_error(page)
    screenshot(page, "sample")
