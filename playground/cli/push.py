"""The command line for publishing a run: ``python -m playground.push <run> <owner/name>``.

Owns argument parsing and printing: the repo's URL goes to stdout, a summary line to stderr, and bad input prints
``error: ...`` on stderr with exit code 2, never a traceback. The upload itself is ``hub.publish_checkpoint``
(huggingface_hub's upload API); finding the run is ``checkpoints.resolve``.

    python -m playground.push my-run learner/my-run            # a run in weights/ (or PLAYGROUND_WEIGHTS_DIR)
    python -m playground.push runs/tiny learner/tiny --private  # any checkpoint folder
Afterwards ``learner/my-run`` opens in every tab of any playground, typed where a checkpoint is chosen, and in
transformers (``AutoModelForCausalLM.from_pretrained("learner/my-run")``): it goes in GPT-2's layout (export.py).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from playground.checkpoints import hub
from playground.checkpoints import store as checkpoints
from playground.cli.usage import EXIT_USAGE, OneLineParser, UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m playground.push",
                           description="Publish a checkpoint folder, in GPT-2's layout (which transformers opens "
                                       "too), to a Hugging Face Hub model repo.")
    parser.add_argument("run", help="a checkpoint name in the weights folder, or a checkpoint folder's path")
    parser.add_argument("repo_id", help="the Hub repo to create or update, owner/name")
    parser.add_argument("--private", action="store_true", help="create the repo private (an existing repo keeps its "
                                                                "visibility)")
    parser.add_argument("--message", default=None, help="the commit message")
    parser.add_argument("--weights-dir", type=Path, default=None,
                        help="where named checkpoints live (default PLAYGROUND_WEIGHTS_DIR or weights/)")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    argv = list(argv) if argv is not None else sys.argv[1:]
    try:
        args = build_parser().parse_args(argv)
        folder = checkpoints.resolve(args.run, args.weights_dir)
        message = args.message or f"python -m playground.push {' '.join(shlex.quote(a) for a in argv)}"
        published = hub.publish_checkpoint(folder, args.repo_id, private=args.private, commit_message=message)
    except (UsageError, hub.HubError, checkpoints.CheckpointError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    layout = "GPT-2's layout" if published.layout == checkpoints.GPT2_LAYOUT else "the playground's own layout"
    print(f"published {folder} to {published.repo_id} in {layout} ({', '.join(published.files)}; commit "
          f"{published.commit[:12]}); type {published.repo_id} where a checkpoint is chosen to open it"
          + (f", or AutoModelForCausalLM.from_pretrained({published.repo_id!r}) in transformers"
             if published.layout == checkpoints.GPT2_LAYOUT else ""), file=err)
    if published.note:
        print(f"note: {published.note}", file=err)
    print(published.url, file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
