"""The estimates of requests that run the model without training bound the peak measured in a child process at the
shipped model's shape (benchmarks/memory_sweep.py measures four shapes, PROCESSES children each), and stay within 2x
of it so their refusals are honest: a forward pass with every head's maps (the Attention tab's source), sampling with
the KV cache and without, the Model tab's levels (score and head, heads, block, the logit lens) of a GPT and of a
Llama-family model of the same shape (4 query heads over 2 K/V heads), the Attention tab's head table and the Why
tab's reading. Each child measures every kind in
turn, each inside a memory cgroup whose limit is what it holds after that kind's warm-up plus the estimate, so an
estimate below the true peak is an OOM kill, not a number; where no group can be made, it measures without one. One
process a shape measures every kind: its imports (torch, and gradio for the Why tab) cost more than most requests.

Each new window length makes oneDNN build kernels for it, which it keeps for the process (at most PROCESS_DEFAULTS'
cache capacity of them, whoever asked): measured with them counted, a request's peak was 25 to 82 MiB against
estimates of 15 to 58, so each kind runs once first, on a model of its own, and the second run is counted."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from conftest import REPO
from test_memory_sweep import CHILD_RSS, memory_group

from playground import budget
from playground.config import ModelConfig
from playground.model.families import build_model
from playground.model.sampling import sampling_cost

MEASURE = """
from playground.budget import fix_heap
fix_heap()  # as app.py does when the server starts
import ctypes, gc, json, sys, torch
from pathlib import Path
torch.set_num_threads(1)
""" + CHILD_RSS + """
from playground.lens import anatomy
from playground.lens.anatomy import family_levels
from playground.lens import head_scores
from playground.lens import walkthrough
from playground.config import ModelConfig
from playground.model.families import build_model
from playground.model.gpt import GPT
from playground.model.sampling import SamplingSettings, stream
from playground.text.tokenizer import CharTokenizer
L, h, C, T, V = map(int, sys.argv[1:6])
group, kinds = Path(sys.argv[6]) if sys.argv[6] else None, json.loads(sys.argv[7])
LLAMA = json.loads(sys.argv[8])
if 'why' in kinds:  # the Why tab's reading lives in its UI module: gradio's import is the process's, not a request's
    from playground.ui import why_reading, why_tab, why_views
torch.manual_seed(0)
tokenizer = CharTokenizer([chr(33 + i) for i in range(V)])
ids = torch.randint(0, V, (T,))
# sampled past the full-context prompt, the cache is rebuilt from the last T // 2 tokens at the first new token and
# then grows back to T: as many tokens meet every length, and the most cached sampling ever holds. Without the cache
# every token is one full window of T, one shape: eight hold what T + 8 did (measured alike), at a fraction of the time
TOKENS = T - T // 2 + 2
def run(kind, model):
    with torch.no_grad():
        if kind == 'forward':
            out = model(ids[None], return_attention=True)
            assert len(out.attention_weights) == model.config.layers_num
            return out
        if kind in ('cached', 'uncached'):  # past the context, with the KV cache (rebuilt when full) or without
            new_tokens = 8 if kind == 'uncached' else TOKENS
            settings = SamplingSettings(max_new_tokens=new_tokens, temperature=1.0, seed=0)
            text = ''.join(t.text for t in stream(model, tokenizer, '!' * T, settings, kind == 'cached'))
            assert len(text) == new_tokens
            return text
    # the Model tab's levels on the last layer, as model_tab.py calls them (their figures are priced by the cell)
    if kind == 'score':  # the score and head levels: the head's real inputs, then its trace
        trace = walkthrough.checkpoint_head_inputs(model, ids, L - 1, 0).trace()
        return trace, anatomy.one_score(trace.q[-1], trace.k[0])
    if kind == 'heads':  # every head of the layer, with the transpose forgotten: the most it holds
        return anatomy.all_heads(model, ids, L - 1, forget_transpose=True)
    if kind == 'block':  # the block walked, with dropout on its attention weights: the most it holds
        return anatomy.block_walk(model.blocks[L - 1], anatomy.block_input(model, ids, L - 1), dropout_p=0.1)
    if kind == 'lens':  # the model level: the logit lens after every block
        return anatomy.logit_lens(model, ids)
    # the same levels of a Llama-family model of the same shape, as model_family_views.checkpoint_views calls them
    if kind == 'llama_score':  # the score and head levels: the head on the rotated q and k, the rotation kept
        head = family_levels.rotary_head(model, ids, L - 1, h - 1)
        return head, anatomy.one_score(head.trace.q[-1], head.trace.k[0])
    if kind == 'llama_heads':
        return anatomy.all_heads(model, ids, L - 1, forget_transpose=True)
    if kind == 'llama_block':  # the block at its named points and the gated MLP's parts
        return family_levels.gated_block_walk(model, ids, L - 1)
    if kind == 'llama_lens':
        return anatomy.logit_lens(model, ids)
    if kind == 'head_table':  # the Attention tab's head table: every head scored on the probes
        return head_scores.score_heads(model)
    if kind == 'why':  # the Why tab's reading of a text (every head ranked, means knocked out), then a head's circuits
        reading = why_reading._read(model, tokenizer, ids, '', None, [], 'mean', why_reading._circuit_tokens(V, ids),
                                    'x', why_tab.ReadingCache(0))
        return reading, why_views.read_circuits(reading, L - 1, 0)  # its tables, where it looks, what it writes
    raise ValueError(kind)
def gpt(kind):
    if kind.startswith('llama_'):  # the Llama family's blocks: rotary positions, h / 2 K/V heads, RMSNorm, SwiGLU
        return build_model(ModelConfig(vocabulary_size=V, context_size=T, embedding_dim=C, heads_num=h, layers_num=L,
                                       **LLAMA)).eval()
    return GPT(ModelConfig(vocabulary_size=V, context_size=T, embedding_dim=C, heads_num=h, layers_num=L)).eval()
def trim():
    gc.collect()
    ctypes.CDLL('libc.so.6').malloc_trim(0)
peaks = {}
for kind, estimate in kinds.items():
    print('measuring', kind, file=sys.stderr, flush=True)
    if group is not None:
        (group / 'memory.limit_in_bytes').write_text('-1')  # the warm-up runs outside the last request's limit
    # once first, on a model of its own: what torch keeps per shape (oneDNN's kernels, bounded by app.py's settings,
    # which the tests apply too) and a module's first call are the process's, not a request's
    run(kind, gpt(kind))
    trim()  # what that run freed goes back, so this request's pages are counted anew, inside the limit
    if group is not None:
        base = int((group / 'memory.usage_in_bytes').read_text())
        (group / 'memory.limit_in_bytes').write_text(str(base + estimate))  # past it (page cache aside): killed
    own = rss()
    open('/proc/self/clear_refs', 'w').write('5')  # this process's peak from here on
    model = gpt(kind)
    result = run(kind, model)
    peaks[kind] = rss('VmHWM') - own
    del model, result
    trim()
print(json.dumps(peaks))
"""

PROCESSES = 2  # measured at once (one a core), each in its own memory group: a request's peak varies by process
GUARD = (4, 4, 192, 128, 65)  # layers, heads, width, context, vocabulary: the shipped model's shape (the suite's
# guard of every kind; benchmarks/memory_sweep.py measures the others: long context, nanoGPT's, a large vocabulary)

# At 2 layers, 8 heads, T 512 the same forward pass peaked at 35.1 to 36.9 MiB in some processes, 44 to 48.8 in most
# and 61.4 to 73.1 in others with glibc's dynamic mmap threshold (freed (h, T, T) blocks kept resident or not); with
# the server's fixed threshold (budget.fix_heap, which MEASURE calls as app.py does) 35.8 to 37.2.


KINDS = ("forward", "cached", "uncached", "score", "heads", "block", "lens", "head_table", "why", "llama_score",
         "llama_heads", "llama_block", "llama_lens")
# the Llama family's settings at the guard's shape: 4 query heads over 2 K/V heads, SwiGLU of width 4C (GPT's MLP's)
LLAMA = dict(family="llama", kv_heads_num=2, activation="silu", layer_norm_eps=1e-6)


def _estimates(shape) -> dict[str, int]:
    """Every kind's estimate at ``shape``, as the server prices it (the views without their figures, which are priced
    by the cell from the Attention tab's measurement: tests/test_budget.py)."""
    from playground.lens import anatomy
    from playground.ui import head_table, model_family_views, why_reading

    config = _config(shape)
    llama = ModelConfig(**{**config.to_dict(), **LLAMA})
    model = build_model(llama)  # what the price reads of it: whether it rotates and gates
    L, h, C, T, V = shape
    shapes = dict(parameters=config.parameter_count(), layers_num=L, heads_num=h, embedding_dim=C, context_size=T,
                  vocabulary_size=V)
    view = dict(length=T, embedding_dim=C, heads_num=h, layers_num=L, vocabulary_size=V,
                parameters=config.parameter_count(), heatmap_cells=0)
    why = why_reading._cost(config, T, why_reading._circuit_tokens(V, torch.zeros(T, dtype=torch.long)))
    return {
        "forward": budget.inference_cost(**shapes, attention_maps=True).bytes,
        "cached": sampling_cost(config, config.parameter_count()).bytes,
        "uncached": sampling_cost(config, config.parameter_count()).bytes,
        "score": anatomy.view_cost("score", **view).bytes,
        "heads": anatomy.view_cost("heads", **view, forget_transpose=True).bytes,
        "block": anatomy.view_cost("block", **view).bytes,
        "lens": anatomy.view_cost("model", **view).bytes,
        "head_table": head_table.cost(config).bytes,
        "why": why.bytes - dict(why.parts)["figures"],
        # the Llama family's levels as the Model tab prices them (model_family_views.view_cost), figures aside
        **{f"llama_{kind}": model_family_views.view_cost(level, llama, T, 0, 0, kind == "heads", model).bytes
           for kind, level in (("score", "score"), ("heads", "heads"), ("block", "block"), ("lens", "model"))},
    }


def measured(shape, processes: int = PROCESSES) -> dict[str, list[int]]:
    """Every kind's peaks at ``shape`` in ``processes`` children at once, each in its own memory group and measuring
    the kinds one after another, each inside a limit of its estimate beyond its warm-up: the allocator's peak for one
    request varies from process to process (at nanoGPT's shape, 59 to 60 MiB in seven of eight and 71.1 in the
    eighth), so each estimate is held against the highest and twice the lowest. One process measures every kind: a
    process's imports cost more than most of its requests."""
    estimates = _estimates(shape)
    with ThreadPoolExecutor(processes) as pool:
        runs = list(pool.map(lambda _: _peaks_in_one_process(shape, estimates), range(processes)))
    return {kind: sorted(run[kind] for run in runs) for kind in estimates}


@functools.cache
def _guard_measured() -> dict[str, list[int]]:
    """The guard shape measured once, by the first kind's test, for every kind."""
    return measured(GUARD, processes=1)


def _peaks_in_one_process(shape, estimates: dict[str, int]) -> dict[str, int]:
    """Every kind's peak at ``shape`` in one child, each limited to its estimate beyond its warm-up; killed or failed:
    the test fails, naming the kind being measured."""
    with memory_group() as group:
        enter = None if group is None else lambda: (group / "cgroup.procs").write_text(str(os.getpid()))
        result = subprocess.run([sys.executable, "-c", MEASURE, *map(str, shape), str(group or ""),
                                 json.dumps(estimates), json.dumps(LLAMA)], capture_output=True, text=True, cwd=REPO,
                                timeout=600, check=False, preexec_fn=enter)
    measuring = [line for line in result.stderr.splitlines() if line.startswith("measuring ")]
    assert result.returncode == 0, (f"{shape}, {measuring[-1] if measuring else 'starting'}: killed or failed "
                                    f"inside a limit of its estimate: {result.returncode} {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _config(shape) -> ModelConfig:
    layers, heads, width, context, vocabulary = shape
    return ModelConfig(vocabulary_size=vocabulary, context_size=context, embedding_dim=width, heads_num=heads,
                       layers_num=layers)


@pytest.mark.parametrize("kind", KINDS)
def test_the_estimate_of_each_request_bounds_its_measured_peak(kind):
    """forward: a pass with every head's maps, as the Attention tab's source and the score and head levels need.
    cached, uncached: sampling from a full-context prompt past the context, with the KV cache (the default: the cache
    is full and rebuilt, the most cached sampling ever holds) and without it (a full window's pass for every token).
    score, heads, block, lens: the Model tab's levels (llama_*: of a Llama-family model, priced as the tab prices
    them, model_family_views.view_cost); head_table: the Attention tab's ranked heads; why: the Why
    tab's reading of a text and one head's circuits. One process at the guard shape: the sweep's two processes a
    shape (benchmarks/memory_sweep.py) hold every kind to the highest and twice the lowest of their peaks."""
    estimate = _estimates(GUARD)[kind]
    peaks = _guard_measured()[kind]
    print(f"{kind} {GUARD}: peaks {[round(p / budget.MIB, 1) for p in peaks]} MiB, estimate "
          f"{estimate / budget.MIB:.1f} MiB")
    assert peaks[-1] <= estimate <= 2 * peaks[0], \
        f"peaks {[round(p / budget.MIB, 1) for p in peaks]} MiB, estimate {estimate / budget.MIB:.1f} MiB"
