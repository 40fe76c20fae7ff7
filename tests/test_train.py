"""The loop (train.py), the run around it (run.py), the presets (presets.py) and the train CLI (cli/train.py)."""

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest
import torch
from conftest import REPO

from playground.budget import BudgetError
from playground.cli import train as train_cli
from playground.config import ConfigError, Limits, ModelConfig, TrainConfig
from playground.model.families import family_settings
from playground.model.gpt import GPT
from playground.text.data import CorpusError, TokenIdsDataset
from playground.training import estimates
from playground.training import run as run_module
from playground.training.estimates import step_seconds
from playground.training.loop import TrainingError, TrainResult, train
from playground.training.presets import TRAIN_PRESETS
from playground.training.probes import PROBE_TEXT, probe_attention
from playground.training.run import RunRequest, prepare_run, run_training

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
    # the passes over the text the run made, measured (the Train tab's figure before it is an estimate): 60 steps of
    # 8 windows of 16 characters over 20,000 characters
    assert record["passes_over_text"] == pytest.approx(60 * 8 * 16 / 20000, abs=0.005)


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
    with pytest.raises(ConfigError, match="^the run r has already done 10 steps; set steps above 10 to continue$"):
        prepare_run(RunRequest("r", SMALL, quick(steps=10), corpus_text=text, resume=True, weights_dir=tmp_path))
    assert not [note for note in resumed.notes if "keeps its own shape" in note or "another text" in note]
    other_text = prepare_run(RunRequest("r", SMALL, quick(steps=15), corpus_text=text[:4000], resume=True,
                                        weights_dir=tmp_path))
    assert ("'r' trained on pasted text (5,000 characters) until step 10: it goes on with the pasted text (4,000 "
            "characters), so its losses from here on measure another text") in other_text.notes
    other_text.release_memory()
    other_shape = prepare_run(RunRequest("r", {**SMALL, "layers_num": 4, "embedding_dim": 32}, quick(steps=15),
                                         corpus_text=text, resume=True, weights_dir=tmp_path))
    assert other_shape.model.config.layers_num == 1 and (
        "resuming r keeps its own shape: layers_num 1 (not 4), embedding_dim 16 (not 32); the settings asked for "
        "apply to how it trains on") in other_shape.notes  # the CLI's --preset small --resume on a tiny run
    other_shape.release_memory()
    result = run_training(resumed)
    assert result.steps_done == 15 and result.train_loss[0][0] == 11
    record = json.loads((tmp_path / "r" / "training.json").read_text())
    assert [s for s, _ in record["train_loss"]] == list(range(1, 16))


class TickingClock:
    """The loop's ``time``: each perf_counter() reading TICK seconds after the one before, so a step (one reading
    before it, one after) lasts exactly TICK, however busy the machine is."""

    TICK = 1 / 64  # s: exact in binary, so 32 steps are 0.5 s to the last bit

    def __init__(self):
        self.now = 0.0

    def perf_counter(self) -> float:
        self.now += self.TICK
        return self.now


def test_a_time_budget_ends_the_run_with_its_rate_decayed_and_a_resume_goes_on_from_its_clock(tmp_path,
                                                                                            shakespeare_text,
                                                                                            monkeypatch):
    """A 0.5 s budget ends a 20,000-step run at its 32nd step of 1/64 s: evaluated at its last step, the learning
    rate at its floor, training.json keeps the steps' seconds; a resume counts them against a larger budget, and a
    spent one is refused with what to raise. On the machine's own clock the steps a budget allowed depended on the
    load: under load one step took the whole 0.4 s budget the test had, and the run ended after a single step."""
    from playground.training import loop

    monkeypatch.setattr(loop, "time", TickingClock())
    text = shakespeare_text[:5000]
    config = quick(steps=20_000, eval_interval=10**5, time_budget_seconds=0.5, min_learning_rate_ratio=0.1)
    seen = []
    result = run_training(prepare_run(RunRequest("b", SMALL, config, corpus_text=text, weights_dir=tmp_path)),
                          on_step=lambda step, metrics: seen.append(metrics))
    assert result.budget_reached and not result.stopped and result.steps_done == 32
    assert result.step_seconds == 0.5 and seen[-2].progress == 31 / 32
    assert seen[-1].progress == 1.0 and seen[-1].val_loss is not None  # the last step is evaluated
    assert seen[-1].learning_rate == pytest.approx(config.learning_rate * 0.1, rel=0.05)
    assert all(0 <= a.progress <= b.progress <= 1 for a, b in zip(seen, seen[1:]))
    record = json.loads((tmp_path / "b" / "training.json").read_text())
    assert record["budget_reached"] and record["step_seconds"] == pytest.approx(0.5, abs=0.01)
    assert [s for s, _ in record["val_loss"]] == [32]
    with pytest.raises(ConfigError, match=r"b has already trained for 0\.5 s, its whole time budget of 0.5 s; "
                                          r"raise the time budget above 0\.5 s \(or set it to 0, for none\)"):
        prepare_run(RunRequest("b", SMALL, config, corpus_text=text, resume=True, weights_dir=tmp_path))
    longer = prepare_run(RunRequest("b", SMALL, replace(config, time_budget_seconds=1.0), corpus_text=text,
                                    resume=True, weights_dir=tmp_path))
    assert longer.step_seconds_before == pytest.approx(0.5, abs=0.01)
    seen_more = []
    more = run_training(longer, on_step=lambda step, metrics: seen_more.append(metrics))
    assert more.budget_reached and more.steps_done == 64 and more.step_seconds == pytest.approx(1.0, abs=0.01)
    assert seen_more[0].progress == pytest.approx(33 / 64, abs=0.01) and seen_more[-1].progress == 1.0
    assert json.loads((tmp_path / "b" / "training.json").read_text())["step_seconds"] == pytest.approx(1.0, abs=0.01)


def test_the_tiny_preset_is_a_minute_by_its_time_budget_whatever_the_machine():
    tiny = TRAIN_PRESETS["tiny"].train
    assert tiny.time_budget_seconds == 50 and "50 s of training steps" in TRAIN_PRESETS["tiny"].description
    shape = ModelConfig(vocabulary_size=65, **TRAIN_PRESETS["tiny"].model.to_dict())
    # a machine of the estimate's speed would need longer than the budget for the steps: the budget ends the run
    assert estimates.estimate_seconds(shape, tiny.batch_size, tiny.steps, "cpu", tiny.optimizer) > 50
    assert estimates.estimate_seconds(shape, tiny.batch_size, tiny.steps, "cpu", tiny.optimizer, 50.0) == 50.0


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
    (dict(corpus_text="tiny text"), None, CorpusError, "too short for context_size 16: .* to at most 8$"),
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
    # the same command again would start the run over: refused, as the Train tab does without "replace it"
    again = ["--preset", "toy", "--steps", "2", "--corpus", str(corpus), "--run-name", "cli", "--weights-dir",
             str(tmp_path / "w"), "--device", "cpu"]
    assert train_cli.main(again) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: {tmp_path / 'w' / 'cli'} already exists: pass --resume to continue it or --replace to start it "
        "over (what it holds is lost), or another --run-name such as cli-1")
    assert json.loads((tmp_path / "w" / "cli" / "training.json").read_text())["steps_done"] == 6
    assert train_cli.main([*again, "--replace"]) == 0
    assert json.loads((tmp_path / "w" / "cli" / "training.json").read_text())["steps_done"] == 2


def test_cli_offline_without_tiny_shakespeare_says_what_happened_and_what_to_do(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PLAYGROUND_TINY_SHAKESPEARE")  # offline (conftest), nothing cached: the Sonnets stand in
    code = train_cli.main(["--preset", "tiny", "--layers-num", "1", "--embedding-dim", "16", "--heads-num", "2",
                           "--context-size", "16", "--batch-size", "4", "--steps", "2", "--eval-interval", "2",
                           "--eval-batches", "1", "--run-name", "offline", "--weights-dir", str(tmp_path / "w"),
                           "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "note: offline and Tiny Shakespeare is not cached, so the built-in Sonnets are used (" in err
    assert "a model overfits it within a few hundred steps (validation loss climbs while training loss falls). " \
           "For Tiny Shakespeare, run this once online (it is downloaded and cached), or point " \
           "PLAYGROUND_TINY_SHAKESPEARE at a copy of tinyshakespeare.txt, or pass --corpus FILE" in err


def test_sigterm_ends_a_cli_run_after_its_step_with_a_checkpoint_and_its_card(tmp_path, shakespeare_text):
    """``timeout``, a container stopping or Ctrl-C: the run saves where it got to, its card beside it (a killed
    resumed run had lost its steps since the last periodic checkpoint, and its card)."""
    import signal
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(shakespeare_text[:30000], encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "playground.train", "--layers-num", "1", "--embedding-dim", "16", "--heads-num", "2",
         "--context-size", "16", "--batch-size", "4", "--steps", "20000", "--eval-interval", "20",
         "--eval-batches", "1", "--checkpoint-interval", "20000", "--time-budget-seconds", "0", "--corpus",
         str(corpus), "--run-name", "stopped", "--weights-dir", str(tmp_path / "w"), "--device", "cpu"],
        cwd=REPO, stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stderr:  # the first evaluation's line: it is training
            if "step 20/20000" in line:
                break
        process.send_signal(signal.SIGTERM)
        rest = process.communicate(timeout=120)[1]
    finally:
        process.kill()
    assert process.returncode == 0, rest
    assert "SIGTERM: stopping after this step and saving a checkpoint" in rest and "(stopped as asked)" in rest
    steps = json.loads((tmp_path / "w" / "stopped" / "training.json").read_text())["steps_done"]
    assert steps >= 20
    card = (tmp_path / "w" / "stopped" / "README.md").read_text()
    assert f"| steps | {steps} of 20000" in card


def test_cli_reports_bad_input_without_traceback(tmp_path, capsys):
    code = train_cli.main(["--heads-num", "3", "--embedding-dim", "16", "--corpus", str(tmp_path / "none.txt"),
                              "--weights-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error:") and "Traceback" not in err


@pytest.mark.parametrize("threads", ["-2", "0", "100000"])
def test_cli_refuses_threads_this_machine_does_not_have(tmp_path, capsys, threads):
    """--threads -2 raised torch's own error; 999 ran on 2 cores, 100 times slower."""
    assert train_cli.main(["--preset", "toy", "--threads", threads, "--weights-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (f"error: --threads must be from 1 to this machine's {os.cpu_count()} "
                                               f"cores, got {threads}")


def test_cli_refuses_a_batch_the_machines_memory_cannot_hold(tmp_path, capsys, monkeypatch):
    """A command-line run has no server budget: --batch-size 100000 grew to 24 GB until the kernel killed it."""
    monkeypatch.setattr(estimates, "available_memory", lambda: 512 * 2**20)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("to be or not to be " * 200, encoding="utf-8")
    assert train_cli.main(["--preset", "tiny", "--batch-size", "100000", "--corpus", str(corpus), "--weights-dir",
                           str(tmp_path / "w"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert re.fullmatch(r"error: training needs about [\d.]+ GiB .*, more than the 512.0 MiB free on CPU · \d "
                        r"threads? now; lower batch_size to at most [\d,]+ \(now 100,000\)", err), err
    assert not (tmp_path / "w").exists() or not any((tmp_path / "w").iterdir())  # refused before anything is written


def test_the_model_card_of_a_text_too_short_to_hold_out_says_so(tmp_path):
    """The card said 'first 90% trains, last 10% validates' of 'hello world', which trained and validated on all."""
    corpus = tmp_path / "hw.txt"
    corpus.write_text("hello world", encoding="utf-8")
    assert train_cli.main(["--preset", "toy", "--steps", "3", "--corpus", str(corpus), "--run-name", "hw",
                           "--weights-dir", str(tmp_path / "w"), "--device", "cpu"]) == 0
    card = (tmp_path / "w" / "hw" / "README.md").read_text()
    assert "too short to hold out 10%: it trains and validates on the whole text" in card
    assert "last 10%" not in card and "fixed batches of the whole text" in card
    assert "| shape | 1 layer, 2 heads, embedding 16" in card  # the toy preset: notebook 004's model
    assert "Notebook 004's attention-only model (2 heads" in card


def test_cli_prints_a_line_per_evaluation_above_the_progress_bar(tmp_path, shakespeare_text, capsys):
    code = train_cli.main(["--layers-num", "1", "--embedding-dim", "16", "--heads-num", "2", "--context-size", "16",
                           "--batch-size", "4", "--steps", "4", "--eval-interval", "2", "--eval-batches", "1",
                           "--run-name", "bar", "--weights-dir", str(tmp_path), "--device", "cpu",
                           "--time-budget-seconds", "0"])
    err = capsys.readouterr().err
    assert code == 0 and err.startswith("training bar: ")
    assert "step 2/4: train loss " in err and "step 4/4: train loss " in err and "4/4 [" in err  # tqdm's bar
    # with a time budget (the tiny preset's), the bar counts the schedule's percent, which the budget may end early
    code = train_cli.main(["--layers-num", "1", "--embedding-dim", "16", "--heads-num", "2", "--context-size", "16",
                           "--batch-size", "4", "--steps", "20000", "--eval-interval", "100000", "--eval-batches", "1",
                           "--run-name", "budget", "--weights-dir", str(tmp_path), "--device", "cpu",
                           "--time-budget-seconds", "0.5"])
    err = capsys.readouterr().err
    assert code == 0 and "100/100% [" in err and "step=" in err
    assert re.search(r"done: \d+ steps \(its 0.5 s time budget ended it\)", err)


def test_train_module_runs_the_cli_and_keeps_its_flags():
    """``python -m playground.train`` is the library module with a two-line entry point into cli/train.py."""
    result = subprocess.run([sys.executable, "-m", "playground.train", "--help"], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m playground.train")
    presets = "--preset {" + ",".join(sorted(TRAIN_PRESETS)) + "}"
    for flag in (presets, "--layers-num", "--use-bias, --no-use-bias", "--checkpoint-interval", "--corpus",
                 "--run-name", "--weights-dir", "--resume", "--threads"):
        assert flag in result.stdout


def test_cli_flags_lay_over_the_preset():
    args = train_cli.build_parser().parse_args(["--preset", "gpu", "--layers-num", "3", "--steps", "7"])
    request = train_cli.request_from_args(args)
    gpu = TRAIN_PRESETS["gpu"]
    assert request.run_name == "gpu" and request.model == {**gpu.model.to_dict(), "layers_num": 3}
    assert request.train.steps == 7 and request.train.batch_size == gpu.train.batch_size
    assert request.train.device == "auto"  # the gpu preset's cuda only when --device asks for it
    args = train_cli.build_parser().parse_args(["--learning-rate-decay", "cosine", "--min-learning-rate-ratio", "0.1"])
    tiny = train_cli.request_from_args(args).train
    assert (tiny.learning_rate_decay, tiny.min_learning_rate_ratio) == ("cosine", 0.1)
    args = train_cli.build_parser().parse_args(["--preset", "small", "--learning-rate-decay", "linear"])
    small = train_cli.request_from_args(args).train  # the floor follows the decay, as in the Train tab
    assert (small.learning_rate_decay, small.min_learning_rate_ratio) == ("linear", 0.0)
    assert (TRAIN_PRESETS["tiny"].train.learning_rate_decay, TRAIN_PRESETS["gpu"].train.learning_rate_decay) == (
        "linear", "cosine")


@pytest.mark.parametrize("name", sorted(TRAIN_PRESETS))
def test_every_preset_is_a_model_the_config_accepts(name):
    preset = TRAIN_PRESETS[name]
    config = ModelConfig(vocabulary_size=65, **family_settings(preset.model.to_dict()))
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
    snapshot = probe_attention(run, "a b?c?\tX", step=3)
    assert snapshot.step == 3 and snapshot.tokens == list("a bc") and run.model.training
    assert snapshot.left_out == "?\tX"  # each once, in order: the Train tab names them
    torch.testing.assert_close(snapshot.weights.sum(-1), torch.ones(1, 2, 4))  # each row of weights sums to 1
    assert probe_attention(run, "XYZ", step=3) is None


# ------------------------------------------------------------------------------ resume goes on where it stopped
def test_resume_continues_exactly_where_it_stopped(tmp_path, shakespeare_text):
    """Stop at N, resume to 2N: the same losses and, one step on, the same weights as a run never stopped; a
    resume without the optimizer state (an older checkpoint) starts AdamW cold and its loss jumps."""
    text, n = shakespeare_text[:60_000], 50
    model = dict(SMALL, embedding_dim=32, context_size=32)
    config = quick(steps=2 * n, batch_size=16, learning_rate=1e-2, warmup_steps=5, eval_interval=1000)
    weights_at = {}

    def remember(name, run):
        def on_step(step, metrics):
            if step == n + 1:
                weights_at[name] = {k: v.clone() for k, v in run.model.state_dict().items()}
        return on_step

    straight_run = prepare_run(RunRequest("straight", model, config, corpus_text=text, weights_dir=tmp_path))
    straight = run_training(straight_run, on_step=remember("straight", straight_run))
    done = []
    first = run_training(prepare_run(RunRequest("resumed", model, config, corpus_text=text, weights_dir=tmp_path)),
                         on_step=lambda step, metrics: done.append(step), should_stop=lambda: len(done) >= n)
    assert first.stopped and first.steps_done == n and (tmp_path / "resumed" / "optimizer.safetensors").is_file()
    shutil.copytree(tmp_path / "resumed", tmp_path / "cold")
    (tmp_path / "cold" / "optimizer.safetensors").unlink()  # as a checkpoint saved before optimizer state was

    resumed_run = prepare_run(RunRequest("resumed", model, config, corpus_text=text, resume=True,
                                         weights_dir=tmp_path))
    assert resumed_run.notes == [] and resumed_run.start_step == n
    resumed = run_training(resumed_run, on_step=remember("resumed", resumed_run))
    cold_run = prepare_run(RunRequest("cold", model, config, corpus_text=text, resume=True, weights_dir=tmp_path))
    assert "starts cold" in cold_run.notes[0]
    cold = run_training(cold_run)

    def mean_after_resume(result):
        return sum(loss for step, loss in result.train_loss if n < step <= n + 20) / 20

    assert abs(mean_after_resume(resumed) - mean_after_resume(straight)) < 1e-6
    assert mean_after_resume(cold) - mean_after_resume(straight) > 0.01  # the cold restart's jump, 1e4 times larger
    for key, tensor in weights_at["straight"].items():  # the batch of step s depends on (seed, s) only: exact
        assert torch.equal(weights_at["resumed"][key], tensor), key
    record = json.loads((tmp_path / "resumed" / "training.json").read_text())
    assert [s for s, _ in record["train_loss"]] == list(range(1, 2 * n + 1))


# ----------------------------------------------------------------------------------------------- time and memory
def test_the_time_estimate_counts_muon_and_dropout():
    """Muon's Newton–Schulz products and dropout's masks are part of a step's time; the small preset has both."""
    shape = dict(layers_num=4, heads_num=4, embedding_dim=192, context_size=128)
    config = ModelConfig(vocabulary_size=65, **shape)
    plain = step_seconds(config, 32)
    # 5 iterations on each of 4 blocks' qkv (192x576), proj (192x192), fc and proj (192x768): 2m²n + m³ each
    per_block = sum(2 * 192 * 192 * n + 192**3 for n in (576, 192, 768, 768))
    newton_schulz = 2 * 5 * 4 * per_block / estimates.CPU_FLOPS
    assert step_seconds(config, 32, "cpu", "muon") - plain == pytest.approx(newton_schulz)
    dropped = ModelConfig(vocabulary_size=65, dropout_rate=0.1, **shape)
    # masked: the embeddings, then per block the attention weights (B, h, T, T) and two (B, T, C) outputs
    elements = 32 * 128 * 192 + 4 * (32 * 4 * 128 * 128 + 2 * 32 * 128 * 192)
    assert step_seconds(dropped, 32) - plain == pytest.approx(elements * estimates.CPU_DROPOUT_S_PER_ELEMENT)
    assert step_seconds(dropped, 32, "cuda") == step_seconds(config, 32, "cuda")  # a GPU draws masks in bulk
    small = TRAIN_PRESETS["small"]
    small_config = ModelConfig(vocabulary_size=65, **small.model.to_dict())
    assert small.train.optimizer == "muon" and small_config.dropout_rate == 0.1  # the shipped model's recipe
    assert 0.6 < step_seconds(small_config, 32, "cpu", "muon") < 1.0  # measured: 0.82 s a step on 2 cores


def test_the_devices_free_memory_is_checked_before_anything_is_built(tmp_path, monkeypatch):
    monkeypatch.setattr(run_module, "free_device_memory", lambda device: 64 * 2**20)
    with pytest.raises(BudgetError, match=r"more than the 64.0 MiB free on .*lower batch_size|even batch_size 1"):
        prepare_run(RunRequest("big", dict(SMALL, embedding_dim=256, context_size=256), quick(batch_size=512),
                               corpus_text="hello there, general kenobi. " * 600, weights_dir=tmp_path))


def test_a_corpus_too_short_to_hold_out_validation_trains_and_validates_on_the_whole_text(tmp_path):
    """Notebook 004's toy: "hello world" at context 8 trains on its 11 characters and says what its loss means."""
    model = dict(layers_num=1, heads_num=1, embedding_dim=16, context_size=8, dropout_rate=0.0, use_bias=False)
    run = prepare_run(RunRequest("hello", model, quick(steps=150, batch_size=4, learning_rate=1e-2, eval_interval=50),
                                 corpus_text="hello world", weights_dir=tmp_path))
    assert len(run.train_data.data) == len(run.val_data.data) == 11
    assert run.notes == ["the corpus (11 characters) is too short to hold out its last 10% for context_size 8 (that "
                         "needs 90), so the model trains and validates on the whole text: the validation loss "
                         "measures memorising, not generalising",
                         "11 characters give 3 windows of 8 to learn from (one starting at each of the first 3 "
                         "characters): the model learns to go on from those and nothing else, so a sample from an "
                         "empty prompt, which starts elsewhere, seldom writes the text back; a prompt of the text's "
                         "first 8 characters does"]
    result = run_training(run)
    assert result.val_loss[-1][1] < 0.5  # from about ln(8) = 2.08 at the start: the text is memorised
    assert (tmp_path / "hello" / "model.safetensors").is_file()
    from playground.model.sampling import generate

    assert generate(run.model, run.tokenizer, "hello wo", max_new_tokens=3, greedy=True) == "rld"  # as the note says


def test_bfloat16_autocast_trains_float32_weights_and_the_record_says_so(tmp_path, shakespeare_text):
    request = RunRequest("bf", SMALL, quick(steps=60, precision="bfloat16"), corpus_text=shakespeare_text[:20000],
                         weights_dir=tmp_path)
    run = prepare_run(request)
    result = run_training(run)
    first = sum(loss for _, loss in result.train_loss[:5]) / 5
    last = sum(loss for _, loss in result.train_loss[-5:]) / 5
    assert last < first - 0.5
    assert all(p.dtype == torch.float32 for p in run.model.parameters())
    record = json.loads((tmp_path / "bf" / "training.json").read_text())
    assert record["device"].endswith(" · bfloat16 autocast")
    assert json.loads((tmp_path / "bf" / "config.json").read_text()) == run.model.config.to_dict()


@pytest.mark.parametrize(("text", "message"), [
    ("hello", "the corpus (5 characters) is too short for context_size 8: a window of context_size + 1 characters "
              "must fit in it; lower context_size to at most 4"),
    ("a", "the corpus (1 character) is too short to train on: a training window is context_size characters and the "
          "one after them, so even context_size 1 needs 2 characters"),
])
def test_a_corpus_shorter_than_one_window_is_refused_with_what_would_fit(tmp_path, text, message):
    model = dict(layers_num=1, heads_num=1, embedding_dim=16, context_size=8, dropout_rate=0.0, use_bias=False)
    with pytest.raises(CorpusError, match=f"^{re.escape(message)}$"):
        prepare_run(RunRequest("short", model, quick(steps=5), corpus_text=text, weights_dir=tmp_path))
