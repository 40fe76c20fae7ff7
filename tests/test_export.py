"""Export in GPT-2's layout: ``transformers`` (a test-only dependency) opens what playground.export writes with the
playground's logits and token IDs, and the playground opens it again; what GPT-2 cannot hold is refused by name."""

from __future__ import annotations

import io
import json

import pytest
import torch
from conftest import REPO

from playground.checkpoints import gpt2
from playground.checkpoints import store as checkpoints
from playground.checkpoints.export import ExportError, export_gpt2
from playground.checkpoints.store import load_checkpoint, save_checkpoint
from playground.cli import export as export_cli
from playground.config import ModelConfig
from playground.model.gpt import GPT
from playground.text.tokenizer import CharTokenizer

TEXT = "to be, or not to be: é\n"
PROMPT = "not to be, é\n"


def make_run(directory, *, use_bias=False, tie=False, activation="gelu", tokenizer=None, name="run", head_bias=False):
    """A saved run with random weights, and random biases and LayerNorms where it has them (so a dropped one shows)."""
    tokenizer = tokenizer or CharTokenizer.train_from_text(TEXT)
    torch.manual_seed(11)
    config = ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=16, embedding_dim=16, heads_num=2,
                         layers_num=2, use_bias=use_bias, tie_embeddings=tie, activation=activation,
                         layer_norm_eps=1e-6, head_bias=head_bias)
    model = GPT(config).eval()
    with torch.no_grad():
        for name_, parameter in model.named_parameters():
            if (name_.endswith("bias") and name_ != "lm_head.bias") or "ln_" in name_:
                parameter.add_(0.1 * torch.randn_like(parameter))
    save_checkpoint(model, tokenizer, name, directory=directory, training={"steps_done": 3, "owner": "abc"})
    return model, tokenizer


def transformers_pair(folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(folder).eval(), AutoTokenizer.from_pretrained(folder)


@pytest.mark.parametrize(("use_bias", "tie", "activation", "head_bias"), [
    (False, False, "gelu", False),  # the playground's own default: biases written as zeros, a head of its own
    (True, True, "gelu_tanh", False),  # GPT-2's own shape
    (True, False, "relu", False),  # --use-bias: biases in the blocks and norms, an untied head without one
    (True, False, "gelu", True),  # a run saved before --use-bias followed nanoGPT: its head's bias is zero here
    (False, True, "gelu", False),
])
def test_transformers_opens_an_export_with_the_same_logits_and_ids(tmp_path, use_bias, tie, activation, head_bias):
    model, tokenizer = make_run(tmp_path, use_bias=use_bias, tie=tie, activation=activation, head_bias=head_bias)
    folder = export_gpt2("run", tmp_path / "exported", directory=tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["n_embd"], config["n_head"], config["n_layer"], config["n_positions"],
            config["vocab_size"]) == ("gpt2", 16, 2, 2, 16, tokenizer.vocabulary_size)
    assert config["layer_norm_epsilon"] == 1e-6 and config["tie_word_embeddings"] is tie
    assert config["activation_function"] == gpt2.EXPORTED_ACTIVATIONS[activation]
    hf_model, hf_tokenizer = transformers_pair(folder)
    ids = hf_tokenizer(PROMPT)["input_ids"]
    assert ids == tokenizer.encode(PROMPT).tolist()
    assert hf_tokenizer.decode(ids) == PROMPT
    idx = torch.tensor([ids])
    with torch.no_grad():
        expected = model(idx).logits
        torch.testing.assert_close(hf_model(idx).logits, expected, atol=1e-4, rtol=0)
    reopened = load_checkpoint(folder)  # the playground opens its export too, characters and all
    assert reopened.layout == checkpoints.GPT2_LAYOUT and reopened.tokenizer == tokenizer
    with torch.no_grad():
        torch.testing.assert_close(reopened.model(idx).logits, expected, atol=1e-5, rtol=0)
    assert "owner" not in json.loads((folder / "training.json").read_text())  # a visitor's hash stays here


def test_transformers_pipeline_runs_on_an_export_of_the_shipped_model(tmp_path):
    """pipeline("text-generation", model=DIR)("ROMEO:") is the first call anyone makes. It asks for 256 new tokens
    by default, past the shipped model's 128 positions, and crashed on every export (IndexError in wpe) until the
    export wrote generation_config.json with max_length = the context."""
    from transformers import pipeline

    folder = export_gpt2("shakespeare-char", tmp_path / "shakespeare", directory=REPO / "weights")
    assert json.loads((folder / "generation_config.json").read_text()) == {"max_length": 128}  # no bos/eos
    generator = pipeline("text-generation", model=str(folder))
    torch.manual_seed(0)
    [reply] = generator("ROMEO:")
    text = reply["generated_text"]
    assert text.startswith("ROMEO:") and len(text) == 128  # characters: one token each, up to the context
    shipped = load_checkpoint("shakespeare-char", directory=REPO / "weights")
    idx = shipped.tokenizer.encode(text).unsqueeze(0)
    with torch.no_grad():
        torch.testing.assert_close(generator.model(idx).logits, shipped.model(idx).logits, atol=1e-4, rtol=0)


def test_the_card_names_the_folder_written_and_gives_the_runs_numbers(tmp_path):
    """The card told the reader to from_pretrained the .tmp-export-... folder that was then renamed away."""
    folder = export_gpt2("shakespeare-char", tmp_path / "out" / "shakespeare", directory=REPO / "weights")
    card = (folder / "README.md").read_text()
    assert f'from_pretrained("{folder}")' in card and f'pipeline("text-generation", model="{folder}")("ROMEO:")' in card
    assert ".tmp-export" not in card
    assert "| trained | 8,000 steps on tinyshakespeare (1,115,394 characters) |" in card
    assert "| validation loss | 1.4552 at step 8,000" in card and "| parameters | 1,820,736 |" in card


def test_a_bpe_export_names_its_end_of_text_token_for_generation(tmp_path):
    from test_gpt2 import train_bpe

    bpe = train_bpe()
    make_run(tmp_path, use_bias=True, tie=True, activation="gelu_tanh", tokenizer=bpe)
    folder = export_gpt2("run", tmp_path / "exported", directory=tmp_path)
    end = bpe.vocabulary_size - 1  # <|endoftext|>
    assert json.loads((folder / "generation_config.json").read_text()) == {
        "max_length": 16, "bos_token_id": end, "eos_token_id": end}
    from transformers import pipeline

    [reply] = pipeline("text-generation", model=str(folder))("ROMEO:")  # stops at <|endoftext|> or 16 tokens
    assert reply["generated_text"].startswith("ROMEO:")


def test_conv1d_orientation_and_names_are_gpt2s(tmp_path):
    from safetensors.torch import load_file

    model, _ = make_run(tmp_path, use_bias=True)
    state = load_file(str(export_gpt2("run", tmp_path / "x", directory=tmp_path) / "model.safetensors"))
    assert torch.equal(state["transformer.h.1.attn.c_attn.weight"], model.blocks[1].attn.qkv.weight.t())
    assert torch.equal(state["transformer.h.0.mlp.c_fc.bias"], model.blocks[0].mlp.fc.bias)
    assert "lm_head.weight" in state and "lm_head.bias" not in state


def test_a_bpe_run_keeps_its_tokenizer(tmp_path):
    from test_gpt2 import train_bpe

    bpe = train_bpe()
    model, _ = make_run(tmp_path, use_bias=True, tie=True, activation="gelu_tanh", tokenizer=bpe)
    folder = export_gpt2("run", tmp_path / "exported", directory=tmp_path)
    assert (folder / "tokenizer.json").read_text() == bpe.to_str()
    hf_model, hf_tokenizer = transformers_pair(folder)
    text = "To be, or not to be."
    ids = hf_tokenizer(text)["input_ids"]
    assert ids == bpe.encode(text).tolist() and hf_tokenizer.decode(ids) == text
    assert json.loads((folder / "config.json").read_text())["eos_token_id"] == bpe.vocabulary_size - 1
    with torch.no_grad():
        torch.testing.assert_close(hf_model(torch.tensor([ids])).logits, model(torch.tensor([ids])).logits,
                                   atol=1e-4, rtol=0)


def test_a_head_bias_gpt2_lacks_is_refused_with_the_reason(tmp_path):
    model, tokenizer = make_run(tmp_path, use_bias=True, head_bias=True)  # --use-bias before it followed nanoGPT
    with torch.no_grad():
        model.lm_head.bias.fill_(0.5)
    save_checkpoint(model, tokenizer, "biased", directory=tmp_path)
    with pytest.raises(ExportError, match=r"biased cannot be written in GPT-2's layout: the LM head has a bias "
                                          r"\(largest 0\.5\), and GPT-2's head has none: the run was trained with "
                                          r"--use-bias before it followed nanoGPT .*train it again, with --use-bias "
                                          r"or without, to export it"):
        export_gpt2("biased", tmp_path / "x", directory=tmp_path)
    assert not (tmp_path / "x").exists()


def test_a_use_bias_run_of_the_train_command_exports_and_generates(tmp_path, shakespeare_text):
    """--use-bias gave the LM head a bias GPT-2 has no place for, so no run trained with it could be exported (and
    nothing offered the tied head the refusal asked for). It now follows nanoGPT: no bias on the head."""
    from transformers import pipeline

    from playground.cli import train as train_cli

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(shakespeare_text[:20000], encoding="utf-8")
    assert train_cli.main(["--preset", "tiny", "--layers-num", "1", "--embedding-dim", "16", "--heads-num", "2",
                           "--context-size", "16", "--batch-size", "4", "--steps", "3", "--eval-interval", "3",
                           "--eval-batches", "1", "--use-bias", "--corpus", str(corpus), "--run-name", "biased",
                           "--weights-dir", str(tmp_path / "w"), "--device", "cpu"]) == 0
    run = load_checkpoint("biased", directory=tmp_path / "w")
    assert run.model.blocks[0].attn.qkv.bias is not None and run.model.ln_f.bias is not None
    assert run.model.lm_head.bias is None
    folder = export_gpt2(run, tmp_path / "exported")
    generator = pipeline("text-generation", model=str(folder))
    text = generator("ROMEO:")[0]["generated_text"]
    assert text.startswith("ROMEO:") and len(text) == 16
    idx = run.tokenizer.encode(text).unsqueeze(0)
    with torch.no_grad():
        torch.testing.assert_close(generator.model(idx).logits, run.model(idx).logits, atol=1e-4, rtol=0)


def test_notebook_004s_model_is_refused_as_what_it_is(tmp_path):
    from playground.config import NOTEBOOK_004
    from playground.model.families import build_model

    tokenizer = CharTokenizer.train_from_text("hello world")
    config = ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=8, embedding_dim=16, heads_num=2,
                         layers_num=1, architecture=NOTEBOOK_004)
    save_checkpoint(build_model(config), tokenizer, "toy", directory=tmp_path)
    with pytest.raises(ExportError) as refused:
        export_gpt2("toy", tmp_path / "x", directory=tmp_path)
    assert str(refused.value) == ("toy cannot be written in GPT-2's layout: notebook 004's model has no LayerNorm, MLP "
                                  "or residual, so it is not a GPT-2 (it is one attention layer whose heads read their "
                                  "own slices of the embedding)")


def test_an_activation_gpt2_lacks_is_refused():
    config = ModelConfig(vocabulary_size=5, context_size=4, embedding_dim=4, heads_num=1, layers_num=1)
    object.__setattr__(config, "activation", "swiglu")
    with pytest.raises(gpt2.LayoutError, match="activation 'swiglu' has no GPT-2 activation_function"):
        gpt2.gpt2_config(config)


def test_the_command_line_exports_and_refuses_to_write_over_a_folder(tmp_path):
    make_run(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    assert export_cli.main(["run", str(tmp_path / "hf"), "--weights-dir", str(tmp_path)], out, err) == 0
    assert out.getvalue().strip() == str(tmp_path / "hf")
    assert "AutoModelForCausalLM.from_pretrained" in err.getvalue()
    err = io.StringIO()
    assert export_cli.main(["run", str(tmp_path / "hf"), "--weights-dir", str(tmp_path)], io.StringIO(), err) == 2
    assert err.getvalue() == f"error: {tmp_path / 'hf'} already holds files: pass --replace to write over it, or " \
                             "another folder\n"
    assert export_cli.main(["run", str(tmp_path / "hf"), "--weights-dir", str(tmp_path), "--replace"],
                           io.StringIO(), io.StringIO()) == 0
    err = io.StringIO()
    assert export_cli.main(["nothing-here", str(tmp_path / "y"), "--weights-dir", str(tmp_path)],
                           io.StringIO(), err) == 2
    assert err.getvalue().startswith("error: no checkpoint named 'nothing-here'")


def test_replace_writes_over_an_earlier_export_only(tmp_path, monkeypatch):
    """--replace deleted whatever folder it was given: someone's files, a home folder with .ssh, the weights folder
    with the source run in it; "." gave a traceback. It writes over an earlier export (its files and nothing else)
    and refuses the rest, naming what is there, with exit code 2 and no traceback."""
    weights = tmp_path / "weights"
    make_run(weights)
    make_run(weights, name="other")

    def export(folder) -> tuple[int, str]:
        err = io.StringIO()
        code = export_cli.main(["run", str(folder), "--weights-dir", str(weights), "--replace"], io.StringIO(), err)
        return code, err.getvalue()

    earlier = tmp_path / "out" / "run-gpt2"
    assert export(earlier)[0] == 0 and export(earlier)[0] == 0  # an earlier export is replaced
    (earlier / "notes.txt").write_text("mine")
    code, message = export(earlier)
    assert code == 2 and "notes.txt" in message and "not an earlier export alone" in message
    assert (earlier / "notes.txt").read_text() == "mine"
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "thesis.tex").write_text("years of work")
    (papers / ".ssh").mkdir()
    code, message = export(papers)
    assert code == 2 and "thesis.tex" in message and ".ssh/" in message and (papers / "thesis.tex").is_file()
    for folder, words in ((weights, "the weights folder"), (weights / "other", "not an earlier export alone"),
                          (weights / "run", "the checkpoint itself")):
        code, message = export(folder)
        assert code == 2 and words in message, message
        assert (weights / "other" / checkpoints.CONFIG_FILE).is_file() and (weights / "run").is_dir()
    monkeypatch.setenv("HOME", str(papers))
    assert "the home folder" in export(papers)[1]
    monkeypatch.chdir(tmp_path / "out")
    for folder in (".", ".."):
        code, message = export(folder)
        assert code == 2 and "the current folder" in message and "Traceback" not in message, message
    assert (tmp_path / "out" / "run-gpt2").is_dir() and (papers / "thesis.tex").is_file()
