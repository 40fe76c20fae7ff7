"""What a training run is before it trains: the request (plain values, from the Train tab or the CLI) and the run
prepared from it (corpus, tokenizer, model, data, device, a resumed run's history).

run.py prepares and trains runs; record.py and probes.py read a prepared run; the server keeps them. Kept apart
from run.py so those modules read the run without importing the module that runs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from playground.budget import Cost, MemoryBudget
from playground.config import TrainConfig
from playground.model.gpt import GPT
from playground.text.data import Corpus, TokenIdsDataset
from playground.text.tokenizer import CharTokenizer
from playground.training.optimizers import Optimizer
from playground.training.precision import PrecisionChoice


@dataclass(frozen=True)
class RunRequest:
    """Everything a training run needs, as plain values (what the Train tab and the CLI collect)."""

    run_name: str
    model: dict[str, Any]  # MODEL_FIELDS by name, e.g. TRAIN_PRESETS["tiny"].model.to_dict()
    train: TrainConfig
    corpus_path: str | None = None
    corpus_text: str | None = None
    resume: bool = False
    weights_dir: Path | None = None
    uploaded: bool = False  # corpus_text is an uploaded file (its label says so)
    corpus_name: str | None = None  # what to call the corpus (an upload's file name)
    command: str | None = None  # the command line that trains it: each checkpoint then carries a model card


@dataclass
class PreparedRun:
    """A run checked and ready for its first step; ``history`` holds a resumed checkpoint's loss curves.

    ``memory`` bytes are held in ``budget`` (where the server reserved them) until ``release_memory`` (the job
    manager calls it when the run ends, however it ends). ``record`` holds fields training.json keeps beside the
    run's own: a resumed run's that this module does not write, then what ``build_run`` was given.
    """

    request: RunRequest
    corpus: Corpus
    tokenizer: CharTokenizer
    model: GPT  # or architectures.NotebookLanguageModel (config.architecture "notebook_004")
    train_data: TokenIdsDataset
    val_data: TokenIdsDataset
    device: torch.device
    start_step: int
    history: dict[str, list] = field(default_factory=dict)
    step_seconds_before: float = 0.0  # a resumed run's earlier seconds of training steps: its time budget's clock
    optimizer: Optimizer | None = None  # restored from the checkpoint on resume when it has one
    notes: list[str] = field(default_factory=list)  # what a learner should know before it starts (a cold resume)
    cost: Cost | None = None
    estimated_seconds: float = 0.0
    max_seconds: float | None = None  # the run stops and saves when its wall time passes this
    record: dict[str, Any] = field(default_factory=dict)
    memory: int = 0
    budget: MemoryBudget | None = None
    held_out: bool = True  # False: a text too short to hold out validation trains and validates on all of it
    precision: PrecisionChoice | None = None  # the forward's dtype and why (build_run measures "auto" on the model)
    head_scores: list[dict] = field(default_factory=list)  # this session's probe snapshots' scores (head_forming)

    def release_memory(self) -> None:
        """Give the run's reserved bytes back to the budget (once; later calls do nothing)."""
        held, self.memory = self.memory, 0
        if held and self.budget is not None:
            self.budget.release(held)
