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

from playground.checkpoints import store as checkpoints
from playground.config import NOTEBOOK_004, ConfigError, ModelConfig, TrainConfig
from playground.model.families import ArchitectureError, NotebookLanguageModel, build_model, require_gpt
from playground.model.gpt import GPT
from playground.model.sampling import SamplingSettings, generate, sampling_cost, sampling_seconds, stream
from playground.textbook import notebook_004
from playground.training.estimates import memory_cost
from playground.training.loop import configure_optimizer
from playground.training.presets import TRAIN_PRESETS
from playground.training.probes import probe_text_for
from playground.training.run import RunRequest, prepare_run, run_training

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


def test_the_toy_preset_steps_as_the_notebooks_own_optimizer_line():
    """The notebook's loop: ``opt = torch.optim.AdamW(model.parameters(), lr=1e-3)``, then zero_grad, backward,
    step. Ours, from the same weights and batches, must end on the same weights (it had betas (0.9, 0.99) and no
    decay on biases: 0.03 apart at step 150)."""
    preset = TRAIN_PRESETS["toy"]
    ours = build_model(toy_config())
    theirs = notebook("004")["SimpleLanguageModel"](8, block_size=8, n_embd=16, n_head=2)
    theirs.load_state_dict(ours.state_dict())
    optimizer = configure_optimizer(ours, preset.train, torch.device("cpu"))
    notebooks = torch.optim.AdamW(theirs.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(60):
        x = torch.randint(0, 8, (4, 8), generator=generator)
        y = torch.randint(0, 8, (4, 8), generator=generator)
        for model, opt in ((ours, optimizer), (theirs, notebooks)):
            logits = model(x)
            logits = logits.logits if hasattr(logits, "logits") else logits
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    for name, value in theirs.state_dict().items():
        torch.testing.assert_close(ours.state_dict()[name], value, rtol=0, atol=1e-6, msg=name)


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


def test_a_toy_run_resumes_warm_from_its_checkpoint(tmp_path):
    run_training(prepare_run(toy_request(tmp_path, steps=20)))
    resumed = prepare_run(dataclasses.replace(toy_request(tmp_path, steps=30), resume=True))
    assert isinstance(resumed.model, NotebookLanguageModel) and resumed.start_step == 20
    assert not any("starts cold" in note for note in resumed.notes)  # its AdamW state came back
    assert run_training(resumed).steps_done == 30


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


# ------------------------------------------------------------------------------------------- through the tabs

@pytest.fixture(scope="module")
def toy_weights(tmp_path_factory):
    """A weights folder holding one finished toy run on "hello world" (the notebook's 200 steps)."""
    folder = tmp_path_factory.mktemp("toy-weights")
    run_training(prepare_run(toy_request(folder, "toy-1")))
    return folder


@pytest.fixture
def toy_ctx(toy_weights):
    from playground.config import Limits
    from playground.ui.common import AppContext

    return AppContext(limits=Limits(), weights=toy_weights)


def test_the_train_tab_starts_the_notebooks_lab_from_the_toy_preset(toy_ctx, monkeypatch):
    from playground.ui import train_tab

    fields = train_tab.preset_fields("toy")
    assert fields["architecture"] == NOTEBOOK_004 and fields["learning_rate_decay"] == "constant"
    assert train_tab.estimate(*(fields[name] for name in train_tab.ESTIMATE_FIELDS), train_tab.CORPORA[2], None,
                              HELLO).startswith("**1,048 parameters** (with the pasted text's 8 symbols)")
    started = []
    monkeypatch.setattr(toy_ctx.jobs, "start", lambda request, visitor, **options: started.append(request))
    form = {name: fields[name] for name in (*train_tab.SETTINGS_FIELDS, "optimizer", "time_budget_seconds",
                                            "learning_rate_decay", "architecture")}
    train_tab.start_run(toy_ctx, **form, corpus_choice=train_tab.CORPORA[2], pasted=HELLO, run_name="toy-2")
    request = started[0]
    assert request.model["architecture"] == NOTEBOOK_004 and request.corpus_text == HELLO
    preset = TRAIN_PRESETS["toy"].train
    assert (request.train.learning_rate, request.train.weight_decay, request.train.grad_clip) == (1e-3, 0.01, 0.0)
    assert (request.train.steps, request.train.batch_size, request.train.min_learning_rate_ratio) == (200, 4, 1.0)
    assert (request.train.eval_interval, request.train.sample_interval) == (preset.eval_interval, 50)
    with pytest.raises(ValueError, match="the architecture: 'bert' is not one of the choices"):
        train_tab.start_run(toy_ctx, **{**form, "architecture": "bert"}, corpus_choice=train_tab.CORPORA[2],
                            pasted=HELLO, run_name="toy-3")
    # what Start would refuse (prepare_run) is said under the fields first
    two_layers = train_tab.estimate(2, *(fields[name] for name in train_tab.ESTIMATE_FIELDS[1:]))
    assert two_layers == "⚠️ notebook 004's model has one attention layer: layers_num must be 1 for architecture " \
                         "notebook_004, got 2"
    muon = train_tab.estimate(*(fields[name] for name in train_tab.ESTIMATE_FIELDS[:7]), "muon",
                              *(fields[name] for name in train_tab.ESTIMATE_FIELDS[8:]), limits=toy_ctx.limits)
    in_sight = muon.split("\n\n<details>")[0]  # before the estimate's fold
    assert in_sight.endswith("⚠️ notebook 004's model has no transformer blocks, whose matrices are what Muon trains: "
                             "pick the optimizer adamw")  # architectures.optimizer_refusal, as Start says it


def test_the_sample_tab_generates_from_w_and_inspects_a_character(toy_ctx):
    from playground.config import Limits
    from playground.ui import sample_tab
    from playground.ui.common import AppContext

    summary = sample_tab.checkpoint_summary(toy_ctx, "toy-1")
    assert "notebook 004's attention-only model" in summary and "no KV cache: each step re-reads the last 8 " \
        "characters, as the notebook's generate does" in summary
    default = sample_tab.DEFAULT_PROMPT
    assert sample_tab.fitting_prompt(toy_ctx, "toy-1", default, default) == ("w", default, "w")
    *_, (text, coloured, stats, history) = sample_tab.sample(toy_ctx, "toy-1", "w", 30, 0.8, 0, 1.0, 1, False, True)
    assert text.startswith("w") and len(text) == 31 and set(text) <= set(HELLO)
    assert "No KV cache: notebook 004's model re-reads its last 8 characters at every step (the notebook's " \
           "idx[:, -8:])" in stats and coloured.count("data-position") == 30
    assert [token["context"] for token in history["tokens"][:9]] == [1, 2, 3, 4, 5, 6, 7, 8, 8]
    top, attention, note = sample_tab.inspect_position(toy_ctx, history, 12, 0, 1)
    assert "layer 0, head 1" in attention.layout.title.text and "the model saw the last 8 characters" in note
    box = sample_tab.cache_box(toy_ctx, "toy-1")  # a ticked box changed nothing for this model: it says so
    assert box.interactive is False and "keeps no KV cache" in box.info
    shipped = AppContext(limits=Limits(), weights=checkpoints.REPO_WEIGHTS_DIR)
    assert sample_tab.cache_box(shipped, checkpoints.DEFAULT_CHECKPOINT).interactive is True


def test_the_head_table_scores_the_toys_heads(toy_ctx):
    from playground.ui import head_table

    _, note = head_table.score_table(toy_ctx, "toy-1")
    assert note.startswith("toy-1: 1 layer × 2 heads scored")


def test_the_views_that_read_a_gpts_blocks_refuse_it_in_a_sentence_never_a_traceback(toy_ctx):
    import gradio as gr

    from playground.lens.anatomy.lessons import LEVEL_TITLES
    from playground.lens.walkthrough import STEP_TITLES
    from playground.ui import attention_tab, model_tab
    from playground.ui.common import friendly

    where = "toy-1 is notebook 004's attention-only model .*: open it in the Sample tab"
    attention = ["trained checkpoint", "toy-1", 0, 0, 0, 16, 8, "journey", "hello", True, True, 1.0, False,
                 STEP_TITLES[0]]
    with pytest.raises(ArchitectureError, match=f"{where}.*one head's weights needs a GPT checkpoint"):
        attention_tab.attention_step(toy_ctx, *attention, None)
    with pytest.raises(ArchitectureError, match=where):
        attention_tab.attention_page(toy_ctx, *attention, None, [])
    with pytest.raises(ArchitectureError, match=where):
        attention_tab.export_step(toy_ctx, *attention)
    with pytest.raises(ArchitectureError, match=f"{where}.*the Model tab needs a GPT checkpoint"):
        model_tab.model_view(toy_ctx, "trained checkpoint", "toy-1", "hello", LEVEL_TITLES[0], 0, 0, -1, 0, "pre",
                             "decoder", "gelu", 0.0, 0)
    with pytest.raises(gr.Error, match="toy-1 is notebook 004's attention-only model"):  # the page's toast
        friendly(model_tab.model_view)(toy_ctx, "trained checkpoint", "toy-1", "hello", LEVEL_TITLES[0], 0, 0, -1, 0,
                                       "pre", "decoder", "gelu", 0.0, 0)


def test_the_why_tab_explains_the_toys_guess_head_by_head(toy_ctx):
    """Notebook 004's model has no residual, norm or MLP: its logit is each head through its columns of the output
    projection, the projection's bias and the output layer's bias, and the bars sum to it."""
    import json
    import re

    from playground.ui import why_reading, why_tab

    view = why_tab.explain(toy_ctx, "toy-1", "hello wo", 4, "", why_tab.STRONGEST, ["L0 H1"], "zero", why_reading.ALONE)
    bars = view.parts.data[0]
    assert list(bars.customdata) == ["L0 H0", "L0 H1", "L0 attention bias", "output bias"]
    logit = float(re.search(r"its logit (-?[\d.]+) is the sum of these 4 bars", view.heading).group(1))
    assert sum(bars.x) == pytest.approx(logit, abs=2e-3)
    assert view.heading.startswith("### Why `") and "(position 4)" in view.heading
    assert re.match(r"### L0 H[01] at position 4", view.head_heading)
    assert "What L0 H" in view.circuits_heading and "Notebook 004's model" in view.circuits_heading
    assert view.qk.data[0].z.shape == view.ov.data[0].z.shape == (8, 8)  # the lab's 8 characters
    assert view.knock_heading.startswith("### Knocked out: L0 H1\n") and len(view.ranking.data[0].x) == 2
    deck, *_ = why_tab.why_deck(toy_ctx, "toy-1", "hello wo", "", why_tab.STRONGEST, [], "zero", {})
    assert len(json.loads(deck)["views"]) == len("hello wo")


def test_the_toy_preset_sets_up_the_labs_pasted_text():
    """Picking the toy preset switched nothing but the shape: Start then trained the lab's model on Shakespeare."""
    import gradio as gr

    from playground.ui import train_tab

    assert train_tab.lab_corpus("toy", "") == (train_tab.CORPORA[2], "hello world")
    choice, kept = train_tab.lab_corpus("toy", "my own text")
    assert choice == train_tab.CORPORA[2] and kept == gr.skip()  # what the learner pasted stays
    assert train_tab.lab_corpus("tiny", "") == (gr.skip(), gr.skip())
