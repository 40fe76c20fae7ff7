"""The loop (train.py), the run around it (run.py), the presets (presets.py) and the train CLI (cli/train.py)."""

import json
import subprocess
import sys

import pytest
import torch
from conftest import REPO

from playground.cli import train as train_cli
from playground.config import ConfigError, Limits, ModelConfig, TrainConfig
from playground.data import CorpusError, TokenIdsDataset
from playground.model import GPT
from playground.presets import TRAIN_PRESETS
from playground.run import PROBE_TEXT, RunRequest, prepare_run, probe_attention, run_training
from playground.train import TrainingError, TrainResult, train

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
    code = train_cli.main(["--preset", "tiny", "--layers-num", "1", "--embedding-dim", "16", "--heads-num", "2",
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
    code = train_cli.main(["--heads-num", "3", "--embedding-dim", "16", "--corpus", str(tmp_path / "none.txt"),
                              "--weights-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and "Traceback" not in err


def test_cli_prints_a_line_per_evaluation_above_the_progress_bar(tmp_path, shakespeare_text, capsys):
    code = train_cli.main(["--layers-num", "1", "--embedding-dim", "16", "--heads-num", "2", "--context-size", "16",
                           "--batch-size", "4", "--steps", "4", "--eval-interval", "2", "--eval-batches", "1",
                           "--run-name", "bar", "--weights-dir", str(tmp_path), "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 0 and err.startswith("training bar: ")
    assert "step 2/4: train loss " in err and "step 4/4: train loss " in err and "4/4 [" in err  # tqdm's bar


def test_train_module_runs_the_cli_and_keeps_its_flags():
    """``python -m playground.train`` is the library module with a two-line entry point into cli/train.py."""
    result = subprocess.run([sys.executable, "-m", "playground.train", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m playground.train")
    for flag in ("--preset {gpu,small,tiny}", "--layers-num", "--use-bias, --no-use-bias", "--checkpoint-interval",
                 "--corpus", "--run-name", "--weights-dir", "--resume", "--threads"):
        assert flag in result.stdout


def test_cli_flags_lay_over_the_preset():
    args = train_cli.build_parser().parse_args(["--preset", "gpu", "--layers-num", "3", "--steps", "7"])
    request = train_cli.request_from_args(args)
    gpu = TRAIN_PRESETS["gpu"]
    assert request.run_name == "gpu" and request.model == {**gpu.model.to_dict(), "layers_num": 3}
    assert request.train.steps == 7 and request.train.batch_size == gpu.train.batch_size
    assert request.train.device == "auto"  # the gpu preset's cuda only when --device asks for it


@pytest.mark.parametrize("name", sorted(TRAIN_PRESETS))
def test_every_preset_is_a_model_the_config_accepts(name):
    preset = TRAIN_PRESETS[name]
    config = ModelConfig(vocabulary_size=65, **preset.model.to_dict())
    assert config.parameter_count() > 0 and preset.train.steps > preset.train.warmup_steps


def test_callbacks_read_the_loops_own_result_as_it_goes():
    """train() keeps its TrainResult up to date before on_step: what run.py's mid-run checkpoints record."""
    data = TokenIdsDataset(torch.randint(0, 32, (2000,), generator=torch.Generator().manual_seed(0)), 8)
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocabulary_size=32, context_size=8, embedding_dim=16, heads_num=2, layers_num=1))
    live = TrainResult(steps_done=0, stopped=False)
    seen = []

    def on_step(step, metrics):
        seen.append((live.steps_done, len(live.train_loss), [s for s, _ in live.val_loss], live.eval_seconds > 0,
                     live.tokens_per_second == metrics.tokens_per_second))

    result = train(model, quick(steps=4, eval_interval=2), data, data, on_step=on_step, result=live)
    assert result is live and result.steps_done == 4 and not model.training
    assert seen == [(1, 1, [], False, True), (2, 2, [2], True, True), (3, 3, [2], True, True),
                    (4, 4, [2, 4], True, True)]


def test_a_mid_run_checkpoint_records_the_run_so_far(tmp_path, shakespeare_text):
    run = prepare_run(RunRequest("m", SMALL, quick(steps=20, checkpoint_interval=10),
                                 corpus_text=shakespeare_text[:5000], weights_dir=tmp_path))
    records = {}

    def on_step(step, metrics):
        if step == 11:  # the checkpoint of step 10 is on disk
            records["mid"] = json.loads((tmp_path / "m" / "training.json").read_text())

    run_training(run, on_step=on_step)
    mid = records["mid"]
    assert mid["steps_done"] == 10 and [s for s, _ in mid["train_loss"]] == list(range(1, 11))
    assert [s for s, _ in mid["val_loss"]] == [10] and mid["tokens_per_second"] > 0
    assert not mid["stopped_early"] and mid["steps_planned"] == 20


def test_a_run_reports_samples_and_probes_and_leaves_the_mode_alone(tmp_path, shakespeare_text):
    run = prepare_run(RunRequest("p", SMALL, quick(steps=10, eval_interval=5, sample_interval=5),
                                 corpus_text=shakespeare_text[:5000], weights_dir=tmp_path))
    samples, probes, modes = [], [], []
    run_training(run, on_step=lambda step, metrics: modes.append(run.model.training),
                 on_sample=lambda step, text: samples.append((step, text)), on_probe=probes.append)
    assert [step for step, _ in samples] == [5, 10] and all(len(text) == 120 for _, text in samples)
    assert [p.step for p in probes] == [0, 5, 10]
    assert probes[-1].tokens == list(PROBE_TEXT[:16]) and probes[-1].weights.shape == (1, 2, 16, 16)
    assert all(modes)  # sampling and probing mid-run never left the model in eval mode for the next step


def test_probe_attention_keeps_the_known_characters_and_the_mode(tmp_path):
    run = prepare_run(RunRequest("q", SMALL, quick(), corpus_text="abc \n" * 500, weights_dir=tmp_path))
    run.model.train()
    snapshot = probe_attention(run, "a b?c", step=3)
    assert snapshot.step == 3 and snapshot.tokens == list("a bc") and run.model.training
    torch.testing.assert_close(snapshot.weights.sum(-1), torch.ones(1, 2, 4))  # each row of weights sums to 1
    assert probe_attention(run, "XYZ", step=3) is None
