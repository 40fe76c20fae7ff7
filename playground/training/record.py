"""What a training run leaves behind: the record training.json keeps (its curves, its speed, where and how it
trained) and the model card a command-line run writes beside its weights; and what a resumed run reads back of them.

run.py calls these when it saves; nothing here trains or saves.
"""

from __future__ import annotations

from typing import Any

from playground import checks
from playground.device import describe_training
from playground.lens.head_forming import formed_heads
from playground.model.families import describe_architecture
from playground.training.estimates import passes_over_text
from playground.training.loop import TrainResult
from playground.training.precision import PrecisionChoice, resolve_precision
from playground.training.requests import PreparedRun

# training.json's curves, carried on by a resumed run; head_scores: every head's pattern scores at each probe
# snapshot (head_forming.py), [{"step": 25, "previous token": [[per head] per layer], ...}, ...]
CURVE_FIELDS = ("train_loss", "val_loss", "val_seconds", "head_scores")
SECONDS_FIELD = "seconds_before"  # in PreparedRun.history: [a resumed run's earlier wall_seconds]
# what training_record writes: a resumed checkpoint's record keeps its other fields (PreparedRun.record)
RUN_RECORD_FIELDS = frozenset({"steps_done", "steps_planned", *CURVE_FIELDS, "tokens_per_second", "wall_seconds",
                               "eval_seconds", "step_seconds", "corpus", "device", "seed", "train_config",
                               "stopped_early", "budget_reached", "processes", "previous_token_heads",
                               "passes_over_text", "precision"})


def recorded_step_seconds(training: dict[str, Any] | None) -> float:
    """The seconds of training steps a checkpoint's training.json records (all its sessions); a record from before
    they were kept: its wall time less the last session's evaluation, the closest figure it has."""
    training = training or {}
    if "step_seconds" in training:
        return float(training["step_seconds"])
    return max(0.0, float(training.get("wall_seconds", 0.0)) - float(training.get("eval_seconds", 0.0)))


def seconds_before(run: PreparedRun) -> float:
    """The wall seconds a resumed run had trained before this session: where its time axis goes on."""
    return float(run.history.get(SECONDS_FIELD, [0.0])[0]) if run.history.get(SECONDS_FIELD) else 0.0


def run_precision(run: PreparedRun) -> PrecisionChoice:
    """The forward's dtype a run trains in, and why: build_run's measurement (remembered for the process)."""
    if run.precision is not None:
        return run.precision
    return resolve_precision(run.model, run.device, run.request.train.precision, run.request.train.batch_size)


def training_record(run: PreparedRun, result: TrainResult) -> dict[str, Any]:
    """What training.json holds: the run's own fields (RUN_RECORD_FIELDS) after ``run.record``'s.

    The curves: ``train_loss`` and ``val_loss`` as [step, loss], ``val_seconds`` as [step, wall seconds since the
    run first started] at each evaluation (a resumed run's go on from its earlier ``wall_seconds``), so a later run
    can be drawn against it by step or by time.
    """
    before = seconds_before(run)
    record = {
        **run.record,
        "steps_done": result.steps_done,
        "steps_planned": run.request.train.steps,
        "train_loss": run.history.get("train_loss", []) + result.train_loss,
        "val_loss": run.history.get("val_loss", []) + result.val_loss,
        "val_seconds": run.history.get("val_seconds", []) + [[step, round(before + seconds, 2)]
                                                             for step, seconds in result.val_seconds],
        "tokens_per_second": round(result.tokens_per_second, 1),
        "wall_seconds": round(before + result.wall_seconds, 2),
        "eval_seconds": round(result.eval_seconds, 2),
        "step_seconds": round(result.step_seconds, 2),  # every session's: the time budget's clock
        "corpus": {"name": run.corpus.name, "characters": len(run.corpus.text), "source": run.corpus.source},
        "device": describe_training(run.device, run_precision(run).dtype),
        "precision": run_precision(run).to_dict(),  # which dtype the forward ran in, and why
        "seed": run.request.train.seed,
        "train_config": run.request.train.to_dict(),
        "stopped_early": result.stopped,
        "budget_reached": result.budget_reached,
    }
    # measured, where the Train tab's figure before the run is estimated (estimates.passes_over_text says how)
    record["passes_over_text"] = round(passes_over_text(
        result.steps_done, run.request.train.batch_size, run.model.config.context_size, len(run.corpus.text),
        result.processes), 2)
    new_scores = run.head_scores
    first_new = new_scores[0]["step"] if new_scores else float("inf")  # a resumed run probes its first step again
    record["head_scores"] = [s for s in run.history.get("head_scores", []) if s["step"] < first_new] + new_scores
    # the heads that became previous-character heads, and at which step (head_forming.PREVIOUS_TOKEN_HEAD)
    record["previous_token_heads"] = formed_heads(record["head_scores"])
    if result.processes > 1:
        record["processes"] = result.processes  # a distributed run: batch_size windows per rank and step
    return record


def model_card(run: PreparedRun, result: TrainResult, command: str) -> str:
    """A model card (README.md) for a checkpoint trained by the CLI: what, how, how well."""
    config, train_config = run.model.config, run.request.train
    record = training_record(run, result)
    val = f"{result.val_loss[-1][1]:.4f}" if result.val_loss else "not measured"
    shape = (f"{checks.count(config.layers_num, 'layer')}, {checks.count(config.heads_num, 'head')}, embedding "
             f"{config.embedding_dim}, context "
             f"{config.context_size}, vocabulary {config.vocabulary_size}, dropout {config.dropout_rate}, "
             f"bias {config.use_bias}")
    schedule = (f"batch {train_config.batch_size}, learning rate {train_config.learning_rate}, warm-up "
                f"{train_config.warmup_steps}, {train_config.learning_rate_decay} decay to "
                f"{train_config.min_learning_rate_ratio:g}x")
    if train_config.time_budget_seconds > 0:
        schedule += (f", sized to a time budget of {train_config.time_budget_seconds:g} s of training steps"
                     + (", which ended the run" if result.budget_reached else ""))
    optimizer = ("AdamW on every parameter" if train_config.optimizer == "adamw" else
                 "Muon on the blocks' weight matrices, AdamW on the embeddings, the head, the norms and the biases")
    split = ("first 90% trains, last 10% validates" if run.held_out else
             "too short to hold out 10%: it trains and validates on the whole text, so the validation loss measures "
             "memorising")
    rows = [
        ("parameters", f"{run.model.parameter_count():,}"),
        ("shape", shape),
        ("corpus", f"{run.corpus.name}, {len(run.corpus.text):,} characters ({split})"),
        ("steps", f"{result.steps_done} of {train_config.steps} ({schedule})"),
        ("optimizer", f"{train_config.optimizer}: {optimizer}"),
        ("validation loss", f"**{val}** (cross-entropy in nats, mean of {train_config.eval_batches} fixed batches "
                            f"of {'the last-10% split' if run.held_out else 'the whole text'})"),
        ("wall time", f"{record['wall_seconds']:.0f} s ({record['eval_seconds']:.0f} s of it evaluation)"),
        ("speed", f"{record['tokens_per_second']:,.0f} tokens/s"),
        ("device", record["device"] if result.processes == 1 else
         f"{record['device']} × {result.processes} processes (DistributedDataParallel, batch "
         f"{train_config.batch_size} each)"),
        ("seed", str(train_config.seed)),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    described = describe_architecture(config)  # "notebook 004's ...", "Llama family (...)"
    kind = "A character-level GPT" if config.is_gpt else described[:1].upper() + described[1:]
    return (
        f"---\nlibrary_name: attention-playground\ntags: [character-level, gpt, attention-playground]\n---\n\n"
        f"# {run.request.run_name}\n\n{kind} trained with Attention Playground's own CLI.\n\n"
        f"| | |\n| --- | --- |\n{table}\n\nTrained with:\n\n```bash\n{command}\n```\n\n"
        "Files: `config.json` (ModelConfig), `model.safetensors` (weights), `vocabulary.json` (the characters in ID "
        "order), `training.json` (loss curves and the figures above). Load with "
        "`playground.checkpoints.store.load_checkpoint`.\n"
    )
