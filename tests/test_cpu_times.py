"""tests/cpu_times.py, the --cpu-times plugin: a live child's CPU seconds count as the test's."""

from __future__ import annotations

import subprocess
import sys
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
