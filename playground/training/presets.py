"""Training presets: the starting values of a run (a model shape and a TrainConfig), by name.

Owns ``TRAIN_PRESETS`` and the shape a preset names before a corpus fixes the vocabulary. The Train tab's
preset dropdown and the CLI's ``--preset`` both read them; neither runs anything here. (The Attention tab's
textbook presets are a different thing: ``TEXTBOOK_PRESETS`` in playground/attention/trace.py.)

    TRAIN_PRESETS["tiny"].model.to_dict()  -> {"layers_num": 2, "heads_num": 3, "embedding_dim": 96, ...}
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from playground.config import GPT_ARCHITECTURE, GPT_FAMILY, LLAMA_FAMILY, NOTEBOOK_004, TrainConfig


@dataclass(frozen=True)
class ModelShape:
    """A model's shape before the corpus fixes its vocabulary: ModelConfig less ``vocabulary_size``."""

    layers_num: int
    heads_num: int
    embedding_dim: int
    context_size: int
    dropout_rate: float = 0.0
    use_bias: bool = False
    architecture: str = GPT_ARCHITECTURE  # config.ARCHITECTURE_CHOICES: the model it builds
    family: str = GPT_FAMILY  # config.FAMILY_CHOICES: "llama" builds rotary positions, RMSNorm, SwiGLU
    kv_heads_num: int | None = None  # the Llama family's key/value heads (None: one per query head)

    def to_dict(self) -> dict[str, Any]:
        """The ``model`` settings of a RunRequest."""
        return dataclasses.asdict(self)


MODEL_FIELDS = tuple(field.name for field in dataclasses.fields(ModelShape))
# Where each learning-rate decay ends, as a share of the rate, in every preset and in the Train tab (which offers the
# decay, not its floor): cosine to a tenth, as nanoGPT; linear to zero, as benchmarks/sweep.py found best for tiny;
# constant has no floor below the rate itself.
DECAY_FLOORS = {"cosine": 0.1, "linear": 0.0, "constant": 1.0}


@dataclass(frozen=True)
class TrainPreset:
    description: str  # what it costs, in the learner's words
    model: ModelShape
    train: TrainConfig


TRAIN_PRESETS: dict[str, TrainPreset] = {
    # Notebook 004's lab as the notebook runs it: SimpleLanguageModel(len(chars), block_size=8, n_embd=16, n_head=2),
    # torch's AdamW (learning rate 1e-3, weight decay 0.01) at a constant rate, batches of 4 windows of 8, 200 steps,
    # no gradient clipping, in float32; the notebook printed losses 2.18, 1.56, 0.87, 0.38 at steps 0, 50, 100, 150.
    "toy": TrainPreset(
        "notebook 004's toy lab: its attention-only model (2 heads, each on its own half of a 16-wide embedding), "
        "AdamW 1e-3, batches of 4 windows of 8, 200 steps; paste “hello world” as the notebook does; a few seconds",
        ModelShape(layers_num=1, heads_num=2, embedding_dim=16, context_size=8, architecture=NOTEBOOK_004),
        TrainConfig(batch_size=4, steps=200, learning_rate=1e-3, warmup_steps=0, learning_rate_decay="constant",
                    min_learning_rate_ratio=DECAY_FLOORS["constant"], weight_decay=0.01, grad_clip=0.0,
                    eval_interval=50, eval_batches=2, checkpoint_interval=200, sample_interval=50,
                    precision="float32", probe_interval=25),
    ),
    "tiny": TrainPreset(
        "about a minute on any machine: 50 s of training steps (a time budget, the learning rate's linear decay to "
        "zero sized to end then) or 3,000 steps, whichever comes first; Muon, and the shape, learning rate and decay "
        "benchmarks/sweep.py found best for that minute",
        ModelShape(layers_num=2, heads_num=3, embedding_dim=96, context_size=64),
        TrainConfig(batch_size=32, steps=3000, learning_rate=1.2e-2, warmup_steps=50, learning_rate_decay="linear",
                    min_learning_rate_ratio=DECAY_FLOORS["linear"], eval_interval=100, eval_batches=10,
                    checkpoint_interval=1000, sample_interval=200, optimizer="muon", time_budget_seconds=50.0,
                    probe_interval=25),  # a head turns from a smear to a stripe between steps 100 and 200
    ),
    # The tiny preset's minute and recipe on the Llama family's blocks (model/llama.py): rotary positions instead of
    # learned ones, 4 query heads over 2 key/value heads, RMSNorm, the SwiGLU MLP; the same width and context, so its
    # curve sits beside tiny's.
    "modern": TrainPreset(
        "the tiny preset's minute on the Llama family's blocks: rotary positions, 4 query heads sharing 2 key/value "
        "heads, RMSNorm and the SwiGLU MLP (as SmolLM2, Qwen2.5 and TinyLlama have them), Muon, 50 s of steps",
        ModelShape(layers_num=2, heads_num=4, embedding_dim=96, context_size=64, family=LLAMA_FAMILY,
                   kv_heads_num=2),
        TrainConfig(batch_size=32, steps=3000, learning_rate=1.2e-2, warmup_steps=50, learning_rate_decay="linear",
                    min_learning_rate_ratio=DECAY_FLOORS["linear"], eval_interval=100, eval_batches=10,
                    checkpoint_interval=1000, sample_interval=200, optimizer="muon", time_budget_seconds=50.0),
    ),
    "small": TrainPreset(
        "the shipped model's recipe for a quarter of its 8,000 steps: about half an hour on a slow 2-core CPU",
        ModelShape(layers_num=4, heads_num=4, embedding_dim=192, context_size=128, dropout_rate=0.1),
        TrainConfig(batch_size=32, steps=2000, learning_rate=3e-3, warmup_steps=100, eval_interval=250,
                    eval_batches=20, checkpoint_interval=1000, sample_interval=500, optimizer="muon"),
    ),
    "gpu": TrainPreset(
        "nanoGPT's Shakespeare-char shape, for a CUDA GPU",
        ModelShape(layers_num=6, heads_num=6, embedding_dim=384, context_size=256, dropout_rate=0.2),
        TrainConfig(batch_size=64, steps=5000, learning_rate=1e-3, warmup_steps=100, eval_interval=250,
                    eval_batches=20, checkpoint_interval=1000, sample_interval=500, device="cuda"),
    ),
}
