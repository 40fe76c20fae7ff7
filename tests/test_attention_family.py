"""The attention implementations as a family: each against the batched reference, on tiny seeded inputs.

Every test is parametrized over the registry's classes, so a new implementation is tested by registering it.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from playground.attention import (
    FAMILY,
    IMPLEMENTATIONS,
    REFERENCE,
    AttentionImplementation,
    build,
    head_weights,
    source_of,
    tolerance_for,
    transplant,
)
from playground.attention.base import EXPLICIT_SOFTMAX, OUTPUT
from playground.attention.batched import BatchedAttention
from playground.attention.costs import check_fits, estimate_attention_bytes, time_implementations

CLASSES = list(IMPLEMENTATIONS.values())
COMPARED = [cls for cls in CLASSES if cls.compared_with is not None]  # those that can take the reference's weights
# (d_in, d_out, num_heads): square like a transformer block, and narrowing (d_in != d_out) where supported
SIZES = [(16, 16, 4), (12, 8, 2)]
CONTEXT = 10
ATOL, RTOL = tolerance_for(torch.float32)


def each(classes):
    return pytest.mark.parametrize("cls", classes, ids=lambda cls: cls.name)


def supported(classes, sizes=SIZES):
    return pytest.mark.parametrize(
        ("cls", "d_in", "d_out", "num_heads"),
        [
            pytest.param(cls, *size, id=f"{cls.name}-{'x'.join(map(str, size))}")
            for cls in classes
            for size in sizes
            if cls.unsupported_reason(*size) is None
        ],
    )


def seeded(name, d_in, d_out, num_heads, qkv_bias=False, seed=0):
    torch.manual_seed(seed)
    return build(name, d_in, d_out, num_heads, CONTEXT, qkv_bias=qkv_bias)


def tokens(d_in, batch=2, T=7, seed=1):
    return torch.randn(batch, T, d_in, generator=torch.Generator().manual_seed(seed))


def output_and_input_grad(fn, x, grad_out_seed=2):
    x = x.clone().requires_grad_(True)
    out = fn(x)
    grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(grad_out_seed))
    out.backward(grad_out)
    return out.detach(), x.grad


def what_it_is_compared_with(cls, reference):
    """The reference's forward, or its context vectors before out_proj, as the class says."""
    return reference if cls.compared_with == OUTPUT else reference.context_vectors


@each(CLASSES)
def test_every_implementation_describes_itself(cls):
    assert issubclass(cls, AttentionImplementation) and IMPLEMENTATIONS[cls.name] is cls
    assert cls.title and cls.why and cls.parameter_formula
    assert cls.compared_with in (OUTPUT, "context", None)
    if cls.equivalent:  # computing the reference's function means comparing with its output
        assert cls.compared_with == OUTPUT
    assert f"class {cls.__name__}(" in source_of(cls.name)


def test_the_registry_is_one_list_of_classes_with_distinct_names():
    assert list(IMPLEMENTATIONS.values()) == list(FAMILY)
    assert len({cls.name for cls in FAMILY}) == len(FAMILY)
    assert IMPLEMENTATIONS[REFERENCE] is BatchedAttention


@pytest.mark.parametrize("qkv_bias", [False, True])
@supported(COMPARED)
def test_matches_the_reference_after_transplant(cls, d_in, d_out, num_heads, qkv_bias):
    reference = seeded(REFERENCE, d_in, d_out, num_heads, qkv_bias)
    target = transplant(reference, cls.name, seeded(cls.name, d_in, d_out, num_heads, qkv_bias, seed=7))
    x = tokens(d_in)
    expected_out, expected_grad = output_and_input_grad(what_it_is_compared_with(cls, reference), x)
    out, grad = output_and_input_grad(target, x)
    assert_close(out, expected_out, atol=ATOL, rtol=RTOL)
    assert_close(grad, expected_grad, atol=ATOL, rtol=RTOL)


@supported(COMPARED, SIZES[:1])
def test_the_tolerance_catches_a_wrong_layout(cls, d_in, d_out, num_heads):
    """Rounding passes; a real mistake, here the first two heads' queries swapped, does not."""
    reference = seeded(REFERENCE, d_in, d_out, num_heads)
    target = transplant(reference, cls.name, seeded(cls.name, d_in, d_out, num_heads, seed=7))
    with torch.no_grad():
        d_k = d_out // num_heads
        reference.W_query.weight[: 2 * d_k] = reference.W_query.weight[: 2 * d_k].roll(d_k, dims=0)
    x = tokens(d_in)
    with torch.no_grad(), pytest.raises(AssertionError):
        assert_close(target(x), what_it_is_compared_with(cls, reference)(x), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("qkv_bias", [False, True])
@supported(CLASSES, SIZES + [(24, 12, 3)])
def test_parameter_count_matches_formula(cls, d_in, d_out, num_heads, qkv_bias):
    module = seeded(cls.name, d_in, d_out, num_heads, qkv_bias)
    actual = sum(p.numel() for p in module.parameters())
    assert actual == cls.parameter_count(d_in, d_out, num_heads, qkv_bias)


@each(CLASSES)
def test_gpt2_small_parameter_count(cls):
    module = build(cls.name, 768, 768, 12, 1024, qkv_bias=True)
    assert sum(p.numel() for p in module.parameters()) == cls.parameter_count(768, 768, 12, True)
    if cls.equivalent:  # q, k, v with biases + out_proj: 4·768·768 + 4·768
        assert cls.parameter_count(768, 768, 12, True) == 2_362_368


@supported(CLASSES)
@pytest.mark.parametrize("changed", [0, 3, 6])
def test_changing_a_token_leaves_earlier_outputs_unchanged(cls, d_in, d_out, num_heads, changed):
    module = seeded(cls.name, d_in, d_out, num_heads, qkv_bias=True)
    x = tokens(d_in)
    edited = x.clone()
    edited[:, changed] += 1.0
    with torch.no_grad():
        before, after = module(x), module(edited)
    assert_close(after[:, :changed], before[:, :changed], atol=ATOL, rtol=RTOL)
    assert not torch.allclose(after[:, changed], before[:, changed])


@supported(CLASSES)
def test_head_weights_are_causal_distributions(cls, d_in, d_out, num_heads):
    weights = head_weights(cls.name, seeded(cls.name, d_in, d_out, num_heads), tokens(d_in, T=6))
    assert weights.shape == (2, num_heads, 6, 6)
    assert_close(weights.sum(dim=-1), torch.ones(2, num_heads, 6), atol=ATOL, rtol=RTOL)
    assert torch.equal(weights.triu(diagonal=1), torch.zeros_like(weights))  # exact zeros on the future


@supported(COMPARED)
def test_head_weights_agree_across_compared_implementations(cls, d_in, d_out, num_heads):
    reference = seeded(REFERENCE, d_in, d_out, num_heads, qkv_bias=True)
    target = transplant(reference, cls.name, seeded(cls.name, d_in, d_out, num_heads, qkv_bias=True, seed=7))
    x = tokens(d_in)
    assert_close(head_weights(cls.name, target, x), head_weights(REFERENCE, reference, x), atol=ATOL, rtol=RTOL)


JOURNEY = torch.tensor(  # "Your journey starts with one step", 3-dimensional embeddings from the book
    [
        [0.43, 0.15, 0.89],
        [0.55, 0.87, 0.66],
        [0.57, 0.85, 0.64],
        [0.22, 0.58, 0.33],
        [0.77, 0.25, 0.10],
        [0.05, 0.80, 0.55],
    ]
)
BOOK_CONTEXT_VECS = torch.tensor(
    [[0.3190, 0.4858], [0.2943, 0.3897], [0.2856, 0.3593], [0.2693, 0.3873], [0.2639, 0.3928], [0.2575, 0.4028]]
)


@pytest.mark.parametrize(
    "make",
    [
        lambda: BatchedAttention(d_in=3, d_out=2, context_length=6, dropout=0.0, num_heads=2),
        lambda: build("batched", d_in=3, d_out=2, num_heads=2, context_length=6),
    ],
    ids=["class", "build"],
)
def test_seeded_batched_reproduces_the_books_numbers(make):
    torch.manual_seed(123)
    module = make()
    with torch.no_grad():
        context_vecs = module(torch.stack((JOURNEY, JOURNEY)))
    assert context_vecs.shape == (2, 6, 2)
    assert_close(context_vecs[0], BOOK_CONTEXT_VECS, atol=1e-4, rtol=0)
    assert_close(context_vecs[1], context_vecs[0])


@supported(CLASSES, SIZES[:1])
def test_bfloat16_stays_close_to_float32(cls, d_in, d_out, num_heads):
    module = seeded(cls.name, d_in, d_out, num_heads)
    x = tokens(d_in)
    with torch.no_grad():
        expected = module(x)
        out = module.to(torch.bfloat16)(x.to(torch.bfloat16))
    assert out.dtype == torch.bfloat16
    atol, rtol = tolerance_for(torch.bfloat16)
    assert_close(out.float(), expected, atol=atol, rtol=rtol)


@each(CLASSES)
def test_d_out_not_divisible_by_heads_is_a_clear_error(cls):
    with pytest.raises(ValueError, match="divisible by num_heads"):
        build(cls.name, 12, 10, 4, CONTEXT)


@each(CLASSES)
@pytest.mark.parametrize(("d_in", "d_out", "num_heads"), [(10, 8, 4), (12, 8, 2), (8, 8, 2)])
def test_build_refuses_exactly_what_the_class_says_it_cannot_build(cls, d_in, d_out, num_heads):
    reason = cls.unsupported_reason(d_in, d_out, num_heads)
    if reason is None:
        assert isinstance(build(cls.name, d_in, d_out, num_heads, CONTEXT), cls)
    else:
        with pytest.raises(ValueError) as refused:
            build(cls.name, d_in, d_out, num_heads, CONTEXT)
        assert str(refused.value) == reason


@pytest.mark.parametrize(
    ("name", "d_in", "d_out", "num_heads", "message"),
    [
        ("sliced_heads", 10, 8, 4, r"d_in \(10\) divisible by num_heads \(4\)"),
        ("torch_mha", 12, 8, 2, "needs d_in == d_out"),
        ("no_such_attention", 8, 8, 2, "unknown attention implementation"),
    ],
)
def test_unsupported_sizes_are_clear_errors(name, d_in, d_out, num_heads, message):
    with pytest.raises(ValueError, match=message):
        build(name, d_in, d_out, num_heads, CONTEXT)


@each([cls for cls in CLASSES if cls.compared_with is None])
def test_transplant_refuses_an_implementation_that_cannot_take_the_weights(cls):
    with pytest.raises(ValueError, match="cannot take the reference's weights"):
        transplant(seeded(REFERENCE, 16, 16, 4), cls.name, seeded(cls.name, 16, 16, 4))


def test_transplant_into_sliced_heads_explains_the_parameter_counts():
    reference, sliced = seeded(REFERENCE, 16, 16, 4), seeded("sliced_heads", 16, 16, 4)
    with pytest.raises(ValueError, match=r"sliced_heads is a different model.* 464 parameters .* 1,040"):
        transplant(reference, "sliced_heads", sliced)


@each(COMPARED)
def test_transplant_refuses_mismatched_bias_heads_and_class(cls):
    with pytest.raises(ValueError, match="qkv_bias differs"):
        transplant(seeded(REFERENCE, 8, 8, 2, qkv_bias=True), cls.name, seeded(cls.name, 8, 8, 2))
    with pytest.raises(ValueError, match="cannot transplant 2 heads into 4"):
        transplant(seeded(REFERENCE, 8, 8, 2), cls.name, seeded(cls.name, 8, 8, 4))
    with pytest.raises(TypeError, match="expects a"):
        transplant(seeded(REFERENCE, 8, 8, 2), cls.name, torch.nn.Linear(8, 8))


@supported(CLASSES, SIZES[:1])
def test_backend_names_the_kernel_that_runs(cls, d_in, d_out, num_heads):
    backend = seeded(cls.name, d_in, d_out, num_heads).backend(tokens(d_in))
    assert backend in (EXPLICIT_SOFTMAX, "flash (cpu)", "math", "efficient", "cudnn", "unknown")


def test_attention_memory_estimate_and_budget():
    # batch 2, 4 heads, T 1024, fp32: scores + weights, 2 x 32 MiB
    assert estimate_attention_bytes(2, 4, 1024, torch.float32) == 64 * 1024**2
    assert estimate_attention_bytes(2, 4, 1024, "bfloat16") == 32 * 1024**2
    with pytest.raises(ValueError, match=r"T=1024 needs about 64\.0 MiB"):
        check_fits(2, 4, 1024, torch.float32, cap_bytes=1024**2)


def test_timing_sweep_returns_records_and_reports_progress():
    seen = []
    records = time_implementations(
        ["batched", "sdpa"], 8, 8, 2, [4, 8], batch=1, warmup=1, repeats=1, progress=lambda *a: seen.append(a)
    )
    assert [(r.name, r.seq_len) for r in records] == [("batched", 4), ("batched", 8), ("sdpa", 4), ("sdpa", 8)]
    assert [s[:2] for s in seen] == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert all(r.forward_ms > 0 and r.forward_backward_ms > 0 and r.memory_is_estimate for r in records)
    assert records[0].sdpa_backend == EXPLICIT_SOFTMAX
    assert records[-1].sdpa_backend in ("flash (cpu)", "math", "unknown")


def test_the_time_estimate_grows_with_every_shape_and_keeps_the_default_sweep_under_a_minute():
    from playground.attention.costs import SWEEP_LENGTHS, compare_seconds, matmul_flops, sweep_seconds

    assert matmul_flops(64, 64, 1024, 2) == 603_979_776  # 50 M projections + 17 M out_proj + 537 M T² products
    default = sweep_seconds(7, 64, 64, 4, SWEEP_LENGTHS, 2)
    assert 10 < default < 60  # measured 3.4 s quiet, 18 s on a shared CPU: see costs.py
    assert sweep_seconds(7, 4096, 4096, 64, SWEEP_LENGTHS, 64) > 3600  # the tab's maxima: refused up front
    base = dict(d_in=64, d_out=64, num_heads=4, batch=2)
    for name in base:
        assert sweep_seconds(7, **{**base, name: base[name] * 2}, seq_lens=[512]) > sweep_seconds(7, **base,
                                                                                                  seq_lens=[512])
    assert sweep_seconds(7, **base, seq_lens=[1024]) > sweep_seconds(7, **base, seq_lens=[512])
    assert sweep_seconds(7, **base, seq_lens=[512], device="cuda") < sweep_seconds(7, **base, seq_lens=[512])
    assert compare_seconds(7, 64, 64, 4, 1024, 2) < compare_seconds(7, 64, 64, 4, 1024, 2, maps=True)
    half = sweep_seconds(7, **base, seq_lens=[512], dtype=torch.bfloat16)  # no fast bf16 kernels on this CPU
    assert half > 5 * sweep_seconds(7, **base, seq_lens=[512])
    assert sweep_seconds(7, **base, seq_lens=[512], dtype=torch.bfloat16, device="cuda") < half


def test_the_library_guard_never_plans_past_the_containers_limit(monkeypatch):
    from playground.attention import costs

    monkeypatch.setattr(costs, "container_limit", lambda: 100 * 1024**2)
    with pytest.raises(ValueError, match=r"over the budget of 100\.0 MiB \(the container's memory limit\)"):
        check_fits(4, 4, 1024, torch.float32, cap_bytes=None)  # 128 MiB of scores and weights
    check_fits(4, 4, 512, torch.float32, cap_bytes=None)  # 32 MiB fits


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: cls.name)
def test_every_constructor_takes_the_books_positional_order(cls):
    """Notebook 001: MultiHeadAttentionWrapper(d_in, d_out, context_length, dropout, num_heads=...), as written."""
    torch.manual_seed(0)
    positional = cls(8, 8, 6, 0.0, num_heads=2)
    torch.manual_seed(0)
    keywords = build(cls.name, d_in=8, d_out=8, num_heads=2, context_length=6)
    x = torch.rand(1, 6, 8)
    assert_close(positional(x), keywords(x))
    assert head_weights(cls.name, cls(8, 8, 6, 0.0, 2), x).shape == (1, 2, 6, 6)
