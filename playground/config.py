"""Typed configuration: the model's shape, the training settings, and the server's limits.

Owns validation and the JSON form of each config. Knows nothing about torch modules or the UI.
Every error names the field and the offending value, e.g.
``embedding_dim 770 is not divisible by heads_num 12``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, fields
from typing import Any

from playground.checks import MAX_SEED, real_number, shown, whole_number

# What trains the weights: "adamw" every parameter; "muon" the blocks' hidden matrices, with AdamW for the rest.
OPTIMIZER_CHOICES = ("adamw", "muon")
PRECISION_CHOICES = ("auto", "float32", "bfloat16")  # device.py resolves "auto"
# How the learning rate falls after the warm-up, to its floor: "cosine" (nanoGPT's) or "linear" (a straight line,
# which benchmarks/sweep.py found better for the tiny preset's minute: validation 1.642 against cosine's 1.656).
# "constant" keeps the rate where the warm-up left it, as notebook 004's loop keeps AdamW at 1e-3 for its 200 steps.
DECAY_CHOICES = ("cosine", "linear", "constant")
# The MLP's non-linearity: "gelu" the exact erf form (the playground's own models), "gelu_tanh" the tanh
# approximation GPT-2 was trained with (Hugging Face calls it gelu_new), "relu" the original Transformer's, "silu"
# the gate of the Llama family's SwiGLU MLP (silu(gate) * up).
ACTIVATION_CHOICES = ("gelu", "gelu_tanh", "relu", "silu")
# Which model a config builds (architectures.build_model): "gpt" the playground's GPT (model.py), every checkpoint's
# unless its config.json says otherwise; "notebook_004" notebook 004's attention-only SimpleLanguageModel (its heads
# each read their own slice of the embedding; no residual, norm or MLP), the toy preset's lab.
GPT_ARCHITECTURE, NOTEBOOK_004 = "gpt", "notebook_004"
ARCHITECTURE_CHOICES = (GPT_ARCHITECTURE, NOTEBOOK_004)
# Which blocks a model of architecture "gpt" has: "gpt" GPT-2's (learned positions, LayerNorm, a GELU MLP, one key and
# value head per query head: model.py); "llama" the Llama family's (llama.py): rotary positions, RMSNorm, the SwiGLU
# MLP, query heads sharing ``kv_heads_num`` key/value heads, optional q/k/v biases (Qwen2). Llama, SmolLM2, TinyLlama
# and Qwen2 are this family.
GPT_FAMILY, LLAMA_FAMILY = "gpt", "llama"
FAMILY_CHOICES = (GPT_FAMILY, LLAMA_FAMILY)
DEFAULT_ROPE_THETA = 10000.0  # the rotary base of Llama 1 and 2, transformers' default
# With a time budget the warm-up also ends once this share of the budget has passed: a short budget still decays,
# and the decay, which follows the clock from then on, starts within 2.5% of the full rate (cos(0.1 pi) = 0.95).
BUDGET_WARMUP_SHARE = 0.1


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field and value."""


def _check_whole(config: Any, name: str, minimum: int = 1, maximum: int | None = None) -> None:
    """Check (and normalise: 4.0 -> 4) a frozen config's whole-number field."""
    object.__setattr__(config, name, whole_number(getattr(config, name), name, minimum, maximum, error=ConfigError))


def _check_real(config: Any, name: str) -> None:
    object.__setattr__(config, name, real_number(getattr(config, name), name, error=ConfigError))


def _from_dict(cls, data: dict[str, Any]):
    if not isinstance(data, dict):
        raise ConfigError(f"{cls.__name__} expects a JSON object, got {type(data).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ConfigError(f"{cls.__name__} has no field(s) {', '.join(unknown)}")
    return cls(**data)


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a GPT-style model: the playground's character models, and GPT-2's family.

    ``head_size`` is derived: ``embedding_dim // heads_num`` (128 // 4 -> 32).
    The last three fields are what GPT-2 needs and default to what the playground's own checkpoints always were
    (exact GELU, LayerNorm epsilon 1e-5, a separate LM head); ``to_dict`` leaves them out at those defaults, so a
    character checkpoint's config.json reads as it always did. GPT-2: ``activation="gelu_tanh"``,
    ``use_bias=True``, ``tie_embeddings=True`` (the LM head is the token embedding, counted once, and has no bias).

    ``use_bias`` follows nanoGPT: biases in the blocks and the LayerNorms, none on the LM head (GPT-2's and
    nanoGPT's heads never have one, so every run exports in GPT-2's layout). ``head_bias`` is for the runs saved
    before that, whose untied head has a bias: a config.json without the field reads as they were written
    (``use_bias`` and an untied head -> a head bias), and ``to_dict`` writes the field wherever it differs from that.

    ``architecture`` (ARCHITECTURE_CHOICES, also left out of ``to_dict`` at its default "gpt") names the model the
    config builds. "notebook_004" is notebook 004's SimpleLanguageModel(vocabulary_size, context_size,
    embedding_dim, heads_num): one attention layer (layers_num 1), no dropout, no tied head; its ``proj`` and
    ``output`` have biases and it has no MLP or LayerNorm, so ``use_bias``, ``activation`` and ``layer_norm_eps``
    do not apply to it.

    ``family`` (FAMILY_CHOICES, default "gpt") says which blocks a model of architecture "gpt" has. "llama" builds
    llama.Llama: rotary positions (``rope_theta``, the base of their angles), RMSNorm (with ``layer_norm_eps`` as its
    eps), the SwiGLU MLP of width ``intermediate_size`` (``activation`` "silu"), ``kv_heads_num`` key/value heads each
    shared by heads_num / kv_heads_num query heads, and q/k/v biases where ``qkv_bias`` (Qwen2); no other bias
    (``use_bias`` false). SmolLM2-135M: embedding_dim 576, heads_num 9, kv_heads_num 3, intermediate_size 1536,
    rope_theta 1e5, tie_embeddings. ``sliding_window`` W (Mistral's; None: none) lets query i see key j only where
    j <= i and i - j < W, the W keys ending at its own. Those six fields keep their defaults in the GPT family (one
    K/V head per query head, an MLP 4 × embedding_dim wide, no window) and, like the GPT-2 fields, ``to_dict`` leaves
    them out at their defaults, so a config.json written before them reads as it always did.
    """

    vocabulary_size: int
    context_size: int = 64
    embedding_dim: int = 128
    heads_num: int = 4
    layers_num: int = 4
    dropout_rate: float = 0.0
    use_bias: bool = False
    activation: str = "gelu"  # one of ACTIVATION_CHOICES
    layer_norm_eps: float = 1e-5
    tie_embeddings: bool = False
    architecture: str = GPT_ARCHITECTURE  # one of ARCHITECTURE_CHOICES
    family: str = GPT_FAMILY  # one of FAMILY_CHOICES
    kv_heads_num: int | None = None  # None: heads_num (one key/value head per query head)
    rope_theta: float = DEFAULT_ROPE_THETA
    qkv_bias: bool = False
    intermediate_size: int | None = None  # None: 4 * embedding_dim
    sliding_window: int | None = None  # Mistral's W: query i sees key j iff j <= i and i - j < W; None: no window
    head_bias: bool = False  # a bias on an untied LM head: only runs saved before use_bias followed nanoGPT

    def __post_init__(self) -> None:
        for name in ("vocabulary_size", "context_size", "embedding_dim", "heads_num", "layers_num"):
            _check_whole(self, name)
        if self.embedding_dim % self.heads_num:
            raise ConfigError(
                f"embedding_dim {self.embedding_dim} is not divisible by heads_num {self.heads_num}"
            )
        _check_real(self, "dropout_rate")
        if not 0.0 <= self.dropout_rate < 1.0:
            raise ConfigError(f"dropout_rate must be in [0, 1), got {self.dropout_rate}")
        for name in ("use_bias", "tie_embeddings", "head_bias"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {shown(getattr(self, name))}")
        if self.head_bias and not (self.use_bias and not self.tie_embeddings):
            raise ConfigError("head_bias needs use_bias and an untied head (tie_embeddings false): a tied head is the "
                              "token embedding, and without use_bias nothing has a bias")
        if self.activation not in ACTIVATION_CHOICES:
            raise ConfigError(f"activation must be one of {', '.join(ACTIVATION_CHOICES)}, "
                              f"got {shown(self.activation)}")
        _check_real(self, "layer_norm_eps")
        if not 0 < self.layer_norm_eps < 1:
            raise ConfigError(f"layer_norm_eps must be in (0, 1), got {self.layer_norm_eps}")
        if self.architecture not in ARCHITECTURE_CHOICES:
            raise ConfigError(f"architecture must be {' or '.join(ARCHITECTURE_CHOICES)}, "
                              f"got {shown(self.architecture)}")
        if self.architecture == NOTEBOOK_004:
            if self.layers_num != 1:
                raise ConfigError(f"notebook 004's model has one attention layer: layers_num must be 1 for "
                                  f"architecture {NOTEBOOK_004}, got {self.layers_num}")
            if self.dropout_rate:
                raise ConfigError(f"notebook 004's model has no dropout: dropout_rate must be 0 for architecture "
                                  f"{NOTEBOOK_004}, got {self.dropout_rate}")
            if self.tie_embeddings:
                raise ConfigError(f"notebook 004's model has its own output layer: tie_embeddings must be false for "
                                  f"architecture {NOTEBOOK_004}")
        self._check_family()

    def _check_family(self) -> None:
        """The Llama family's fields: valid values in the family "llama", their defaults in any other model."""
        if self.family not in FAMILY_CHOICES:
            raise ConfigError(f"family must be {' or '.join(FAMILY_CHOICES)}, got {shown(self.family)}")
        if self.kv_heads_num is not None:
            _check_whole(self, "kv_heads_num")
        if self.intermediate_size is not None:
            _check_whole(self, "intermediate_size")
        if self.sliding_window is not None:
            _check_whole(self, "sliding_window")
        _check_real(self, "rope_theta")
        if not isinstance(self.qkv_bias, bool):
            raise ConfigError(f"qkv_bias must be true or false, got {shown(self.qkv_bias)}")
        if self.family != LLAMA_FAMILY:
            changed = [name for name, default in (("kv_heads_num", self.heads_num), ("rope_theta", DEFAULT_ROPE_THETA),
                                                  ("qkv_bias", False), ("intermediate_size", 4 * self.embedding_dim),
                                                  ("sliding_window", None))
                       if getattr(self, name) is not None and getattr(self, name) != default]
            if changed:
                raise ConfigError(f"{', '.join(changed)} belong{'s' * (len(changed) == 1)} to the family "
                                  f"{LLAMA_FAMILY} (rotary positions, grouped K/V heads, the SwiGLU MLP): set family "
                                  f"{LLAMA_FAMILY}, or leave {'them' if len(changed) > 1 else 'it'} out")
            return
        if self.architecture != GPT_ARCHITECTURE:
            raise ConfigError(f"family {LLAMA_FAMILY} is a model of blocks: its architecture must be "
                              f"{GPT_ARCHITECTURE}, got {shown(self.architecture)}")
        if self.heads_num % self.kv_heads:
            raise ConfigError(f"heads_num {self.heads_num} is not divisible by kv_heads_num {self.kv_heads}: each "
                              "key/value head is shared by the same number of query heads")
        if self.head_size % 2:
            raise ConfigError(f"head_size {self.head_size} (embedding_dim // heads_num) is odd: rotary positions turn "
                              "pairs of features")
        if not 0 < self.rope_theta < 1e12:
            raise ConfigError(f"rope_theta must be in (0, 1e12), got {self.rope_theta}")
        if self.use_bias:
            raise ConfigError(f"family {LLAMA_FAMILY} has no biases but on q, k and v: use_bias must be false (set "
                              "qkv_bias for those, as Qwen2 has)")
        if self.activation != "silu":
            raise ConfigError(f"family {LLAMA_FAMILY}'s MLP is SwiGLU, silu(gate) * up: activation must be silu, "
                              f"got {shown(self.activation)}")

    @property
    def head_size(self) -> int:
        return self.embedding_dim // self.heads_num

    @property
    def is_gpt(self) -> bool:
        """Whether this config builds the playground's GPT (blocks, per-layer attention the Model and Why views
        read), not notebook 004's attention-only model nor the Llama family."""
        return self.architecture == GPT_ARCHITECTURE and self.family == GPT_FAMILY

    @property
    def is_llama(self) -> bool:
        """Whether this config builds the Llama family's model (llama.py)."""
        return self.family == LLAMA_FAMILY

    @property
    def has_kv_cache(self) -> bool:
        """Whether sampling can keep a KV cache: the GPT's and the Llama family's can; notebook 004's model re-reads
        its window every step (the notebook's ``idx[:, -8:]``)."""
        return self.architecture == GPT_ARCHITECTURE

    @property
    def kv_heads(self) -> int:
        """Key/value heads per layer: ``kv_heads_num``, or heads_num when each query head has its own."""
        return self.kv_heads_num if self.kv_heads_num is not None else self.heads_num

    @property
    def mlp_width(self) -> int:
        """The MLP's hidden width: ``intermediate_size``, or 4 × embedding_dim (GPT's)."""
        return self.intermediate_size if self.intermediate_size is not None else 4 * self.embedding_dim

    def kv_cache_bytes_per_token(self, itemsize: int = 4) -> int:
        """Bytes a KV cache holds per token: keys and values, every layer's K/V heads. SmolLM2-135M in fp32: 2 × 30
        layers × 3 heads × 64 × 4 bytes = 46,080, a third of the 138,240 that one K/V head per query head takes."""
        return 2 * self.layers_num * self.kv_heads * self.head_size * itemsize

    def parameter_count(self) -> int:
        """Exact number of parameters of the model this config builds (``architectures.build_model``).

        notebook_004, vocabulary 8, context 8, embedding 16, 2 heads: embeddings 8·16 + 8·16, each head's key,
        query, value 3·8·8, proj 16·16 + 16, output 16·8 + 8 -> 1,048.
        """
        c, v, t, b = self.embedding_dim, self.vocabulary_size, self.context_size, self.use_bias
        if self.is_llama:  # no position embeddings; RMSNorm has a scale only; q, k, v biases with qkv_bias
            q, kv = self.heads_num * self.head_size, self.kv_heads * self.head_size
            attention = c * q + 2 * c * kv + q * c + ((q + 2 * kv) if self.qkv_bias else 0)
            block = 2 * c + attention + 3 * c * self.mlp_width
            return v * c + self.layers_num * block + c + (0 if self.tie_embeddings else c * v)
        if self.architecture == NOTEBOOK_004:
            return v * c + t * c + 3 * c * self.head_size + c * c + c + c * v + v
        layer_norm = 2 * c if b else c
        attention = 3 * c * c + c * c + (4 * c if b else 0)
        mlp = 4 * c * c * 2 + (5 * c if b else 0)
        block = 2 * layer_norm + attention + mlp
        head = 0 if self.tie_embeddings else c * v + (v if self.head_bias else 0)  # tied: the embedding, no new numbers
        return v * c + t * c + self.layers_num * block + layer_norm + head

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; the GPT-2 fields only where they differ from their defaults, ``head_bias`` only where it
        differs from what a config.json without it means (see the class docstring)."""
        data = dataclasses.asdict(self)
        for item in fields(self):
            if item.name in _OPTIONAL_FIELDS and data[item.name] == item.default:
                del data[item.name]
        if self.head_bias == _saved_head_bias(data):
            del data["head_bias"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        if isinstance(data, dict) and "head_bias" not in data:
            data = {**data, "head_bias": _saved_head_bias(data)}
        return _from_dict(cls, data)


def _saved_head_bias(data: dict[str, Any]) -> bool:
    """Whether a config.json without ``head_bias`` had one: use_bias with an untied head gave the head a bias
    before use_bias followed nanoGPT. {"use_bias": true} -> True; {"use_bias": true, "tie_embeddings": true} and
    {"use_bias": false} -> False."""
    return data.get("use_bias") is True and data.get("tie_embeddings", False) is False


_OPTIONAL_FIELDS = ("activation", "layer_norm_eps", "tie_embeddings", "architecture", "family", "kv_heads_num",
                    "rope_theta", "qkv_bias", "intermediate_size", "sliding_window")


@dataclass(frozen=True)
class TrainConfig:
    """How to train: optimisation, schedule, evaluation and checkpoint cadence."""

    batch_size: int = 32
    steps: int = 1000
    learning_rate: float = 3e-3
    warmup_steps: int = 50
    min_learning_rate_ratio: float = 0.1
    learning_rate_decay: str = "cosine"  # one of DECAY_CHOICES
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_interval: int = 100
    eval_batches: int = 20
    checkpoint_interval: int = 500
    sample_interval: int = 100
    seed: int = 1337
    device: str = "auto"
    optimizer: str = "adamw"  # one of OPTIMIZER_CHOICES; train.configure_optimizer builds it
    precision: str = "auto"  # one of PRECISION_CHOICES: the forward's autocast dtype (device.training_dtype)
    # 0: the run ends at ``steps``. Otherwise it also ends once its training steps have taken this many seconds
    # (evaluations, samples and checkpoints not counted), and the learning rate's decay follows whichever of the
    # two is further along: "whatever a minute buys" on any machine (see ``progress``).
    time_budget_seconds: float = 0.0
    # Steps between the probe snapshots a run records (the probe sentence's attention, every head's pattern scores:
    # head_forming.py), on top of one at each evaluation; 0: at the evaluations only.
    probe_interval: int = 0

    def __post_init__(self) -> None:
        for name in ("batch_size", "steps", "eval_interval", "eval_batches", "checkpoint_interval",
                     "sample_interval"):
            _check_whole(self, name)
        _check_whole(self, "warmup_steps", minimum=0)
        _check_whole(self, "probe_interval", minimum=0)
        _check_whole(self, "seed", minimum=0, maximum=MAX_SEED)
        for name in ("learning_rate", "min_learning_rate_ratio", "weight_decay", "grad_clip", "time_budget_seconds"):
            _check_real(self, name)
        if not 0 < self.learning_rate <= 1:
            raise ConfigError(f"learning_rate must be in (0, 1], got {self.learning_rate}")
        if not 0 <= self.min_learning_rate_ratio <= 1:
            raise ConfigError(f"min_learning_rate_ratio must be in [0, 1], got {self.min_learning_rate_ratio}")
        if self.weight_decay < 0:
            raise ConfigError(f"weight_decay must be >= 0, got {self.weight_decay}")
        if self.time_budget_seconds < 0:
            raise ConfigError(f"time_budget_seconds must be >= 0 (0: no time budget), got {self.time_budget_seconds}")
        if self.grad_clip < 0:
            raise ConfigError(f"grad_clip must be >= 0 (0 turns clipping off), got {self.grad_clip}")
        if self.device not in ("auto", "cpu", "cuda", "mps"):
            raise ConfigError(f"device must be auto, cpu, cuda or mps, got {shown(self.device)}")
        if self.learning_rate_decay not in DECAY_CHOICES:
            raise ConfigError(f"learning_rate_decay must be {', '.join(DECAY_CHOICES[:-1])} or {DECAY_CHOICES[-1]}, "
                              f"got {shown(self.learning_rate_decay)}")
        if self.optimizer not in OPTIMIZER_CHOICES:
            raise ConfigError(f"optimizer must be {' or '.join(OPTIMIZER_CHOICES)}, got {shown(self.optimizer)}")
        if self.precision not in PRECISION_CHOICES:
            raise ConfigError(f"precision must be {', '.join(PRECISION_CHOICES)}, got {shown(self.precision)}")

    def progress(self, step: int, seconds: float = 0.0) -> float:
        """How far through its schedule a run is after ``step`` steps and ``seconds`` of training steps, in [0, 1].

        The larger of ``step / steps`` and, with a time budget, ``seconds / time_budget_seconds``; the run ends at
        1. steps 1000, budget 60 s: step 300 at 30 s -> 0.5 (the clock leads); step 600 at 30 s -> 0.6.
        """
        done = step / self.steps
        if self.time_budget_seconds > 0:
            done = max(done, seconds / self.time_budget_seconds)
        return min(1.0, done)

    def learning_rate_at(self, step: int, seconds: float = 0.0) -> float:
        """Linear warm-up over ``warmup_steps``, then ``learning_rate_decay`` (cosine or linear) down to
        ``min_learning_rate_ratio * learning_rate``, or ("constant") ``learning_rate`` to the end.

        ``step`` counts from 0; with warmup 10 the rate at step 0 is lr/10 and at step 9 it is lr. Without a time
        budget the decay runs from step ``warmup_steps`` to ``steps``; with one, the further along of that and
        ``seconds / time_budget_seconds``, so a run that meets its budget first has decayed fully there: 1000 steps,
        warm-up 50, budget 60 s: step 100 at 30 s -> halfway. The warm-up then also ends at BUDGET_WARMUP_SHARE of
        the budget (a 4 s budget: after 0.4 s, however few steps that was).
        """
        warmed = 1.0 if step >= self.warmup_steps else (step + 1) / self.warmup_steps
        if self.time_budget_seconds > 0:
            warmed = max(warmed, seconds / (BUDGET_WARMUP_SHARE * self.time_budget_seconds))
        if warmed < 1.0:
            return self.learning_rate * warmed
        if self.learning_rate_decay == "constant":
            return self.learning_rate
        decay_steps = max(1, self.steps - self.warmup_steps)
        position = max(0.0, (step - self.warmup_steps) / decay_steps)
        if self.time_budget_seconds > 0:
            position = max(position, seconds / self.time_budget_seconds)
        position = min(1.0, position)
        floor = self.learning_rate * self.min_learning_rate_ratio
        left = 1.0 - position if self.learning_rate_decay == "linear" else 0.5 * (1 + math.cos(math.pi * position))
        return floor + left * (self.learning_rate - floor)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        return _from_dict(cls, data)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    text = raw.strip()
    if not text.lstrip("-").isdigit():  # "1e3" or "2.5" in a deployment's settings is a typo, not a number
        raise ConfigError(f"environment variable {name} must be a whole number, got {shown(raw)}")
    return whole_number(int(text), f"environment variable {name}", 1, error=ConfigError)


@dataclass(frozen=True)
class Limits:
    """Caps a public deployment sets through environment variables; the server enforces them.

    ``PLAYGROUND_MAX_TEXT_CHARS`` etc.; read when called, never at import time.
    """

    max_text_chars: int = 2000
    max_upload_bytes: int = 5_000_000  # a corpus .txt, pasted text, any request body
    max_model_upload_bytes: int = 32_000_000  # a nanoGPT ckpt.pt uploaded for conversion (weights + AdamW moments)
    max_parameters: int = 20_000_000
    max_steps: int = 20_000
    max_new_tokens: int = 2000
    max_context_size: int = 1024
    max_request_seconds: int = 60  # a request estimated to take longer (a timing sweep) is refused up front
    max_train_seconds: int = 3600  # one visitor run's wall time; the estimate is checked before it starts
    max_runs: int = 20  # visitor run folders kept in weights/; the oldest go first
    max_runs_bytes: int = 500_000_000  # and their bytes together
    max_runs_per_visitor: int = 5  # one visitor's runs: past it their own oldest go (as many as the curve overlay)
    run_keep_seconds: int = 3600  # a visitor's run is never removed for someone else's within this of its last save
    max_temp_bytes: int = 500_000_000  # Gradio's temp space (uploads, exports) together; the oldest go first
    forwarded_proxies: int = 1  # proxies that append to X-Forwarded-For in front of a Space: the client is the hop
    # the last of them appended (server/tenancy.client_address), never one the client sent

    @classmethod
    def from_env(cls) -> Limits:
        return cls(
            max_text_chars=_env_int("PLAYGROUND_MAX_TEXT_CHARS", cls.max_text_chars),
            max_upload_bytes=_env_int("PLAYGROUND_MAX_UPLOAD_BYTES", cls.max_upload_bytes),
            max_model_upload_bytes=_env_int("PLAYGROUND_MAX_MODEL_UPLOAD_BYTES", cls.max_model_upload_bytes),
            max_parameters=_env_int("PLAYGROUND_MAX_PARAMETERS", cls.max_parameters),
            max_steps=_env_int("PLAYGROUND_MAX_STEPS", cls.max_steps),
            max_new_tokens=_env_int("PLAYGROUND_MAX_NEW_TOKENS", cls.max_new_tokens),
            max_context_size=_env_int("PLAYGROUND_MAX_CONTEXT_SIZE", cls.max_context_size),
            max_request_seconds=_env_int("PLAYGROUND_MAX_REQUEST_SECONDS", cls.max_request_seconds),
            max_train_seconds=_env_int("PLAYGROUND_MAX_TRAIN_SECONDS", cls.max_train_seconds),
            max_runs=_env_int("PLAYGROUND_MAX_RUNS", cls.max_runs),
            max_runs_bytes=_env_int("PLAYGROUND_MAX_RUNS_BYTES", cls.max_runs_bytes),
            max_runs_per_visitor=_env_int("PLAYGROUND_MAX_RUNS_PER_VISITOR", cls.max_runs_per_visitor),
            run_keep_seconds=_env_int("PLAYGROUND_RUN_KEEP_SECONDS", cls.run_keep_seconds),
            max_temp_bytes=_env_int("PLAYGROUND_MAX_TEMP_BYTES", cls.max_temp_bytes),
            forwarded_proxies=_env_int("PLAYGROUND_FORWARDED_PROXIES", cls.forwarded_proxies),
        )
