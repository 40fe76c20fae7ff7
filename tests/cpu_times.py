"""CPU seconds per test and per file: ``pytest --cpu-times=40`` prints every file's and the 40 costliest tests'.

On a machine shared with other work a test's wall time says more about the neighbours than about the test (under
load 13-17 a browser test's wall seconds were 7-10 times its CPU seconds); the CPU seconds the test process and every
process under it spent (the app.py a browser test drives, Chromium, the children a memory test measures in) are
what a quiet CI machine's 2 cores have to give it. Wall seconds are printed beside them as a cross-check.

A test's figure is its setup, call and teardown: the first test to use a session or module fixture carries that
fixture's start (app.py's), the last its end. A process that ends unreaped by anything in the tree (Chromium's,
once Playwright's driver has ended) keeps its last reading; what it spent after that is lost, and a test whose figure
still comes out negative is flagged. Under pytest-xdist each worker measures its own tests (its process tree) and
the controller prints them all. Linux only (it reads /proc); elsewhere the option says so.
"""

from __future__ import annotations

import json
import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(start time, utime + stime + cutime + cstime in seconds) of ``pid``, or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (name) ": state ppid ...; utime is the 12th
    return int(fields[19]), sum(int(f) for f in fields[11:15]) / TICKS


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (/proc/PID/task/TID/children)."""
    found = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            found += [int(child) for child in children.read_text().split()]
        except OSError:  # the thread ended meanwhile
            continue
    return found


def _descendants(root: int) -> dict[tuple[int, int], tuple[int, float]]:
    """(pid, start time) -> (parent pid, CPU seconds with the children it reaped) of every live process under
    ``root`` (not ``root`` itself)."""
    found, stack = {}, [(child, root) for child in _children(root)]
    while stack:
        pid, parent = stack.pop()
        stat = _stat(pid)
        if stat is not None:
            found[(pid, stat[0])] = (parent, stat[1])
            stack += [(child, pid) for child in _children(pid)]
    return found


class _Tree:
    """The CPU seconds of this process and everything under it, read again at every call. A process that left the
    tree between two readings keeps its last reading when nothing in the tree reaped it: its parent was gone too
    (Chromium's processes once Playwright's driver has ended) or it was orphaned. Without that, the test whose
    teardown ended the session's Chromium read as much as -872 CPU s. What such a process spent after its last
    reading is lost."""

    def __init__(self):
        self.live: dict[tuple[int, int], tuple[int, float]] = {}
        self.gone = 0.0

    def seconds(self) -> float:
        me = os.getpid()
        live = _descendants(me)
        alive = {pid for pid, _ in live} | {me}
        for key, (parent, seconds) in self.live.items():
            if key not in live and parent not in alive:  # nothing in the tree reaped it into its own figure
                self.gone += seconds
        self.live = live
        own = os.times()
        return (own.user + own.system + own.children_user + own.children_system + self.gone
                + sum(seconds for _, seconds in live.values()))


_TREE = _Tree()


def tree_cpu_seconds() -> float:
    """This process's CPU seconds, its reaped children's, every live descendant's, and the last reading of those
    that ended unreaped by the tree."""
    return _TREE.seconds()


def pytest_addoption(parser):
    parser.addoption("--cpu-times", type=int, default=None, metavar="N",
                     help="print CPU seconds (this process and its descendants) per file and for the N costliest "
                          "tests")
    parser.addoption("--cpu-times-json", default=None, metavar="PATH", help="also write them to PATH as JSON")


def pytest_configure(config):
    if config.getoption("--cpu-times") is not None or config.getoption("--cpu-times-json"):
        if not list(Path("/proc/self/task").glob("*/children")):
            raise pytest.UsageError("--cpu-times reads /proc/PID/task/TID/children: Linux only")
        config.pluginmanager.register(CpuTimes(config), "cpu-times-recorder")


class CpuTimes:
    """Each test's figure is taken where it runs (in a pytest-xdist worker, that worker's process tree) and rides on
    its teardown report (``user_properties``), so the process that prints them, the controller under xdist, reads
    every worker's."""

    def __init__(self, config):
        self.config = config
        self.started: dict[str, tuple[float, float]] = {}  # nodeid -> (CPU s, wall s) when its setup began
        self.tests: dict[str, tuple[float, float]] = {}  # nodeid -> (CPU s, wall s)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.started[item.nodeid] = (tree_cpu_seconds(), time.monotonic())
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        report = (yield).get_result()
        if call.when == "teardown" and item.nodeid in self.started:  # the teardown has ended: the test's whole cost
            cpu, wall = self.started.pop(item.nodeid)
            report.user_properties.append(("cpu_times", (tree_cpu_seconds() - cpu, time.monotonic() - wall)))

    def pytest_runtest_logreport(self, report):
        for name, value in report.user_properties if report.when == "teardown" else ():
            if name == "cpu_times":
                self.tests[report.nodeid] = tuple(value)

    def pytest_terminal_summary(self, terminalreporter):
        if hasattr(self.config, "workerinput"):  # an xdist worker: its figures went to the controller
            return
        files: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for nodeid, (cpu, wall) in self.tests.items():
            row = files[nodeid.split("::")[0]]
            row[0] += cpu
            row[1] += wall
            row[2] += 1
        write = terminalreporter.write_line
        terminalreporter.section("CPU seconds (the test process and its descendants), wall seconds")
        for name, (cpu, wall, count) in sorted(files.items(), key=lambda kv: -kv[1][0]):
            write(f"{cpu:9.1f} CPU s {wall:9.1f} wall s  {count:4d} tests  {name}")
        total_cpu, total_wall = sum(r[0] for r in files.values()), sum(r[1] for r in files.values())
        write(f"{total_cpu:9.1f} CPU s {total_wall:9.1f} wall s  {len(self.tests):4d} tests  in all")
        workers = getattr(self.config.option, "numprocesses", None)
        if workers:
            write(f"(-n {workers}: the tests ran side by side, so the wall seconds add up to more than the run took)")
        for nodeid, (cpu, _) in self.tests.items():
            if cpu < 0:
                write(f"{nodeid}: {cpu:.1f} CPU s: processes ended in its teardown unreaped, the CPU counted for "
                      "them in earlier tests went with them; its file's figure is low by as much")
        shown = self.config.getoption("--cpu-times") or 0
        if shown:
            write(f"the {shown} costliest tests:")
            for nodeid, (cpu, wall) in sorted(self.tests.items(), key=lambda kv: -kv[1][0])[:shown]:
                write(f"{cpu:9.1f} CPU s {wall:9.1f} wall s  {nodeid}")
        path = self.config.getoption("--cpu-times-json")
        if path:
            Path(path).write_text(json.dumps({"files": files, "tests": self.tests}, indent=1))
