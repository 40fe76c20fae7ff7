"""Every memory estimate against the peak it bounds, across shapes: what the suite's guard tests check at one shape a
request kind (tests/test_budget.py, tests/test_inference_budget.py, tests/test_memory_sweep.py), swept here over the
shapes that fitted the estimates. Run it after changing an estimate (playground/budget.py, a view's cost) or what a
request holds; it takes minutes where the guards take seconds.

Each row is one request at one shape: its estimate, the measured peak (the highest of its processes), their ratio,
and whether it holds peak <= estimate <= 2 x peak (the lowest process's peak for the inference kinds, which run two
processes a shape; plus FIXED_OVERHEAD for training with dropout and CONVERSION_SLACK for a conversion, as their
tests allow; the Attention tab's view is held below its estimate only). The measurements are the guard tests' own
functions: children with the server's heap (``budget.fix_heap``), one thread each, two at a time; the cgroup rows
(a child limited to its estimate: an estimate below the peak is an OOM kill) need root and a cgroup v1 memory
hierarchy and are skipped elsewhere. Exits 1 if any row fails.

    PYTHONPATH=$PWD python benchmarks/memory_sweep.py
    PYTHONPATH=$PWD python benchmarks/memory_sweep.py --only training inference
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the guard tests' measuring children and helpers

from playground import budget  # noqa: E402
from playground.settings import apply_process_defaults  # noqa: E402

TRAINING_SHAPES = [  # layers, heads, width, context, batch
    (2, 3, 96, 64, 32),  # the tiny preset
    (4, 4, 192, 128, 32),  # the shipped model's shape
    (1, 1, 256, 1024, 16),  # long context, one head
    (12, 4, 128, 64, 64),  # many layers
    (1, 8, 512, 128, 128),  # a wide batch
]
DROPOUT_SHAPES = [  # ... and the dropout rate
    (1, 8, 64, 512, 8, 0.5),  # one layer of big (B, h, T, T) blocks (64 MiB each: glibc maps them apart)
    (4, 4, 192, 512, 4, 0.1),  # the small preset's shape, longer context: 16 MiB blocks that glibc's heap keeps
    (2, 2, 128, 1024, 2, 0.1),  # the longest context
    (1, 8, 64, 512, 8, 0.0),  # the first shape without dropout: scaled_dot_product_attention keeps no (T, T)
]
ATTENTION_VIEW_SHAPES = [(1024, 64, 16), (512, 1024, 1024)]  # length, width, head size
ATTENTION_SHAPES = {  # embedding, heads, T (the timing sweep's largest), batch, dtype
    "compare": [
        (64, 4, 1024, 2, "float32"),
        (256, 16, 512, 2, "float32"),
        (1024, 64, 512, 1, "float32"),  # many narrow heads: a (T, T) mask per head in wrapper and sliced_heads
        (512, 8, 1024, 4, "float32"),
        (128, 8, 1024, 2, "bfloat16"),  # 1.6 to 2.09x from run to run
    ],
    "timing": [
        (64, 4, 1024, 2, "float32"),  # the Compare tab's default sweep
        (512, 8, 512, 4, "float32"),
    ],
}
INFERENCE_SHAPES = [  # layers, heads, width, context, vocabulary
    (4, 4, 192, 128, 65),  # the shipped model's shape
    (2, 8, 256, 512, 65),  # long context: the (h, T, T) maps dominate
    (6, 6, 384, 256, 65),  # nanoGPT's Shakespeare-char shape
    (2, 4, 128, 256, 4096),  # a large vocabulary: the logits dominate
]
GROUP_TRAINING_SHAPES = [  # layers, heads, width, context, batch, dropout
    (2, 3, 96, 64, 32, 0.0),  # the tiny preset
    (2, 3, 96, 64, 32, 0.2),  # the same with dropout: explicit attention
    (1, 8, 64, 256, 8, 0.5),  # many heads, longer context, dropout: the (B, h, T, T) blocks dominate
    (4, 4, 192, 128, 8, 0.0),  # the shipped model's shape
]
GROUP_CONVERSION_SHAPES = [  # layers, heads, width, context, AdamW's moments saved
    (2, 2, 16, 8, True),  # the conversion tests' model
    (4, 4, 192, 128, True),  # the shipped model's shape: 22 MB with AdamW's moments
    (4, 4, 192, 128, False),  # the weights alone: the converted copies outgrow the upload
    (2, 4, 256, 64, True),  # wider
    (4, 4, 128, 256, True),  # longer context
]
GROUP_HUB_SHAPES = [  # width, layers, heads, context, stored dtype, old style
    (384, 4, 6, 256, "float32", False),  # 28 MiB of weights
    (384, 4, 6, 256, "float16", True),  # half precision, with the old mask buffers and a stored copy of the head
]
GROUP_COMPARE_SHAPES = [
    (64, 8, 1024, 2, "float32"),  # the Compare tab's default at its longest T, 8 heads
    (1024, 64, 512, 1, "float32"),  # many narrow heads: the suite's guard
]

SECTIONS = ("training", "dropout", "view", "compare", "timing", "inference", "group")


class Table:
    """Rows printed as they come; ``failed`` counts the rows outside their bounds."""

    def __init__(self) -> None:
        self.failed = 0
        print(f"{'request':<22} {'shape':<34} {'estimate':>10} {'peak':>10} {'ratio':>6}  holds")

    def row(self, request: str, shape, estimate: int, peak: int | str, holds=None, low: int | None = None) -> None:
        """``holds(estimate, peak, low)`` decides; peak <= estimate <= 2 x low (low: the lowest peak) by default."""
        if not isinstance(peak, int):
            self.failed += 1
            print(f"{request:<22} {str(shape):<34} {budget.human(estimate):>10} {'failed':>10}  {peak[-400:]}")
            return
        low = peak if low is None else low
        ok = (holds or (lambda e, p, lo: p <= e <= 2 * lo))(estimate, peak, low)
        self.failed += not ok
        print(f"{request:<22} {str(shape):<34} {budget.human(estimate):>10} {budget.human(peak):>10} "
              f"{estimate / peak:>6.2f}  {'yes' if ok else 'NO'}", flush=True)


def caught(measure, *args):
    """``measure(*args)``, or why it failed (a child killed inside its limit fails its assertion)."""
    try:
        return measure(*args)
    except AssertionError as error:
        return f"{error}"


def sweep(sections: set[str]) -> int:
    import test_budget as tb
    import test_inference_budget as ti
    import test_memory_sweep as tm

    table = Table()
    if "training" in sections:
        for shape, peak in tb.training_peaks(TRAINING_SHAPES).items():
            table.row("training", shape, tb.training_estimate(shape), peak)
    if "dropout" in sections:
        for shape, peak in tb.dropout_peaks(DROPOUT_SHAPES).items():
            table.row("training, dropout", shape, tb.dropout_estimate(shape), peak,
                      lambda e, p, lo: p <= e <= 2 * lo + budget.FIXED_OVERHEAD)
    if "view" in sections:
        for shape in ATTENTION_VIEW_SHAPES:
            table.row("attention view", shape, tb.attention_view_estimate(shape),
                      caught(tb.attention_view_peak, shape), lambda e, p, lo: p <= e)
    for kind in ("compare", "timing"):
        if kind in sections:
            for shape, peak in tb.attention_peaks(kind, ATTENTION_SHAPES[kind]).items():
                table.row(kind, shape, tb.attention_estimate(kind, shape), peak,
                          lambda e, p, lo: p <= e <= tb.ATTENTION_SLACK * lo)
    if "inference" in sections:
        for shape in INFERENCE_SHAPES:
            estimates = ti._estimates(shape)
            peaks = caught(ti.measured, shape)
            for kind, estimate in estimates.items():
                if isinstance(peaks, str):
                    table.row(kind, shape, estimate, peaks)
                else:
                    table.row(kind, shape, estimate, peaks[kind][-1], low=peaks[kind][0])
    if "group" in sections:
        with tm.memory_group() as probe:
            if probe is None:
                print("cgroup rows skipped: no cgroup v1 memory hierarchy to make a group in (root needed)")
                return table.failed
        for shape in GROUP_TRAINING_SHAPES:
            with tm.memory_group() as group:
                table.row("training in a group", shape, *_pair(tm.training_in_group, group, shape))
        for shape in GROUP_CONVERSION_SHAPES:
            with tm.memory_group() as group, tempfile.TemporaryDirectory() as folder:
                table.row("conversion in a group", shape,
                          *_pair(tm.conversion_in_group, group, Path(folder), shape),
                          lambda e, p, lo: p <= e <= 2 * lo + budget.CONVERSION_SLACK)
        for shape in GROUP_HUB_SHAPES:
            with tm.memory_group() as group, tempfile.TemporaryDirectory() as folder:
                result = caught(tm.hub_import_in_group, group, Path(folder), shape)
                if isinstance(result, str):
                    table.row("hub import in a group", shape, 0, result)
                    continue
                estimate, peak, held, weights = result
                held_once = held < 1.25 * weights + budget.INFERENCE_OVERHEAD  # not the file's mapping too
                table.row("hub import in a group", shape, estimate, peak,
                          lambda e, p, lo, held_once=held_once: held_once and p <= e <= 2 * lo)
        for shape in GROUP_COMPARE_SHAPES:
            with tm.memory_group() as group:
                table.row("compare in a group", shape, *_pair(tm.compare_in_group, group, shape),
                          lambda e, p, lo: p <= e <= tb.ATTENTION_SLACK * lo)
    return table.failed


def _pair(measure, *args) -> tuple[int, int | str]:
    """(estimate, peak) from ``measure(*args)``, or (0, why it failed)."""
    result = caught(measure, *args)
    return (0, result) if isinstance(result, str) else result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS),
                        help="which requests to sweep (default: all)")
    args = parser.parse_args()
    apply_process_defaults()  # as app.py and the tests do
    failed = sweep(set(args.only))
    print(f"{failed} row(s) outside their bounds" if failed else "every estimate holds")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
