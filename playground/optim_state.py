"""An optimizer's state as named tensors and JSON, so a resumed run goes on where it stopped.

AdamW keeps, per parameter, ``step``, ``exp_avg`` and ``exp_avg_sq`` (and ``max_exp_avg_sq`` with amsgrad);
its ``state_dict()`` keys them by position and holds Python objects. Here they are keyed by parameter name
(``blocks.0.attn.qkv.weight.exp_avg``) and the param groups' hyperparameters become JSON, so the whole
state fits a safetensors file (no pickle) and outlives the optimizer object:

    state = flatten_optimizer_state(optimizer, model)               # at a save: (tensors, metadata)
    restore_optimizer_state(fresh_optimizer, model, *state)         # at resume: the next step is the same

Pure: reads and writes no files (checkpoints.py does, as ``optimizer.safetensors``) and knows nothing about
training. Works for any torch optimizer whose state is tensors; tested on AdamW, fused and not.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import torch

# How an optimizer computes, not what it learned: kept from the live optimizer, never taken from a file
# (a run saved with fused=True on a GPU resumes on a CPU or MPS optimizer).
IMPLEMENTATION_KEYS = ("foreach", "fused", "capturable", "differentiable", "param_names")


class OptimizerStateError(ValueError):
    """The saved optimizer state does not fit this optimizer or model (another optimizer, other parameters)."""


class OptimizerState(NamedTuple):
    tensors: dict[str, torch.Tensor]  # "<parameter name>.<state key>" -> tensor, on the CPU
    metadata: dict[str, str]  # "optimizer": the class name; "param_groups": JSON, parameters by name


def _parameter_names(model: torch.nn.Module) -> dict[int, str]:
    return {id(parameter): name for name, parameter in model.named_parameters()}


def _json_value(value):
    if isinstance(value, torch.Tensor):
        return value.item()
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    return value


def flatten_optimizer_state(optimizer: torch.optim.Optimizer, model: torch.nn.Module) -> OptimizerState:
    """``optimizer``'s state keyed by ``model``'s parameter names, copied to the CPU; see the module docstring."""
    names = _parameter_names(model)
    tensors: dict[str, torch.Tensor] = {}
    groups = []
    for group in optimizer.param_groups:
        group_names = []
        for parameter in group["params"]:
            if id(parameter) not in names:
                raise OptimizerStateError("the optimizer holds a parameter that is not the model's")
            name = names[id(parameter)]
            group_names.append(name)
            for key, value in optimizer.state.get(parameter, {}).items():
                if not isinstance(value, torch.Tensor):
                    raise OptimizerStateError(f"{type(optimizer).__name__} keeps {key!r} as "
                                              f"{type(value).__name__}, not a tensor")
                tensors[f"{name}.{key}"] = value.detach().to("cpu", copy=True).contiguous()
        settings = {key: _json_value(value) for key, value in group.items()
                    if key != "params" and key not in IMPLEMENTATION_KEYS}
        groups.append({**settings, "params": group_names})
    metadata = {"optimizer": type(optimizer).__name__, "param_groups": json.dumps(groups)}
    return OptimizerState(tensors, metadata)


def restore_optimizer_state(optimizer: torch.optim.Optimizer, model: torch.nn.Module,
                            tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Load a flattened state into ``optimizer`` (built over ``model``'s parameters, in the same groups).

    Hyperparameters come from the saved groups; how the optimizer computes (fused, foreach...) stays as built.
    Raises OptimizerStateError when the state is for another optimizer or other parameters.
    """
    kind = metadata.get("optimizer")
    if kind != type(optimizer).__name__:
        raise OptimizerStateError(f"the saved optimizer state is for {kind or 'an unknown optimizer'}, "
                                  f"not {type(optimizer).__name__}")
    try:
        saved_groups = json.loads(metadata["param_groups"])
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise OptimizerStateError(f"the saved optimizer state has no readable param_groups ({exc})") from None
    if len(saved_groups) != len(optimizer.param_groups):
        raise OptimizerStateError(f"the saved optimizer state has {len(saved_groups)} parameter group(s); "
                                  f"this optimizer has {len(optimizer.param_groups)}")
    names = _parameter_names(model)
    index_of: dict[str, int] = {}
    groups = []
    for saved, group in zip(saved_groups, optimizer.param_groups):
        group_names = [names.get(id(parameter)) for parameter in group["params"]]
        if group_names != saved.get("params"):
            raise OptimizerStateError("the saved optimizer state is for other parameters than this model's "
                                      f"(group {len(groups)} differs)")
        indices = []
        for name in group_names:
            index_of[name] = len(index_of)
            indices.append(index_of[name])
        settings = {key: tuple(value) if isinstance(value, list) else value
                    for key, value in saved.items() if key != "params" and key not in IMPLEMENTATION_KEYS}
        groups.append({**{k: v for k, v in group.items() if k != "params"}, **settings, "params": indices})
    state: dict[int, dict[str, torch.Tensor]] = {}
    for flat_key, tensor in tensors.items():
        name, _, key = flat_key.rpartition(".")
        if name not in index_of:
            raise OptimizerStateError(f"the saved optimizer state names {name!r}, which this model lacks")
        state.setdefault(index_of[name], {})[key] = tensor
    optimizer.load_state_dict({"state": state, "param_groups": groups})
