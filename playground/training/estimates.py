"""What a training run costs before it starts: its time (``step_seconds``, calibrated on a 2-core CPU) and its
memory (budget.py's ``training_cost`` for a model config), what to lower when it does not fit, and the words the
Train tab and the job manager say durations in.

Pure arithmetic on shapes: nothing here builds a model or reads a file. The run (run.py) checks the device's free
memory with it; the server (server/admission.py) prices and admits every visitor's run with it.
"""

from __future__ import annotations

from typing import Any

import torch

from playground.budget import Cost, attention_is_explicit, available_memory, largest_batch, training_cost
from playground.config import ModelConfig, TrainConfig

# The time estimate, calibrated on a 2-core CPU with torch 2.13 (python benchmarks/train_speed.py and small runs):
# training sustains about 1.0e11 FLOP/s (6 per parameter per token, plus attention; the small preset's forward and
# backward, 49.6 GFLOP, take 0.50 s), and every step also pays a
# fixed cost for Python, kernel launches and the optimizer, about 0.6 ms plus 0.5 ms per layer. Muon adds its
# Newton–Schulz products (5 iterations on each block matrix, at the same FLOP/s); dropout adds its random masks: with
# torch's F.dropout about 14 ns per element masked on that machine (the shipped model's 0.82 s steps against 0.60 s
# without dropout), and dropout.py's masks cost two thirds of F.dropout's in a step (benchmarks/dropout_cost.py, same
# run: 3.7 against 5.6 ns per element), so 9 ns. The CUDA figures are a guess for a small GPU (T4-class, fp32), not a
# measurement: the cap is also enforced while a run goes.
CPU_FLOPS, CPU_STEP_OVERHEAD_S, CPU_LAYER_OVERHEAD_S = 1.0e11, 6e-4, 5e-4
CPU_DROPOUT_S_PER_ELEMENT = 9e-9
NEWTON_SCHULZ_STEPS = 5  # torch.optim.Muon's default, which configure_optimizer keeps
CUDA_FLOPS, CUDA_STEP_OVERHEAD_S, CUDA_LAYER_OVERHEAD_S = 4e12, 3e-3, 1e-3


def format_seconds(seconds: float | None) -> str:
    """42 -> '42s', 125 -> '2m 05s', 7260 -> '2h 01m'; None -> '–'."""
    if seconds is None:
        return "–"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m {seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def format_budget(seconds: float) -> str:
    """A time budget as the Train tab says it: 8 -> '8s', 0.5 -> '0.5s' (not format_seconds' '0s'), 150 -> '2m 30s'."""
    return f"{seconds:g}s" if seconds < 60 else format_seconds(seconds)


def step_seconds(config: ModelConfig, batch_size: int, device_type: str = "cpu", optimizer: str = "adamw") -> float:
    """A rough wall time of one training step (forward, backward, the optimizer; dropout if the config has it) for
    these shapes on this kind of device."""
    if device_type == "cuda":
        flops, fixed, per_layer = CUDA_FLOPS, CUDA_STEP_OVERHEAD_S, CUDA_LAYER_OVERHEAD_S
    else:  # MPS gets the CPU's figures: slower than it is, never faster
        flops, fixed, per_layer = CPU_FLOPS, CPU_STEP_OVERHEAD_S, CPU_LAYER_OVERHEAD_S
    tokens = batch_size * config.context_size
    flops_per_token = 6 * config.parameter_count() + 12 * config.layers_num * config.context_size * config.embedding_dim
    seconds = tokens * flops_per_token / flops + fixed + per_layer * config.layers_num
    if optimizer == "muon":
        seconds += _newton_schulz_flops(config) / flops
    if config.dropout_rate > 0 and device_type != "cuda":
        seconds += _dropout_elements(config, batch_size) * CPU_DROPOUT_S_PER_ELEMENT
    return seconds


def _newton_schulz_flops(config: ModelConfig) -> float:
    """Muon's orthogonalisation per step: per block matrix (m x n, m <= n) and iteration, 2m²n + m³ multiply-adds."""
    width = config.embedding_dim
    shapes = ((width, 3 * width), (width, width), (width, 4 * width), (width, 4 * width))  # qkv, proj, fc, proj
    per_block = sum(2 * m * m * n + m**3 for m, n in shapes)
    return 2 * NEWTON_SCHULZ_STEPS * per_block * config.layers_num


def _dropout_elements(config: ModelConfig, batch_size: int) -> int:
    """Elements masked per step: the embeddings, then in each block the attention weights, attention's output
    and the MLP's output."""
    tokens = batch_size * config.context_size
    per_block = batch_size * config.heads_num * config.context_size**2 + 2 * tokens * config.embedding_dim
    return tokens * config.embedding_dim + config.layers_num * per_block


def estimate_seconds(config: ModelConfig, batch_size: int, steps: int, device_type: str = "cpu",
                     optimizer: str = "adamw", time_budget_seconds: float = 0.0) -> float:
    """``steps`` of ``step_seconds``: the tiny preset's shape (2 layers, 128 wide, context 64, batch 32), 1200
    AdamW steps on a CPU -> about 70 s. A time budget (the seconds a run's steps have left of it) caps it."""
    seconds = steps * step_seconds(config, batch_size, device_type, optimizer)
    return min(seconds, time_budget_seconds) if time_budget_seconds > 0 else seconds


def where(device_type: str) -> str:
    """The device an estimate is for, in a sentence."""
    return "a 2-core CPU" if device_type != "cuda" else "a small GPU"


def _shapes(config: ModelConfig, device_type: str) -> dict[str, Any]:
    # notebook 004's heads always compute their (B, T, T) weights explicitly, as the notebook writes them
    return dict(parameters=config.parameter_count(), layers_num=config.layers_num, heads_num=config.heads_num,
                embedding_dim=config.embedding_dim, context_size=config.context_size,
                vocabulary_size=config.vocabulary_size,
                explicit_attention=attention_is_explicit(config.dropout_rate, device_type) or not config.is_gpt)


def memory_cost(config: ModelConfig, batch_size: int, device_type: str = "cpu") -> Cost:
    """budget.training_cost for a model of this shape trained ``batch_size`` windows at a time on ``device_type``
    (with dropout on a CPU its attention keeps (B, h, T, T) tensors)."""
    return training_cost(batch_size=batch_size, **_shapes(config, device_type))


def memory_advice(config: ModelConfig, batch_size: int, fits_bytes: int, device_type: str = "cpu") -> str:
    """What to lower, and to what, so a run fits ``fits_bytes``: 'lower batch_size to at most 87 (now 1024)'."""
    shapes = _shapes(config, device_type)
    largest = largest_batch(fits_bytes, **shapes)
    if largest >= 1:
        return f"lower batch_size to at most {largest:,} (now {batch_size:,})"
    if shapes["explicit_attention"]:
        return ("even batch_size 1 does not fit: lower context_size or heads_num, or set dropout_rate to 0 (with "
                "dropout a CPU keeps every layer's (batch, heads, context, context) attention for backward)")
    return "even batch_size 1 does not fit: lower context_size or embedding_dim"


def free_device_memory(device: torch.device) -> int | None:
    """Bytes free on a CUDA device now, or in the machine's memory for the CPU (budget.available_memory: a command
    line run has no server budget to hold it back); None for MPS and where it cannot be read."""
    if device.type == "cpu":
        return available_memory()
    if device.type != "cuda":
        return None
    free, _total = torch.cuda.mem_get_info(device)
    return int(free)



def budget_left(train_config: TrainConfig, step_seconds_before: float) -> float:
    """The seconds of training steps a run's time budget has left after ``step_seconds_before``; 0: no budget."""
    if train_config.time_budget_seconds <= 0:
        return 0.0
    return max(0.0, train_config.time_budget_seconds - step_seconds_before)


def passes_over_text(steps: float, batch_size: int, context_size: int, characters: int, processes: int = 1) -> float:
    """How many times a run reads its text: steps x windows per step x context_size tokens / the text's characters.

    Before a run, ``steps`` is what the run is expected to make: all of them, or under a time budget the ones that fit
    in it at step_seconds' pace, calibrated on a quiet 2-core CPU, so a busy or slower machine makes fewer (issue 52:
    the tiny preset said about 129 passes and the run made about 47). After it, training.json's ``passes_over_text``
    is this of the steps it made. 3,000 steps of 32 windows of 64 over 1,115,394 characters -> 5.5.
    """
    return steps * batch_size * processes * context_size / max(characters, 1)
