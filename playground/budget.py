"""What a request costs in memory before it runs, and the one server budget every request draws from.

A public Space serves whoever comes, and one allowed request can hold more memory than the machine has. So each
kind of work estimates its peak memory from its shapes *before* it starts, and reserves those bytes from one
``MemoryBudget``; a request that could never fit is refused with what to lower and to what, and one
that does not fit *now* (others hold the memory) is refused as busy. Knows nothing about the UI.

The training estimate (fp32, AdamW, CPU or GPU), measured against ``ru_maxrss`` of real steps in
tests/test_budget.py, where it must stay above the measured peak and within 2x of it:

    16 bytes per parameter            weights, gradients, AdamW's two moments
    104 bytes per token, layer, channel  the activations a block keeps for backward (~26 floats)
    48 bytes per token and channel    the transient buffers of the backward pass
    16 bytes per token and symbol     logits, their softmax and its gradient
    + FIXED_OVERHEAD                  the allocator's and kernels' first-call working space
    with dropout on a CPU, attention runs as explicit (B, h, T, T) tensors (model.py; SDPA keeps none):
    24 bytes per element and layer    kept for backward: softmax's output, the dropped weights (4 + 4) and the
                                      mask (1), and the freed (B, h, T, T) blocks glibc's heap keeps resident
                                      (measured 9 to 26 bytes per element and layer: 26 where each block is
                                      4-32 MiB, below glibc's largest mmap threshold, 10 above it)
    8 bytes per element, once         one layer's scores and masked scores while it is built

    tiny preset (2 layers, 128 wide, context 64, batch 32): about 200 MiB; measured 147 MiB.
    1 layer, 8 heads, 64 wide, context 512, batch 8, dropout 0.5: about 683 MiB; measured 343 MiB.

One head traced step by step (the Attention tab), in float32, per trace of T tokens, C features, head size d:

    6 (T, T) matrices                 scores, scaled, masked, weights, and softmax's and the mask's temporaries
    4 (T, d) matrices                 Q, K, V, output
    + the inputs (T, C) and weights 3 (C, d), once; + each figure (about 1 KiB per heatmap cell drawn)
    an export: one trace + about 20 bytes per number of CSV text (held 3 times while written) + 4 per .npy

    T 1024, C 1024, d 1024, six traces, two 128 x 128 heatmaps and two bar charts: about 320 MiB.

The Compare tab's two requests, measured the same way (tests/test_budget.py, the worse of two runs: the
allocator's peaks vary by up to 2x between runs of the same request), on the CPU:

    compare (every implementation's forward, no gradients)   timing sweep (forward + backward at each T)
    5.5 (B, h, T, T) matrices at the dtype's itemsize         7 of them, at the largest T
    (h + 2) (T, T) causal masks, fp32                          twice that: two layers are alive as one is built
    4 copies of one layer's fp32 weights (4·d² + 4·d)         the same
    12 (B, T, d) fp32 activations                              24 of them (with their gradients)
    + 64 MiB working space                                     + 192 MiB (autograd's and the kernels' first calls)

    compare d 512, 8 heads, T 1024, batch 4: about 920 MiB; measured 553 to 798 MiB.

What Gradio keeps per session between requests, once the app empties its per-session config copies (the figures
and texts it keeps for deep links: server/http.py), is set aside from the budget for every session it may keep:

    SESSION_FIXED                     the session's own objects and its small states (measured 14 KiB)
    512 bytes per sampled token       the Sample tab's history state (id, text, probability, ten candidates;
                                      measured ~370)

    200 sessions at 2000 tokens: about 208 MiB.

The server's own budget (a MemoryBudget made without a total) also sets aside what its process keeps for torch's
kernel cache whatever runs: KERNEL_CACHE_HEAP, 64 MiB. Every reservation's release trims glibc's heap
(``trim_heap``), or the freed heap pinned between the cached kernels would stay resident (up to 603 MiB measured).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

MIB = 2**20
GIB = 2**30
FIXED_OVERHEAD = 128 * MIB
BYTES_PER_PARAMETER_TRAINING = 16
BYTES_PER_ACTIVATION = 104  # per token, layer and channel, kept for backward
BYTES_PER_BACKWARD_BUFFER = 48  # per token and channel
BYTES_PER_LOGIT = 16  # per token and vocabulary symbol
BYTES_PER_ATTENTION_ELEMENT = 24  # per (B, h, T, T) element and layer, with dropout on a CPU (explicit attention)
BYTES_PER_ATTENTION_ELEMENT_BUILT = 8  # per (B, h, T, T) element, once: the layer being built
BYTES_PER_FLOAT = 4
TRACE_SQUARE_MATRICES = 6  # (T, T) float32 matrices one head trace holds at its peak
TRACE_HEAD_MATRICES = 4  # (T, d) float32 matrices one head trace keeps: Q, K, V, output
BYTES_PER_HEATMAP_CELL = 1024  # hover text, numbers and the figure's JSON; a 128 x 128 heatmap measured ~660
BYTES_PER_BAR = 8 * 1024  # one bar of a bar chart, with Plotly's validation copies (1024 bars measured ~6 MiB)
BYTES_PER_CSV_NUMBER = 20  # "-0.123456789" and a comma; float32 written with repr's shortest digits
CSV_COPIES = 3  # the rows' strings, the StringIO buffer and the encoded bytes are alive together
VIEW_WORKING_SPACE = 16 * MIB
SESSION_FIXED = 64 * 1024  # per session Gradio keeps: its objects once emptied (measured 14 KiB) and small states
BYTES_PER_KEPT_TOKEN = 512  # per token of the Sample tab's history a session keeps (measured ~370)
BUDGET_SHARE = 0.6  # of the container's (or machine's) memory; the rest is the server itself and the OS
NO_LIMIT = 2**60  # cgroup files say "max" or a huge number when nothing is set
# What a server process keeps whatever runs, beside what requests reserve: oneDNN caches a compiled kernel for each
# input shape it meets (settings.PROCESS_DEFAULTS caps the cache at 64), and glibc keeps the heap's freed blocks
# between those kernels resident. Forward passes with maps at 512 text lengths up to 1024 (2 layers, 8 heads, width
# 256) left 447 to 603 MiB more resident in three runs; with the heap trimmed after each pass, as every release does
# (trim_heap), -5 to 2 MiB in two runs: the kernels are small, the heap they pin is not
# (benchmarks/kernel_cache_memory.py --trim-each). 64 MiB leaves room for what a trim cannot give back (a block still
# alive at the heap's top, a response built after its request's release).
KERNEL_CACHE_HEAP = 64 * MIB
CGROUP_FILES = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))


class BudgetError(ValueError):
    """A request does not fit the server's memory budget; the message says what to lower."""


def human(num_bytes: float) -> str:
    """1536 -> '1.5 KiB'; 3 * 2**30 -> '3.0 GiB'."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(num_bytes) < 1024 or unit == "GiB":
            return f"{num_bytes:.0f} {unit}" if unit == "bytes" else f"{num_bytes:.1f} {unit}"
        num_bytes /= 1024
    return f"{num_bytes:.1f} GiB"


@dataclass(frozen=True)
class Cost:
    """An estimate of one request's peak memory, in named parts."""

    what: str
    parts: tuple[tuple[str, int], ...]

    @property
    def bytes(self) -> int:
        return sum(size for _, size in self.parts)

    def describe(self) -> str:
        shown = "; ".join(f"{name} {human(size)}" for name, size in self.parts if size >= MIB)
        return f"{self.what} needs about {human(self.bytes)}" + (f" ({shown})" if shown else "")


def training_cost(*, parameters: int, layers_num: int, embedding_dim: int, context_size: int,
                  vocabulary_size: int, batch_size: int, heads_num: int = 1,
                  explicit_attention: bool = False) -> Cost:
    """Peak memory of one training step (forward, backward, AdamW) for these shapes.

    ``explicit_attention``: attention is computed as (B, h, T, T) tensors kept for backward, as model.py does with
    dropout on a CPU (``attention_is_explicit``); otherwise scaled_dot_product_attention keeps none.
    """
    tokens = batch_size * context_size
    parts = [
        ("weights, gradients and AdamW state", BYTES_PER_PARAMETER_TRAINING * parameters),
        ("activations kept for backward", BYTES_PER_ACTIVATION * tokens * layers_num * embedding_dim),
        ("backward buffers", BYTES_PER_BACKWARD_BUFFER * tokens * embedding_dim),
        ("logits", BYTES_PER_LOGIT * tokens * vocabulary_size),
    ]
    if explicit_attention:
        elements = batch_size * heads_num * context_size * context_size
        parts.append(("(B, h, T, T) attention with dropout", elements * (
            BYTES_PER_ATTENTION_ELEMENT * layers_num + BYTES_PER_ATTENTION_ELEMENT_BUILT)))
    parts.append(("working space", FIXED_OVERHEAD))
    return Cost("training", tuple(parts))


def attention_is_explicit(dropout_rate: float, device_type: str) -> bool:
    """Whether training computes attention as explicit (B, h, T, T) tensors: with dropout on a CPU (model.py)."""
    return dropout_rate > 0 and device_type == "cpu"


def largest_batch(fits_bytes: int, **shapes) -> int:
    """The largest batch_size whose training_cost is at most ``fits_bytes`` (0 when even 1 does not fit)."""
    one = training_cost(batch_size=1, **shapes).bytes
    two = training_cost(batch_size=2, **shapes).bytes
    per_sample = two - one
    return max(0, int((fits_bytes - (one - per_sample)) // per_sample))


# a forward pass's small temporaries beyond its counted tensors, with the heap fixed (fix_heap): at the shipped model's
# shape (4 layers, 4 heads, width 192, T 128) the pass with maps peaked at 10.1 to 10.5 MiB against 12.1 counted
# before this, every view and sampling below theirs but the head table (28.4 against 26.9), in warm processes
# (tests/test_inference_budget.py); 7 MiB put the smallest estimates past twice their peaks (uncached sampling 17.1
# against 8.5 to 10.3, the block level 19.7 against 9.2 to 10.4); with 4 every kind at every shape holds both bounds
INFERENCE_OVERHEAD = 4 * MIB


def inference_cost(*, parameters: int, layers_num: int, heads_num: int, embedding_dim: int, context_size: int,
                   vocabulary_size: int, batch_size: int = 1, attention_maps: bool = False) -> Cost:
    """Peak memory of one forward pass without gradients (sampling, a probe, the Attention tab); with
    ``attention_maps``, every layer's (B, h, T, T) weights kept, as the views draw them. Measured against the peak of
    real passes in tests/test_inference_budget.py."""
    tokens = batch_size * context_size
    parts = [
        ("weights", 4 * parameters),
        # the weights are blocks under fix_heap's 4 MiB threshold, in the heap, and the pass's temporaries fill the
        # gaps between them: at nanoGPT's shape (6 layers, 6 heads, width 384, T 256, 41 MiB of weights) the pass with
        # maps peaked 22 to 28 MiB past its weights against 21 counted (tests/test_inference_budget.py, and 59 to 71
        # by process before the heap was fixed); a quarter of the weights covers it, and at the shipped shape (7 MiB of
        # weights) keeps the smallest estimates within twice their peaks
        ("the allocator's slack beside the weights", parameters),
        ("activations", 4 * tokens * (16 * embedding_dim + vocabulary_size)),
        ("working space", INFERENCE_OVERHEAD),
    ]
    if attention_maps:
        one_layer = 4 * batch_size * heads_num * context_size * context_size  # (B, h, T, T) in float32
        parts.append(("attention maps", layers_num * one_layer))
        # and every layer's input beside its maps, (B, T, C) each (model.py: the LayerNorm'd stream the views read)
        parts.append(("every layer's input", layers_num * 4 * tokens * embedding_dim))
        # while a layer's maps are made two more (B, h, T, T) tensors are alive beside them (model.py: the scores,
        # then their masked copy). With glibc's dynamic mmap threshold the freed ones stayed resident in some
        # processes (2 layers, 8 heads, T 512 peaked at 35 to 73 MiB, four and a half copies counted); with the fixed
        # threshold the server sets (fix_heap) 35.8 to 37.2, and two keep twice the lowest peak above the estimate
        # Under fix_heap's threshold a layer's (B, h, T, T) blocks come from the heap, where what one layer frees may
        # stay resident beside the next layer's: the head table's probes (batch 8, 8 heads, T 96: 2.25 MiB blocks)
        # peaked at 26 to 33 MiB and past 35 by process against two copies counted once. There, every layer's two
        # are counted
        in_heap = one_layer < MMAP_THRESHOLD
        parts.append(("attention's working copies", 2 * one_layer * (layers_num if in_heap else 1)))
    return Cost("this forward pass", tuple(parts))


def attention_matrices_cost(*, batch: int, heads: int, length: int, itemsize: int, copies: int = 2,
                            what: str = "attention") -> Cost:
    """(B, h, T, T) score-sized matrices: ``copies`` of them (scores and weights: 2) at ``itemsize`` bytes."""
    return Cost(what, (("(B, h, T, T) matrices", copies * batch * heads * length * length * itemsize),))


def attention_view_cost(*, length: int, embedding_dim: int, head_size: int, traces: int = 1,
                        heatmap_cells: int = 0, bars: int = 0) -> Cost:
    """Peak memory of one step of the Attention tab: ``traces`` traces of one head (T = ``length`` tokens,
    C = ``embedding_dim``, d = ``head_size``), ``heatmap_cells`` cells drawn and ``bars`` bars of T each.

    Counts every trace as alive at once, though the what-ifs drop theirs as they go: an upper bound.
    """
    T, C, d = length, embedding_dim, head_size
    per_trace = BYTES_PER_FLOAT * (TRACE_SQUARE_MATRICES * T * T + TRACE_HEAD_MATRICES * T * d)
    return Cost("this attention view", (
        ("the head's input and weights", BYTES_PER_FLOAT * (T * C + 3 * C * d)),
        (f"{traces} trace{'s' if traces != 1 else ''} of the head", traces * per_trace),
        ("figures", heatmap_cells * BYTES_PER_HEATMAP_CELL + bars * T * BYTES_PER_BAR),
        ("working space", VIEW_WORKING_SPACE),
    ))


def attention_export_cost(*, length: int, embedding_dim: int, head_size: int, numbers: int) -> Cost:
    """Peak memory of exporting one stage: one trace, then ``numbers`` values written as CSV and .npy."""
    trace = attention_view_cost(length=length, embedding_dim=embedding_dim, head_size=head_size)
    return Cost("this export", (
        *(part for part in trace.parts if part[0] != "figures"),
        ("CSV text", CSV_COPIES * BYTES_PER_CSV_NUMBER * numbers),
        (".npy files", 2 * BYTES_PER_FLOAT * numbers),
    ))


def sessions_cost(*, sessions: int, max_new_tokens: int) -> Cost:
    """What Gradio keeps for ``sessions`` sessions between requests, each with a sample of ``max_new_tokens``."""
    return Cost(f"{sessions} sessions kept", (("their objects", sessions * SESSION_FIXED),
                                              ("their samples' histories", sessions * max_new_tokens
                                               * BYTES_PER_KEPT_TOKEN)))


BODY_COPIES = 3  # a JSON body Gradio reads: its bytes, the decoded text, the values parsed from it


def bodies_cost(total_bytes: int) -> Cost:
    """What request bodies in flight hold at most: ``total_bytes`` of them at once (server/bodies.py), each read
    whole and parsed."""
    return Cost("request bodies in flight", (("their bytes, read and parsed", BODY_COPIES * total_bytes),))


CONVERSION_SLACK = 8 * MIB  # the allocator's and the unpickler's own, beyond the tensors (measured under 1 MiB)


def conversion_cost(*, upload_bytes: int) -> Cost:
    """What reading an uploaded nanoGPT ckpt.pt of ``upload_bytes`` holds: its tensors as read (torch.save stores
    them uncompressed, so about the file's size: weights and AdamW's two moments). Measured in a memory-limited
    child (tests/test_memory_sweep.py): the conversion's peak is the file's size and under 1 MiB more."""
    return Cost("converting this checkpoint", (("its tensors, read", upload_bytes),
                                               ("the allocator's slack", CONVERSION_SLACK)))


def converted_cost(*, parameters: int, read_bytes: int, upload_bytes: int) -> Cost:
    """What converting holds beyond conversion_cost's reservation: once the upload is read only its weights stay
    (``read_bytes``, what they hold in memory; AdamW's moments, two thirds of a trained ckpt.pt, are let go), beside
    the float32 weights made from them and a serialised copy while those are saved (priced by the shape the
    checkpoint declares, before the model is built). The upload's reservation covers that much of it.

    Measured in a memory-limited child (tests/test_memory_sweep.py): counting the upload and both copies in full
    priced a trained checkpoint's conversion at 2.0-2.4x its peak, which is the file's size."""
    weights = 4 * parameters
    beyond = max(0, read_bytes + 2 * weights - upload_bytes)
    return Cost("converting this checkpoint", (("its weights, converted and saved, beyond the upload read", beyond),))


BYTES_PER_TOKENIZER_TOKEN = 768  # a tokenizer's vocabulary and merges in memory, per token: issue 54's Hub repo of
# 791,900 tokens (a 16 MiB vocab.json) held about 550 MiB for each checkpoint kept, 728 bytes a token


def tokenizer_cost(vocabulary_size: int) -> Cost:
    """What a loaded checkpoint's tokenizer holds beside its weights, from its vocabulary's size (a character
    tokenizer's 65 symbols: 50 KB; a BPE repo's 791,900 tokens: 580 MiB)."""
    return Cost("its tokenizer", (("its vocabulary and merges", BYTES_PER_TOKENIZER_TOKEN * int(vocabulary_size)),))


def import_cost(*, stored_bytes: int, parameters: int, largest_tensor: int) -> Cost:
    """What loading a downloaded checkpoint's weights holds at its peak: the weights files as read (safetensors maps
    them, and every page read stays resident while the file is open), the model's float32 weights, and one
    tensor's float32 copy while it is converted (a stored fp16 head). ``largest_tensor``: that tensor's numbers.

    Measured in a memory-limited child (tests/test_memory_sweep.py), GPT-2 layout repos from the Hub: 19.3M
    parameters in fp32 (73.8 MiB) peaked at 147.6 MiB against 159.6 estimated; 7.3M in fp16 with the old mask
    buffers and a stored head (15.2 MiB) at 43.8 against 53.4.
    """
    return Cost("loading this checkpoint", (("its weights files, read", stored_bytes),
                                            ("its float32 weights", 4 * parameters),
                                            ("one tensor converted", 4 * largest_tensor),
                                            ("working space", INFERENCE_OVERHEAD)))


def kernel_cache_cost() -> Cost:
    """What the server process keeps for torch's kernel cache (KERNEL_CACHE_HEAP), set aside from its budget."""
    return Cost("torch's kernel cache", (("its kernels and the heap they keep", KERNEL_CACHE_HEAP),))


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's malloc_trim, or None where the C library is not glibc (musl, macOS, Windows)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def trim_heap() -> None:
    """Hand the heap's free pages back to the system (glibc's ``malloc_trim(0)``; nothing elsewhere).

    glibc keeps what a request freed resident for the next one; between the small blocks oneDNN's kernel cache keeps
    alive, that was 454 to 603 MiB after forward passes at 512 text lengths, which no request holds
    (benchmarks/kernel_cache_memory.py). The budget trims whenever a request gives its memory back, so what stays is
    the kernels themselves (KERNEL_CACHE_HEAP). Costs about 8 ms on a busy 2-core machine."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter (malloc.h)
MMAP_THRESHOLD = 4 * MIB


def _mallopt() -> Callable[[int, int], int] | None:
    """glibc's mallopt, or None where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return None


def fix_heap(threshold: int = MMAP_THRESHOLD) -> bool:
    """Serve every block of ``threshold`` bytes or more from its own mmap, given back when freed (glibc; nothing
    elsewhere, False). Call once when the process starts, as app.py and the memory tests' children do.

    By default glibc raises its mmap threshold to the size of each large mmapped block freed (up to 32 MiB), so the
    next blocks of that size come from the heap and stay resident after they are freed: one forward pass (2 layers,
    8 heads, width 256, T 512: 8 MiB (h, T, T) blocks) peaked at 61.4 to 73.0 MiB in eight processes on a busy
    machine (35 to 73 over earlier runs). A fixed threshold also turns that adjustment off: at 1 MiB the same pass
    peaked at 36.6 to 37.1 in eight, at 4 MiB 35.8 to 36.9 in six. Each block past the threshold is a fresh mmap
    and its page faults: 1 MiB cost 40 to 60% more CPU time per training step and per forward pass with maps, 4 MiB
    7 to 25% (a training step with dropout at batch 16, T 128: 4 MiB (B, h, T, T) blocks), 32 MiB nothing measurable;
    4 MiB keeps every view's maps past T 512 at 4 heads out of the heap. What is smaller stays in the heap, which
    ``trim_heap`` gives back after each request.
    """
    mallopt = _mallopt()
    return mallopt is not None and mallopt(M_MMAP_THRESHOLD, threshold) == 1


def combined(what: str, *costs: Cost) -> Cost:
    """Several costs as one request's: their parts side by side, under one name."""
    return Cost(what, tuple(part for cost in costs for part in cost.parts))


# --------------------------------------------------------------------------------------------- the budget

def cgroup_limit_files(proc_cgroup: Path = Path("/proc/self/cgroup")) -> list[Path]:
    """The memory-limit files that bound this process: its own cgroup's and every ancestor's (v1 and v2).

    In a container the process's cgroup is "/", so these are the container's own files; on a host, a test can
    put the server in a child group with a limit and the server finds that group through /proc/self/cgroup.
    """
    files = list(CGROUP_FILES)
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return files
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if "memory" in controllers.split(","):
            base, name = Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes"
        elif hierarchy == "0" and not controllers:
            base, name = Path("/sys/fs/cgroup"), "memory.max"
        else:
            continue
        group = base / path.strip("/")
        while True:
            files.append(group / name)
            if group == base or base not in group.parents:
                break
            group = group.parent
    return files


def container_limit() -> int | None:
    """The tightest memory limit on this process (its cgroup or an ancestor, v2 or v1), or None when unlimited."""
    limits = []
    for path in cgroup_limit_files():
        try:
            raw = path.read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < NO_LIMIT:
            limits.append(int(raw))
    return min(limits) if limits else None


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Bytes this process could still allocate now: the system's MemAvailable, no more than its container's limit;
    None where neither can be read (not Linux). What a command-line run checks itself against, having no budget."""
    found = []
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)  # "MemAvailable:  23456789 kB"
    except (OSError, ValueError, IndexError):
        pass
    limit = container_limit()
    if limit is not None:
        found.append(limit)
    return min(found) if found else None


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 4 * GIB


def parse_bytes(text: str) -> int:
    """'2G', '1500M', '3.5GiB' or a plain number of bytes -> bytes."""
    units = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
    cleaned = text.strip().lower().removesuffix("ib").removesuffix("b")
    number, unit = (cleaned[:-1], cleaned[-1]) if cleaned and cleaned[-1] in "kmgt" else (cleaned, "")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise BudgetError(f"PLAYGROUND_MEMORY_BUDGET must be a size like 2G or 1500M, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise BudgetError(f"PLAYGROUND_MEMORY_BUDGET must be positive, got {text!r}")
    return int(value)


def default_budget() -> tuple[int, str]:
    """``PLAYGROUND_MEMORY_BUDGET``, else BUDGET_SHARE of the container's limit, else of physical memory."""
    configured = os.environ.get("PLAYGROUND_MEMORY_BUDGET", "").strip()
    if configured:
        return parse_bytes(configured), "PLAYGROUND_MEMORY_BUDGET"
    limit = container_limit()
    if limit is not None:
        return int(BUDGET_SHARE * limit), f"{BUDGET_SHARE:.0%} of the container's {human(limit)} limit"
    memory = physical_memory()
    return int(BUDGET_SHARE * memory), f"{BUDGET_SHARE:.0%} of this machine's {human(memory)}"


class MemoryBudget:
    """Bytes that requests in flight reserve and give back; thread-safe.

    with budget.reserve(training_cost(...), hint="lower batch_size"):
        ...  # the work; the bytes return when the block ends, even on error

    Made without a total, it is the server's: ``default_budget()`` less what the process keeps for torch's kernel
    cache (``kernel_cache_cost``).
    """

    def __init__(self, total_bytes: int | None = None, source: str = ""):
        derived = total_bytes is None
        if derived:
            total_bytes, source = default_budget()
        self.total = int(total_bytes)
        self.source = source or "this server's budget"
        self._reserved = 0
        self._kept: dict[str, int] = {}  # standing holds by what keeps them (``keep``), beside _reserved
        self._shrink: dict[str, Callable[[int], None]] = {}  # what can give its hold back when a request needs it
        self._lock = threading.Lock()
        if derived:  # the server's own budget: what its process keeps whatever runs is not for requests
            self.set_aside(kernel_cache_cost())

    @property
    def reserved(self) -> int:
        """The bytes requests hold now (``acquire``), not what ``keep`` holds."""
        with self._lock:
            return self._reserved

    def check(self, cost: Cost, hint: str = "") -> None:
        """Refuse a cost that could never fit this budget, saying what to lower."""
        if cost.bytes > self.total:
            advice = f"; {hint}" if hint else ""
            raise BudgetError(f"{cost.describe()}, over this server's memory budget of {human(self.total)} "
                              f"({self.source}){advice}")

    def acquire(self, cost: Cost, hint: str = "") -> int:
        """Reserve ``cost`` now or raise BudgetError; returns the bytes to give back with ``release``."""
        self.check(cost, hint)
        with self._lock:
            short = cost.bytes - (self.total - self._reserved - sum(self._kept.values()))
            shrinkers = list(self._shrink.values()) if short > 0 else []
        for shrink in shrinkers:  # caches kept between requests give way (outside the lock: they call keep)
            shrink(short)
        with self._lock:
            kept = sum(self._kept.values())
            free = self.total - self._reserved - kept
            if cost.bytes > free:
                models = f" and loaded models {human(kept)}" if kept else ""
                raise BudgetError(f"{cost.describe()}, but other requests hold {human(self._reserved)}{models} of "
                                  f"this server's {human(self.total)} right now: try again in a moment, or ask for "
                                  "less")
            self._reserved += cost.bytes
        return cost.bytes

    def set_aside(self, cost: Cost) -> None:
        """Take ``cost`` out of the budget for good (what the server keeps whatever runs): every request, and every
        message about the budget, sees what is left."""
        self.total = max(0, self.total - cost.bytes)
        self.source = f"{self.source}, less {human(cost.bytes)} for {cost.what}"

    def keep(self, what: str, num_bytes: int, shrink: Callable[[int], None] | None = None) -> None:
        """Hold ``num_bytes`` for ``what`` until the next call for it replaces them: memory the server keeps for now
        (the loaded checkpoints, the Why tab's readings), already in use, so never refused; requests see what is left,
        and while it is over the budget they are refused until it shrinks. ``shrink(short)``: what ``what`` does to
        give back about ``short`` bytes (and call ``keep`` with what it still holds) when a request would be refused
        for want of them: a cache evicts, a request runs."""
        with self._lock:
            self._kept[what] = int(num_bytes)
            if shrink is not None:
                self._shrink[what] = shrink

    def kept_for(self, what: str) -> int:
        """The bytes ``keep`` holds for ``what`` now."""
        with self._lock:
            return self._kept.get(what, 0)

    @property
    def kept(self) -> int:
        """The bytes held by ``keep`` (loaded checkpoints), beside what requests reserve."""
        with self._lock:
            return sum(self._kept.values())

    @property
    def free(self) -> int:
        """What a request could reserve now."""
        with self._lock:
            return max(0, self.total - self._reserved - sum(self._kept.values()))

    def release(self, num_bytes: int) -> None:
        """Give back what ``acquire`` reserved, and what the request's work left in the heap (``trim_heap``)."""
        with self._lock:
            self._reserved = max(0, self._reserved - num_bytes)
        if num_bytes:
            trim_heap()

    @contextlib.contextmanager
    def reserve(self, cost: Cost, hint: str = "") -> Iterator[Cost]:
        held = self.acquire(cost, hint)
        try:
            yield cost
        finally:
            self.release(held)


# ------------------------------------------------------------------------ the Compare tab's two requests

# (B, h, T, T) matrices at the peak: scores, masked, weights, and the allocator's slack. Fitted to the peaks measured
# with the server's heap (fix_heap, tests/test_budget.py): glibc's own mmap threshold kept freed maps resident (one
# CI run measured 249 MiB where 4.5 copies priced 238), and the copies fitted to that were 2.2x (compare) and 2.9x
# (timing) the server's own peaks
COMPARE_SCORE_COPIES = 4.5
TIMING_SCORE_COPIES = 5  # forward + backward: the saved matrices and their gradients
LAYER_WEIGHT_COPIES = 4  # the reference, the layer being built, its gradients, the allocator's slack
COMPARE_ACTIVATIONS = 12  # (B, T, d) tensors: input, the two targets, q, k, v, context, output...
TIMING_ACTIVATIONS = 24  # and their gradients
COMPARE_OVERHEAD = 64 * MIB
TIMING_OVERHEAD = 64 * MIB


def _attention_parts(*, embedding_dim: int, heads_num: int, seq_len: int, batch: int, itemsize: int,
                     score_copies: float, activations: int, mask_sets: int) -> list[tuple[str, int]]:
    # the masks and the activations at the compared dtype: each layer is cast with its float buffers (wrapper and
    # sliced_heads keep a mask per head), and so is the input (bf16 was priced at fp32's, 2.1-2.2x its measured peak)
    masks = mask_sets * (heads_num + 2) * seq_len * seq_len * itemsize
    return [
        ("(B, h, T, T) attention matrices", int(score_copies * batch * heads_num * seq_len * seq_len * itemsize)),
        ("causal masks", masks),
        ("layer weights", LAYER_WEIGHT_COPIES * 4 * (4 * embedding_dim * embedding_dim + 4 * embedding_dim)),
        ("activations", activations * batch * seq_len * embedding_dim * itemsize),
    ]


def compare_cost(*, embedding_dim: int, heads_num: int, seq_len: int, batch: int, itemsize: int,
                 implementations: int = 7, maps: bool = False) -> Cost:
    """Peak memory of one comparison: every implementation's forward on the same (batch, seq_len, embedding_dim)
    input at ``itemsize`` bytes a number (fp32 4, bf16 2), one after another; with ``maps`` each also keeps
    its (h, T, T) per-head maps in fp32.

    d 64, 4 heads, T 1024, batch 2, fp32 -> about 238 MiB (measured 122 to 132 MiB with the server's heap).
    """
    parts = _attention_parts(embedding_dim=embedding_dim, heads_num=heads_num, seq_len=seq_len, batch=batch,
                             itemsize=itemsize, score_copies=COMPARE_SCORE_COPIES, activations=COMPARE_ACTIVATIONS,
                             mask_sets=1)
    if maps:
        parts.append(("per-head maps", implementations * heads_num * seq_len * seq_len * 4))
    return Cost("this comparison", (*parts, ("working space", COMPARE_OVERHEAD)))


def timing_cost(*, embedding_dim: int, heads_num: int, seq_len: int, batch: int, itemsize: int) -> Cost:
    """Peak memory of a timing sweep, reached at its largest ``seq_len``: forward and backward of one
    implementation at a time on (batch, seq_len, embedding_dim) at ``itemsize`` bytes a number.

    The Compare tab's default (d 64, 4 heads, batch 2, fp32, T up to 1024) -> about 284 MiB (measured 166 to
    183 MiB with the server's heap).
    """
    parts = _attention_parts(embedding_dim=embedding_dim, heads_num=heads_num, seq_len=seq_len, batch=batch,
                             itemsize=itemsize, score_copies=TIMING_SCORE_COPIES, activations=TIMING_ACTIVATIONS,
                             mask_sets=2)
    return Cost("this timing sweep", (*parts, ("working space", TIMING_OVERHEAD)))
