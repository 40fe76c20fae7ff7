import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import REPO
from safetensors.torch import load_file, save_file

from playground.checkpoints import store as checkpoints
from playground.checkpoints.store import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint
from playground.config import ModelConfig
from playground.model.gpt import GPT
from playground.text.tokenizer import CharTokenizer
from playground.training import optimizer_state as optim_state


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
    assert [p.name for p in tmp_path.iterdir()] == ["keep"]  # and no lock file: the lock is on the folder


def _entries(folder):
    return sorted((e.name, e.stat().st_mtime_ns) for e in folder.iterdir())


def test_crash_between_renames_is_recovered_at_start_up_not_by_listing(tmp_path):
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "mid", directory=tmp_path)
    (tmp_path / "mid").rename(tmp_path / ".old-mid-1234abcd")
    before = _entries(tmp_path)
    assert list_checkpoints(tmp_path) == []  # listing only reads: the orphaned copy stays where it is
    assert _entries(tmp_path) == before
    checkpoints.recover(tmp_path)
    assert list_checkpoints(tmp_path) == ["mid"]
    load_checkpoint("mid", directory=tmp_path)
    assert not any(e.name.startswith(".old-") for e in tmp_path.iterdir())


def test_recover_removes_a_dead_saves_temporary_folder_however_young(tmp_path):
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "kept", directory=tmp_path)
    dead = tmp_path / ".tmp-kept-abc123"  # what a killed save leaves: unclaimed, made a moment ago
    dead.mkdir()
    (dead / checkpoints.WEIGHTS_FILE).write_bytes(b"half")
    assert list_checkpoints(tmp_path) == ["kept"] and dead.exists()
    checkpoints.recover(tmp_path)
    assert not dead.exists() and list_checkpoints(tmp_path) == ["kept"]


SAVE_THAT_WAITS = textwrap.dedent('''
    import sys
    from pathlib import Path
    from playground.checkpoints import store as checkpoints
    from playground.config import ModelConfig
    from playground.model.gpt import GPT
    from playground.text.tokenizer import CharTokenizer

    real_fsync = checkpoints._fsync_tree
    def fsync_then_wait(folder):
        print(folder, flush=True)
        sys.stdin.readline()  # the parent runs recover() now, while this save is half-way
        real_fsync(folder)
    checkpoints._fsync_tree = fsync_then_wait
    tokenizer = CharTokenizer.train_from_text("ab")
    model = GPT(ModelConfig(vocabulary_size=2, context_size=4, embedding_dim=8, heads_num=2, layers_num=1))
    checkpoints.save_checkpoint(model, tokenizer, "live", directory=Path(sys.argv[1]), training={"steps_done": 7})
    print("saved", flush=True)
''')


def test_recover_spares_a_save_running_in_another_process(tmp_path):
    """The app starting while a CLI run saves: its temporary folder is claimed, so recovery leaves it alone."""
    child = subprocess.Popen([sys.executable, "-c", SAVE_THAT_WAITS, str(tmp_path)], cwd=REPO, text=True,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        temporary = child.stdout.readline().strip()
        assert temporary, child.stderr.read()
        checkpoints.recover(tmp_path)
        assert Path(temporary).is_dir() and Path(temporary).name.startswith(".tmp-live-")
        out, err = child.communicate("go\n", timeout=120)
    finally:
        child.kill()
    assert child.returncode == 0 and "saved" in out, err
    assert load_checkpoint("live", directory=tmp_path).steps == 7


def test_recover_leaves_a_folder_it_cannot_lock_alone(tmp_path, monkeypatch, caplog):
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "mid", directory=tmp_path)
    (tmp_path / "mid").rename(tmp_path / ".old-mid-1234abcd")

    def read_only(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(checkpoints, "_folder_lock", read_only)
    checkpoints.recover(tmp_path)  # a read-only weights folder must not stop the app from starting
    assert "could not clear" in caplog.text and (tmp_path / ".old-mid-1234abcd").is_dir()


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


def test_recovery_during_a_save_does_not_undo_it(tmp_path, monkeypatch):
    """Recovery between the save's two renames must not restore the old copy (the save holds the lock)."""
    model, tokenizer = make_model(seed=0)
    save_checkpoint(model, tokenizer, "busy", directory=tmp_path)
    real_rename = checkpoints.os.rename
    seen = []

    def rename_then_list(src, dst):
        real_rename(src, dst)
        if ".old-" in str(dst):
            checkpoints.recover(tmp_path)  # another process starting up mid-save
            seen.append(list_checkpoints(tmp_path))

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


def _adamw(model, fused):
    """The trainer's optimizer: two groups (decay on matrices only), as train.configure_optimizer builds it."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=1e-2, betas=(0.9, 0.99), fused=fused)


def _step(model, optimizer, x, y):
    optimizer.zero_grad(set_to_none=True)
    model(x, y).loss.backward()
    optimizer.step()


@pytest.mark.parametrize("fused", [False, True], ids=["for-loop", "fused"])
def test_optimizer_state_round_trips_so_a_resumed_step_is_identical(tmp_path, fused):
    model, tokenizer = make_model()
    model.train()
    optimizer = _adamw(model, fused)
    x, y = (torch.randint(0, tokenizer.vocabulary_size, (4, 8)) for _ in range(2))
    for _ in range(3):
        _step(model, optimizer, x, y)
    path = save_checkpoint(model, tokenizer, "warm", directory=tmp_path,
                           optimizer_state=optim_state.flatten_optimizer_state(optimizer, model))
    assert (path / checkpoints.OPTIMIZER_FILE).is_file()

    resumed = load_checkpoint("warm", directory=tmp_path).model.train()
    resumed_optimizer = _adamw(resumed, fused)
    state = checkpoints.load_optimizer_state("warm", tmp_path)
    optim_state.restore_optimizer_state(resumed_optimizer, resumed, *state)
    cold = load_checkpoint("warm", directory=tmp_path).model.train()
    cold_optimizer = _adamw(cold, fused)
    for pair in ((model, optimizer), (resumed, resumed_optimizer), (cold, cold_optimizer)):
        _step(*pair, x, y)
    for (name, expected), actual in zip(model.named_parameters(), resumed.parameters()):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=name)
    assert any(not torch.equal(a, b) for a, b in zip(model.parameters(), cold.parameters())), \
        "a cold optimizer took the same step: the test cannot tell warm from cold"
    assert resumed_optimizer.param_groups[0]["fused"] is fused  # how it computes stays as built


def test_a_checkpoint_without_optimizer_state_still_loads_and_says_so(tmp_path):
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "plain", directory=tmp_path)
    assert checkpoints.load_optimizer_state("plain", tmp_path) is None
    load_checkpoint("plain", directory=tmp_path)


def test_a_new_save_without_optimizer_state_drops_the_old_one(tmp_path):
    model, tokenizer = make_model()
    optimizer = _adamw(model, False)
    model.train()
    _step(model, optimizer, *(torch.randint(0, tokenizer.vocabulary_size, (2, 8)) for _ in range(2)))
    save_checkpoint(model, tokenizer, "run", directory=tmp_path,
                    optimizer_state=optim_state.flatten_optimizer_state(optimizer, model))
    save_checkpoint(model, tokenizer, "run", directory=tmp_path)  # stale moments would not match these weights
    assert checkpoints.load_optimizer_state("run", tmp_path) is None


def test_a_corrupt_optimizer_file_is_a_checkpoint_error(tmp_path):
    model, tokenizer = make_model()
    path = save_checkpoint(model, tokenizer, "bad", directory=tmp_path)
    (path / checkpoints.OPTIMIZER_FILE).write_bytes(b"\x00" * 20)
    with pytest.raises(CheckpointError, match="optimizer.safetensors is corrupt"):
        checkpoints.load_optimizer_state("bad", tmp_path)


def test_optimizer_state_for_another_model_or_optimizer_is_refused(tmp_path):
    model, tokenizer = make_model()
    model.train()
    optimizer = _adamw(model, False)
    _step(model, optimizer, *(torch.randint(0, tokenizer.vocabulary_size, (2, 8)) for _ in range(2)))
    state = optim_state.flatten_optimizer_state(optimizer, model)
    wider = GPT(ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=8, embedding_dim=16,
                            heads_num=2, layers_num=2))
    with pytest.raises(optim_state.OptimizerStateError, match="other parameters"):
        optim_state.restore_optimizer_state(_adamw(wider, False), wider, *state)
    with pytest.raises(optim_state.OptimizerStateError, match="is for AdamW, not SGD"):
        optim_state.restore_optimizer_state(torch.optim.SGD(model.parameters(), lr=0.1), model, *state)


# ------------------------------------------------------------------------------------------ shipped, names
def test_shipped_names_and_fresh_names(tmp_path):
    assert checkpoints.is_shipped("shakespeare-char") and not checkpoints.is_shipped("shakespeare-char-2")
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "my-run-1", directory=tmp_path)
    (tmp_path / "my-run-2").mkdir()  # anything with the name, even an empty folder, is taken
    assert checkpoints.fresh_run_name(tmp_path) == "my-run-3"
    assert checkpoints.fresh_run_name(tmp_path, "tiny") == "tiny-1"


def test_remove_takes_a_checkpoint_away_in_one_rename(tmp_path):
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "gone", directory=tmp_path)
    checkpoints.remove("gone", tmp_path)
    checkpoints.remove("never-was", tmp_path)  # nothing to remove: nothing happens
    assert not list(tmp_path.iterdir())


def test_recovery_at_start_up_leaves_nothing_in_the_weights_folder(tmp_path):
    """Every stranger who tried the app found a `.lock` in the clone's weights/ after starting it: the save lock is an
    flock on the folder itself, so start-up's recovery and a save leave only the checkpoints."""
    model, tokenizer = make_model()
    save_checkpoint(model, tokenizer, "kept", directory=tmp_path)
    checkpoints.recover(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["kept"]
