"""Gradio's temp space under one quota (server/temp_space.py), and the handlers that write or read there keeping it."""

import os
from pathlib import Path

import pytest

from playground.config import Limits
from playground.server import temp_space
from playground.ui import attention_tab
from playground.ui.common import AppContext


def put(root: Path, name: str, size: int, age: float, now: float = 1_000_000.0) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    os.utime(path, (now - age, now - age))
    return path


def left(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_a_sweep_removes_the_old_then_the_oldest_until_the_incoming_bytes_fit(tmp_path):
    now = 1_000_000.0
    put(tmp_path, "a/old-upload.txt", 100, age=7200)  # past the age: goes whatever the room
    put(tmp_path, "b/export.csv", 400, age=300)
    in_use = put(tmp_path, "c/in-use.pt", 400, age=200)
    put(tmp_path, "d/newest.csv", 400, age=10)
    removed = temp_space.sweep(tmp_path, 1200, 3600, incoming=300, keep=[in_use], now=now)
    assert removed == 500 and left(tmp_path) == ["c/in-use.pt", "d/newest.csv"]  # 1300 + 300 > 1200
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # empty folders go too
    assert temp_space.sweep(tmp_path, 1200, 3600, incoming=400, now=now) == 0
    with pytest.raises(temp_space.TempSpaceError, match="more than its quota of 1,200 bytes"):
        temp_space.sweep(tmp_path, 1200, 3600, incoming=1201, now=now)
    assert left(tmp_path) == ["c/in-use.pt", "d/newest.csv"] and temp_space.usage(tmp_path) == 800


def test_exports_keep_the_temp_space_within_its_quota(tmp_path, monkeypatch):
    """An hour of exports filled 68 GB: each export now makes room for itself in PLAYGROUND_MAX_TEMP_BYTES."""
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))
    ctx = AppContext(limits=Limits(max_temp_bytes=60_000), weights=tmp_path / "weights")
    text = "to be or not to be, that is the question"
    sizes = []
    for _ in range(8):
        attention_tab.export_step(ctx, "random weights", None, 0, 0, 0, 16, 8, "journey", text, True, True, 1.0,
                                  False, "2. Q, K, V")
        sizes.append(temp_space.usage(tmp_path / "gradio"))
    assert max(sizes) <= 60_000 and sizes[0] > 10_000  # several exports fit, and the oldest made way
    small = AppContext(limits=Limits(max_temp_bytes=1000), weights=tmp_path / "weights")
    with pytest.raises(temp_space.TempSpaceError, match="PLAYGROUND_MAX_TEMP_BYTES"):
        attention_tab.export_step(small, "random weights", None, 0, 0, 0, 16, 8, "journey", text, True, True, 1.0,
                                  False, "2. Q, K, V")
