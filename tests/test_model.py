import pytest
import torch
import torch.nn.functional as F

from playground.config import ModelConfig
from playground.model.gpt import GPT, KVCache, causal_mask
from playground.text.tokenizer import CharTokenizer


def tiny_model(**changes) -> GPT:
    torch.manual_seed(0)
    config = dict(vocabulary_size=11, context_size=16, embedding_dim=24, heads_num=3, layers_num=2)
    return GPT(ModelConfig(**{**config, **changes})).eval()


def test_causal_mask_with_offset():
    assert causal_mask(2, 4).tolist() == [[True, True, True, False], [True, True, True, True]]


def test_causality_changing_token_j_leaves_earlier_outputs_unchanged():
    model = tiny_model()
    idx = torch.randint(0, 11, (2, 12))
    changed = idx.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 11
    before, after = model(idx).logits, model(changed).logits
    torch.testing.assert_close(before[:, :7], after[:, :7], rtol=0, atol=0)
    assert not torch.allclose(before[:, 7:], after[:, 7:])


def test_attention_weights_are_causal_distributions_and_match_sdpa_path():
    model = tiny_model()
    idx = torch.randint(0, 11, (2, 10))
    out = model(idx, return_attention=True)
    assert len(out.attention_weights) == 2 and len(out.attention_inputs) == 2
    for weights in out.attention_weights:
        assert weights.shape == (2, 3, 10, 10)
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 10))
        assert torch.all(weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(out.logits, model(idx).logits, atol=1e-5, rtol=1e-5)


def test_attention_inputs_are_each_layers_layernormed_stream():
    model = tiny_model()
    idx = torch.randint(0, 11, (1, 6))
    out = model(idx, return_attention=True)
    torch.testing.assert_close(out.attention_inputs[0], model.blocks[0].ln_1(model.embed(idx)))


def test_kv_cache_gives_the_same_logits_as_full_forward():
    model = tiny_model()
    idx = torch.randint(0, 11, (1, 14))
    full = model(idx).logits
    cache = KVCache.empty(2)
    pieces = [model(idx[:, :5], cache=cache).logits]
    for t in range(5, 14):
        pieces.append(model(idx[:, t:t + 1], cache=cache).logits)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 14


def test_sequence_longer_than_context_is_refused():
    with pytest.raises(ValueError, match="longer than context_size 16"):
        tiny_model()(torch.zeros(1, 17, dtype=torch.long))


def test_loss_is_cross_entropy():
    model = tiny_model()
    idx, targets = torch.randint(0, 11, (2, 8)), torch.randint(0, 11, (2, 8))
    out = model(idx, targets)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits.reshape(-1, 11), targets.reshape(-1)))


def test_tiny_gpt_overfits_hello_world():
    text = "hello world"
    tokenizer = CharTokenizer.train_from_text(text)
    ids = tokenizer.encode(text)[None]
    torch.manual_seed(0)
    model = GPT(ModelConfig(vocabulary_size=tokenizer.vocabulary_size, context_size=16, embedding_dim=32,
                            heads_num=2, layers_num=2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(300):
        loss = model(ids[:, :-1], ids[:, 1:]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1
