import json

import pytest

from playground import train as train_module
from playground.config import ConfigError, Limits, TrainConfig
from playground.data import CorpusError
from playground.train import RunRequest, TrainingError, prepare_run, run_training

SMALL = dict(layers_num=1, heads_num=2, embedding_dim=16, context_size=16, dropout_rate=0.0, use_bias=False)


def quick(steps=20, **changes) -> TrainConfig:
    values = dict(batch_size=8, steps=steps, learning_rate=3e-3, warmup_steps=2, eval_interval=10, eval_batches=2,
                  checkpoint_interval=1000, sample_interval=1000, seed=0)
    return TrainConfig(**{**values, **changes})


def test_training_on_a_tiny_corpus_lowers_the_loss(tmp_path, shakespeare_text):
    request = RunRequest("t", SMALL, quick(steps=60), corpus_text=shakespeare_text[:20000], weights_dir=tmp_path)
    run = prepare_run(request)
    steps_seen = []
    result = run_training(run, on_step=lambda step, metrics: steps_seen.append(step))
    assert steps_seen == list(range(1, 61))
    first = sum(loss for _, loss in result.train_loss[:5]) / 5
    last = sum(loss for _, loss in result.train_loss[-5:]) / 5
    assert last < first - 0.5
    record = json.loads((tmp_path / "t" / "training.json").read_text())
    assert record["steps_done"] == 60 and [s for s, _ in record["val_loss"]] == [10, 20, 30, 40, 50, 60]
    assert record["corpus"]["name"] == "pasted text" and record["tokens_per_second"] > 0


def test_should_stop_ends_early_and_keeps_a_checkpoint(tmp_path, shakespeare_text):
    run = prepare_run(RunRequest("s", SMALL, quick(steps=50), corpus_text=shakespeare_text[:5000],
                                 weights_dir=tmp_path))
    steps_done = []
    result = run_training(run, on_step=lambda step, metrics: steps_done.append(step),
                          should_stop=lambda: len(steps_done) >= 7)
    assert result.stopped and result.steps_done == 7
    assert json.loads((tmp_path / "s" / "training.json").read_text())["steps_done"] == 7


def test_resume_continues_the_step_count(tmp_path, shakespeare_text):
    text = shakespeare_text[:5000]
    run_training(prepare_run(RunRequest("r", SMALL, quick(steps=10), corpus_text=text, weights_dir=tmp_path)))
    resumed = prepare_run(RunRequest("r", SMALL, quick(steps=15), corpus_text=text, resume=True,
                                     weights_dir=tmp_path))
    assert resumed.start_step == 10
    result = run_training(resumed)
    assert result.steps_done == 15 and result.train_loss[0][0] == 11
    record = json.loads((tmp_path / "r" / "training.json").read_text())
    assert [s for s, _ in record["train_loss"]] == list(range(1, 16))


def test_resume_with_characters_the_model_lacks_is_refused(tmp_path):
    run_training(prepare_run(RunRequest("v", SMALL, quick(steps=2), corpus_text="abcdefgh " * 100,
                                        weights_dir=tmp_path)))
    with pytest.raises(CorpusError, match="the resumed model lacks: 'XYZ'"):
        prepare_run(RunRequest("v", SMALL, quick(steps=5), corpus_text="abcXYZ " * 100, resume=True,
                               weights_dir=tmp_path))


@pytest.mark.parametrize("request_changes,limits,error,match", [
    (dict(model={**SMALL, "heads_num": 3}), None, ConfigError, "not divisible by heads_num 3"),
    (dict(train=quick(steps=100)), Limits(max_steps=50), ConfigError, "steps 100 is above this server's limit of 50"),
    (dict(model={**SMALL, "embedding_dim": 512}), Limits(max_parameters=10_000), ConfigError, "parameters"),
    (dict(model={**SMALL, "context_size": 4000}), None, ConfigError, "context_size 4000 is above"),
    (dict(corpus_text="tiny text"), None, CorpusError, "too short for context_size 16"),
    (dict(run_name="../escape"), None, ValueError, "not allowed"),
])
def test_bad_runs_fail_before_anything_starts(tmp_path, request_changes, limits, error, match):
    base = dict(run_name="ok", model=SMALL, train=quick(), corpus_text="hello there " * 500, weights_dir=tmp_path)
    with pytest.raises(error, match=match):
        prepare_run(RunRequest(**{**base, **request_changes}), limits)
    assert not (tmp_path / "ok").exists()


def test_nan_loss_stops_with_a_message(tmp_path, monkeypatch, shakespeare_text):
    run = prepare_run(RunRequest("n", SMALL, quick(steps=5), corpus_text=shakespeare_text[:3000],
                                 weights_dir=tmp_path))
    original = run.model.forward

    def poisoned(*args, **kwargs):
        out = original(*args, **kwargs)
        if out.loss is not None:
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(run.model, "forward", poisoned)
    with pytest.raises(TrainingError, match="loss became nan at step 1"):
        run_training(run)


def test_cli_runs_a_few_steps_and_writes_training_json(tmp_path, shakespeare_text, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(shakespeare_text[:30000], encoding="utf-8")
    code = train_module.main(["--preset", "tiny", "--layers-num", "1", "--embedding-dim", "16", "--heads-num", "2",
                              "--context-size", "16", "--batch-size", "4", "--steps", "6", "--eval-interval", "3",
                              "--eval-batches", "1", "--corpus", str(corpus), "--run-name", "cli",
                              "--weights-dir", str(tmp_path / "w"), "--device", "cpu"])
    assert code == 0
    record = json.loads((tmp_path / "w" / "cli" / "training.json").read_text())
    assert record["steps_done"] == 6 and len(record["val_loss"]) == 2 and record["device"].startswith("CPU")
    assert "done: 6 steps" in capsys.readouterr().err
    card = (tmp_path / "w" / "cli" / "README.md").read_text()
    assert "python -m playground.train --preset tiny --layers-num 1" in card and "| steps | 6 of 6" in card


def test_cli_reports_bad_input_without_traceback(tmp_path, capsys):
    code = train_module.main(["--heads-num", "3", "--embedding-dim", "16", "--corpus", str(tmp_path / "none.txt"),
                              "--weights-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and "Traceback" not in err
