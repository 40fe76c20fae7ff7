"""The app's nanoGPT upload (ui/bring_model.py): a stranger's ckpt.pt is checked for size, name, memory and quota
before it is converted, and the result opens like any checkpoint and counts as that visitor's."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import gradio as gr
import pytest
import torch
from test_convert import CHARS, NanoGPT, files, model_args  # noqa: F401  (files: a fixture, ckpt.pt + meta.pkl)

from playground.budget import MemoryBudget
from playground.checkpoints import store as checkpoints
from playground.config import Limits
from playground.server import admission, tenancy
from playground.ui.bring_model import convert_upload
from playground.ui.common import AppContext, friendly


@pytest.fixture
def ctx(tmp_path, tiny_weights):
    weights = tmp_path / "weights"
    shutil.copytree(tiny_weights, weights)
    return AppContext(limits=Limits(), weights=weights)


def _upload(ctx, *args, session="visitor-a"):
    return friendly(convert_upload)(ctx, *args, request=SimpleNamespace(session_hash=session))


def test_an_upload_becomes_a_checkpoint_of_its_visitor(ctx, files):  # noqa: F811
    folder, model = files
    note = _upload(ctx, str(folder / "ckpt.pt"), str(folder / "meta.pkl"), "", "nano-upload")
    assert "nano-upload" in note and "parameters" in note
    loaded = checkpoints.load_checkpoint("nano-upload", directory=ctx.weights)
    ids = loaded.tokenizer.encode("to be or").unsqueeze(0)
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids).logits, model(ids), rtol=1e-5, atol=1e-5)
    record = json.loads((ctx.weights / "nano-upload" / "training.json").read_text())
    assert record["owner"] == tenancy.owner_hash("visitor-a")
    assert "nano-upload" in ctx.checkpoint_names()


def test_pasted_characters_replace_meta(ctx, files):  # noqa: F811
    folder, _ = files
    assert "nano-chars" in _upload(ctx, str(folder / "ckpt.pt"), None, "".join(CHARS), "nano-chars")


@pytest.mark.parametrize("change, words", [
    (dict(ckpt=None), "(?i)choose nanoGPT's ckpt.pt"),
    (dict(meta=None), "(?i)add the vocabulary"),
    (dict(characters="abc"), "(?i)give the vocabulary once"),
    (dict(name="shakespeare-char"), "(?i)already exists; pick a new name, such as my-nanogpt-1"),
    (dict(name="../escape"), "(?i)not allowed"),
])
def test_bad_uploads_are_refused_with_what_to_do_and_nothing_is_written(ctx, files, change, words):  # noqa: F811
    folder, _ = files
    values = dict(ckpt=str(folder / "ckpt.pt"), meta=str(folder / "meta.pkl"), characters="", name="fine-name")
    values.update(change)
    before = sorted(p.name for p in ctx.weights.iterdir())
    with pytest.raises(gr.Error, match=words):
        _upload(ctx, values["ckpt"], values["meta"], values["characters"], values["name"])
    assert sorted(p.name for p in ctx.weights.iterdir()) == before


def test_a_file_over_the_cap_is_refused_before_it_is_read(ctx, files, monkeypatch):  # noqa: F811
    folder, _ = files
    small = AppContext(limits=Limits(max_model_upload_bytes=1000), weights=ctx.weights)
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load ran on an oversized upload"))
    with pytest.raises(gr.Error, match="(?i)this server converts checkpoints up to"):
        _upload(small, str(folder / "ckpt.pt"), str(folder / "meta.pkl"), "", "too-big")


def test_a_busy_server_refuses_the_conversion_it_cannot_hold(ctx, files):  # noqa: F811
    folder, _ = files
    tight = AppContext(limits=Limits(), weights=ctx.weights, budget=MemoryBudget(1024, "test"))
    with pytest.raises(gr.Error, match="(?i)converting this checkpoint needs about"):
        _upload(tight, str(folder / "ckpt.pt"), str(folder / "meta.pkl"), "", "no-room")
    assert not (ctx.weights / "no-room").exists()


def test_a_converted_checkpoint_is_charged_by_the_bytes_it_writes(ctx, files):  # noqa: F811
    """A few KB of stride-0 tensors declaring millions of parameters became a checkpoint of tens of MB charged at
    the upload's size: the disk quota and the memory budget now see the declared shape before it is converted."""
    folder, _ = files
    args = {**model_args(False), "n_layer": 4, "n_embd": 256}
    with torch.device("meta"):
        shapes = {key: tensor.shape for key, tensor in NanoGPT(**args).state_dict().items()}
    torch.save({"model": {key: torch.zeros(()).expand(shape) for key, shape in shapes.items()}, "model_args": args,
                "iter_num": 1, "best_val_loss": torch.tensor(2.0), "config": {}}, folder / "wide.pt")
    small_upload = (folder / "wide.pt").stat().st_size
    quota = AppContext(limits=Limits(max_runs_bytes=5_000_000), weights=ctx.weights)
    with pytest.raises(gr.Error, match=r"(?i)would take about 12,\d{3},\d{3} bytes and this server keeps at most 20 "
                                       r"visitor runs in 5,000,000 bytes"):
        _upload(quota, str(folder / "wide.pt"), str(folder / "meta.pkl"), "", "wide")
    assert small_upload < 200_000 and not (ctx.weights / "wide").exists()
    tight = AppContext(limits=Limits(), weights=ctx.weights, budget=MemoryBudget(20 * 2**20, "test"))
    with pytest.raises(gr.Error, match="(?i)converting this checkpoint needs about .*its declared shape is too large"):
        _upload(tight, str(folder / "wide.pt"), str(folder / "meta.pkl"), "", "wide")
    assert tight.budget.reserved == 0 and not (ctx.weights / "wide").exists()
    _upload(ctx, str(folder / "wide.pt"), str(folder / "meta.pkl"), "", "wide")
    written = sum(p.stat().st_size for p in (ctx.weights / "wide").iterdir())
    charged = admission.checkpoint_bytes(checkpoints.read_config(ctx.weights / "wide"))
    assert written > 100 * small_upload and written <= charged < written + 128 * 1024
