"""Which device computations run on: pick CUDA, then Apple MPS, then CPU, and describe it; and the dtypes a training
step's forward can run in there (precision.py measures which of them "auto" takes).

Probing happens when a function is called, never at import time.
"""

from __future__ import annotations

import torch

from playground.config import PRECISION_CHOICES

DEVICE_CHOICES = ("auto", "cuda", "mps", "cpu")


class DeviceError(ValueError):
    """The requested device does not exist on this machine."""


def _mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def available_devices() -> list[str]:
    """Device kinds usable here, best first, e.g. ``["cuda", "cpu"]``."""
    kinds = []
    if torch.cuda.is_available():
        kinds.append("cuda")
    if _mps_available():
        kinds.append("mps")
    kinds.append("cpu")
    return kinds


def offered_devices() -> list[str]:
    """A device box's choices: "auto" and the devices this machine has (a CPU-only Space offers no CUDA)."""
    return ["auto", *available_devices()]


def pick_device(prefer: str | None = None) -> torch.device:
    """Return ``prefer`` if this machine has it, the best available device for None/"auto".

    Raises DeviceError with a readable message for an unknown or unavailable device.
    """
    choice = (prefer or "auto").strip().lower()
    if choice not in DEVICE_CHOICES:
        raise DeviceError(f"unknown device {prefer!r}: choose one of {', '.join(DEVICE_CHOICES)}")
    kinds = available_devices()
    if choice == "auto":
        return torch.device(kinds[0])
    if choice not in kinds:
        raise DeviceError(
            f"device {choice!r} is not available on this machine (available: {', '.join(kinds)})"
        )
    return torch.device(choice)


def describe(device: torch.device | str) -> str:
    """A short label for the UI: "CUDA · NVIDIA H100", "Apple MPS" or "CPU · 2 threads"."""
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"CUDA · {torch.cuda.get_device_name(index)}"
    if device.type == "mps":
        return "Apple MPS"
    threads = torch.get_num_threads()
    return f"CPU · {threads} thread{'' if threads == 1 else 's'}"


def supported_dtypes(device: torch.device | str) -> list[str]:
    """Floating-point dtypes worth offering on ``device``: always fp32, bf16/fp16 where supported."""
    device = torch.device(device)
    names = ["float32", "bfloat16"]
    if device.type == "cuda":
        if not torch.cuda.is_bf16_supported():
            names.remove("bfloat16")
        names.append("float16")
    elif device.type == "mps":
        names.append("float16")
    return names


def training_dtype(device: torch.device | str, precision: str = "auto") -> torch.dtype:
    """The dtype a training step's forward runs in under autocast (the weights and the optimizer stay float32).

    "float32": no autocast. "bfloat16": bfloat16 autocast, refused where it cannot run. "auto": float32 until it is
    measured (precision.resolve_precision times the run's own model in both and takes the faster).
    """
    device = torch.device(device)
    if precision not in PRECISION_CHOICES:
        raise DeviceError(f"unknown precision {precision!r}: choose one of {', '.join(PRECISION_CHOICES)}")
    if precision == "bfloat16" and "bfloat16" not in supported_dtypes(device):
        raise DeviceError(f"bfloat16 is not supported on {describe(device)}: use float32")
    return torch.bfloat16 if precision == "bfloat16" else torch.float32


def describe_training(device: torch.device | str, dtype: torch.dtype = torch.float32) -> str:
    """describe(device), and the autocast a training step's forward uses there (``dtype``, a resolved precision):
    "CPU · 2 threads · bfloat16 autocast"."""
    return describe(device) + (" · bfloat16 autocast" if dtype == torch.bfloat16 else "")
