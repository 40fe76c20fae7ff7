"""The optimizer choice: AdamW alone (the default) or Muon on the hidden matrices with AdamW for the rest
(config.py's field, train.configure_optimizer, optimizers.py's chain, optim_state.py's save and restore, run.py's
resume rule, the CLI flag)."""

import json

import pytest
import torch
from safetensors import safe_open

from playground.checkpoints import store as checkpoints
from playground.cli import train as train_cli
from playground.config import ConfigError, ModelConfig, TrainConfig
from playground.model.gpt import GPT
from playground.training import optimizer_state as optim_state
from playground.training import optimizers
from playground.training.loop import configure_optimizer
from playground.training.optimizers import OptimizerChain, hidden_matrices, optimizer_name
from playground.training.run import RunRequest, prepare_run, run_training

SMALL = dict(layers_num=2, heads_num=2, embedding_dim=16, context_size=16, dropout_rate=0.0, use_bias=False)
CPU = torch.device("cpu")


def quick(steps=20, **changes) -> TrainConfig:
    values = dict(batch_size=8, steps=steps, learning_rate=3e-3, warmup_steps=2, eval_interval=10, eval_batches=2,
                  checkpoint_interval=1000, sample_interval=1000, seed=0, optimizer="muon")
    return TrainConfig(**{**values, **changes})


def test_the_optimizer_field_accepts_adamw_or_muon_only():
    assert TrainConfig().optimizer == "adamw"  # today's behaviour stays the default
    for bad in ("sgd", "Muon", "", None, 1):
        with pytest.raises(ConfigError, match=f"optimizer must be adamw or muon, got {bad!r}"):
            TrainConfig(optimizer=bad)
    with pytest.raises(ConfigError, match="optimizer must be adamw or muon, got 'lion'"):
        TrainConfig.from_dict({**TrainConfig().to_dict(), "optimizer": "lion"})
    old_record = {k: v for k, v in TrainConfig().to_dict().items() if k != "optimizer"}
    assert TrainConfig.from_dict(old_record).optimizer == "adamw"  # a training.json from before the choice


@pytest.mark.parametrize("use_bias", [False, True])
def test_muon_takes_the_blocks_matrices_and_adamw_everything_else_once(use_bias):
    model = GPT(ModelConfig(vocabulary_size=11, **{**SMALL, "use_bias": use_bias}))
    chain = configure_optimizer(model, quick(weight_decay=0.05), CPU)
    assert isinstance(chain, OptimizerChain) and optimizer_name(chain) == "Muon+AdamW"
    muon, adamw = chain.optimizers
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    names = {id(p): n for n, p in model.named_parameters()}
    owners = {}
    for part, optimizer in (("muon", muon), ("adamw", adamw)):
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                assert names[id(parameter)] not in owners, f"{names[id(parameter)]} is in two optimizers"
                owners[names[id(parameter)]] = (part, group["weight_decay"])
    assert set(owners) == set(names.values())  # every parameter in exactly one optimizer
    matrices = ("attn.qkv", "attn.proj", "mlp.fc", "mlp.proj")
    expected_muon = {f"blocks.{i}.{m}.weight" for i in range(2) for m in matrices}
    assert {n for n, (part, _) in owners.items() if part == "muon"} == expected_muon
    for name in ("token_embedding.weight", "position_embedding.weight", "lm_head.weight"):
        assert owners[name] == ("adamw", 0.05)  # matrices AdamW keeps, decayed as before
    norms_and_biases = [n for n in names.values() if ".ln_" in n or n.startswith("ln_f") or n.endswith(".bias")]
    assert norms_and_biases and all(owners[n] == ("adamw", 0.0) for n in norms_and_biases)
    assert any(n.endswith(".bias") for n in norms_and_biases) == use_bias
    assert muon.param_groups[0]["adjust_lr_fn"] == "match_rms_adamw" and muon.param_groups[0]["weight_decay"] == 0.05
    chain.param_groups[0]["lr"] = 0.5  # the loop's schedule sets every group's rate through the chain
    assert muon.param_groups[0]["lr"] == 0.5 and len(chain.param_groups) == 3


def test_adamw_stays_one_torch_optimizer_over_every_parameter():
    model = GPT(ModelConfig(vocabulary_size=11, **SMALL))
    optimizer = configure_optimizer(model, quick(optimizer="adamw"), CPU)
    assert type(optimizer) is torch.optim.AdamW
    assert sum(len(g["params"]) for g in optimizer.param_groups) == len(list(model.parameters()))


def test_a_chain_refuses_a_parameter_in_two_optimizers():
    model = GPT(ModelConfig(vocabulary_size=11, **SMALL))
    with pytest.raises(ValueError, match="a parameter is in two of the chained optimizers"):
        OptimizerChain(torch.optim.Muon(hidden_matrices(model)), torch.optim.AdamW(model.parameters()))


def test_muon_trains_a_tiny_model_and_records_its_choice(tmp_path, shakespeare_text):
    run = prepare_run(RunRequest("m", SMALL, quick(steps=60), corpus_text=shakespeare_text[:20000],
                                 weights_dir=tmp_path))
    result = run_training(run)
    first = sum(loss for _, loss in result.train_loss[:5]) / 5
    last = sum(loss for _, loss in result.train_loss[-5:]) / 5
    assert last < first - 0.5, (first, last)
    record = json.loads((tmp_path / "m" / "training.json").read_text())
    assert record["train_config"]["optimizer"] == "muon"
    with safe_open(tmp_path / "m" / checkpoints.OPTIMIZER_FILE, "pt") as saved:
        assert saved.metadata()["optimizer"] == "Muon+AdamW"
        assert "blocks.0.attn.qkv.weight.momentum_buffer" in saved.keys()
        assert "lm_head.weight.exp_avg" in saved.keys() and "blocks.0.attn.qkv.weight.exp_avg" not in saved.keys()


def test_a_muon_run_resumed_takes_the_very_steps_of_one_never_stopped(tmp_path, shakespeare_text):
    """Stop at n, resume: one step on, the weights are bit-identical to a run never stopped (Muon's momentum
    buffers and AdamW's moments both came back); without the state the next step differs."""
    text, n = shakespeare_text[:30_000], 12
    config = quick(steps=2 * n, learning_rate=1e-2, eval_interval=1000)
    weights_at = {}

    def remember(name, run):
        def on_step(step, metrics):
            if step == n + 1:
                weights_at[name] = {k: v.clone() for k, v in run.model.state_dict().items()}
        return on_step

    straight_run = prepare_run(RunRequest("straight", SMALL, config, corpus_text=text, weights_dir=tmp_path))
    run_training(straight_run, on_step=remember("straight", straight_run))
    done = []
    run_training(prepare_run(RunRequest("resumed", SMALL, config, corpus_text=text, weights_dir=tmp_path)),
                 on_step=lambda step, metrics: done.append(step), should_stop=lambda: len(done) >= n)
    resumed_run = prepare_run(RunRequest("resumed", SMALL, config, corpus_text=text, resume=True,
                                         weights_dir=tmp_path))
    assert resumed_run.notes == [] and resumed_run.start_step == n
    assert isinstance(resumed_run.optimizer, OptimizerChain)
    run_training(resumed_run, on_step=remember("resumed", resumed_run))
    for key, tensor in weights_at["straight"].items():
        assert torch.equal(weights_at["resumed"][key], tensor), key

    (tmp_path / "resumed" / checkpoints.OPTIMIZER_FILE).unlink()  # the same resume, cold
    cold_run = prepare_run(RunRequest("resumed", SMALL, quick(steps=3 * n, learning_rate=1e-2, eval_interval=1000),
                                      corpus_text=text, resume=True, weights_dir=tmp_path))
    assert "so Muon+AdamW starts cold" in cold_run.notes[0]


def test_resuming_with_another_optimizer_is_refused_with_what_to_do(tmp_path, shakespeare_text):
    text = shakespeare_text[:5000]
    run_training(prepare_run(RunRequest("mu", SMALL, quick(steps=4), corpus_text=text, weights_dir=tmp_path)))
    with pytest.raises(ConfigError, match="the run 'mu' was trained with the optimizer muon, not adamw: resume it with "
                                          "optimizer muon, or start a new run to train with adamw"):
        prepare_run(RunRequest("mu", SMALL, quick(steps=8, optimizer="adamw"), corpus_text=text, resume=True,
                               weights_dir=tmp_path))
    run_training(prepare_run(RunRequest("ad", SMALL, quick(steps=4, optimizer="adamw"), corpus_text=text,
                                        weights_dir=tmp_path)))
    with pytest.raises(ConfigError, match="the run 'ad' was trained with the optimizer adamw, not muon"):
        prepare_run(RunRequest("ad", SMALL, quick(steps=8), corpus_text=text, resume=True, weights_dir=tmp_path))


def test_a_saved_chain_state_does_not_load_into_adamw_alone():
    model = GPT(ModelConfig(vocabulary_size=11, **SMALL)).train()
    chain = configure_optimizer(model, quick(), CPU)
    x = torch.randint(0, 11, (2, 16))
    model(x, x).loss.backward()
    chain.step()
    state = optim_state.flatten_optimizer_state(chain, model)
    with pytest.raises(optim_state.OptimizerStateError, match="is for Muon\\+AdamW, not AdamW"):
        optim_state.restore_optimizer_state(configure_optimizer(model, quick(optimizer="adamw"), CPU), model, *state)


def test_the_cli_flag_sets_the_optimizer_and_refuses_others(capsys):
    args = train_cli.build_parser().parse_args(["--optimizer", "muon", "--steps", "7"])
    assert train_cli.request_from_args(args).train.optimizer == "muon"
    assert train_cli.request_from_args(train_cli.build_parser().parse_args([])).train.optimizer == "muon"  # tiny's
    toy = train_cli.build_parser().parse_args(["--preset", "toy"])
    assert train_cli.request_from_args(toy).train.optimizer == "adamw"  # each preset's own
    with pytest.raises(SystemExit):
        train_cli.build_parser().parse_args(["--optimizer", "sgd"])
    assert "invalid choice: 'sgd'" in capsys.readouterr().err


def _muon_pair(shapes=((24, 8), (8, 40)), first=torch.optim.Muon):
    """Weights of these shapes and clones of them, under a ``first`` Muon and our Muon with the same settings."""
    weights = [torch.nn.Parameter(torch.randn(shape)) for shape in shapes]
    copies = [torch.nn.Parameter(w.detach().clone()) for w in weights]
    kwargs = dict(lr=0.02, weight_decay=0.1, adjust_lr_fn="match_rms_adamw")
    return weights, copies, first(weights, **kwargs), optimizers.Muon(copies, **kwargs)


def _same_gradients(weights, copies, generator: torch.Generator) -> None:
    """A fresh random gradient for each weight, and the same one for its copy."""
    for a, b in zip(weights, copies, strict=True):
        a.grad = torch.randn(a.shape, generator=generator)
        b.grad = a.grad.clone()


@pytest.mark.parametrize("nesterov", [True, False])
def test_our_muon_in_bfloat16_is_torchs_muon_bit_for_bit(monkeypatch, nesterov):
    monkeypatch.setattr(optimizers, "newton_schulz_dtype", lambda device: torch.bfloat16)
    torch.manual_seed(0)
    weights, copies, theirs, ours = _muon_pair()
    for group in (*theirs.param_groups, *ours.param_groups):
        group["nesterov"] = nesterov
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        _same_gradients(weights, copies, generator)
        theirs.step()
        ours.step()
    for a, b in zip(weights, copies, strict=True):
        assert torch.equal(a, b)
    assert all(torch.equal(theirs.state[a]["momentum_buffer"], ours.state[b]["momentum_buffer"])
               for a, b in zip(weights, copies, strict=True))


def test_on_the_cpu_our_muon_orthogonalises_in_float32_closer_to_exact():
    torch.manual_seed(2)
    update = torch.randn(48, 16)
    exact_u, _, exact_vt = torch.linalg.svd(update, full_matrices=False)
    exact = exact_u @ exact_vt  # U V^T: what Newton–Schulz approximates (its singular values land near 1)
    coefficients = (3.4445, -4.775, 2.0315)
    single = optimizers.newton_schulz(update, coefficients, 5, 1e-7, torch.float32)
    half = optimizers.newton_schulz(update, coefficients, 5, 1e-7, torch.bfloat16).float()
    assert optimizers.newton_schulz_dtype(torch.device("cpu")) == torch.float32
    assert optimizers.newton_schulz_dtype(torch.device("cuda")) == torch.bfloat16
    assert single.dtype == torch.float32 and single.shape == update.shape
    # the same iteration: float32 and bfloat16 agree to bfloat16's precision, and both stay near U V^T's directions
    assert (single - half).abs().max() < 0.05
    assert torch.nn.functional.cosine_similarity(single.flatten(), exact.flatten(), dim=0) > 0.9
    singular = torch.linalg.svdvals(single)
    assert singular.min() > 0.5 and singular.max() < 1.5  # Muon's quintic: singular values in about (0.5, 1.5)


def test_configure_optimizer_uses_the_cpu_friendly_muon():
    model = GPT(ModelConfig(vocabulary_size=11, context_size=8, embedding_dim=16, heads_num=2, layers_num=1))
    chain = configure_optimizer(model, TrainConfig(optimizer="muon"), torch.device("cpu"))
    assert isinstance(chain.optimizers[0], optimizers.Muon)


def test_on_the_cpu_same_shaped_matrices_are_orthogonalised_together_with_the_same_result():
    torch.manual_seed(3)
    coefficients = (3.4445, -4.775, 2.0315)
    stack = torch.randn(3, 8, 24)
    batched = optimizers.newton_schulz_batched(stack, coefficients, 5, 1e-7)
    one_by_one = torch.stack([optimizers.newton_schulz(m, coefficients, 5, 1e-7, torch.float32) for m in stack])
    torch.testing.assert_close(batched, one_by_one, rtol=1e-5, atol=1e-6)

    # the optimizer: tall, wide and square matrices, two of each shape (a tall one shares its wide twin's bucket),
    # step for step the per-matrix float32 update that the accelerator path computes in bfloat16
    shapes = [(24, 8), (8, 24), (24, 8), (16, 16), (16, 16)]
    weights, copies, batched_muon, reference = _muon_pair(shapes, first=optimizers.Muon)
    generator = torch.Generator().manual_seed(4)
    for _ in range(3):
        _same_gradients(weights, copies, generator)
        batched_muon.step()
        with pytest.MonkeyPatch.context() as patch:  # per matrix: the non-float32 path, here in float64
            patch.setattr(optimizers, "newton_schulz_dtype", lambda device: torch.float64)
            reference.step()
    for a, b in zip(weights, copies, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
