"""The toy preset is notebook 004's lab: its own attention-only model, trained, saved, loaded and sampled through
the playground's run, checkpoints and sampler, and refused (in a sentence) by the views that read a GPT's blocks."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from notebook_seeds import notebook
from safetensors.torch import load_file

from playground import checkpoints
from playground.architectures import ArchitectureError, NotebookLanguageModel, build_model, require_gpt
from playground.config import NOTEBOOK_004, ConfigError, ModelConfig, TrainConfig
from playground.model import GPT
from playground.presets import TRAIN_PRESETS
from playground.run import RunRequest, memory_cost, prepare_run, probe_text_for, run_training
from playground.sampling import SamplingSettings, generate, sampling_cost, sampling_seconds, stream
from playground.textbook import notebook_004

HELLO = "hello world"
NOTEBOOK_KEYS = {"token_emb.weight", "pos_emb.weight", "attn.proj.weight", "attn.proj.bias", "output.weight",
                 "output.bias", *(f"attn.heads.{i}.{part}.weight" for i in range(2)
                                  for part in ("key", "query", "value"))}


def toy_config(vocabulary_size: int = 8) -> ModelConfig:
    return ModelConfig(vocabulary_size=vocabulary_size, **TRAIN_PRESETS["toy"].model.to_dict())


def toy_request(tmp_path, name: str = "toy", seed: int = 1337, **train) -> RunRequest:
    preset = TRAIN_PRESETS["toy"]
    return RunRequest(name, preset.model.to_dict(), dataclasses.replace(preset.train, seed=seed, **train),
                      corpus_text=HELLO, weights_dir=tmp_path)


def test_the_toy_preset_is_the_notebooks_lab():
    preset = TRAIN_PRESETS["toy"]
    config = toy_config()
    model = build_model(config)
    assert isinstance(model, NotebookLanguageModel) and isinstance(model, notebook_004.SimpleLanguageModel)
    assert (model.token_emb.num_embeddings, model.block_size, model.attn.C, model.attn.num_heads) == (8, 8, 16, 2)
    assert set(model.state_dict()) == NOTEBOOK_KEYS
    assert config.parameter_count() == model.parameter_count() == 1048  # the docstring's sum
    train = preset.train
    assert (train.batch_size, train.steps, train.learning_rate, train.optimizer) == (4, 200, 1e-3, "adamw")
    assert {train.learning_rate_at(step) for step in (0, 50, 199)} == {1e-3}  # the notebook's constant rate
    assert isinstance(build_model(dataclasses.replace(config, architecture="gpt", vocabulary_size=8)), GPT)


@pytest.mark.parametrize("shape", [dict(vocabulary_size=5, context_size=4, embedding_dim=12, heads_num=3),
                                   dict(vocabulary_size=65, context_size=32, embedding_dim=64, heads_num=4)])
def test_the_parameter_count_is_the_models(shape):
    config = ModelConfig(**shape, layers_num=1, architecture=NOTEBOOK_004)
    assert config.parameter_count() == build_model(config).parameter_count()


def test_a_notebook_004_config_refuses_what_the_notebooks_model_cannot_be():
    with pytest.raises(ConfigError, match="layers_num must be 1 for architecture notebook_004, got 2"):
        ModelConfig(vocabulary_size=8, layers_num=2, architecture=NOTEBOOK_004)
    with pytest.raises(ConfigError, match="dropout_rate must be 0"):
        ModelConfig(vocabulary_size=8, layers_num=1, dropout_rate=0.1, architecture=NOTEBOOK_004)
    with pytest.raises(ConfigError, match="architecture must be gpt or notebook_004, got 'bert'"):
        ModelConfig(vocabulary_size=8, architecture="bert")
    assert "architecture" not in ModelConfig(vocabulary_size=8).to_dict()  # a GPT's config.json reads as it did
    assert ModelConfig.from_dict(toy_config().to_dict()) == toy_config()


@pytest.mark.parametrize("seed", [1337, 7])
def test_a_toy_run_falls_as_the_notebooks_printed_losses_and_its_checkpoint_loads_anywhere(tmp_path, seed):
    """Notebook 004 printed 2.1783, 1.5632, 0.8687, 0.3847 at steps 0, 50, 100, 150; any seed lands near."""
    run = prepare_run(toy_request(tmp_path, "toy", seed))
    samples, probes = [], []
    result = run_training(run, on_sample=lambda step, text: samples.append((step, text)), on_probe=probes.append)
    losses = dict(result.train_loss)
    assert abs(losses[1] - math.log(8)) < 0.35, losses[1]  # starts near chance over 8 symbols
    assert losses[150] < 1.0 and losses[200] < 1.0, (losses[150], losses[200])
    assert [step for step, _ in samples] == [50, 100, 150, 200]
    assert all(set(text) <= set(HELLO) for _, text in samples)
    assert probes[0].tokens == list("hello wo") and probes[-1].weights.shape == (1, 2, 8, 8)
    assert probe_text_for(run) == "hello wo"

    folder = tmp_path / "toy"
    assert json.loads((folder / checkpoints.CONFIG_FILE).read_text())["architecture"] == NOTEBOOK_004
    loaded = checkpoints.load_checkpoint("toy", directory=tmp_path)
    assert isinstance(loaded.model, NotebookLanguageModel) and loaded.config == toy_config()
    assert "notebook 004's attention-only model" in loaded.description
    # a notebook reader's own class, from the notebook's own code, loads the weights strictly and agrees
    theirs = notebook("004")["SimpleLanguageModel"](8, block_size=8, n_embd=16, n_head=2)
    theirs.load_state_dict(load_file(str(folder / checkpoints.WEIGHTS_FILE)), strict=True)
    ids = loaded.tokenizer.encode("hello wo")[None]
    torch.testing.assert_close(theirs.eval()(ids), loaded.model(ids).logits)


def test_the_sampler_generates_from_w_with_the_notebooks_window(tmp_path):
    run = prepare_run(toy_request(tmp_path))
    run_training(run)
    loaded = checkpoints.load_checkpoint("toy", directory=tmp_path)
    settings = SamplingSettings(max_new_tokens=40, seed=3)
    tokens = list(stream(loaded.model, loaded.tokenizer, "w", settings, use_cache=True))  # no cache to keep
    assert all(t.cache_length == 0 for t in tokens)
    assert [t.context_length for t in tokens[:9]] == [1, 2, 3, 4, 5, 6, 7, 8, 8]  # idx[:, -8:]
    text = "".join(t.text for t in tokens)
    assert len(text) == 40 and set(text) <= set(HELLO)
    assert text == generate(loaded.model, loaded.tokenizer, "w", 40, seed=3, use_cache=False)
    # the uncached estimate and no KV cache in the memory a generation reserves
    config = loaded.config
    assert sampling_seconds(config, 1048, 1, 40, True) == sampling_seconds(config, 1048, 1, 40, False)
    assert "KV cache" not in dict(sampling_cost(config, 1048).parts)


def test_the_estimate_prices_its_explicit_attention():
    cost = dict(memory_cost(toy_config(), 4).parts)
    assert cost["weights, gradients and AdamW state"] == 16 * 1048
    assert cost["(B, h, T, T) attention with dropout"] > 0  # its heads keep (B, T, T) weights for backward


def test_muon_and_a_gpt_only_view_are_refused_in_a_sentence(tmp_path):
    with pytest.raises(ConfigError, match="no transformer blocks.*pick the optimizer adamw"):
        prepare_run(toy_request(tmp_path, optimizer="muon"))
    with pytest.raises(ArchitectureError, match="open it in the Sample tab.*the Model tab needs a GPT checkpoint"):
        require_gpt(toy_config(), "toy-1", "the Model tab")
    require_gpt(ModelConfig(vocabulary_size=8), "tiny-1", "the Model tab")  # a GPT passes


def test_any_text_trains_the_notebooks_model(tmp_path, shakespeare_text):
    preset = TRAIN_PRESETS["toy"]
    run = prepare_run(RunRequest("toy-shakespeare", preset.model.to_dict(),
                                 TrainConfig.from_dict({**preset.train.to_dict(), "steps": 3}),
                                 corpus_text=shakespeare_text[:3000], weights_dir=tmp_path))
    assert isinstance(run.model, NotebookLanguageModel) and run.model.config.vocabulary_size > 8
    run_training(run)
    assert checkpoints.load_checkpoint("toy-shakespeare", directory=tmp_path).steps == 3
