"""The Q, K and V what-ifs on the Llama family (playground.lens.walkthrough.whatifs), against transformers' own
modules: W_K tied to W_Q is the reference model with its K/V group's k_proj rows set to the head's q_proj rows (the
loss on the text is the same), V = X is the reference's attention with the group's heads writing their weights times
the normed input in place of o_proj's reading of their values. Tied rotary scores stay symmetric; a grouped K/V head
carries the change to every query head that shares it."""

from __future__ import annotations

import copy

import pytest
import torch
from test_llama import PROMPT, SHAPES, open_folder

from playground.lens.walkthrough import tied_query_key, value_is_input
from playground.lens.walkthrough.whatifs import _changed_llama_forward

# (shape, layer, head): heads sharing a K/V head with others, one alone (qwen2-2over2), Qwen2's q/k/v biases
CASES = [("llama-4over2", 1, 3), ("llama-4over1-tied", 0, 1), ("qwen2-2over2", 1, 0), ("qwen2-4over2-tied", 0, 2)]


def _reference_loss(reference, ids: torch.Tensor) -> float:
    with torch.no_grad():
        return float(reference(ids[None], labels=ids[None]).loss)


def _same_logits(model, reference, changed_reference, ids: torch.Tensor, layer: int, head: int, change: str):
    """Our changed pass gives the changed reference's logits, which differ from the intact model's."""
    with torch.no_grad():
        logits = _changed_llama_forward(model, ids[None], layer, head, change)[0]
        expected = changed_reference(ids[None]).logits[0]
        intact = reference(ids[None]).logits[0]
    torch.testing.assert_close(logits, expected, atol=2e-5, rtol=0)
    assert float((expected - intact).abs().max()) > 1e-3


def _group(name: str, head: int) -> tuple[int, list[int]]:
    heads, kv_heads = SHAPES[name][2], SHAPES[name][3]
    n = heads // kv_heads
    return head // n, list(range(head // n * n, (head // n + 1) * n))


@pytest.mark.parametrize("name", ["llama-4over2", "qwen2-4over2-tied"])
def test_the_forward_pass_without_a_change_is_the_models(tiny, name):
    _, tokenizer, folder = tiny(name)
    model = open_folder(folder).model
    ids = tokenizer.encode(PROMPT)[None]
    with torch.no_grad():
        expected = model(ids, return_attention=True)
        logits, _, weights, _ = _changed_llama_forward(model, ids, 1, 1, None)
    torch.testing.assert_close(logits, expected.logits[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(weights, expected.attention_weights[1][0, 1], atol=1e-6, rtol=0)


@pytest.mark.parametrize("name, layer, head", CASES)
def test_tying_is_transformers_with_the_groups_k_proj_set_to_the_heads_q_proj(tiny, name, layer, head):
    reference, tokenizer, folder = tiny(name)
    model = open_folder(folder).model
    ids = tokenizer.encode(PROMPT)
    before = {key: p.clone() for key, p in model.state_dict().items()}
    changed = tied_query_key(model, ids, layer, head)
    group, members = _group(name, head)
    assert changed.heads == tuple(members)
    d = reference.config.hidden_size // reference.config.num_attention_heads
    tied = copy.deepcopy(reference)
    attention = tied.model.layers[layer].self_attn
    with torch.no_grad():
        attention.k_proj.weight[group * d:(group + 1) * d] = attention.q_proj.weight[head * d:(head + 1) * d]
        if attention.k_proj.bias is not None:  # Qwen2: b_K := b_Q too
            attention.k_proj.bias[group * d:(group + 1) * d] = attention.q_proj.bias[head * d:(head + 1) * d]
    assert changed.original_loss == pytest.approx(_reference_loss(reference, ids), abs=1e-5)
    assert changed.loss == pytest.approx(_reference_loss(tied, ids), abs=1e-5)
    _same_logits(model, reference, tied, ids, layer, head, "tied query and key")
    # rotated by their positions, q_i·q_j still reads the same both ways: R_i q_i · R_j q_j = q_i · R_(j-i) q_j
    torch.testing.assert_close(changed.scores, changed.scores.T, atol=1e-5, rtol=0)
    T = ids.numel()
    assert bool((changed.weights[~torch.ones(T, T, dtype=torch.bool).tril()] == 0).all())
    assert all(torch.equal(p, before[key]) for key, p in model.state_dict().items())  # the weights untouched


def _value_is_input_reference(reference, layer: int, members: list[int], group: int):
    """transformers' model with the attention of ``layer`` wrapped: its output less o_proj's reading of the group's
    heads (their weights times the shared V), plus each head's weights times the normed input it read."""
    changed = copy.deepcopy(reference)
    attention = changed.model.layers[layer].self_attn
    original = attention.forward
    d = reference.config.hidden_size // reference.config.num_attention_heads

    def forward(hidden_states, *args, **kwargs):
        output, weights = original(hidden_states, *args, **kwargs)  # eager: weights (1, h, T, T)
        B, T, _ = hidden_states.shape
        v = attention.v_proj(hidden_states).view(B, T, -1, d).transpose(1, 2)  # (1, h_kv, T, d)
        for h in members:
            columns = attention.o_proj.weight[:, h * d:(h + 1) * d]  # (C, d)
            output = output - (weights[:, h] @ v[:, group]) @ columns.T + weights[:, h] @ hidden_states
        return output, weights

    attention.forward = forward
    return changed


@pytest.mark.parametrize("name, layer, head", CASES)
def test_value_as_the_input_is_transformers_with_the_groups_heads_writing_weights_times_x(tiny, name, layer, head):
    reference, tokenizer, folder = tiny(name)
    model = open_folder(folder).model
    ids = tokenizer.encode(PROMPT)
    changed = value_is_input(model, ids, layer, head)
    group, members = _group(name, head)
    assert changed.heads == tuple(members)
    expected = _value_is_input_reference(reference, layer, members, group)
    assert changed.loss == pytest.approx(_reference_loss(expected, ids), abs=1e-5)
    _same_logits(model, reference, expected, ids, layer, head, "value is the input")
    torch.testing.assert_close(changed.weights, changed.original_weights)  # where it looks is unchanged
    with torch.no_grad():
        normed = model(ids[None], return_attention=True).attention_inputs[layer][0]  # (T, C): what it reads
    torch.testing.assert_close(changed.written, changed.weights @ normed)  # a copy of what it read, C wide
