"""Several torch optimizers stepped as one (OptimizerChain), and which of a GPT's parameters Muon may take.

Muon orthogonalises each weight matrix's update (Newton–Schulz iterations), so it suits the 2-D matrices inside the
blocks (attention's qkv and proj, the MLP's fc and proj); the embeddings, the LM head, the LayerNorms and the biases
stay with AdamW. The loop sees one object either way: ``param_groups`` (every part's, so a learning-rate schedule
reaches them all), ``zero_grad`` and ``step``. Building the optimizers is train.configure_optimizer's; saving and
restoring their state is optim_state.py's (it walks ``optimizers``). Knows nothing about training or files.

    chain = OptimizerChain(torch.optim.Muon(hidden, ...), torch.optim.AdamW(rest, ...))
    optimizer_name(chain) -> "Muon+AdamW";  len(chain.param_groups) -> 1 + 2
"""

from __future__ import annotations

import torch
from torch import nn


def hidden_matrices(model: nn.Module) -> list[torch.nn.Parameter]:
    """The 2-D weights inside the transformer blocks (``blocks.0.attn.qkv.weight``...): what Muon trains.

    Not the token or position embeddings, not the LM head (both 2-D, but they map symbols, not hidden features),
    not LayerNorm weights or biases (1-D).
    """
    return [parameter for name, parameter in model.named_parameters()
            if name.startswith("blocks.") and parameter.dim() == 2]


class OptimizerChain:
    """Optimizers over disjoint parameters, used as one: ``step`` and ``zero_grad`` go to each in turn.

    ``param_groups`` lists every part's groups (the same dicts, so setting ``group["lr"]`` reaches the part);
    ``optimizers`` are the parts, in order.
    """

    def __init__(self, *optimizers: torch.optim.Optimizer):
        if not optimizers:
            raise ValueError("an OptimizerChain needs at least one optimizer")
        seen: set[int] = set()
        for optimizer in optimizers:
            for group in optimizer.param_groups:
                for parameter in group["params"]:
                    if id(parameter) in seen:
                        raise ValueError("a parameter is in two of the chained optimizers; each may be in one only")
                    seen.add(id(parameter))
        self.optimizers = tuple(optimizers)

    @property
    def param_groups(self) -> list[dict]:
        return [group for optimizer in self.optimizers for group in optimizer.param_groups]

    def zero_grad(self, set_to_none: bool = True) -> None:
        for optimizer in self.optimizers:
            optimizer.zero_grad(set_to_none=set_to_none)

    def step(self) -> None:
        for optimizer in self.optimizers:
            optimizer.step()

    def __repr__(self) -> str:
        return f"OptimizerChain({', '.join(type(optimizer).__name__ for optimizer in self.optimizers)})"


Optimizer = torch.optim.Optimizer | OptimizerChain  # what the loop steps and optim_state saves


def parts(optimizer: Optimizer) -> tuple[torch.optim.Optimizer, ...]:
    """The torch optimizers inside ``optimizer``: a chain's parts, or the optimizer itself."""
    return optimizer.optimizers if isinstance(optimizer, OptimizerChain) else (optimizer,)


def optimizer_name(optimizer: Optimizer) -> str:
    """``"AdamW"`` for an AdamW, ``"Muon+AdamW"`` for a chain of a Muon and an AdamW."""
    return "+".join(type(part).__name__ for part in parts(optimizer))
