"""Learning curves kept and compared: each run records validation loss by step and by wall time, a resumed run's
times go on from its earlier ones, and the Train tab overlays earlier runs' curves (curves.py, train_tab)."""

from __future__ import annotations

import functools
import json
import re
import shutil

import gradio as gr
import pytest
from test_train import SMALL, quick

from playground.config import Limits
from playground.training import curves
from playground.training.run import RunRequest, prepare_run, run_training
from playground.ui.common import AppContext, friendly
from playground.ui.train_tab import compare_curves


def _record(folder, name):
    return json.loads((folder / name / "training.json").read_text())


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, shakespeare_text):
    folder = tmp_path_factory.mktemp("curves")
    text = shakespeare_text[:5000]
    run_training(prepare_run(RunRequest("first", SMALL, quick(steps=20), corpus_text=text, weights_dir=folder)))
    (folder / "first-session.json").write_text(json.dumps(_record(folder, "first")))
    run_training(prepare_run(RunRequest("first", SMALL, quick(steps=30), corpus_text=text, resume=True,
                                        weights_dir=folder)))
    run_training(prepare_run(RunRequest("second", SMALL, quick(steps=20, learning_rate=1e-2, optimizer="muon"),
                                        corpus_text=text, weights_dir=folder)))
    return folder


def test_each_evaluation_records_its_time_and_a_resumed_run_goes_on_from_its_earlier_time(two_runs):
    record = _record(two_runs, "first")
    assert [s for s, _ in record["val_seconds"]] == [s for s, _ in record["val_loss"]] == [10, 20, 30]
    times = [t for _, t in record["val_seconds"]]
    assert times == sorted(times) and times[0] > 0
    first_session = json.loads((two_runs / "first-session.json").read_text())
    assert times[:2] == [t for _, t in first_session["val_seconds"]]  # kept as recorded
    assert times[2] > first_session["wall_seconds"]  # the resumed session's times go on from the first's
    assert record["wall_seconds"] > first_session["wall_seconds"]


def test_a_curve_reads_back_with_what_the_run_was(two_runs):
    curve = curves.read_curve("second", two_runs)
    assert [s for s, _, _ in curve.val] == [10, 20] and not curve.seconds_estimated
    assert "muon, lr 0.01 (cosine), batch 8" in curve.label and re.search(r" · [\d,.]+M? parameters$", curve.label)
    assert len(curve.train) == 20
    assert curves.runs_with_curves(two_runs) == ["first", "second"]


def test_a_legend_counts_a_small_models_parameters_in_full():
    training = {"train_config": {"optimizer": "adamw", "learning_rate": 0.01, "batch_size": 4}}
    # a run from before the decay was a choice trained with cosine
    assert curves.describe("toy-1", training, 5_168) == "toy-1 · adamw, lr 0.01 (cosine), batch 4 · 5,168 parameters"
    linear = {"train_config": {**training["train_config"], "learning_rate_decay": "linear"}}
    assert "adamw, lr 0.01 (linear), batch 4" in curves.describe("toy-2", linear, 5_168)
    assert curves.describe("big", {}, 10_745_088) == "big · 10.7M parameters"


def test_overfitting_is_said_when_validation_rises_while_training_falls():
    train = [[step, 3.0 - step / 250] for step in range(1, 501)]  # falling throughout: 2.996 -> 1.0
    rising = [[100, 2.2], [200, 2.0], [300, 2.1], [400, 2.3], [500, 2.6]]
    note = curves.overfitting_note(train, rising)
    assert note.startswith("Validation loss has risen from 2.000 at step 200 to 2.600 at step 500 while the "
                           "training loss kept falling (2.238 to 1.038, each the mean of 20 steps)")
    assert "(overfitting)" in note
    assert "from 2.000 at step 200 to 2.300 at step 400" in curves.overfitting_note(train, rising[:4])
    assert curves.overfitting_note(train, [[100, 2.2], [200, 2.0], [300, 2.03], [400, 2.04]]) == ""  # within noise
    assert curves.overfitting_note(train, [[100, 2.2], [200, 2.1], [300, 2.0], [400, 2.3]]) == ""  # one rise only
    both_rising = [[step, 1.0 + step / 250] for step in range(1, 501)]  # diverging, not memorising
    assert curves.overfitting_note(both_rising, rising) == ""
    assert curves.overfitting_note(train, rising[:2]) == ""


def test_an_older_record_without_times_is_spread_over_its_wall_time(two_runs):
    record = _record(two_runs, "second")
    del record["val_seconds"]
    (two_runs / "second" / "training.json").write_text(json.dumps(record))
    try:
        curve = curves.read_curve("second", two_runs)
        assert curve.seconds_estimated
        assert curve.val[-1][2] == pytest.approx(record["wall_seconds"], abs=0.01)
    finally:
        (two_runs / "second" / "training.json").write_text(json.dumps({**record, "val_seconds": []}))


def test_thinning_keeps_the_last_point():
    points = [(i, 1.0 / i) for i in range(1, 1201)]
    kept = curves.thin(points, 400)
    assert len(kept) <= 401 and kept[0] == points[0] and kept[-1] == points[-1]
    assert curves.thin(points[:10], 400) == points[:10]


def test_the_train_tab_draws_earlier_runs_by_step_or_by_seconds(two_runs):
    ctx = AppContext(limits=Limits(), weights=two_runs)
    handler = functools.partial(friendly(compare_curves), ctx)
    figure, note = handler(["first", "second"], "steps", True)
    names = [trace.name for trace in figure.data if trace.showlegend is not False]
    assert len(names) == 2 and names[0].startswith("first") and names[1].startswith("second")
    assert list(figure.data[1].x) == [10, 20, 30]
    assert "Lowest last validation loss" in note
    figure, _ = handler(["first"], "seconds", True)
    assert list(figure.data[1].x) == [t for _, t in _record(two_runs, "first")["val_seconds"]]
    _, note = handler([], "steps", True)
    assert "Pick earlier runs" in note
    with pytest.raises(gr.Error, match="(?i)pick at most 5 earlier runs"):
        handler(["first"] * 6, "steps", True)
    with pytest.raises(gr.Error, match="(?i)x axis"):
        handler(["first"], "minutes", True)
    _, note = handler(["no-such-run"], "steps", True)
    assert "no-such-run has no recorded validation curve" in note
    with pytest.raises(gr.Error, match="(?i)not allowed"):
        handler(["../x"], "steps", True)


def test_runs_on_different_texts_are_drawn_but_not_ranked(two_runs, tmp_path):
    """A validation loss measured on the Sonnets does not beat one measured on Tiny Shakespeare: no "lowest"."""
    shutil.copytree(two_runs, tmp_path / "weights")
    first = curves.read_curve("first", tmp_path / "weights")
    assert first.corpus == curves.corpus_name(_record(two_runs, "first")["corpus"]["name"], 5000)
    record = _record(tmp_path / "weights", "second")
    record["corpus"] = {**record["corpus"], "name": "sonnets", "characters": 94_081}
    (tmp_path / "weights" / "second" / "training.json").write_text(json.dumps(record))
    _, note = functools.partial(friendly(compare_curves), AppContext(limits=Limits(), weights=tmp_path / "weights"))(
        ["first", "second"], "steps", True)
    assert note.startswith("These runs trained on different texts (") and "sonnets, 94,081 characters" in note
    assert "Lowest" not in note


def test_a_legend_names_the_recipe_and_the_size_for_a_saved_run_and_the_live_one_alike():
    assert curves.legend("my-run (this run, running)", "muon, lr 0.012 (linear), batch 32", 240_288) == \
        "my-run (this run, running) · muon, lr 0.012 (linear), batch 32 · 240,288 parameters"
    assert curves.legend("old", "", 0) == "old"  # nothing recorded: the name alone
    assert curves.describe("saved", {"train_config": {"optimizer": "adamw", "learning_rate": 0.004,
                                                      "batch_size": 32}}, 240_288) == \
        curves.legend("saved", "adamw, lr 0.004 (cosine), batch 32", 240_288)
