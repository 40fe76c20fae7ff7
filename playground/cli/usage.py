"""What the command lines share about refusing input: one ``error:`` line and exit status 2, never argparse's
usage dump. ``OneLineParser`` raises UsageError where argparse would print and exit; each ``main`` prints it."""

from __future__ import annotations

import argparse
from pathlib import Path

from playground.checkpoints import store as checkpoints

EXIT_USAGE = 2


class UsageError(Exception):
    """Input the CLI refuses; its message becomes the ``error:`` line."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit; we want one error line
        raise UsageError(message)


def refuse_to_overwrite(name: str, directory: Path | None, name_flag: str, other: str = "") -> None:
    """A command never writes over a checkpoint folder without ``--replace`` (the Train tab's "replace it" box):
    raises UsageError naming the folder, the flags that go on (``other``, e.g. "--resume to continue it"), and a
    free name."""
    if not checkpoints.exists(name, directory):
        return
    folder = checkpoints.weights_dir(directory) / name
    raise UsageError(f"{folder} already exists: pass {other + ' or ' if other else ''}--replace to start it over "
                     f"(what it holds is lost), or another {name_flag} such as "
                     f"{checkpoints.fresh_run_name(directory, name)}")
