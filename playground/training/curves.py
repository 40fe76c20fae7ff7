"""Runs' learning curves side by side: what each run's training.json recorded, read back for the Train tab's overlay.

Owns reading a run's curves (validation loss at each evaluation, by step and by wall seconds since the run first
started; the training loss thinned to a few hundred points) and the one-line label that says what the run was
(optimizer, learning rate, batch, model), and the note that says when a run has begun to overfit. Knows nothing about
figures or the UI.

    read_curve("my-run-1", weights) -> RunCurve(name="my-run-1", label="my-run-1 · adamw, lr 0.004, batch 32 · ...",
                                                 val=[(200, 2.19, 20.2), ...], train=[(1, 4.19), ...])
A run recorded before ``val_seconds`` existed (the shipped model) gets its times spread evenly over its
``wall_seconds`` and says so (``seconds_estimated``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.checkpoints import gpt2
from playground.checkpoints import store as checkpoints

MAX_OVERLAYS = 5  # earlier runs drawn at once
MAX_TRAIN_POINTS = 400  # the training loss is thinned to about this many points per run


@dataclass(frozen=True)
class RunCurve:
    name: str
    label: str  # what the run was, in one line
    val: tuple[tuple[int, float, float], ...]  # (step, validation loss, wall seconds since the run first started)
    train: tuple[tuple[int, float], ...]  # (step, training loss), thinned
    seconds_per_step: float  # the run's average, to place training-loss points on a time axis
    seconds_estimated: bool  # True when the times are spread evenly over wall_seconds (no val_seconds recorded)
    corpus: str = ""  # what it trained and validated on (corpus_name): losses compare only on the same text


def corpus_name(name: str, characters: int) -> str:
    """A corpus as curves tell runs' texts apart: ``tinyshakespeare, 1,115,394 characters``."""
    return f"{name}, {int(characters):,} characters"


def thin(points: list, limit: int = MAX_TRAIN_POINTS) -> list:
    """Every k-th point so at most about ``limit`` remain, always keeping the last: 1,200 points, limit 400 -> 400."""
    if len(points) <= limit:
        return list(points)
    stride = -(-len(points) // limit)
    kept = points[::stride]
    return kept if kept[-1] == points[-1] else [*kept, points[-1]]


OVERFIT_RISE = 0.05  # nats the validation loss must rise above its best, two or more evaluations after it
TRAIN_WINDOW = 20  # training-loss points averaged on each side of the comparison (one step's loss is noisy)


def overfitting_note(train_loss: list, val_loss: list) -> str:
    """A sentence for a learner when the validation loss has risen while the training loss kept falling; "" if not.

    ``train_loss`` and ``val_loss`` are [step, loss] pairs in step order (a run's JobStatus or training.json). Said
    when the last validation loss is at least OVERFIT_RISE above the best one, taken two or more evaluations
    earlier, and the training loss near the end averages below the training loss around the best step.
    """
    if len(val_loss) < 3:
        return ""
    best_index = min(range(len(val_loss)), key=lambda i: val_loss[i][1])
    best_step, best = val_loss[best_index][0], val_loss[best_index][1]
    last_step, last = val_loss[-1][0], val_loss[-1][1]
    if len(val_loss) - 1 - best_index < 2 or last - best < OVERFIT_RISE:
        return ""
    then = [loss for step, loss in train_loss if step <= best_step][-TRAIN_WINDOW:]
    now = [loss for step, loss in train_loss if step <= last_step][-TRAIN_WINDOW:]
    if not then or not now:
        return ""
    train_then, train_now = sum(then) / len(then), sum(now) / len(now)
    if train_now >= train_then:
        return ""
    return (f"Validation loss has risen from {best:.3f} at step {best_step:.0f} to {last:.3f} at step {last_step:.0f} "
            f"while the training loss kept falling ({train_then:.3f} to {train_now:.3f}, each the mean of "
            f"{TRAIN_WINDOW} steps): the model is memorising its "
            "training text rather than learning what carries over to new text (overfitting). More text, dropout, a "
            "smaller model or fewer steps help.")


def _pairs(value: Any) -> list[tuple[float, float]]:
    if not isinstance(value, list):
        return []
    return [(float(p[0]), float(p[1])) for p in value
            if isinstance(p, (list, tuple)) and len(p) >= 2 and all(isinstance(v, (int, float)) for v in p[:2])]


def recipe(config: dict[str, Any]) -> str:
    """A TrainConfig's dict as a legend says it: ``muon, lr 0.012 (linear), batch 32``; "" for an empty one."""
    words = []
    if config:
        words.append(str(config.get("optimizer", "adamw")))  # runs from before the choice existed used AdamW
    if config.get("learning_rate") is not None:  # and its decay: runs from before the choice existed used cosine
        words.append(f"lr {config['learning_rate']:g} ({config.get('learning_rate_decay', 'cosine')})")
    if config.get("batch_size") is not None:
        words.append(f"batch {config['batch_size']}")
    return ", ".join(words)


def legend(name: str, recipe_text: str, parameters: int | None) -> str:
    """A curve's legend: ``my-run-1 · adamw, lr 0.004 (cosine), batch 32 · 0.8M parameters``; the recipe and the
    size where known."""
    parts = [name, recipe_text]
    if parameters:
        parts.append(gpt2.parameters_text(parameters))  # 5,168 parameters, not 0.0M
    return " · ".join(filter(None, parts))


def describe(name: str, training: dict[str, Any], parameters: int | None) -> str:
    """A saved run's legend (``legend``) from its training.json; a run with no recorded config has no recipe."""
    config = training.get("train_config") if isinstance(training.get("train_config"), dict) else {}
    return legend(name, recipe(config), parameters)


def read_curve(name: str, directory: Path | None = None) -> RunCurve | None:
    """The curves ``name``'s training.json recorded, or None when it recorded no validation loss."""
    training = checkpoints.read_training(name, directory)
    if not training:
        return None
    val = _pairs(training.get("val_loss"))
    if not val:
        return None
    steps_done = max(float(training.get("steps_done") or val[-1][0]), 1.0)
    wall = float(training.get("wall_seconds") or 0.0)
    seconds_per_step = wall / steps_done if wall > 0 else 0.0
    recorded = dict(_pairs(training.get("val_seconds")))
    estimated = any(step not in recorded for step, _ in val)
    times = [recorded.get(step, step * seconds_per_step) for step, _ in val]
    try:
        parameters = checkpoints.read_config(checkpoints.resolve(name, directory)).parameter_count()
    except checkpoints.CheckpointError:
        parameters = None
    return RunCurve(
        name=name,
        label=describe(name, training, parameters),
        val=tuple((int(step), loss, round(t, 2)) for (step, loss), t in zip(val, times, strict=True)),
        train=tuple((int(step), loss) for step, loss in thin(_pairs(training.get("train_loss")))),
        seconds_per_step=seconds_per_step,
        seconds_estimated=estimated,
        corpus=_recorded_corpus(training),
    )


def _recorded_corpus(training: dict[str, Any]) -> str:
    corpus = training.get("corpus")
    if not isinstance(corpus, dict) or not isinstance(corpus.get("characters"), int):
        return ""
    return corpus_name(str(corpus.get("name", "")), corpus["characters"])


def runs_with_curves(directory: Path | None = None) -> list[str]:
    """The checkpoints whose training.json holds a validation curve: the shipped one first, then the rest by name."""
    return [name for name in checkpoints.list_checkpoints(directory)
            if _pairs((checkpoints.read_training(name, directory) or {}).get("val_loss"))]


def live_curve(name: str, label: str, val: tuple, train: tuple, elapsed_seconds: float, steps_this_session: int,
               corpus: str = "") -> RunCurve | None:
    """The run in progress as a RunCurve, from the job manager's status: ``val`` holds (step, loss, seconds)
    points (seconds since the run first started; a point without them is placed at the average step time)."""
    if not val and not train:
        return None
    seconds_per_step = elapsed_seconds / steps_this_session if steps_this_session > 0 else 0.0
    points = tuple((int(p[0]), float(p[1]), float(p[2]) if len(p) > 2 else p[0] * seconds_per_step) for p in val)
    return RunCurve(name, label, points, tuple((int(s), float(v)) for s, v in thin(list(train))),
                    seconds_per_step, any(len(p) < 3 for p in val), corpus)
