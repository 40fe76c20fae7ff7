"""Where the playground keeps its files and whether it may reach the network.

Read from the environment when called, never at import time, so a test (or a launcher) that sets a variable
before the call is obeyed:
  PLAYGROUND_CACHE_DIR                  the cache folder (default ``~/.cache/attention-playground``)
  PLAYGROUND_MAX_HUB_CACHE_BYTES        what its Hub downloads (``<cache>/hub``) may take together (default 4 GB)
  PLAYGROUND_OFFLINE / HF_HUB_OFFLINE   "1", "true" or "yes": make no request (downloads, the Hub)
Knows nothing about what is kept there: data.py caches Tiny Shakespeare, hub.py asks ``offline()``.
"""

from __future__ import annotations

import os
from pathlib import Path

OFFLINE_VARIABLES = ("PLAYGROUND_OFFLINE", "HF_HUB_OFFLINE")
HUB_CACHE_BYTES = 4_000_000_000


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
