"""playground.lens.circuits against independent computations: the attribution sums to the model's logit and each head's
share is recomputed from the attention weights by hand; the QK circuit predicts the model's own attention; the OV
circuit is what a head writes when it attends to one token; ablation equals editing the weights."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.testing import assert_close

from playground.config import ModelConfig
from playground.lens.circuits import (
    CircuitError,
    ablated,
    every_key_contribution,
    every_key_reading,
    head_effects,
    head_means,
    head_writes,
    key_contributions,
    knock_outs,
    logit_attribution,
    logit_attributions,
    ov_circuit,
    qk_circuit,
    strongest_pairs,
    text_loss,
)
from playground.model.gpt import GPT


def tiny(use_bias: bool, layers: int = 2, tie: bool = False, seed: int = 3, head_bias: bool = False) -> GPT:
    torch.manual_seed(seed)
    config = ModelConfig(vocabulary_size=13, context_size=16, embedding_dim=24, heads_num=4, layers_num=layers,
                         use_bias=use_bias, tie_embeddings=tie, head_bias=head_bias)
    model = GPT(config).eval()
    with torch.no_grad():  # far from the initialisation's small weights, so every part matters
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.2)
    return model


IDS = torch.tensor([1, 5, 2, 7, 7, 3, 0, 12, 5, 4, 9])


@pytest.mark.parametrize("use_bias, tie, head_bias", [(False, False, False), (True, False, False),
                                                      (True, False, True), (True, True, False)],
                         ids=["no-bias", "bias", "older-head-bias", "gpt2-tied"])
@pytest.mark.parametrize("position", [0, 4, -1])
def test_the_parts_sum_to_the_models_logit(use_bias, tie, head_bias, position):
    model = tiny(use_bias, tie=tie, head_bias=head_bias)
    with torch.no_grad():
        logits = model(IDS.view(1, -1)).logits[0]
    for target in (0, 6, 12):
        parts = logit_attribution(model, IDS, position, target)
        assert parts.logit == pytest.approx(float(logits[position, target]), abs=1e-5)
        assert float(parts.values.sum()) == pytest.approx(parts.logit, abs=1e-4)
    assert len(parts.names) == len(set(parts.names))
    assert sum(kind == "head" for kind in parts.kinds) == 2 * 4 and parts.names.count("L1 MLP") == 1


def test_a_heads_share_recomputed_by_hand_from_its_attention_weights():
    """The head's output at the position is its weights times its values; through its slice of W_O, centred,
    divided by the final norm's scale and read by the target's LM-head row times the norm's gain."""
    model = tiny(use_bias=True, layers=1)
    position, target, layer, head = 7, 4, 0, 2
    ids = IDS.view(1, -1)
    with torch.no_grad():
        out = model(ids, return_attention=True)
        x = out.attention_inputs[layer][0]  # (T, C): ln_1 of the stream
        w_q, w_k, w_v, b_q, b_k, b_v = model.blocks[layer].attn.head_projections(head)
        values = x @ w_v + b_v  # (T, d)
        weights = out.attention_weights[layer][0, head]  # (T, T)
        head_out = weights[position] @ values  # (d,)
        d = model.config.head_size
        written = model.blocks[layer].attn.proj.weight[:, head * d:(head + 1) * d] @ head_out  # (C,)
        stream = model.embed(ids)[0, position] + model.blocks[layer].attn(x.unsqueeze(0))[0][0, position]
        stream = stream + model.blocks[layer].mlp(model.blocks[layer].ln_2(stream))
        scale = torch.sqrt(stream.var(unbiased=False) + model.ln_f.eps)
        expected = ((written - written.mean()) / scale) @ (model.lm_head.weight[target] * model.ln_f.weight)
    parts = logit_attribution(model, IDS, position, target)
    assert parts.head(layer, head) == pytest.approx(float(expected), abs=1e-5)
    assert parts.scale == pytest.approx(float(scale), abs=1e-6)


def test_the_qk_circuit_predicts_the_models_own_attention():
    """Two tokens, position embeddings zeroed: in layer 0, query c_q at position 1 weighs key c_k at 0 against
    itself by exp(qk[c_q, c_k] - qk[c_q, c_q])."""
    model = tiny(use_bias=True)
    with torch.no_grad():
        model.position_embedding.weight.zero_()
    circuit = qk_circuit(model, 0, 1)
    assert circuit.shape == (13, 13)
    for c_k, c_q in ((2, 5), (7, 7), (12, 0)):
        with torch.no_grad():
            weights = model(torch.tensor([[c_k, c_q]]), return_attention=True).attention_weights[0][0, 1]
        expected = float(torch.log(weights[1, 0] / weights[1, 1]))
        assert float(circuit[c_q, c_k] - circuit[c_q, c_q]) == pytest.approx(expected, abs=1e-4)


def test_the_ov_circuit_is_what_a_head_writes_attending_to_one_token():
    """At the first position a head can attend only to that token: its output there, through its slice of W_O,
    the final norm and the LM head, is the OV circuit's row (position embeddings zeroed, so the row is the token's)."""
    model = tiny(use_bias=False)
    with torch.no_grad():
        model.position_embedding.weight.zero_()
    layer, head, d = 0, 3, model.config.head_size
    circuit = ov_circuit(model, layer, head)
    captured = []
    hook = model.blocks[layer].attn.proj.register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    try:
        for token in (0, 6, 11):
            captured.clear()
            with torch.no_grad():
                model(torch.tensor([[token]]))
                written = captured[0][0, 0, head * d:(head + 1) * d] @ \
                    model.blocks[layer].attn.proj.weight[:, head * d:(head + 1) * d].T
                assert_close(circuit[token], model.lm_head(model.ln_f(written)), atol=1e-5, rtol=0)
    finally:
        hook.remove()


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_ablation_equals_editing_the_output_projection(mode):
    model = tiny(use_bias=True)
    heads = [(0, 1), (1, 3)]
    d = model.config.head_size
    edited = copy.deepcopy(model)
    means = head_means(model, IDS)
    with torch.no_grad():
        for layer, head in heads:
            proj = edited.blocks[layer].attn.proj
            columns = slice(head * d, (head + 1) * d)
            if mode == "mean":  # a constant input to those columns is a constant added to the bias
                proj.bias += proj.weight[:, columns] @ means[layer][columns]
            proj.weight[:, columns] = 0.0
        expected = edited(IDS.view(1, -1)).logits
        intact = model(IDS.view(1, -1)).logits
        with ablated(model, heads, mode, token_ids=IDS):
            knocked = model(IDS.view(1, -1)).logits
        after = model(IDS.view(1, -1)).logits
    assert_close(knocked, expected, atol=1e-5, rtol=0)
    assert not torch.allclose(knocked, intact, atol=1e-3)
    assert torch.equal(after, intact)  # the hooks are gone


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_head_effects_rank_every_head_by_the_loss_it_adds(mode):
    """The batched ranking (one row per knocked-out head) against each head knocked out alone."""
    model = tiny(use_bias=True)
    effects = head_effects(model, IDS, mode=mode)
    assert len(effects) == 8 and [e.added for e in effects] == sorted((e.added for e in effects), reverse=True)
    intact = text_loss(model, IDS)
    for effect in effects:
        with ablated(model, [(effect.layer, effect.head)], mode, token_ids=IDS):
            assert text_loss(model, IDS) == pytest.approx(intact + effect.added, abs=1e-5)


def _alone(model, heads, mode, targets):
    """(loss, guesses, p(target) at each position) from one pass of the model under ``ablated``."""
    with ablated(model, heads, mode, token_ids=IDS), torch.no_grad():
        logits = model(IDS.view(1, -1)).logits[0]  # (T, V)
    probabilities = torch.softmax(logits, dim=-1)
    loss = float(torch.nn.functional.cross_entropy(logits[:-1], IDS[1:]))
    return loss, logits.argmax(-1).tolist(), probabilities[torch.arange(IDS.numel()), targets].tolist()


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("notebook", [False, True], ids=["gpt", "notebook-004"])
def test_knock_outs_in_one_batch_are_each_set_knocked_out_alone(mode, notebook, monkeypatch):
    """The Why page's knock-out numbers (every head alone, and a set of heads) against ``ablated``, one pass each;
    rows split into chunks give the same numbers."""
    model = notebook_model() if notebook else tiny(use_bias=True)
    heads = [(layer, head) for layer in range(model.config.layers_num) for head in range(model.config.heads_num)]
    sets = [[lh] for lh in heads] + [[heads[0], heads[-1]], heads[1:4]]
    targets = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5])
    knocked = knock_outs(model, IDS, sets, targets, mode)
    monkeypatch.setattr("playground.lens.circuits.KNOCK_OUT_LOGITS", 2 * IDS.numel() * model.config.vocabulary_size)
    for chunked, knock in zip(knock_outs(model, IDS, sets, targets, mode), knocked, strict=True):  # 2 rows at once
        assert chunked.guesses == knock.guesses and chunked.loss == pytest.approx(knock.loss, abs=1e-6)
        assert chunked.target_probabilities == pytest.approx(knock.target_probabilities, abs=1e-6)
    for heads_out, knock in zip(sets, knocked):
        loss, guesses, chosen = _alone(model, heads_out, mode, targets)
        assert knock.heads == tuple(heads_out) and knock.guesses == guesses
        assert knock.loss == pytest.approx(loss, abs=1e-5)
        assert knock.target_probabilities == pytest.approx(chosen, abs=1e-5)
    effects = {(e.layer, e.head): e.loss for e in head_effects(model, IDS, mode)}
    assert [k.loss for k in knocked[:len(heads)]] == pytest.approx([effects[lh] for lh in heads], abs=1e-5)


def test_bad_requests_say_what_is_wrong():
    model = tiny(use_bias=False)
    with pytest.raises(CircuitError, match="layer 2 is out of range: this model has 2 layers"):
        qk_circuit(model, 2, 0)
    with pytest.raises(CircuitError, match="head 4 is out of range"):
        ov_circuit(model, 0, 4)
    with pytest.raises(CircuitError, match="position 11 is outside the text's 11 tokens"):
        logit_attribution(model, IDS, 11, 0)
    with pytest.raises(CircuitError, match="target id 13 is outside the vocabulary"):
        logit_attribution(model, IDS, 0, 13)
    with pytest.raises(CircuitError, match="mean ablation needs the text"):
        with ablated(model, [(0, 0)], "mean"):
            pass
    with pytest.raises(CircuitError, match="ablation mode 'half'"):
        with ablated(model, [(0, 0)], "half"):
            pass
    with pytest.raises(CircuitError, match="reads at most 16"):
        logit_attribution(model, torch.zeros(17, dtype=torch.long), 0, 0)


def test_on_the_shipped_model_the_parts_sum_to_its_logit_and_a_head_is_needed():
    from conftest import REPO

    from playground.checkpoints.store import load_checkpoint

    loaded = load_checkpoint("shakespeare-char", directory=REPO / "weights")
    ids = loaded.tokenizer.encode("ROMEO:\nWhat light through yonder window breaks")
    parts = logit_attribution(loaded.model, ids, -1, int(ids[-1]))
    assert float(parts.values.sum()) == pytest.approx(parts.logit, abs=1e-4)
    assert head_effects(loaded.model, ids)[0].added > 0  # knocking out its most needed head raises the loss


def test_key_shares_sum_to_the_heads_part_and_follow_its_weights():
    model = tiny(use_bias=True)
    parts = logit_attribution(model, IDS, 8, 5)
    for layer, head in ((0, 0), (1, 2)):
        weights, shares = key_contributions(model, IDS, 8, 5, layer, head)
        assert weights.shape == shares.shape == (11,)
        assert float(shares.sum()) == pytest.approx(parts.head(layer, head), abs=1e-5)
        assert torch.all(shares[9:] == 0)  # causal: the future gave nothing
        assert float(weights.sum()) == pytest.approx(1.0, abs=1e-6)


def test_a_token_subset_is_the_same_rows_and_columns_of_the_whole_table():
    model = tiny(use_bias=True)
    tokens = torch.tensor([4, 0, 9])
    for circuit in (qk_circuit, ov_circuit):
        whole = circuit(model, 1, 2)
        assert_close(circuit(model, 1, 2, tokens), whole[tokens][:, tokens], atol=1e-5, rtol=0)
    with pytest.raises(CircuitError, match="ids in 0 to 12"):
        qk_circuit(model, 0, 0, torch.tensor([13]))
    assert strongest_pairs(torch.tensor([[1.0, 5.0], [3.0, -2.0]]), 2) == [(0, 1, 5.0), (1, 0, 3.0)]
    # among some rows and columns only, numbered as the whole table numbers them
    table = torch.tensor([[9.0, 0.0, 1.0], [0.0, 0.0, 0.0], [2.0, 0.0, 4.0]])
    assert strongest_pairs(table, 3, among=[2, 0]) == [(0, 0, 9.0), (2, 2, 4.0), (2, 0, 2.0)]
    assert strongest_pairs(table, 1, among=[1, 2]) == [(2, 2, 4.0)]


def test_a_knock_out_changes_only_its_own_threads_forward_passes():
    """A server runs one model for many visitors at once: another thread's pass, even inside the block, is intact."""
    import threading

    model = tiny(use_bias=True)
    ids = IDS.view(1, -1)
    with torch.no_grad():
        intact = model(ids).logits
        seen = {}
        with ablated(model, [(0, 0), (1, 2)], "zero"):
            other = threading.Thread(target=lambda: seen.update(logits=model(ids).logits))
            other.start()
            other.join()
            knocked = model(ids).logits
    assert torch.equal(seen["logits"], intact)
    assert not torch.allclose(knocked, intact, atol=1e-3)


@pytest.mark.parametrize("use_bias, tie", [(False, False), (True, True)], ids=["no-bias", "gpt2-tied"])
def test_every_position_at_once_is_each_position_alone(use_bias, tie):
    """The page is sent every position's attribution from one pass: each is the one-position attribution, and
    sums to the model's own logit there."""
    model = tiny(use_bias, tie=tie)
    targets = torch.tensor([(3 * p + 1) % 13 for p in range(IDS.numel())])
    with torch.no_grad():
        logits = model(IDS.view(1, -1)).logits[0]
    every = logit_attributions(model, IDS, targets)
    assert [a.position for a in every] == list(range(IDS.numel()))
    for p, attribution in enumerate(every):
        alone = logit_attribution(model, IDS, p, int(targets[p]))
        assert attribution.names == alone.names and attribution.kinds == alone.kinds
        assert_close(attribution.values, alone.values, atol=1e-5, rtol=1e-5)
        assert attribution.scale == pytest.approx(alone.scale, rel=1e-6)
        assert attribution.logit == pytest.approx(float(logits[p, targets[p]]), abs=1e-5)
        assert float(attribution.values.sum()) == pytest.approx(attribution.logit, abs=1e-4)
    with pytest.raises(CircuitError, match="one target per position"):
        logit_attributions(model, IDS, targets[:-1])


def test_every_heads_key_shares_at_once_are_each_heads_alone():
    model = tiny(True)
    targets = torch.tensor([(5 * p + 2) % 13 for p in range(IDS.numel())])
    every = logit_attributions(model, IDS, targets)
    weights, shares = every_key_contribution(model, IDS, every)
    assert weights.shape == shares.shape == (2, 4, IDS.numel(), IDS.numel())
    for p in (0, 5, IDS.numel() - 1):
        for layer, head in ((0, 0), (1, 3)):
            w, s = key_contributions(model, IDS, p, int(targets[p]), layer, head)
            assert_close(weights[layer, head, p], w, atol=1e-6, rtol=1e-5)
            assert_close(shares[layer, head, p], s, atol=1e-5, rtol=1e-5)
            assert float(shares[layer, head, p].sum()) == pytest.approx(every[p].head(layer, head), abs=1e-4)
    assert float(weights[:, :, 2, 3:].abs().sum()) == 0.0  # the future is never read
    some_weights, some_shares = every_key_contribution(model, IDS, every, [(1, 2), (0, 1)])
    assert_close(some_weights, torch.stack([weights[1, 2], weights[0, 1]]))
    assert_close(some_shares, torch.stack([shares[1, 2], shares[0, 1]]))


@pytest.mark.parametrize("kind", ["gpt2-layout", "notebook-004"])
def test_what_a_head_writes_from_each_key_recomputed_by_hand_times_its_weight_is_its_push(kind):
    """The Why tab's chain: weight (the model's own attention) x what the head writes from the key (its value through
    its columns of W_O, read as the final norm and LM head read a part, by hand here) = the key's push; the pushes
    add up to the head's part from logit_attribution's own pass (1e-4), which with the other parts is the logit."""
    notebook = kind == "notebook-004"
    model = notebook_model() if notebook else tiny(use_bias=True, tie=True)
    targets = torch.tensor([(3 * p + 1) % 13 for p in range(IDS.numel())])
    every = logit_attributions(model, IDS, targets)
    heads = [(0, 1), (0, 3)] if notebook else [(1, 2), (0, 0)]
    weights, writes, shares = every_key_reading(model, IDS, every, heads)
    assert torch.equal(shares, weights * writes)  # the very product the page draws
    with torch.no_grad():
        out = model(IDS.view(1, -1), return_attention=True)
        logits = out.logits[0]
        d = model.config.head_size
        for i, (layer, head) in enumerate(heads):
            attention = model.attn if notebook else model.blocks[layer].attn
            x = out.attention_inputs[layer][0]  # (T, C)
            if notebook:  # the notebook's own Head module reads its slice of the features
                values = attention.heads[head].value(x[:, head * d:(head + 1) * d])  # (T, d)
            else:
                _, _, w_v, _, _, b_v = attention.head_projections(head)
                values = x @ w_v + b_v
            for position in (0, 6, IDS.numel() - 1):
                target = int(targets[position])
                for key in range(position + 1):
                    written = attention.proj.weight[:, head * d:(head + 1) * d] @ values[key]  # (C,)
                    if notebook:  # straight into the output layer
                        expected = written @ model.output.weight[target]
                    else:
                        reader = model.lm_head.weight[target] * model.ln_f.weight
                        expected = ((written - written.mean()) / every[position].scale) @ reader
                    assert float(writes[i, position, key]) == pytest.approx(float(expected), abs=1e-5)
                assert torch.all(weights[i, position, position + 1:] == 0)  # the future is never read
                assert float(shares[i, position].sum()) == pytest.approx(every[position].head(layer, head),
                                                                         abs=1e-4)
                assert float(every[position].values.sum()) == pytest.approx(float(logits[position, target]),
                                                                            abs=1e-4)


def notebook_model(seed: int = 5):
    """Notebook 004's SimpleLanguageModel (the toy preset's): sliced heads, no residual, norm or MLP."""
    from playground.model.families import build_model

    torch.manual_seed(seed)
    model = build_model(ModelConfig(vocabulary_size=13, context_size=16, embedding_dim=24, heads_num=4, layers_num=1,
                                    architecture="notebook_004")).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.3)
    return model


def test_on_notebook_004s_model_each_heads_part_is_its_own_output_read_by_the_output_layer():
    """Independent of circuits' code: the notebook's own Head modules on their slices of the embeddings, each through
    its columns of proj, read by the output layer's row of the target; proj's bias and the output's bias."""
    model = notebook_model()
    targets = torch.tensor([(7 * p + 3) % 13 for p in range(IDS.numel())])
    every = logit_attributions(model, IDS, targets)
    with torch.no_grad():
        logits = model(IDS.view(1, -1)).logits[0]
        x = model.embed(IDS.view(1, -1))  # (1, T, C)
        d = model.config.head_size
        for p, attribution in enumerate(every):
            t = int(targets[p])
            assert attribution.names == ["L0 H0", "L0 H1", "L0 H2", "L0 H3", "L0 attention bias", "output bias"]
            assert attribution.logit == pytest.approx(float(logits[p, t]), abs=1e-5)
            assert float(attribution.values.sum()) == pytest.approx(attribution.logit, abs=1e-4)
            for h, head in enumerate(model.attn.heads):
                out = head(x[..., h * d:(h + 1) * d])[0, p]  # (d,)
                by_hand = model.output.weight[t] @ (model.attn.proj.weight[:, h * d:(h + 1) * d] @ out)
                assert attribution.head(0, h) == pytest.approx(float(by_hand), abs=1e-5)
            assert float(attribution.values[-2]) == pytest.approx(float(model.output.weight[t] @ model.attn.proj.bias),
                                                                  abs=1e-5)
            assert float(attribution.values[-1]) == pytest.approx(float(model.output.bias[t]), abs=1e-6)
            alone = logit_attribution(model, IDS, p, t)
            assert_close(alone.values, attribution.values)
        weights, shares = every_key_contribution(model, IDS, every)
        assert_close(weights[0], model.attn.weights(x)[0])
        for h in range(4):
            assert_close(shares[0, h].sum(dim=1), torch.tensor([a.head(0, h) for a in every]), atol=1e-4, rtol=1e-4)
            w, s = key_contributions(model, IDS, 6, int(targets[6]), 0, h)
            assert_close(shares[0, h, 6], s, atol=1e-5, rtol=1e-5)


def test_on_notebook_004s_model_the_circuits_are_what_a_head_reads_and_writes():
    """Without position embeddings the QK table's entries are the notebook head's own scores; a one-token text makes
    the head attend to that token alone, and what it writes, through proj and the output layer, is the OV row."""
    model = notebook_model()
    with torch.no_grad():
        model.pos_emb.weight.zero_()
        d = model.config.head_size
        for h, head in enumerate(model.attn.heads):
            qk = qk_circuit(model, 0, h)
            x = model.token_emb.weight[IDS][:, h * d:(h + 1) * d]  # (T, d)
            scores = head.query(x) @ head.key(x).T / d ** 0.5
            assert_close(qk[IDS][:, IDS], scores, atol=1e-5, rtol=1e-5)
            ov = ov_circuit(model, 0, h)
            for token in (0, 7):
                written = model.attn.proj.weight[:, h * d:(h + 1) * d] @ head(
                    model.token_emb.weight[token, h * d:(h + 1) * d].view(1, 1, d))[0, 0]
                assert_close(ov[token], model.output.weight @ written, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["zero", "mean"])
def test_on_notebook_004s_model_a_knock_out_equals_editing_proj_and_leaves_other_passes_intact(mode):
    model = notebook_model()
    d = model.config.head_size
    with torch.no_grad():
        intact = model(IDS.view(1, -1)).logits
        edited = copy.deepcopy(model)
        means = head_means(model, IDS)[0] if mode == "mean" else torch.zeros(model.config.embedding_dim)
        for h in (1, 3):  # the head's output replaced by a constant: its columns of proj become a bias
            columns = slice(h * d, (h + 1) * d)
            edited.attn.proj.bias += edited.attn.proj.weight[:, columns] @ means[columns]
            edited.attn.proj.weight[:, columns] = 0
        with ablated(model, [(0, 1), (0, 3)], mode, IDS):
            knocked = model(IDS.view(1, -1)).logits
        assert_close(knocked, edited(IDS.view(1, -1)).logits, atol=1e-5, rtol=1e-5)
        assert_close(model(IDS.view(1, -1)).logits, intact)  # outside the block, the model is itself again
    effects = head_effects(model, IDS, mode)
    for effect in effects:
        with ablated(model, [(effect.layer, effect.head)], mode, IDS):
            assert effect.loss == pytest.approx(text_loss(model, IDS), abs=1e-5)


@pytest.mark.parametrize("kind", ["no-bias", "gpt2-tied", "notebook-004"])
def test_against_a_rival_the_parts_sum_to_the_models_logit_difference_and_each_head_is_read_by_hand(kind):
    """Logit difference attribution (TransformerLens's): a guess is made against its rivals (softmax ignores a shift
    of every logit), so the parts split logit(target) - logit(rival). Checked against the model's own logits, each
    head's share recomputed by hand from a hook on the output projection (its input: the heads side by side), read
    by the difference of the two LM-head rows; the keys' pushes add up to the head's bar, and the split is the
    target's alone minus the rival's alone, part by part, the biases too."""
    notebook = kind == "notebook-004"
    model = notebook_model() if notebook else tiny(use_bias=kind != "no-bias", tie=kind == "gpt2-tied")
    T = IDS.numel()
    targets = torch.tensor([(3 * p + 1) % 13 for p in range(T)])
    rivals = torch.tensor([(5 * p + 2) % 13 for p in range(T)])
    versus = logit_attributions(model, IDS, targets, rivals)
    alone, rival_alone = logit_attributions(model, IDS, targets), logit_attributions(model, IDS, rivals)
    attention = model.attn if notebook else model.blocks[-1].attn
    layer = 0 if notebook else model.config.layers_num - 1
    captured = []
    hook = attention.proj.register_forward_pre_hook(lambda _m, args: captured.append(args[0]))
    try:
        with torch.no_grad():
            out = model(IDS.view(1, -1))
    finally:
        hook.remove()
    logits, joined, d = out.logits[0], captured[0][0], model.config.head_size  # (T, V), (T, C)
    _, _, shares = every_key_reading(model, IDS, versus, [(layer, 1)])
    for p in range(T):
        t, r = int(targets[p]), int(rivals[p])
        attribution = versus[p]
        assert attribution.rival_id == r and alone[p].rival_id is None
        assert attribution.logit == pytest.approx(float(logits[p, t] - logits[p, r]), abs=1e-4)
        assert float(attribution.values.sum()) == pytest.approx(float(logits[p, t] - logits[p, r]), abs=1e-4)
        assert_close(attribution.values, alone[p].values - rival_alone[p].values, atol=1e-5, rtol=0)
        with torch.no_grad():
            written = attention.proj.weight[:, d:2 * d] @ joined[p, d:2 * d]  # head 1's write, (C,)
            if notebook:
                by_hand = written @ (model.output.weight[t] - model.output.weight[r])
            else:
                reader = (model.lm_head.weight[t] - model.lm_head.weight[r]) * model.ln_f.weight
                by_hand = ((written - written.mean()) / attribution.scale) @ reader
        assert attribution.head(layer, 1) == pytest.approx(float(by_hand), abs=1e-5)
        assert float(shares[0, p].sum()) == pytest.approx(attribution.head(layer, 1), abs=1e-4)
    one = logit_attribution(model, IDS, 6, int(targets[6]), int(rivals[6]))
    assert_close(one.values, versus[6].values)
    _, key_shares = key_contributions(model, IDS, 6, int(targets[6]), layer, 1, attribution=versus[6])
    assert_close(key_shares, shares[0, 6], atol=1e-5, rtol=1e-5)
    with pytest.raises(CircuitError, match="rival"):
        logit_attributions(model, IDS, targets, rivals[:3])


@pytest.mark.parametrize("kind", ["no-bias", "gpt2-tied", "notebook"])
def test_what_a_head_writes_in_general_is_its_mean_share_of_each_logit_centred(kind):
    """head_writes against logit_attributions with every token the target at every position: a head's entry t is its
    mean share of logit(t) over the text, less that mean over every token."""
    model = notebook_model() if kind == "notebook" else tiny(kind == "gpt2-tied", tie=kind == "gpt2-tied")
    written = head_writes(model, IDS)
    V, T = model.config.vocabulary_size, IDS.numel()
    layers = 1 if kind == "notebook" else model.config.layers_num
    assert written.shape == (layers, model.config.heads_num, V)
    shares = torch.stack([torch.stack([parts.values for parts in logit_attributions(model, IDS, [t] * T)])
                          for t in range(V)])  # (V, T, parts)
    names = logit_attribution(model, IDS, 0, 0).names
    for layer in range(layers):
        for head in range(model.config.heads_num):
            mean = shares[:, :, names.index(f"L{layer} H{head}")].mean(dim=1)  # (V,)
            assert torch.allclose(written[layer, head], mean - mean.mean(), atol=1e-5)
