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
PROCESS_DEFAULTS = {
    # idle OpenMP threads sleep instead of spinning: a server runs several torch calls at once on few cores, and
    # spinning threads take the cores from the work (300 tiny training steps: 105 s spinning, 2.1 s passive)
    "OMP_WAIT_POLICY": "PASSIVE",
    # oneDNN keeps a compiled kernel, and memory with it, for every input shape it meets (1,024 shapes by default):
    # a forward pass at each new text length kept about 2.8 MiB more, 720 MiB after 257 lengths; 64 keeps it near
    # 190 MiB (tests/test_inference_budget.py measures requests with this setting), and up to 603 MiB after 512
    # lengths with the heap it pins, which the server's budget gives back after each request (budget.trim_heap)
    "ONEDNN_PRIMITIVE_CACHE_CAPACITY": "64",
}


def apply_process_defaults() -> None:
    """Set each of PROCESS_DEFAULTS that the environment does not set already; call before importing torch."""
    for name, value in PROCESS_DEFAULTS.items():
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
