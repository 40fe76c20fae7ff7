import pytest
import torch

from playground import device as device_module
from playground.device import DeviceError, describe, pick_device


def fake(monkeypatch, cuda: bool, mps: bool):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(device_module, "_mps_available", lambda: mps)


@pytest.mark.parametrize("cuda,mps,expected", [(True, True, "cuda"), (False, True, "mps"), (False, False, "cpu")])
def test_auto_prefers_cuda_then_mps_then_cpu(monkeypatch, cuda, mps, expected):
    fake(monkeypatch, cuda, mps)
    assert pick_device().type == expected
    assert pick_device("auto").type == expected


def test_explicit_choice_is_honoured_or_refused(monkeypatch):
    fake(monkeypatch, cuda=False, mps=True)
    assert pick_device("mps").type == "mps"
    assert pick_device("cpu").type == "cpu"
    with pytest.raises(DeviceError, match="device 'cuda' is not available on this machine \\(available: mps, cpu\\)"):
        pick_device("cuda")
    with pytest.raises(DeviceError, match="unknown device 'tpu'"):
        pick_device("tpu")


def test_descriptions(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "NVIDIA H100")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert describe(torch.device("cuda")) == "CUDA · NVIDIA H100"
    assert describe("mps") == "Apple MPS"
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    assert describe("cpu") == "CPU · 2 threads"
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    assert describe("cpu") == "CPU · 1 thread"


def test_an_asked_precision_is_its_dtype_and_auto_waits_for_its_measurement():
    """"auto" is no longer read from the CPU's flags (AVX-512 BF16 trained slower in bfloat16 than in float32 on an
    AMD EPYC): before precision.py measures it, it is float32."""
    assert device_module.training_dtype("cpu", "float32") == torch.float32
    assert device_module.training_dtype("cpu", "bfloat16") == torch.bfloat16  # asked for: emulated if need be
    assert device_module.training_dtype("cpu", "auto") == torch.float32
    assert device_module.describe_training("cpu", torch.bfloat16).endswith(" · bfloat16 autocast")
    assert "autocast" not in device_module.describe_training("cpu", torch.float32)


def test_an_unknown_precision_is_refused_with_the_choices():
    with pytest.raises(DeviceError, match="unknown precision 'fp8': choose one of auto, float32, bfloat16"):
        device_module.training_dtype("cpu", "fp8")
    from playground.config import ConfigError, TrainConfig
    with pytest.raises(ConfigError, match="precision must be auto, float32, bfloat16, got 'half'"):
        TrainConfig(precision="half")
