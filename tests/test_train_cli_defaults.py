"""The command lines give torch's native libraries their settings before torch loads: sampling the ones app.py
gives (settings.PROCESS_DEFAULTS: idle OpenMP threads sleep at once), training its own (settings.training_defaults:
a short spin where the cores are free, else sleeping at once as well). With libgomp's default spin, 60 steps of
``python -m playground.train --preset tiny`` on 2 busy cores took 27-36 s of training instead of 5-12 s sleeping
at once (idle OpenMP threads spin, taking the cores from the work; measured back to back, load 4-5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from playground.settings import PROCESS_DEFAULTS, TRAINING_DEFAULTS, training_defaults

KEYS = sorted({**PROCESS_DEFAULTS, **TRAINING_DEFAULTS})

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
    env = {key: value for key, value in os.environ.items() if key not in KEYS}
    env["PYTHONPATH"] = str(REPO)
    code = f"KEYS = {KEYS!r}\nMODULE = {module!r}\n" + PROBE
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    line = next((line for line in done.stdout.splitlines() if line.startswith("SEEN ")), None)
    assert line is not None, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(line[len("SEEN "):])


def _as_seen(defaults: dict) -> dict:
    return {key: defaults.get(key) for key in KEYS}


@pytest.mark.parametrize("module", ["playground.sample", "playground.cli.sample"])
def test_the_sampling_command_sets_the_process_defaults_before_torch_loads(module):
    assert _seen_at_torch_import(module) == _as_seen(PROCESS_DEFAULTS)


@pytest.mark.parametrize("module", ["playground.train", "playground.cli.train"])
def test_the_training_command_sets_its_defaults_before_torch_loads(module):
    """Which of the two depends on the machine's load as the command starts (test_training_defaults_follow_the_load)."""
    assert _seen_at_torch_import(module) in (_as_seen(TRAINING_DEFAULTS), _as_seen(PROCESS_DEFAULTS))


def test_training_defaults_follow_the_load():
    """A short spin on free cores; on cores that other processes keep busy, sleeping at once as the server does."""
    assert training_defaults(load=0.3, cores=2) == TRAINING_DEFAULTS
    assert training_defaults(load=1.0, cores=2) == PROCESS_DEFAULTS
    assert training_defaults(load=3.9, cores=16) == TRAINING_DEFAULTS
    assert "OMP_WAIT_POLICY" not in TRAINING_DEFAULTS and TRAINING_DEFAULTS["GOMP_SPINCOUNT"] == "10000"


def test_the_probe_sees_an_unset_environment():
    """A module that imports torch without applying the defaults is seen as such (the probe can fail)."""
    assert _seen_at_torch_import("playground.checkpoints.store") == {key: None for key in KEYS}
