"""One resolver: names, Hub ids and (for the CLI) folders; canonical keys; a bounded cache in the app."""

import os

import pytest

from playground.checkpoints import loading
from playground.checkpoints import store as checkpoints
from playground.config import Limits
from playground.ui.common import CHECKPOINT_CACHE_SIZE, AppContext


def test_source_keys_are_canonical():
    assert loading.source_key(" shakespeare-char ") == loading.SourceKey("name", "shakespeare-char")
    assert loading.source_key("owner/name") == loading.SourceKey("hub", "owner/name")
    with pytest.raises(checkpoints.CheckpointError, match="pick a checkpoint first"):
        loading.source_key("   ")
    with pytest.raises(checkpoints.CheckpointError, match="not allowed"):
        loading.source_key("../etc")


def test_folders_only_where_allowed(tiny_weights):
    folder = tiny_weights / "shakespeare-char"
    assert loading.source_key(str(folder), allow_folders=True).kind == "folder"
    with pytest.raises(checkpoints.CheckpointError):
        loading.open_checkpoint(folder)
    assert loading.open_checkpoint(str(folder), allow_folders=True).config.vocabulary_size == 65


def test_a_missing_name_says_where_it_looked(tmp_path):
    with pytest.raises(checkpoints.CheckpointError, match=f"no checkpoint named 'nope' in {tmp_path}"):
        loading.open_checkpoint("nope", directory=tmp_path)


def test_whitespace_variants_share_one_cache_entry_and_the_cache_is_bounded(tiny_weights, tmp_path):
    for i in range(CHECKPOINT_CACHE_SIZE + 2):
        target = tmp_path / f"copy-{i}"
        target.mkdir()
        for file in (tiny_weights / "shakespeare-char").iterdir():
            (target / file.name).write_bytes(file.read_bytes())
    ctx = AppContext(limits=Limits(), weights=tmp_path)
    first = ctx.checkpoint("copy-0")
    assert ctx.checkpoint("copy-0 ") is first and ctx.checkpoint("  copy-0") is first
    assert len(ctx._checkpoints) == 1
    for i in range(CHECKPOINT_CACHE_SIZE + 2):
        ctx.checkpoint(f"copy-{i}")
    assert len(ctx._checkpoints) == CHECKPOINT_CACHE_SIZE


def test_folder_keys_are_canonical(tiny_weights, monkeypatch):
    monkeypatch.chdir(tiny_weights)
    keys = {loading.source_key(text, allow_folders=True) for text in
            ("shakespeare-char", "./shakespeare-char/", " shakespeare-char ", str(tiny_weights / "shakespeare-char"))}
    assert keys == {loading.SourceKey("folder", str((tiny_weights / "shakespeare-char").resolve()))}
    assert loading.source_key("shakespeare-char").kind == "name"  # the web API never reads folders


def test_a_resave_is_seen_even_within_one_tick_of_the_clock(tiny_weights, tmp_path):
    """The app reloads a checkpoint whose weights were replaced, even when the new file has the old mtime."""
    source = checkpoints.load_checkpoint("shakespeare-char", directory=tiny_weights)
    checkpoints.save_checkpoint(source.model, source.tokenizer, "run", directory=tmp_path,
                                training={"steps_done": 1})
    ctx = AppContext(limits=Limits(), weights=tmp_path)
    key = loading.source_key("run")
    before = (tmp_path / "run" / checkpoints.WEIGHTS_FILE).stat()
    assert ctx.checkpoint("run").steps == 1
    checkpoints.save_checkpoint(source.model, source.tokenizer, "run", directory=tmp_path,
                                training={"steps_done": 2})
    os.utime(tmp_path / "run" / checkpoints.WEIGHTS_FILE, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert loading.weights_stamp(key, tmp_path) is not None
    assert ctx.checkpoint("run").steps == 2


def test_missing_and_broken_are_told_apart(tiny_weights, tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / checkpoints.CONFIG_FILE).write_text("{}")
    with pytest.raises(checkpoints.CheckpointError) as broken:
        loading.open_checkpoint("broken", directory=tmp_path)
    assert not isinstance(broken.value, checkpoints.MissingCheckpointError)
    assert str(tmp_path) not in str(broken.value)
    with pytest.raises(checkpoints.MissingCheckpointError, match="give a name there, a folder path or a Hub id"):
        loading.open_checkpoint("nope", directory=tmp_path, allow_folders=True)
