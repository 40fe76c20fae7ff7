"""Do the implementations compute the same function? Transplant the reference's weights and measure.

Owns the comparison the Compare tab shows: one seeded reference (``batched``), its weights copied into every
implementation that can express the same function, the largest absolute and relative differences of
their outputs, the tolerance expected for the dtype, and each head's attention map. Knows nothing about
plotting or the UI.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from playground.attention import IMPLEMENTATIONS, REFERENCE, build, head_weights, transplant

TOLERANCES = {torch.float32: (1e-5, 1.3e-6), torch.float64: (1e-7, 1e-7), torch.bfloat16: (1e-2, 1.6e-2),
              torch.float16: (1e-3, 1e-3)}
WHY = {
    "batched": "the reference itself",
    "wrapper": "compared with the reference's context vectors before out_proj (it has no projection); each head "
               "multiplies separately, so sums run in a different order",
    "heads_list": "the same heads one by one, then the projection: per-head matmuls sum in a different order",
    "fused_qkv": "one fused 3·d_out matmul computes q, k and v together, blocked differently; additive mask",
    "sdpa": "the fused kernel computes softmax online, in blocks, with its own rounding",
    "torch_mha": "PyTorch's packed in_proj and its own attention path",
    "sliced_heads": "a different, smaller model: no weights make it compute the reference's function",
}


@dataclass(frozen=True)
class EquivalenceRow:
    name: str
    title: str
    parameters: int
    parameter_formula: str
    compared: bool
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
            device: torch.device | str = "cpu") -> Comparison:
    """Run every registered implementation on the same seeded input with the reference's weights."""
    device = torch.device(device)
    atol, rtol = TOLERANCES.get(dtype, (1e-2, 1e-2))
    torch.manual_seed(seed)
    reference = build(REFERENCE, d_in, d_out, num_heads, seq_len, qkv_bias=qkv_bias).to(device, dtype).eval()
    x = torch.randn(batch, seq_len, d_in, generator=torch.Generator().manual_seed(seed)).to(device, dtype)
    with torch.no_grad():
        expected = reference(x)  # (B, T, d_out)
        context = reference.context_vectors(x)  # (B, T, d_out): before out_proj, what wrapper computes
    rows, maps = [], {}
    for name, impl in IMPLEMENTATIONS.items():
        reason = impl.unsupported_reason(d_in, d_out, num_heads)
        if reason:
            rows.append(EquivalenceRow(name, impl.title, 0, impl.parameter_formula, False, None, None, atol, rtol,
                                       None, f"not built: {reason}"))
            continue
        torch.manual_seed(seed)
        module = build(name, d_in, d_out, num_heads, seq_len, qkv_bias=qkv_bias).to(device, dtype).eval()
        parameters = sum(p.numel() for p in module.parameters())
        if not impl.equivalent and name != "wrapper":
            rows.append(EquivalenceRow(name, impl.title, parameters, impl.parameter_formula, False, None, None,
                                       atol, rtol, None,
                                       f"{WHY[name]} ({parameters:,} parameters vs the reference's "
                                       f"{sum(p.numel() for p in reference.parameters()):,})"))
            maps[name] = head_weights(name, module, x)[0].float().cpu()
            continue
        if name != REFERENCE:
            transplant(reference, name, module)
        with torch.no_grad():
            actual = module(x)
        target = context if name == "wrapper" else expected
        max_abs, max_rel = _differences(actual, target)
        close = bool(torch.allclose(actual.double(), target.double(), atol=atol, rtol=rtol))
        rows.append(EquivalenceRow(name, impl.title, parameters, impl.parameter_formula, True, max_abs, max_rel,
                                   atol, rtol, close, WHY[name]))
        maps[name] = head_weights(name, module, x)[0].float().cpu()
    return Comparison(rows, maps, dtype, device)
