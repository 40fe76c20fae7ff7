"""A seeded search for the ``tiny`` preset's recipe: the best validation loss a fixed number of training seconds buys.

Coordinate search, one axis at a time (optimizer, then the learning rate's decay, then learning rate, then batch size,
then shape): each axis tries
its values with the best settings found so far for the others, keeps the best, and moves on. Every run:

  - starts from the same seed (the same initial weights for a shape, the same batch sequence);
  - gets a schedule that ends when its time is up: a time budget of ``--seconds`` (TrainConfig.time_budget_seconds,
    as the ``tiny`` preset runs), so its warm-up and cosine decay fit that many seconds of training steps on this
    machine, however many steps that is;
  - is scored like time_to_quality.py: nanoGPT's 90/10 split, the same ``--val-windows`` fixed windows of 64
    characters, evaluation not counted in the training seconds, scored every ``--eval-every`` seconds and at the end.

It prints one line per run and, at the end, a table of every run sorted by final validation loss, with the loss
at 20 s and when (if ever) it reached nanoGPT's 1.886.

    python benchmarks/sweep.py                         # 60 s per run, the default axes (about 14 minutes)
    python benchmarks/sweep.py --seconds 20            # the 20-second budget
    python benchmarks/sweep.py --lrs 0.004 0.008 --batches 32 --shapes 2x128   # a narrower search
    python benchmarks/sweep.py --from-shape 2x96 --shapes 2x96 3x96   # learning rate and batch tried on 2x96
    python benchmarks/sweep.py --optimizers muon --decays cosine:0.1 linear:0 --lrs 0.012 --batches 32 --shapes 2x96
                                                       # the decay alone: cosine to 0.1x (nanoGPT's), linear to 0
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from time_to_quality import CONTEXT, TARGET_LOSS, Recorder, first_below, loss_at, shown, warm_up
from train_speed import shakespeare

from playground.config import ModelConfig, TrainConfig
from playground.device import describe
from playground.model.gpt import GPT
from playground.text.data import TokenIdsDataset, split_train_val
from playground.text.tokenizer import CharTokenizer
from playground.training.loop import train
from playground.training.presets import TRAIN_PRESETS


@dataclass(frozen=True)
class Recipe:
    optimizer: str
    learning_rate: float
    batch_size: int
    layers_num: int
    embedding_dim: int
    decay: str  # TrainConfig.learning_rate_decay
    floor: float  # TrainConfig.min_learning_rate_ratio

    @property
    def label(self) -> str:
        return (f"{self.optimizer:5s} {self.decay:6s} to {self.floor:<4g} lr {self.learning_rate:<7g} "
                f"batch {self.batch_size:<3d} {self.layers_num}x{self.embedding_dim}")

    def model_fields(self) -> dict:
        heads = max(1, self.embedding_dim // 32)  # head size 32, as nanoGPT's baby and the tiny preset
        return dict(layers_num=self.layers_num, heads_num=heads, embedding_dim=self.embedding_dim,
                    context_size=CONTEXT)

    def train_config(self, seconds: float) -> TrainConfig:
        """The tiny preset's training with this recipe's changes, ended by a time budget of ``seconds``."""
        return replace(TRAIN_PRESETS["tiny"].train, optimizer=self.optimizer, learning_rate=self.learning_rate,
                       batch_size=self.batch_size, learning_rate_decay=self.decay, min_learning_rate_ratio=self.floor,
                       steps=MAX_STEPS, time_budget_seconds=seconds, device="cpu")


MAX_STEPS = 1_000_000  # the time budget, not the steps, ends every run


def run(recipe: Recipe, seconds: float, train_data: TokenIdsDataset, vocab: int, windows, every: float,
        seed: int) -> tuple[Recorder, int]:
    torch.manual_seed(seed)
    model = GPT(ModelConfig(vocabulary_size=vocab, **recipe.model_fields()))
    recorder = Recorder(model, windows, every, seconds * 1.15)  # a margin: the budget, not this clock, ends it
    result = train(model, replace(recipe.train_config(seconds), seed=seed), train_data, None,
                   on_step=lambda step, metrics: recorder.after_step(step), should_stop=recorder.done)
    recorder.finish()
    return recorder, result.steps_done


def final(recorder: Recorder) -> float:
    """A run's score once its time budget ended it: what ``--seconds`` of training steps bought."""
    return recorder.points[-1][2]


def parse_decay(text: str) -> dict:
    """"linear:0" -> the decay and the floor it ends at, as a Recipe's fields."""
    decay, _, floor = text.partition(":")
    return {"decay": decay, "floor": float(floor or 0)}


def parse_shape(text: str) -> tuple[int, int]:
    layers, width = text.lower().split("x")
    return int(layers), int(width)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="training seconds per run (evaluation excluded)")
    parser.add_argument("--eval-every", type=float, default=10.0, help="score every this many training seconds")
    parser.add_argument("--val-windows", type=int, default=512)
    parser.add_argument("--seed", type=int, default=1337, help="the weights' and the batches' seed")
    parser.add_argument("--optimizers", nargs="+", default=["adamw", "muon"])
    parser.add_argument("--decays", nargs="+", default=["cosine:0.1", "linear:0"],
                        help="the learning rate's decay and the share of it where the decay ends")
    parser.add_argument("--lrs", nargs="+", type=float, default=[0.002, 0.004, 0.008])
    parser.add_argument("--batches", nargs="+", type=int, default=[16, 32, 64])
    parser.add_argument("--shapes", nargs="+", default=["2x128", "3x128", "4x128", "2x192"],
                        help="layers x width (head size 32, context 64)")
    parser.add_argument("--from-shape", default=None,
                        help="the shape the search starts from, so the earlier axes are tried on it (default: the "
                             "tiny preset's)")
    parser.add_argument("--data", type=Path, default=None, help="a text file (default: Tiny Shakespeare)")
    args = parser.parse_args()

    corpus = shakespeare(args.data)
    tokenizer = CharTokenizer.train_from_text(corpus.text)
    train_ids, val_ids = split_train_val(tokenizer.encode(corpus.text))
    vocab = tokenizer.vocabulary_size
    windows = TokenIdsDataset(val_ids, CONTEXT).random_batch(args.val_windows, torch.Generator().manual_seed(0))
    train_data = TokenIdsDataset(train_ids, CONTEXT)
    print(f"{corpus.name}: {len(corpus.text):,} characters, nanoGPT's 90/10 split, {args.val_windows} fixed "
          f"validation windows of {CONTEXT}; {describe('cpu')}, torch "
          f"{torch.__version__}; {args.seconds:g} s of training per run, seed {args.seed}")

    tiny = TRAIN_PRESETS["tiny"]
    warm_up()
    layers, width = (parse_shape(args.from_shape) if args.from_shape
                     else (tiny.model.layers_num, tiny.model.embedding_dim))
    best = Recipe(tiny.train.optimizer, tiny.train.learning_rate, tiny.train.batch_size, layers, width,
                  tiny.train.learning_rate_decay, tiny.train.min_learning_rate_ratio)
    shapes = [parse_shape(shape) for shape in args.shapes]
    axes = [("optimizer", [{"optimizer": name} for name in args.optimizers]),
            ("decay", [parse_decay(decay) for decay in args.decays]),
            ("learning rate", [{"learning_rate": lr} for lr in args.lrs]),
            ("batch size", [{"batch_size": batch} for batch in args.batches]),
            ("shape", [{"layers_num": layers, "embedding_dim": width} for layers, width in shapes])]
    results: dict[Recipe, tuple[Recorder, int]] = {}
    for axis, choices in axes:
        print(f"\n{axis}:")
        for change in choices:
            recipe = replace(best, **change)
            if recipe not in results:
                recorder, steps = run(recipe, args.seconds, train_data, vocab, windows, args.eval_every, args.seed)
                results[recipe] = (recorder, steps)
                curve = ", ".join(f"{at:.0f}s {loss:.3f}" for at, _, loss in recorder.points)
                print(f"  {recipe.label}: {steps} steps; {curve}", flush=True)
        best = min((replace(best, **change) for change in choices), key=lambda r: final(results[r][0]))
        print(f"  best so far: {best.label} ({final(results[best][0]):.3f})")

    print(f"\n{'recipe':56s} {'steps':>6s} {'to <= 1.886':>12s} {'val at 20 s':>12s} "
          f"{f'val after {args.seconds:g} s':>15s}")
    for recipe, (recorder, steps) in sorted(results.items(), key=lambda item: final(item[1][0])):
        reached = first_below(recorder.points, TARGET_LOSS)
        print(f"{recipe.label:56s} {steps:6d} {shown(reached, '.1f', 'not reached'):>12s} "
              f"{shown(loss_at(recorder.points, 20.0), '.3f'):>12s} {final(recorder):15.3f}")
    print(f"\nbest after {args.seconds:g} s: {best.label}")


if __name__ == "__main__":
    main()
