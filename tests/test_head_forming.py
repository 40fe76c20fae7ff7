"""Heads forming as a model trains: the run records every head's pattern scores at each probe snapshot into
training.json, and a head that the task needs becomes a previous-character head as training goes on."""

from __future__ import annotations

import json
import random

import pytest
import torch

from playground.config import TrainConfig
from playground.lens import head_scores
from playground.lens.head_forming import FORMING_PATTERNS, PREVIOUS_TOKEN_HEAD, formed_heads, series
from playground.training.presets import TRAIN_PRESETS
from playground.training.run import RunRequest, prepare_run, run_training

SMALL = dict(layers_num=1, heads_num=2, embedding_dim=16, context_size=16, dropout_rate=0.0, use_bias=False)


def alternating_pairs(length: int, seed: int = 0) -> str:
    """Runs of two random letters taking turns ("qmqmqmqm", then "dxdxdx"...): the next letter is the one before the
    current one, which the current letter alone cannot tell, so a head must learn to look one character back."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    text = ""
    while len(text) < length:
        a, b = rng.sample(letters, 2)
        text += (a + b) * rng.randrange(4, 10)
    return text[:length]


def test_the_scores_rules_on_hand_made_weights():
    T = 4
    previous = torch.zeros(1, 1, T, T)
    previous[0, 0, 0, 0] = 1.0
    previous[0, 0, torch.arange(1, T), torch.arange(T - 1)] = 1.0  # every query on the character before it
    even = torch.ones(T, T).tril()
    even = (even / even.sum(1, keepdim=True))[None, None]
    assert float(head_scores.previous_token_score(previous)[0]) == 1.0
    assert float(head_scores.spread_score(previous)[0]) == 0.0
    assert float(head_scores.spread_score(even)[0]) == pytest.approx(1.0)
    ids = torch.tensor([[3, 5, 3, 5]])  # "abab": positions 2 and 3 have an earlier copy, 2 and 1 back
    assert float(head_scores.same_token_score(previous, ids)[0]) == 0.0
    assert float(head_scores.same_token_score(even, ids)[0]) == pytest.approx((1 / 3 + 1 / 4) / 2)


def test_the_tiny_preset_snapshots_every_25_steps():
    assert TRAIN_PRESETS["tiny"].train.probe_interval == 25
    with pytest.raises(ValueError, match="probe_interval"):
        TrainConfig(probe_interval=-1)


def test_a_run_records_every_heads_scores_and_the_step_a_previous_character_head_forms(tmp_path):
    config = TrainConfig(batch_size=16, steps=150, learning_rate=1e-2, warmup_steps=5, eval_interval=50,
                         eval_batches=2, checkpoint_interval=1000, sample_interval=1000, seed=0, probe_interval=10)
    run = prepare_run(RunRequest("f", SMALL, config, corpus_text=alternating_pairs(6000), weights_dir=tmp_path))
    watched = []
    run_training(run, on_probe=watched.append)
    record = json.loads((tmp_path / "f" / "training.json").read_text())
    snapshots = record["head_scores"]
    assert [s["step"] for s in snapshots] == list(range(0, 151, 10))  # step 0, then every 10 (evaluations among them)
    assert [s.scores for s in watched] == snapshots  # the Train tab gets the same scores as it goes
    for snapshot in snapshots:
        for pattern in FORMING_PATTERNS:
            assert len(snapshot[pattern]) == 1 and len(snapshot[pattern][0]) == 2
    steps, _ = series(snapshots, "previous token", 0, 0)
    best = max(range(2), key=lambda head: snapshots[-1]["previous token"][0][head])
    _, scores = series(snapshots, "previous token", 0, best)
    assert scores[0] < 0.2 and scores[-1] >= PREVIOUS_TOKEN_HEAD  # it had to learn to look one back, and did
    formed = record["previous_token_heads"]
    assert {"layer": 0, "head": best} in [{"layer": f["layer"], "head": f["head"]} for f in formed]
    step = next(f["step"] for f in formed if f["head"] == best)
    assert scores[steps.index(step)] >= PREVIOUS_TOKEN_HEAD > scores[steps.index(step) - 1]


def test_a_resumed_run_goes_on_with_its_scores(tmp_path):
    text = alternating_pairs(3000)
    config = TrainConfig(batch_size=8, steps=20, learning_rate=3e-3, warmup_steps=2, eval_interval=10,
                         eval_batches=2, checkpoint_interval=1000, sample_interval=1000, seed=0, probe_interval=5)
    run_training(prepare_run(RunRequest("r", SMALL, config, corpus_text=text, weights_dir=tmp_path)))
    more = TrainConfig(**{**config.to_dict(), "steps": 30})
    run_training(prepare_run(RunRequest("r", SMALL, more, corpus_text=text, resume=True, weights_dir=tmp_path)))
    record = json.loads((tmp_path / "r" / "training.json").read_text())
    assert [s["step"] for s in record["head_scores"]] == list(range(0, 31, 5))


def test_formed_heads_takes_the_first_snapshot_at_the_threshold():
    def snapshot(step, scores):
        return {"step": step, "previous token": [scores]}

    snapshots = [snapshot(0, [0.1, 0.1]), snapshot(25, [0.1, 0.35]), snapshot(50, [0.31, 0.2]),
                 snapshot(75, [0.5, 0.4])]
    assert formed_heads(snapshots) == [{"layer": 0, "head": 1, "step": 25}, {"layer": 0, "head": 0, "step": 50}]


def test_a_long_run_widens_its_probe_interval_to_keep_its_snapshots_bounded(tmp_path, monkeypatch):
    from playground.training import run as run_module

    monkeypatch.setattr(run_module, "MAX_PROBE_SNAPSHOTS", 4)
    config = TrainConfig(batch_size=4, steps=40, learning_rate=3e-3, warmup_steps=2, eval_interval=40,
                         eval_batches=1, checkpoint_interval=1000, sample_interval=1000, seed=0, probe_interval=1)
    run_training(prepare_run(RunRequest("b", SMALL, config, corpus_text=alternating_pairs(2000),
                                        weights_dir=tmp_path)))
    record = json.loads((tmp_path / "b" / "training.json").read_text())
    assert [s["step"] for s in record["head_scores"]] == [0, 10, 20, 30, 40]  # every 10 steps, not every step


def test_a_snapshots_scores_are_head_scores_own_rules():
    """One place for each rule: the induction score is the Attention tab's table's, and the previous-token and
    first-token scores on the probe sentence are looks_over_text's one-back and first-position shares."""
    from test_circuits import tiny

    from playground.lens.head_forming import INDUCTION_SEQUENCES, snapshot_scores

    model = tiny(True)
    ids = torch.tensor([1, 5, 2, 7, 7, 3, 0, 12, 5, 4, 9])
    with torch.no_grad():
        weights = torch.stack([w[0] for w in model(ids.view(1, -1), return_attention=True).attention_weights])
    record = snapshot_scores(model, ids, weights, step=25)
    table = {(s.pattern, s.layer, s.head): s.score for s in head_scores.score_heads(model, INDUCTION_SEQUENCES)}
    for layer in range(2):
        for head in range(4):
            assert record["induction"][layer][head] == pytest.approx(table["induction", layer, head], abs=1e-4)
            looks = {(look.kind, look.what): look.share for look in head_scores.looks_over_text(weights[layer, head],
                                                                                              ids)}
            assert record["previous token"][layer][head] == pytest.approx(looks["distance", 1], abs=1e-4)
            assert record["first token"][layer][head] == pytest.approx(looks["first", 0], abs=1e-4)
    assert record["step"] == 25 and set(record) == {"step", *FORMING_PATTERNS}
