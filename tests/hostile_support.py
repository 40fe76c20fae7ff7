"""The hostile-visitor tests' server: the real app.py inside a memory limit, watched.

``MemoryGroup`` makes a cgroup (v1's memory controller, or v2's) with a hard limit and puts the server in it
before app.py starts, so the server finds the limit itself (budget.container_limit reads /proc/self/cgroup) as
it would in a Space's container. Where no cgroup can be made, an RSS watchdog polls the server's memory and
the test fails when it passes the limit. Either way ``peak_bytes`` is the most the server held.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

V1_ROOT = Path("/sys/fs/cgroup/memory")
V2_ROOT = Path("/sys/fs/cgroup")


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))
    except (OSError, StopIteration):
        return 0


class MemoryGroup:
    """A memory cgroup with ``limit_bytes``, or an RSS watchdog where none can be made."""

    def __init__(self, limit_bytes: int):
        self.limit = int(limit_bytes)
        self.path: Path | None = None
        self.version = 0
        self.watched_pid: int | None = None
        self._watch_peak = 0
        self._stop = threading.Event()
        name = f"attention-playground-hostile-{uuid.uuid4().hex[:8]}"
        for root, version, limit_file in ((V1_ROOT, 1, "memory.limit_in_bytes"), (V2_ROOT, 2, "memory.max")):
            if version == 2 and not (V2_ROOT / "cgroup.controllers").is_file():
                continue
            try:
                path = root / name
                path.mkdir()
                (path / limit_file).write_text(str(self.limit))
                if version == 1 and (path / "memory.memsw.limit_in_bytes").exists():
                    try:
                        (path / "memory.memsw.limit_in_bytes").write_text(str(self.limit))
                    except OSError:
                        pass
            except OSError:
                continue
            self.path, self.version = path, version
            break

    @property
    def kind(self) -> str:
        return f"cgroup v{self.version} at {self.path}" if self.path else "an RSS watchdog (no cgroup could be made)"

    def enter(self) -> None:
        """preexec_fn: move the child into the group before it runs app.py."""
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def watch(self, pid: int) -> None:
        self.watched_pid = pid
        thread = threading.Thread(target=self._watch, daemon=True)
        thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            self._watch_peak = max(self._watch_peak, _rss_bytes(self.watched_pid))
            time.sleep(0.05)

    def peak_bytes(self) -> int:
        if self.path is not None:
            name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
            try:
                return int((self.path / name).read_text())
            except (OSError, ValueError):
                pass
        return self._watch_peak

    def reset_peak(self) -> None:
        if self.path is not None and self.version == 1:
            try:
                (self.path / "memory.max_usage_in_bytes").write_text("0")
                return
            except OSError:
                pass
        self._watch_peak = _rss_bytes(self.watched_pid) if self.watched_pid else 0

    def over_limit(self) -> bool:
        """True when the limit was hit: the kernel's OOM count in a cgroup, the RSS in the watchdog."""
        if self.path is not None and self.version == 1:
            try:
                return int((self.path / "memory.failcnt").read_text()) > 0 and self._oom_killed()
            except (OSError, ValueError):
                return False
        if self.path is not None:
            events = (self.path / "memory.events").read_text() if (self.path / "memory.events").exists() else ""
            return any(line.startswith("oom_kill ") and int(line.split()[1]) > 0 for line in events.splitlines())
        return self._watch_peak > self.limit

    def _oom_killed(self) -> bool:
        control = (self.path / "memory.oom_control").read_text()
        return any(line.startswith("oom_kill ") and int(line.split()[1]) > 0 for line in control.splitlines())

    def close(self) -> None:
        self._stop.set()
        if self.path is not None:
            for _ in range(50):
                try:
                    self.path.rmdir()
                    return
                except OSError:
                    time.sleep(0.1)


def disk_bytes(folder: Path) -> int:
    """Bytes of every file below ``folder``."""
    return sum(f.stat().st_size for f in Path(folder).rglob("*") if f.is_file()) if Path(folder).exists() else 0
