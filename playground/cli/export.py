"""The command line for exporting a run in GPT-2's layout: ``python -m playground.export RUN DIR``.

Owns argument parsing and printing: the folder's path goes to stdout, what it holds and how to open it to stderr,
and bad input prints ``error: ...`` on stderr with exit code 2, never a traceback. The export itself is
playground/export.py; the key map gpt2.py's.

    python -m playground.export shakespeare-char out/shakespeare-gpt2
    python -m playground.export runs/tiny out/tiny --replace
Then ``AutoModelForCausalLM.from_pretrained("out/shakespeare-gpt2")`` opens it, and so does the playground.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from playground.checkpoints import store as checkpoints
from playground.checkpoints.export import ExportError, export_gpt2
from playground.checkpoints.hub import HubError
from playground.checkpoints.loading import open_checkpoint, opened_from
from playground.cli.usage import EXIT_USAGE, OneLineParser, UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m playground.export",
                           description="Write a checkpoint in Hugging Face's GPT-2 layout (a Llama-family model: in "
                                       "its own; config.json, model.safetensors, tokenizer.json), which transformers "
                                       "opens.")
    parser.add_argument("run", help="a checkpoint name in the weights folder, or a checkpoint folder's path")
    parser.add_argument("folder", type=Path, help="the folder to write (new, or empty; --replace to write over an "
                        "earlier export)")
    parser.add_argument("--weights-dir", type=Path, default=None,
                        help="where named checkpoints live (default PLAYGROUND_WEIGHTS_DIR or weights/)")
    parser.add_argument("--replace", action="store_true", help="write over an earlier export (only that: a folder "
                        "holding anything else is refused)")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        args = build_parser().parse_args(list(argv) if argv is not None else sys.argv[1:])
        checkpoint = open_checkpoint(args.run, directory=args.weights_dir, allow_folders=True)
        if note := opened_from(checkpoint, args.run):
            print(f"note: {note}", file=err)
        target = export_gpt2(checkpoint, args.folder, replace=args.replace, directory=args.weights_dir)
    except (UsageError, ExportError, checkpoints.CheckpointError, HubError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    files = ", ".join(sorted(p.name for p in target.iterdir()))
    layout = "the Llama family's layout" if checkpoint.config.is_llama else "GPT-2's layout"
    print(f"exported {checkpoint.name} in {layout} to {target} ({files}); open it with "
          f"AutoModelForCausalLM.from_pretrained({str(target)!r}) and AutoTokenizer.from_pretrained({str(target)!r}), "
          f"or here with --checkpoint {target}", file=err)
    print(target, file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
