"""The command lines: argparse, progress and printing only; the library modules do the work.

    python -m playground.train ...    -> playground.cli.train.main   (the loop: train.py; the run: run.py)
    python -m playground.sample ...   -> playground.cli.sample.main  (decoding: sampling.py)
    python -m playground.convert ...  -> playground.cli.convert.main (nanoGPT's ckpt.pt -> a checkpoint: convert.py)
    python -m playground.export ...   -> playground.cli.export.main  (a checkpoint -> GPT-2's layout: export.py)
    python -m playground.push ...     -> playground.cli.push.main    (a checkpoint -> a Hub repo: hub.py)

usage.py: what they share about refusing input (one ``error:`` line, exit status 2).
"""
