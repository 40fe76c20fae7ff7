import math
from dataclasses import replace

import pytest
import torch

from playground.config import ConfigError, Limits, ModelConfig, TrainConfig
from playground.model.gpt import GPT


def test_divisibility_message_names_fields_and_values():
    with pytest.raises(ConfigError, match="embedding_dim 770 is not divisible by heads_num 12"):
        ModelConfig(vocabulary_size=65, embedding_dim=770, heads_num=12)


@pytest.mark.parametrize("field", ["vocabulary_size", "context_size", "embedding_dim", "heads_num", "layers_num"])
@pytest.mark.parametrize("value", [0, -3])
def test_non_positive_sizes_are_refused(field, value):
    with pytest.raises(ConfigError, match=f"{field} must be positive, got {value}"):
        ModelConfig(**{"vocabulary_size": 65, field: value})


@pytest.mark.parametrize("rate", [-0.1, 1.0, 1.5, math.nan])
def test_dropout_outside_unit_interval_is_refused(rate):
    with pytest.raises(ConfigError, match="dropout_rate"):
        ModelConfig(vocabulary_size=65, dropout_rate=rate)


def test_head_size_is_derived():
    assert ModelConfig(vocabulary_size=65, embedding_dim=96, heads_num=6).head_size == 16


@pytest.mark.parametrize(("use_bias", "head_bias"), [(False, False), (True, False), (True, True)])
def test_parameter_count_formula_matches_the_model(use_bias, head_bias):
    config = ModelConfig(vocabulary_size=65, context_size=32, embedding_dim=48, heads_num=3, layers_num=3,
                         use_bias=use_bias, head_bias=head_bias)
    assert config.parameter_count() == GPT(config).parameter_count()


def test_use_bias_follows_nanogpt_and_older_runs_keep_their_head_bias(tmp_path):
    """--use-bias gave an untied LM head a bias, which GPT-2's layout has no place for; it now follows nanoGPT
    (biases in the blocks and norms, none on the head). A config.json saved before says nothing of head_bias: it
    reads as written then, so its weights (with lm_head.bias) still load."""
    from playground.checkpoints.store import load_checkpoint, save_checkpoint
    from playground.text.tokenizer import CharTokenizer

    new = ModelConfig(vocabulary_size=65, embedding_dim=16, heads_num=2, layers_num=1, use_bias=True)
    assert GPT(new).lm_head.bias is None and GPT(new).blocks[0].mlp.fc.bias is not None
    assert new.to_dict()["head_bias"] is False and ModelConfig.from_dict(new.to_dict()) == new
    older = {k: v for k, v in new.to_dict().items() if k != "head_bias"}  # a config.json written before the field
    assert ModelConfig.from_dict(older).head_bias is True and "head_bias" not in ModelConfig.from_dict(older).to_dict()
    assert ModelConfig.from_dict({**older, "tie_embeddings": True}).head_bias is False
    assert "head_bias" not in ModelConfig(vocabulary_size=65).to_dict()  # a run without biases reads as it always did
    tokenizer = CharTokenizer.train_from_text("to be or not to be")
    old_model = GPT(ModelConfig.from_dict({**older, "vocabulary_size": tokenizer.vocabulary_size}))
    folder = save_checkpoint(old_model, tokenizer, "older", directory=tmp_path)
    assert "head_bias" not in (folder / "config.json").read_text()  # written as such a run always was
    loaded = load_checkpoint("older", directory=tmp_path)
    assert torch.equal(loaded.model.lm_head.bias, old_model.lm_head.bias)
    with pytest.raises(ConfigError, match="head_bias needs use_bias and an untied head"):
        ModelConfig(vocabulary_size=65, use_bias=True, tie_embeddings=True, head_bias=True)


def test_json_round_trip_and_unknown_field():
    config = ModelConfig(vocabulary_size=65, embedding_dim=64, heads_num=4, use_bias=True)
    assert ModelConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ConfigError, match="no field.*n_embd"):
        ModelConfig.from_dict({**config.to_dict(), "n_embd": 3})


def test_learning_rate_schedule_warms_up_then_decays_to_floor():
    config = TrainConfig(steps=100, learning_rate=1e-3, warmup_steps=10, min_learning_rate_ratio=0.1)
    assert config.learning_rate_at(0) == pytest.approx(1e-4)
    assert config.learning_rate_at(9) == pytest.approx(1e-3)
    assert config.learning_rate_at(100) == pytest.approx(1e-4)
    rates = [config.learning_rate_at(s) for s in range(10, 100)]
    assert all(a >= b for a, b in zip(rates, rates[1:]))


def test_a_linear_decay_falls_by_equal_steps_to_its_floor():
    """Warm-up 10 of 110 steps, then a straight line from lr to the floor: a quarter of the way, a quarter down."""
    config = TrainConfig(steps=110, learning_rate=1e-3, warmup_steps=10, min_learning_rate_ratio=0.0,
                         learning_rate_decay="linear")
    assert config.learning_rate_at(9) == pytest.approx(1e-3)
    assert config.learning_rate_at(35) == pytest.approx(0.75e-3)
    assert config.learning_rate_at(60) == pytest.approx(0.5e-3)
    assert config.learning_rate_at(110) == 0.0
    floored = TrainConfig(steps=110, learning_rate=1e-3, warmup_steps=10, min_learning_rate_ratio=0.2,
                          learning_rate_decay="linear")
    assert floored.learning_rate_at(60) == pytest.approx(0.6e-3)  # halfway between lr and its floor
    budget = replace(config, time_budget_seconds=100.0)
    assert budget.learning_rate_at(20, 50.0) == pytest.approx(0.5e-3)  # the clock leads, as with cosine
    assert TrainConfig.from_dict({k: v for k, v in config.to_dict().items() if k != "learning_rate_decay"}) == replace(
        config, learning_rate_decay="cosine")  # a checkpoint written before the choice existed reads as cosine
    with pytest.raises(ConfigError, match="learning_rate_decay must be cosine, linear or constant, got 'step'"):
        TrainConfig(learning_rate_decay="step")


def test_a_time_budget_decays_the_rate_by_the_clock_when_the_clock_leads():
    """1000 steps, 100 s: at step 100 after 50 s the run is halfway (the clock leads), at step 800 after 50 s
    four fifths through (the steps lead); the decay follows whichever is further along, and ends at the floor."""
    config = TrainConfig(steps=1000, learning_rate=1e-3, warmup_steps=0, min_learning_rate_ratio=0.1,
                         time_budget_seconds=100.0)
    assert config.progress(100, 50.0) == pytest.approx(0.5) and config.progress(800, 50.0) == pytest.approx(0.8)
    assert config.progress(10, 500.0) == 1.0
    assert config.learning_rate_at(100, 50.0) == pytest.approx(0.55e-3)  # cosine's halfway: the mean of lr and floor
    assert config.learning_rate_at(500, 0.0) == config.learning_rate_at(500, 50.0)  # the steps lead: as without one
    assert config.learning_rate_at(100, 100.0) == pytest.approx(1e-4)  # the budget spent: the floor
    # a 4 s budget ends the 50-step warm-up after 0.4 s (a tenth of it), however few steps that was, and decays
    short = TrainConfig(steps=1000, learning_rate=1e-3, warmup_steps=50, min_learning_rate_ratio=0.1,
                        time_budget_seconds=4.0)
    assert short.learning_rate_at(10, 0.2) == pytest.approx(0.5e-3)  # half the warm-up's time: half the rate
    assert short.learning_rate_at(10, 0.4) == pytest.approx(1e-4 + 0.5 * (1 + math.cos(0.1 * math.pi)) * 0.9e-3)
    assert short.learning_rate_at(10, 4.0) == pytest.approx(1e-4)
    no_budget = TrainConfig(steps=1000, learning_rate=1e-3, warmup_steps=0)
    assert no_budget.learning_rate_at(100, 10**6) == no_budget.learning_rate_at(100)  # seconds count only with one
    assert no_budget.progress(250, 10**6) == 0.25
    with pytest.raises(ConfigError, match=r"time_budget_seconds must be >= 0 \(0: no time budget\), got -1"):
        TrainConfig(time_budget_seconds=-1)


@pytest.mark.parametrize("changes,match", [
    ({"learning_rate": 0.0}, "learning_rate"), ({"batch_size": 0}, "batch_size"), ({"device": "tpu"}, "device"),
    ({"steps": 2.5}, "steps must be a whole number"), ({"learning_rate": math.inf}, "finite"),
])
def test_train_config_messages(changes, match):
    with pytest.raises(ConfigError, match=match):
        TrainConfig(**changes)


def test_limits_read_from_environment(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_STEPS", "50")
    assert Limits.from_env().max_steps == 50
    monkeypatch.setenv("PLAYGROUND_MAX_STEPS", "lots")
    with pytest.raises(ConfigError, match="PLAYGROUND_MAX_STEPS"):
        Limits.from_env()


def test_the_request_time_limit_reads_from_environment(monkeypatch):
    assert Limits.from_env().max_request_seconds == 60
    monkeypatch.setenv("PLAYGROUND_MAX_REQUEST_SECONDS", "15")
    assert Limits.from_env().max_request_seconds == 15
    for bad in ("0", "1.5", "soon"):
        monkeypatch.setenv("PLAYGROUND_MAX_REQUEST_SECONDS", bad)
        with pytest.raises(ConfigError, match="PLAYGROUND_MAX_REQUEST_SECONDS"):
            Limits.from_env()


def test_run_limits_read_from_environment(monkeypatch):
    assert (Limits().max_train_seconds, Limits().max_runs, Limits().max_runs_bytes) == (3600, 20, 500_000_000)
    monkeypatch.setenv("PLAYGROUND_MAX_TRAIN_SECONDS", "600")
    monkeypatch.setenv("PLAYGROUND_MAX_RUNS", "5")
    monkeypatch.setenv("PLAYGROUND_MAX_RUNS_BYTES", "1000000")
    monkeypatch.setenv("PLAYGROUND_MAX_RUNS_PER_VISITOR", "2")
    monkeypatch.setenv("PLAYGROUND_RUN_KEEP_SECONDS", "900")
    limits = Limits.from_env()
    assert (limits.max_train_seconds, limits.max_runs, limits.max_runs_bytes) == (600, 5, 1_000_000)
    assert (limits.max_runs_per_visitor, limits.run_keep_seconds) == (2, 900)
    for name in ("PLAYGROUND_MAX_TRAIN_SECONDS", "PLAYGROUND_MAX_RUNS", "PLAYGROUND_MAX_RUNS_BYTES",
                 "PLAYGROUND_MAX_RUNS_PER_VISITOR", "PLAYGROUND_RUN_KEEP_SECONDS"):
        monkeypatch.setenv(name, "0")
        with pytest.raises(ConfigError, match=name):
            Limits.from_env()
        monkeypatch.setenv(name, "10")
