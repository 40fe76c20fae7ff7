"""Text generation from a trained GPT: temperature, top-k, top-p, greedy, a seed, and a KV cache.

Owns the decoding loop, the sampling distribution, the one check of its settings (SamplingSettings) and
what an empty prompt starts from (``start_text``). Knows nothing about files, the UI or the command line.

Beyond the context window (learned positions stop at ``context_size``) the window slides:
without the cache every step re-reads the last ``context_size`` tokens (the nanoGPT way); with
the cache, once it is full it is rebuilt from the last ``context_size // 2`` tokens and decoding
continues from there, so each rebuild is paid once per ``context_size // 2`` new tokens.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from playground import checks
from playground.config import Limits
from playground.model import GPT, KVCache
from playground.tokenizer import CharTokenizer

MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class SamplingSettings:
    """How to draw each character; checked (and normalised: 40.0 -> 40) here, the one place for it.

    A refusal is a ValueError naming the field: ``top_p must be in (0, 1], got 1.5``.
    """

    max_new_tokens: int = 200
    temperature: float = 1.0
    top_k: int | None = None  # None: off
    top_p: float | None = None  # None: off
    greedy: bool = False
    seed: int | None = 1337  # None: a fresh random seed

    def __post_init__(self) -> None:
        def normalise(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        normalise("max_new_tokens", checks.whole_number(self.max_new_tokens, "max_new_tokens", 0))
        temperature = checks.real_number(self.temperature, "temperature")
        if temperature <= 0:
            raise ValueError(f"temperature must be above 0, got {temperature}; greedy decoding takes the most "
                             "likely character every time")
        normalise("temperature", temperature)
        if self.top_k is not None:
            normalise("top_k", checks.whole_number(self.top_k, "top_k", 1))
        if self.top_p is not None:
            top_p = checks.real_number(self.top_p, "top_p")
            if not 0 < top_p <= 1:
                raise ValueError(f"top_p must be in (0, 1], got {top_p}")
            normalise("top_p", top_p)
        if self.seed is not None:
            normalise("seed", checks.whole_number(self.seed, "seed", 0, MAX_SEED))

    def within(self, limits: Limits) -> SamplingSettings:
        """These settings, or a ValueError if they ask for more characters than ``limits`` allow."""
        if self.max_new_tokens > limits.max_new_tokens:
            raise ValueError(f"max_new_tokens must be at most {limits.max_new_tokens} (the limit "
                             f"PLAYGROUND_MAX_NEW_TOKENS sets), got {self.max_new_tokens}")
        return self


def sampling_distribution(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                          top_p: float | None = None) -> torch.Tensor:
    """Logits (..., V) -> probabilities after temperature, top-k and top-p.

    Tokens outside the kept set get exactly 0; the kept ones are renormalised to sum to 1.
    """
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = F.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs  # mass strictly before each token
        drop_sorted = before >= top_p  # keeps the smallest prefix whose mass reaches top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


@dataclass
class GeneratedToken:
    token_id: int
    text: str
    probability: float  # the probability it was drawn with
    candidates: list[tuple[str, float]]  # top 10 of the distribution it was drawn from
    cache_length: int  # keys/values each layer holds after this step (0 without the cache)


def start_text(tokenizer: CharTokenizer) -> str:
    """What an empty prompt starts from: a newline, or the vocabulary's first symbol if it has none."""
    return "\n" if not tokenizer.find_unknown("\n") else tokenizer.characters[0]


@torch.no_grad()
def stream(model: GPT, tokenizer: CharTokenizer, prompt: str, settings: SamplingSettings,
           use_cache: bool = True) -> Iterator[GeneratedToken]:
    """Yield one GeneratedToken per new character; an empty prompt starts from ``start_text(tokenizer)``.

    The model runs in eval mode while this generates and goes back to the mode it was in afterwards (also
    when the caller stops early or an error ends it), so a training loop can sample mid-run.
    """
    was_training = model.training
    model.eval()
    try:
        yield from _decode(model, tokenizer, prompt or start_text(tokenizer), settings, use_cache)
    finally:
        model.train(was_training)


def _decode(model: GPT, tokenizer: CharTokenizer, prompt: str, settings: SamplingSettings,
            use_cache: bool) -> Iterator[GeneratedToken]:
    device = next(model.parameters()).device
    context_size = model.config.context_size
    ids = tokenizer.encode(prompt).tolist()
    generator = torch.Generator(device="cpu")
    if settings.seed is not None:
        generator.manual_seed(settings.seed)
    else:
        generator.seed()
    top_k = min(settings.top_k, tokenizer.vocabulary_size) if settings.top_k else None
    cache: KVCache | None = None
    pending: list[int] = []
    for _ in range(settings.max_new_tokens):
        if use_cache:
            if cache is None or cache.length + len(pending) > context_size:
                keep = ids[-(context_size // 2 if cache is not None else context_size):]
                cache = KVCache.empty(model.config.layers_num)
                pending = keep
            step_input = torch.tensor([pending], device=device)
            logits = model(step_input, cache=cache).logits[0, -1]
        else:
            step_input = torch.tensor([ids[-context_size:]], device=device)
            logits = model(step_input).logits[0, -1]
        probs = sampling_distribution(logits.cpu(), settings.temperature, top_k, settings.top_p)
        if settings.greedy:
            token = int(torch.argmax(probs))
        else:
            token = int(torch.multinomial(probs, 1, generator=generator))
        top = torch.topk(probs, min(10, probs.numel()))
        candidates = [(tokenizer.characters[int(i)], float(p)) for p, i in zip(top.values, top.indices)]
        ids.append(token)
        pending = [token]
        yield GeneratedToken(token, tokenizer.characters[token], float(probs[token]), candidates,
                             cache.length if cache is not None else 0)


def generate(model: GPT, tokenizer: CharTokenizer, prompt: str, max_new_tokens: int = 200,
             temperature: float = 1.0, top_k: int | None = None, seed: int | None = 1337,
             top_p: float | None = None, greedy: bool = False, use_cache: bool = True) -> str:
    """The prompt's continuation (new characters only)."""
    settings = SamplingSettings(max_new_tokens, temperature, top_k, top_p, greedy, seed)
    return "".join(t.text for t in stream(model, tokenizer, prompt, settings, use_cache))
