"""What every browser test shares: app.py started as a user starts it, Debian's Chromium, and pages that fail
the test on anything a person would see go wrong.

The server is a copy of the project (app.py, playground/, weights/, assets/) in a temporary folder, started
with ``python app.py`` and the user's defaults: only HOME moves (to a temporary home whose cache already holds
Tiny Shakespeare, as after a first run) and the port is a free one. No PLAYGROUND_* or GRADIO_* setting
reaches it, so cache paths, the weights folder and Gradio's temp space are the ones a user gets.

Every page records console errors, page errors and failed requests (HTTP 4xx/5xx); the test fails at the end
if any were seen, unless the test declared it expected them with ``expect_errors(page, pattern)`` (a
deliberate refusal shows an error toast, and Gradio logs that error in the console too).

The fixtures (browser, server, page, phone) reach every test through conftest.py's ``pytest_plugins``: a module
that imports one defines a second session of it (two Playwrights in one loop fail).
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
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect, sync_playwright

REPO = Path(__file__).resolve().parents[1]
SHARED_CORPUS = Path(os.environ.get("PLAYGROUND_TINY_SHAKESPEARE", REPO.parent / "shared" / "data" /
                                    "tinyshakespeare.txt"))
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
README_SCREENSHOTS = REPO / "assets" / "screenshots"
STARTUP_SECONDS = 90  # CPU seconds of app.py's own to start in (its imports and build_app), where Linux says them
STARTUP_WALL_SECONDS = 900  # and wall seconds in any case: two busy loops beside the shared machine's other work
# (load 10-17) kept app.py from answering within 90 wall seconds in every hostile test (28 errors)
WAIT_MS = 60_000  # for anything the server computes or the page draws; the machine may be busy
# every expect waits as long, not Playwright's 5 s: many checks without a timeout of their own read text drawn with an
# answer just awaited, which a busy machine can draw seconds later. So does every action and page load (open_page):
# with two busy loops beside the suite (load 13-16) a phone's page load and a radio's click each took longer than
# Playwright's own 30 s (test_browser_hub's phone test, two of test_browser_trips' steps). Waits are on the page's
# state, so a passing test waits no longer for it; only a failing one fails later.
expect.set_options(timeout=WAIT_MS)
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
ERROR_TOAST = ".toast-body.error"  # Gradio 6: <div data-testid="toast-body" class="toast-body error">
ERROR_BADGE = '[data-testid="status-tracker"] .error'  # the red "Error" pill on an output whose event failed
PROJECT_PARTS = ("app.py", "playground", "weights", "assets", "requirements.txt")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never a proxy for 127.0.0.1
    try:
        with opener.open(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def user_environment(home: Path, port: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The test runner's environment without any PLAYGROUND_*, GRADIO_* or HF_* setting; HOME moved."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAYGROUND_", "GRADIO_", "HF_"))}
    env.update(HOME=str(home), GRADIO_SERVER_PORT=str(port), PYTHONUNBUFFERED="1", **(extra or {}))
    return env


@dataclass
class AppServer:
    url: str
    project: Path  # the copy app.py runs from: its weights/ is the user's weights folder
    home: Path
    log: Path
    process: subprocess.Popen | None = None

    @property
    def weights(self) -> Path:
        return self.project / "weights"

    def log_tail(self, characters: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-characters:]


def start_app(root: Path, extra_env: dict[str, str] | None = None, preexec_fn=None) -> Iterator[AppServer]:
    """Copy the project into ``root/project``, make a home with Tiny Shakespeare cached, run app.py there.

    ``preexec_fn`` runs in the child before app.py starts (the hostile-visitor tests put it in a memory cgroup).
    """
    project, home = root / "project", root / "home"
    for part in PROJECT_PARTS:
        source = REPO / part
        if source.is_dir():
            shutil.copytree(source, project / part, ignore=shutil.ignore_patterns(".*", "__pycache__"))
        else:
            project.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, project / part)
    cache = home / ".cache" / "attention-playground"
    cache.mkdir(parents=True)
    if SHARED_CORPUS.is_file():
        shutil.copyfile(SHARED_CORPUS, cache / "tinyshakespeare.txt")  # as a first run would have cached it
    port = free_port()
    server = AppServer(f"http://127.0.0.1:{port}/", project, home, root / "app.log")
    with open(server.log, "wb") as log:
        process = subprocess.Popen([sys.executable, "app.py"], cwd=project, stdout=log, stderr=subprocess.STDOUT,
                                   env=user_environment(home, port, extra_env), preexec_fn=preexec_fn)
        server.process = process
        try:
            deadline = time.monotonic() + STARTUP_WALL_SECONDS
            while not answers(server.url):
                if process.poll() is not None or time.monotonic() > deadline \
                        or cpu_seconds(process.pid) > STARTUP_SECONDS:
                    pytest.fail(f"app.py did not answer on {server.url} within {STARTUP_SECONDS} CPU seconds of its "
                                f"own ({cpu_seconds(process.pid):.0f} used) or {STARTUP_WALL_SECONDS} s (exit code "
                                f"{process.poll()}); its log ends:\n{server.log_tail()}")
                time.sleep(0.25)
            yield server
        finally:
            process.terminate()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


@pytest.fixture(scope="session")
def server(tmp_path_factory) -> Iterator[AppServer]:
    """One app.py for the whole browser session, as a user runs it."""
    yield from start_app(tmp_path_factory.mktemp("browser-server"))


def cpu_seconds(pid: int) -> float:
    """The CPU seconds a process has used (user and system, /proc/PID/stat); 0 where Linux does not say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture(scope="session")
def offline_server(tmp_path_factory) -> Iterator[AppServer]:
    """app.py offline, on a home whose cache has no Tiny Shakespeare: the built-in Sonnets stand in for it. One for
    the session, shared by the modules that need it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys.modules[__name__], "SHARED_CORPUS", Path("/nonexistent/tinyshakespeare.txt"))  # none cached
        servers = start_app(tmp_path_factory.mktemp("offline-server"), {"PLAYGROUND_OFFLINE": "1"})
        server = next(servers)
    yield server
    servers.close()


@pytest.fixture(scope="session")
def browser():
    if not CHROMIUM.is_file():
        pytest.fail(f"Debian's Chromium is needed for the browser tests and {CHROMIUM} is missing: "
                    "apt-get install chromium (tests/run.sh does this)")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@dataclass
class Problems:
    """What went wrong in the page: console errors, page errors, failed requests; and what the test expected."""

    seen: list[str] = field(default_factory=list)
    expected: list[re.Pattern] = field(default_factory=list)

    def unexpected(self) -> list[str]:
        return [p for p in self.seen if not any(pattern.search(p) for pattern in self.expected)]


def watch(page: Page) -> Problems:
    problems = Problems()
    page.on("console", lambda m: m.type == "error" and problems.seen.append(f"console error: {m.text[:300]}"))
    # a label that is also a key of Gradio's translations ("status") makes svelte-i18n warn, and shows the key's text
    page.on("console", lambda m: m.type == "warning" and "svelte-i18n" in m.text
            and problems.seen.append(f"console warning: {m.text[:300]}"))
    page.on("pageerror", lambda e: problems.seen.append(f"page error: {str(e)[:300]}"))
    page.on("response", lambda r: r.status >= 400 and problems.seen.append(f"HTTP {r.status}: {r.url}"))
    # a request that failed to complete, except the ones the page cancels itself (Gradio closes its event
    # stream once its events are done: net::ERR_ABORTED)
    page.on("requestfailed", lambda r: "ERR_ABORTED" not in str(r.failure)
            and problems.seen.append(f"request failed: {r.url} ({r.failure})"))
    page.problems = problems
    return problems


def expect_errors(page: Page, pattern: str) -> None:
    """Declare that this test provokes an error whose console line matches ``pattern`` (a refusal, say)."""
    page.problems.expected.append(re.compile(pattern, re.IGNORECASE | re.DOTALL))


RELOAD_ABORTS = re.compile(r"AbortError|Connection errored out", re.IGNORECASE)


def reload(page: Page) -> None:
    """Reload the page, forgiving only what the reload itself cuts off: the old document's requests in flight
    (its event streams and the status timer's calls) end as AbortError or Gradio's "Connection errored out".
    The same lines seen before or after the reload still fail the test."""
    before = len(page.problems.seen)
    page.reload()
    expect(page.get_by_role("heading", name="Attention Playground")).to_be_visible(timeout=WAIT_MS)
    page.wait_for_timeout(300)  # the old document's last console lines land before the new one's first
    cut = page.problems.seen[before:]
    page.problems.seen[before:] = [p for p in cut if not RELOAD_ABORTS.search(p)]


def open_page(browser, server: AppServer, viewport: dict, **context_options) -> Iterator[Page]:
    context = browser.new_context(viewport=viewport, accept_downloads=True, **context_options)
    context.set_default_timeout(WAIT_MS)  # actions and navigations, as the expects above
    page = context.new_page()
    problems = watch(page)
    page.goto(server.url)
    expect(page.get_by_role("heading", name="Attention Playground")).to_be_visible(timeout=WAIT_MS)
    yield page
    page.wait_for_timeout(300)  # let the last responses land
    unexpected = problems.unexpected()  # before closing: closing aborts the page's open event streams
    context.close()
    assert not unexpected, "the browser saw:\n" + "\n".join(unexpected) + f"\nserver log:\n{server.log_tail(1500)}"


@pytest.fixture
def page(browser, server) -> Iterator[Page]:
    """A desktop page (1440 x 900) that fails the test on any console error, page error or failed request."""
    yield from open_page(browser, server, DESKTOP)


@pytest.fixture
def phone(browser, server) -> Iterator[Page]:
    """The same on a phone (390 x 844, touch)."""
    yield from open_page(browser, server, PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)


def open_tab(page: Page, name: str) -> Locator:
    """Click the tab by its name; returns the visible tab panel (the only one rendered and shown)."""
    tab = page.get_by_role("tab", name=name, exact=True)
    tab.click()
    expect(tab).to_have_attribute("aria-selected", "true")
    panel = page.locator('[role="tabpanel"]:visible')
    expect(panel).to_have_count(1)
    return panel


def expect_no_error(page: Page) -> None:
    toasts = page.locator(ERROR_TOAST)
    assert toasts.count() == 0, f"error toasts on the page: {toasts.all_inner_texts()}"
    expect(page.locator(ERROR_BADGE)).to_have_count(0)


def tap_the_margin(page: Page) -> None:
    """A finger's tap on the page's left margin, beside every chart and block, halfway down the screen."""
    margin = page.evaluate("""() => { const y = window.innerHeight / 2, at = document.elementFromPoint(6, y);
        return at && !at.closest('.js-plotly-plot, [role="tabpanel"] .block') ? [6, y] : null; }""")
    assert margin, "no margin beside the charts at the screen's left edge"
    page.touchscreen.tap(*margin)


def hold_events(page: Page, api_names: set[str]):
    """The page's requests to run the events named ``api_names`` held back, unanswered (every other request goes
    through), until the returned function lets them go; it returns how many were held."""
    ids = {dependency["id"] for dependency in page.evaluate("() => window.gradio_config.dependencies")
           if dependency.get("api_name") in api_names}
    assert len(ids) == len(api_names), f"no such events: {api_names}"
    held, released = [], []

    def hold(route) -> None:
        if not released and (route.request.post_data_json or {}).get("fn_index") in ids:
            held.append(route)
        else:
            route.continue_()
    page.route("**/queue/join*", hold)

    def release() -> int:
        released.append(True)
        for route in held:
            route.continue_()
        page.unroute("**/queue/join*")
        return len(held)
    return release


def swipe(page: Page, x: float, y: float, dx: float = 0, dy: float = -250) -> None:
    """A finger's swipe from (x, y) by (dx, dy) px (upwards by default), as a phone's touch events."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Input.dispatchTouchEvent", {"type": "touchStart", "touchPoints": [{"x": x, "y": y}]})
    for step in range(1, 11):
        cdp.send("Input.dispatchTouchEvent", {"type": "touchMove",
                                              "touchPoints": [{"x": x + dx * step / 10, "y": y + dy * step / 10}]})
    cdp.send("Input.dispatchTouchEvent", {"type": "touchEnd", "touchPoints": []})
    cdp.detach()


def screenshot(page: Page, name: str, publish: bool = True) -> Path:
    """A screenshot in test-artifacts/ of the top of the page; of the full page, and copied for the README, when
    PLAYGROUND_UPDATE_SCREENSHOTS=1. A full page makes Chromium lay every chart out again at the page's height:
    1-11 s a shot on a busy 2-core machine against 0.1-0.7 s for the screen, and the browser tests take some 40."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    refresh = os.environ.get("PLAYGROUND_UPDATE_SCREENSHOTS") == "1"
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(path), full_page=refresh)
    if publish and refresh:
        README_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, README_SCREENSHOTS / path.name)
    return path


def plot_titled(panel: Locator, title: str) -> Locator:
    """The Plotly figure whose title starts with ``title``."""
    return panel.locator(".js-plotly-plot").filter(
        has=panel.page.locator(".gtitle", has_text=re.compile("^" + re.escape(title))))


def cut_labels(page: Page) -> list[str]:
    """Labels and buttons on the page whose text is cut off (wider than their box), as 'text' strings."""
    return page.evaluate("""() => {
        const cut = [];
        for (const el of document.querySelectorAll('label span, button, [role=tab], .label-wrap span, th')) {
            const style = getComputedStyle(el);
            if (style.display === 'none' || style.visibility === 'hidden' || !el.offsetParent) continue;
            if (el.scrollWidth > el.clientWidth + 1 && style.overflow !== 'visible') cut.push(el.innerText.trim());
        }
        return cut.filter(t => t.length > 0);
    }""")


def x_labels(plot: Locator) -> list[dict]:
    """The x-axis tick labels Plotly drew (text, left, right in px), left to right: what a person can read."""
    expect(plot).to_be_visible(timeout=WAIT_MS)
    return plot.evaluate("""el => [...el.querySelectorAll('.xtick text')].map(t => {
        const box = t.getBoundingClientRect();
        return {text: t.textContent, left: box.left, right: box.right};
    }).sort((a, b) => a.left - b.left)""")


def overlapping(labels: list[dict]) -> list[str]:
    """Neighbouring labels that run into each other ("a" and "b" as "ab")."""
    return [f"{a['text']}|{b['text']}" for a, b in zip(labels, labels[1:]) if a["right"] > b["left"] + 0.5]
