"""GPT-2 layout checkpoints: a tiny random GPT2LMHeadModel from ``transformers`` (a test-only dependency), saved with
save_pretrained beside a BPE tokenizer.json trained with ``tokenizers``, served by the stub Hub and opened by the
playground's one loader. Its logits match transformers' within 1e-5, with and without the KV cache, and greedy
generation picks the same tokens; real repos' variations (prefix, old buffers, a stored head) load the same;
pickles and oversized configs are refused before any weights are fetched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from test_hub import StubHub

from playground.checkpoints import gpt2, loading
from playground.checkpoints import store as checkpoints
from playground.checkpoints.hub import HubError, load_from_hub
from playground.checkpoints.store import CheckpointError, load_checkpoint, save_checkpoint
from playground.config import ModelConfig
from playground.model.gpt import GPT, KVCache
from playground.model.sampling import SamplingSettings, stream
from playground.text.subword import BPETokenizer

TRAINING_TEXT = ("To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer the slings "
                 "and arrows of outrageous fortune, or to take arms against a sea of troubles and by opposing end "
                 "them. To die, to sleep; no more; and by a sleep to say we end the heart-ache and the thousand "
                 "natural shocks that flesh is heir to: 'tis a consummation devoutly to be wish'd. Café, naïve.\n")
REPO_ID = "learner/tiny-gpt2"


def train_bpe(vocabulary_size: int = 320) -> BPETokenizer:
    """A byte-level BPE like GPT-2's, trained by the tokenizers library on TRAINING_TEXT, <|endoftext|> last."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocabulary_size - 1, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator([TRAINING_TEXT] * 4, trainer)
    tokenizer.add_special_tokens(["<|endoftext|>"])
    return BPETokenizer.from_str(tokenizer.to_str())


def make_tiny_gpt2(folder: Path):
    """(transformers' GPT2LMHeadModel, its BPETokenizer, {filename: bytes} of a repo in the GPT-2 layout)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    tokenizer = train_bpe()
    eos = tokenizer.vocabulary_size - 1
    torch.manual_seed(5)
    config = GPT2Config(vocab_size=tokenizer.vocabulary_size, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                        activation_function="gelu_new", bos_token_id=eos, eos_token_id=eos)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # random LayerNorms and biases too, so a mapping that dropped one would show
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or ".ln_" in name:
                parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(folder)
    (folder / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
    files = {p.name: p.read_bytes() for p in sorted(folder.iterdir())
             if p.name in ("config.json", "model.safetensors", "tokenizer.json")}
    return model, tokenizer, files


def old_style_weights(files: dict[str, bytes], folder: Path) -> bytes:
    """The same weights as older repos store them: no ``transformer.`` prefix, the attn.bias / masked_bias buffers,
    and lm_head.weight as a copy of wte.weight (openai-community/gpt2's model.safetensors has this shape)."""
    path = folder / "new.safetensors"
    path.write_bytes(files["model.safetensors"])
    state = {key.removeprefix("transformer."): tensor for key, tensor in load_file(str(path)).items()}
    config = json.loads(files["config.json"])
    T = config["n_positions"]
    for layer in range(config["n_layer"]):
        state[f"h.{layer}.attn.bias"] = torch.tril(torch.ones(T, T)).view(1, 1, T, T)
        state[f"h.{layer}.attn.masked_bias"] = torch.tensor(-1e4)
    state["lm_head.weight"] = state["wte.weight"].clone()
    save_file(state, str(folder / "old.safetensors"), metadata={"format": "pt"})
    return (folder / "old.safetensors").read_bytes()


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory):
    return make_tiny_gpt2(tmp_path_factory.mktemp("gpt2"))


@pytest.fixture
def gpt2_hub(tiny_gpt2, tmp_path, monkeypatch):
    _, _, files = tiny_gpt2
    huge_config = {**json.loads(files["config.json"]), "n_embd": 1600, "n_head": 25, "n_layer": 48}  # GPT-2 XL
    stub = StubHub({
        REPO_ID: files,
        "learner/old-gpt2": {**files, "model.safetensors": old_style_weights(files, tmp_path)},
        "learner/bin-only": {k: v for k, v in files.items() if k != "model.safetensors"}
        | {"pytorch_model.bin": b"\x80\x04 a pickle"},
        "learner/huge-gpt2": {"config.json": json.dumps(huge_config).encode(),
                              "tokenizer.json": files["tokenizer.json"]},
        "learner/no-tokenizer": {k: v for k, v in files.items() if k != "tokenizer.json"} | {"vocab.json": b"{}"},
    }, claimed={"learner/huge-gpt2": {"model.safetensors": 6_431_000_000}})
    stub.thread.start()
    monkeypatch.setenv("HF_ENDPOINT", stub.url)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.delenv("PLAYGROUND_OFFLINE", raising=False)
    monkeypatch.delenv("PLAYGROUND_HUB_ALLOW", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def test_logits_match_transformers_with_and_without_the_kv_cache(gpt2_hub, tiny_gpt2):
    reference, tokenizer, _ = tiny_gpt2
    checkpoint = loading.open_checkpoint(REPO_ID)
    assert checkpoint.layout == "gpt2" and checkpoint.tokenizer == tokenizer
    ids = tokenizer.encode("To be, or not to be: that is the question. Café!")[None]  # (1, T)
    assert ids.size(1) > 8
    with torch.no_grad():
        expected = reference(ids).logits
        torch.testing.assert_close(checkpoint.model(ids).logits, expected, atol=1e-5, rtol=0)
        cache = KVCache.empty(checkpoint.config.layers_num)
        prompt = checkpoint.model(ids[:, :5], cache=cache).logits  # then one token at a time against the cache
        steps = [checkpoint.model(ids[:, t:t + 1], cache=cache).logits for t in range(5, ids.size(1))]
    torch.testing.assert_close(torch.cat([prompt, *steps], dim=1), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generation_matches_transformers(gpt2_hub, tiny_gpt2, use_cache):
    reference, tokenizer, _ = tiny_gpt2
    checkpoint = loading.open_checkpoint(REPO_ID)
    prompt = "To be, or not"
    ids = tokenizer.encode(prompt)[None]
    with torch.no_grad():
        generated = reference.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=24,
                                       min_new_tokens=24, pad_token_id=tokenizer.vocabulary_size - 1)
    ours = list(stream(checkpoint.model, checkpoint.tokenizer, prompt,
                       SamplingSettings(max_new_tokens=24, greedy=True), use_cache=use_cache))
    assert [t.token_id for t in ours] == generated[0, ids.size(1):].tolist()
    assert prompt + "".join(t.text for t in ours) == tokenizer.decode(generated[0])


def test_prefixless_keys_old_buffers_and_a_stored_head_load_the_same(gpt2_hub, tiny_gpt2):
    new, old = loading.open_checkpoint(REPO_ID), loading.open_checkpoint("learner/old-gpt2")
    ids = torch.arange(0, 40)[None]
    torch.testing.assert_close(old.model(ids).logits, new.model(ids).logits, atol=0, rtol=0)
    assert old.model.lm_head.weight is old.model.token_embedding.weight  # tied again, one matrix
    assert old.model.parameter_count() == old.config.parameter_count() == tiny_gpt2[0].num_parameters()


def test_a_repo_with_pickled_weights_only_is_refused_unread(gpt2_hub):
    with pytest.raises(HubError, match=r"learner/bin-only has pytorch_model.bin but no model.safetensors: pickled "
                                       r"weights, and the playground never unpickles .*Convert it, weights and "
                                       r"tokenizer together, with transformers: .*s, d = 'learner/bin-only', "
                                       r"'bin-only-safetensors'; .*then open bin-only-safetensors"):
        load_from_hub("learner/bin-only")
    assert gpt2_hub.requested_files() == []


def test_the_bin_only_advice_is_one_command_that_makes_a_folder_that_opens(tiny_gpt2, tmp_path):
    """The command the refusal printed saved the weights without the tokenizer, so the new folder was refused next
    ("has no tokenizer.json"): two steps where one was promised. It is run here exactly as printed."""
    import re
    import subprocess
    import sys

    model, tokenizer, files = tiny_gpt2
    folder = tmp_path / "bin-only"
    folder.mkdir()
    torch.save(model.state_dict(), folder / "pytorch_model.bin")  # a pickle, as older repos ship their weights
    (folder / "config.json").write_bytes(files["config.json"])
    (folder / "tokenizer.json").write_bytes(files["tokenizer.json"])
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(folder)
    [code] = re.findall(r'python -c "([^"]+)"', str(refused.value))
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    converted = load_checkpoint(tmp_path / "bin-only-safetensors")  # the folder the advice names opens as it is
    assert str(refused.value).endswith("then open bin-only-safetensors")
    ids = tokenizer.encode("To be, or not").unsqueeze(0)
    assert converted.tokenizer.encode("To be, or not").tolist() == ids[0].tolist()
    with torch.no_grad():
        torch.testing.assert_close(converted.model(ids).logits, model(ids).logits, atol=1e-5, rtol=0)


def test_an_oversized_config_is_refused_before_the_weights_are_downloaded(gpt2_hub):
    huge = gpt2.model_config(json.loads(gpt2_hub.repos["learner/huge-gpt2"]["config.json"])).parameter_count()
    with pytest.raises(CheckpointError, match=rf"learner/huge-gpt2 has {huge:,} parameters; this server's "
                                              r"limit is 20,000,000"):
        load_from_hub("learner/huge-gpt2", max_parameters=20_000_000)
    assert set(gpt2_hub.requested_files()) == {"config.json"} and gpt2_hub.bytes_sent < 4096


def test_weights_larger_than_parameters_and_buffers_are_refused(gpt2_hub, tiny_gpt2):
    _, _, files = tiny_gpt2
    gpt2_hub.repos["learner/padded-gpt2"] = {k: v for k, v in files.items() if k != "model.safetensors"}
    gpt2_hub.claimed["learner/padded-gpt2"] = {"model.safetensors": 64 * 2**20}
    with pytest.raises(HubError, match=r"at most .* of fp32 weights and GPT-2's old mask buffers; it is not "
                                       r"downloaded"):
        load_from_hub("learner/padded-gpt2")
    assert "model.safetensors" not in gpt2_hub.requested_files()


def test_a_gpt2_repo_without_tokenizer_json_is_refused_before_its_weights(gpt2_hub):
    with pytest.raises(HubError, match="has no tokenizer: no vocabulary.json .*, tokenizer.json, or vocab.json and "
                                      "merges.txt"):
        load_from_hub("learner/no-tokenizer")
    assert "model.safetensors" not in gpt2_hub.requested_files()


def test_the_checkpoint_says_what_it_is(gpt2_hub, tiny_gpt2):
    checkpoint = loading.open_checkpoint(REPO_ID)
    parameters = tiny_gpt2[0].num_parameters()
    assert checkpoint.description == (f"GPT-2 layout from {REPO_ID}, byte-level BPE tokenizer, 320 tokens, "
                                      f"context 64, {parameters:,} parameters")
    assert gpt2.parameters_text(124_439_808) == "124.4M parameters"


def test_a_key_that_maps_to_nothing_is_named(tiny_gpt2):
    config = gpt2.model_config(json.loads(tiny_gpt2[2]["config.json"]))
    with pytest.raises(gpt2.LayoutError, match=r"'transformer.h.0.attn.rotary.weight' is not a GPT-2 weight"):
        gpt2.map_state_dict(["transformer.h.0.attn.rotary.weight"], lambda key: torch.zeros(1), config)
    with pytest.raises(gpt2.LayoutError, match=r"'h.2.ln_1.weight' belongs to layer 2, but config.json has n_layer 2"):
        gpt2.map_state_dict(["h.2.ln_1.weight"], lambda key: torch.zeros(1), config)
    with pytest.raises(gpt2.LayoutError, match=r"missing wpe.weight, ln_f.weight, ln_f.bias, h.0.ln_1.bias, .* "
                                                r"\(26 of the 28 the config needs\)"):
        gpt2.map_state_dict(["wte.weight", "h.0.ln_1.weight"], lambda key: torch.zeros(1), config)
    with pytest.raises(gpt2.LayoutError, match="n_inner 100 is not 4 × n_embd"):
        gpt2.model_config({**json.loads(tiny_gpt2[2]["config.json"]), "n_inner": 100})
    with pytest.raises(gpt2.LayoutError, match="activation_function 'swish'"):
        gpt2.model_config({**json.loads(tiny_gpt2[2]["config.json"]), "activation_function": "swish"})


def test_a_local_gpt2_folder_and_a_tied_save_round_trip(tiny_gpt2, tmp_path):
    """A GPT-2 folder in weights/ opens by name; saved in the playground's layout it keeps its tied head once
    (safetensors refuses two names for one tensor) and its tokenizer.json."""
    _, tokenizer, files = tiny_gpt2
    folder = tmp_path / "weights" / "my-gpt2"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    assert checkpoints.list_checkpoints(tmp_path / "weights") == ["my-gpt2"]
    loaded = load_checkpoint("my-gpt2", directory=tmp_path / "weights")
    saved = save_checkpoint(loaded.model, loaded.tokenizer, "copy", directory=tmp_path / "weights")
    assert "lm_head.weight" not in load_file(str(saved / "model.safetensors"))
    assert not (saved / "vocabulary.json").exists() and (saved / "tokenizer.json").is_file()
    assert json.loads((saved / "config.json").read_text())["tie_embeddings"] is True
    again = load_checkpoint("copy", directory=tmp_path / "weights")
    assert again.layout == "playground" and again.tokenizer == tokenizer
    ids = torch.arange(0, 30)[None]
    assert torch.equal(again.model(ids).logits, loaded.model(ids).logits)


def test_model_config_gpt2_fields_keep_character_checkpoints_as_they_were():
    plain = ModelConfig(vocabulary_size=65)
    assert set(plain.to_dict()) == {"vocabulary_size", "context_size", "embedding_dim", "heads_num", "layers_num",
                                    "dropout_rate", "use_bias"}
    tied = ModelConfig(vocabulary_size=50, context_size=16, embedding_dim=16, heads_num=2, layers_num=2,
                       use_bias=True, activation="gelu_tanh", layer_norm_eps=1e-6, tie_embeddings=True)
    assert ModelConfig.from_dict(tied.to_dict()) == tied
    model = GPT(tied)
    untied = ModelConfig(**{**tied.to_dict(), "tie_embeddings": False})  # a head of its own, without a bias
    assert tied.parameter_count() == model.parameter_count() == untied.parameter_count() - 50 * 16
    assert ModelConfig(**{**untied.to_dict(), "head_bias": True}).parameter_count() == untied.parameter_count() + 50
    assert model.lm_head.bias is None and model.blocks[0].ln_1.eps == 1e-6
    for bad, message in (({"activation": "swish"}, "activation must be one of"),
                         ({"layer_norm_eps": 0}, "layer_norm_eps must be in"),
                         ({"tie_embeddings": "yes"}, "tie_embeddings must be true or false")):
        with pytest.raises(ValueError, match=message):
            ModelConfig(vocabulary_size=5, **bad)


# ------------------------------------------------------------------------------ the tabs, on a GPT-2 checkpoint
@pytest.fixture
def gpt2_ctx(tiny_gpt2, tmp_path):
    from playground.config import Limits
    from playground.ui.common import AppContext

    folder = tmp_path / "weights" / "tiny-gpt2"
    folder.mkdir(parents=True)
    for name, data in tiny_gpt2[2].items():
        (folder / name).write_bytes(data)
    return AppContext(limits=Limits(), weights=tmp_path / "weights")


def test_tokenize_tab_shows_bpe_pieces_beside_characters_and_the_merges(gpt2_ctx, tiny_gpt2):
    from playground.ui import tokenize_tab

    tokenizer = tiny_gpt2[1]
    text = "To be, or not to be"
    chips, ids, decoded, stats, table = tokenize_tab.tokenize(gpt2_ctx, text, "loaded checkpoint", "tiny-gpt2")
    expected = tokenizer.encode(text).tolist()
    assert ids == str(expected) and decoded == text and len(expected) < len(text)
    bpe_row, char_row = chips.split('<div class="tok-row tok-character">')
    assert bpe_row.count('class="tok-chip"') == len(expected) and char_row.count('class="tok-chip"') == len(text)
    assert f"**{len(expected)}** BPE tokens" in stats and f"the character tokenizer needs **{len(text)}**" in stats
    assert "GPT-2 layout from tiny-gpt2, byte-level BPE tokenizer" in stats and "“Ġ”" in stats
    assert [row[3] for row in table["data"]] == [tokenizer.label(i) for i in expected]
    assert any(row[2].startswith("Ġ") and row[3].startswith("␣") for row in table["data"])
    steps = tokenize_tab.merges(gpt2_ctx, " question", "tiny-gpt2")  # this small BPE never learnt the whole word
    assert "**␣question** (written `Ġquestion` in the vocabulary)" in steps
    assert "1. `o` + `n` (merge 16 of the list) → `␣` `q` `u` `e` `s` `t` `i` `on`" in steps
    assert "The tokenizers library gives `␣`, `q`, `u`, `est`, `ion`: the same." in steps
    with pytest.raises(ValueError, match="Type a word"):
        tokenize_tab.merges(gpt2_ctx, "", "tiny-gpt2")


def test_attention_tab_traces_a_gpt2_head_on_bpe_tokens(gpt2_ctx, tiny_gpt2):
    from playground.lens.walkthrough import STEP_TITLES
    from playground.ui import attention_tab

    tokenizer, text = tiny_gpt2[1], "To be, or not to be"
    pieces = [tokenizer.label(i) for i in tokenizer.encode(text).tolist()]
    for step in STEP_TITLES:
        heading, a, *_ = attention_tab.attention_step(gpt2_ctx, "trained checkpoint", "tiny-gpt2", 1, 1, 0, 16, 8,
                                                       "journey", text, True, True, 1.0, False, step, None)
        assert a is not None and f"T = {len(pieces)} tokens · C = 32 · d_k = 16" in heading
        assert "Model: GPT-2 layout from tiny-gpt2, byte-level BPE tokenizer" in heading
    assert list(a.layout.yaxis.ticktext) == pieces and "␣be" in pieces  # the rows are the BPE pieces


def test_sample_tab_streams_bpe_tokens_and_inspects_one(gpt2_ctx, tiny_gpt2):
    from playground.ui import sample_tab

    *_, (text, coloured, stats, state) = sample_tab.sample(gpt2_ctx, "tiny-gpt2", "To be", 12, 1.0, 0, 1.0, 3,
                                                           True, True)
    ids = tiny_gpt2[1].encode("To be").tolist() + [t["id"] for t in state["tokens"]]
    assert text == tiny_gpt2[1].decode(ids) and "12 tokens in" in stats
    top, attention, note = sample_tab.inspect_position(gpt2_ctx, state, 3, 1, 0)
    assert "Token #3" in note and f"the last {len(ids) - 12 + 3} tokens" in note
    assert abs(sum(attention.data[0].y) - 1) < 1e-4
    *_, (text, _, stats, _) = sample_tab.sample(gpt2_ctx, "tiny-gpt2", "", 4, 1.0, 0, 1.0, 3, True, False)
    assert "generation starts from '<|endoftext|>'" in stats
    summary = sample_tab.checkpoint_summary(gpt2_ctx, "tiny-gpt2")
    assert "GPT-2 layout from tiny-gpt2, byte-level BPE tokenizer, 320 tokens, context 64" in summary


def test_the_checkpoint_cache_counts_a_models_real_bytes(gpt2_ctx):
    """Two models whose weights and tokenizers together pass half the memory budget are not both kept: the older is
    dropped."""
    import shutil

    from playground.budget import BYTES_PER_TOKENIZER_TOKEN, BudgetError, Cost, MemoryBudget, human
    from playground.ui.common import kept_bytes

    shutil.copytree(gpt2_ctx.weights / "tiny-gpt2", gpt2_ctx.weights / "other-gpt2")
    first = gpt2_ctx.checkpoint("tiny-gpt2")
    assert first.model.weights_bytes() == 4 * first.config.parameter_count()  # fp32, the tied matrix once
    # and its tokenizer, priced by its vocabulary (issue 54: a 791,900-token vocab.json held 550 MiB per model kept)
    one = kept_bytes(first)
    assert one - first.model.weights_bytes() == BYTES_PER_TOKENIZER_TOKEN * first.config.vocabulary_size
    gpt2_ctx.budget = MemoryBudget(3 * one, "test")  # room for 1.5 models' weights
    gpt2_ctx.checkpoint("other-gpt2")
    assert gpt2_ctx.checkpoint("tiny-gpt2") is not first  # dropped, loaded again
    gpt2_ctx.budget = MemoryBudget(5 * one, "test")  # room for 2.5
    second = gpt2_ctx.checkpoint("other-gpt2")
    assert gpt2_ctx.checkpoint("tiny-gpt2") is gpt2_ctx.checkpoint("tiny-gpt2") and \
        gpt2_ctx.checkpoint("other-gpt2") is second
    # the two kept stay in memory between requests: held from the budget (the audit found them outside it), so a
    # request sees 3 models' room left, not 5, and is told what holds the rest
    assert gpt2_ctx.budget.kept == 2 * one and gpt2_ctx.budget.reserved == 0 and gpt2_ctx.budget.free == 3 * one
    with pytest.raises(BudgetError, match=rf"requests hold 0 bytes and loaded models {human(2 * one)} .* try again"):
        gpt2_ctx.budget.acquire(Cost("a request", (("its tensors", 3 * one + 1),)))
    gpt2_ctx.budget = MemoryBudget(3 * one, "test")  # room for 1.5: a third model loaded drops both others
    shutil.copytree(gpt2_ctx.weights / "tiny-gpt2", gpt2_ctx.weights / "third-gpt2")
    gpt2_ctx.checkpoint("third-gpt2")
    assert gpt2_ctx.budget.kept == one  # what is dropped is no longer held
