"""An optimizer's state as named tensors and JSON, so a resumed run goes on where it stopped.

AdamW keeps, per parameter, ``step``, ``exp_avg`` and ``exp_avg_sq`` (and ``max_exp_avg_sq`` with amsgrad);
its ``state_dict()`` keys them by position and holds Python objects. Here they are keyed by parameter name
(``blocks.0.attn.qkv.weight.exp_avg``) and the param groups' hyperparameters become JSON, so the whole
state fits a safetensors file (no pickle) and outlives the optimizer object:

    state = flatten_optimizer_state(optimizer, model)               # at a save: (tensors, metadata)
    restore_optimizer_state(fresh_optimizer, model, *state)         # at resume: the next step is the same

An OptimizerChain (optimizers.py: Muon on the hidden matrices, AdamW on the rest) is saved as its parts' groups in
order, under the name ``Muon+AdamW``; Muon keeps one ``momentum_buffer`` per matrix. Each parameter sits in one
part, so the names never clash.

Pure: reads and writes no files (checkpoints.py does, as ``optimizer.safetensors``) and knows nothing about
training. Works for any torch optimizer whose state is tensors; tested on AdamW, fused and not, and on Muon+AdamW.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import torch

from playground.training.optimizers import Optimizer, optimizer_name, parts

# How an optimizer computes, not what it learned: kept from the live optimizer, never taken from a file
# (a run saved with fused=True on a GPU resumes on a CPU or MPS optimizer).
IMPLEMENTATION_KEYS = ("foreach", "fused", "capturable", "differentiable", "param_names")


class OptimizerStateError(ValueError):
    """The saved optimizer state does not fit this optimizer or model (another optimizer, other parameters)."""


class OptimizerState(NamedTuple):
    tensors: dict[str, torch.Tensor]  # "<parameter name>.<state key>" -> tensor, on the CPU
    metadata: dict[str, str]  # "optimizer": optimizers.optimizer_name; "param_groups": JSON, parameters by name


def _parameter_names(model: torch.nn.Module) -> dict[int, str]:
    return {id(parameter): name for name, parameter in model.named_parameters()}


def _json_value(value):
    if isinstance(value, torch.Tensor):
        return value.item()
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    return value


def flatten_optimizer_state(optimizer: Optimizer, model: torch.nn.Module) -> OptimizerState:
    """``optimizer``'s state keyed by ``model``'s parameter names, copied to the CPU; see the module docstring."""
    names = _parameter_names(model)
    tensors: dict[str, torch.Tensor] = {}
    groups = []
    for part in parts(optimizer):
        for group in part.param_groups:
            group_names = []
            for parameter in group["params"]:
                if id(parameter) not in names:
                    raise OptimizerStateError("the optimizer holds a parameter that is not the model's")
                name = names[id(parameter)]
                group_names.append(name)
                for key, value in part.state.get(parameter, {}).items():
                    if not isinstance(value, torch.Tensor):
                        raise OptimizerStateError(f"{type(part).__name__} keeps {key!r} as "
                                                  f"{type(value).__name__}, not a tensor")
                    tensors[f"{name}.{key}"] = value.detach().to("cpu", copy=True).contiguous()
            settings = {key: _json_value(value) for key, value in group.items()
                        if key != "params" and key not in IMPLEMENTATION_KEYS}
            groups.append({**settings, "params": group_names})
    metadata = {"optimizer": optimizer_name(optimizer), "param_groups": json.dumps(groups)}
    return OptimizerState(tensors, metadata)


def restore_optimizer_state(optimizer: Optimizer, model: torch.nn.Module,
                            tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> None:
    """Load a flattened state into ``optimizer`` (built over ``model``'s parameters, in the same groups).

    Hyperparameters come from the saved groups; how the optimizer computes (fused, foreach...) stays as built.
    Raises OptimizerStateError when the state is for another optimizer or other parameters, before loading any.
    """
    kind, expected = metadata.get("optimizer"), optimizer_name(optimizer)
    if kind != expected:
        raise OptimizerStateError(f"the saved optimizer state is for {kind or 'an unknown optimizer'}, "
                                  f"not {expected}")
    try:
        saved_groups = json.loads(metadata["param_groups"])
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise OptimizerStateError(f"the saved optimizer state has no readable param_groups ({exc})") from None
    live_groups = sum(len(part.param_groups) for part in parts(optimizer))
    if not isinstance(saved_groups, list) or len(saved_groups) != live_groups:
        count = len(saved_groups) if isinstance(saved_groups, list) else "no list of"
        raise OptimizerStateError(f"the saved optimizer state has {count} parameter group(s); "
                                  f"this optimizer has {live_groups}")
    names = _parameter_names(model)
    place: dict[str, tuple[int, int]] = {}  # parameter name -> (part, its index in that part's state_dict)
    part_dicts = []
    saved = enumerate(saved_groups)
    for part_index, part in enumerate(parts(optimizer)):
        groups, count = [], 0
        for group in part.param_groups:
            group_number, saved_group = next(saved)
            group_names = [names.get(id(parameter)) for parameter in group["params"]]
            if not isinstance(saved_group, dict) or group_names != saved_group.get("params"):
                raise OptimizerStateError("the saved optimizer state is for other parameters than this model's "
                                          f"(group {group_number} differs)")
            indices = []
            for name in group_names:
                place[name] = (part_index, count)
                indices.append(count)
                count += 1
            settings = {key: tuple(value) if isinstance(value, list) else value
                        for key, value in saved_group.items() if key != "params" and key not in IMPLEMENTATION_KEYS}
            groups.append({**{k: v for k, v in group.items() if k != "params"}, **settings, "params": indices})
        part_dicts.append({"state": {}, "param_groups": groups})
    for flat_key, tensor in tensors.items():
        name, _, key = flat_key.rpartition(".")
        if name not in place:
            raise OptimizerStateError(f"the saved optimizer state names {name!r}, which this model lacks")
        part_index, index = place[name]
        part_dicts[part_index]["state"].setdefault(index, {})[key] = tensor
    for part, state_dict in zip(parts(optimizer), part_dicts):
        part.load_state_dict(state_dict)
