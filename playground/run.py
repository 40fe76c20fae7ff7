"""A training run: what it needs (RunRequest), checking it all before the first step (prepare_run), the run
around the loop (run_training) and what it leaves behind (training.json, the model card).

Owns the corpus -> tokenizer -> model preparation, the periodic checkpoints through checkpoints.py, the
samples and the probe sentence's attention a run reports as it goes. Knows nothing about threads or the UI:
the job manager (jobs.py) and the CLI (cli/train.py) both call ``run_training`` with their own callbacks.
The loop itself is train.py's ``train``; the record a checkpoint keeps is built from that loop's own
TrainResult.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from playground import checkpoints
from playground.config import ConfigError, Limits, ModelConfig, TrainConfig
from playground.data import Corpus, CorpusError, TokenIdsDataset, load_corpus, split_train_val
from playground.device import describe, pick_device
from playground.model import GPT
from playground.presets import MODEL_FIELDS
from playground.sampling import generate
from playground.tokenizer import CharTokenizer
from playground.train import StepMetrics, TrainResult, train

PROBE_TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?"
SAMPLE_CHARACTERS = 120  # the length of each sample a run reports


@dataclass(frozen=True)
class RunRequest:
    """Everything a training run needs, as plain values (what the Train tab and the CLI collect)."""

    run_name: str
    model: dict[str, Any]  # MODEL_FIELDS by name, e.g. TRAIN_PRESETS["tiny"].model.to_dict()
    train: TrainConfig
    corpus_path: str | None = None
    corpus_text: str | None = None
    resume: bool = False
    weights_dir: Path | None = None


@dataclass
class PreparedRun:
    """A run checked and ready for its first step; ``history`` holds a resumed checkpoint's loss curves."""

    request: RunRequest
    corpus: Corpus
    tokenizer: CharTokenizer
    model: GPT
    train_data: TokenIdsDataset
    val_data: TokenIdsDataset
    device: torch.device
    start_step: int
    history: dict[str, list] = field(default_factory=dict)


def prepare_run(request: RunRequest, limits: Limits | None = None) -> PreparedRun:
    """Check everything before the first step: name, sizes, caps, corpus, device, resume target."""
    limits = limits or Limits.from_env()
    name = checkpoints.validate_name(request.run_name)
    train_config = request.train
    if train_config.steps > limits.max_steps:
        raise ConfigError(f"steps {train_config.steps} is above this server's limit of {limits.max_steps}")
    unknown = sorted(set(request.model) - set(MODEL_FIELDS))
    if unknown:
        raise ConfigError(f"unknown model setting(s): {', '.join(unknown)}")
    context_size = request.model.get("context_size", 64)
    if isinstance(context_size, int) and context_size > limits.max_context_size:
        raise ConfigError(f"context_size {context_size} is above this server's limit of {limits.max_context_size}")
    device = pick_device(train_config.device)
    corpus = load_corpus(request.corpus_path, request.corpus_text)
    if len(corpus.text.encode("utf-8")) > limits.max_upload_bytes and corpus.source in ("text", "path") \
            and request.corpus_path and "tinyshakespeare" not in str(request.corpus_path):
        raise CorpusError(f"the corpus is larger than this server's limit of {limits.max_upload_bytes:,} bytes")
    start_step, history = 0, {}
    if request.resume:
        previous = checkpoints.load_checkpoint(name, directory=request.weights_dir)
        tokenizer = previous.tokenizer
        unknown_chars = tokenizer.find_unknown(corpus.text)
        if unknown_chars:
            missing = "".join(sorted({u.character for u in unknown_chars}))
            raise CorpusError(
                f"the corpus has {len(set(missing))} character(s) the resumed model lacks: {missing!r}"
            )
        model = previous.model
        config = previous.config
        start_step = previous.steps
        history = {k: list((previous.training or {}).get(k, [])) for k in ("train_loss", "val_loss")}
        if start_step >= train_config.steps:
            raise ConfigError(
                f"{name} has already done {start_step} steps; set steps above {start_step} to continue"
            )
    else:
        tokenizer = CharTokenizer.train_from_text(corpus.text)
        config = ModelConfig(vocabulary_size=tokenizer.vocabulary_size, **request.model)
        if config.parameter_count() > limits.max_parameters:
            raise ConfigError(
                f"the model would have {config.parameter_count():,} parameters; this server's limit is "
                f"{limits.max_parameters:,}"
            )
        torch.manual_seed(train_config.seed)
        model = GPT(config)
    ids = tokenizer.encode(corpus.text)
    train_ids, val_ids = split_train_val(ids)
    if len(val_ids) <= config.context_size:
        raise CorpusError(
            f"the corpus ({len(corpus.text):,} characters) is too short for context_size {config.context_size}: "
            f"its last 10% must hold more than {config.context_size} characters, so it needs at least "
            f"{10 * (config.context_size + 1):,}"
        )
    model.to(device)
    return PreparedRun(request, corpus, tokenizer, model, TokenIdsDataset(train_ids, config.context_size),
                       TokenIdsDataset(val_ids, config.context_size), device, start_step, history)


def training_record(run: PreparedRun, result: TrainResult, seconds_before: float = 0.0) -> dict[str, Any]:
    """What training.json holds."""
    return {
        "steps_done": result.steps_done,
        "steps_planned": run.request.train.steps,
        "train_loss": run.history.get("train_loss", []) + result.train_loss,
        "val_loss": run.history.get("val_loss", []) + result.val_loss,
        "tokens_per_second": round(result.tokens_per_second, 1),
        "wall_seconds": round(seconds_before + result.wall_seconds, 2),
        "eval_seconds": round(result.eval_seconds, 2),
        "corpus": {"name": run.corpus.name, "characters": len(run.corpus.text), "source": run.corpus.source},
        "device": describe(run.device),
        "seed": run.request.train.seed,
        "train_config": run.request.train.to_dict(),
        "stopped_early": result.stopped,
    }


@dataclass(frozen=True)
class ProbeSnapshot:
    """What a fixed probe sentence attended to at one step of a run."""

    step: int
    tokens: list[str]
    weights: torch.Tensor  # (layers, heads, T, T) on the CPU


def probe_attention(run: PreparedRun, text: str, step: int) -> ProbeSnapshot | None:
    """Every head's attention over ``text`` (the characters the vocabulary knows, cut to the context) now.

    None when the vocabulary knows none of them. The model's train/eval mode is left as it was.
    """
    text = "".join(c for c in text if not run.tokenizer.find_unknown(c))[: run.model.config.context_size]
    if not text:
        return None
    was_training = run.model.training
    run.model.eval()
    try:
        with torch.no_grad():
            ids = run.tokenizer.encode(text)[None].to(run.device)
            weights = run.model(ids, return_attention=True).attention_weights
    finally:
        run.model.train(was_training)
    return ProbeSnapshot(step, list(text), torch.stack([w[0] for w in weights]).float().cpu())


def run_training(run: PreparedRun, *, on_step: Callable[[int, StepMetrics], None] | None = None,
                 should_stop: Callable[[], bool] | None = None,
                 on_sample: Callable[[int, str], None] | None = None,
                 on_probe: Callable[[ProbeSnapshot], None] | None = None,
                 probe_text: str = PROBE_TEXT) -> TrainResult:
    """Train a prepared run, saving a checkpoint every ``checkpoint_interval`` steps and at the end.

    Reports through optional callbacks: ``on_step(step, metrics)`` after every step; ``on_sample(step, text)``
    every ``sample_interval`` steps (SAMPLE_CHARACTERS generated from the start text, seeded by the step);
    ``on_probe(snapshot)`` before the first step and after every evaluation (``probe_text``'s attention).
    """
    config = run.request.train
    name = checkpoints.validate_name(run.request.run_name)
    result = TrainResult(steps_done=run.start_step, stopped=False)  # train() keeps it up to date

    def save() -> None:
        checkpoints.save_checkpoint(run.model, run.tokenizer, name, directory=run.request.weights_dir,
                                    training=training_record(run, result))

    def probe(step: int) -> None:
        if on_probe is None:
            return
        snapshot = probe_attention(run, probe_text, step)
        if snapshot is not None:
            on_probe(snapshot)

    def step_callback(step: int, metrics: StepMetrics) -> None:
        if on_step is not None:
            on_step(step, metrics)
        if on_sample is not None and step % config.sample_interval == 0:
            on_sample(step, generate(run.model, run.tokenizer, "", max_new_tokens=SAMPLE_CHARACTERS, seed=step,
                                     top_k=None))
        if metrics.val_loss is not None:
            probe(step)
        if step % config.checkpoint_interval == 0 and step < config.steps:
            save()

    probe(run.start_step)
    train(run.model, config, run.train_data, run.val_data, on_step=step_callback, should_stop=should_stop,
          start_step=run.start_step, result=result)
    if result.steps_done > run.start_step:
        save()
    return result


def model_card(run: PreparedRun, result: TrainResult, command: str) -> str:
    """A model card (README.md) for a checkpoint trained by the CLI: what, how, how well."""
    config, train_config = run.model.config, run.request.train
    record = training_record(run, result)
    val = f"{result.val_loss[-1][1]:.4f}" if result.val_loss else "not measured"
    shape = (f"{config.layers_num} layers, {config.heads_num} heads, embedding {config.embedding_dim}, context "
             f"{config.context_size}, vocabulary {config.vocabulary_size}, dropout {config.dropout_rate}, "
             f"bias {config.use_bias}")
    schedule = (f"batch {train_config.batch_size}, learning rate {train_config.learning_rate}, warm-up "
                f"{train_config.warmup_steps}, cosine decay to {train_config.min_learning_rate_ratio}x")
    rows = [
        ("parameters", f"{run.model.parameter_count():,}"),
        ("shape", shape),
        ("corpus", f"{run.corpus.name}, {len(run.corpus.text):,} characters (first 90% trains, last 10% validates)"),
        ("steps", f"{result.steps_done} of {train_config.steps} ({schedule})"),
        ("validation loss", f"**{val}** (cross-entropy in nats, mean of {train_config.eval_batches} fixed batches "
                            "of the last-10% split)"),
        ("wall time", f"{record['wall_seconds']:.0f} s ({record['eval_seconds']:.0f} s of it evaluation)"),
        ("speed", f"{record['tokens_per_second']:,.0f} tokens/s"),
        ("device", record["device"]),
        ("seed", str(train_config.seed)),
    ]
    table = "\n".join(f"| {name} | {value} |" for name, value in rows)
    return (
        f"---\nlibrary_name: attention-playground\ntags: [character-level, gpt, attention-playground]\n---\n\n"
        f"# {run.request.run_name}\n\nA character-level GPT trained with Attention Playground's own CLI.\n\n"
        f"| | |\n| --- | --- |\n{table}\n\nTrained with:\n\n```bash\n{command}\n```\n\n"
        "Files: `config.json` (ModelConfig), `model.safetensors` (weights), `vocabulary.json` (the characters in ID "
        "order), `training.json` (loss curves and the figures above). Load with "
        "`playground.checkpoints.load_checkpoint`.\n"
    )
