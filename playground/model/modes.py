"""A model's train/eval mode around a piece of work that only reads it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch


@contextmanager
def evaluating(module: torch.nn.Module, no_grad: bool = True) -> Iterator[None]:
    """Eval mode (dropout off) inside, and no gradients unless ``no_grad`` is False; the module's own mode is
    restored afterwards, also when the work raises, so a training loop can sample or probe mid-run.

    ``no_grad=False`` is for a generator that yields to its caller inside (sampling): grad mode is the thread's,
    and a generator holding it off would hold it off for the caller too.
    """
    was_training = module.training
    module.eval()
    try:
        if no_grad:
            with torch.no_grad():
                yield
        else:
            yield
    finally:
        module.train(was_training)
