"""The command line for sampling: ``python -m playground.sample --checkpoint NAME --prompt TEXT ...``.

Owns argument parsing, one-line errors and printing: the text goes to stdout as it is generated (the
prompt first, then each character, flushed), the figures (tokens/s, device, cache) go to stderr. Bad
input prints ``error: ...`` on stderr and exits with code 2, never a traceback. The settings are checked
by sampling.SamplingSettings (its messages name the flag here); decoding lives in sampling.py, loading in
loading.py / checkpoints.py / hub.py.

    python -m playground.sample --prompt "ROMEO:" --max-new-tokens 300 --temperature 0.8 --top-k 40
    python -m playground.sample --checkpoint owner/name --greedy --no-kv-cache
"""

from __future__ import annotations

if __name__ == "__main__":  # python -m playground.cli.sample: torch's native libraries read these once, as torch loads
    from playground.settings import apply_process_defaults

    apply_process_defaults()

import argparse
import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from playground.checkpoints.hub import HubError
from playground.checkpoints.loading import open_checkpoint, opened_from
from playground.checkpoints.store import DEFAULT_CHECKPOINT, Checkpoint, CheckpointError
from playground.cli.usage import EXIT_USAGE, OneLineParser, UsageError
from playground.config import Limits
from playground.device import DEVICE_CHOICES, DeviceError, describe, pick_device
from playground.model.sampling import SamplingSettings, rebuild_length, start_text, stream
from playground.text.tokenizer import UnknownCharacterError, escape_char


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m playground.sample", description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", default=DEFAULT_CHECKPOINT,
                        help="a checkpoint name in the weights folder, a folder path, or a Hub repo id owner/name "
                             f"(default {DEFAULT_CHECKPOINT})")
    parser.add_argument("--weights-dir", type=Path, default=None,
                        help="where named checkpoints live (default PLAYGROUND_WEIGHTS_DIR or weights/)")
    parser.add_argument("--revision", default=None, help="branch, tag or commit of a Hub checkpoint")
    parser.add_argument("--prompt", default="", help="text to continue (empty: start from a newline)")
    parser.add_argument("--drop-unknown", action="store_true",
                        help="drop prompt characters the vocabulary lacks instead of refusing the prompt")
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=1.0, help="0 means greedy (as --greedy)")
    parser.add_argument("--top-k", type=int, default=None)
    parser.add_argument("--top-p", type=float, default=None)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--greedy", action="store_true", help="always take the most likely character")
    parser.add_argument("--no-kv-cache", action="store_true",
                        help="recompute the whole context at every step instead of caching keys and values: past "
                             "the context, the sliding-window text nanoGPT's sample.py and transformers give")
    parser.add_argument("--device", default="auto", help=f"one of {', '.join(DEVICE_CHOICES)} (default auto)")
    return parser


def flag_message(message: str) -> str:
    """A SamplingSettings message with its field named as the flag: ``top_k must...`` -> ``--top-k must...``."""
    for field in dataclasses.fields(SamplingSettings):
        if message.startswith(field.name + " "):
            return "--" + field.name.replace("_", "-") + message[len(field.name):]
    return message


def settings_from_args(args: argparse.Namespace) -> SamplingSettings:
    """The flags as SamplingSettings, checked there and against PLAYGROUND_MAX_NEW_TOKENS."""
    try:
        settings = SamplingSettings(max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                    top_k=args.top_k, top_p=args.top_p, greedy=args.greedy, seed=args.seed)
        return settings.within(Limits.from_env())
    except ValueError as exc:
        raise UsageError(flag_message(str(exc))) from None


def clean_prompt(prompt: str, checkpoint: Checkpoint, drop_unknown: bool, err: TextIO) -> str:
    """The prompt, or an error naming each character the vocabulary lacks (or a note if dropped)."""
    unknown = checkpoint.tokenizer.find_unknown(prompt)
    if unknown:
        message = str(UnknownCharacterError(unknown))
        if not drop_unknown:
            raise UsageError(f"the prompt has {message}; {checkpoint.name} cannot read them "
                             "(pass --drop-unknown to drop them)")
        print(f"note: dropped {message}", file=err)
        positions = {u.position for u in unknown}
        prompt = "".join(ch for i, ch in enumerate(prompt) if i not in positions)
    start = start_text(checkpoint.tokenizer)
    if not prompt and start != "\n":
        print(f"note: the prompt is empty and {checkpoint.name}'s vocabulary has no newline; starting from "
              f"{escape_char(start)!r}, its first symbol", file=err)
    return prompt


def rebuild_note(rebuilt_at: list[int], context_size: int, unit: str = "character") -> str:
    """Where a cached draw went past the context, and what that may change: new tokens 57 and 89, context 64 ->
    "note: the KV cache was full at the context of 64 and was rebuilt from the last 32 before new token 57 (and 1
    time more) ..."."""
    more = len(rebuilt_at) - 1
    return (f"note: the KV cache was full at the context of {context_size} and was rebuilt from the last "
            f"{rebuild_length(context_size)} {unit}s before new {unit} {rebuilt_at[0]}"
            + (f" (and {more} time{'s' * (more != 1)} more)" if more else "")
            + f": from there this text may part from an uncached sliding window over the last {context_size} "
            f"(nanoGPT's sample.py, transformers); --no-kv-cache gives that text")


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    settings = settings_from_args(args)
    try:
        device = pick_device(args.device)
        checkpoint = open_checkpoint(args.checkpoint, directory=args.weights_dir, device=device,
                                     revision=args.revision, allow_folders=True)
    except (DeviceError, CheckpointError, HubError) as exc:
        raise UsageError(str(exc)) from None
    if note := opened_from(checkpoint, args.checkpoint):
        print(f"note: {note}", file=err)
    prompt = clean_prompt(args.prompt, checkpoint, args.drop_unknown, err)
    vocabulary_size = checkpoint.tokenizer.vocabulary_size
    if settings.top_k is not None and settings.top_k > vocabulary_size:
        print(f"note: --top-k {settings.top_k} is more than the {vocabulary_size} characters in the vocabulary; "
              f"using {vocabulary_size}", file=err)
        settings = dataclasses.replace(settings, top_k=vocabulary_size)
    use_cache = not args.no_kv_cache and checkpoint.config.has_kv_cache  # notebook 004's model has none
    start = time.perf_counter()
    out.write(prompt)
    out.flush()
    count, cache_length, rebuilt_at = 0, 0, []
    for token in stream(checkpoint.model, checkpoint.tokenizer, prompt, settings, use_cache=use_cache):
        out.write(token.text)
        out.flush()
        count += 1
        if token.cache_length < cache_length:  # the cache shrank: rebuilt from the last half before this token
            rebuilt_at.append(count)
        cache_length = token.cache_length
    out.write("\n")
    out.flush()
    if rebuilt_at:
        print(rebuild_note(rebuilt_at, checkpoint.config.context_size, checkpoint.tokenizer.token_name), file=err)
    seconds = time.perf_counter() - start
    rate = count / seconds if seconds > 0 else float("inf")
    how = "greedy" if settings.greedy else f"temperature {args.temperature:g}, seed {args.seed}"
    cache = "on" if use_cache else "off" if checkpoint.config.has_kv_cache else "none (this model has none)"
    print(f"{count} tokens in {seconds:.2f} s · {rate:.1f} tokens/s · {describe(device)} · "
          f"KV cache {cache} · {how} · {checkpoint.name} "
          f"(context {checkpoint.config.context_size})", file=err)
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        args = build_parser().parse_args(argv)
        return run(args, out, err)
    except UsageError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\ninterrupted", file=err)
        return 130


if __name__ == "__main__":
    sys.exit(main())
