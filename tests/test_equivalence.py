import pytest
import torch

from playground.attention.costs import check_fits
from playground.attention.equivalence import compare


@pytest.mark.parametrize("qkv_bias", [False, True])
def test_every_equivalent_implementation_agrees_and_sliced_heads_is_flagged(qkv_bias):
    result = compare(32, 32, 4, 10, batch=2, seed=3, qkv_bias=qkv_bias)
    rows = {row.name: row for row in result.rows}
    for name in ("wrapper", "heads_list", "batched", "fused_qkv", "sdpa", "torch_mha"):
        assert rows[name].compared and rows[name].within_tolerance, name
        assert rows[name].max_abs_diff <= 1e-5
    assert not rows["sliced_heads"].compared and "different" in rows["sliced_heads"].why
    reference = result.head_maps["batched"]
    for name in ("heads_list", "fused_qkv", "sdpa", "torch_mha", "wrapper"):
        torch.testing.assert_close(result.head_maps[name], reference, atol=1e-6, rtol=1e-5)


def test_bf16_comparison_uses_a_looser_tolerance():
    result = compare(32, 32, 4, 8, dtype=torch.bfloat16)
    rows = {row.name: row for row in result.rows}
    assert rows["sdpa"].atol >= 1e-2 and rows["sdpa"].within_tolerance


def test_memory_estimate_refuses_what_would_not_fit():
    with pytest.raises(ValueError, match="needs about"):
        check_fits(64, 16, 65536, torch.float32, "cpu", cap_bytes=2**30)
