"""What a server process keeps resident after forward passes at many text lengths: oneDNN's kernel cache and the
heap it pins (budget.KERNEL_CACHE_HEAP sets it aside from the server's memory budget).

Each cache capacity runs in a fresh process (oneDNN reads ONEDNN_PRIMITIVE_CACHE_CAPACITY when torch loads): a
model with every head's maps (what the Attention, Model and Why views run) at --lengths different text lengths;
printed, the resident memory gained after 64, 128, ... lengths, then after malloc_trim (what glibc's heap held
free), and the time of one forward pass at one length repeated (what the cache saves).

With --trim-each, glibc's heap is trimmed after every pass, as the server's budget does when a request gives its
memory back (budget.trim_heap): what stays resident then is what KERNEL_CACHE_HEAP must cover, and the trims' own
time is printed.

    PYTHONPATH=$PWD python benchmarks/kernel_cache_memory.py --capacities 64 0
    PYTHONPATH=$PWD python benchmarks/kernel_cache_memory.py --capacities 64 --trim-each
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import ctypes, gc, json, sys, time
import torch
torch.set_num_threads(1)
from playground.config import ModelConfig
from playground.model.gpt import GPT
def rss():
    with open('/proc/self/status') as f:
        return next(int(l.split()[1]) * 1024 for l in f if l.startswith('VmRSS'))
L, h, C, T, n, trim_each = map(int, sys.argv[1:7])
trim = ctypes.CDLL('libc.so.6').malloc_trim
trims = []
model = GPT(ModelConfig(vocabulary_size=65, context_size=T, embedding_dim=C, heads_num=h, layers_num=L)).eval()
with torch.no_grad():
    x = torch.randint(0, 65, (1, T // 4))
    model(x, return_attention=True)
    started = time.perf_counter()
    for _ in range(20):
        model(x, return_attention=True)
    one_length = (time.perf_counter() - started) / 20
    gc.collect()
    base = rss()
    gained = {}
    for i in range(n):
        model(torch.randint(0, 65, (1, 2 + (i * 997) % (T - 1))), return_attention=True)
        if trim_each:
            gc.collect()
            trim_started = time.perf_counter()
            trim(0)
            trims.append(time.perf_counter() - trim_started)
        if (i + 1) % 128 == 0 or i + 1 in (64, n):
            gc.collect()
            gained[i + 1] = (rss() - base) / 2**20
    ctypes.CDLL('libc.so.6').malloc_trim(0)
trims.sort()
print(json.dumps({"gained_mib": gained, "after_trim_mib": (rss() - base) / 2**20, "one_length_ms": one_length * 1e3,
                  "trim_ms": [1e3 * trims[len(trims) // 2], 1e3 * trims[-1]] if trims else None}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacities", type=int, nargs="+", default=[64, 0],
                        help="ONEDNN_PRIMITIVE_CACHE_CAPACITY values, one process each (0: no cache)")
    parser.add_argument("--lengths", type=int, default=512, help="different text lengths to run")
    parser.add_argument("--shape", type=int, nargs=4, default=[2, 8, 256, 1024], metavar=("LAYERS", "HEADS", "WIDTH",
                                                                                        "CONTEXT"))
    parser.add_argument("--trim-each", action="store_true",
                        help="malloc_trim(0) after every pass, as the server does when a request ends")
    parser.add_argument("--fix-heap", action="store_true",
                        help="budget.fix_heap() first (a fixed mmap threshold), as app.py does when the server starts")
    args = parser.parse_args()
    code = ("from playground.budget import fix_heap\nfix_heap()\n" if args.fix_heap else "") + CHILD
    print(f"model {args.shape}, {args.lengths} lengths{', trimmed after each' if args.trim_each else ''}"""
          f"{', fixed mmap threshold' if args.fix_heap else ''}; "
          f"load {os.getloadavg()[0]:.2f}")
    for capacity in args.capacities:
        env = {**os.environ, "ONEDNN_PRIMITIVE_CACHE_CAPACITY": str(capacity), "OMP_WAIT_POLICY": "PASSIVE",
               "PYTHONPATH": str(REPO)}
        run = subprocess.run([sys.executable, "-c", code, *map(str, args.shape), str(args.lengths),
                              str(int(args.trim_each))], env=env,
                             capture_output=True, text=True, check=True)
        result = json.loads(run.stdout)
        gained = ", ".join(f"{n}: {mib:.0f}" for n, mib in result["gained_mib"].items())
        print(f"capacity {capacity:>4}: MiB gained after lengths {{{gained}}}; after malloc_trim "
              f"{result['after_trim_mib']:.0f}; one length repeated {result['one_length_ms']:.1f} ms a pass"
              + (f"; a trim took {result['trim_ms'][0]:.2f} ms (median), {result['trim_ms'][1]:.1f} ms at most"
                 if result["trim_ms"] else ""))


if __name__ == "__main__":
    main()
