"""SmolLM2-135M's shape through the playground (issue 51): seconds to open it, the memory estimates against the peaks
they bound, and the Sample tab's one step at 128 tokens, beside the shipped model in the same run.

    PYTHONPATH=$PWD python benchmarks/smollm2.py
    PYTHONPATH=$PWD python benchmarks/smollm2.py --folder ~/SmolLM2-135M --threads 2    # a real download's folder

Without ``--folder`` it writes, once, into a temporary folder, a model of SmolLM2-135M's config.json (30 layers,
hidden 576, 9 query heads over 3 K/V heads of 64, intermediate 1536, vocabulary 49,152, rope_theta 1e5, tied
embeddings) with random weights, built with transformers (a test-only dependency, needed here), beside a byte-level
BPE tokenizer.json trained on the built-in corpus (its 1,024 pieces stand in for SmolLM2's: the embedding keeps all
49,152 rows, and the speed and memory do not depend on which pieces there are). Each figure comes from a child
process with the server's heap (``budget.fix_heap``) and ``--threads`` torch threads (2: the Space's cores):

  open      seconds to open the folder through the one loader (loading.open_checkpoint), and the peak above the
            process's memory before it, against what the server prices a download's load by (hub.loading_cost)
  forward   the peak of a forward at ``--forward-tokens`` (1,024: the longest text the server runs) with the weights
            kept, against the Hub check's price for it (budget.inference_cost + budget.tokenizer_cost)
  step      the median of ``--repeats`` Sample-tab steps at 128 tokens: the 128th token read against a KV cache of
            127 (what each next token costs), and one uncached 128-token forward (what a prompt of 128 costs)
  head      the median time to trace one head of the middle layer at 128 tokens, the Attention tab's server work for
            a new head, layer or text (the forward stops at that layer: run_with_cache's stop_when_kept)

Targets (issue 51): open within 20 s; peak <= estimate <= 2 x peak; a step within 300 ms (median).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMOLLM2 = {  # SmolLM2-135M's config.json, the fields transformers reads
    "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30,
    "num_attention_heads": 9, "num_key_value_heads": 3, "max_position_embeddings": 8192, "vocab_size": 49152,
    "rope_theta": 100000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "hidden_act": "silu",
}
STEP_TOKENS = 128
TOKENIZER_PIECES = 1024


def build_folder(folder: Path) -> None:
    """SMOLLM2's model with random weights (seed 0), saved by transformers, and a byte-level BPE tokenizer.json."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM

    from playground.text.data import builtin_corpus

    torch.manual_seed(0)
    fields = {key: value for key, value in SMOLLM2.items() if key != "model_type"}
    model = LlamaForCausalLM(LlamaConfig(**fields, bos_token_id=None, eos_token_id=None, pad_token_id=None))
    model.save_pretrained(folder)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=TOKENIZER_PIECES - 1, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator([builtin_corpus().text], trainer)
    tokenizer.add_special_tokens(["<|endoftext|>"])
    (folder / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")


def _rss(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith(field))


def _trim() -> None:
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def child(kind: str, source: str, threads: int, forward_tokens: int, repeats: int) -> dict:
    """One measurement, in this (fresh) process: see the module's docstring."""
    from playground.settings import apply_process_defaults

    apply_process_defaults()
    import torch

    from playground import budget
    from playground.checkpoints import hub, loading

    budget.fix_heap()
    torch.set_num_threads(threads)
    folder = Path(source) if source != "shipped" else None
    name = source if folder is None else folder

    def open_it():
        if folder is None:
            return loading.open_checkpoint("shakespeare-char",
                                           directory=REPO / "weights", device="cpu")
        return loading.open_checkpoint(folder, allow_folders=True, device="cpu", max_parameters=None)

    if kind == "open":
        torch.zeros(1) @ torch.zeros(1)  # torch's own first-call set-up is the process's, not the load's
        _trim()
        before = _rss()
        open("/proc/self/clear_refs", "w").write("5")
        started = time.perf_counter()
        loaded = open_it()
        seconds = time.perf_counter() - started
        peak = _rss("VmHWM") - before
        estimate = hub.loading_cost(folder).bytes if folder is not None else None
        return {"seconds": seconds, "peak": peak, "estimate": estimate,
                "parameters": loaded.model.parameter_count()}
    if kind == "forward":
        config = open_it().config  # read once for its shape; the measured process loads afresh
        _trim()
        ids = torch.randint(0, config.vocabulary_size, (1, min(forward_tokens, config.context_size)))
        before = _rss()
        open("/proc/self/clear_refs", "w").write("5")
        loaded = open_it()  # the weights, kept, are part of what the forward's price counts
        _trim()
        open("/proc/self/clear_refs", "w").write("5")
        with torch.no_grad():
            loaded.model.eval()(ids)
        peak = _rss("VmHWM") - before
        estimate = budget.combined("", budget.inference_cost(
            parameters=config.parameter_count(), layers_num=config.layers_num, heads_num=config.heads_num,
            embedding_dim=config.embedding_dim, context_size=ids.size(1), vocabulary_size=config.vocabulary_size),
            budget.tokenizer_cost(config.vocabulary_size)).bytes
        return {"peak": peak, "estimate": estimate, "tokens": ids.size(1)}
    if kind == "step":
        from playground.model.gpt import KVCache

        loaded = open_it()
        model, config = loaded.model.eval(), loaded.config
        ids = torch.randint(0, config.vocabulary_size, (1, STEP_TOKENS))
        cached, full = [], []
        with torch.no_grad():
            for _ in range(repeats + 1):  # the first of each is a warm-up
                cache = KVCache.empty(config.layers_num)
                model(ids[:, :STEP_TOKENS - 1], cache=cache)
                started = time.perf_counter()
                model(ids[:, STEP_TOKENS - 1:STEP_TOKENS], cache=cache)  # the 128th token against the 127 cached
                cached.append(time.perf_counter() - started)
                started = time.perf_counter()
                model(ids[:, :STEP_TOKENS])
                full.append(time.perf_counter() - started)
        return {"cached_ms": 1000 * statistics.median(cached[1:]), "forward_ms": 1000 * statistics.median(full[1:]),
                "cache_bytes_a_token": cache.bytes // cache.length, "name": str(name)}
    if kind == "head":
        from playground.lens.walkthrough.sources import trace_checkpoint_head

        loaded = open_it()
        model, config = loaded.model.eval(), loaded.config
        ids = torch.randint(0, config.vocabulary_size, (STEP_TOKENS,))
        layer = config.layers_num // 2
        times = []
        with torch.no_grad():
            for repeat in range(repeats + 1):  # the first is a warm-up
                started = time.perf_counter()
                trace_checkpoint_head(model, ids, layer, repeat % config.heads_num)
                times.append(time.perf_counter() - started)
        return {"head_ms": 1000 * statistics.median(times[1:]), "layer": layer}
    raise ValueError(kind)


def measure(kind: str, source: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--child", kind, "--source", source, "--threads", str(args.threads),
               "--forward-tokens", str(args.forward_tokens), "--repeats", str(args.repeats)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "PLAYGROUND_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit(f"the {kind} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def mib(value: int) -> str:
    return f"{value / 2**20:,.1f} MiB"


def ratio_line(label: str, result: dict) -> str:
    peak, estimate = result["peak"], result["estimate"]
    holds = peak <= estimate <= 2 * peak
    return (f"{label}: estimate {mib(estimate)}, measured peak {mib(peak)}, estimate / peak {estimate / peak:.2f} "
            f"({'holds' if holds else 'FAILS'} peak <= estimate <= 2 x peak)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=None, help="a SmolLM2-135M folder (default: built once here)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads in each child (the Space's 2 cores)")
    parser.add_argument("--forward-tokens", type=int, default=1024, help="the forward the memory estimate prices")
    parser.add_argument("--repeats", type=int, default=15, help="timed steps (after one warm-up)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--source", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.source, args.threads, args.forward_tokens, args.repeats)))
        return 0
    with tempfile.TemporaryDirectory(prefix="smollm2-") as scratch:
        folder = args.folder
        if folder is None:
            folder = Path(scratch) / "SmolLM2-135M-random"
            started = time.perf_counter()
            build_folder(folder)
            print(f"built {folder.name} with transformers in {time.perf_counter() - started:.1f} s "
                  "(random weights, SmolLM2-135M's config)")
        print(f"{args.threads} torch threads a child; os.cpu_count() {os.cpu_count()}; load average "
              f"{os.getloadavg()[0]:.1f}")
        opened = measure("open", str(folder), args)
        print(f"open: {opened['seconds']:.2f} s for {opened['parameters']:,} parameters (target <= 20 s)")
        print(ratio_line("open, memory", opened))
        print(ratio_line(f"forward at {args.forward_tokens} tokens, memory", measure("forward", str(folder), args)))
        for label, source in (("SmolLM2-135M's shape", str(folder)), ("the shipped model", "shipped")):
            step = measure("step", source, args)
            print(f"step, {label}: {step['cached_ms']:.1f} ms the {STEP_TOKENS}th token against a cache of "
                  f"{STEP_TOKENS - 1} (median of {args.repeats}; target <= 300 ms), {step['forward_ms']:.1f} ms a "
                  f"{STEP_TOKENS}-token forward; its cache {step['cache_bytes_a_token']:,} bytes a token")
            head = measure("head", source, args)
            print(f"Attention tab, {label}: {head['head_ms']:.1f} ms to trace a head of layer {head['layer']} at "
                  f"{STEP_TOKENS} tokens (what a new head, layer or text asks of the server; the steps between "
                  f"stages are drawn in the page), median of {args.repeats}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
