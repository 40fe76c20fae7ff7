#!/usr/bin/env bash
# Sets up and runs the whole test suite on a fresh machine: a venv in .venv, torch 2.13.0 (CPU build),
# the requirements, the playground package itself (editable: benchmarks and subprocesses import it from
# anywhere), Debian's Chromium for the browser tests, then ruff and pytest.
# Usage: bash tests/run.sh [extra pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
export GRADIO_ANALYTICS_ENABLED=False HF_HUB_DISABLE_TELEMETRY=1 PIP_DISABLE_PIP_VERSION_CHECK=1

# Debian's Chromium (and Node.js, which checks the page's scripts) installs in the background while pip fills the venv (both mostly wait on downloads and disk).
install_chromium() {
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium nodejs) >/dev/null
  elif command -v sudo >/dev/null; then
    (sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium nodejs) >/dev/null
  fi
}
chromium_pid=
if [ ! -x /usr/bin/chromium ] || ! command -v node >/dev/null; then
  install_chromium &
  chromium_pid=$!
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q torch==2.13.0  # first: the CPU build; an open range would pull a CUDA one
.venv/bin/python -m pip install -q torch==2.13.0 -r requirements.txt -r requirements-dev.txt
.venv/bin/python -m pip install -q --no-deps -e .  # the dependencies are the requirements above

if [ -n "$chromium_pid" ]; then
  wait "$chromium_pid" || echo "installing chromium failed (exit code $?)"
fi
[ -x /usr/bin/chromium ] || { echo "Debian's chromium is needed for the browser tests (apt-get install chromium)"; exit 1; }

.venv/bin/python -m ruff check .
# Two workers (pytest-xdist): one runs every browser test and the Docker tests (one app.py, one Chromium: they keep
# about 1.7 cores busy alone), the other every other file, a file at a time (--dist loadfile, with conftest.py's
# scheduler keeping the browser files together). The two halves' CPU seconds (about 2,100 and 900 on CI's 2 cores) then overlap instead of
# following each other. PLAYGROUND_TEST_WORKERS=0 runs everything in this one process.
# The slowest 40 by wall time, and every file's and the costliest 40 tests' CPU seconds (tests/cpu_times.py): CI
# (.ci/run, installs included) must stay within 15 minutes.
workers=${PLAYGROUND_TEST_WORKERS:-2}
.venv/bin/python -m pytest -q -p no:cacheprovider -n "$workers" --dist loadfile \
  --durations=40 --cpu-times=40 "$@"
