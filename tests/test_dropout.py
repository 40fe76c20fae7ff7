"""model/dropout.py: the CPU's cheaper dropout masks keep nn.Dropout's meaning (rate, scale, gradient, seeds)."""

from __future__ import annotations

import pytest
import torch

from playground.config import ModelConfig
from playground.model.dropout import LEVELS, Dropout, dropout, keep_mask, rounded_rate
from playground.model.gpt import GPT


def test_the_rate_is_rounded_to_a_multiple_of_one_65536th():
    assert rounded_rate(0.1) == 6554 / LEVELS and abs(rounded_rate(0.1) - 0.1) < 1e-5
    assert rounded_rate(0.0) == 0.0 and rounded_rate(0.5) == 0.5


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_each_element_is_dropped_at_the_rate_and_independently_of_its_neighbour(p):
    torch.manual_seed(0)
    kept = keep_mask((1000, 1000), p).flatten()  # two elements share each 32-bit draw: neighbours in memory
    n = kept.numel()
    sigma = (p * (1 - p) / n) ** 0.5
    dropped = (~kept).float()
    assert abs(dropped.mean().item() - rounded_rate(p)) < 5 * sigma
    pairs = dropped.view(-1, 2)  # the two lanes of one draw
    both = (pairs[:, 0] * pairs[:, 1]).mean().item()
    assert abs(both - p * p) < 5 * (p * p * (1 - p * p) / (n // 2)) ** 0.5
    across = (dropped[1:-1:2] * dropped[2::2]).mean().item()  # the second lane of a draw and the next draw's first
    assert abs(across - p * p) < 5 * (p * p * (1 - p * p) / (n // 2)) ** 0.5


def test_kept_elements_are_scaled_dropped_ones_are_zero_and_the_mean_is_kept():
    torch.manual_seed(1)
    x = torch.randn(400_000)
    out = dropout(x, 0.1)
    kept = out != 0
    scale = 1 / (1 - rounded_rate(0.1))
    assert torch.equal(out[kept], x[kept] * scale)
    ones = dropout(torch.ones(1_000_000), 0.1)
    assert abs(ones.mean().item() - 1.0) < 5 * (0.1 / 0.9 / 1_000_000) ** 0.5


def test_the_gradient_goes_through_the_kept_elements_only_scaled_as_forward():
    torch.manual_seed(2)
    x = torch.randn(3, 5, 7, requires_grad=True)
    out = dropout(x, 0.3)
    weights = torch.randn_like(out)
    (out * weights).sum().backward()
    kept = out.detach() != 0
    scale = 1 / (1 - rounded_rate(0.3))
    assert torch.allclose(x.grad, weights * kept * scale)

    def same_mask_each_call(t):
        torch.manual_seed(5)
        return dropout(t, 0.3)

    assert torch.autograd.gradcheck(same_mask_each_call, torch.randn(4, 6, dtype=torch.double, requires_grad=True))


def test_seeded_masks_repeat_and_eval_or_zero_rate_is_the_identity():
    x = torch.randn(64, 64)
    torch.manual_seed(3)
    first = dropout(x, 0.2)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.2), first)
    assert dropout(x, 0.2, training=False) is x and dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))


def test_the_module_is_nn_dropout_in_everything_but_its_masks():
    module = Dropout(0.25)
    assert module.p == 0.25 and repr(module) == "Dropout(p=0.25)" and not list(module.parameters())
    x = torch.randn(10, 10)
    assert module.eval()(x) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        Dropout(1.5)


def test_a_model_with_dropout_trains_through_explicit_attention_and_evaluates_as_before():
    config = ModelConfig(vocabulary_size=20, context_size=16, embedding_dim=32, heads_num=4, layers_num=2,
                         dropout_rate=0.2)
    torch.manual_seed(4)
    model = GPT(config)
    tokens = torch.randint(20, (3, 16))
    model.eval()
    with torch.no_grad():
        plain = model(tokens).logits
        explicit = model(tokens, return_attention=True).logits
    assert torch.allclose(plain, explicit, atol=1e-5)  # eval: no dropout, SDPA and the explicit path agree
    model.train()
    loss = model(tokens, tokens).loss
    loss.backward()
    assert torch.isfinite(loss) and all(p.grad is not None for p in model.parameters())
    torch.manual_seed(6)
    first = model(tokens).logits
    torch.manual_seed(6)
    assert torch.equal(model(tokens).logits, first) and not torch.allclose(first, plain)


def test_other_devices_keep_torchs_dropout():
    x = torch.randn(8, 8, device="meta")  # a CPU mask could not be applied to it: F.dropout must have been
    out = dropout(x, 0.5)
    assert out.device.type == "meta" and out.shape == x.shape
