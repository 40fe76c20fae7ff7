"""The Llama family against transformers (a test-only dependency): tiny random ``LlamaForCausalLM`` and
``Qwen2ForCausalLM`` at several shapes (query heads over K/V heads 4:2, 4:1, 6:3, 2:2; rotary bases 1e4 and 1e6; tied
and untied heads; Qwen2's q/k/v biases), saved with save_pretrained (one file, or shards) beside a tokenizer.json,
opened through the one loader from a folder and from the stub Hub. Logits match transformers' eager and sdpa
attention within 1e-4, every layer's weights match ``output_attentions`` within 1e-5, greedy text through the KV
cache is transformers' greedy ``generate``, and the cache holds kv_heads / heads of an ungrouped cache's bytes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_gpt2 import TRAINING_TEXT, train_bpe
from test_hub import SHA, StubHub

from playground.checkpoints import export, loading
from playground.checkpoints import llama as llama_layout
from playground.checkpoints import store as checkpoints
from playground.checkpoints.hub import HubError
from playground.checkpoints.store import CheckpointError, load_checkpoint, save_checkpoint
from playground.config import ConfigError, ModelConfig
from playground.model.base import POINTS, Recorder
from playground.model.families import ArchitectureError, build_model, require_gpt
from playground.model.gpt import KVCache
from playground.model.llama import Llama, apply_rotary_pos_emb, rotary_cos_sin
from playground.model.sampling import SamplingSettings, sampling_cost, stream
from playground.text.subword import BPETokenizer
from playground.text.tokenizer import CharTokenizer

PROMPT = "To be, or not to be: that is the question"
# name -> (model_type, hidden_size, heads, K/V heads, rope_theta, tied head, tokenizer, sharded)
SHAPES = {
    "llama-4over2": ("llama", 32, 4, 2, 1e4, False, "byte-level", False),
    "llama-4over1-tied": ("llama", 32, 4, 1, 1e6, True, "byte-level", True),
    "llama-6over3-sentencepiece": ("llama", 48, 6, 3, 1e4, True, "sentencepiece", False),
    "qwen2-2over2": ("qwen2", 32, 2, 2, 1e6, False, "byte-level", True),
    "qwen2-4over2-tied": ("qwen2", 64, 4, 2, 1e4, True, "byte-level", False),
}


def train_sentencepiece_style(vocabulary_size: int = 300) -> BPETokenizer:
    """A BPE written SentencePiece's way, as TinyLlama's tokenizer.json is: a space is "▁" glued to the next word
    (the tokenizers library's Metaspace), <unk>, <s> and </s> first."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=vocabulary_size, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    tokenizer.train_from_iterator([TRAINING_TEXT] * 4, trainer)
    return BPETokenizer.from_str(tokenizer.to_str())


def reference_class(model_type: str):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    return (LlamaConfig, LlamaForCausalLM) if model_type == "llama" else (Qwen2Config, Qwen2ForCausalLM)


def make_tiny(folder: Path, name: str):
    """(transformers' model, its tokenizer, the folder it was saved to) for SHAPES[name]: random weights, with the
    RMSNorms' scales and Qwen2's biases moved off their initial 1 and 0 so a mapping that dropped one would show."""
    model_type, hidden, heads, kv_heads, theta, tied, kind, sharded = SHAPES[name]
    tokenizer = train_bpe(300) if kind == "byte-level" else train_sentencepiece_style(300)
    config_class, model_class = reference_class(model_type)
    torch.manual_seed(11)
    config = config_class(vocab_size=tokenizer.vocabulary_size, hidden_size=hidden, intermediate_size=2 * hidden + 16,
                          num_hidden_layers=2, num_attention_heads=heads, num_key_value_heads=kv_heads,
                          max_position_embeddings=64, rope_theta=theta, tie_word_embeddings=tied, rms_norm_eps=1e-5,
                          bos_token_id=None, eos_token_id=None, pad_token_id=None, attn_implementation="eager")
    model = model_class(config).eval()
    with torch.no_grad():
        for parameter_name, parameter in model.named_parameters():
            if "norm" in parameter_name or parameter_name.endswith("bias"):
                parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(folder, max_shard_size="20KB" if sharded else "5GB")
    (folder / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
    return model, tokenizer, folder


def open_folder(folder: Path) -> checkpoints.Checkpoint:
    return loading.open_checkpoint(folder, allow_folders=True)


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_logits_match_transformers(tiny, name, implementation):
    _, tokenizer, folder = tiny(name)
    _, model_class = reference_class(SHAPES[name][0])
    reference = model_class.from_pretrained(folder, attn_implementation=implementation).eval()
    checkpoint = open_folder(folder)
    assert checkpoint.layout == checkpoints.LLAMA_LAYOUT and checkpoint.config.is_llama
    assert checkpoint.model.parameter_count() == reference.num_parameters() == checkpoint.config.parameter_count()
    if SHAPES[name][7]:
        assert (folder / checkpoints.INDEX_FILE).is_file() and not (folder / checkpoints.WEIGHTS_FILE).exists()
    ids = tokenizer.encode(PROMPT)[None]  # (1, T)
    with torch.no_grad():
        expected = reference(ids).logits
        torch.testing.assert_close(checkpoint.model(ids).logits, expected, atol=1e-4, rtol=0)
        torch.testing.assert_close(checkpoint.model(ids, return_attention=True).logits, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", SHAPES)
def test_every_layers_attention_weights_match_output_attentions(tiny, name):
    reference, tokenizer, folder = tiny(name)
    checkpoint = open_folder(folder)
    ids = tokenizer.encode(PROMPT)[None]
    with torch.no_grad():
        expected = reference(ids, output_attentions=True).attentions
        ours = checkpoint.model(ids, return_attention=True).attention_weights
    assert len(ours) == len(expected) == 2
    for layer, (mine, theirs) in enumerate(zip(ours, expected)):
        assert mine.shape == theirs.shape == (1, SHAPES[name][2], ids.size(1), ids.size(1)), layer
        torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", SHAPES)
def test_greedy_text_with_the_kv_cache_is_transformers_generate(tiny, name):
    reference, tokenizer, folder = tiny(name)
    checkpoint = open_folder(folder)
    ids = tokenizer.encode(PROMPT)[None]
    with torch.no_grad():
        generated = reference.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=16,
                                       pad_token_id=0, eos_token_id=None)
    ours = list(stream(checkpoint.model, checkpoint.tokenizer, PROMPT, SamplingSettings(max_new_tokens=16, greedy=True),
                       use_cache=True))
    assert ours[-1].cache_length == ids.size(1) + 15  # every step after the prompt read one token against the cache
    assert [t.token_id for t in ours] == generated[0, ids.size(1):].tolist()
    assert PROMPT + "".join(t.text for t in ours) == tokenizer.decode(generated[0])


@pytest.mark.parametrize("name", ["llama-4over2", "llama-4over1-tied", "llama-6over3-sentencepiece"])
def test_the_kv_cache_keeps_the_grouped_heads_rotated_at_their_true_positions(tiny, name):
    reference, tokenizer, folder = tiny(name)
    _, _, heads, kv_heads, *_ = SHAPES[name]
    model = open_folder(folder).model
    ids = tokenizer.encode(PROMPT)[None]
    T, d, layers = ids.size(1), model.config.head_size, model.config.layers_num
    with torch.no_grad():
        expected = reference(ids).logits
        cache = KVCache.empty(layers)
        prompt = model(ids[:, :5], cache=cache).logits  # then one token at a time against the cache
        steps = [model(ids[:, t:t + 1], cache=cache).logits for t in range(5, T)]
    torch.testing.assert_close(torch.cat([prompt, *steps], dim=1), expected, atol=1e-4, rtol=0)
    assert cache.keys[0].shape == (1, kv_heads, T, d)
    ungrouped = 2 * layers * T * heads * d * 4  # one K/V head per query head, fp32
    assert cache.bytes * heads == ungrouped * kv_heads
    assert cache.bytes == T * model.config.kv_cache_bytes_per_token()
    grouped_cost = dict(sampling_cost(model.config, model.parameter_count()).parts)["KV cache"]
    assert grouped_cost == model.config.context_size * model.config.kv_cache_bytes_per_token()


def test_a_sentencepiece_style_tokenizer_opens_as_text_not_bytes(tiny):
    _, tokenizer, folder = tiny("llama-6over3-sentencepiece")
    opened = open_folder(folder).tokenizer
    assert isinstance(opened, BPETokenizer) and not opened.byte_level and opened == tokenizer
    assert opened.decode(opened.encode(PROMPT)) == PROMPT
    assert opened.pieces("to be")[0].label.startswith("␣")  # "▁to": the space it carries, shown as ␣


def test_one_opens_from_the_stub_hub_and_a_refusal_there_names_the_repo(tiny, tmp_path, monkeypatch):
    reference, tokenizer, folder = tiny("qwen2-2over2")  # sharded, with biases
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")}
    scaled = {**json.loads(files["config.json"]), "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    stub = StubHub({"learner/tiny-qwen2": files, "learner/yarn-qwen2": {**files, "config.json":
                                                                         json.dumps(scaled).encode()}})
    stub.serve(monkeypatch, tmp_path / "hf-cache")
    try:
        checkpoint = loading.open_checkpoint("learner/tiny-qwen2")
        ids = tokenizer.encode(PROMPT)[None]
        with torch.no_grad():
            torch.testing.assert_close(checkpoint.model(ids).logits, reference(ids).logits, atol=1e-4, rtol=0)
        assert checkpoint.description.startswith("Qwen2 layout from learner/tiny-qwen2: 2 query heads over 2 K/V")
        with pytest.raises(CheckpointError) as refused:
            loading.open_checkpoint("learner/yarn-qwen2")
    finally:
        stub.server.shutdown()
        stub.server.server_close()
    message = str(refused.value)
    assert message.startswith("learner/yarn-qwen2/config.json is not a valid model config") and SHA not in message
    assert "rope_type 'yarn'" in message and "default rope type only" in message


@pytest.mark.parametrize("setting, refusal", [
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                       "original_max_position_embeddings": 8192}}, "rope_scaling has rope_type 'llama3'"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}},
     "rope_parameters has rope_type 'linear'"),
    ({"attention_bias": True}, "puts a bias on o_proj"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu' is not silu"),
    ({"head_dim": 16}, "head_dim 16 is not hidden_size / num_attention_heads"),
    ({"num_key_value_heads": 3}, "heads_num 4 is not divisible by kv_heads_num 3"),
])
def test_what_the_model_lacks_is_refused_with_its_reason(tiny, tmp_path, setting, refusal):
    _, _, folder = tiny("llama-4over2")
    copy = tmp_path / "changed"
    copy.mkdir()
    for file in folder.iterdir():
        (copy / file.name).write_bytes(file.read_bytes())
    data = json.loads((copy / "config.json").read_text())
    data.update(setting)
    (copy / "config.json").write_text(json.dumps(data))
    with pytest.raises(CheckpointError, match="changed/config.json is not a valid model config") as refused:
        open_folder(copy)
    assert refusal in str(refused.value)


def test_named_points_are_kept_on_request_with_their_grouped_shapes(tiny):
    _, tokenizer, folder = tiny("llama-4over2")
    model = open_folder(folder).model
    ids = tokenizer.encode(PROMPT)[None]
    T, d = ids.size(1), model.config.head_size
    recorder = Recorder()
    with torch.no_grad():
        out = model(ids, capture=recorder, return_attention=True)
    assert set(recorder.values) == {f"blocks.{layer}.{point}" for layer in range(2) for point in POINTS}
    assert recorder["blocks.1.attn.hook_k"].shape == recorder["blocks.1.attn.hook_rot_k"].shape == (1, 2, T, d)
    assert recorder["blocks.1.attn.hook_q"].shape == recorder["blocks.1.attn.hook_z"].shape == (1, 4, T, d)
    torch.testing.assert_close(recorder["blocks.1.attn.hook_pattern"], out.attention_weights[1])
    attention = model.blocks[1].attn
    z = recorder["blocks.1.attn.hook_z"].transpose(1, 2).reshape(1, T, 4 * d)  # the heads side by side
    torch.testing.assert_close(attention.o_proj(z), recorder["blocks.1.hook_attn_out"])
    torch.testing.assert_close(model.lm_head(model.norm(recorder["blocks.1.hook_resid_post"])), out.logits)
    one = Recorder({"attn.hook_rot_k"}, layers={0})
    with torch.no_grad():
        model(ids, capture=one)  # on the fast path: no weights asked for
    assert list(one.values) == ["blocks.0.attn.hook_rot_k"]
    with pytest.raises(ValueError, match="no point named attn.hook_key"):
        Recorder({"attn.hook_key"})


def test_a_rotated_score_depends_only_on_the_distance(tiny):
    """Shift every position by 7: the model's own q and k, turned at the new positions, give the same scores."""
    _, tokenizer, folder = tiny("qwen2-4over2-tied")
    model = open_folder(folder).model
    ids = tokenizer.encode(PROMPT)[None]
    T, config = ids.size(1), model.config
    recorder = Recorder({"attn.hook_q", "attn.hook_k", "attn.hook_attn_scores"}, layers={0})
    with torch.no_grad():
        model(ids, capture=recorder)
    q, k = recorder["blocks.0.attn.hook_q"], recorder["blocks.0.attn.hook_k"][:, :1]  # query heads 0, 1 read K/V head 0
    scores = []
    for start in (0, 7):
        cos, sin = rotary_cos_sin(torch.arange(start, start + T), config.head_size, config.rope_theta)
        rotated_q, rotated_k = apply_rotary_pos_emb(q, k, cos, sin)
        scores.append((rotated_q[:, :2] @ rotated_k.transpose(-2, -1)) / config.head_size ** 0.5)  # (1, 2, T, T)
    torch.testing.assert_close(scores[0], scores[1], atol=1e-5, rtol=0)
    recorded = recorder["blocks.0.attn.hook_attn_scores"][:, :2]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    torch.testing.assert_close(recorded[..., causal], scores[0][..., causal], atol=1e-5, rtol=0)
    assert torch.isinf(recorded[..., ~causal]).all()


def llama_config(**changes) -> ModelConfig:
    settings = dict(vocabulary_size=40, context_size=16, embedding_dim=32, heads_num=4, layers_num=2, family="llama",
                    kv_heads_num=2, rope_theta=5e5, intermediate_size=48, activation="silu", layer_norm_eps=1e-6)
    return ModelConfig(**{**settings, **changes})


@pytest.mark.parametrize("changes", [{}, {"tie_embeddings": True, "qkv_bias": True, "kv_heads_num": 1}])
def test_the_playgrounds_own_layout_round_trips_a_llama(tmp_path, changes):
    tokenizer = CharTokenizer.train_from_text("to be or not to be, that is the question\n")
    config = llama_config(vocabulary_size=tokenizer.vocabulary_size, **changes)
    torch.manual_seed(2)
    model = build_model(config).eval()
    assert isinstance(model, Llama) and model.parameter_count() == config.parameter_count()
    folder = save_checkpoint(model, tokenizer, "tiny-llama", directory=tmp_path)
    saved = json.loads((folder / "config.json").read_text())
    assert saved["family"] == "llama" and saved["kv_heads_num"] == config.kv_heads_num
    loaded = load_checkpoint("tiny-llama", directory=tmp_path)
    assert loaded.layout == checkpoints.PLAYGROUND_LAYOUT and loaded.config == config
    ids = tokenizer.encode("to be or not")[None]
    with torch.no_grad():
        assert torch.equal(loaded.model(ids).logits, model(ids).logits)
    assert "Llama family (rotary positions, 4 query heads over" in loaded.description
    with pytest.raises(ArchitectureError, match="open it in the Sample tab; the Model tab draws GPT checkpoints only"):
        require_gpt(config, "tiny-llama", "the Model tab")


def test_a_gpt_configs_json_is_unchanged_and_the_family_fields_stay_in_their_family():
    old = {"vocabulary_size": 65, "context_size": 64, "embedding_dim": 128, "heads_num": 4, "layers_num": 4,
           "dropout_rate": 0.0, "use_bias": False}
    config = ModelConfig.from_dict(old)
    assert config.to_dict() == old and config.is_gpt and config.kv_heads == 4 and config.mlp_width == 512
    with pytest.raises(ConfigError, match="kv_heads_num belongs to the family llama"):
        ModelConfig(**old, kv_heads_num=2)
    with pytest.raises(ConfigError, match="heads_num 4 is not divisible by kv_heads_num 3"):
        llama_config(kv_heads_num=3)
    with pytest.raises(ConfigError, match="SwiGLU, silu\\(gate\\) \\* up: activation must be silu"):
        llama_config(activation="gelu")
    with pytest.raises(ConfigError, match="use_bias must be false"):
        llama_config(use_bias=True)


@pytest.mark.parametrize("name", ["qwen2-4over2-tied", "llama-4over2"])
def test_export_writes_the_family_back_in_its_own_layout(tiny, tmp_path, name):
    reference, tokenizer, folder = tiny(name)
    target = export.export_gpt2(open_folder(folder), tmp_path / "exported")
    assert json.loads((target / "config.json").read_text())["model_type"] == SHAPES[name][0]
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rebuilt = AutoModelForCausalLM.from_pretrained(target).eval()
    ids = tokenizer.encode(PROMPT)[None]
    assert AutoTokenizer.from_pretrained(target)(PROMPT)["input_ids"] == ids[0].tolist()
    with torch.no_grad():
        expected = reference(ids).logits
        torch.testing.assert_close(rebuilt(ids).logits, expected, atol=1e-5, rtol=0)
        torch.testing.assert_close(open_folder(target).model(ids).logits, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_a_playground_llama_exports_for_transformers(tmp_path, qkv_bias):
    """A Llama trained here (characters, its own layout) opens in transformers with the same logits; with q/k/v
    biases it is Qwen2's layout."""
    tokenizer = CharTokenizer.train_from_text("to be or not to be, that is the question\n")
    config = llama_config(vocabulary_size=tokenizer.vocabulary_size, qkv_bias=qkv_bias, tie_embeddings=True)
    torch.manual_seed(4)
    save_checkpoint(build_model(config).eval(), tokenizer, "tiny-llama", directory=tmp_path)
    checkpoint = load_checkpoint("tiny-llama", directory=tmp_path)
    target = export.export_gpt2(checkpoint, tmp_path / "exported")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    rebuilt = AutoModelForCausalLM.from_pretrained(target).eval()
    assert type(rebuilt).__name__ == ("Qwen2ForCausalLM" if qkv_bias else "LlamaForCausalLM")
    ids = tokenizer.encode("that is the q")[None]  # 13 of its 16 positions
    if not qkv_bias:  # transformers 5 reads a qwen2 folder's tokenizer.json through Qwen2Tokenizer, whatever it holds
        assert AutoTokenizer.from_pretrained(target)("that is the q")["input_ids"] == ids[0].tolist()
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(ids).logits, checkpoint.model(ids).logits, atol=1e-5, rtol=0)


def test_the_sample_command_runs_it_unchanged(tiny, capsys):
    reference, tokenizer, folder = tiny("llama-4over1-tied")
    from playground.cli.sample import main

    ids = tokenizer.encode(PROMPT)[None]
    with torch.no_grad():
        generated = reference.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12,
                                       pad_token_id=0, eos_token_id=None)
    code = main(["--checkpoint", str(folder), "--prompt", PROMPT, "--max-new-tokens", "12", "--greedy", "--device",
                 "cpu"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert captured.out == tokenizer.decode(generated[0]) + "\n" and "KV cache on" in captured.err


# config.json of the models issue 51 names, as their repos hold them (the fields the playground reads)
REAL_CONFIGS = {
    "SmolLM2-135M": {"model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
                     "num_attention_heads": 9, "num_key_value_heads": 3, "max_position_embeddings": 8192,
                     "vocab_size": 49152, "rope_theta": 100000, "rms_norm_eps": 1e-5, "tie_word_embeddings": True,
                     "hidden_act": "silu", "rope_scaling": None, "attention_bias": False, "mlp_bias": False},
    "Qwen2.5-0.5B": {"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
                     "num_attention_heads": 14, "num_key_value_heads": 2, "max_position_embeddings": 32768,
                     "vocab_size": 151936, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True,
                     "hidden_act": "silu", "use_sliding_window": False, "sliding_window": 32768,
                     "max_window_layers": 24},
    "TinyLlama-1.1B": {"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 22,
                       "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 2048,
                       "vocab_size": 32000, "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": False,
                       "hidden_act": "silu", "rope_scaling": None, "pretraining_tp": 1},
}


@pytest.mark.parametrize("name", REAL_CONFIGS)
def test_the_price_before_download_counts_transformers_parameters_at_real_shapes(name):
    """What the Hub check prices a repo by (its config's parameter count) is transformers' own count, built on the
    meta device (shapes only, no memory)."""
    data = REAL_CONFIGS[name]
    config = llama_layout.model_config(data)
    config_class, model_class = reference_class(data["model_type"])
    with torch.device("meta"):
        reference = model_class(config_class(**{k: v for k, v in data.items() if k != "model_type"}))
        ours = Llama(config)
    assert config.parameter_count() == reference.num_parameters() == ours.parameter_count()
    grouped = config.kv_cache_bytes_per_token()
    assert grouped * config.heads_num == 2 * config.layers_num * config.embedding_dim * 4 * config.kv_heads


def test_the_hub_refuses_before_the_weights_a_repo_too_large_or_holding_more_than_its_config(tiny, tmp_path,
                                                                                             monkeypatch):
    _, _, folder = tiny("llama-4over2")
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    one_layer = {**json.loads(files["config.json"]), "num_hidden_layers": 1}
    stub = StubHub({"learner/tiny-llama": files,
                    "learner/short-config": {**files, "config.json": json.dumps(one_layer).encode()}})
    stub.serve(monkeypatch, tmp_path / "hf-cache")
    try:
        parameters = open_folder(folder).config.parameter_count()
        with pytest.raises(CheckpointError, match=f"learner/tiny-llama has {parameters:,} parameters; this server's "
                                                  "limit is 10,000"):
            loading.open_checkpoint("learner/tiny-llama", max_parameters=10_000)
        with pytest.raises(HubError, match=r"learner/short-config's weights hold [\d,]+ numbers, but its config.json "
                                           r"describes [\d,]+ parameters; they are not downloaded"):
            loading.open_checkpoint("learner/short-config")
        fetched = [path for method, path in stub.requests if method == "GET" and path.endswith(".safetensors")]
    finally:
        stub.server.shutdown()
        stub.server.server_close()
    assert len(fetched) == 1  # the header read of learner/short-config (a ranged GET), never a whole file


def test_an_empty_prompt_starts_from_a_sentencepiece_models_first_special_token_not_its_unknown():
    tokenizer = train_sentencepiece_style()
    assert tokenizer.start_text == "<s>"


def test_muon_trains_the_blocks_matrices_of_a_llama_and_adamw_the_rest():
    """The family has blocks, so the GPT's optimizers apply (notebook 004's lab alone gets the notebook's AdamW)."""
    from playground.config import TrainConfig
    from playground.model.families import optimizer_refusal
    from playground.training.loop import configure_optimizer
    from playground.training.optimizers import Muon, parts

    config = llama_config(qkv_bias=True)
    model = build_model(config)
    assert optimizer_refusal(config, "muon") is None
    muon, adamw = parts(configure_optimizer(model, TrainConfig(optimizer="muon"), torch.device("cpu")))
    assert isinstance(muon, Muon) and isinstance(adamw, torch.optim.AdamW)
    by_id = {id(parameter): name for name, parameter in model.named_parameters()}
    in_muon = sorted(by_id[id(p)] for group in muon.param_groups for p in group["params"])
    assert len(in_muon) == 2 * 7  # per block: q, k, v, o and the MLP's gate, up and down
    assert all(name.startswith("blocks.") and name.endswith("_proj.weight") for name in in_muon)


def test_real_repos_variations_load_the_same(tiny, tmp_path):
    """bfloat16 weights (SmolLM2's and Qwen2.5's files), a stored copy of a tied head and older transformers' rotary
    buffers: the same model; a stored head that is not the embedding is refused by name."""
    from safetensors.torch import load_file, save_file

    reference, tokenizer, folder = tiny("qwen2-4over2-tied")
    state = load_file(str(folder / "model.safetensors"))
    rounded = {key: tensor.to(torch.bfloat16) for key, tensor in state.items()}
    rounded["lm_head.weight"] = rounded["model.embed_tokens.weight"].clone()
    for layer in range(2):
        rounded[f"model.layers.{layer}.self_attn.rotary_emb.inv_freq"] = torch.ones(8)
    copy = tmp_path / "variations"
    copy.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (copy / name).write_bytes((folder / name).read_bytes())
    save_file(rounded, str(copy / "model.safetensors"), metadata={"format": "pt"})
    model = open_folder(copy).model
    expected_model = open_folder(folder).model
    with torch.no_grad():
        for parameter in expected_model.parameters():  # what the bf16 file holds, back in float32
            parameter.copy_(parameter.to(torch.bfloat16).float())
        ids = tokenizer.encode(PROMPT)[None]
        torch.testing.assert_close(model(ids).logits, expected_model(ids).logits, atol=0, rtol=0)
    rounded["lm_head.weight"] = rounded["lm_head.weight"] + 1
    save_file(rounded, str(copy / "model.safetensors"), metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="lm_head.weight differs from model.embed_tokens.weight, but config.json "
                                              "ties them"):
        open_folder(copy)


def test_the_export_command_says_which_layout_it_wrote(tiny, tmp_path, capsys):
    from playground.cli.export import main

    _, _, folder = tiny("llama-4over2")
    assert main([str(folder), str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(tmp_path / "out")
    assert f"in the Llama family's layout to {tmp_path / 'out'}" in captured.err


def test_the_modern_preset_trains_a_llama_that_reopens_and_samples(tmp_path, shakespeare_text):
    """The Train tab's and the CLI's `modern` preset: the Llama family's blocks at the tiny preset's width, 4 query
    heads over 2 K/V heads; a few steps lower the loss, and the checkpoint reopens as that family and samples."""
    from dataclasses import replace

    from playground.training.presets import TRAIN_PRESETS
    from playground.training.run import RunRequest, prepare_run, run_training

    preset = TRAIN_PRESETS["modern"]
    train = replace(preset.train, steps=30, batch_size=8, time_budget_seconds=0.0, eval_interval=10, eval_batches=2,
                    warmup_steps=2, checkpoint_interval=1000, sample_interval=1000, device="cpu",
                    precision="float32")
    model = {**preset.model.to_dict(), "layers_num": 1, "embedding_dim": 32, "context_size": 32}
    result = run_training(prepare_run(RunRequest("modern", model, train, corpus_text=shakespeare_text[:20000],
                                                 weights_dir=tmp_path)))
    assert len(result.val_loss) >= 2 and result.val_loss[-1][1] < result.val_loss[0][1]
    checkpoint = load_checkpoint("modern", directory=tmp_path)
    assert isinstance(checkpoint.model, Llama)
    config = checkpoint.config
    assert (config.family, config.heads_num, config.kv_heads, config.activation) == ("llama", 4, 2, "silu")
    tokens = list(stream(checkpoint.model, checkpoint.tokenizer, "ROMEO:", SamplingSettings(max_new_tokens=20, seed=0)))
    assert len(tokens) == 20


@pytest.mark.parametrize("name", REAL_CONFIGS)
def test_the_forward_a_repo_is_priced_by_is_the_longest_text_this_server_runs(name, tmp_path):
    """The check before download prices a forward at the server's context cap, not the model's own context: at
    Qwen2.5's 32,768 positions its (heads, T, T) maps alone were priced past 20 GiB, and every such repo was refused
    on a server that runs at most 1,024 tokens."""
    from playground.budget import MemoryBudget
    from playground.checkpoints import hub

    (tmp_path / "config.json").write_text(json.dumps(REAL_CONFIGS[name]), encoding="utf-8")
    sizes = {"config.json": 1, "tokenizer.json": 1, "model.safetensors": 1}
    server = MemoryBudget(6 * 2**30, "a 6 GiB server")
    config = hub._check_config("learner/model", tmp_path, sizes, None, server, max_context=1024)
    assert config.context_size == REAL_CONFIGS[name]["max_position_embeddings"]
    if config.context_size > 8192:
        with pytest.raises(HubError, match="learner/model"):
            hub._check_config("learner/model", tmp_path, sizes, None, server)
