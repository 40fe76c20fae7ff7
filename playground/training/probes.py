"""The attention of a probe sentence during a run: what the Train tab draws forming as the model learns.

``probe_attention(run, text, step)`` takes any prepared run (``requests.PreparedRun``: its model, tokenizer, device and
corpus) and returns every head's weights over the characters of ``text`` the run's vocabulary knows.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.model.base import run_with_cache
from playground.training.requests import PreparedRun

PROBE_TEXT = "ROMEO:\nBut soft, what light through yonder window breaks?"


@dataclass(frozen=True)
class ProbeSnapshot:
    """What a fixed probe sentence attended to at one step of a run."""

    step: int
    tokens: list[str]
    weights: torch.Tensor  # (layers, heads, T, T) on the CPU
    left_out: str = ""  # the probe's characters the run's vocabulary lacks, each once, in the order they came
    # every head's pattern scores then (head_forming.snapshot_scores): {"step", pattern: [[per head] per layer]}
    scores: dict | None = None


def probe_attention(run: PreparedRun, text: str, step: int) -> ProbeSnapshot | None:
    """Every head's attention over ``text`` (the characters the vocabulary knows, cut to the context) now; the
    snapshot names the characters it left out.

    None when the vocabulary knows none of them. The model's train/eval mode is left as it was.
    """
    left_out = "".join(dict.fromkeys(u.character for u in run.tokenizer.find_unknown(text)))
    text = "".join(c for c in text if c not in left_out)[: run.model.config.context_size]
    if not text:
        return None
    ids = run.tokenizer.encode(text)[None].to(run.device)
    _, points = run_with_cache(run.model, ids, {"attn.hook_pattern"})  # any family, every layer's weights
    weights = [points[f"blocks.{layer}.attn.hook_pattern"] for layer in range(run.model.config.layers_num)]
    return ProbeSnapshot(step, list(text), torch.stack([w[0] for w in weights]).float().cpu(), left_out)


def probe_text_for(run: PreparedRun) -> str:
    """The sentence a run's attention is probed on: PROBE_TEXT, unless the run's vocabulary lacks most of its
    characters (notebook 004's "hello world" knows none of "ROMEO:" and few of the rest), then the opening
    ``context_size`` characters of the run's own text ("hello wo")."""
    if 2 * len(run.tokenizer.find_unknown(PROBE_TEXT)) <= len(PROBE_TEXT):
        return PROBE_TEXT
    return run.corpus.text[: run.model.config.context_size]
