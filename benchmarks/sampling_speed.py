"""Tokens per second generating with the KV cache against without it (the nanoGPT way), in one run.

    python benchmarks/sampling_speed.py
    python benchmarks/sampling_speed.py --checkpoint runs/tiny --new-tokens 100 --repeats 1 --device cpu
    python benchmarks/sampling_speed.py --widen-context 256     # the shipped shape at context 256, random weights

The prompt is ``context - 1`` characters of the built-in corpus (those in the vocabulary), so both
paths start at a full context; then ``--new-tokens`` greedy steps. Without the cache every step
re-reads the last ``context_size`` tokens; with it each step feeds one token, and once the cache is
full it is rebuilt from the last ``context_size // 2`` tokens (a re-prefill, see sampling.py).
Prints the device, the median tokens/s of each path over the repeats, the ratio, how many
re-prefills happened, and whether both paths wrote the same text while it fit in the window; then
the time the server's estimate (sampling.sampling_seconds, which refuses requests over
PLAYGROUND_MAX_REQUEST_SECONDS) gives each path beside the measured median: it should stay above it.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from pathlib import Path

import torch

from playground.checkpoints.hub import HubError
from playground.checkpoints.loading import open_checkpoint
from playground.checkpoints.store import DEFAULT_CHECKPOINT, Checkpoint, CheckpointError
from playground.device import DeviceError, describe, pick_device
from playground.model.gpt import GPT
from playground.model.sampling import GeneratedToken, SamplingSettings, sampling_seconds, stream
from playground.text.data import builtin_corpus


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT, help="name, folder path or Hub id owner/name")
    parser.add_argument("--weights-dir", type=Path, default=None, help="where named checkpoints live")
    parser.add_argument("--new-tokens", type=int, default=500)
    parser.add_argument("--context", type=int, default=256, help="prompt length + 1 (capped at context_size)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda or mps")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's own)")
    parser.add_argument("--widen-context", type=int, default=None, metavar="N",
                        help="time a seeded random model of the checkpoint's shape with context_size N instead "
                             "(speed does not depend on the weights' values; the text is then gibberish)")
    args = parser.parse_args()
    for name in ("new_tokens", "context", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.context < 2:
        parser.error("--context must be at least 2 (the prompt is context - 1 characters)")
    if args.widen_context is not None and args.widen_context < 2:
        parser.error("--widen-context must be at least 2")
    return args


def widened(checkpoint: Checkpoint, context_size: int, device: torch.device) -> Checkpoint:
    """The checkpoint's shape and vocabulary with a longer context, randomly initialised (seed 0)."""
    config = dataclasses.replace(checkpoint.config, context_size=context_size)
    torch.manual_seed(0)
    model = GPT(config).to(device).eval()
    return dataclasses.replace(checkpoint, name=f"{checkpoint.name} (random weights, context {context_size})",
                               config=config, model=model)


def corpus_prompt(checkpoint: Checkpoint, length: int) -> str:
    """``length`` characters of the built-in corpus that the vocabulary knows, repeated if it is short."""
    known = set(checkpoint.tokenizer.characters)
    text = "".join(ch for ch in builtin_corpus().text if ch in known)
    if not text:
        raise SystemExit("error: the checkpoint's vocabulary shares no character with the built-in corpus")
    return (text * (length // len(text) + 1))[:length]


def timed_run(checkpoint: Checkpoint, prompt: str, new_tokens: int, use_cache: bool,
              device: torch.device) -> tuple[float, list[GeneratedToken]]:
    settings = SamplingSettings(max_new_tokens=new_tokens, greedy=True, seed=0)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    tokens = list(stream(checkpoint.model, checkpoint.tokenizer, prompt, settings, use_cache=use_cache))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start, tokens


def count_reprefills(tokens: list[GeneratedToken]) -> int:
    """Steps where the cache did not just grow by one: it was rebuilt from the last context_size // 2 tokens."""
    lengths = [t.cache_length for t in tokens]
    return sum(1 for before, after in zip(lengths, lengths[1:]) if after != before + 1)


def first_difference(a: str, b: str) -> int | None:
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def main() -> None:
    args = parse_args()
    try:
        device = pick_device(args.device)
    except DeviceError as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.threads:
        torch.set_num_threads(args.threads)  # before describe(), which reports the thread count
    try:
        checkpoint = open_checkpoint(args.checkpoint, directory=args.weights_dir, device=device, allow_folders=True)
    except (CheckpointError, HubError) as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.widen_context:
        checkpoint = widened(checkpoint, args.widen_context, device)
    config = checkpoint.config
    context = args.context
    if config.context_size < context:
        print(f"note: {checkpoint.name} has context_size {config.context_size}, smaller than --context {context}; "
              f"using {config.context_size}")
        context = config.context_size
    prompt = corpus_prompt(checkpoint, context - 1)
    in_window = config.context_size - len(prompt) + 1  # new tokens whose step still sees the whole text

    print(f"checkpoint  {checkpoint.name} · {config.layers_num} layers · {config.heads_num} heads · "
          f"embedding {config.embedding_dim} · context_size {config.context_size} · "
          f"{checkpoint.model.parameter_count() / 1e6:.2f} M parameters")
    print(f"device      {describe(device)}")
    print(f"workload    prompt of {len(prompt)} characters (built-in corpus), then {args.new_tokens} new tokens, "
          f"greedy, {args.repeats} repeat(s)")

    for use_cache in (True, False):  # warm-up: first calls pay for allocations and kernel selection
        timed_run(checkpoint, prompt, min(8, args.new_tokens), use_cache, device)
    seconds: dict[bool, list[float]] = {True: [], False: []}
    texts: dict[bool, str] = {}
    reprefills = 0
    for repeat in range(args.repeats):
        for use_cache in ((True, False) if repeat % 2 == 0 else (False, True)):
            elapsed, tokens = timed_run(checkpoint, prompt, args.new_tokens, use_cache, device)
            seconds[use_cache].append(elapsed)
            texts[use_cache] = "".join(t.text for t in tokens)
            if use_cache:
                reprefills = count_reprefills(tokens)

    rates = {mode: args.new_tokens / statistics.median(times) for mode, times in seconds.items()}
    runs = {mode: ", ".join(f"{args.new_tokens / s:.1f}" for s in times) for mode, times in seconds.items()}
    print(f"{'':28}tokens/s (median)   each run")
    print(f"{'with KV cache':28}{rates[True]:>17.1f}   {runs[True]}")
    print(f"{'without (context recomputed)':28}{rates[False]:>17.1f}   {runs[False]}")
    print(f"{'ratio cache / no cache':28}{rates[True] / rates[False]:>16.2f}x")
    for use_cache, name in ((True, "with KV cache"), (False, "without")):
        estimate = sampling_seconds(config, checkpoint.model.parameter_count(), len(prompt), args.new_tokens,
                                    use_cache)
        measured = statistics.median(seconds[use_cache])
        print(f"estimate {name:19}{estimate:>11.2f} s   measured {measured:.2f} s "
              f"({estimate / measured:.1f}x the measurement)")
    print(f"re-prefills: {reprefills} (cache rebuilt from the last {config.context_size // 2} tokens each time "
          f"it held {config.context_size})")

    cached, uncached = texts[True], texts[False]
    window = min(in_window, args.new_tokens)
    same_in_window = cached[:window] == uncached[:window]
    print(f"same text within the window (first {window} new tokens): {'yes' if same_in_window else 'NO'}")
    difference = first_difference(cached, uncached)
    if difference is None:
        print(f"whole text identical: yes ({len(cached)} new tokens)")
    else:
        print(f"whole text identical: no, first difference at new token {difference + 1} "
              "(beyond the window the cached path sees only the tokens since its last re-prefill)")


if __name__ == "__main__":
    main()
