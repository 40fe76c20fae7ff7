"""The training and sampling command lines give torch's native libraries settings.PROCESS_DEFAULTS before torch
loads, as app.py does. Without OMP_WAIT_POLICY=PASSIVE, 60 steps of ``python -m playground.train --preset tiny``
on 2 busy cores took 27-36 s of training instead of 5-12 s (idle OpenMP threads spin, taking the cores from the
work; measured back to back, load 4-5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from playground.settings import PROCESS_DEFAULTS

REPO = Path(__file__).resolve().parents[1]

# In a fresh interpreter: note the environment at the moment torch is first imported, then run the command's
# module as ``python -m`` does (with --help, so it stops after parsing) and print what was noted.
PROBE = """
import importlib.abc, json, os, runpy, sys
seen = {}
class Note(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not seen:
            seen.update({key: os.environ.get(key) for key in KEYS})
        return None
sys.meta_path.insert(0, Note())
sys.argv = [MODULE, "--help"]
try:
    runpy.run_module(MODULE, run_name="__main__", alter_sys=True)
except SystemExit:
    pass
print("SEEN " + json.dumps(seen))
"""


def _seen_at_torch_import(module: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in PROCESS_DEFAULTS}
    env["PYTHONPATH"] = str(REPO)
    code = f"KEYS = {sorted(PROCESS_DEFAULTS)!r}\nMODULE = {module!r}\n" + PROBE
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    line = next((line for line in done.stdout.splitlines() if line.startswith("SEEN ")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(line[len("SEEN "):])


@pytest.mark.parametrize("module", ["playground.train", "playground.sample", "playground.cli.train",
                                    "playground.cli.sample"])
def test_the_command_line_sets_the_process_defaults_before_torch_loads(module):
    assert _seen_at_torch_import(module) == PROCESS_DEFAULTS


def test_the_probe_sees_an_unset_environment():
    """A module that imports torch without applying the defaults is seen as such (the probe can fail)."""
    assert _seen_at_torch_import("playground.checkpoints.store") == {key: None for key in PROCESS_DEFAULTS}
