"""Crash safety of checkpoint saving: kill -9 a real training run while it writes checkpoints, then load.

    python benchmarks/crash_trials.py                       # 20 trials in a fresh temporary folder
    python benchmarks/crash_trials.py --trials 50 --seed 3 --weights-dir /tmp/crash --json /tmp/crash.json

Each trial starts ``python -m playground.train`` with a tiny model and ``--checkpoint-interval 1`` (a save
after every step, so most of the run is spent saving), waits until its first save has begun, lets it run
for a random 0..--max-delay seconds more and sends SIGKILL. Trials share one weights folder and one run
name, so later trials replace an existing checkpoint (the ``.old-`` rename path); about half of them resume
it instead.

After each kill it counts the save's leftovers (``.tmp-*`` and ``.old-*``), calls ``recover`` as the app's
start-up does (an ``.old-`` copy goes back in place if the kill fell between the two renames, or is deleted;
a ``.tmp-`` folder no live save claims is deleted) and ``list_checkpoints``, and checks: every
listed checkpoint loads with ``load_checkpoint``; no visible folder lacks config.json, model.safetensors or
vocabulary.json (nothing half-written is ever in view); and once a checkpoint has been listed, every later
trial still lists one (a crash never loses the last good one).
Prints one row per trial and a summary; exits 1 if any trial broke a rule.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from playground.checkpoints import store as checkpoints

REPO = Path(__file__).resolve().parents[1]

RUN_NAME = "crash"
REQUIRED = (checkpoints.CONFIG_FILE, checkpoints.WEIGHTS_FILE, checkpoints.VOCABULARY_FILE)
MODEL_ARGS = ["--preset", "tiny", "--layers-num", "2", "--heads-num", "2", "--embedding-dim", "64",
              "--context-size", "32", "--batch-size", "4", "--eval-interval", "100000", "--eval-batches", "1",
              "--checkpoint-interval", "1", "--device", "cpu", "--threads", "1"]
STEPS = 20_000  # never reached: every trial is killed


@dataclass
class Trial:
    trial: int
    mode: str  # "fresh" or "resume"
    delay: float  # seconds between the first save starting and the kill
    steps_reached: int = 0  # at least: the last step tqdm's bar showed (it redraws every 0.1 s) or saved
    steps_saved: int | None = None  # steps_done of the listed checkpoint after recovery
    leftovers: list[str] = field(default_factory=list)  # .tmp-/.old- entries right after the kill
    recovered: int = 0  # of those, how many recovery removed or put back
    restored: int = 0  # orphaned .old- copies (the kill fell between two renames) that recovery put back
    listed: int = 0
    loaded: int = 0
    problems: list[str] = field(default_factory=list)


def default_corpus() -> Path:
    explicit = os.environ.get("PLAYGROUND_TINY_SHAKESPEARE")
    return Path(explicit) if explicit else REPO.parent / "shared" / "data" / "tinyshakespeare.txt"


def _hidden(folder: Path) -> list[str]:
    return sorted(e.name for e in folder.iterdir() if e.name.startswith((".tmp-", ".old-"))) if folder.is_dir() \
        else []


def _read_stderr(stream, lines: list[str], ready: threading.Event) -> None:
    for line in iter(stream.readline, ""):
        for part in line.replace("\r", "\n").splitlines():
            lines.append(part)
            if part.startswith("training "):
                ready.set()
    ready.set()  # the process ended (or failed) before training


def _wait_for_saving(folder: Path, earlier: set[str], since: float, process: subprocess.Popen,
                     timeout: float = 180) -> bool:
    """True once this run has begun saving: a new .tmp- folder, or a checkpoint written since ``since``."""
    deadline = time.time() + timeout
    record = folder / RUN_NAME / checkpoints.CONFIG_FILE
    while time.time() < deadline and process.poll() is None:
        if any(name.startswith(".tmp-") and name not in earlier for name in _hidden(folder)):
            return True
        try:
            if record.stat().st_mtime > since:
                return True
        except FileNotFoundError:
            pass
        time.sleep(0.005)
    return False


def run_trial(number: int, folder: Path, corpus: Path, rng: random.Random, max_delay: float,
              ever_listed: bool) -> Trial:
    existing = checkpoints.list_checkpoints(folder)
    earlier = set(_hidden(folder))  # anything an earlier trial left; not this trial's
    mode = "resume" if RUN_NAME in existing and rng.random() < 0.5 else "fresh"
    trial = Trial(number, mode, round(rng.uniform(0.0, max_delay), 2))
    command = [sys.executable, "-m", "playground.train", *MODEL_ARGS, "--steps", str(STEPS), "--run-name",
               RUN_NAME, "--weights-dir", str(folder), "--corpus", str(corpus),
               "--seed", str(number), "--resume" if mode == "resume" else "--replace"]
    env = {**os.environ, "PLAYGROUND_OFFLINE": "1", "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    started_at = time.time()
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    lines: list[str] = []
    ready = threading.Event()
    reader = threading.Thread(target=_read_stderr, args=(process.stderr, lines, ready), daemon=True)
    reader.start()
    if not ready.wait(180) or process.poll() is not None:
        process.kill()
        process.wait()
        trial.problems.append("the run did not start: " + " | ".join(lines[-5:]))
        return trial
    if not _wait_for_saving(folder, earlier, started_at, process):
        process.kill()
        process.wait()
        trial.problems.append("the run never started saving: " + " | ".join(lines[-5:]))
        return trial
    time.sleep(trial.delay)
    if process.poll() is not None:
        trial.problems.append(f"the run ended by itself (exit {process.returncode}) before the kill")
    else:
        os.kill(process.pid, signal.SIGKILL)
    process.wait()
    reader.join(5)
    reached = [int(m.group(1)) for line in lines if (m := re.search(r"\| *(\d+)/\d+ \[", line))]  # tqdm's bar
    trial.steps_reached = max(reached, default=0)  # raised to steps_saved below when that is higher

    trial.leftovers = [name for name in _hidden(folder) if name not in earlier]
    orphans = [name for name in trial.leftovers if name.startswith(".old-")
               and not (folder / name[len(".old-"):].rsplit("-", 1)[0]).exists()]
    checkpoints.recover(folder)  # as at start-up: an orphaned .old- copy goes back in place
    names = checkpoints.list_checkpoints(folder)  # listing only reads
    trial.restored = sum(1 for name in orphans if not (folder / name).exists())
    trial.recovered = sum(1 for name in trial.leftovers if not (folder / name).exists())
    trial.listed = len(names)
    for name in names:
        try:
            loaded = checkpoints.load_checkpoint(name, directory=folder)
        except Exception as exc:  # any failure to load a listed checkpoint is what this script hunts
            trial.problems.append(f"listed {name} does not load: {type(exc).__name__}: {exc}")
            continue
        trial.loaded += 1
        if name == RUN_NAME:
            trial.steps_saved = loaded.steps
            trial.steps_reached = max(trial.steps_reached, loaded.steps)
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.name.startswith("."):
            missing = [f for f in REQUIRED if not (entry / f).is_file()]
            if missing:
                trial.problems.append(f"{entry.name}/ is visible but half-written (no {', '.join(missing)})")
    if ever_listed and RUN_NAME not in names:
        trial.problems.append("the last good checkpoint was lost")
    return trial


def print_table(trials: list[Trial]) -> None:
    header = (f"{'trial':>5} {'mode':>6} {'kill after':>10} {'steps reached':>13} {'steps saved':>11} "
              f"{'listed':>6} {'loaded':>6} {'leftovers after kill':>20} {'recovered':>9} {'restored':>8}  result")
    print(header)
    print("-" * len(header))
    for t in trials:
        kinds = ", ".join(sorted({name[:5] for name in t.leftovers}))
        counts = f"{len(t.leftovers)} ({kinds})" if t.leftovers else "0"
        saved = "-" if t.steps_saved is None else str(t.steps_saved)
        print(f"{t.trial:>5} {t.mode:>6} {t.delay:>9.2f}s {('≥' + str(t.steps_reached)):>13} {saved:>11} "
              f"{t.listed:>6} {t.loaded:>6} {counts:>20} {t.recovered:>9} {t.restored:>8}  "
              f"{'ok' if not t.problems else 'FAIL: ' + '; '.join(t.problems)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0, help="seeds the kill delays and fresh/resume choices")
    parser.add_argument("--max-delay", type=float, default=2.0,
                        help="longest time from the first save to the kill, seconds")
    parser.add_argument("--weights-dir", type=Path, default=None, help="default: a new temporary folder")
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--json", type=Path, default=None, help="also write the trials here as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the temporary weights folder for a look")
    args = parser.parse_args(argv)
    if not args.corpus.is_file():
        parser.error(f"no corpus at {args.corpus} (set PLAYGROUND_TINY_SHAKESPEARE or pass --corpus)")
    folder = args.weights_dir or Path(tempfile.mkdtemp(prefix="crash-trials-"))
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    print(f"{args.trials} kill -9 trials, checkpoints every step, in {folder}", flush=True)
    trials: list[Trial] = []
    started = time.perf_counter()
    ever_listed = False
    for number in range(1, args.trials + 1):
        trial = run_trial(number, folder, args.corpus, rng, args.max_delay, ever_listed)
        ever_listed = ever_listed or trial.listed > 0
        trials.append(trial)
    print_table(trials)
    failed = [t for t in trials if t.problems]
    mid_save = sum(1 for t in trials if t.leftovers)
    print(f"\n{len(trials)} trials in {time.perf_counter() - started:.0f}s: {len(trials) - len(failed)} ok, "
          f"{len(failed)} failed; {mid_save} kills landed mid-save (left .tmp-/.old- behind), "
          f"{sum(t.recovered for t in trials)} leftovers recovered, {sum(t.restored for t in trials)} of them "
          f"orphaned .old- copies put back; "
          f"{sum(t.loaded for t in trials)} of {sum(t.listed for t in trials)} listed checkpoints loaded")
    if args.json:
        args.json.write_text(json.dumps([asdict(t) for t in trials], indent=1), encoding="utf-8")
    if args.weights_dir is None and not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
