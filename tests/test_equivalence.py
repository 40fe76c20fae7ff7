"""The equivalence check the Compare tab shows, over the whole registry and every dtype's one tolerance."""

from __future__ import annotations

import pytest
import torch

from playground.attention import IMPLEMENTATIONS, REFERENCE, build, source_of, tolerance_for, transplant
from playground.attention.base import EXPLICIT_SOFTMAX
from playground.attention.batched import BatchedAttention
from playground.attention.costs import check_fits, time_implementations
from playground.attention.equivalence import compare

DTYPES = [torch.float64, torch.float32, torch.bfloat16, torch.float16]


@pytest.mark.parametrize("qkv_bias", [False, True])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_compared_implementation_agrees_within_its_dtypes_tolerance(dtype, qkv_bias):
    result = compare(32, 32, 4, 10, batch=2, seed=3, qkv_bias=qkv_bias, dtype=dtype)
    atol, rtol = tolerance_for(dtype)
    rows = {row.name: row for row in result.rows}
    assert list(rows) == list(IMPLEMENTATIONS)
    reference = result.head_maps[REFERENCE]
    for name, cls in IMPLEMENTATIONS.items():
        row = rows[name]
        assert (row.title, row.atol, row.rtol) == (cls.title, atol, rtol)
        if cls.compared_with is None:  # sliced_heads: flagged as a different model, with its parameter count
            assert not row.compared and row.within_tolerance is None and row.why.startswith(cls.why)
            assert f"{row.parameters:,} parameters" in row.why
            continue
        assert row.compared and row.within_tolerance, name
        assert row.compared_with == cls.compared_with
        # a row with no difference at all says so rather than explain one (the reference compared with itself aside)
        identical = row.max_abs_diff == 0 and name != REFERENCE
        assert row.why == (f"identical here, bit for bit (where it could differ: {cls.why})" if identical else cls.why)
        assert row.max_abs_diff <= atol, name
        torch.testing.assert_close(result.head_maps[name], reference, atol=atol, rtol=rtol)


def test_bf16_comparison_uses_a_looser_tolerance():
    result = compare(32, 32, 4, 8, dtype=torch.bfloat16)
    rows = {row.name: row for row in result.rows}
    assert rows["sdpa"].atol >= 1e-2 and rows["sdpa"].within_tolerance
    assert tolerance_for(torch.bfloat16) > tolerance_for(torch.float32) > tolerance_for(torch.float64)


def test_an_implementation_it_cannot_build_is_listed_with_the_reason():
    rows = {row.name: row for row in compare(12, 8, 2, 6).rows}  # d_in != d_out: torch_mha needs them equal
    assert not rows["torch_mha"].compared and rows["torch_mha"].why.startswith("not built: torch_mha needs d_in")
    assert rows["wrapper"].within_tolerance and rows["batched"].within_tolerance


class BatchedCopy(BatchedAttention):
    """The reference's code under a new name: everything an eighth implementation needs beyond its maths."""

    name = "batched_copy"
    title = "A copy of the reference"
    why = "it runs the reference's own code"


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(IMPLEMENTATIONS, BatchedCopy.name, BatchedCopy)  # removed again after the test
    return BatchedCopy


def test_a_new_implementation_is_picked_up_from_its_class_alone(registered):
    torch.manual_seed(0)
    reference, module = build(REFERENCE, 16, 16, 2, 8), build("batched_copy", 16, 16, 2, 8)
    assert isinstance(module, BatchedCopy) and "class BatchedCopy(" in source_of("batched_copy")
    x = torch.randn(1, 8, 16)
    with torch.no_grad():
        assert torch.equal(transplant(reference, "batched_copy", module)(x), reference(x))

    rows = {row.name: row for row in compare(16, 16, 2, 6).rows}
    assert list(rows) == list(IMPLEMENTATIONS) and rows["batched_copy"].title == "A copy of the reference"
    assert rows["batched_copy"].within_tolerance and rows["batched_copy"].max_abs_diff == 0.0

    (record,) = time_implementations(["batched_copy"], 8, 8, 2, [4], batch=1, warmup=1, repeats=1)
    assert record.name == "batched_copy" and record.sdpa_backend == EXPLICIT_SOFTMAX


def test_memory_estimate_refuses_what_would_not_fit():
    with pytest.raises(ValueError, match="needs about"):
        check_fits(64, 16, 65536, torch.float32, "cpu", cap_bytes=2**30)
