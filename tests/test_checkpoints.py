import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from playground import checkpoints
from playground.checkpoints import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint
from playground.config import ModelConfig
from playground.model import GPT
from playground.tokenizer import CharTokenizer


def make_model(seed=0):
    torch.manual_seed(seed)
    tokenizer = CharTokenizer.train_from_text("abcdefg \n")
    model = GPT(ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=8, embedding_dim=16,
                            heads_num=2, layers_num=1)).eval()
    return model, tokenizer


def test_save_then_load_gives_identical_logits(tmp_path):
    model, tokenizer = make_model()
    path = save_checkpoint(model, tokenizer, "run-1", directory=tmp_path, training={"steps_done": 3})
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors", "training.json",
                                                      "vocabulary.json"]
    loaded = load_checkpoint("run-1", directory=tmp_path)
    idx = torch.randint(0, tokenizer.vocabulary_size, (2, 8))
    assert torch.equal(loaded.model(idx).logits, model(idx).logits)
    assert loaded.tokenizer == tokenizer and loaded.config == model.config and loaded.steps == 3


def test_missing_key_is_refused(tmp_path):
    model, tokenizer = make_model()
    path = save_checkpoint(model, tokenizer, "broken", directory=tmp_path)
    state = load_file(path / "model.safetensors")
    del state["lm_head.weight"]
    save_file(state, path / "model.safetensors")
    with pytest.raises(CheckpointError, match="missing keys: lm_head.weight"):
        load_checkpoint("broken", directory=tmp_path)


def test_unexpected_key_and_wrong_shape_are_refused(tmp_path):
    model, tokenizer = make_model()
    path = save_checkpoint(model, tokenizer, "extra", directory=tmp_path)
    state = load_file(path / "model.safetensors")
    save_file({**state, "surprise": torch.zeros(1)}, path / "model.safetensors")
    with pytest.raises(CheckpointError, match="unexpected keys: surprise"):
        load_checkpoint("extra", directory=tmp_path)
    state["lm_head.weight"] = torch.zeros(3, 3)
    save_file(state, path / "model.safetensors")
    with pytest.raises(CheckpointError, match="lm_head.weight has shape"):
        load_checkpoint("extra", directory=tmp_path)


def test_pickle_or_garbage_weights_are_refused_without_unpickling(tmp_path):
    model, tokenizer = make_model()
    path = save_checkpoint(model, tokenizer, "pickled", directory=tmp_path)
    torch.save(model.state_dict(), path / "model.safetensors")  # a pickle under the safetensors name
    with pytest.raises(CheckpointError, match="corrupt or not safetensors"):
        load_checkpoint("pickled", directory=tmp_path)


def test_corrupt_config_is_a_clear_error(tmp_path):
    model, tokenizer = make_model()
    path = save_checkpoint(model, tokenizer, "cfg", directory=tmp_path)
    (path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json is unreadable or not JSON"):
        load_checkpoint("cfg", directory=tmp_path)
    (path / "config.json").write_text(json.dumps({**model.config.to_dict(), "heads_num": 5}))
    with pytest.raises(CheckpointError, match="not divisible"):
        load_checkpoint("cfg", directory=tmp_path)


def test_failure_mid_save_keeps_previous_checkpoint(tmp_path, monkeypatch):
    model, tokenizer = make_model(seed=0)
    save_checkpoint(model, tokenizer, "keep", directory=tmp_path, training={"steps_done": 1})
    newer, _ = make_model(seed=1)

    def explode(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoints, "_fsync_tree", explode)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(newer, tokenizer, "keep", directory=tmp_path, training={"steps_done": 2})
    loaded = load_checkpoint("keep", directory=tmp_path)
    assert loaded.steps == 1
    idx = torch.randint(0, tokenizer.vocabulary_size, (1, 8))
    assert torch.equal(loaded.model(idx).logits, model(idx).logits)
    assert [p.name for p in tmp_path.iterdir() if p.name != checkpoints.LOCK_FILE] == ["keep"]


def test_crash_between_renames_is_recovered(tmp_path):
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "mid", directory=tmp_path)
    (tmp_path / "mid").rename(tmp_path / ".old-mid-1234abcd")
    assert list_checkpoints(tmp_path) == ["mid"]
    load_checkpoint("mid", directory=tmp_path)


@pytest.mark.parametrize("name", ["../evil", "a/b", "..", ".hidden", "", "x" * 65, "a\\b", "/abs", "ok/../x",
                                  "name with space", "semi;colon", "tab\tname", "nul\x00"])
def test_bad_names_are_refused(name, tmp_path):
    with pytest.raises(CheckpointError):
        checkpoints.validate_name(name)


def test_listing_puts_default_first_and_skips_incomplete(tmp_path):
    model, tokenizer = make_model()
    for name in ("zeta", "alpha", checkpoints.DEFAULT_CHECKPOINT):
        save_checkpoint(model, tokenizer, name, directory=tmp_path)
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "config.json").write_text("{}")
    assert list_checkpoints(tmp_path) == [checkpoints.DEFAULT_CHECKPOINT, "alpha", "zeta"]


def test_missing_checkpoint_message(tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint named 'nope'"):
        load_checkpoint("nope", directory=tmp_path)


def test_listing_during_a_save_does_not_undo_it(tmp_path, monkeypatch):
    """A listing between the save's two renames must not restore the old copy (the save holds the lock)."""
    model, tokenizer = make_model(seed=0)
    save_checkpoint(model, tokenizer, "busy", directory=tmp_path)
    real_rename = checkpoints.os.rename
    seen = []

    def rename_then_list(src, dst):
        real_rename(src, dst)
        if ".old-" in str(dst):
            seen.append(list_checkpoints(tmp_path))  # another viewer lists mid-save

    monkeypatch.setattr(checkpoints.os, "rename", rename_then_list)
    newer, _ = make_model(seed=1)
    save_checkpoint(newer, tokenizer, "busy", directory=tmp_path, training={"steps_done": 9})
    assert seen == [[]]
    assert load_checkpoint("busy", directory=tmp_path).steps == 9


def test_parameter_cap_refuses_before_reading_weights(tmp_path):
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "big", directory=tmp_path)
    with pytest.raises(CheckpointError, match="this server's limit is 100"):
        load_checkpoint("big", directory=tmp_path, max_parameters=100)


def test_a_folder_path_loads_and_a_bare_name_means_the_weights_folder(tmp_path, monkeypatch):
    model, tokenizer = make_model()
    path = save_checkpoint(model, tokenizer, "there", directory=tmp_path / "w")
    assert load_checkpoint(path).name == "there"
    assert load_checkpoint(str(path)).name == "there"
    monkeypatch.chdir(tmp_path / "w")
    with pytest.raises(CheckpointError, match="no checkpoint named 'there'"):
        load_checkpoint("there", directory=tmp_path / "elsewhere")
