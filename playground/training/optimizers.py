"""Several torch optimizers stepped as one (OptimizerChain), and which of a GPT's parameters Muon may take.

Muon orthogonalises each weight matrix's update (Newton–Schulz iterations), so it suits the 2-D matrices inside the
blocks (attention's qkv and proj, the MLP's fc and proj); the embeddings, the LM head, the LayerNorms and the biases
stay with AdamW. The loop sees one object either way: ``param_groups`` (every part's, so a learning-rate schedule
reaches them all), ``zero_grad`` and ``step``. Building the optimizers is train.configure_optimizer's; saving and
restoring their state is optimizer_state.py's (it walks ``optimizers``). Knows nothing about training or files.

    chain = OptimizerChain(torch.optim.Muon(hidden, ...), torch.optim.AdamW(rest, ...))
    optimizer_name(chain) -> "Muon+AdamW";  len(chain.param_groups) -> 1 + 2
"""

from __future__ import annotations

import math

import torch
from torch import nn


def hidden_matrices(model: nn.Module) -> list[torch.nn.Parameter]:
    """The 2-D weights inside the transformer blocks (``blocks.0.attn.qkv.weight``...): what Muon trains.

    Not the token or position embeddings, not the LM head (both 2-D, but they map symbols, not hidden features),
    not LayerNorm weights or biases (1-D).
    """
    return [parameter for name, parameter in model.named_parameters()
            if name.startswith("blocks.") and parameter.dim() == 2]


def newton_schulz(update: torch.Tensor, coefficients: tuple[float, float, float], steps: int, eps: float,
                  dtype: torch.dtype) -> torch.Tensor:
    """torch's Muon orthogonalisation (a quintic Newton–Schulz iteration) computed in ``dtype``: (A, B) -> (A, B).

    The same maths as ``torch.optim._muon._zeropower_via_newtonschulz``, which always uses bfloat16: cheap on a GPU,
    but on a CPU without native bfloat16 each matrix product is emulated and a Muon step took about 7x an AdamW
    step. In float32 the iteration is closer to exact, not further.
    """
    a, b, c = coefficients
    x = update.to(dtype)
    tall = update.size(0) > update.size(1)
    if tall:
        x = x.T  # (B, A): the Gram matrix is the smaller side's square
    x = x / x.norm().clamp(min=eps)  # spectral norm at most 1
    for _ in range(steps):
        gram = x @ x.T
        x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x.T if tall else x


def _adjusted_lr(lr: float, adjust_lr_fn: str | None, shape: torch.Size) -> float:
    """Muon's per-matrix learning rate, as torch scales it: "match_rms_adamw" -> lr * 0.2 * sqrt(max(A, B))."""
    rows, columns = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / columns))
    if adjust_lr_fn == "match_rms_adamw":
        return lr * 0.2 * math.sqrt(max(rows, columns))
    return lr


def newton_schulz_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on accelerators (torch's choice), float32 on the CPU (where bfloat16 products are emulated)."""
    return torch.float32 if device.type == "cpu" else torch.bfloat16


def newton_schulz_batched(updates: torch.Tensor, coefficients: tuple[float, float, float], steps: int,
                          eps: float) -> torch.Tensor:
    """newton_schulz for a stack of same-shaped wide matrices (n, A, B) with A <= B, in their own dtype.

    The same iteration, each matrix normalised by its own norm; one batched product per stage instead of one per
    matrix, which is what makes it cheaper on a CPU, where a block's small matrices each left cores idle.
    """
    a, b, c = coefficients
    x = updates / torch.linalg.matrix_norm(updates, keepdim=True).clamp(min=eps)
    for _ in range(steps):
        gram = x @ x.mT
        x = torch.baddbmm(x, torch.baddbmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
    return x


def _wide(matrix: torch.Tensor) -> torch.Tensor:
    """A matrix with no more rows than columns: itself, or its transpose (Newton–Schulz works on the smaller side)."""
    return matrix.T if matrix.size(0) > matrix.size(1) else matrix


class Muon(torch.optim.Muon):
    """``torch.optim.Muon``, same arguments, state and update, with the Newton–Schulz iterations in float32 on the CPU.

    On an accelerator it computes exactly what torch's does (bfloat16, one matrix at a time). On the CPU the matrices
    that share a shape (every block's qkv, say) are orthogonalised together (newton_schulz_batched). A saved state
    loads into either class.
    """

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, momentum = float(group["lr"]), group["momentum"]
            updates: dict[tuple, list[tuple[torch.nn.Parameter, torch.Tensor]]] = {}
            for param in group["params"]:
                if param.grad is None:
                    continue
                grad = param.grad
                state = self.state[param]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(grad, memory_format=torch.preserve_format)
                buffer = state["momentum_buffer"]
                buffer.lerp_(grad, 1 - momentum)
                update = grad.lerp(buffer, momentum) if group["nesterov"] else buffer
                dtype = newton_schulz_dtype(param.device)
                if dtype == torch.float32:  # the CPU: gathered by shape, orthogonalised together below
                    wide = _wide(update)
                    updates.setdefault((tuple(wide.shape), param.device), []).append((param, wide))
                    continue
                update = newton_schulz(update, group["ns_coefficients"], group["ns_steps"], group["eps"], dtype)
                self._apply(param, update, lr, group)
            for same_shape in updates.values():
                stacked = torch.stack([wide.float() for _, wide in same_shape])
                done = newton_schulz_batched(stacked, group["ns_coefficients"], group["ns_steps"], group["eps"])
                for (param, _), wide in zip(same_shape, done, strict=True):
                    self._apply(param, wide if wide.shape == param.shape else wide.T, lr, group)
        return loss

    @staticmethod
    def _apply(param: torch.nn.Parameter, update: torch.Tensor, lr: float, group: dict) -> None:
        """Decoupled weight decay, then the orthogonalised step at this matrix's adjusted learning rate."""
        param.mul_(1 - lr * group["weight_decay"])
        param.add_(update, alpha=-_adjusted_lr(lr, group["adjust_lr_fn"], param.shape))


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


Optimizer = torch.optim.Optimizer | OptimizerChain  # what the loop steps and optimizer_state saves


def parts(optimizer: Optimizer) -> tuple[torch.optim.Optimizer, ...]:
    """The torch optimizers inside ``optimizer``: a chain's parts, or the optimizer itself."""
    return optimizer.optimizers if isinstance(optimizer, OptimizerChain) else (optimizer,)


def optimizer_name(optimizer: Optimizer) -> str:
    """``"AdamW"`` for an AdamW, ``"Muon+AdamW"`` for a chain of a Muon and an AdamW."""
    return "+".join(type(part).__name__ for part in parts(optimizer))
