"""tests/cpu_times.py, the --cpu-times plugin: a live child's CPU seconds count as the test's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cpu_times import tree_cpu_seconds

# the child spends 0.5 s of its own CPU (however long a busy machine makes that), says so, then waits for its stdin
BURN = ("import sys, time\nwhile time.process_time() < 0.5: pass\nprint('spent', flush=True)\nsys.stdin.read()")


@pytest.mark.skipif(not list(Path("/proc/self/task").glob("*/children")), reason="the plugin reads /proc (Linux)")
def test_a_live_childs_cpu_seconds_count():
    before = tree_cpu_seconds()
    child = subprocess.Popen([sys.executable, "-c", BURN], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "spent\n"
        assert tree_cpu_seconds() - before >= 0.45  # alive, unreaped: read in /proc (in ticks)
    finally:
        child.communicate("", timeout=60)
    assert tree_cpu_seconds() - before >= 0.45  # reaped: counted in this process's children's times


# a child that starts BURN as its own child, says its pid once it has spent its CPU, then waits for its stdin
PARENT = ("import subprocess, sys\n"
          f"burner = subprocess.Popen([sys.executable, '-c', {BURN!r}], stdin=subprocess.PIPE, stdout=subprocess.PIPE, "
          "text=True)\n"
          "assert burner.stdout.readline() == 'spent\\n'\n"
          "print(burner.pid, flush=True)\n"
          "sys.stdin.read()")


@pytest.mark.skipif(not list(Path("/proc/self/task").glob("*/children")), reason="the plugin reads /proc (Linux)")
def test_a_grandchild_that_ends_orphaned_keeps_its_cpu_seconds():
    """Chromium's processes end after Playwright's driver, their parent, so nothing in the tree reaps them: the test
    whose teardown closed the session's browser read as much as -872 CPU s, and its file as much too low."""
    before = tree_cpu_seconds()
    parent = subprocess.Popen([sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    burner = int(parent.stdout.readline())
    assert tree_cpu_seconds() - before >= 0.45  # read while it lives
    parent.kill()  # the burner's parent ends first: the burner is orphaned, and no process of this tree reaps it
    parent.wait(60)
    os.kill(burner, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while Path(f"/proc/{burner}").exists() and time.monotonic() < deadline:  # until init has reaped it
        time.sleep(0.05)
    assert tree_cpu_seconds() - before >= 0.45

BURNING_TEST = '''
import time


def test_burns_half_a_second():
    start = time.process_time()
    while time.process_time() - start < 0.5:
        pass


def test_idles():
    pass
'''


@pytest.mark.skipif(not list(Path("/proc/self/task").glob("*/children")), reason="the plugin reads /proc (Linux)")
def test_under_xdist_the_controller_prints_every_workers_figures(tmp_path):
    """tests/run.sh runs pytest -n 2: the figures are taken in the workers, so the controller must receive them (it
    had printed '0 tests in all')."""
    (tmp_path / "test_burn.py").write_text(BURNING_TEST)
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["cpu_times"]\n')
    tests = Path(__file__).resolve().parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadfile", "--cpu-times=5", "--rootdir", str(tmp_path), str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    files = re.search(r"^\s*([\d.]+) CPU s .* (\d+) tests\s+test_burn\.py$", done.stdout, re.MULTILINE)
    assert files, done.stdout
    assert float(files[1]) >= 0.45 and files[2] == "2"
    assert re.search(r"^\s*([\d.]+) CPU s .*test_burn\.py::test_burns_half_a_second$", done.stdout, re.MULTILINE)
    assert "-n 2: the tests ran side by side" in done.stdout
