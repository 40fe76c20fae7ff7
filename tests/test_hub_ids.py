"""Hub ids as people type them, against the stub Hub on 127.0.0.1 with tiny models built by transformers:
canonical ids without an owner, sharded safetensors, vocab.json + merges.txt, and the refusals that say why."""

from __future__ import annotations

import io
import json

import pytest
import torch
from test_gpt2 import make_tiny_gpt2
from test_hub import StubHub, make_tiny_checkpoint

from playground.checkpoints import loading
from playground.checkpoints import store as checkpoints
from playground.checkpoints.store import CheckpointError, MissingCheckpointError
from playground.cli import sample as sample_cli


def sharded(model, folder) -> dict[str, bytes]:
    """The model saved as transformers shards a large one: model-0000N-of-0000M.safetensors and the index."""
    model.save_pretrained(folder, max_shard_size="20KB")
    files = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".json", ".safetensors")}
    assert "model.safetensors" not in files and len([f for f in files if f.startswith("model-")]) > 2
    return files


def vocab_and_merges(tokenizer_json: bytes, folder) -> dict[str, bytes]:
    """GPT-2's original tokenizer files (vocab.json with <|endoftext|>, merges.txt) for the same BPE."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json.decode())
    tokenizer.model.save(str(folder))
    vocab = tokenizer.get_vocab()  # the added <|endoftext|> too, as GPT-2's vocab.json has it
    return {"vocab.json": json.dumps(vocab).encode(), "merges.txt": (folder / "merges.txt").read_bytes()}


@pytest.fixture(scope="module")
def tiny_family(tmp_path_factory):
    model, tokenizer, files = make_tiny_gpt2(tmp_path_factory.mktemp("gpt2"))
    shards = sharded(model, tmp_path_factory.mktemp("sharded"))
    bpe_files = vocab_and_merges(files["tokenizer.json"], tmp_path_factory.mktemp("bpe"))
    return model, tokenizer, files, shards, bpe_files


@pytest.fixture
def canonical_hub(tiny_family, tmp_path, monkeypatch):
    _, _, files, shards, bpe_files = tiny_family
    neox = {"model_type": "gpt_neox", "hidden_size": 32, "num_attention_heads": 2, "num_hidden_layers": 2,
            "intermediate_size": 64, "layer_norm_eps": 1e-5, "rotary_pct": 0.25, "vocab_size": 320,
            "_commit_hash": "0" * 40}
    stub = StubHub({
        "gpt2": files,  # one model.safetensors
        "distilgpt2": {**shards, "tokenizer.json": files["tokenizer.json"]},  # sharded, through its index
        "gpt2-medium": {"config.json": files["config.json"], "model.safetensors": files["model.safetensors"],
                        **bpe_files},  # no tokenizer.json: vocab.json + merges.txt
        "learner/tiny-neox": {"config.json": json.dumps(neox).encode(), "model.safetensors":
                              files["model.safetensors"], "tokenizer.json": files["tokenizer.json"]},
    })
    stub.thread.start()
    monkeypatch.setenv("HF_ENDPOINT", stub.url)
    monkeypatch.setenv("PLAYGROUND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "users-hf-cache"))
    monkeypatch.delenv("PLAYGROUND_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("PLAYGROUND_HUB_ALLOW", raising=False)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
    yield stub
    stub.server.shutdown()
    stub.server.server_close()


def logits(model, ids):
    with torch.no_grad():
        return model(torch.tensor([ids])).logits


@pytest.mark.parametrize("repo_id", ["gpt2", "distilgpt2", "gpt2-medium"])
def test_the_ids_people_type_open_from_the_hub_with_transformers_logits(canonical_hub, tiny_family, tmp_path,
                                                                         repo_id):
    model, tokenizer, *_ = tiny_family
    checkpoint = loading.open_checkpoint(repo_id, directory=tmp_path / "weights")  # no local run of that name
    assert checkpoint.name == repo_id and checkpoint.layout == checkpoints.GPT2_LAYOUT
    text = "To be, or not to be: that is the question. Café"
    ids = checkpoint.tokenizer.encode(text).tolist()
    assert ids == tokenizer.encode(text).tolist() and checkpoint.tokenizer.decode(ids) == text
    torch.testing.assert_close(logits(checkpoint.model, ids), logits(model, ids), atol=1e-4, rtol=0)
    assert "users-hf-cache" not in str(checkpoint.path) and not (tmp_path / "users-hf-cache").exists()


def test_the_sharded_repos_weights_are_read_through_their_index_and_header_checked_first(canonical_hub, tmp_path):
    loading.open_checkpoint("distilgpt2", directory=tmp_path)
    fetched = canonical_hub.requested_files()
    assert "model.safetensors.index.json" in fetched
    shards = [name for name in canonical_hub.repos["distilgpt2"] if name.startswith("model-")]
    ranged = [path for (method, path), headers in zip(canonical_hub.requests, canonical_hub.headers, strict=True)
              if "range" in headers and method == "GET"]
    assert sorted(path.rsplit("/", 1)[-1] for path in ranged) == sorted(shards)  # each header read before download


def test_a_local_run_of_that_name_comes_first(canonical_hub, tmp_path):
    make_tiny_checkpoint(tmp_path)
    (tmp_path / "tiny").rename(tmp_path / "gpt2")
    assert loading.open_checkpoint("gpt2", directory=tmp_path).layout == checkpoints.PLAYGROUND_LAYOUT
    assert not canonical_hub.requests


def test_the_command_line_says_which_was_opened(canonical_hub, tmp_path):
    out, err = io.StringIO(), io.StringIO()
    code = sample_cli.main(["--checkpoint", "gpt2", "--weights-dir", str(tmp_path), "--prompt", "To be",
                            "--max-new-tokens", "3", "--greedy", "--device", "cpu"], out, err)
    assert code == 0, err.getvalue()
    assert "note: no checkpoint named 'gpt2' here, so the Hugging Face Hub repo gpt2 was opened (GPT-2 layout from " \
           "gpt2, " in err.getvalue()


def test_a_name_neither_here_nor_on_the_hub_says_both(canonical_hub, tmp_path):
    with pytest.raises(MissingCheckpointError, match=rf"no checkpoint named 'nowhere' in {tmp_path}, nor a Hub repo "
                                                     r"nowhere \(no Hub repo named nowhere .*give a name there"):
        loading.open_checkpoint("nowhere", directory=tmp_path)


def test_another_family_is_refused_by_its_model_type(canonical_hub, tiny_family, tmp_path):
    with pytest.raises(CheckpointError, match=r"^learner/tiny-neox: model_type gpt_neox: only the GPT-2 and "
                                              r"Llama-family layouts \(gpt2, llama, qwen2, mistral\) and playground "
                                              "checkpoints open here") as refused:
        loading.open_checkpoint("learner/tiny-neox")
    assert "_commit_hash" not in str(refused.value) and "rotary_pct" not in str(refused.value)
    assert "model.safetensors" not in canonical_hub.requested_files()
    folder = tmp_path / "neox"  # the same words for a folder on disk
    folder.mkdir()
    for name, data in canonical_hub.repos["learner/tiny-neox"].items():
        (folder / name).write_bytes(data)
    with pytest.raises(CheckpointError, match="neox: model_type gpt_neox: only the GPT-2 and Llama-family layouts"):
        checkpoints.load_checkpoint(folder)


def test_a_folder_of_pickled_weights_says_how_to_convert_them(tiny_family, tmp_path):
    _, _, files, _, _ = tiny_family
    folder = tmp_path / "bin-only"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (folder / name).write_bytes(files[name])
    (folder / "pytorch_model.bin").write_bytes(b"\x80\x04 a pickle, never opened")
    with pytest.raises(CheckpointError, match=r"bin-only has pytorch_model.bin but no model.safetensors: pickled "
                                              r"weights, and the playground never unpickles .* Convert it, "
                                              r"weights and tokenizer together, with transformers: python -c .*"
                                              r"s, d = '" + str(folder) + r"', 'bin-only-safetensors'; "):
        checkpoints.load_checkpoint(folder)


def test_a_local_folder_with_vocab_and_merges_and_shards_opens(tiny_family, tmp_path):
    model, tokenizer, files, shards, bpe_files = tiny_family
    folder = tmp_path / "sharded-bpe"
    folder.mkdir()
    for name, data in {**shards, **bpe_files}.items():
        (folder / name).write_bytes(data)
    loaded = checkpoints.load_checkpoint(folder)
    ids = tokenizer.encode("whether 'tis nobler").tolist()
    assert loaded.tokenizer.encode("whether 'tis nobler").tolist() == ids
    torch.testing.assert_close(logits(loaded.model, ids), logits(model, ids), atol=1e-4, rtol=0)


def test_a_shard_outside_the_folder_is_refused(tiny_family, tmp_path):
    _, _, _, shards, bpe_files = tiny_family
    folder = tmp_path / "escape"
    folder.mkdir()
    for name, data in {**shards, **bpe_files}.items():
        (folder / name).write_bytes(data)
    index = json.loads(shards["model.safetensors.index.json"])
    index["weight_map"]["transformer.wte.weight"] = "../elsewhere.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CheckpointError, match=r"maps 'transformer.wte.weight' to '../elsewhere.safetensors', not a "
                                              r".safetensors file beside it"):
        checkpoints.load_checkpoint(folder)

