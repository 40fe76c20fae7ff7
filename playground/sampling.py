"""Text generation from a trained GPT: temperature, top-k, top-p, greedy, a seed, and a KV cache.

Owns the decoding loop and the sampling distribution. Knows nothing about files or the UI.

Beyond the context window (learned positions stop at ``context_size``) the window slides:
without the cache every step re-reads the last ``context_size`` tokens (the nanoGPT way); with
the cache, once it is full it is rebuilt from the last ``context_size // 2`` tokens and decoding
continues from there, so each rebuild is paid once per ``context_size // 2`` new tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from playground.model import GPT, KVCache
from playground.tokenizer import CharTokenizer


@dataclass(frozen=True)
class SamplingSettings:
    max_new_tokens: int = 200
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    greedy: bool = False
    seed: int | None = 1337

    def __post_init__(self) -> None:
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or self.max_new_tokens < 0:
            raise ValueError(f"max_new_tokens must be a whole number >= 0, got {self.max_new_tokens!r}")
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)) \
                or not math.isfinite(self.temperature) or self.temperature <= 0:
            raise ValueError(f"temperature must be a finite number above 0, got {self.temperature!r}")
        if self.top_k is not None and (isinstance(self.top_k, bool) or not isinstance(self.top_k, int)
                                       or self.top_k < 1):
            raise ValueError(f"top_k must be a whole number >= 1 (or off), got {self.top_k!r}")
        if self.top_p is not None and (isinstance(self.top_p, bool) or not isinstance(self.top_p, (int, float))
                                       or not math.isfinite(self.top_p) or not 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1] (or off), got {self.top_p!r}")


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


def _prompt_ids(tokenizer: CharTokenizer, prompt: str) -> torch.Tensor:
    """The prompt's IDs; an empty prompt starts from a newline (or, lacking one, the first symbol)."""
    if prompt:
        return tokenizer.encode(prompt)
    start = "\n" if not tokenizer.find_unknown("\n") else tokenizer.characters[0]
    return tokenizer.encode(start)


@torch.no_grad()
def stream(model: GPT, tokenizer: CharTokenizer, prompt: str, settings: SamplingSettings,
           use_cache: bool = True) -> Iterator[GeneratedToken]:
    """Yield one GeneratedToken per new character. An empty prompt starts from a newline."""
    model.eval()
    device = next(model.parameters()).device
    context_size = model.config.context_size
    ids = _prompt_ids(tokenizer, prompt).tolist()
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
