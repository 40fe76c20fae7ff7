"""Where a traced head's weights come from: a trained checkpoint, a seeded random head, the textbook presets.

Owns ``HeadInputs`` (what trace_head needs) and the functions that build it. A checkpoint head takes its
weights from the family's own head slicing (``head_projections``: GPT's fused qkv, the Llama family's q/k/v
projections, K and V those of the shared K/V head) and its x from the named point ``ln1.hook_normalized`` of its
layer, whichever the family; a rotary family adds its positions' angles. Knows nothing about lesson text, files or
the UI.

    journey_preset().trace().output[0] -> tensor([-0.4519, 0.2216])   (the book's CausalAttention)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from playground import checks
from playground.lens import circuits
from playground.lens.walkthrough.trace import HeadTrace, default_tokens, trace_head
from playground.model.base import run_with_cache
from playground.model.gpt import GPT
from playground.model.llama import rotary_cos_sin
from playground.text.tokenizer import escape_char


@dataclass(eq=False)
class HeadInputs:
    """What trace_head needs: x (T, C), weights (C, d_k), optional biases (d_k,) and token labels."""

    x: torch.Tensor  # (T, C)
    w_query: torch.Tensor  # (C, d_k)
    w_key: torch.Tensor  # (C, d_k)
    w_value: torch.Tensor  # (C, d_k)
    tokens: list[str]
    b_query: torch.Tensor | None = None  # (d_k,)
    b_key: torch.Tensor | None = None
    b_value: torch.Tensor | None = None
    description: str = ""
    head: str = ""  # which head of a model it is ("L3 H2", as the Why tab names it), named beside each stage
    rotation: tuple[torch.Tensor, torch.Tensor] | None = None  # (cos, sin) (T, d_k) each: a rotary head's angles
    rope_theta: float | None = None  # the base of those angles
    sharing: str = ""  # which K/V head it reads, shared with which query heads (a grouped model's)
    window: int | None = None  # Mistral's sliding window: each query sees at most this many keys, itself included

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for trace_head, mask_leak and mask_order_difference."""
        return {
            "x": self.x, "w_query": self.w_query, "w_key": self.w_key, "w_value": self.w_value,
            "tokens": list(self.tokens), "b_query": self.b_query, "b_key": self.b_key, "b_value": self.b_value,
            "rotation": self.rotation, "window": self.window,
        }

    def trace(self, **switches: Any) -> HeadTrace:
        """trace_head on these inputs; switches are scale, mask, temperature, mask_before_scaling."""
        return trace_head(**self.as_kwargs(), **switches)


# --------------------------------------------------------------------------- a trained checkpoint

def checkpoint_head_inputs(model: GPT, token_ids: torch.Tensor, layer: int, head: int,
                           tokens: list[str] | None = None) -> HeadInputs:
    """The real input of ``layer`` and head ``head``'s query/key/value weights (and biases) for token_ids.

    token_ids is a 1-D LongTensor of at most context_size IDs; tensors come back on the CPU in float32. Any family
    whose blocks keep the named points (GPT, the Llama family); a rotary one's angles come with them, and a grouped
    one's K and V are the shared K/V head's (``sharing`` says which).
    """
    config = model.config
    layer = checks.index(layer, "layer", config.layers_num, "layers")
    head = checks.index(head, "head", config.heads_num, "heads per layer")
    if not isinstance(token_ids, torch.Tensor) or token_ids.dim() != 1 or token_ids.is_floating_point():
        raise ValueError("token_ids must be a 1-D tensor of integer token IDs")
    T = token_ids.numel()
    if T == 0:
        raise ValueError("Type some text first: there are no tokens to trace")
    if T > config.context_size:
        raise ValueError(
            f"the sequence has {T} tokens but this model's context_size is {config.context_size}; "
            "shorten it (prepare_text truncates for you)"
        )
    low, high = int(token_ids.min()), int(token_ids.max())
    if low < 0 or high >= config.vocabulary_size:
        bad = low if low < 0 else high
        raise ValueError(f"token id {bad} is outside this model's vocabulary (0-{config.vocabulary_size - 1})")
    if tokens is None:
        tokens = [str(i) for i in token_ids.tolist()]

    parameter = next(model.parameters())
    _, cache = run_with_cache(model, token_ids.to(parameter.device)[None], {"ln1.hook_normalized"}, {layer},
                              stop_when_kept=True)  # the blocks above the layer are not run
    x = cache[f"blocks.{layer}.ln1.hook_normalized"][0]  # (T, C): the normed stream this layer's attention reads
    attention = model.blocks[layer].attn
    projections = attention.head_projections(head)  # W (C, d) x3, then b (d,) or None x3
    w_query, w_key, w_value, b_query, b_key, b_value = (
        None if tensor is None else tensor.detach().to("cpu", torch.float32) for tensor in projections
    )
    rotation = rope_theta = None
    if config.is_llama:  # positions enter as a rotation of q and k, not in x
        rope_theta = config.rope_theta
        rotation = rotary_cos_sin(torch.arange(T), config.head_size, rope_theta)  # (T, d) each, float32
    return HeadInputs(
        x.detach().to("cpu", torch.float32), w_query, w_key, w_value, list(tokens), b_query, b_key, b_value,
        description=f"layer {layer}, head {head} of the model, on {checks.count(T, 'token')}",
        head=circuits.head_name(layer, head), rotation=rotation, rope_theta=rope_theta,
        sharing=kv_sharing(config.heads_num, config.kv_heads, head).sentence if config.is_llama else "",
        window=config.sliding_window if config.is_llama else None,
    )


@dataclass(frozen=True)
class KVSharing:
    """Which K/V head a query head reads, and every query head that reads it (grouped-query attention)."""

    head: int
    kv_head: int
    sharers: tuple[int, ...]

    @property
    def sentence(self) -> str:
        """'query heads 0 and 1 read K/V head 0', or 'query head 2 reads K/V head 2 alone'."""
        if len(self.sharers) == 1:
            return f"query head {self.head} reads K/V head {self.kv_head} alone"
        names = ", ".join(str(h) for h in self.sharers[:-1]) + f" and {self.sharers[-1]}"
        return f"query heads {names} read K/V head {self.kv_head}"


def kv_sharing(heads_num: int, kv_heads: int, head: int) -> KVSharing:
    """Query head ``head`` of ``heads_num`` over ``kv_heads`` K/V heads reads K/V head head // (heads_num /
    kv_heads), as repeat_kv copies it: kv_sharing(4, 2, 1) -> K/V head 0, shared by query heads (0, 1)."""
    group = heads_num // kv_heads  # query heads per K/V head
    kv_head = head // group
    return KVSharing(head, kv_head, tuple(range(kv_head * group, (kv_head + 1) * group)))


def trace_checkpoint_head(model: GPT, token_ids: torch.Tensor, layer: int, head: int,
                          tokens: list[str] | None = None, **switches: Any) -> HeadTrace:
    """Trace a trained head: checkpoint_head_inputs(...).trace(**switches)."""
    return checkpoint_head_inputs(model, token_ids, layer, head, tokens).trace(**switches)


# --------------------------------------------------------------------------- a seeded random head

def random_head(text_or_length: str | int, embedding_dim: int, head_size: int, seed: int) -> HeadInputs:
    """Random embeddings and bias-free projections from ``torch.Generator().manual_seed(seed)``.

    A string gives one token per character ("cat" -> 3 tokens "c", "a", "t"); a number gives that many
    tokens t0, t1, .... Drawn in the order x (T, C), W_q, W_k, W_v (C, d_k); weights are N(0, 1/C) so q and k
    entries are about N(0, 1) and raw scores spread like √d_k, which is what scaling undoes.
    """
    if isinstance(text_or_length, str):
        if not text_or_length:
            raise ValueError("Type some text first")
        tokens = [escape_char(c) for c in text_or_length]
    else:
        tokens = default_tokens(checks.whole_number(text_or_length, "the number of tokens", 1))
    embedding_dim = checks.whole_number(embedding_dim, "embedding_dim", 1)
    head_size = checks.whole_number(head_size, "head_size", 1)
    seed = checks.whole_number(seed, "seed")
    generator = torch.Generator().manual_seed(seed)
    T, C, d = len(tokens), embedding_dim, head_size
    x = torch.randn(T, C, generator=generator)  # (T, C)
    w_query, w_key, w_value = (torch.randn(C, d, generator=generator) / math.sqrt(C) for _ in range(3))  # (C, d)
    return HeadInputs(x, w_query, w_key, w_value, tokens,
                      description=f"a random head (seed {seed}): {checks.count(T, 'token')}, C {C}, d_k {d}")


# --------------------------------------------------------------------------- the textbooks' heads

JOURNEY_TOKENS = ["Your", "journey", "starts", "with", "one", "step"]
JOURNEY_EMBEDDINGS = [
    [0.43, 0.15, 0.89],  # Your
    [0.55, 0.87, 0.66],  # journey
    [0.57, 0.85, 0.64],  # starts
    [0.22, 0.58, 0.33],  # with
    [0.77, 0.25, 0.10],  # one
    [0.05, 0.80, 0.55],  # step
]


def journey_preset(seed: int = 123) -> HeadInputs:
    """The book's "Your journey starts with one step": six 3-d embeddings, d_out 2.

    ``torch.manual_seed(seed)`` then ``nn.Linear(3, 2, bias=False)`` for query, key, value in that order
    (W = linear.weight.T). Seed 123 is the book's CausalAttention: with the mask on, output row 0 is
    [-0.4519, 0.2216]. Seed 789 is the book's SelfAttention_v2: with the mask off, row 0 is [-0.0739, 0.0713].
    The global RNG state is restored afterwards.
    """
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        query, key, value = (nn.Linear(3, 2, bias=False) for _ in range(3))
    finally:
        torch.random.set_rng_state(state)
    x = torch.tensor(JOURNEY_EMBEDDINGS)  # (6, 3)
    w_query, w_key, w_value = (layer.weight.detach().T.contiguous() for layer in (query, key, value))  # (3, 2)
    return HeadInputs(x, w_query, w_key, w_value, list(JOURNEY_TOKENS),
                      description=f'"Your journey starts with one step", 3-d embeddings, d_out 2, seed {seed}')


def lab_preset(*, batch_size: int = 2, sequence_length: int = 4, embedding_dim: int = 8,
               head_size: int = 8) -> HeadInputs:
    """The lab notebook's head: batch element 0 of ``torch.randn(2, 4, 8)`` after ``torch.manual_seed(1337)``.

    Then ``nn.Linear(8, 8, bias=False)`` for key, query, value in that order (W = linear.weight.T); tokens
    t0..t3. The sizes are parameters so the same draw order gives other notebooks' heads: batch_size 4,
    sequence_length 8, embedding_dim 32, head_size 16 is "Let's build GPT" (its first version does not scale).
    The global RNG state is restored afterwards.
    """
    batch_size, sequence_length, embedding_dim, head_size = (
        checks.whole_number(value, name, 1)
        for name, value in (("batch_size", batch_size), ("sequence_length", sequence_length),
                            ("embedding_dim", embedding_dim), ("head_size", head_size))
    )
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(1337)
        x = torch.randn(batch_size, sequence_length, embedding_dim)  # (B, T, C)
        key, query, value = (nn.Linear(embedding_dim, head_size, bias=False) for _ in range(3))
    finally:
        torch.random.set_rng_state(state)
    w_query, w_key, w_value = (layer.weight.detach().T.contiguous() for layer in (query, key, value))  # (C, d)
    return HeadInputs(x[0], w_query, w_key, w_value, default_tokens(sequence_length),
                      description=(f"seed 1337, batch element 0 of randn({batch_size}, {sequence_length}, "
                                   f"{embedding_dim}), head_size {head_size}"))


@dataclass(frozen=True)
class TextbookPreset:
    """A textbook's head by name; call it to build its HeadInputs."""

    build: Callable[[], HeadInputs]
    description: str

    def __call__(self) -> HeadInputs:
        return self.build()


TEXTBOOK_PRESETS: dict[str, TextbookPreset] = {
    "journey": TextbookPreset(journey_preset,
                              '"Your journey starts with one step", seed 123 (the book\'s CausalAttention)'),
    "journey_v2": TextbookPreset(lambda: journey_preset(789),
                                 '"Your journey starts with one step", seed 789 (the book\'s SelfAttention_v2)'),
    "lab": TextbookPreset(lab_preset, "Four random 8-d tokens, seed 1337, an 8-wide head (the lab notebook)"),
}
