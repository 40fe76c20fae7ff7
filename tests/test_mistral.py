"""Mistral (the Llama layout with one ``sliding_window`` for every layer) against transformers (test-only): tiny random
``MistralForCausalLM`` models whose window is shorter than the text, opened from a folder and from the stub Hub. Logits
within 1e-4 (eager and sdpa), every layer's weights within 1e-5 of ``output_attentions``, greedy text through the KV
cache equal to transformers' greedy ``generate`` over a prompt and generation longer than the window, and export
writes the family back as mistral.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_gpt2 import train_bpe
from test_hub import SHA, StubHub

from playground.checkpoints import export, loading
from playground.checkpoints import llama as llama_layout
from playground.checkpoints import store as checkpoints
from playground.checkpoints.store import CheckpointError, load_checkpoint, save_checkpoint
from playground.config import LLAMA_FAMILY, ConfigError, ModelConfig
from playground.model.base import run_with_cache
from playground.model.families import build_model
from playground.model.gpt import causal_mask
from playground.model.sampling import SamplingSettings, stream
from playground.text.tokenizer import CharTokenizer

PROMPT = "To be, or not to be: that is the question"
# name -> (hidden_size, heads, K/V heads, sliding_window, rope_theta, tied head, head_dim given, sharded)
SHAPES = {
    "mistral-4over2-w5": (32, 4, 2, 5, 1e4, False, False, False),
    "mistral-6over2-w3-tied": (48, 6, 2, 3, 1e6, True, True, True),
    "mistral-2over1-w8": (32, 2, 1, 8, 1e4, False, True, False),
}


def make_tiny_mistral(folder: Path, name: str):
    """(transformers' MistralForCausalLM, its tokenizer, the folder it was saved to) for SHAPES[name], the RMSNorms'
    scales moved off 1 so a mapping that dropped one would show."""
    from transformers import MistralConfig, MistralForCausalLM

    hidden, heads, kv_heads, window, theta, tied, head_dim, sharded = SHAPES[name]
    tokenizer = train_bpe(300)
    torch.manual_seed(5)
    config = MistralConfig(vocab_size=tokenizer.vocabulary_size, hidden_size=hidden, intermediate_size=2 * hidden + 8,
                           num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv_heads,
                           head_dim=hidden // heads if head_dim else None, sliding_window=window,
                           max_position_embeddings=64, rope_theta=theta, tie_word_embeddings=tied, rms_norm_eps=1e-5,
                           bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation="eager")
    model = MistralForCausalLM(config).eval()
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            if "norm" in parameter_name:
                parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(folder, max_shard_size="20KB" if sharded else "5GB")
    (folder / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
    return model, tokenizer, folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    built = {}

    def get(name: str):
        if name not in built:
            built[name] = make_tiny_mistral(tmp_path_factory.mktemp(name), name)
        return built[name]
    return get


def open_folder(folder: Path) -> checkpoints.Checkpoint:
    return loading.open_checkpoint(folder, allow_folders=True)


def test_the_mask_keeps_the_window_ending_at_each_query_as_transformers_overlay():
    from transformers.masking_utils import and_masks, causal_mask_function, sliding_window_overlay

    for window in (1, 2, 3, 7):
        rule = and_masks(causal_mask_function, sliding_window_overlay(window))
        for query_len, key_len in ((6, 6), (1, 9), (3, 9)):
            start = key_len - query_len  # the queries are the last query_len positions, as in the KV cache
            expected = torch.tensor([[bool(rule(0, 0, torch.tensor(start + i), torch.tensor(j)))
                                      for j in range(key_len)] for i in range(query_len)])
            assert torch.equal(causal_mask(query_len, key_len, window=window), expected), (window, query_len)
    assert causal_mask(4, 4, window=2).sum(-1).tolist() == [1, 2, 2, 2]  # at most 2 keys, itself included
    assert torch.equal(causal_mask(5, 5, window=5), causal_mask(5, 5))


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_logits_match_transformers_with_the_window_shorter_than_the_text(tiny, name, implementation):
    from transformers import MistralForCausalLM

    _, tokenizer, folder = tiny(name)
    reference = MistralForCausalLM.from_pretrained(folder, attn_implementation=implementation).eval()
    checkpoint = open_folder(folder)
    assert checkpoint.config.sliding_window == SHAPES[name][3] and checkpoint.config.is_llama
    assert checkpoint.model.parameter_count() == reference.num_parameters() == checkpoint.config.parameter_count()
    ids = tokenizer.encode(PROMPT)[None]  # (1, T)
    assert ids.size(1) > 2 * SHAPES[name][3]
    with torch.no_grad():
        expected = reference(ids).logits
        torch.testing.assert_close(checkpoint.model(ids).logits, expected, atol=1e-4, rtol=0)
        torch.testing.assert_close(checkpoint.model(ids, return_attention=True).logits, expected, atol=1e-4, rtol=0)
        full = checkpoint.model.blocks[0].attn.sliding_window
        checkpoint.model.blocks[0].attn.sliding_window = None  # the window matters: without it the logits move
        assert not torch.allclose(checkpoint.model(ids).logits, expected, atol=1e-3)
        checkpoint.model.blocks[0].attn.sliding_window = full


@pytest.mark.parametrize("name", SHAPES)
def test_every_layers_weights_and_run_with_caches_scores_keep_the_window(tiny, name):
    reference, tokenizer, folder = tiny(name)
    window = SHAPES[name][3]
    checkpoint = open_folder(folder)
    ids = tokenizer.encode(PROMPT)[None]
    T = ids.size(1)
    with torch.no_grad():
        expected = reference(ids, output_attentions=True).attentions
        ours = checkpoint.model(ids, return_attention=True).attention_weights
    _, cache = run_with_cache(checkpoint.model, ids, {"attn.hook_attn_scores", "attn.hook_pattern"})
    outside = ~causal_mask(T, T, window=window)  # (T, T): later keys and keys window or more back
    assert outside[T - 1, T - 1 - window] and not outside[T - 1, T - window]
    for layer, theirs in enumerate(expected):
        assert ours[layer].shape == theirs.shape == (1, SHAPES[name][1], T, T)
        torch.testing.assert_close(ours[layer], theirs, atol=1e-5, rtol=0)
        torch.testing.assert_close(cache[f"blocks.{layer}.attn.hook_pattern"], theirs, atol=1e-5, rtol=0)
        scores = cache[f"blocks.{layer}.attn.hook_attn_scores"][0]  # (h, T, T)
        assert torch.isneginf(scores[:, outside]).all() and torch.isfinite(scores[:, ~outside]).all()
        assert (theirs[0][:, outside] == 0).all()


@pytest.mark.parametrize("name", SHAPES)
def test_greedy_text_through_the_kv_cache_past_the_window_is_transformers_generate(tiny, name):
    reference, tokenizer, folder = tiny(name)
    checkpoint = open_folder(folder)
    ids = tokenizer.encode(PROMPT)[None]
    with torch.no_grad():
        generated = reference.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=16,
                                       pad_token_id=0, eos_token_id=None)
    for use_cache in (True, False):
        ours = list(stream(checkpoint.model, checkpoint.tokenizer, PROMPT,
                           SamplingSettings(max_new_tokens=16, greedy=True), use_cache=use_cache))
        assert [t.token_id for t in ours] == generated[0, ids.size(1):].tolist(), use_cache
    assert ours[-1].text is not None and ids.size(1) + 16 > 3 * SHAPES[name][3]


def test_one_opens_from_the_stub_hub_and_a_refusal_there_names_the_repo(tiny, tmp_path, monkeypatch):
    reference, tokenizer, folder = tiny("mistral-6over2-w3-tied")  # sharded
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}
    mixed = {**json.loads(files["config.json"]), "layer_types": ["full_attention", "sliding_attention"]}
    stub = StubHub({"learner/tiny-mistral": files, "learner/mixed-mistral": {**files, "config.json":
                                                                              json.dumps(mixed).encode()}})
    stub.serve(monkeypatch, tmp_path / "hf-cache")
    try:
        checkpoint = loading.open_checkpoint("learner/tiny-mistral")
        ids = tokenizer.encode(PROMPT)[None]
        with torch.no_grad():
            torch.testing.assert_close(checkpoint.model(ids).logits, reference(ids).logits, atol=1e-4, rtol=0)
        assert checkpoint.description.startswith("Mistral layout from learner/tiny-mistral: 6 query heads over 2 K/V")
        assert "a sliding window of 3 keys" in checkpoint.description
        with pytest.raises(CheckpointError) as refused:
            loading.open_checkpoint("learner/mixed-mistral")
    finally:
        stub.server.shutdown()
        stub.server.server_close()
    message = str(refused.value)
    assert message.startswith("learner/mixed-mistral/config.json is not a valid model config") and SHA not in message
    assert "layer_types mixes full and sliding-window layers" in message


def _changed_copy(folder: Path, target: Path, setting: dict) -> Path:
    target.mkdir()
    for file in folder.iterdir():
        if file.is_file():
            (target / file.name).write_bytes(file.read_bytes())
    data = {**json.loads((target / "config.json").read_text()), **setting}
    data = {key: value for key, value in data.items() if value != "leave out"}
    (target / "config.json").write_text(json.dumps(data))
    return target


@pytest.mark.parametrize("setting, window", [({"sliding_window": None}, None), ({"sliding_window": "leave out"}, 4096)])
def test_a_null_window_is_full_causal_and_a_missing_one_is_transformers_default(tiny, tmp_path, setting, window):
    from transformers import MistralForCausalLM

    _, tokenizer, folder = tiny("mistral-4over2-w5")
    copy = _changed_copy(folder, tmp_path / "changed", setting)
    checkpoint = open_folder(copy)
    assert checkpoint.config.sliding_window == window
    assert MistralForCausalLM.from_pretrained(copy).config.sliding_window == window
    ids = tokenizer.encode(PROMPT)[None]
    with torch.no_grad():
        expected = MistralForCausalLM.from_pretrained(copy, attn_implementation="eager").eval()(ids).logits
        torch.testing.assert_close(checkpoint.model(ids).logits, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("setting, refusal", [
    ({"sliding_window": 0}, "sliding_window must be"),
    ({"sliding_window": 2.5}, "sliding_window must be a whole number"),
    ({"head_dim": 16}, "head_dim 16 is not hidden_size / num_attention_heads"),
    ({"layer_types": ["sliding_attention", "full_attention"]}, "layer_types mixes"),
])
def test_what_the_model_lacks_is_refused_with_its_reason(tiny, tmp_path, setting, refusal):
    _, _, folder = tiny("mistral-4over2-w5")
    copy = _changed_copy(folder, tmp_path / "changed", setting)
    with pytest.raises(CheckpointError, match="changed/config.json is not a valid model config") as refused:
        open_folder(copy)
    assert refusal in str(refused.value)


def test_qwen2s_sliding_window_stays_refused():
    data = {"model_type": "qwen2", "hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2,
            "num_hidden_layers": 2, "intermediate_size": 64, "max_position_embeddings": 64, "vocab_size": 300,
            "use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}
    with pytest.raises(llama_layout.LayoutError, match="use_sliding_window true"):
        llama_layout.model_config(data)
    assert llama_layout.model_config({**data, "use_sliding_window": False}).sliding_window is None


def test_the_window_is_a_checked_field_of_the_llama_family_only():
    config = ModelConfig(vocabulary_size=10, embedding_dim=16, heads_num=2, family=LLAMA_FAMILY, activation="silu",
                         sliding_window=4.0)
    assert config.sliding_window == 4 and isinstance(config.sliding_window, int)
    assert ModelConfig.from_dict(config.to_dict()) == config and config.to_dict()["sliding_window"] == 4
    assert "sliding_window" not in ModelConfig(vocabulary_size=10, family=LLAMA_FAMILY, activation="silu").to_dict()
    with pytest.raises(ConfigError, match="sliding_window belongs to the family llama"):
        ModelConfig(vocabulary_size=10, sliding_window=4)
    with pytest.raises(ConfigError, match="sliding_window"):
        ModelConfig(vocabulary_size=10, family=LLAMA_FAMILY, activation="silu", sliding_window=0)
    with pytest.raises(llama_layout.LayoutError, match="q/k/v biases and a sliding window"):
        llama_layout.llama_config(ModelConfig(vocabulary_size=10, family=LLAMA_FAMILY, activation="silu",
                                              qkv_bias=True, sliding_window=4))


def test_export_writes_it_back_as_mistral(tiny, tmp_path):
    reference, tokenizer, folder = tiny("mistral-4over2-w5")
    target = export.export_gpt2(open_folder(folder), tmp_path / "exported")
    data = json.loads((target / "config.json").read_text())
    assert data["model_type"] == "mistral" and data["sliding_window"] == 5
    from transformers import AutoModelForCausalLM

    rebuilt = AutoModelForCausalLM.from_pretrained(target).eval()
    assert type(rebuilt).__name__ == "MistralForCausalLM"
    ids = tokenizer.encode(PROMPT)[None]
    with torch.no_grad():
        expected = reference(ids).logits
        torch.testing.assert_close(rebuilt(ids).logits, expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(open_folder(target).model(ids).logits, expected, atol=1e-4, rtol=0)


def test_a_playground_model_with_a_window_exports_for_transformers(tmp_path):
    tokenizer = CharTokenizer.train_from_text("to be or not to be, that is the question\n")
    config = ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=16, embedding_dim=16, heads_num=4,
                         layers_num=2, family=LLAMA_FAMILY, activation="silu", kv_heads_num=2, intermediate_size=24,
                         sliding_window=3)
    torch.manual_seed(4)
    save_checkpoint(build_model(config).eval(), tokenizer, "tiny-mistral", directory=tmp_path)
    checkpoint = load_checkpoint("tiny-mistral", directory=tmp_path)
    assert checkpoint.config.sliding_window == 3
    target = export.export_gpt2(checkpoint, tmp_path / "exported")
    from transformers import AutoModelForCausalLM

    rebuilt = AutoModelForCausalLM.from_pretrained(target).eval()
    assert type(rebuilt).__name__ == "MistralForCausalLM"
    ids = tokenizer.encode("that is the q")[None]
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(ids).logits, checkpoint.model(ids).logits, atol=1e-5, rtol=0)
