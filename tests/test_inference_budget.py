"""The estimates of requests that run the model without training (a forward pass with every head's weights, as the
Attention, Model and Why views do; sampling with the KV cache) bound the highest peak measured in PROCESSES child
processes, and stay within 2x of the lowest so their refusals are honest. The child runs in a memory cgroup whose
limit is what it holds after its warm-up plus the estimate (tests/test_memory_sweep.py's CHILD_LIMIT), so an
estimate below the true peak is an OOM kill, not a number; where no group can be made, it measures without one.

Sampling with and without the KV cache is held to one estimate. Each new window length makes oneDNN build kernels
for it, which it keeps for the process (at most PROCESS_DEFAULTS' cache capacity of them, whoever asked): measured
with them counted, a request's peak was 25 to 82 MiB against estimates of 15 to 58, so each measurement runs the
request once first, as the forward measurement does, and counts what the second run holds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import REPO
from test_memory_sweep import CHILD_LIMIT, CHILD_RSS, memory_group

from playground import budget
from playground.config import ModelConfig
from playground.sampling import sampling_cost

MEASURE = """
from playground.budget import fix_heap
fix_heap()  # as app.py does when the server starts
import json, sys, torch
from pathlib import Path
torch.set_num_threads(1)
""" + CHILD_RSS + """
from playground.config import ModelConfig
from playground.model import GPT
from playground.sampling import SamplingSettings, stream
from playground.tokenizer import CharTokenizer
kind = sys.argv[1]
L, h, C, T, V = map(int, sys.argv[2:7])
group, estimate = Path(sys.argv[7]) if sys.argv[7] else None, int(sys.argv[8])
torch.manual_seed(0)
tokenizer = CharTokenizer([chr(33 + i) for i in range(V)])
def run(model, T, new_tokens):
    with torch.no_grad():
        if kind == 'forward':
            out = model(torch.randint(0, V, (1, T)), return_attention=True)
            assert len(out.attention_weights) == model.config.layers_num
        else:  # past the context, with the KV cache (rebuilt when full) or without it (full windows)
            settings = SamplingSettings(max_new_tokens=new_tokens, temperature=1.0, seed=0)
            text = ''.join(t.text for t in stream(model, tokenizer, '!' * T, settings, kind == 'cached'))
            assert len(text) == new_tokens
# once first, on a model of its own: what torch keeps per shape (oneDNN's kernels, bounded by app.py's settings,
# which the tests apply too) are the process's, not a request's. Without the cache every token is one full window,
# one shape, so two tokens meet every kernel the request will (the request's own 264-520 took half the time again)
run(GPT(ModelConfig(vocabulary_size=V, context_size=T, embedding_dim=C, heads_num=h, layers_num=L)).eval(), T,
    2 if kind == 'uncached' else T + 8)
# what that run freed goes back (malloc_trim), so this request's pages are counted anew, inside the limit
""" + CHILD_LIMIT + """
model = GPT(ModelConfig(vocabulary_size=V, context_size=T, embedding_dim=C, heads_num=h, layers_num=L)).eval()
run(model, T, T + 8)
print(json.dumps(rss('VmHWM') - own))
"""

PROCESSES = 2  # measured at once (one a core), each in its own memory group: a request's peak varies by process
SHAPES = [  # layers, heads, width, context, vocabulary
    (4, 4, 192, 128, 65),  # the shipped model's shape
    (2, 8, 256, 512, 65),  # long context: the (h, T, T) maps dominate
    (6, 6, 384, 256, 65),  # nanoGPT's Shakespeare-char shape
    (2, 4, 128, 256, 4096),  # a large vocabulary: the logits dominate
]

# At 2 layers, 8 heads, T 512 the same forward pass peaked at 35.1 to 36.9 MiB in some processes, 44 to 48.8 in most
# and 61.4 to 73.1 in others with glibc's dynamic mmap threshold (freed (h, T, T) blocks kept resident or not); with
# the server's fixed threshold (budget.fix_heap, which MEASURE calls as app.py does) 35.8 to 37.2.


def _peaks(kind: str, shape, estimate: int) -> list[int]:
    """The peaks of ``kind`` at ``shape`` in PROCESSES children at once, each limited to ``estimate`` beyond its
    warm-up: the allocator's peak for one request varies from process to process (at nanoGPT's shape, 59 to 60 MiB
    in seven of eight and 71.1 in the eighth), so the estimate is held against the highest and twice the lowest."""
    with ThreadPoolExecutor(PROCESSES) as pool:
        return sorted(pool.map(lambda _: _peak(kind, shape, estimate), range(PROCESSES)))


def _peak(kind: str, shape, estimate: int) -> int:
    """The peak of ``kind`` at ``shape`` in a child limited to ``estimate`` beyond its warm-up; killed or failed: the
    test fails."""
    with memory_group() as group:
        enter = None if group is None else lambda: (group / "cgroup.procs").write_text(str(os.getpid()))
        result = subprocess.run([sys.executable, "-c", MEASURE, kind, *map(str, shape), str(group or ""),
                                 str(estimate)], capture_output=True, text=True, cwd=REPO, timeout=300, check=False,
                                preexec_fn=enter)
    assert result.returncode == 0, (f"{kind} {shape}: killed or failed inside a limit of the estimate "
                                    f"({budget.human(estimate)}): {result.returncode} {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _config(shape) -> ModelConfig:
    layers, heads, width, context, vocabulary = shape
    return ModelConfig(vocabulary_size=vocabulary, context_size=context, embedding_dim=width, heads_num=heads,
                       layers_num=layers)


@pytest.mark.slow
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_forward_estimate_with_attention_maps_bounds_the_measured_peak(shape):
    config = _config(shape)
    estimate = budget.inference_cost(parameters=config.parameter_count(), layers_num=config.layers_num,
                                     heads_num=config.heads_num, embedding_dim=config.embedding_dim,
                                     context_size=config.context_size, vocabulary_size=config.vocabulary_size,
                                     attention_maps=True).bytes
    peaks = _peaks("forward", shape, estimate)
    assert peaks[-1] <= estimate <= 2 * peaks[0], \
        f"peaks {[round(p / budget.MIB, 1) for p in peaks]} MiB, estimate {estimate / budget.MIB:.1f} MiB"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["cached", "uncached"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_the_sampling_estimate_bounds_the_measured_peak_past_the_context(shape, kind):
    """From a full-context prompt past the context, with the KV cache (the default: the cache is full and rebuilt,
    the most cached sampling ever holds) and without it (a full window's forward pass for every token)."""
    config = _config(shape)
    estimate = sampling_cost(config, config.parameter_count()).bytes
    peaks = _peaks(kind, shape, estimate)
    assert peaks[-1] <= estimate <= 2 * peaks[0], \
        f"peaks {[round(p / budget.MIB, 1) for p in peaks]} MiB, estimate {estimate / budget.MIB:.1f} MiB"
