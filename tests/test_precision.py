"""Precision "auto" is what measures faster on the run's own model, remembered for the process, and recorded."""

from __future__ import annotations

import itertools
import json

import pytest
import torch

from playground.config import ModelConfig, TrainConfig
from playground.model.gpt import GPT
from playground.text.tokenizer import CharTokenizer
from playground.training import precision
from playground.training.run import RunRequest, prepare_run, run_training

SHAPE = dict(layers_num=1, heads_num=2, embedding_dim=16, context_size=16, dropout_rate=0.1, use_bias=False)


@pytest.fixture(autouse=True)
def _nothing_remembered():
    precision.forget_choices()
    yield
    precision.forget_choices()


class ScriptedClock:
    """A clock under which each timed pass lasts what the script says: float32's, then bfloat16's, in turn (the
    order measure_precision times them in); it counts how often it was read."""

    def __init__(self, float32_ms: float, bfloat16_ms: float):
        self.durations = itertools.cycle([float32_ms / 1000, bfloat16_ms / 1000])
        self.now, self.reads = 0.0, 0

    def __call__(self) -> float:
        self.reads += 1
        if self.reads % 2 == 0:  # a pass's end
            self.now += next(self.durations)
        return self.now


def tiny_model(vocabulary_size: int = 20) -> GPT:
    torch.manual_seed(0)
    return GPT(ModelConfig(vocabulary_size=vocabulary_size, **SHAPE))


@pytest.mark.parametrize("float32_ms,bfloat16_ms,expected", [(10, 20, torch.float32), (20, 10, torch.bfloat16),
                                                              (10, 10, torch.float32)])
def test_auto_takes_what_measures_faster(float32_ms, bfloat16_ms, expected):
    clock = ScriptedClock(float32_ms, bfloat16_ms)
    choice = precision.resolve_precision(tiny_model(), "cpu", "auto", 4, clock=clock)
    assert choice.dtype == expected
    assert clock.reads == 4 * precision.PROBE_ROUNDS  # rounds of a float32 and a bfloat16 pass, each read twice
    assert (choice.float32_seconds, choice.bfloat16_seconds) == pytest.approx((float32_ms / 1000, bfloat16_ms / 1000))
    assert f"float32 {float32_ms:.1f} ms, bfloat16 autocast {bfloat16_ms:.1f} ms" in choice.reason
    assert choice.reason.startswith(f"auto: {'bfloat16 autocast' if expected == torch.bfloat16 else 'float32'} "
                                    "measured faster")


class PassClock:
    """A clock under which the timed passes last the given ms in turn, float32's and bfloat16's alternating (the
    untimed warm-up passes read no clock)."""

    def __init__(self, float32_ms: list[float], bfloat16_ms: list[float]):
        self.durations = iter([ms / 1000 for pair in zip(float32_ms, bfloat16_ms) for ms in pair])
        self.now, self.reads = 0.0, 0

    def __call__(self) -> float:
        self.reads += 1
        if self.reads % 2 == 0:
            self.now += next(self.durations)
        return self.now


def test_passes_slowed_by_other_work_do_not_decide():
    # float32 costs 10 ms, bfloat16 11; other processes slowed two of float32's three passes: the medians (25 against
    # 11) chose bfloat16 on a loaded machine, the fastest passes (10 against 11) choose float32
    choice = precision.resolve_precision(tiny_model(), "cpu", "auto", 4, clock=PassClock([25, 25, 10], [11, 11, 11]))
    assert choice.dtype == torch.float32
    assert (choice.float32_seconds, choice.bfloat16_seconds) == pytest.approx((0.010, 0.011))
    assert "fastest of 3" in choice.reason


@pytest.mark.parametrize("bfloat16_ms,expected", [(9.8, torch.float32), (9.6, torch.float32), (9.4, torch.bfloat16)])
def test_bfloat16_must_win_by_the_margin(bfloat16_ms, expected):
    assert precision.BFLOAT16_MARGIN == 0.05
    clock = PassClock([10] * precision.PROBE_ROUNDS, [bfloat16_ms] * precision.PROBE_ROUNDS)
    assert precision.resolve_precision(tiny_model(), "cpu", "auto", 4, clock=clock).dtype == expected


def test_the_choice_is_remembered_per_shape_and_batch():
    first = precision.resolve_precision(tiny_model(), "cpu", "auto", 4, clock=ScriptedClock(20, 10))
    again = ScriptedClock(10, 20)
    assert precision.resolve_precision(tiny_model(), "cpu", "auto", 4, clock=again) == first
    assert again.reads == 0  # not measured twice
    other_batch = ScriptedClock(10, 20)
    assert precision.resolve_precision(tiny_model(), "cpu", "auto", 8, clock=other_batch).dtype == torch.float32
    assert other_batch.reads > 0


def test_an_asked_precision_is_not_measured():
    clock = ScriptedClock(20, 10)
    assert precision.resolve_precision(tiny_model(), "cpu", "float32", 4, clock=clock).dtype == torch.float32
    assert precision.resolve_precision(tiny_model(), "cpu", "bfloat16", 4, clock=clock).dtype == torch.bfloat16
    assert clock.reads == 0
    mps = precision.resolve_precision(tiny_model(), "mps", "auto", 4, clock=clock)
    assert (mps.dtype, clock.reads) == (torch.float32, 0)
    assert "not measured on Apple MPS" in mps.reason


def test_measuring_leaves_the_model_and_the_random_state_as_they_were():
    model = tiny_model().eval()
    weights = {name: value.clone() for name, value in model.state_dict().items()}
    rng = torch.get_rng_state()
    precision.measure_precision(model, torch.device("cpu"), 4, clock=ScriptedClock(10, 20))
    assert not model.training
    assert all(parameter.grad is None for parameter in model.parameters())
    assert all(torch.equal(weights[name], value) for name, value in model.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng)  # dropout masks drawn afterwards are the ones they would be


def test_a_run_records_which_precision_it_took_and_why(tmp_path, shakespeare_text):
    text = shakespeare_text[:20000]
    train = TrainConfig(batch_size=4, steps=3, learning_rate=3e-3, warmup_steps=1, eval_interval=3, eval_batches=1,
                        checkpoint_interval=100, sample_interval=100, seed=0)
    vocabulary = CharTokenizer.train_from_text(text).vocabulary_size
    measured = precision.resolve_precision(tiny_model(vocabulary), "cpu", "auto", 4, clock=ScriptedClock(20, 10))
    run = prepare_run(RunRequest("picked", SHAPE, train, corpus_text=text, weights_dir=tmp_path))
    assert run.precision == measured  # the run's own shape and batch: the process's remembered measurement
    run_training(run)
    record = json.loads((tmp_path / "picked" / "training.json").read_text())
    assert record["precision"] == {"dtype": "bfloat16", "reason": measured.reason}
    assert record["device"].endswith(" · bfloat16 autocast")


def test_a_large_models_probe_reads_fewer_windows_than_its_batch():
    """The probe's passes stay within PROBE_FLOPS: the whole batch for nanoGPT's baby shape, one window for a
    19.8M-parameter model at context 256 (its batch of 64, eight passes, took 98 s on 2 cores)."""
    from playground.training.precision import probe_windows

    assert probe_windows(800_000, 64, 12) == 12
    assert probe_windows(19_800_000, 256, 64) == 1
    assert 1 < probe_windows(3_000_000, 128, 64) < 64
