"""A training process killed with SIGKILL never leaves a checkpoint that is listed but does not load.

Two ways in: ``benchmarks/crash_trials.py`` for a few random kills of a real ``python -m playground.train``
run that saves every step (the script runs 20 and more by hand), and one child process per dangerous moment
of ``save_checkpoint``, killed exactly there: half-way through writing the weights, between moving the old
folder aside and renaming the new one into place, and before the old copy is deleted.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from conftest import REPO, SHARED_CORPUS

from playground.checkpoints import store as checkpoints

CRASH_AT = textwrap.dedent('''
    import os, signal, sys
    from pathlib import Path
    from playground.checkpoints import store as checkpoints

    moment, folder = sys.argv[1], Path(sys.argv[2])
    loaded = checkpoints.load_checkpoint("shakespeare-char", directory=folder)

    def die(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGKILL)

    if moment == "writing the weights":
        real_save = checkpoints.save_file
        def half_then_die(state, path, metadata=None):
            real_save(state, path, metadata=metadata)
            with open(path, "r+b") as handle:  # the kill lands mid-write: only half the bytes are there
                handle.truncate(os.path.getsize(path) // 2)
            die()
        checkpoints.save_file = half_then_die
    elif moment == "between the renames":
        real_rename, calls = os.rename, []
        def rename(source, target, *args, **kwargs):
            calls.append(source)
            if len(calls) == 2:  # the old folder is already aside as .old-*, the new one not yet in place
                die()
            return real_rename(source, target, *args, **kwargs)
        os.rename = rename
    elif moment == "before deleting the old copy":
        checkpoints.shutil.rmtree = die
    checkpoints.save_checkpoint(loaded.model, loaded.tokenizer, "shakespeare-char", directory=folder,
                                training={"steps_done": 999})
    print("the save finished: the crash point was never reached")
''')


def _copy_weights(source, target):
    target.mkdir()
    (target / "shakespeare-char").mkdir()
    for file in (source / "shakespeare-char").iterdir():
        (target / "shakespeare-char" / file.name).write_bytes(file.read_bytes())
    return target


@pytest.mark.parametrize("moment,expected_steps", [
    ("writing the weights", 30), ("between the renames", 30), ("before deleting the old copy", 999),
])
def test_a_kill_at_each_moment_of_a_save_leaves_a_loadable_checkpoint(tiny_weights, tmp_path, moment,
                                                                       expected_steps):
    folder = _copy_weights(tiny_weights, tmp_path / "weights")
    script = tmp_path / "crash_at.py"
    script.write_text(CRASH_AT, encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), moment, str(folder)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO),
                                                       "PLAYGROUND_OFFLINE": "1", "HOME": str(tmp_path)})
    assert done.returncode == -9, f"expected a SIGKILL, got {done.returncode}: {done.stdout}{done.stderr[-2000:]}"
    leftovers = sorted(e.name[:5] for e in folder.iterdir() if e.name.startswith((".tmp-", ".old-")))
    if moment == "between the renames":
        assert not (folder / "shakespeare-char").exists() and ".old-" in leftovers  # the dangerous state
    for name in checkpoints.list_checkpoints(folder):  # before recovery: whatever is listed loads
        checkpoints.load_checkpoint(name, directory=folder)
    checkpoints.recover(folder)  # what the app's start-up and the training CLI do first
    names = checkpoints.list_checkpoints(folder)
    assert names == ["shakespeare-char"]
    loaded = checkpoints.load_checkpoint("shakespeare-char", directory=folder)
    assert loaded.steps == expected_steps
    assert not any(e.name.startswith((".old-", ".tmp-")) for e in folder.iterdir()), "recovery left a leftover"


def test_the_app_recovers_once_at_start_up(tiny_weights, tmp_path):
    from playground.ui import build_app

    folder = _copy_weights(tiny_weights, tmp_path / "weights")
    (folder / "shakespeare-char").rename(folder / ".old-shakespeare-char-0badf00d")  # killed between renames
    (folder / ".tmp-shakespeare-char-dead").mkdir()
    assert checkpoints.list_checkpoints(folder) == []
    app = build_app(weights=folder)
    assert app.playground_context.checkpoint_names() == ["shakespeare-char"]
    assert not any(e.name.startswith((".old-", ".tmp-")) for e in folder.iterdir())


def test_random_kills_of_a_real_training_run(tmp_path):
    report = tmp_path / "trials.json"
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "crash_trials.py"), "--trials", "3",
                           "--seed", "7", "--max-delay", "2", "--weights-dir", str(tmp_path / "weights"),
                           "--corpus", str(SHARED_CORPUS), "--json", str(report)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    print(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    trials = json.loads(report.read_text())
    assert len(trials) == 3 and all(not t["problems"] for t in trials)
    assert all(t["loaded"] == t["listed"] for t in trials)
    assert trials[-1]["listed"] >= 1, "three runs, none of which saved a single checkpoint"
