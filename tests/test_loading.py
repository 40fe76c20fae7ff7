"""One resolver: names, Hub ids and (for the CLI) folders; canonical keys; a bounded cache in the app."""

import pytest

from playground import checkpoints, loading
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
