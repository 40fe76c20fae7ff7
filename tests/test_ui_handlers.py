"""Tab handlers called directly, without a browser or a server."""

from __future__ import annotations

import csv
import json
import re
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import numpy as np
import pytest

from playground import checkpoints
from playground.config import Limits
from playground.ui import attention_tab, sample_tab, tokenize_tab, train_tab
from playground.ui.common import AppContext
from playground.walkthrough import STEP_TITLES, journey_preset


@pytest.fixture
def ctx(tiny_weights):
    return AppContext(limits=Limits(), weights=tiny_weights)


def test_tokenize_unknown_characters_are_highlighted_not_fatal(ctx):
    chips, ids, decoded, stats, table = tokenize_tab.tokenize(ctx, "a∑b", "loaded checkpoint", "shakespeare-char")
    assert chips.count("tok-unknown") == 1 and ids == "[39, 40]" and decoded == "ab"
    assert "'∑' at 1" in stats
    assert table["headers"][3] == "count in Tiny Shakespeare" and len(table["data"]) == 65


def test_tokenize_corpus_vocabulary_counts(ctx):
    *_, table = tokenize_tab.tokenize(ctx, "e", "corpus (Tiny Shakespeare)", None)
    counts = {row[1]: row[3] for row in table["data"]}
    assert counts["e"] == 94611 and counts["\n"] == 40000


def test_attention_every_step_and_notice_of_truncation(ctx):
    long_text = "To be, or not to be, that is the question: whether 'tis nobler"
    for step in STEP_TITLES:
        heading, a, b, c, whatif, *_ = attention_tab.attention_step(
            ctx, "trained checkpoint", "shakespeare-char", 0, 1, 0, 16, 8, "journey", long_text, True, True, 1.0,
            False, step, None)
        assert a is not None
        assert (b is not None) == (step == STEP_TITLES[1])
    assert "30 characters were dropped (context_size is 32)" in heading


def test_attention_unknown_characters_are_highlighted(ctx):
    result = attention_tab.attention_step(ctx, "trained checkpoint", "shakespeare-char", 0, 0, 0, 16, 8, "journey",
                                          "hi ∑", True, True, 1.0, False, STEP_TITLES[0], None)
    assert "tok-unknown" in result[-1] and "not in the vocabulary" in result[0]


def test_attention_random_and_preset_sources(ctx):
    random = attention_tab.attention_step(ctx, "random weights", None, 0, 0, 5, 12, 4, "journey", "abcabc", False,
                                          False, 2.0, False, STEP_TITLES[5], 2)
    assert "T = 6 tokens · C = 12 · d_k = 4" in random[0]
    assert "With the mask off" in random[4]
    with pytest.raises(ValueError, match="not divisible|unknown preset"):
        attention_tab.attention_step(ctx, "textbook preset", None, 0, 0, 0, 16, 8, "nope", "", True, True, 1.0,
                                     False, STEP_TITLES[0], None)


def test_attention_export_lands_where_gradio_serves_files(ctx, monkeypatch):
    """With a user's defaults (no PLAYGROUND_CACHE_DIR, no GRADIO_TEMP_DIR) the files go to Gradio's temp space,
    which a launched app serves without allowed_paths, and read back to the stage's numbers."""
    monkeypatch.delenv("PLAYGROUND_CACHE_DIR", raising=False)
    monkeypatch.delenv("GRADIO_TEMP_DIR", raising=False)
    paths = [Path(p) for p in attention_tab.export_step(ctx, "textbook preset", None, 0, 0, 0, 16, 8, "journey", "",
                                                        True, True, 1.0, False, STEP_TITLES[1])]
    try:
        upload_folder = gr.utils.get_upload_folder()
        assert [p.name for p in paths] == [f"step2_{m}.{ext}" for m in "QKV" for ext in ("csv", "npy")]
        for path in paths:
            assert path.resolve().is_relative_to(Path(upload_folder).resolve())
            assert gr.utils.is_allowed_file(path, blocked_paths=[], allowed_paths=[],
                                            created_paths=[upload_folder]) == (True, "created")
        trace = journey_preset().trace()
        for (csv_path, npy_path), expected in zip(zip(paths[::2], paths[1::2]), (trace.q, trace.k, trace.v)):
            rows = list(csv.reader(csv_path.read_text(encoding="utf-8").splitlines()))
            assert rows[0] == ["", "d0", "d1"] and [row[0] for row in rows[1:]] == trace.tokens
            assert np.array_equal(np.array([[np.float32(v) for v in row[1:]] for row in rows[1:]]), expected.numpy())
            assert np.array_equal(np.load(npy_path, allow_pickle=False), expected.numpy())
    finally:
        shutil.rmtree(paths[0].parent, ignore_errors=True)


def test_move_step_stays_in_range():
    assert attention_tab.move_step(STEP_TITLES[0], -1) == STEP_TITLES[0]
    assert attention_tab.move_step(STEP_TITLES[6], 1) == STEP_TITLES[6]
    assert attention_tab.move_step(STEP_TITLES[2], 1) == STEP_TITLES[3]


def test_sample_then_inspect_a_position(ctx):
    outputs = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 12, 1.0, 5, 0.9, 3, False, True))
    text, coloured, stats, state = outputs[-1]
    assert len(text) == len("ROMEO:") + 12 and coloured.count("<span") == 12
    top, attention, note = sample_tab.inspect_position(ctx, state, 4, 1, 1)
    assert sum(p > 0 for p in top.data[0].y) == 5 and abs(sum(attention.data[0].y) - 1) < 1e-4
    assert "saw the last 10 characters" in note
    with pytest.raises(ValueError, match="position must be at most 11"):
        sample_tab.inspect_position(ctx, state, 12, 0, 0)
    with pytest.raises(ValueError, match="Generate some text first"):
        sample_tab.inspect_position(ctx, {}, 0, 0, 0)


def test_train_estimate_and_presets(tmp_path):
    assert "parameters" in train_tab.estimate(2, 4, 128, 64, 32, 1000)
    assert "not divisible" in train_tab.estimate(2, 3, 128, 64, 32, 1000)
    # the estimate's calibration agrees with the presets' descriptions: tiny about a minute, small about half an hour
    tiny = train_tab.preset_values("tiny")
    assert re.search(r"about (4\ds|5\ds|1m \d\ds) on a 2-core CPU", train_tab.estimate(*tiny[:6]))
    small = train_tab.preset_values("small")
    assert re.search(r"about (2\dm|3\dm) \d\ds", train_tab.estimate(*small[:6]))
    assert "about 1h 43m" in train_tab.estimate(4, 4, 192, 128, 32, 15_000)  # hours past 60 minutes
    assert train_tab.preset_values("small", tmp_path)[-1] == "small-1"  # a fresh run name: never someone's run
    (tmp_path / "small-1").mkdir()
    assert train_tab.preset_values("small", tmp_path)[-1] == "small-2"
    text = train_tab.estimate(4, 4, 192, 128, 32, 15_000, limits=Limits(max_train_seconds=1800))
    assert re.search(r"needs about \d+\.\d MiB of memory · ⚠️ over this server's 30m 00s limit", text)
    with pytest.raises(ValueError, match="unknown preset"):
        train_tab.preset_values("huge")


# ------------------------------------------------------------------------------------ train: whose run it is
RUN = [1, 1, 8, 8, 2, 400, 3e-3, 0, 0.0, 0, "cpu", "pasted text", None, "to be or not to be\n" * 20]


def session(name):
    return SimpleNamespace(session_hash=name)  # what identify reads of a gr.Request


@pytest.fixture
def train_ctx(tmp_path):
    context = AppContext(limits=Limits(max_steps=500), weights=tmp_path, admin_token="the-space-owner")
    yield context
    context.jobs.stop()
    context.jobs.wait(60)


def test_a_run_belongs_to_the_browser_that_started_it(train_ctx):
    ctx = train_ctx
    text = train_tab.start_run(ctx, *RUN, "browser-run", False, "", "token-of-browser-a", session("s1"))[0]
    assert "· your run ·" in text
    # another visitor sees whose it is not, and cannot stop it
    other = train_tab.poll_status(ctx, 0, 0, 0, [], "", "token-of-browser-b", session("s2"))[0]
    assert "another visitor's run: it ends by itself at step 400 (or after 1h 00m" in other
    for args in [("", "token-of-browser-b", session("s2")), ("", None, session("s1")),
                 ("token-of-browser-b", "token-of-browser-a", session("s1"))]:
        with pytest.raises(RuntimeError, match="^this run belongs to another visitor; it ends by itself at step "
                                               "400 .* or when its owner stops it$"):
            train_tab.stop_run(ctx, *args)
    status = ctx.jobs.status()
    assert status.active and "token-of-browser-a" not in repr(status) and checkpoints.owner_hash(
        "token-of-browser-a") not in repr(status)
    # the same browser after a reload (a new session, its token back from localStorage) owns it still
    assert "· your run ·" in train_tab.poll_status(ctx, 0, 0, 0, [], "", "token-of-browser-a", session("s3"))[0]
    train_tab.stop_run(ctx, "", "token-of-browser-a", session("s3"))
    assert ctx.jobs.wait(60).state == "stopped"
    assert json.loads((ctx.weights / "browser-run" / "training.json").read_text())["owner"] == \
        checkpoints.owner_hash("token-of-browser-a")


def test_an_api_client_is_known_by_its_session_and_the_admin_token_stops_any_run(train_ctx):
    ctx = train_ctx
    train_tab.start_run(ctx, *RUN, "api-run", False, "", None, session("client-1"))
    deadline = time.monotonic() + 60
    while ctx.jobs.status().step == 0 and time.monotonic() < deadline:  # a step, so it leaves a checkpoint
        time.sleep(0.05)
    with pytest.raises(RuntimeError, match="belongs to another visitor"):
        train_tab.stop_run(ctx, "", None, session("client-2"))
    train_tab.stop_run(ctx, "", None, session("client-1"))  # the Client that started it
    assert ctx.jobs.wait(60).state == "stopped"
    train_tab.start_run(ctx, *RUN, "api-run-2", False, "", None, session("client-1"))
    with pytest.raises(ValueError, match="the owner or admin token is 201 characters long"):
        train_tab.stop_run(ctx, "x" * 201, None, session("client-2"))
    train_tab.stop_run(ctx, "the-space-owner", None, session("client-2"))
    assert ctx.jobs.wait(60).state == "stopped"
    # replacing needs the box ticked, and ownership
    with pytest.raises(ValueError, match='already exists: tick "replace it"'):
        train_tab.start_run(ctx, *RUN, "api-run", False, "", None, session("client-1"))
    with pytest.raises(ValueError, match="belongs to another visitor: only its owner can replace it"):
        train_tab.start_run(ctx, *RUN, "api-run", True, "", None, session("client-2"))
    assert "your run" in train_tab.start_run(ctx, *RUN, "api-run", True, "", None, session("client-1"))[0]


def test_pasted_text_is_capped_in_utf8_bytes_and_an_upload_is_your_uploaded_file(train_ctx, tmp_path):
    """4.8M characters of CJK text are 14.4 MB: the 5 MB cap refuses them (it counted characters before)."""
    ctx = AppContext(limits=Limits(), weights=train_ctx.weights)
    pasted = "中" * 4_800_000
    with pytest.raises(ValueError, match="The pasted text is 14,400,000 bytes of UTF-8; this server's limit is "
                                         "5,000,000 bytes"):
        train_tab.start_run(ctx, *RUN[:13], pasted, "cjk", False, "", None, session("s"))
    upload = tmp_path / "notes.txt"
    upload.write_text("to be or not to be, that is the question\n" * 40, encoding="utf-8")
    try:
        text = train_tab.start_run(ctx, *RUN[:11], "uploaded .txt", str(upload), None, "uploaded", False, "", None,
                                   session("s"))[0]
        assert "training on your uploaded file" in text and "corpus your uploaded file (1,640 characters)" in text
    finally:
        ctx.jobs.stop()
        ctx.jobs.wait(60)
