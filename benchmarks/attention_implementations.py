"""Time every attention implementation at a short and a long context in one run, relative to sdpa.

    python benchmarks/attention_implementations.py --device cpu --dtype float32
    python benchmarks/attention_implementations.py --device cuda --dtype bfloat16 --repeats 20

Prints the device, then per implementation the median forward and forward+backward time at T=64 and
T=1024 and each as a multiple of sdpa's (x2.0 = twice as slow as sdpa).
Then the wall time of the Compare tab's default timing sweep (target: within 10 s on 2 CPU cores).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch  # noqa: E402

from playground.attention import IMPLEMENTATIONS  # noqa: E402
from playground.attention.costs import SWEEP_LENGTHS, time_implementations  # noqa: E402
from playground.device import describe, pick_device  # noqa: E402

SEQ_LENS = (64, 1024)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--repeats", type=int, default=None, help="timed calls per cell (default: adaptive)")
    parser.add_argument("--d-model", type=int, default=64, help="d_in = d_out")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's own)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    device = pick_device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)  # before describe(), which reports the thread count
    names = list(IMPLEMENTATIONS)
    start = time.perf_counter()
    records = time_implementations(
        names,
        args.d_model,
        args.d_model,
        args.heads,
        SEQ_LENS,
        args.batch,
        device=device,
        dtype=args.dtype,
        repeats=args.repeats,
        progress=lambda done, total, label: print(f"\r  timing {done}/{total} {label:<24}", end="", file=sys.stderr),
    )
    elapsed = time.perf_counter() - start
    print(file=sys.stderr)
    by_cell = {(r.name, r.seq_len): r for r in records}
    print(f"device: {describe(device)} · {args.dtype}")
    print(f"batch {args.batch}, d_in = d_out = {args.d_model}, {args.heads} heads; medians; x = time / sdpa's time")
    header = f"{'implementation':<14}"
    for T in SEQ_LENS:
        header += f" | {'T=' + str(T) + ' fwd ms':>14} {'x':>6} {'fwd+bwd ms':>11} {'x':>6}"
    print(header)
    print("-" * len(header))
    for name in names:
        line = f"{name:<14}"
        for T in SEQ_LENS:
            record, sdpa = by_cell[(name, T)], by_cell[("sdpa", T)]
            line += (
                f" | {record.forward_ms:>14.3f} {record.forward_ms / sdpa.forward_ms:>5.1f}x"
                f" {record.forward_backward_ms:>11.3f} {record.forward_backward_ms / sdpa.forward_backward_ms:>5.1f}x"
            )
        print(line)
    backends = ", ".join(f"T={T}: {by_cell[('sdpa', T)].sdpa_backend}" for T in SEQ_LENS)
    print(f"sdpa backend: {backends}")
    print(f"repeats per cell: {sorted({r.repeats for r in records})}; sweep took {elapsed:.1f} s")

    # the Compare tab's default "Time them": its defaults (embedding 64, 4 heads, batch 2, fp32), T 16..1024
    supported = [n for n, impl in IMPLEMENTATIONS.items() if impl.unsupported_reason(64, 64, 4) is None]
    start = time.perf_counter()
    time_implementations(supported, 64, 64, 4, SWEEP_LENGTHS, 2, device=device, dtype=torch.float32)
    tab_seconds = time.perf_counter() - start
    print(f"Compare tab's default sweep ({len(supported)} implementations x T {SWEEP_LENGTHS[0]}..{SWEEP_LENGTHS[-1]}, "
          f"{len(supported) * len(SWEEP_LENGTHS)} cells): {tab_seconds:.1f} s (target <= 10 s on 2 CPU cores)")


if __name__ == "__main__":
    main()
