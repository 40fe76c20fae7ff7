"""Text generation from a trained GPT: temperature, top-k, top-p, greedy, a seed, and a KV cache.

Owns the decoding loop, the sampling distribution and the one check of its settings (SamplingSettings).
Works through the tokenizer's interface (tokenizer.Tokenizer): one step draws one token (a character, or a BPE
piece whose text the tokenizer's stream decoder releases once its character is whole); an empty prompt starts
from the tokenizer's ``start_text``. Knows nothing about files, the UI or the command line.

Beyond the context window (learned positions stop at ``context_size``) the window slides:
without the cache every step re-reads the last ``context_size`` tokens (the nanoGPT way); with
the cache, once it is full it is rebuilt from the last ``context_size // 2`` tokens and decoding
continues from there, so each rebuild is paid once per ``context_size // 2`` new tokens. A slid key
would need a new position, so a cache cannot slide: past the context a cached draw reads between
``context_size // 2`` and ``context_size`` tokens where an uncached one reads ``context_size``, and the
two texts can part there (each GeneratedToken says how many it read). Within the context they agree. A model
without a cache (``config.has_kv_cache`` false: notebook 004's) always decodes the uncached way, the notebook's
``idx[:, -8:]``, whatever ``use_cache`` asks.

What a generation costs is known before it starts (``decoding_work``, ``sampling_seconds``, ``sampling_cost``):
the same loop as ``_decode`` counted in tokens and (query, key) pairs instead of run, priced at a rate
calibrated on a 2-core CPU.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from playground import checks
from playground.budget import Cost, inference_cost
from playground.config import Limits, ModelConfig
from playground.model.gpt import GPT, KVCache
from playground.model.modes import evaluating
from playground.text.tokenizer import Tokenizer


@dataclass(frozen=True)
class SamplingSettings:
    """How to draw each character; checked (and normalised: 40.0 -> 40) here, the one place for it.

    A refusal is a ValueError naming the field: ``top_p must be in (0, 1], got 1.5``. A temperature of 0 asks for
    greedy decoding (the usual convention): it sets ``greedy``, and the probabilities reported are the model's own
    (temperature 1), since a zero temperature has none but 0 and 1.
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
        if temperature < 0:
            raise ValueError(f"temperature must be at least 0 (0 is greedy decoding: the most likely character "
                             f"every time), got {temperature}")
        normalise("temperature", temperature)
        if temperature == 0:
            normalise("greedy", True)
        if self.top_k is not None:
            normalise("top_k", checks.whole_number(self.top_k, "top_k", 1))
        if self.top_p is not None:
            top_p = checks.real_number(self.top_p, "top_p")
            if not 0 < top_p <= 1:
                raise ValueError(f"top_p must be in (0, 1], got {top_p}")
            normalise("top_p", top_p)
        if self.seed is not None:
            normalise("seed", checks.seed(self.seed))

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
    text: str  # what it adds to the text: "" for a BPE piece of a character that the next piece completes
    probability: float  # the probability it was drawn with
    candidates: list[tuple[str, float]]  # top 10 of the distribution it was drawn from: (tokenizer.label, p)
    cache_length: int  # keys/values each layer holds after this step (0 without the cache)
    context_length: int  # tokens the model read to draw it: the last ones before it, the prompt's included
    cache_bytes: int = 0  # what the cache's key and value tensors take after this step (KVCache.bytes; 0 without)


def start_text(tokenizer: Tokenizer) -> str:
    """What an empty prompt starts from: a newline or the vocabulary's first symbol (characters), GPT-2's
    ``<|endoftext|>`` (BPE)."""
    return tokenizer.start_text


@torch.no_grad()
def stream(model: GPT, tokenizer: Tokenizer, prompt: str, settings: SamplingSettings,
           use_cache: bool = True) -> Iterator[GeneratedToken]:
    """Yield one GeneratedToken per new token; an empty prompt starts from ``start_text(tokenizer)``. ``use_cache``
    applies where the model has one (``model.config.has_kv_cache``).

    The model runs in eval mode while this generates and goes back to the mode it was in afterwards (also
    when the caller stops early or an error ends it), so a training loop can sample mid-run.
    """
    with evaluating(model, no_grad=False):
        yield from _decode(model, tokenizer, prompt or start_text(tokenizer), settings,
                           use_cache and model.config.has_kv_cache)


def _decode(model: GPT, tokenizer: Tokenizer, prompt: str, settings: SamplingSettings,
            use_cache: bool) -> Iterator[GeneratedToken]:
    device = next(model.parameters()).device
    context_size = model.config.context_size
    vocabulary_size = int(tokenizer.vocabulary_size)  # a padded embedding's extra rows are never drawn
    ids = tokenizer.encode(prompt).tolist()
    text = tokenizer.stream_decoder()
    generator = torch.Generator(device="cpu")
    if settings.seed is not None:
        generator.manual_seed(settings.seed)
    else:
        generator.seed()
    top_k = min(settings.top_k, tokenizer.vocabulary_size) if settings.top_k else None
    cache: KVCache | None = None
    pending: list[int] = []
    for step in range(settings.max_new_tokens):
        if use_cache:
            if cache is None or cache.length + len(pending) > context_size:
                keep = ids[-(rebuild_length(context_size) if cache is not None else context_size):]
                cache = KVCache.empty(model.config.layers_num)
                pending = keep
            step_input = torch.tensor([pending], device=device)
            logits = model(step_input, cache=cache).logits[0, -1]
        else:
            step_input = torch.tensor([ids[-context_size:]], device=device)
            logits = model(step_input).logits[0, -1]
        seen = cache.length if use_cache else step_input.size(1)
        probs = sampling_distribution(logits[:vocabulary_size].cpu(), settings.temperature or 1.0, top_k,
                                      settings.top_p)  # temperature 0 is greedy: its probabilities are the model's
        if settings.greedy:
            token = int(torch.argmax(probs))
        else:
            token = int(torch.multinomial(probs, 1, generator=generator))
        top = torch.topk(probs, min(10, probs.numel()))
        candidates = [(tokenizer.label(int(i)), float(p)) for p, i in zip(top.values, top.indices)]
        ids.append(token)
        pending = [token]
        yield GeneratedToken(token, text.step(token, final=step == settings.max_new_tokens - 1), float(probs[token]),
                             candidates, cache.length if cache is not None else 0, seen,
                             cache.bytes if cache is not None else 0)


def generate(model: GPT, tokenizer: Tokenizer, prompt: str, max_new_tokens: int = 200,
             temperature: float = 1.0, top_k: int | None = None, seed: int | None = 1337,
             top_p: float | None = None, greedy: bool = False, use_cache: bool = True) -> str:
    """The prompt's continuation (new text only)."""
    settings = SamplingSettings(max_new_tokens, temperature, top_k, top_p, greedy, seed)
    return "".join(t.text for t in stream(model, tokenizer, prompt, settings, use_cache))


# ------------------------------------------------------------------------------------------- what it costs

@dataclass(frozen=True)
class DecodingWork:
    """What ``stream`` computes for one request, counted before it runs.

    steps: forward passes (one per new character); tokens: positions run through the weights, summed over
    the steps; attention_pairs: (query, key) pairs each layer scores, summed over the steps.
    """

    steps: int
    tokens: int
    attention_pairs: int

    def flops(self, parameters: int, layers_num: int, embedding_dim: int) -> int:
        """2 per parameter per token (a multiply and an add), and 4 per channel per (query, key) pair and layer
        (q·k and the weighted sum of v)."""
        return 2 * parameters * self.tokens + 4 * layers_num * embedding_dim * self.attention_pairs


def rebuild_length(context_size: int) -> int:
    """How many tokens a full KV cache is rebuilt from: the last half of the context, at least one (a context of 1
    keeps its last token: ``ids[-0:]`` would keep them all)."""
    return max(1, context_size // 2)


def decoding_work(prompt_length: int, max_new_tokens: int, context_size: int, use_cache: bool) -> DecodingWork:
    """The tokens and (query, key) pairs of ``_decode``'s loop, counted without running it.

    Without the cache step i re-reads the last min(prompt + i, context) tokens, all against each other
    (causal: T·(T+1)/2 pairs); with it, step 0 reads the prompt, each later step one token against the cache,
    and a full cache is rebuilt from the last ``context_size // 2`` tokens (as ``_decode`` does)::

        prompt 4, 3 new tokens, context 16, no cache -> tokens 4+5+6 = 15, pairs 10+15+21 = 46
        the same with the cache                      -> tokens 4+1+1 = 6,  pairs 10+5+6 = 21
    """
    prompt_length = max(1, prompt_length)  # an empty prompt starts from start_text: one character
    tokens = pairs = 0
    if not use_cache:
        for step in range(max_new_tokens):
            read = min(prompt_length + step, context_size)
            tokens += read
            pairs += read * (read + 1) // 2
        return DecodingWork(max_new_tokens, tokens, pairs)
    cached, pending, known = 0, min(prompt_length, context_size), prompt_length
    for step in range(max_new_tokens):
        if step > 0 and cached + pending > context_size:
            cached, pending = 0, min(known, rebuild_length(context_size))
        tokens += pending
        pairs += pending * cached + pending * (pending + 1) // 2
        cached += pending
        pending, known = 1, known + 1
    return DecodingWork(max_new_tokens, tokens, pairs)


@dataclass(frozen=True)
class DecodingRate:
    """What a step costs on one kind of device: a fixed part (sampling, Python), a part per layer (a dozen small
    kernels each), and FLOP/s for the arithmetic."""

    seconds_per_step: float
    seconds_per_layer: float
    flops_per_second: float

    def seconds(self, work: DecodingWork, parameters: int, layers_num: int, embedding_dim: int) -> float:
        overhead = work.steps * (self.seconds_per_step + layers_num * self.seconds_per_layer)
        return overhead + work.flops(parameters, layers_num, embedding_dim) / self.flops_per_second


# Calibrated on the 2-core CPU the tests run on (benchmarks/sampling_speed.py prints the estimate beside what it
# measures). One thread's CPU time per step: 0.6 ms + 0.57 ms per layer (1 to 8 layers of width 32), and
# 37-50 GFLOP/s over a full window (13M parameters, context 1024); two threads on the machine shared four ways:
# 7-12 GFLOP/s. Kept conservative: about 2x that step overhead and 3 GFLOP/s. A GPU is priced as this CPU.
CPU_RATE = DecodingRate(seconds_per_step=2e-3, seconds_per_layer=1e-3, flops_per_second=3e9)


def sampling_seconds(config: ModelConfig, parameters: int, prompt_length: int, max_new_tokens: int,
                     use_cache: bool, rate: DecodingRate = CPU_RATE) -> float:
    """About how long ``stream`` takes for these shapes, in seconds (pessimistic by design)."""
    work = decoding_work(prompt_length, max_new_tokens, config.context_size, use_cache and config.has_kv_cache)
    return rate.seconds(work, parameters, config.layers_num, config.embedding_dim)


def most_new_tokens_within(seconds: float, config: ModelConfig, parameters: int, prompt_length: int,
                           use_cache: bool, upper: int, rate: DecodingRate = CPU_RATE) -> int:
    """The largest max_new_tokens (at most ``upper``) whose ``sampling_seconds`` is within ``seconds``; 0 if none."""
    low, high = 0, upper
    while low < high:  # the estimate grows with the number of new tokens
        middle = (low + high + 1) // 2
        if sampling_seconds(config, parameters, prompt_length, middle, use_cache, rate) <= seconds:
            low = middle
        else:
            high = middle - 1
    return low


def check_sampling_time(config: ModelConfig, parameters: int, prompt_length: int, settings: SamplingSettings,
                        use_cache: bool, limit_seconds: float, rate: DecodingRate = CPU_RATE, *,
                        token_name: str = "character") -> float:
    """The estimate in seconds, or a ValueError that says what to lower (and to what) to fit ``limit_seconds``.

    ``prompt_length`` counts tokens; ``token_name`` is what the message calls them (the tokenizer's).
    """
    estimate = sampling_seconds(config, parameters, prompt_length, settings.max_new_tokens, use_cache, rate)
    if estimate <= limit_seconds:
        return estimate
    fits = most_new_tokens_within(limit_seconds, config, parameters, prompt_length, use_cache,
                                  settings.max_new_tokens, rate)
    advice = [f"lower max_new_tokens to {fits} or fewer" if fits else "shorten the prompt"]
    if not use_cache and config.has_kv_cache:
        cached = sampling_seconds(config, parameters, prompt_length, settings.max_new_tokens, True, rate)
        if cached <= limit_seconds:
            advice.append(f"switch the KV cache on (about {math.ceil(cached)} s for all {settings.max_new_tokens})")
    raise ValueError(f"{settings.max_new_tokens} new {token_name}s {'with' if use_cache else 'without'} the KV cache "
                     f"would take about {math.ceil(estimate)} s on this server, over its limit of "
                     f"{limit_seconds:g} s per request (PLAYGROUND_MAX_REQUEST_SECONDS): " + ", or ".join(advice))


def sampling_cost(config: ModelConfig, parameters: int) -> Cost:
    """Peak memory while ``stream`` runs, with the KV cache or without it: one forward pass over a full window, a
    second copy of that window's logits (without the cache every token runs one; with it, each rebuild), plus a
    full KV cache. Without the second copy a vocabulary of 4096 at context 256 peaked at 21.3 MiB against 18.1."""
    forward = inference_cost(parameters=parameters, layers_num=config.layers_num, heads_num=config.heads_num,
                             embedding_dim=config.embedding_dim, context_size=config.context_size,
                             vocabulary_size=config.vocabulary_size)
    logits = ("the window's logits, again", 4 * config.context_size * config.vocabulary_size)
    cache = config.context_size * config.kv_cache_bytes_per_token()  # keys and values of its K/V heads, fp32
    if not config.has_kv_cache:
        return Cost("generating text", (*forward.parts, logits))
    return Cost("generating text", (*forward.parts, logits, ("KV cache", cache)))
