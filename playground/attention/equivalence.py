"""Do the implementations compute the same function? Transplant the reference's weights and measure.

Owns the comparison the Compare tab shows: one seeded reference (``batched``), its weights copied into every
implementation that can take them (a weight transplant: each one's ``load_reference``), the largest absolute
and relative differences from what each is compared with (the reference's output, or its context vectors
before out_proj), the dtype's tolerance from the one table in ``playground.attention``, and each head's
attention map. Everything it says about an implementation comes from that implementation's class.
Knows nothing about plotting or the UI.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.attention import IMPLEMENTATIONS, REFERENCE, build, head_weights, tolerance_for, transplant
from playground.attention.base import CONTEXT, OUTPUT, parameter_total


@dataclass(frozen=True)
class EquivalenceRow:
    name: str
    title: str
    parameters: int
    parameter_formula: str
    compared: bool
    compared_with: str | None  # "output", "context" (before out_proj) or None: see AttentionImplementation
    max_abs_diff: float | None
    max_rel_diff: float | None
    atol: float
    rtol: float
    within_tolerance: bool | None
    why: str


@dataclass
class Comparison:
    rows: list[EquivalenceRow]
    head_maps: dict[str, torch.Tensor]  # name -> (h, T, T) for batch element 0
    dtype: torch.dtype
    device: torch.device


def _differences(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """Largest absolute difference, and that difference relative to the largest |expected| value."""
    diff = (actual.double() - expected.double()).abs().max().item()
    return diff, diff / max(expected.double().abs().max().item(), 1e-30)


def compare(d_in: int, d_out: int, num_heads: int, seq_len: int, batch: int = 2, seed: int = 0,
            qkv_bias: bool = False, dtype: torch.dtype = torch.float32,
            device: torch.device | str = "cpu", with_maps: bool = True) -> Comparison:
    """Run every registered implementation on the same seeded input with the reference's weights.

    ``with_maps=False`` skips each head's (h, T, T) map: at T 1024 and 64 heads they are 256 MiB per
    implementation, and a caller that will not draw them should not hold them.
    """
    device = torch.device(device)
    atol, rtol = tolerance_for(dtype)
    torch.manual_seed(seed)
    reference = build(REFERENCE, d_in, d_out, num_heads, seq_len, qkv_bias=qkv_bias).to(device, dtype).eval()
    x = torch.randn(batch, seq_len, d_in, generator=torch.Generator().manual_seed(seed)).to(device, dtype)
    with torch.no_grad():
        targets = {OUTPUT: reference(x), CONTEXT: reference.context_vectors(x)}  # (B, T, d_out) each
    rows, maps = [], {}
    for name, cls in IMPLEMENTATIONS.items():
        row = dict(name=name, title=cls.title, parameter_formula=cls.parameter_formula, atol=atol, rtol=rtol,
                   compared=False, compared_with=None, max_abs_diff=None, max_rel_diff=None, within_tolerance=None)
        reason = cls.unsupported_reason(d_in, d_out, num_heads)
        if reason:
            rows.append(EquivalenceRow(**row, parameters=0, why=f"not built: {reason}"))
            continue
        torch.manual_seed(seed)
        module = build(name, d_in, d_out, num_heads, seq_len, qkv_bias=qkv_bias).to(device, dtype).eval()
        row["parameters"] = parameter_total(module)
        if cls.compared_with is None:  # it cannot take the reference's weights
            why = f"{cls.why} ({row['parameters']:,} parameters vs the reference's {parameter_total(reference):,})"
        else:
            transplant(reference, name, module)  # the reference too: a plain copy into its seeded twin
            with torch.no_grad():
                actual = module(x)
            target = targets[cls.compared_with]
            max_abs, max_rel = _differences(actual, target)
            close = torch.allclose(actual.double(), target.double(), atol=atol, rtol=rtol)
            row.update(compared=True, compared_with=cls.compared_with, max_abs_diff=max_abs, max_rel_diff=max_rel,
                       within_tolerance=bool(close))
            why = cls.why
            if max_abs == 0 and name != REFERENCE:  # no difference to explain: say so, and where one could come from
                why = f"identical here, bit for bit (where it could differ: {cls.why})"
        rows.append(EquivalenceRow(**row, why=why))
        if with_maps:
            maps[name] = head_weights(name, module, x)[0].float().cpu()
        del module
    return Comparison(rows, maps, dtype, device)
