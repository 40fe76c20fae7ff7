"""The command line for bringing a nanoGPT checkpoint: ``python -m playground.convert ckpt.pt --meta meta.pkl ...``.

Owns argument parsing and printing: the saved folder's path goes to stdout, a summary line to stderr, and bad
input prints ``error: ...`` on stderr with exit code 2, never a traceback. The conversion itself lives in
playground/convert.py; writing the checkpoint in checkpoints.py.

    python -m playground.convert out/ckpt.pt --meta data/shakespeare_char/meta.pkl --name my-nanogpt
    python -m playground.convert out/ckpt.pt --characters-file chars.txt --name my-nanogpt --weights-dir /tmp/w
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from playground.checkpoints import store as checkpoints
from playground.checkpoints.nanogpt import ConversionError, convert_nanogpt
from playground.cli.usage import EXIT_USAGE, OneLineParser, UsageError, refuse_to_overwrite


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m playground.convert",
                           description="Convert a nanoGPT character-level checkpoint (out/ckpt.pt) into a playground "
                                       "checkpoint folder, once, without unpickling anything but tensors and plain "
                                       "data.")
    parser.add_argument("ckpt", type=Path, help="nanoGPT's checkpoint, e.g. out-shakespeare-char/ckpt.pt")
    vocabulary = parser.add_mutually_exclusive_group()
    vocabulary.add_argument("--meta", type=Path, default=None,
                            help="nanoGPT's data/<dataset>/meta.pkl (the character vocabulary)")
    vocabulary.add_argument("--characters-file", type=Path, default=None,
                            help="instead of --meta: a UTF-8 text file whose characters, in order, are IDs 0..V-1")
    parser.add_argument("--name", required=True, help="the checkpoint folder name, e.g. my-nanogpt")
    parser.add_argument("--weights-dir", type=Path, default=None,
                        help="where checkpoints go (default PLAYGROUND_WEIGHTS_DIR or weights/)")
    parser.add_argument("--max-parameters", type=int, default=None, help="refuse a model larger than this")
    parser.add_argument("--replace", action="store_true",
                        help="write over a checkpoint of this name (without it, an existing name is refused)")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    argv = list(argv) if argv is not None else sys.argv[1:]
    try:
        args = build_parser().parse_args(argv)
        command = "python -m playground.convert " + " ".join(shlex.quote(a) for a in argv)
        if not args.replace:
            refuse_to_overwrite(checkpoints.validate_name(args.name), args.weights_dir, "--name")
        target = convert_nanogpt(args.ckpt, args.name, meta_path=args.meta, characters_path=args.characters_file,
                                 directory=args.weights_dir, max_parameters=args.max_parameters, command=command)
        loaded = checkpoints.load_checkpoint(target)  # what every tab will do: prove it opens
    except (UsageError, ConversionError, checkpoints.CheckpointError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    config = loaded.config
    print(f"converted {args.ckpt} ({loaded.model.parameter_count():,} parameters, {config.layers_num} layers, "
          f"{config.heads_num} heads, embedding {config.embedding_dim}, context {config.context_size}, "
          f"vocabulary {config.vocabulary_size}); saved {target}", file=err)
    print(target, file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
