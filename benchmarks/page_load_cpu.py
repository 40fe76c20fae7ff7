"""The server's CPU time per page load: app.py started as click_latency.py starts it, the page loaded in Chromium
``--loads`` times, each time until the server has been idle for 2 s; prints the CPU seconds the server spent on each
load (the first views the page asks for on arrival), those the browser spent (Chromium and Playwright's driver: every
process under this one but the server) and the wall time until the server was idle.

    python benchmarks/page_load_cpu.py [--loads 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from click_latency import free_port, start_app  # noqa: E402 (the benchmark's own app, under a temporary HOME)

IDLE_S = 2.0  # the server is idle once its CPU time grows by less than 0.05 s in this long
STEP_S = 0.5


def cpu_seconds(pid: int) -> float:
    """The process's user and system CPU time so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (/proc/PID/task/TID/children)."""
    found, stack = [], [pid]
    while stack:
        for task in Path(f"/proc/{stack.pop()}/task").glob("*"):
            try:
                children = [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                continue
            found += children
            stack += children
    return found


def browser_seconds(exclude: int) -> dict[int, float]:
    """CPU seconds so far of every process under this one but ``exclude`` (the server): Chromium and the driver."""
    seconds = {}
    for pid in descendants(os.getpid()):
        if pid != exclude:
            try:
                seconds[pid] = cpu_seconds(pid)
            except OSError:
                continue
    return seconds


def wait_idle(pid: int) -> None:
    last, quiet = cpu_seconds(pid), 0.0
    while quiet < IDLE_S:
        time.sleep(STEP_S)
        now = cpu_seconds(pid)
        quiet = quiet + STEP_S if now - last < 0.05 else 0.0
        last = now


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as home:
        process = start_app(Path(home), port)
        try:
            wait_idle(process.pid)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=args.chromium, args=["--no-sandbox"])
                for n in range(args.loads):
                    before, started = cpu_seconds(process.pid), time.perf_counter()
                    browser_before = browser_seconds(process.pid)
                    page = browser.new_page(viewport={"width": 1440, "height": 900})
                    page.goto(f"http://127.0.0.1:{port}/")
                    page.get_by_role("heading", name="Attention Playground").wait_for()
                    wait_idle(process.pid)
                    browser_after = browser_seconds(process.pid)  # a process ended meanwhile is left out
                    browser_cpu = sum(now - browser_before.get(pid, 0.0) for pid, now in browser_after.items())
                    print(f"page load {n + 1}: server CPU {cpu_seconds(process.pid) - before:.2f} s, browser CPU "
                          f"{browser_cpu:.2f} s, idle after "
                          f"{time.perf_counter() - started - IDLE_S:.1f} s")
                    page.close()
                browser.close()
        finally:
            process.terminate()
            process.wait(15)


if __name__ == "__main__":
    main()
