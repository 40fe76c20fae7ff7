"""What dropout costs a training step on this machine: the random masks, per element and per step.

torch's F.dropout draws a CPU's random mask one element at a time, so on 2 cores it is far from free; the model uses
playground/model/dropout.py's masks on a CPU instead (two elements per random draw), and run.py's time estimate charges
``CPU_DROPOUT_S_PER_ELEMENT`` for each element masked. This prints:

  - the cost per element of F.dropout and of the playground's dropout (forward and backward) on a large tensor,
    against a plain multiply;
  - the median training step of a preset's shape (default ``small``, the shipped model's) with its dropout and
    with none, alternating, and the difference per element masked (run._dropout_elements counts them);
  - what the estimate says for both.

    python benchmarks/dropout_cost.py                  # the small preset, 12 timed steps each way
    python benchmarks/dropout_cost.py --preset tiny --dropout 0.1
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch
import torch.nn.functional as F

from playground.config import ModelConfig, TrainConfig
from playground.device import describe
from playground.model.dropout import dropout
from playground.model.gpt import GPT
from playground.training.estimates import CPU_DROPOUT_S_PER_ELEMENT, _dropout_elements, step_seconds
from playground.training.loop import configure_optimizer
from playground.training.presets import TRAIN_PRESETS


def per_element(p: float, elements: int = 2**22, repeats: int = 10) -> dict[str, float]:
    """Seconds per element, forward and backward, of torch's F.dropout(x, p), the playground's dropout (dropout.py)
    and a plain x * 1.0, alternating."""
    x = torch.randn(elements, requires_grad=True)
    ways = {"F.dropout": lambda: F.dropout(x, p), "playground dropout": lambda: dropout(x, p),
            "x * 1.0": lambda: x * 1.0}
    timings = {name: [] for name in ways}
    for fn in ways.values():
        fn().sum().backward()
    for _ in range(repeats):
        for name, fn in ways.items():
            started = time.perf_counter()
            fn().sum().backward()
            timings[name].append((time.perf_counter() - started) / elements)
    return {name: statistics.median(times) for name, times in timings.items()}


def step_times(config: ModelConfig, train_config: TrainConfig, steps: int) -> list[float]:
    """Wall seconds of ``steps`` training steps on one fixed random batch (2 warm-up steps dropped)."""
    torch.manual_seed(0)
    model = GPT(config)
    model.train()
    chosen = configure_optimizer(model, train_config, torch.device("cpu"))
    batch = train_config.batch_size
    x = torch.randint(config.vocabulary_size, (batch, config.context_size))
    y = torch.randint(config.vocabulary_size, (batch, config.context_size))
    times = []
    for _ in range(steps + 2):
        started = time.perf_counter()
        loss = model(x, y).loss
        chosen.zero_grad(set_to_none=True)
        loss.backward()
        chosen.step()
        times.append(time.perf_counter() - started)
    return times[2:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small", choices=list(TRAIN_PRESETS))
    parser.add_argument("--dropout", type=float, default=None, help="the rate to time (default: the preset's)")
    parser.add_argument("--steps", type=int, default=12, help="timed steps each way, per round")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds")
    args = parser.parse_args()

    preset = TRAIN_PRESETS[args.preset]
    rate = args.dropout if args.dropout is not None else preset.model.dropout_rate or 0.1
    costs = per_element(rate)
    print(f"{describe('cpu')}, torch {torch.__version__}")
    print(f"forward + backward at p={rate}, ns per element: "
          + "; ".join(f"{name} {seconds * 1e9:.1f}" for name, seconds in costs.items()))

    shape = {**preset.model.to_dict(), "dropout_rate": rate}
    with_dropout = ModelConfig(vocabulary_size=65, **shape)
    without = replace(with_dropout, dropout_rate=0.0)
    batch, optimizer = preset.train.batch_size, preset.train.optimizer
    times: dict[str, list[float]] = {"with": [], "without": []}
    for _ in range(args.rounds):  # alternating, so a busier moment hurts both
        times["with"] += step_times(with_dropout, preset.train, args.steps)
        times["without"] += step_times(without, preset.train, args.steps)
    slow, fast = statistics.median(times["with"]), statistics.median(times["without"])
    elements = _dropout_elements(with_dropout, batch)
    print(f"{args.preset} shape ({optimizer}, batch {batch}): median step {slow:.3f} s with dropout {rate}, "
          f"{fast:.3f} s without: dropout is {(slow - fast) / slow:.0%} of the step, "
          f"{(slow - fast) / elements * 1e9:.1f} ns per element masked ({elements:,} a step)")
    print(f"the estimate (CPU_DROPOUT_S_PER_ELEMENT {CPU_DROPOUT_S_PER_ELEMENT * 1e9:.0f} ns): "
          f"{step_seconds(with_dropout, batch, 'cpu', optimizer):.3f} s with, "
          f"{step_seconds(without, batch, 'cpu', optimizer):.3f} s without")


if __name__ == "__main__":
    main()
