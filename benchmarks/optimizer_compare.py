"""AdamW against Muon (+ AdamW for embeddings, head and norms) on the "tiny" preset: validation loss and wall time.

Both runs share everything else: the preset's shape and schedule, Tiny Shakespeare, the seed (so the same initial
weights and the same batches), the learning rate (Muon's step is scaled to AdamW's RMS, ``match_rms_adamw``).
Each prints its validation loss at every evaluation with the training seconds so far (evaluation excluded), then
a final validation loss over more batches; the last lines compare the two at the same training time.

    python benchmarks/optimizer_compare.py                  # the tiny preset's 1200 steps each
    python benchmarks/optimizer_compare.py --steps 200 --eval-interval 50    # shorter
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import torch
from train_speed import shakespeare

from playground.config import OPTIMIZER_CHOICES, ModelConfig
from playground.device import describe
from playground.model.gpt import GPT
from playground.text.data import TokenIdsDataset, split_train_val
from playground.text.tokenizer import CharTokenizer
from playground.training.loop import StepMetrics, evaluate, train
from playground.training.presets import TRAIN_PRESETS


def run(optimizer: str, steps: int | None, eval_interval: int | None, final_batches: int,
        corpus_path: str | None) -> dict:
    preset = TRAIN_PRESETS["tiny"]
    changes = {"steps": steps, "eval_interval": eval_interval}
    config = replace(preset.train, optimizer=optimizer, device="cpu", time_budget_seconds=0.0,  # equal steps
                     **{name: value for name, value in changes.items() if value})
    corpus = shakespeare(corpus_path)
    tokenizer = CharTokenizer.train_from_text(corpus.text)
    model_config = ModelConfig(vocabulary_size=tokenizer.vocabulary_size, **preset.model.to_dict())
    train_ids, val_ids = split_train_val(tokenizer.encode(corpus.text))
    train_data = TokenIdsDataset(train_ids, model_config.context_size)
    val_data = TokenIdsDataset(val_ids, model_config.context_size)
    torch.manual_seed(config.seed)
    model = GPT(model_config)
    curve = []  # (step, training seconds so far, val loss)
    tokens_per_step = config.batch_size * model_config.context_size
    started = time.perf_counter()

    def on_step(step: int, metrics: StepMetrics) -> None:
        if metrics.val_loss is not None:  # the loop's tokens/s counts training time only: evaluation left out
            curve.append((step, step * tokens_per_step / metrics.tokens_per_second, metrics.val_loss))

    result = train(model, config, train_data, val_data, on_step=on_step)
    final = evaluate(model, val_data, final_batches, config.batch_size)
    return {"optimizer": optimizer, "steps": result.steps_done, "train_seconds": result.wall_seconds -
            result.eval_seconds, "wall_seconds": time.perf_counter() - started, "final_val": final, "curve": curve,
            "tokens_per_second": result.tokens_per_second, "corpus": corpus.name}


def val_at(curve: list[tuple[int, float, float]], seconds: float) -> tuple[int, float, float] | None:
    """The last evaluation reached within ``seconds`` of training; None if none was."""
    within = [point for point in curve if point[1] <= seconds]
    return within[-1] if within else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=None, help="steps per run (default: the tiny preset's)")
    parser.add_argument("--eval-interval", type=int, default=None, help="steps between evaluations (the preset's)")
    parser.add_argument("--final-batches", type=int, default=50, help="batches of the final validation loss")
    parser.add_argument("--corpus", default=None, help="a text file (default: Tiny Shakespeare)")
    args = parser.parse_args()
    print(f"torch {torch.__version__} on {describe(torch.device('cpu'))}; tiny preset "
          f"{TRAIN_PRESETS['tiny'].model.to_dict()}", flush=True)
    results = []
    for name in OPTIMIZER_CHOICES:
        r = run(name, args.steps, args.eval_interval, args.final_batches, args.corpus)
        results.append(r)
        print(f"\n{r['optimizer']}: {r['steps']} steps on {r['corpus']}, {r['train_seconds']:.1f} s training "
              f"({r['wall_seconds']:.1f} s wall with evaluation), {r['tokens_per_second']:,.0f} tokens/s")
        for step, seconds, val in r["curve"]:
            print(f"  step {step:5d}  {seconds:6.1f} s  val {val:.4f}")
        print(f"  final val loss ({args.final_batches} batches): {r['final_val']:.4f}", flush=True)
    adamw, muon = results
    budget = min(adamw["train_seconds"], muon["train_seconds"])
    print(f"\nat the same training time ({budget:.1f} s, the shorter run's):")
    for r in results:
        point = val_at(r["curve"], budget + 1e-6)
        if point is None:
            print(f"  {r['optimizer']:6s} no evaluation yet (its first came at {r['curve'][0][1]:.1f} s)")
        else:
            print(f"  {r['optimizer']:6s} val {point[2]:.4f} (step {point[0]}, {point[1]:.1f} s)")


if __name__ == "__main__":
    main()
