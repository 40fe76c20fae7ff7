"""The one interface every view reads a model through (model.base): each family (GPT, the Llama family, notebook
004's model) keeps the named points and names its norms, output projection and unembedding alike, so a view written
for one reads the next. Checked against each model's own forward, never against the interface itself."""

from __future__ import annotations

import pytest
import torch
from torch.testing import assert_close

from playground.config import NOTEBOOK_004, ModelConfig
from playground.model.base import run_with_cache
from playground.model.families import build_model
from playground.textbook import notebook_004

CONFIGS = {
    "gpt": ModelConfig(vocabulary_size=11, context_size=16, embedding_dim=24, heads_num=3, layers_num=2),
    "llama": ModelConfig(vocabulary_size=11, context_size=16, embedding_dim=32, heads_num=4, layers_num=2,
                         family="llama", kv_heads_num=2, activation="silu", intermediate_size=48),
    "notebook_004": ModelConfig(vocabulary_size=11, context_size=8, embedding_dim=16, heads_num=2, layers_num=1,
                                architecture=NOTEBOOK_004),
}
IDS = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])


def seeded(name: str):
    torch.manual_seed(7)
    return build_model(CONFIGS[name]).eval()


@pytest.mark.parametrize("name", CONFIGS)
def test_the_unembedding_of_the_final_norm_of_the_last_stream_is_the_models_logits(name):
    model = seeded(name)
    last = model.config.layers_num - 1
    output, points = run_with_cache(model, IDS, {"hook_resid_post", "ln1.hook_normalized"})
    with torch.no_grad():
        assert torch.equal(output.logits, model(IDS).logits)  # keeping the points changes nothing
        read = model.unembed()(model.final_norm()(points[f"blocks.{last}.hook_resid_post"]))
        normed = model.attention_norm(0)(model.embed(IDS))
    assert_close(read, output.logits)
    assert_close(points["blocks.0.ln1.hook_normalized"], normed)  # what layer 0's heads read


@pytest.mark.parametrize("name", CONFIGS)
def test_the_heads_outputs_through_the_output_projection_are_the_attention_output(name):
    model = seeded(name)
    _, points = run_with_cache(model, IDS, {"attn.hook_z", "hook_attn_out", "attn.hook_pattern"}, {0})
    z = points["blocks.0.attn.hook_z"][0]  # (h, T, d)
    h, T, d = z.shape
    with torch.no_grad():
        joined = model.output_projection(0)(z.transpose(0, 1).reshape(T, h * d))  # (T, C)
    assert_close(joined, points["blocks.0.hook_attn_out"][0])
    assert_close(points["blocks.0.attn.hook_pattern"][0].sum(-1), torch.ones(h, T))


def test_notebook_004s_model_keeps_the_named_points_of_its_own_heads_and_still_loads_strictly():
    """Its points are what the notebook's own Head and MultiHeadAttention compute; its names stay the notebook's."""
    model = seeded("notebook_004")
    output, points = run_with_cache(model, IDS)
    with torch.no_grad():
        x = model.embed(IDS)  # (1, T, C): no norm, attention reads the embeddings
        parts = model.attn.slices(x)
        expected_z = torch.stack([head(part) for head, part in zip(model.attn.heads, parts)], dim=1)  # (1, h, T, d)
        expected_q = torch.stack([head.query(part) for head, part in zip(model.attn.heads, parts)], dim=1)
        assert torch.equal(output.logits, model(IDS).logits)
        assert_close(points["blocks.0.attn.hook_pattern"], model.attn.weights(x))
        assert_close(points["blocks.0.attn.hook_q"], expected_q)
        assert_close(points["blocks.0.attn.hook_z"], expected_z)
        assert_close(points["blocks.0.hook_attn_out"], model.attn(x))
    assert torch.equal(points["blocks.0.hook_resid_pre"], x)
    assert not any(name.endswith(("hook_mlp_out", "hook_rot_q", "ln2.hook_normalized")) for name in points.values)
    reader = notebook_004.SimpleLanguageModel(11, block_size=8, n_embd=16, n_head=2)
    reader.load_state_dict(model.state_dict(), strict=True)
