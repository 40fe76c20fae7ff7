"""The sampling CLI (playground/cli/sample.py, run as ``python -m playground.sample``), called through main() on a
tiny checkpoint in tmp_path."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from conftest import REPO

from playground.checkpoints.store import save_checkpoint
from playground.cli.sample import main
from playground.config import ModelConfig
from playground.model.gpt import GPT
from playground.text.tokenizer import CharTokenizer

TEXT = "to be or not to be, that is the question\n"


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    """A folder holding 'tiny': random weights scaled up so the next-character choice is never a near tie."""
    tokenizer = CharTokenizer.train_from_text(TEXT)
    torch.manual_seed(5)
    model = GPT(ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=32, embedding_dim=32,
                            heads_num=2, layers_num=2)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.mul_(20)
    folder = tmp_path_factory.mktemp("weights")
    save_checkpoint(model, tokenizer, "tiny", directory=folder)
    return folder


def sample(capsys, weights, *args):
    code = main(["--checkpoint", "tiny", "--weights-dir", str(weights), "--device", "cpu", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_prints_prompt_then_continuation_and_figures(capsys, weights):
    code, out, err = sample(capsys, weights, "--prompt", "to be", "--max-new-tokens", "12")
    assert code == 0
    assert out.startswith("to be") and out.endswith("\n") and len(out) == len("to be") + 12 + 1
    assert "12 tokens in" in err and "tokens/s" in err and "CPU" in err and "KV cache on" in err


def test_same_seed_same_text_and_another_seed_differs(capsys, weights):
    args = ("--prompt", "to", "--max-new-tokens", "40", "--temperature", "1.5", "--top-p", "0.95")
    first = sample(capsys, weights, *args, "--seed", "7")[1]
    assert sample(capsys, weights, *args, "--seed", "7")[1] == first
    assert sample(capsys, weights, *args, "--seed", "8")[1] != first


def test_greedy_with_and_without_kv_cache_agree(capsys, weights):
    args = ("--prompt", "that is", "--max-new-tokens", "24", "--greedy")  # 7 + 24 stays within context 32
    code, cached, err = sample(capsys, weights, *args)
    assert code == 0 and "KV cache on" in err
    code, uncached, err = sample(capsys, weights, *args, "--no-kv-cache")
    assert code == 0 and "KV cache off" in err
    assert cached == uncached


def test_empty_prompt_starts_from_a_newline(capsys, weights):
    code, out, err = sample(capsys, weights, "--prompt", "", "--max-new-tokens", "5", "--greedy")
    assert code == 0 and len(out) == 5 + 1 and "note:" not in err
    _, from_newline, _ = sample(capsys, weights, "--prompt", "\n", "--max-new-tokens", "5", "--greedy")
    assert from_newline == "\n" + out  # the same continuation: the empty prompt started from a newline


def test_empty_prompt_without_a_newline_starts_from_the_first_symbol(capsys, tmp_path):
    tokenizer = CharTokenizer.train_from_text("to be or not")
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=16, embedding_dim=16,
                            heads_num=2, layers_num=1))
    save_checkpoint(model, tokenizer, "no-newline", directory=tmp_path)
    code = main(["--checkpoint", "no-newline", "--weights-dir", str(tmp_path), "--device", "cpu", "--prompt", "",
                 "--max-new-tokens", "4", "--greedy"])
    out, err = capsys.readouterr()
    assert code == 0 and len(out) == 4 + 1
    assert "note: the prompt is empty and no-newline's vocabulary has no newline; starting from '␣'" in err


def test_drop_unknown_drops_with_a_note(capsys, weights):
    code, out, err = sample(capsys, weights, "--prompt", "to bé!", "--max-new-tokens", "3", "--drop-unknown")
    assert code == 0 and out.startswith("to b") and len(out) == len("to b") + 3 + 1
    assert "note: dropped 2 character(s)" in err and "'é' at position 4" in err


def test_top_k_above_vocabulary_is_clamped_with_a_note(capsys, weights):
    code, _, err = sample(capsys, weights, "--prompt", "to", "--max-new-tokens", "3", "--top-k", "500")
    vocabulary_size = len(set(TEXT))
    assert code == 0 and f"note: --top-k 500 is more than the {vocabulary_size} characters" in err


@pytest.mark.parametrize("args, message", [
    (["--prompt", "to bé!"], "'é' at position 4, '!' at position 5"),
    (["--prompt", "to bé!"], "--drop-unknown"),
    (["--temperature", "-1"], "--temperature must be at least 0 (0 is greedy decoding"),
    (["--temperature", "-1"], "--temperature"),
    (["--temperature", "nan"], "--temperature"),
    (["--temperature", "warm"], "invalid float value"),
    (["--top-p", "0"], "--top-p must be in (0, 1]"),
    (["--top-p", "1.5"], "--top-p must be in (0, 1]"),
    (["--top-k", "0"], "--top-k must be positive, got 0"),
    (["--max-new-tokens", "2001"], "--max-new-tokens must be at most 2000"),
    (["--max-new-tokens", "-1"], "--max-new-tokens must be at least 0, got -1"),
    (["--seed", "-3"], "--seed must be at least 0"),
    (["--checkpoint", "nope"], "no checkpoint named 'nope'"),
    (["--checkpoint", "../etc"], "not allowed"),
    (["--device", "tpu"], "unknown device 'tpu'"),
    (["--no-such-flag"], "unrecognized arguments"),
])
def test_bad_input_is_one_error_line_and_exit_2(capsys, weights, args, message):
    code, out, err = sample(capsys, weights, *args)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert message in err
    assert out == ""


def test_corrupt_checkpoint_is_an_error_line(capsys, weights, tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    for file in (weights / "tiny").iterdir():
        (broken / file.name).write_bytes(file.read_bytes())
    (broken / "model.safetensors").write_bytes(b"not safetensors at all")
    code, _, err = sample(capsys, weights, "--checkpoint", str(broken))
    assert code == 2 and err.startswith("error: ") and "corrupt or not safetensors" in err


def test_unavailable_device_is_an_error_line(capsys, weights):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = sample(capsys, weights, "--device", "cuda")
    assert code == 2 and err.startswith("error: device 'cuda' is not available on this machine")


def test_max_new_tokens_cap_comes_from_the_environment(capsys, weights, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MAX_NEW_TOKENS", "10")
    code, _, err = sample(capsys, weights, "--max-new-tokens", "11")
    assert code == 2 and "--max-new-tokens must be at most 10 (the limit PLAYGROUND_MAX_NEW_TOKENS sets)" in err


def test_hub_id_offline_and_uncached_is_an_error_line(capsys, weights, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))  # conftest keeps PLAYGROUND_OFFLINE=1
    code, _, err = sample(capsys, weights, "--checkpoint", "learner/tiny-char")
    assert code == 2
    assert err == ("error: cannot reach the Hugging Face Hub (offline?) and learner/tiny-char "
                   "is not in the local cache\n")


def test_runs_as_a_module(weights):
    result = subprocess.run(
        [sys.executable, "-m", "playground.sample", "--checkpoint", "tiny", "--weights-dir", str(weights),
         "--device", "cpu", "--prompt", "to", "--max-new-tokens", "4", "--greedy"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("to") and len(result.stdout) == 2 + 4 + 1
    assert "4 tokens in" in result.stderr and "Traceback" not in result.stderr


def sliding_window_text(model, tokenizer, prompt: str, new_tokens: int, context_size: int) -> str:
    """Greedy text as nanoGPT's sample.py draws it: each step reads the last ``context_size`` tokens, no cache.
    ``model(idx)`` gives logits (B, T, V): the playground's GPT or a transformers model."""
    ids = tokenizer.encode(prompt).tolist()
    with torch.no_grad():
        for _ in range(new_tokens):
            logits = model(torch.tensor([ids[-context_size:]])).logits
            ids.append(int(logits[0, -1].argmax()))
    return tokenizer.decode(ids)


def test_past_the_context_the_command_line_says_where_the_cache_was_rebuilt(capsys, weights):
    from playground.checkpoints.store import load_checkpoint
    from playground.model.sampling import SamplingSettings, stream

    loaded = load_checkpoint("tiny", directory=weights)
    tokens = list(stream(loaded.model, loaded.tokenizer, "to be", SamplingSettings(max_new_tokens=40, greedy=True)))
    first = next(i + 1 for i in range(1, len(tokens)) if tokens[i].cache_length < tokens[i - 1].cache_length)
    code, _, err = sample(capsys, weights, "--prompt", "to be", "--max-new-tokens", "40", "--greedy")
    assert code == 0
    assert (f"note: the KV cache was full at the context of 32 and was rebuilt from the last 16 characters before "
            f"new character {first}: from there this text may part from an uncached sliding window over the last 32 "
            "(nanoGPT's sample.py, transformers); --no-kv-cache gives that text") in err
    code, _, err = sample(capsys, weights, "--prompt", "to be", "--max-new-tokens", "20", "--greedy")
    assert "rebuilt" not in err  # within the context nothing is said


def test_no_kv_cache_gives_the_sliding_window_text_of_nanogpt_and_transformers(capsys, weights, tmp_path):
    from transformers import AutoModelForCausalLM

    from playground.checkpoints.export import export_gpt2
    from playground.checkpoints.store import load_checkpoint

    loaded = load_checkpoint("tiny", directory=weights)
    code, out, err = sample(capsys, weights, "--prompt", "to be", "--max-new-tokens", "60", "--greedy",
                            "--no-kv-cache")
    assert code == 0 and "rebuilt" not in err
    assert out == sliding_window_text(loaded.model, loaded.tokenizer, "to be", 60, 32) + "\n"
    exported = AutoModelForCausalLM.from_pretrained(export_gpt2(loaded, tmp_path / "hf")).eval()
    assert out == sliding_window_text(exported, loaded.tokenizer, "to be", 60, 32) + "\n"
