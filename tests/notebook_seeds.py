"""The course notebooks' own code, read out of ../shared/seeds and run: every top-level ``class`` and ``def`` of a
notebook (code shown inside markdown fences is skipped), executed in one namespace per notebook with its ``print``
silenced. The notebooks are the specification the textbook classes are tested against.

    notebook("002")["MultiHeadAttention"](16, 4) -> the notebook's own class, built
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SEEDS = Path(__file__).resolve().parents[1].parent / "shared" / "seeds"
FENCE = re.compile(r"^\s*```")
DEFINITION = re.compile(r"^(class |def |@)")


def seed_file(number: str) -> Path:
    """The seed export of notebook ``number``; AssertionError (a failure, never a skip) when it is not there."""
    found = sorted(SEEDS.glob(f"{number}_*.txt"))
    assert len(found) == 1, f"notebook {number} not found in {SEEDS}: the tests expect ../shared/seeds beside the repo"
    return found[0]


def definitions(text: str) -> list[str]:
    """Each top-level class or function of a notebook export, decorators included, outside markdown fences."""
    blocks: list[list[str]] = []
    current: list[str] | None = None
    in_fence = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
            current = None
            continue
        if in_fence:
            continue
        if current is not None and (not line.strip() or line[0] in " \t"):
            current.append(line)
            continue
        if DEFINITION.match(line):
            if current is not None and current and current[-1].startswith("@"):
                current.append(line)  # the definition a decorator belongs to
                continue
            current = [line]
            blocks.append(current)
        else:
            current = None
    return ["\n".join(block).rstrip() + "\n" for block in blocks]


@functools.cache
def notebook(number: str) -> dict:
    """The namespace after running notebook ``number``'s definitions (torch, nn, F, math, Dataset at hand)."""
    namespace = {"torch": torch, "nn": nn, "F": F, "math": math, "Dataset": Dataset, "DataLoader": DataLoader,
                 "print": lambda *args, **kwargs: None}
    for source in definitions(seed_file(number).read_text(encoding="utf-8")):
        exec(compile(source, f"<notebook {number}>", "exec"), namespace)  # noqa: S102 - the course's own code
    return namespace
