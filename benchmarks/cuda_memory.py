"""The training memory estimate against the peak a real run takes on a CUDA device (issue 28's CUDA half).

For each shape of a sweep, with and without dropout, in float32 and bfloat16 autocast: a fresh model on the device,
``train.train`` for a few steps at that shape (the loop the Train tab runs, its fused AdamW, clipping and autocast),
then ``torch.cuda.max_memory_allocated`` past what was allocated before the model was built, against
``estimates.memory_cost(config, batch, "cuda")``, the estimate the server admits a CUDA run by. Prints one row per
case and exits 1 unless every case holds peak <= estimate <= 2 x peak (the bound tests/test_memory_sweep.py holds
on the CPU inside a cgroup limit).

Without a CUDA device it says so and exits 2: the CPU's estimate is checked by that test, not here.

    python benchmarks/cuda_memory.py            # the sweep, a minute or two on one GPU
    python benchmarks/cuda_memory.py --quick    # its first four shapes
"""

from __future__ import annotations

import argparse
import sys

import torch

from playground.budget import human
from playground.config import ModelConfig, TrainConfig
from playground.model.gpt import GPT
from playground.text.data import TokenIdsDataset
from playground.training.estimates import memory_cost
from playground.training.loop import train

# layers, heads, width, context, batch: the presets' shapes and the ones that broke the CPU server (issue 28)
SHAPES = [
    (2, 3, 96, 64, 32),  # the tiny preset
    (4, 4, 192, 128, 8),  # the shipped model
    (1, 64, 64, 1024, 8),  # many heads, long context: what a (B, h, T, T) map would cost
    (6, 6, 384, 256, 64),  # nanoGPT's Shakespeare shape
    (4, 4, 256, 1024, 16),  # small at context 1024
    (8, 8, 512, 512, 32),
    (12, 12, 768, 1024, 8),  # GPT-2 small's shape
]
VOCABULARY = 65
STEPS = 3


def measure(shape: tuple[int, ...], dropout: float, precision: str, device: torch.device) -> tuple[int, int]:
    """(peak bytes past the allocations before the model, the estimate) of STEPS training steps at ``shape``."""
    layers, heads, width, context, batch = shape
    config = ModelConfig(vocabulary_size=VOCABULARY, context_size=context, embedding_dim=width, heads_num=heads,
                         layers_num=layers, dropout_rate=dropout)
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    torch.manual_seed(0)
    data = TokenIdsDataset(torch.randint(0, VOCABULARY, (context * 4 + 1,)), context)
    model = GPT(config).to(device)
    settings = TrainConfig(batch_size=batch, steps=STEPS, warmup_steps=0, eval_interval=STEPS, device="cuda",
                           precision=precision)
    train(model, settings, data)
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - base
    del model
    return peak, memory_cost(config, batch, "cuda").bytes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the first four shapes only")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device here: this checks the CUDA estimate (the CPU's is tests/test_memory_sweep.py)")
        return 2
    device = torch.device("cuda")
    print(f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}")
    print(f"{'layers heads width context batch':>33} {'dropout':>7} {'precision':>9} {'estimate':>10} "
          f"{'peak':>10} {'ratio':>6}  holds")
    failures = 0
    for shape in SHAPES[:4] if args.quick else SHAPES:
        for dropout in (0.0, 0.2):
            for precision in ("float32", "bfloat16"):
                peak, estimate = measure(shape, dropout, precision, device)
                holds = peak <= estimate <= 2 * peak
                failures += not holds
                print(f"{' '.join(f'{n:>5}' for n in shape):>33} {dropout:>7} {precision:>9} {human(estimate):>10} "
                      f"{human(peak):>10} {estimate / peak:>6.2f}  {'yes' if holds else 'NO'}")
    print(f"{failures} case(s) outside peak <= estimate <= 2 x peak" if failures else "every case holds")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
