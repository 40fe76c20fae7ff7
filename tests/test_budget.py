"""The memory model: estimates bound measured peaks, the budget reserves and refuses with advice."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import REPO

from playground import budget
from playground.config import ModelConfig

MEASURE = """
from playground.budget import fix_heap
fix_heap()  # as app.py does when the server starts
import json, resource, sys, torch
torch.set_num_threads(1)
def rss(field='VmRSS'):
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field))
def peak():
    return rss('VmHWM')
from playground.config import ModelConfig
from playground.model.gpt import GPT
L, h, C, T, B, V = map(int, sys.argv[1:7])
torch.manual_seed(0)
base = rss()
open('/proc/self/clear_refs', 'w').write('5')  # the peak from here: not the imports' (a fresh venv compiles .pyc)
model = GPT(ModelConfig(vocabulary_size=V, context_size=T, embedding_dim=C, heads_num=h, layers_num=L))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
for _ in range(2):
    x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
    loss = model(x, y).loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
print(json.dumps(peak() - base))
"""


PARALLEL = 2  # children measured at once, one a core: each reads its own process's peak, so they do not mix


def _measure_all(children: list[list[str]]) -> list[int | str]:
    """Each child (``python -c`` and its arguments) run, PARALLEL at a time: the peak it prints, or why it failed
    (each shape then fails alone)."""
    def run(child: list[str]) -> int | str:
        done = subprocess.run([sys.executable, "-c", *child], cwd=REPO, capture_output=True, text=True, timeout=600)
        return json.loads(done.stdout) if done.returncode == 0 else f"exit {done.returncode}: {done.stderr[-2000:]}"
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(run, children))


def _peak(peaks: dict, shape) -> int:
    measured = peaks[shape]
    assert isinstance(measured, int), measured
    return measured


def _shapes(layers_num, heads_num, embedding_dim, context_size, batch_size, vocabulary_size=65):
    config = ModelConfig(vocabulary_size=vocabulary_size, context_size=context_size, embedding_dim=embedding_dim,
                         heads_num=heads_num, layers_num=layers_num)
    return dict(parameters=config.parameter_count(), layers_num=layers_num, embedding_dim=embedding_dim,
                context_size=context_size, vocabulary_size=vocabulary_size, batch_size=batch_size)


# The guard shape of each kind measured here (benchmarks/memory_sweep.py measures the sweeps): one shape a request
# kind keeps the estimate honest in every run of the suite; the sweep re-fits it across shapes when it changes.
TRAINING_GUARD = (2, 3, 96, 64, 32)  # layers, heads, width, context, batch: the tiny preset


def training_peaks(shapes) -> dict:
    """Each training shape's peak (or why its child failed), PARALLEL children at a time."""
    return dict(zip(shapes, _measure_all([[MEASURE, *map(str, shape), "65"] for shape in shapes])))


def training_estimate(shape) -> int:
    return budget.training_cost(**_shapes(*shape)).bytes


def test_the_training_estimate_bounds_the_measured_peak():
    measured = _peak(training_peaks([TRAINING_GUARD]), TRAINING_GUARD)
    estimate = training_estimate(TRAINING_GUARD)
    print(f"{TRAINING_GUARD}: estimate {budget.human(estimate)}, measured {budget.human(measured)}, "
          f"ratio {estimate / measured:.2f}")
    assert measured <= estimate <= 2 * measured


MEASURE_DROPOUT = MEASURE.replace(
    "L, h, C, T, B, V = map(int, sys.argv[1:7])", "L, h, C, T, B, V = map(int, sys.argv[1:7]); p = float(sys.argv[7])"
).replace("layers_num=L)", "layers_num=L, dropout_rate=p)")


DROPOUT_GUARD = (2, 2, 128, 1024, 2, 0.1)  # and dropout: the longest context (1.74x its peak; 64 heads: 2.1x)


def dropout_peaks(shapes) -> dict:
    return dict(zip(shapes, _measure_all([[MEASURE_DROPOUT, *map(str, (L, h, C, T, B, 65, p))]
                                          for L, h, C, T, B, p in shapes])))


def dropout_estimate(shape) -> int:
    L, h, C, T, B, p = shape
    return budget.training_cost(**_shapes(L, h, C, T, B), heads_num=h,
                                explicit_attention=budget.attention_is_explicit(p, "cpu")).bytes


def test_the_training_estimate_with_dropout_bounds_the_measured_peak():
    """With dropout on a CPU attention keeps (B, h, T, T) tensors for backward, which the estimate counts. It must
    stay above the measured peak and within twice it plus FIXED_OVERHEAD: the estimate's fixed working space, which
    a run this small never fills."""
    measured = _peak(dropout_peaks([DROPOUT_GUARD]), DROPOUT_GUARD)
    estimate = dropout_estimate(DROPOUT_GUARD)
    print(f"{DROPOUT_GUARD}: estimate {budget.human(estimate)}, measured {budget.human(measured)}")
    assert measured <= estimate <= 2 * measured + budget.FIXED_OVERHEAD


def test_a_run_with_dropout_is_priced_by_its_heads_and_refused_with_what_to_lower():
    """1 layer, 64 heads, width 64, context 1024, batch 8, dropout 0.5: 123k parameters whose attention keeps
    8 x 64 x 1024 x 1024 numbers for backward; the estimate without them was 214 MiB."""
    from playground.training.estimates import memory_advice, memory_cost

    config = ModelConfig(vocabulary_size=65, context_size=1024, embedding_dim=64, heads_num=64, layers_num=1,
                         dropout_rate=0.5)
    assert memory_cost(config, 8).bytes > 15 * budget.GIB
    assert memory_cost(config, 8, "cuda").bytes < 300 * budget.MIB  # SDPA on a GPU keeps no (T, T)
    assert "set dropout_rate to 0" in memory_advice(config, 8, budget.GIB)
    small = ModelConfig(vocabulary_size=65, context_size=1024, embedding_dim=192, heads_num=4, layers_num=4,
                        dropout_rate=0.1)
    advice = memory_advice(small, 32, int(1.8 * budget.GIB))
    most = int(advice.split("at most ")[1].split(" ")[0])
    assert memory_cost(small, most).bytes <= 1.8 * budget.GIB < memory_cost(small, most + 1).bytes


def test_the_estimate_grows_with_every_shape():
    base = budget.training_cost(**_shapes(2, 2, 64, 64, 8)).bytes
    for changed in (_shapes(4, 2, 64, 64, 8), _shapes(2, 2, 128, 64, 8), _shapes(2, 2, 64, 128, 8),
                    _shapes(2, 2, 64, 64, 16)):
        assert budget.training_cost(**changed).bytes > base


def test_the_issue_s_killer_request_is_refused_with_what_to_lower():
    shapes = _shapes(1, 1, 1024, 1024, 1024)
    memory = budget.MemoryBudget(int(3.6 * budget.GIB), "test")
    cost = budget.training_cost(**shapes)
    most = budget.largest_batch(memory.total, **{k: v for k, v in shapes.items() if k != "batch_size"})
    with pytest.raises(budget.BudgetError, match=r"training needs about .* GiB.*over this server's memory budget "
                                                  rf"of 3.6 GiB.*batch_size to at most {most}"):
        memory.check(cost, hint=f"lower batch_size to at most {most}")
    assert 0 < most < 1024
    assert budget.training_cost(**{**shapes, "batch_size": most}).bytes <= memory.total
    assert budget.training_cost(**{**shapes, "batch_size": most + 1}).bytes > memory.total


def test_reservations_add_up_and_are_given_back():
    memory = budget.MemoryBudget(1000 * budget.MIB, "test")
    cost = budget.Cost("a compare", (("maps", 600 * budget.MIB),))
    with memory.reserve(cost):
        assert memory.reserved == 600 * budget.MIB
        with pytest.raises(budget.BudgetError, match="other requests hold 600.0 MiB.*try again"):
            memory.acquire(cost)
    assert memory.reserved == 0
    with pytest.raises(RuntimeError), memory.reserve(cost):
        raise RuntimeError("the work failed")
    assert memory.reserved == 0


def test_concurrent_reservations_never_exceed_the_budget():
    memory = budget.MemoryBudget(10 * budget.MIB, "test")
    cost = budget.Cost("x", (("part", 3 * budget.MIB),))
    peak, lock = [0], threading.Lock()

    def work():
        for _ in range(200):
            try:
                with memory.reserve(cost):
                    with lock:
                        peak[0] = max(peak[0], memory.reserved)
            except budget.BudgetError:
                pass

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak[0] <= memory.total and memory.reserved == 0


def test_the_default_budget_reads_the_environment_then_the_container(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET", "1.5G")
    assert budget.default_budget() == (int(1.5 * budget.GIB), "PLAYGROUND_MEMORY_BUDGET")
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET", "lots")
    with pytest.raises(budget.BudgetError, match="size like 2G"):
        budget.default_budget()
    monkeypatch.delenv("PLAYGROUND_MEMORY_BUDGET")
    limit = tmp_path / "memory.max"
    limit.write_text("4294967296\n")
    monkeypatch.setattr(budget, "cgroup_limit_files", lambda: [tmp_path / "absent", limit])
    total, source = budget.default_budget()
    assert total == int(budget.BUDGET_SHARE * 4 * budget.GIB) and "container's 4.0 GiB" in source
    limit.write_text("max\n")
    assert "this machine's" in budget.default_budget()[1]


def test_the_servers_own_budget_sets_aside_the_kernel_cache_and_a_given_total_does_not(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_MEMORY_BUDGET", "2G")
    server = budget.MemoryBudget()
    assert server.total == 2 * budget.GIB - budget.kernel_cache_cost().bytes
    assert "kernel cache" in server.source
    left = budget.human(2 * budget.GIB - budget.KERNEL_CACHE_HEAP)
    with pytest.raises(budget.BudgetError, match=f"over this server.s memory budget of {left}"):
        server.check(budget.Cost("this request", (("all of it", 2 * budget.GIB - 1),)))
    assert budget.MemoryBudget(2 * budget.GIB, "test").total == 2 * budget.GIB


def test_the_limit_of_the_process_s_own_cgroup_and_its_ancestors_is_found(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/outer/inner\n0::/slice/app\n3:cpuset:/\n")
    files = [str(path) for path in budget.cgroup_limit_files(proc)]
    assert "/sys/fs/cgroup/memory/outer/inner/memory.limit_in_bytes" in files
    assert "/sys/fs/cgroup/memory/outer/memory.limit_in_bytes" in files
    assert "/sys/fs/cgroup/memory/memory.limit_in_bytes" in files
    assert "/sys/fs/cgroup/slice/app/memory.max" in files and "/sys/fs/cgroup/memory.max" in files


# --------------------------------------------------------------------------------------- the Attention tab

MEASURE_VIEW = """
import json, resource, sys, torch
torch.set_num_threads(1)
def rss(field='VmRSS'):
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field))
def peak():
    return rss('VmHWM')
from playground.lens.walkthrough import random_head, stage_notes
T, C, d = map(int, sys.argv[1:4])
small = random_head(8, 4, 2, seed=0)
stage_notes("weights", small.trace(), **small.as_kwargs())  # the first call's one-off working space
base = rss()
open('/proc/self/clear_refs', 'w').write('5')  # the peak from here: not the imports' (a fresh venv compiles .pyc)
inputs = random_head(T, C, d, seed=0)
trace = inputs.trace(mask=False)
default = inputs.trace()
notes = stage_notes("weights", trace, **inputs.as_kwargs())
print(json.dumps(peak() - base))
"""


ATTENTION_VIEW_GUARD = (512, 1024, 1024)  # length, width, head size: a full-size random head, 1.59x its peak (the
# longest text with the model's head size, (1024, 64, 16), is 2.2x: benchmarks/memory_sweep.py)


def attention_view_peak(shape) -> int:
    """Step 6 with a switch off, in a child: the trace shown, the default beside it, and the notes' four traces."""
    run = subprocess.run([sys.executable, "-c", MEASURE_VIEW, *map(str, shape)], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


def attention_view_estimate(shape) -> int:
    T, C, d = shape
    return budget.attention_view_cost(length=T, embedding_dim=C, head_size=d, traces=6).bytes


def test_the_attention_view_estimate_bounds_the_measured_peak():
    measured, estimate = attention_view_peak(ATTENTION_VIEW_GUARD), attention_view_estimate(ATTENTION_VIEW_GUARD)
    print(f"{ATTENTION_VIEW_GUARD}: estimate {budget.human(estimate)}, measured {budget.human(measured)}")
    assert measured <= estimate <= 2 * measured


def test_one_trace_s_tensors_fit_its_share_of_the_estimate():
    from playground.lens.walkthrough import random_head

    T, C, d = 200, 24, 8
    trace = random_head(T, C, d, seed=0).trace()
    kept = sum(getattr(trace, name).nbytes for name in ("q", "k", "v", "scores", "scaled_scores", "masked_scores",
                                                        "weights", "output"))
    one = dict(budget.attention_view_cost(length=T, embedding_dim=C, head_size=d, traces=1).parts)
    two = dict(budget.attention_view_cost(length=T, embedding_dim=C, head_size=d, traces=2).parts)
    assert kept <= one["1 trace of the head"] and two["2 traces of the head"] == 2 * one["1 trace of the head"]
    assert one["the head's input and weights"] == 4 * (T * C + 3 * C * d)


def test_the_attention_view_cost_grows_with_t_squared_and_what_it_draws():
    def cost(**changes):
        shapes = dict(length=256, embedding_dim=64, head_size=16, traces=1, heatmap_cells=0, bars=0) | changes
        return budget.attention_view_cost(**shapes).bytes

    assert cost(length=1024) - cost(length=512) > 3.5 * (cost(length=512) - cost())  # (T, T) matrices dominate
    assert cost(traces=6) > cost(traces=2) > cost()
    assert cost(heatmap_cells=128 * 128) - cost() == 128 * 128 * budget.BYTES_PER_HEATMAP_CELL
    assert cost(bars=2) > cost()


def test_a_full_size_random_head_is_refused_with_what_to_lower():
    cost = budget.attention_view_cost(length=1024, embedding_dim=1024, head_size=1024, traces=6,
                                      heatmap_cells=2 * 128 * 128, bars=2)
    assert 250 * budget.MIB < cost.bytes < 400 * budget.MIB
    memory = budget.MemoryBudget(200 * budget.MIB, "test")
    with pytest.raises(budget.BudgetError, match=r"this attention view needs about 3\d\d\.\d MiB \(.*6 traces of "
                                                  r"the head 240\.0 MiB.*over .* 200\.0 MiB.*lower head_size"):
        memory.check(cost, hint="lower head_size")


def test_the_export_estimate_bounds_the_csv_it_writes():
    import tracemalloc

    import torch

    from playground.lens.walkthrough import to_csv, to_npy_bytes

    rows, cols = 256, 256
    values = torch.randn(rows, cols) * 1e-3  # long numbers: -0.0012345678
    labels = [f"t{i}" for i in range(rows)]
    tracemalloc.start()
    try:
        text = to_csv(values, labels, labels).encode("utf-8")
        npy = to_npy_bytes(values)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    parts = dict(budget.attention_export_cost(length=rows, embedding_dim=8, head_size=8, numbers=rows * cols).parts)
    assert len(text) <= budget.BYTES_PER_CSV_NUMBER * rows * cols
    assert peak <= parts["CSV text"] + parts[".npy files"] and len(npy) <= parts[".npy files"]
    assert "1 trace of the head" in parts and "figures" not in parts


def test_costs_combine_part_by_part():
    a = budget.Cost("forward", (("weights", 10),))
    b = budget.Cost("view", (("traces", 5), ("figures", 1)))
    both = budget.combined("this view", a, b)
    assert both.bytes == 16 and both.what == "this view" and [name for name, _ in both.parts] == [
        "weights", "traces", "figures"]


# ------------------------------------------------------------------------ the Compare tab's requests
ATTENTION_MEASURE = """
from playground.budget import fix_heap
fix_heap()  # as app.py does when the server starts
import json, resource, sys, torch
torch.set_num_threads(1)
def rss(field='VmRSS'):
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith(field))
def peak():
    return rss('VmHWM')
from playground.attention import IMPLEMENTATIONS
from playground.attention.costs import time_implementations
from playground.attention.equivalence import compare
kind, (d, h, T, B), dtype = sys.argv[1], map(int, sys.argv[2:6]), getattr(torch, sys.argv[6])
base = rss()
open('/proc/self/clear_refs', 'w').write('5')  # the peak from here: not the imports' (a fresh venv compiles .pyc)
if kind == "compare":
    compare(d, d, h, T, B, 0, False, dtype, "cpu", with_maps=False)
else:  # the sweep's peak is at its largest T; one repeat a cell holds what many do
    names = [n for n, impl in IMPLEMENTATIONS.items() if impl.unsupported_reason(d, d, h) is None]
    time_implementations(names, d, d, h, [T // 2, T], B, "cpu", dtype, warmup=1, repeats=1)
print(json.dumps(peak() - base))
"""
ITEMSIZE = {"float32": 4, "bfloat16": 2}
# How far over the measured peak an attention estimate may be, as for every other request: with glibc's own mmap
# threshold one comparison peaked at 136 to 247 MiB from run to run and needed 2.5; with the server's (fix_heap),
# 122 to 132
ATTENTION_SLACK = 2


ATTENTION_RUNS = 2  # fresh processes a shape: the allocator's peak for one request varies from process to process
ATTENTION_GUARDS = {  # embedding, heads, T (the timing sweep's largest), batch, dtype
    "compare": (1024, 64, 512, 1, "float32"),  # many narrow heads: 1.45x (the tab's default is at 1.94x)
    "timing": (64, 4, 1024, 2, "float32"),  # the Compare tab's default sweep
}
ATTENTION_COSTS = {"compare": budget.compare_cost, "timing": budget.timing_cost}


def attention_peaks(kind: str, shapes) -> dict:
    """The worse of ATTENTION_RUNS fresh processes per shape of ``kind`` (or why one failed)."""
    runs = _measure_all([[ATTENTION_MEASURE, kind, *map(str, shape)] for shape in shapes
                         for _ in range(ATTENTION_RUNS)])
    peaks = {}
    for n, shape in enumerate(shapes):
        measured = runs[n * ATTENTION_RUNS:(n + 1) * ATTENTION_RUNS]
        failed = [run for run in measured if not isinstance(run, int)]
        peaks[shape] = failed[0] if failed else max(measured)
    return peaks


def attention_estimate(kind: str, shape) -> int:
    d, h, T, B, dtype = shape
    return ATTENTION_COSTS[kind](embedding_dim=d, heads_num=h, seq_len=T, batch=B, itemsize=ITEMSIZE[dtype]).bytes


def test_the_compare_estimate_bounds_the_measured_peak():
    _estimate_bounds_measured("compare")


def test_the_timing_estimate_bounds_the_measured_peak():
    _estimate_bounds_measured("timing")


def _estimate_bounds_measured(kind):
    shape = ATTENTION_GUARDS[kind]
    measured = _peak(attention_peaks(kind, [shape]), shape)
    estimate = attention_estimate(kind, shape)
    print(f"{kind} {shape}: estimate {budget.human(estimate)}, measured {budget.human(measured)}, "
          f"ratio {estimate / measured:.2f}")
    assert measured <= estimate <= ATTENTION_SLACK * measured


def test_attention_estimates_grow_with_every_shape_and_count_the_maps():
    shapes = dict(embedding_dim=64, heads_num=4, seq_len=128, batch=2, itemsize=4)
    for cost in (budget.compare_cost, budget.timing_cost):
        base = cost(**shapes).bytes
        for name in ("embedding_dim", "heads_num", "seq_len", "batch", "itemsize"):
            assert cost(**{**shapes, name: shapes[name] * 2}).bytes > base, (cost.__name__, name)
    assert budget.compare_cost(**shapes, maps=True).bytes > budget.compare_cost(**shapes).bytes
    assert budget.timing_cost(**shapes).bytes > budget.compare_cost(**shapes).bytes  # backward keeps more


def test_the_compare_that_killed_a_6_gb_server_is_held_to_one_at_a_time():
    """1024 wide, 64 heads, T 1024, batch 2: a 6 GB server's budget (60%) holds one such comparison, not four."""
    memory = budget.MemoryBudget(int(budget.BUDGET_SHARE * 6 * 10**9), "test")
    cost = budget.compare_cost(embedding_dim=1024, heads_num=64, seq_len=1024, batch=2, itemsize=4)
    assert 2 * budget.GIB < cost.bytes < memory.total
    with memory.reserve(cost):
        with pytest.raises(budget.BudgetError, match="other requests hold .* try again"):
            memory.acquire(cost)


HEAP_LEFT = """
import ctypes, sys
from playground import budget
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))
blocks = [libc.malloc(64 * 1024) for _ in range(4096)]  # 256 MiB of heap blocks, under glibc's mmap threshold
for block in blocks:
    ctypes.memset(block, 1, 64 * 1024)  # touched: resident
for block in blocks[:-1]:  # freed but the last, which keeps the heap's top from shrinking by itself
    libc.free(block)
freed = rss()
server = budget.MemoryBudget(2**30, "test")
with server.reserve(budget.Cost("a request", (("its work", 2**20),))):
    pass
print(freed - rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_a_request_giving_its_memory_back_trims_the_heap():
    """glibc keeps what a request freed resident for the next one: after forward passes at 512 text lengths, 454 to
    603 MiB that no request held (benchmarks/kernel_cache_memory.py). The budget trims the heap when a request gives
    its memory back: 256 MiB freed in a child go back to the system when a reservation ends."""
    child = subprocess.run([sys.executable, "-c", HEAP_LEFT], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    assert int(child.stdout) > 200 * 2**20, child.stdout


FREED_BLOCK = """
import ctypes, sys
from playground.budget import fix_heap
if sys.argv[1] == 'fixed':
    assert fix_heap()
def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith('VmRSS'))
libc = ctypes.CDLL('libc.so.6')
libc.malloc.restype, libc.malloc.argtypes, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_size_t], [ctypes.c_void_p]
size = 8 << 20  # one (h, T, T) float32 map at 8 heads, T 512
libc.free(libc.malloc(size))  # glibc's dynamic mmap threshold rises past 8 MiB here
block = libc.malloc(size)
ctypes.memset(block, 1, size)
held = rss()
libc.free(block)
print(held - rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux") or budget._mallopt() is None, reason="glibc only")
def test_fix_heap_gives_a_freed_large_block_back_where_glibc_would_keep_it():
    """The second 8 MiB block comes from the heap and stays resident when freed with glibc's dynamic threshold (the
    process-to-process spread of tests/test_inference_budget.py); after fix_heap it is mmapped and given back."""
    returned = {}
    for mode in ("dynamic", "fixed"):
        run = subprocess.run([sys.executable, "-c", FREED_BLOCK, mode], cwd=REPO, capture_output=True, text=True,
                             timeout=60, check=True)
        returned[mode] = int(run.stdout.strip())
    assert returned["dynamic"] < budget.MIB, returned
    assert returned["fixed"] >= 7 * budget.MIB, returned
