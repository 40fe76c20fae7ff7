"""The training estimate holds inside a real memory limit: a child process trains a few steps in a cgroup v1 memory
group whose limit is what it used after its imports plus the estimate, so an estimate below the true peak is an OOM
kill, not a number; the group's own high-water mark then shows the estimate is not more than twice the peak (plus the
fixed working space the estimate keeps, which runs this small never fill). Small shapes, with and without dropout
(dropout keeps explicit (B, h, T, T) attention on a CPU), so it stays fast enough for CI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from conftest import REPO

from playground import budget
from playground.config import ModelConfig

V1_ROOT = Path("/sys/fs/cgroup/memory")

CHILD = """
import json, sys, torch
from pathlib import Path
torch.set_num_threads(1)
from playground.config import ModelConfig
from playground.model import GPT
group = Path(sys.argv[1])
L, h, C, T, B, V = map(int, sys.argv[2:8]); p, estimate = float(sys.argv[8]), int(sys.argv[9])
torch.manual_seed(0)
x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
base = int((group / "memory.usage_in_bytes").read_text())
(group / "memory.limit_in_bytes").write_text(str(base + estimate))  # past it: the kernel kills this process
(group / "memory.max_usage_in_bytes").write_text("0")
model = GPT(ModelConfig(vocabulary_size=V, context_size=T, embedding_dim=C, heads_num=h, layers_num=L,
                        dropout_rate=p))
model.train()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
for _ in range(2):
    loss = model(x, y).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(json.dumps(int((group / "memory.max_usage_in_bytes").read_text()) - base))
"""


@pytest.fixture
def group():
    """A fresh cgroup v1 memory group (root and a v1 hierarchy needed), removed afterwards."""
    if not (V1_ROOT / "cgroup.procs").is_file() or os.geteuid() != 0:
        pytest.skip("no cgroup v1 memory hierarchy to make a group in")
    path = V1_ROOT / f"attention-playground-sweep-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a memory cgroup: {exc}")
    yield path
    try:
        path.rmdir()
    except OSError:
        pass


@pytest.mark.parametrize("shape", [
    (2, 3, 96, 64, 32, 0.0),  # the tiny preset
    (2, 3, 96, 64, 32, 0.2),  # the same with dropout: explicit attention
    (1, 8, 64, 256, 8, 0.5),  # many heads, longer context, dropout: the (B, h, T, T) blocks dominate
    (4, 4, 192, 128, 8, 0.0),  # the shipped model's shape
])
def test_the_training_estimate_holds_inside_a_memory_limit_of_that_size(group, shape):
    L, h, C, T, B, p = shape
    config = ModelConfig(vocabulary_size=65, context_size=T, embedding_dim=C, heads_num=h, layers_num=L,
                         dropout_rate=p)
    estimate = budget.training_cost(parameters=config.parameter_count(), layers_num=L, embedding_dim=C,
                                    context_size=T, vocabulary_size=65, batch_size=B, heads_num=h,
                                    explicit_attention=budget.attention_is_explicit(p, "cpu")).bytes
    run = subprocess.run([sys.executable, "-c", CHILD, str(group), *map(str, (L, h, C, T, B, 65, p, estimate))],
                         cwd=REPO, capture_output=True, text=True, timeout=300,
                         preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
    assert run.returncode == 0, (f"{shape}: killed or failed inside a limit of the estimate "
                                 f"({budget.human(estimate)}): {run.returncode} {run.stderr[-1500:]}")
    measured = json.loads(run.stdout)
    print(f"{shape}: estimate {budget.human(estimate)}, peak in the group {budget.human(measured)}")
    assert measured <= estimate <= 2 * measured + budget.FIXED_OVERHEAD
