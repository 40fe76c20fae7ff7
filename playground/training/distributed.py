"""Training on several processes, on one machine or several, with DistributedDataParallel, launched by torchrun.

Owns reading torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK; torch itself reads MASTER_ADDR and
MASTER_PORT), starting and ending the process group (gloo on the CPU, NCCL on CUDA, where rank r uses
``cuda:LOCAL_RANK``), wrapping a model in DDP and the few collectives a run needs: the mean of the loss, whether
any rank asks to stop, the slowest rank's clock, every rank's digest of its weights. A plain process (no
WORLD_SIZE, or 1) is ``SINGLE``: nothing starts, nothing is wrapped, every collective is the value itself.

Knows nothing about the run: the CLI (cli/train.py) starts and ends the group, train.py's loop wraps the model and
averages through here, run.py lets only rank 0 evaluate, sample, save and report.

    torchrun --standalone --nproc_per_node=2 -m playground.train --device cpu   # 2 processes on this machine
    torchrun --nnodes=2 --node_rank=0 --nproc_per_node=4 --master_addr=host0 --master_port=29500 \\
        -m playground.train --preset gpu                                           # host0; --node_rank=1 on host1
"""

from __future__ import annotations

import datetime
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

TIMEOUT = datetime.timedelta(minutes=30)  # how long a rank waits for the others (rank 0 saving a checkpoint, say)


class DistributedError(RuntimeError):
    """torchrun's environment is unreadable, or the process group cannot start; the message says which."""


@dataclass(frozen=True)
class World:
    """Where this process sits: ``rank`` of ``world_size`` in all, ``local_rank`` of ``local_world_size`` on its
    own machine."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that evaluates, samples, saves and prints."""
        return self.rank == 0

    def launcher(self) -> str:
        """How this world was started: ``python``, ``torchrun --nproc_per_node=2``, ``torchrun --nnodes=2 ...``."""
        if not self.distributed:
            return "python"
        nodes = self.world_size // max(1, self.local_world_size)
        return "torchrun " + (f"--nnodes={nodes} " if nodes > 1 else "") + f"--nproc_per_node={self.local_world_size}"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> World:
        """The world torchrun describes in RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE; SINGLE without
        WORLD_SIZE."""
        environ = os.environ if environ is None else environ
        if not environ.get("WORLD_SIZE", "").strip():
            return SINGLE
        values = {}
        world_size = environ["WORLD_SIZE"]
        for name, default in (("WORLD_SIZE", None), ("RANK", None), ("LOCAL_RANK", "0"),
                              ("LOCAL_WORLD_SIZE", world_size)):
            raw = environ.get(name, default)
            if raw is None or not raw.strip().isdigit():
                raise DistributedError(f"environment variable {name} must be a whole number >= 0, got {raw!r} "
                                       "(torchrun sets it: torchrun --nproc_per_node=N -m playground.train)")
            values[name] = int(raw)
        world = cls(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"], values["LOCAL_WORLD_SIZE"])
        if world.world_size < 1 or not 0 <= world.rank < world.world_size:
            raise DistributedError(f"RANK {world.rank} must be in [0, WORLD_SIZE {world.world_size})")
        if not 0 <= world.local_rank < max(1, world.local_world_size) <= world.world_size:
            raise DistributedError(f"LOCAL_RANK {world.local_rank} must be in [0, LOCAL_WORLD_SIZE "
                                   f"{world.local_world_size}), and that at most WORLD_SIZE {world.world_size}")
        return world


SINGLE = World()


def start(world: World, device_type: str) -> None:
    """Join the process group of a distributed ``world`` (nothing for SINGLE): NCCL for CUDA, else gloo.

    A CUDA rank makes ``cuda:LOCAL_RANK`` its current device first, so ``torch.device("cuda")`` means its own GPU.
    """
    if not world.distributed:
        return
    backend = "gloo"
    if device_type == "cuda":
        if world.local_rank >= torch.cuda.device_count():
            raise DistributedError(f"LOCAL_RANK {world.local_rank} has no GPU: this machine has "
                                   f"{torch.cuda.device_count()}; lower --nproc_per_node")
        torch.cuda.set_device(world.local_rank)
        backend = "nccl"
    elif device_type != "cpu":
        raise DistributedError(f"training on several processes runs on cuda or cpu, not {device_type}: "
                               "pass --device cpu")
    dist.init_process_group(backend, rank=world.rank, world_size=world.world_size, timeout=TIMEOUT)


FINISH_WAIT = datetime.timedelta(seconds=60)  # how long a rank that is done waits for the others to be done too


def finish(world: World, together: bool = True) -> None:
    """Leave the process group, if this process joined one.

    ``together`` (the run ended well): first wait, up to FINISH_WAIT, until every rank is done. Rank 0 finishes
    last (it saves and prints); a rank that tore its group down and exited meanwhile made rank 0's gloo threads
    abort the process ("terminate called without an active exception", exit code -6) after a good run.
    """
    if not (world.distributed and dist.is_initialized()):
        return
    if together:
        try:
            if dist.get_backend() == "gloo":
                dist.monitored_barrier(timeout=FINISH_WAIT)
            else:
                dist.barrier()
        except RuntimeError:  # a rank that failed or left: leave anyway, the run's own exit code says what happened
            pass
    dist.destroy_process_group()


def wrap(model: nn.Module, world: World, device: torch.device) -> nn.Module:
    """``model`` in DDP for a distributed world (its gradients averaged over the ranks in backward), else itself.

    DDP starts every rank from rank 0's weights. Call the wrapper for training steps only; evaluate and sample
    with ``model`` itself, on one rank, without the others (the wrapper's forward expects every rank).
    """
    if not world.distributed:
        return model
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def mean(value: torch.Tensor, world: World) -> float:
    """A scalar tensor's mean over the ranks (the loss of the whole step), as a float; the value itself if SINGLE."""
    if not world.distributed:
        return value.item()
    total = value.detach().clone().float().reshape(1)
    dist.all_reduce(total)
    return total.item() / world.world_size


def any_rank(flag: bool, world: World, device: torch.device) -> bool:
    """Whether ``flag`` is true on any rank: every rank stops at the same step, or none does."""
    if not world.distributed:
        return flag
    value = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def largest(value: float, world: World, device: torch.device) -> float:
    """The largest of every rank's ``value`` (a time budget's clock: the slowest rank's); the value itself if SINGLE."""
    if not world.distributed:
        return value
    tensor = torch.tensor([value], dtype=torch.float64 if device.type == "cpu" else torch.float32, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return float(tensor.item())


def parameter_digest(model: nn.Module) -> str:
    """SHA-256 of every parameter's name, shape, dtype and bytes, in order: equal digests, bit-identical weights."""
    digest = hashlib.sha256()
    for name, parameter in model.named_parameters():
        tensor = parameter.detach().to("cpu").contiguous()
        digest.update(f"{name}{tuple(tensor.shape)}{tensor.dtype}".encode())
        digest.update(tensor.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def gather_digests(model: nn.Module, world: World, device: torch.device) -> list[str]:
    """Every rank's ``parameter_digest(model)``, in rank order (on every rank); one digest for SINGLE."""
    mine = parameter_digest(model)
    if not world.distributed:
        return [mine]
    local = torch.tensor(list(bytes.fromhex(mine)), dtype=torch.uint8, device=device)
    gathered = [torch.empty_like(local) for _ in range(world.world_size)]
    dist.all_gather(gathered, local)
    return [bytes(t.cpu().tolist()).hex() for t in gathered]
