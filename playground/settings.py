"""Where the playground keeps its files and whether it may reach the network.

Read from the environment when called, never at import time, so a test (or a launcher) that sets a variable
before the call is obeyed:
  PLAYGROUND_CACHE_DIR                  the cache folder (default ``~/.cache/attention-playground``)
  PLAYGROUND_MAX_HUB_CACHE_BYTES        what its Hub downloads (``<cache>/hub``) may take together (default 4 GB)
  PLAYGROUND_OFFLINE / HF_HUB_OFFLINE   "1", "true" or "yes": make no request (downloads, the Hub)
Knows nothing about what is kept there: data.py caches Tiny Shakespeare, hub.py asks ``offline()``.

Also the settings a long-lived process gives torch's native libraries before torch is imported
(``apply_process_defaults``; app.py applies them, and so do the training and sampling command lines, the tests'
servers and memory measurements).
"""

from __future__ import annotations

import os
from pathlib import Path

OFFLINE_VARIABLES = ("PLAYGROUND_OFFLINE", "HF_HUB_OFFLINE")
HUB_CACHE_BYTES = 4_000_000_000
# the repository: weights/ and assets/ beside the package (an editable install or a clone)
PROJECT_ROOT = Path(__file__).resolve().parent.parent

# Read by torch's native libraries once, when torch is imported; a variable already set is left as it is.
# oneDNN keeps a compiled kernel, and memory with it, for every input shape it meets (1,024 shapes by default): a
# forward pass at each new text length kept about 2.8 MiB more, 720 MiB after 257 lengths; 64 keeps it near 190 MiB
# (tests/test_inference_budget.py measures requests with this setting), and up to 603 MiB after 512 lengths with the
# heap it pins, which the server's budget gives back after each request (budget.trim_heap)
_ONEDNN_CACHE = {"ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64"}
# A process that shares its cores: the server runs several torch calls at once on few cores, and sampling runs
# beside other work. Idle OpenMP threads sleep at once instead of spinning, which would take the cores from the
# work (300 tiny training steps: 105 s spinning, 2.1 s passive).
PROCESS_DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", **_ONEDNN_CACHE}
# The training command where its cores are free: one loop that owns them. Its threads wait between the step's
# many short parallel regions, so sleeping at once costs a wake-up each time; a short spin took the baby config
# from 0.72-0.87 of nanoGPT's tokens/s to 0.82-1.12 on a quiet machine (benchmarks/train_speed.py,
# docs/benchmarks.md). libgomp's own default spins 300,000 rounds, which takes busy cores from the work (6,949
# tokens/s against 20,668 sleeping at once).
TRAINING_DEFAULTS = {"GOMP_SPINCOUNT": "10000", **_ONEDNN_CACHE}


def training_defaults(load: float | None = None, cores: int | None = None) -> dict[str, str]:
    """The training command's settings: TRAINING_DEFAULTS where the cores are mostly free (the last minute's load
    average below half of them), else PROCESS_DEFAULTS, since a spin of even 10,000 rounds lost 24-68% to sleeping
    at once when other processes kept the cores busy."""
    load = os.getloadavg()[0] if load is None else load
    cores = (os.cpu_count() or 1) if cores is None else cores
    return TRAINING_DEFAULTS if load < cores / 2 else PROCESS_DEFAULTS


def apply_process_defaults(defaults: dict[str, str] = PROCESS_DEFAULTS) -> None:
    """Set each of ``defaults`` (PROCESS_DEFAULTS, or the training command's ``training_defaults()``) that the
    environment does not set already; call before importing torch."""
    for name, value in defaults.items():
        os.environ.setdefault(name, value)


def cache_dir() -> Path:
    """``PLAYGROUND_CACHE_DIR`` or ``~/.cache/attention-playground``."""
    return Path(os.environ.get("PLAYGROUND_CACHE_DIR") or Path.home() / ".cache" / "attention-playground")


def hub_cache_bytes() -> int:
    """``PLAYGROUND_MAX_HUB_CACHE_BYTES`` (a whole number of bytes), else 4 GB."""
    value = os.environ.get("PLAYGROUND_MAX_HUB_CACHE_BYTES", "").strip()
    return int(value) if value.isdigit() else HUB_CACHE_BYTES


def offline() -> bool:
    """True when ``PLAYGROUND_OFFLINE`` or ``HF_HUB_OFFLINE`` is 1, true or yes (any case)."""
    return any(os.environ.get(variable, "").strip().lower() in ("1", "true", "yes") for variable in OFFLINE_VARIABLES)
