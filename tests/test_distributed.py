"""Training on several processes (distributed.py, the loop's DDP path, the CLI under torchrun)."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from conftest import REPO, SHARED_CORPUS

from playground.checkpoints import store as checkpoints
from playground.text.data import TokenIdsDataset
from playground.training.distributed import SINGLE, DistributedError, World, parameter_digest
from playground.training.loop import batch_seed


def test_torchruns_environment_makes_the_world_and_a_plain_process_is_single():
    assert World.from_env({}) is SINGLE and not SINGLE.distributed and SINGLE.is_main
    assert World.from_env({"WORLD_SIZE": "1", "RANK": "0"}) == World(0, 1, 0, 1)
    second = World.from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert second == World(3, 4, 1, 2) and second.distributed and not second.is_main
    assert second.launcher() == "torchrun --nnodes=2 --nproc_per_node=2"
    assert World.from_env({"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0"}).launcher() == \
        "torchrun --nproc_per_node=2"
    assert SINGLE.launcher() == "python"
    with pytest.raises(DistributedError, match="environment variable RANK must be a whole number >= 0, got None"):
        World.from_env({"WORLD_SIZE": "2"})
    with pytest.raises(DistributedError, match="LOCAL_RANK must be a whole number >= 0, got 'x'"):
        World.from_env({"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "x"})
    with pytest.raises(DistributedError, match=r"RANK 2 must be in \[0, WORLD_SIZE 2\)"):
        World.from_env({"WORLD_SIZE": "2", "RANK": "2", "LOCAL_RANK": "0"})


def test_each_rank_draws_its_own_batches_and_rank_0_a_plain_runs():
    data = TokenIdsDataset(torch.arange(1000), 8)
    assert batch_seed(1337, 5, rank=0) == batch_seed(1337, 5) == 1337 * 1_000_003 + 5  # a single process unchanged
    for seed in (0, 1, 2**31 - 1):  # torch's CPU generator reads a seed's low 32 bits only: those must differ
        steps, ranks = (0, 1, 2, 19_999, 20_000, 999_999), (0, 1, 2, 7, 4095)
        assert len({batch_seed(seed, step, rank) % 2**32 for step in steps for rank in ranks}) == 6 * 5
    batches = [data.random_batch(4, torch.Generator().manual_seed(batch_seed(0, 7, rank)))[0] for rank in range(2)]
    assert not torch.equal(*batches)


def torchrun(tmp_path, steps: int, *flags: str) -> subprocess.CompletedProcess:
    """``torchrun --nproc_per_node=2 -m playground.train`` of a 1-layer model on the CPU (gloo), into tmp_path/w."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
               "-m", "playground.train", "--layers-num", "1", "--heads-num", "2", "--embedding-dim", "32",
               "--context-size", "32", "--batch-size", "8", "--steps", str(steps), "--learning-rate", "1e-2",
               "--warmup-steps", "5", "--eval-batches", "2", "--corpus", str(SHARED_CORPUS), "--run-name", "ddp",
               "--weights-dir", str(tmp_path / "w"), "--device", "cpu", *flags]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PLAYGROUND_OFFLINE": "1"}
    return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_torchrun_trains_on_two_processes_with_identical_weights_and_one_checkpoint(tmp_path):
    """``torchrun --nproc_per_node=2 -m playground.train`` on the CPU (gloo): rank 0 alone prints and saves, the
    loss falls, and both ranks end with bit-identical weights, rank 0's being the checkpoint's."""
    weights = tmp_path / "w"
    result = torchrun(tmp_path, 40, "--eval-interval", "20", "--checkpoint-interval", "25")
    err = result.stderr
    assert result.returncode == 0, err[-3000:]
    assert err.count("training ddp: ") == 1 and "× 2 processes" in err and err.count("done: 40 steps") == 1
    assert "rank 1:" not in err and "error:" not in err
    digests = re.search(r"weights after the last step: rank 0 sha256 (\w+), rank 1 sha256 (\w+)", err)
    assert digests and digests[1] == digests[2]
    saved = checkpoints.load_checkpoint("ddp", directory=weights)
    assert parameter_digest(saved.model) == digests[1]  # the checkpoint is rank 0's weights, the same kind as ever
    assert [p.name for p in weights.iterdir() if not p.name.startswith(".")] == ["ddp"]
    record = json.loads((weights / "ddp" / "training.json").read_text())
    assert record["steps_done"] == 40 and record["processes"] == 2 and [s for s, _ in record["val_loss"]] == [20, 40]
    losses = [loss for _, loss in record["train_loss"]]
    assert sum(losses[-5:]) / 5 < sum(losses[:5]) / 5 - 0.5, losses
    card = (weights / "ddp" / "README.md").read_text()
    assert "torchrun --nproc_per_node=2 -m playground.train --layers-num 1" in card


@pytest.mark.slow
def test_a_time_budget_ends_every_rank_at_the_same_step_with_identical_weights(tmp_path):
    """Each rank times its own steps; the schedule follows the slowest rank's clock, so the learning rates stay
    equal (the weights bit-identical) and every rank stops at the same step."""
    result = torchrun(tmp_path, 5000, "--eval-interval", "1000", "--time-budget-seconds", "2")
    err = result.stderr
    assert result.returncode == 0, err[-3000:]
    done = re.search(r"done: (\d+) steps \(its 2 s time budget ended it\)", err)
    assert done and 10 < int(done[1]) < 5000, err[-2000:]
    digests = re.search(r"weights after the last step: rank 0 sha256 (\w+), rank 1 sha256 (\w+)", err)
    assert digests and digests[1] == digests[2]
    record = json.loads((tmp_path / "w" / "ddp" / "training.json").read_text())
    assert record["budget_reached"] and record["steps_done"] == int(done[1]) and record["step_seconds"] >= 2
