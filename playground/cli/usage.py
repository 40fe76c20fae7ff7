"""What the command lines share about refusing input: one ``error:`` line and exit status 2, never argparse's
usage dump. ``OneLineParser`` raises UsageError where argparse would print and exit; each ``main`` prints it."""

from __future__ import annotations

import argparse

EXIT_USAGE = 2


class UsageError(Exception):
    """Input the CLI refuses; its message becomes the ``error:`` line."""


class OneLineParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would print usage and exit; we want one error line
        raise UsageError(message)
