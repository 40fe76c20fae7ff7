"""The training loop: ``train(model, config, train_data, val_data, on_step=..., should_stop=...)``.

Owns the loop, the optimizer, evaluation and the figures of a run (StepMetrics, TrainResult). Knows nothing
about the UI, files or threads: it calls ``on_step(step, metrics)`` after every step and checks
``should_stop()`` before each (minGPT's callbacks). The batch of step ``s`` comes from a generator seeded with
``batch_seed(seed, s)``, so a run resumed at any step (with its optimizer state) draws the very batches an
uninterrupted one would and takes the very same steps (dropout masks excepted: they use torch's global
generator; and with a time budget, whose clock is the machine's, the learning rates and the last step differ
from run to run). The forward runs under bfloat16 autocast where ``TrainConfig.precision`` resolves to it
(precision.resolve_precision: "auto" times both on the model and takes the faster); the weights, gradients and
optimizer state stay float32. The run around it (corpus, tokenizer, checkpoints, samples, probes) lives in run.py,
presets in presets.py, the command line in cli/train.py.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from playground.config import NOTEBOOK_004, TrainConfig
from playground.model.gpt import GPT
from playground.text.data import TokenIdsDataset
from playground.training import distributed
from playground.training.distributed import SINGLE, World
from playground.training.optimizers import Muon, Optimizer, OptimizerChain, hidden_matrices
from playground.training.precision import resolve_precision


class TrainingError(RuntimeError):
    """Training cannot start or cannot go on; the message says why."""


@dataclass
class StepMetrics:
    step: int  # steps done so far, counting from 1
    steps: int
    train_loss: float
    learning_rate: float
    tokens_per_second: float
    elapsed_seconds: float
    val_loss: float | None = None
    progress: float = 0.0  # how far through its schedule the run is, in [0, 1] (TrainConfig.progress)


@dataclass
class TrainResult:
    steps_done: int
    stopped: bool
    train_loss: list[list[float]] = field(default_factory=list)  # [step, loss]
    val_loss: list[list[float]] = field(default_factory=list)
    val_seconds: list[list[float]] = field(default_factory=list)  # [step, wall seconds since this call began]
    tokens_per_second: float = 0.0
    wall_seconds: float = 0.0
    eval_seconds: float = 0.0
    stop_reason: str = ""  # why it stopped early, in the caller's words ("asked", "time limit"); "" if it did not
    processes: int = 1  # ranks that trained together (torchrun); each drew its own batch_size windows a step
    # Seconds spent in the training steps themselves (not evaluations or callbacks): what a time budget counts. A
    # resumed run's caller passes a result that starts from the earlier sessions' total.
    step_seconds: float = 0.0
    budget_reached: bool = False  # ended by TrainConfig.time_budget_seconds before config.steps


# Rank r's batch seeds sit r * 2**20 above rank 0's. torch's CPU generator keeps a seed's low 32 bits only, so they
# stay apart for up to 4096 ranks and runs shorter than 2**20 (about a million) steps.
RANK_STRIDE = 2**20


def batch_seed(seed: int, step: int, rank: int = 0) -> int:
    """The seed of step ``step``'s batch (steps count from 0) on ``rank``: one generator state per (seed, step, rank).

    Rank 0's are a single process's, so rank 0 of a distributed run draws the batches a plain run would.
    """
    return seed * 1_000_003 + step + rank * RANK_STRIDE


def configure_optimizer(model: GPT, config: TrainConfig, device: torch.device) -> Optimizer:
    """The optimizer ``config.optimizer`` names, over every parameter of ``model``.

    "adamw": AdamW with weight decay on matrices only (not biases, LayerNorms). "muon": torch's Muon
    (optimizers.Muon, whose Newton–Schulz runs in float32 on a CPU) on the blocks' hidden matrices
    (optimizers.hidden_matrices), its step scaled to AdamW's RMS (``match_rms_adamw``) so the same learning rate and
    weight decay fit, and AdamW as above on the rest (embeddings, LM head, norms, biases);
    the two come as one OptimizerChain.

    Notebook 004's lab (no blocks) gets the notebook's own line,
    ``torch.optim.AdamW(model.parameters(), lr=...)``: torch's betas (0.9, 0.999) and the weight decay on every
    parameter, so the toy preset takes the very steps the notebook's loop takes from the same batches.
    """
    if model.config.architecture == NOTEBOOK_004:
        return torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay)
    hidden = hidden_matrices(model) if config.optimizer == "muon" else []
    taken = {id(parameter) for parameter in hidden}
    rest = [parameter for parameter in model.parameters() if id(parameter) not in taken]
    groups = [{"params": [p for p in rest if p.dim() >= 2], "weight_decay": config.weight_decay},
              {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0}]
    fused = device.type in ("cuda", "cpu")
    adamw = torch.optim.AdamW(groups, lr=config.learning_rate, betas=(0.9, 0.99), fused=fused)
    if not hidden:
        return adamw
    muon = Muon(hidden, lr=config.learning_rate, weight_decay=config.weight_decay,
                            adjust_lr_fn="match_rms_adamw")
    return OptimizerChain(muon, adamw)


@torch.no_grad()
def evaluate(model: GPT, dataset: TokenIdsDataset, batches: int, batch_size: int, seed: int = 0) -> float:
    """Mean loss over ``batches`` fixed, seeded batches (the same windows every call)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(batches):
        x, y = dataset.random_batch(batch_size, generator)
        total += float(model(x.to(device), y.to(device)).loss)
    model.train(was_training)
    return total / batches


def train(model: GPT, config: TrainConfig, train_data: TokenIdsDataset, val_data: TokenIdsDataset | None = None,
          *, on_step: Callable[[int, StepMetrics], None] | None = None,
          should_stop: Callable[[], bool] | None = None, start_step: int = 0,
          result: TrainResult | None = None, optimizer: Optimizer | None = None,
          world: World = SINGLE) -> TrainResult:
    """Train ``model`` in place from ``start_step`` to ``config.steps``, or until its time budget is spent (the
    steps' own seconds, ``result.step_seconds``, reach ``config.time_budget_seconds``); leaves it in eval mode.

    Calls ``on_step(step, metrics)`` after every step (with ``val_loss`` set on evaluation steps) and
    stops early when ``should_stop()`` is true. Raises TrainingError if the loss stops being finite.
    The returned TrainResult is brought up to date after every step, before ``on_step`` runs: a caller
    that reads the run so far from its callbacks (run.py saves mid-run checkpoints from it) passes its
    own ``result=TrainResult(steps_done=start_step, stopped=False)``. A resumed run passes the ``optimizer`` it
    restored (configure_optimizer's, with the saved state); without one the loop makes a fresh one.

    In a distributed ``world`` (distributed.py, one process per rank) each rank draws its own batches
    (``batch_seed(seed, step, rank)``), steps a DDP wrapper of ``model`` that averages the gradients, and reports
    the loss averaged over the ranks; every rank stops at the same step. Evaluation runs ``model`` itself, not the
    wrapper, so a caller may give ``val_data`` to one rank only (run.py: rank 0) without the others waiting on it.
    With a time budget every rank follows the slowest rank's clock (distributed.largest), so their learning rates
    stay equal and they end at the same step.
    """
    device = next(model.parameters()).device
    if optimizer is None:
        optimizer = configure_optimizer(model, config, device)
    # the forward's; weights, gradients and optimizer stay float32. "auto" is measured once per process and shape
    dtype = resolve_precision(model, device, config.precision, config.batch_size).dtype
    if world.distributed and config.precision == "auto":  # measured apart: bfloat16 only if every rank found it faster
        dtype = torch.float32 if distributed.any_rank(dtype == torch.float32, world, device) else dtype
    network = distributed.wrap(model, world, device)  # model itself in a single process
    if world.distributed:  # dropout masks differ by rank too
        torch.manual_seed(batch_seed(config.seed, start_step, world.rank))
    generator = torch.Generator()
    if result is None:
        result = TrainResult(steps_done=start_step, stopped=False)
    result.processes = world.world_size
    tokens_per_step = config.batch_size * train_data.block_size * world.world_size
    budget = config.time_budget_seconds
    seconds = result.step_seconds  # the schedule's clock: the same on every rank
    network.train()
    started = time.perf_counter()
    for step in range(start_step, config.steps):
        if distributed.any_rank(should_stop is not None and should_stop(), world, device):
            result.stopped = True
            break
        step_started = time.perf_counter()
        lr = config.learning_rate_at(step, seconds)
        for group in optimizer.param_groups:
            group["lr"] = lr
        generator.manual_seed(batch_seed(config.seed, step, world.rank))
        x, y = train_data.random_batch(config.batch_size, generator)
        with torch.autocast(device.type, dtype=dtype, enabled=dtype != torch.float32):
            loss = network(x.to(device, non_blocking=True), y.to(device, non_blocking=True)).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP: the gradients come back averaged over the ranks
        if config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        loss_value = distributed.mean(loss, world)
        result.step_seconds += time.perf_counter() - step_started
        if budget > 0:  # every rank keeps the slowest rank's clock, so a resumed run's schedule goes on from it
            seconds = result.step_seconds = distributed.largest(result.step_seconds, world, device)
        done = step + 1
        last = done == config.steps or (budget > 0 and seconds >= budget)
        if not math.isfinite(loss_value):
            raise TrainingError(
                f"the loss became {loss_value} at step {done}; try a lower learning_rate "
                f"(now {config.learning_rate})"
            )
        result.steps_done = done
        result.train_loss.append([done, loss_value])
        train_seconds = time.perf_counter() - started - result.eval_seconds
        metrics = StepMetrics(done, config.steps, loss_value, lr,
                              (done - start_step) * tokens_per_step / max(train_seconds, 1e-9),
                              time.perf_counter() - started, progress=1.0 if last else config.progress(done, seconds))
        if val_data is not None and (done % config.eval_interval == 0 or last):
            eval_started = time.perf_counter()
            metrics.val_loss = evaluate(model, val_data, config.eval_batches, config.batch_size)
            result.eval_seconds += time.perf_counter() - eval_started
            result.val_loss.append([done, metrics.val_loss])
            result.val_seconds.append([done, round(time.perf_counter() - started, 3)])
        result.tokens_per_second = metrics.tokens_per_second
        result.wall_seconds = time.perf_counter() - started
        if on_step is not None:
            on_step(done, metrics)
        if last:
            result.budget_reached = done < config.steps
            break
    result.wall_seconds = time.perf_counter() - started
    train_seconds = max(result.wall_seconds - result.eval_seconds, 1e-9)
    result.tokens_per_second = (result.steps_done - start_step) * tokens_per_step / train_seconds
    model.eval()
    return result
