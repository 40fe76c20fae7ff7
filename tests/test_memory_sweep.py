"""The training estimate holds inside a real memory limit: a child process trains a few steps in a cgroup v1 memory
group whose limit is what it used after its imports plus the estimate, so an estimate below the true peak is an OOM
kill, not a number; the group's own high-water mark then shows the estimate is not more than twice the peak.

The same for the other requests a visitor can make that tests/test_budget.py and tests/test_inference_budget.py
measure without a limit: converting an uploaded nanoGPT ckpt.pt, importing a GPT-2 layout repo from the (stub) Hub,
and a comparison of every attention implementation.

One guard shape a kind runs here; ``benchmarks/memory_sweep.py`` runs the sweeps (every shape, with and without
dropout, through these functions) when an estimate changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
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
from playground.model.gpt import GPT
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


@contextlib.contextmanager
def memory_group() -> Iterator[Path | None]:
    """A fresh cgroup v1 memory group (root and a v1 hierarchy needed), or None where none can be made; removed
    afterwards."""
    if not (V1_ROOT / "cgroup.procs").is_file() or os.geteuid() != 0:
        yield None
        return
    path = V1_ROOT / f"attention-playground-sweep-{uuid.uuid4().hex[:8]}"
    try:
        path.mkdir()
    except OSError:
        yield None
        return
    try:
        yield path
    finally:
        try:
            path.rmdir()
        except OSError:
            pass


@pytest.fixture
def group():
    """``memory_group``'s group; the test is skipped where none can be made."""
    with memory_group() as path:
        if path is None:
            pytest.skip("no cgroup v1 memory hierarchy to make a group in")
        yield path


def _peak_in_group(group, child: str, args: list[str], shape, estimate: int) -> int:
    """Run ``child`` (python -c) inside the memory group; the peak it prints. Killed or failed: the test fails."""
    run = subprocess.run([sys.executable, "-c", child, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                         preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())))
    assert run.returncode == 0, (f"{shape}: killed or failed inside a limit of the estimate "
                                 f"({budget.human(estimate)}): {run.returncode} {run.stderr[-1500:]}")
    return json.loads(run.stdout)


TRAINING_GUARD = (2, 3, 96, 64, 32, 0.0)  # layers, heads, width, context, batch, dropout: the tiny preset


def training_in_group(group: Path, shape) -> tuple[int, int]:
    """The training estimate of ``shape`` and the peak of a child training it inside a limit of that estimate."""
    L, h, C, T, B, p = shape
    config = ModelConfig(vocabulary_size=65, context_size=T, embedding_dim=C, heads_num=h, layers_num=L,
                         dropout_rate=p)
    estimate = budget.training_cost(parameters=config.parameter_count(), layers_num=L, embedding_dim=C,
                                    context_size=T, vocabulary_size=65, batch_size=B, heads_num=h,
                                    explicit_attention=budget.attention_is_explicit(p, "cpu")).bytes
    measured = _peak_in_group(group, CHILD, [str(group), *map(str, (L, h, C, T, B, 65, p, estimate))], shape,
                              estimate)
    return estimate, measured


def test_the_training_estimate_holds_inside_a_memory_limit_of_that_size(group):
    estimate, measured = training_in_group(group, TRAINING_GUARD)
    print(f"{TRAINING_GUARD}: estimate {budget.human(estimate)}, peak in the group {budget.human(measured)}")
    assert measured <= estimate <= 2 * measured


# A child's measurement, between its warm-up and the work measured: the group's limit set to what it uses now plus
# the estimate (past it, page cache aside, the child is killed), and the process's peak counted from here on
CHILD_RSS = """
def rss(field='VmRSS'):
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field))
"""
CHILD_LIMIT = """
import ctypes, gc
gc.collect()
ctypes.CDLL('libc.so.6').malloc_trim(0)
if group is not None:  # None: no group could be made (tests/test_inference_budget.py measures without a limit)
    base = int((group / "memory.usage_in_bytes").read_text())
    (group / "memory.limit_in_bytes").write_text(str(base + estimate))  # past it (page cache aside): killed
own = rss()
open('/proc/self/clear_refs', 'w').write('5')  # this process's peak from here on
"""
CONVERT_CHILD = """
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from playground.checkpoints.nanogpt import convert_nanogpt
""" + CHILD_RSS + """
group, folder, estimate = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
# a small one first, as a server has: the modules a conversion imports on first use are the process's
convert_nanogpt(folder / "small.pt", "warm-up", meta_path=folder / "meta.pkl", directory=folder / "warm-up")
""" + CHILD_LIMIT + """
convert_nanogpt(folder / "ckpt.pt", "converted", meta_path=folder / "meta.pkl", directory=folder / "weights")
print(json.dumps(rss('VmHWM') - own))
"""


CONVERSION_GUARD = (4, 4, 192, 128, True)  # layers, heads, width, context, AdamW's moments saved: the shipped shape


def conversion_in_group(group: Path, tmp_path: Path, shape) -> tuple[int, int]:
    """An uploaded nanoGPT ckpt.pt (weights, and AdamW's two moments where nanoGPT saves them) converted inside a
    limit of what the app reserves for it: the upload's estimate and the converted model's, together. The process's
    own peak (page cache aside, which the kernel reclaims before it kills) is at least half of that, the allocator's
    fixed slack aside (all of the conversion tests' small model)."""
    import torch
    from test_convert import CHARS, NanoGPT, write_meta

    from playground.checkpoints.nanogpt import held_bytes, model_config

    layers, heads, width, context, moments = shape
    args = dict(n_layer=layers, n_head=heads, n_embd=width, block_size=context, bias=True, vocab_size=len(CHARS),
                dropout=0.0)

    def save(args, path) -> int:
        """Saves a model of ``args`` as nanoGPT does; the bytes its weights hold once read."""
        model = NanoGPT(**args)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        model(torch.zeros((1, args["block_size"]), dtype=torch.long)).sum().backward()
        optimizer.step()  # the moments exist, as in a trained run's checkpoint
        torch.save({"model": model.state_dict(), **({"optimizer": optimizer.state_dict()} if moments else {}),
                    "model_args": args, "iter_num": 1, "best_val_loss": torch.tensor(1.5),
                    "config": {"dataset": "shakespeare_char"}}, path)
        return held_bytes(model.state_dict().values())

    read_bytes = save(args, tmp_path / "ckpt.pt")
    save({**args, "n_layer": 1, "n_head": 1, "n_embd": 8, "block_size": 8}, tmp_path / "small.pt")
    write_meta(tmp_path / "meta.pkl")
    size = (tmp_path / "ckpt.pt").stat().st_size
    estimate = (budget.conversion_cost(upload_bytes=size).bytes
                + budget.converted_cost(parameters=model_config(args).parameter_count(), read_bytes=read_bytes,
                                        upload_bytes=size).bytes)
    measured = _peak_in_group(group, CONVERT_CHILD, [str(group), str(tmp_path), str(estimate)], shape, estimate)
    assert (tmp_path / "weights" / "converted" / "model.safetensors").is_file()
    return estimate, measured


def test_the_conversion_estimate_holds_inside_a_memory_limit_of_that_size(group, tmp_path):
    estimate, measured = conversion_in_group(group, tmp_path, CONVERSION_GUARD)
    print(f"{CONVERSION_GUARD}: estimate {budget.human(estimate)}, peak {budget.human(measured)}")
    assert measured <= estimate <= 2 * measured + budget.CONVERSION_SLACK


HUB_CHILD = """
from playground.budget import fix_heap
fix_heap()  # as app.py does: with glibc's own threshold freed blocks stay resident (a half-precision load held
# 30.8 MiB for 27.9 MiB of weights against 28.2 with it, and one CI run failed the Hub import at 50.9 MB)
import ctypes, gc, json, sys
from pathlib import Path
import torch
torch.set_num_threads(1)
from playground.checkpoints import loading
""" + CHILD_RSS + """
group, repo, estimate = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
loading.open_checkpoint("learner/warm-up")  # a small one first, as a server has: the Hub client's imports
""" + CHILD_LIMIT + """
checkpoint = loading.open_checkpoint(repo)
gc.collect()
print(json.dumps([rss('VmHWM') - own, rss() - own, checkpoint.model.weights_bytes()]))
"""


HUB_GUARD = (384, 4, 6, 256, "float32", False)  # width, layers, heads, context, stored dtype, old style: 28 MiB


def hub_import_in_group(group: Path, tmp_path: Path, shape) -> tuple[int, int, int, int]:
    """A GPT-2 layout repo saved by transformers, served by the stub Hub, downloaded and loaded by the playground's
    one resolver inside a limit of what the Hub import reserves (``hub.loading_cost``); the process's peak (page cache
    aside) is at least half of it, and once loaded it holds the model's weights once (not the file's mapping too)."""
    import torch
    from test_gpt2 import old_style_weights, train_bpe
    from test_hub import StubHub
    from transformers import GPT2Config, GPT2LMHeadModel

    from playground.checkpoints import hub

    width, layers, heads, context, dtype, old_style = shape
    tokenizer = train_bpe()
    eos = tokenizer.vocabulary_size - 1

    def repo(folder: Path, **shape) -> dict[str, bytes]:
        torch.manual_seed(0)
        config = GPT2Config(vocab_size=tokenizer.vocabulary_size, activation_function="gelu_new", bos_token_id=eos,
                            eos_token_id=eos, **shape)
        GPT2LMHeadModel(config).eval().to(getattr(torch, dtype)).save_pretrained(folder)
        (folder / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
        if old_style:
            files = {name: (folder / name).read_bytes() for name in ("config.json", "model.safetensors")}
            (folder / "model.safetensors").write_bytes(old_style_weights(files, folder))
        return {name: (folder / name).read_bytes() for name in ("config.json", "model.safetensors", "tokenizer.json")}

    served = {"learner/warm-up": repo(tmp_path / "warm-up", n_embd=16, n_layer=1, n_head=1, n_positions=16),
              "learner/sweep": repo(tmp_path / "sweep", n_embd=width, n_layer=layers, n_head=heads,
                                    n_positions=context)}
    estimate = hub.loading_cost(tmp_path / "sweep").bytes
    stub = StubHub(served)
    stub.thread.start()
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            for name in ("PLAYGROUND_OFFLINE", "HF_HUB_OFFLINE", "PLAYGROUND_HUB_ALLOW"):
                monkeypatch.delenv(name, raising=False)
            monkeypatch.setenv("HF_ENDPOINT", stub.url)
            monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "users-hf-cache"))
            monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
            monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET", "8G")  # the group's limit is the test's, not the budget
            measured, held, weights = _peak_in_group(group, HUB_CHILD, [str(group), "learner/sweep", str(estimate)],
                                                     shape, estimate)
    finally:
        stub.server.shutdown()
        stub.server.server_close()
    return estimate, measured, held, weights


def test_the_hub_import_estimate_holds_inside_a_memory_limit_of_that_size(group, tmp_path):
    estimate, measured, held, weights = hub_import_in_group(group, tmp_path, HUB_GUARD)
    print(f"{HUB_GUARD}: estimate {budget.human(estimate)}, peak {budget.human(measured)}, held once loaded "
          f"{budget.human(held)} for {budget.human(weights)}")
    assert measured <= estimate <= 2 * measured
    assert held < 1.25 * weights + budget.INFERENCE_OVERHEAD


COMPARE_CHILD = """
from playground.budget import fix_heap
fix_heap()  # as app.py does when the server starts
import json, sys, torch
from pathlib import Path
torch.set_num_threads(1)
from playground.attention.equivalence import compare
group = Path(sys.argv[1])
(d, h, T, B), dtype, estimate = map(int, sys.argv[2:6]), getattr(torch, sys.argv[6]), int(sys.argv[7])
base = int((group / "memory.usage_in_bytes").read_text())
(group / "memory.limit_in_bytes").write_text(str(base + estimate))  # past it: the kernel kills this process
(group / "memory.max_usage_in_bytes").write_text("0")
compare(d, d, h, T, B, 0, False, dtype, "cpu", with_maps=False)
print(json.dumps(int((group / "memory.max_usage_in_bytes").read_text()) - base))
"""


COMPARE_GUARD = (1024, 64, 512, 1, "float32")  # many narrow heads: 1.45x its peak (the tab's default 1.92x)


def compare_in_group(group: Path, shape) -> tuple[int, int]:
    from test_budget import ITEMSIZE

    d, h, T, B, dtype = shape
    estimate = budget.compare_cost(embedding_dim=d, heads_num=h, seq_len=T, batch=B, itemsize=ITEMSIZE[dtype]).bytes
    return estimate, _peak_in_group(group, COMPARE_CHILD, [str(group), *map(str, shape), str(estimate)], shape,
                                    estimate)


def test_the_compare_estimate_holds_inside_a_memory_limit_of_that_size(group):
    """Every implementation's forward on one input inside a limit of what the Compare tab reserves
    (``budget.compare_cost``), held to the same slack as its unlimited measurement in tests/test_budget.py: the
    allocator's peak for one comparison varies from run to run."""
    from test_budget import ATTENTION_SLACK

    estimate, measured = compare_in_group(group, COMPARE_GUARD)
    print(f"compare {COMPARE_GUARD}: estimate {budget.human(estimate)}, peak in the group {budget.human(measured)}")
    assert measured <= estimate <= ATTENTION_SLACK * measured
