"""How long the Attention tab takes to compute every stage of one head and build its figures.

Target (issue 3): T = 64 on the shipped checkpoint, median <= 100 ms on a 2-core machine.
Prints medians for: the trace alone (all seven stages), the trace plus every stage's figures, and one
click of the tab's handler (one step's figures, the what-if analyses and the query view).

    python benchmarks/attention_tab_speed.py [--checkpoint shakespeare-char] [--length 64] [--repeats 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch  # noqa: E402

from playground.checkpoints import store as checkpoints  # noqa: E402
from playground.config import Limits  # noqa: E402
from playground.device import describe  # noqa: E402
from playground.lens.walkthrough import (
    STAGE_KEYS,  # noqa: E402
    STEP_TITLES,  # noqa: E402
    prepare_text,  # noqa: E402
    trace_checkpoint_head,  # noqa: E402
)
from playground.text.data import builtin_corpus  # noqa: E402
from playground.ui import attention_tab, plots  # noqa: E402
from playground.ui.common import AppContext  # noqa: E402


def median_ms(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=checkpoints.DEFAULT_CHECKPOINT)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()

    ctx = AppContext(limits=Limits(), weights=checkpoints.weights_dir())
    loaded = ctx.checkpoint(args.checkpoint)
    source = builtin_corpus().text
    text = "".join(c for c in source if not loaded.tokenizer.find_unknown(c))[1000:1000 + args.length]
    prepared = prepare_text(text, loaded.tokenizer, loaded.config.context_size)
    length = len(prepared.tokens)
    layer, head = loaded.config.layers_num - 1, 0

    def trace_only():
        with torch.no_grad():
            return trace_checkpoint_head(loaded.model, prepared.ids, layer, head, tokens=prepared.tokens)

    def trace_and_all_figures():
        trace = trace_only()
        for key in STAGE_KEYS:
            for matrix in trace.matrices(key):
                plots.heatmap(matrix.values, matrix.row_labels, matrix.col_labels, matrix.name)

    def one_click():
        attention_tab.attention_step(ctx, "trained checkpoint", args.checkpoint, layer, head, 0, 16, 8, "journey",
                                     text, True, True, 1.0, False, STEP_TITLES[5], None)

    print(f"checkpoint {loaded.name} ({loaded.model.parameter_count():,} parameters) on {describe('cpu')}; "
          f"T = {length}, layer {layer}, head {head}; medians of {args.repeats}")
    print(f"  all 7 stages computed:                       {median_ms(trace_only, args.repeats):8.2f} ms")
    print(f"  all 7 stages + every stage's heatmaps (9):   {median_ms(trace_and_all_figures, args.repeats):8.2f} ms")
    print(f"  one tab click (step 6 + what-ifs + query):   {median_ms(one_click, args.repeats):8.2f} ms")
    print("  target: <= 100 ms")


if __name__ == "__main__":
    main()
