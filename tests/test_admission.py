"""The server's admission of a visitor's run (server/admission.py): who may write what, time, memory, disk, and the
Train tab's side-effect-free preview of the same checks."""

import json
import re
import shutil
import threading
import time

import pytest
from conftest import SHARED_CORPUS

from playground.budget import BudgetError, Cost, MemoryBudget, largest_batch
from playground.checkpoints import store as checkpoints
from playground.config import ConfigError, Limits, ModelConfig, TrainConfig
from playground.server import admission, tenancy
from playground.server.tenancy import Visitor
from playground.text.data import CorpusError
from playground.training.estimates import step_seconds
from playground.training.run import RunRequest, prepare_run, run_training

SMALL = dict(layers_num=1, heads_num=2, embedding_dim=16, context_size=16, dropout_rate=0.0, use_bias=False)
VISITOR, OTHER, ADMIN = Visitor("a" * 64), Visitor("b" * 64), Visitor("c" * 64, admin=True)
TEXT = "hello there, general kenobi. " * 200


def quick(steps=20, **changes) -> TrainConfig:
    values = dict(batch_size=8, steps=steps, learning_rate=3e-3, warmup_steps=2, eval_interval=10, eval_batches=2,
                  checkpoint_interval=1000, sample_interval=1000, seed=0)
    return TrainConfig(**{**values, **changes})


def admitted(tmp_path, name="mine", visitor=VISITOR, *, limits=None, budget=None, replace=False, clock=None,
             **changes):
    """``name``'s run as a visitor asks for it, through admission.prepare."""
    request = RunRequest(**{**dict(run_name=name, model=SMALL, train=quick(steps=4), corpus_text=TEXT,
                                   weights_dir=tmp_path), **changes})
    return admission.prepare(request, visitor, limits or Limits(), budget, replace=replace, clock=clock)


def finished(tmp_path, name, visitor=VISITOR, steps=4):
    run_training(admitted(tmp_path, name, visitor, train=quick(steps=steps)))


def owner(run):
    return run.record.get(tenancy.OWNER_FIELD)


# ------------------------------------------------------------------------------------------ who may write what
@pytest.mark.parametrize("resume", [False, True])
def test_a_shipped_checkpoint_is_read_only_for_every_visitor(tiny_weights, tmp_path, resume):
    shutil.copytree(tiny_weights / "shakespeare-char", tmp_path / "shakespeare-char")
    before = (tmp_path / "shakespeare-char" / "model.safetensors").read_bytes()
    for who in (VISITOR, ADMIN):
        with pytest.raises(ValueError, match="came with the app and is read-only for everyone.*my-run-1"):
            admitted(tmp_path, "shakespeare-char", who, resume=resume, replace=True, corpus_path=str(SHARED_CORPUS),
                     corpus_text=None, train=quick(steps=40))
    assert (tmp_path / "shakespeare-char" / "model.safetensors").read_bytes() == before
    assert checkpoints.is_shipped("shakespeare-char") and not checkpoints.is_shipped("my-run-1")
    # the command line is the operator's: it may rebuild a shipped checkpoint (that is how it was made)
    prepare_run(RunRequest("shakespeare-char", SMALL, quick(), corpus_text=TEXT, weights_dir=tmp_path))


def test_an_existing_run_is_replaced_only_on_purpose_and_only_by_its_owner(tmp_path):
    finished(tmp_path, "mine")
    record = json.loads((tmp_path / "mine" / "training.json").read_text())
    assert record["owner"] == VISITOR.owner
    with pytest.raises(ValueError, match=r"a run named 'mine' already exists: tick \"replace it\".*such as my-run-1"):
        admitted(tmp_path)
    with pytest.raises(ValueError, match="belongs to another visitor: only its owner can replace it"):
        admitted(tmp_path, visitor=OTHER, replace=True)
    assert owner(admitted(tmp_path, replace=True)) == VISITOR.owner
    assert owner(admitted(tmp_path, visitor=ADMIN, replace=True)) == ADMIN.owner
    assert json.loads((tmp_path / "mine" / "training.json").read_text())["owner"] == VISITOR.owner  # untouched


def test_resume_continues_your_own_run_only(tmp_path):
    finished(tmp_path, "mine")
    run_training(prepare_run(RunRequest("operators", SMALL, quick(steps=4), corpus_text=TEXT, weights_dir=tmp_path)))
    assert tenancy.recorded_owner("operators", tmp_path) is None  # the command line records no owner
    with pytest.raises(ValueError, match="belongs to another visitor: only its owner can resume it"):
        admitted(tmp_path, visitor=OTHER, resume=True, train=quick(steps=8))
    with pytest.raises(ValueError, match="no owner record.*only the Space owner's admin token can resume it"):
        admitted(tmp_path, "operators", resume=True, train=quick(steps=8))
    with pytest.raises(ValueError, match="no checkpoint named 'nothing' to resume"):
        admitted(tmp_path, "nothing", resume=True, train=quick(steps=8))
    assert admitted(tmp_path, resume=True, train=quick(steps=8)).start_step == 4
    admin_run = admitted(tmp_path, visitor=ADMIN, resume=True, train=quick(steps=8))
    assert owner(admin_run) == VISITOR.owner  # the admin's resume leaves the run its owner's
    assert owner(admitted(tmp_path, "operators", ADMIN, resume=True, train=quick(steps=8))) is None


def test_the_command_line_resuming_a_visitors_run_keeps_its_owner_record(tmp_path):
    """run.py knows no owners: a resumed checkpoint's record keeps the fields the run does not write."""
    finished(tmp_path, "mine")
    run_training(prepare_run(RunRequest("mine", SMALL, quick(steps=6), corpus_text=TEXT, weights_dir=tmp_path,
                                        resume=True)))
    record = json.loads((tmp_path / "mine" / "training.json").read_text())
    assert record["owner"] == VISITOR.owner and record["steps_done"] == 6


def test_resume_meets_the_size_caps_too(tmp_path):
    big = dict(SMALL, embedding_dim=64, context_size=32)
    run_training(admitted(tmp_path, model=big))
    with pytest.raises(ConfigError, match="mine would have [0-9,]+ parameters; this server's limit is 20,000"):
        admitted(tmp_path, resume=True, train=quick(steps=8), limits=Limits(max_parameters=20_000))
    with pytest.raises(ConfigError, match="context_size 32 is above this server's limit of 16"):
        admitted(tmp_path, resume=True, train=quick(steps=8), limits=Limits(max_context_size=16))


# ----------------------------------------------------------------------------------------------- time and memory
def test_a_run_past_the_time_limit_is_refused_with_the_steps_that_fit(tmp_path):
    """The issue's 19.8M-parameter run (a 102-hour ETA on the 2-core CPU) never takes the only slot."""
    huge = dict(layers_num=8, heads_num=8, embedding_dim=448, context_size=256, dropout_rate=0.0, use_bias=False)
    config = ModelConfig(vocabulary_size=len(set(TEXT)), **huge)
    assert 19e6 < config.parameter_count() < 20e6
    with pytest.raises(ConfigError) as caught:
        admitted(tmp_path, model=huge, train=quick(steps=5000, batch_size=64), corpus_text=TEXT * 3,
                 limits=Limits(max_train_seconds=1800))
    message = str(caught.value)
    per_step = step_seconds(config, 64)
    assert f"this server stops a run after 30m 00s: lower steps to at most {int(1800 // per_step):,}" in message
    assert re.search(r"about \d+h \d\dm", message) and not (tmp_path / "mine").exists()
    the_cli = prepare_run(RunRequest("mine", huge, quick(steps=5000, batch_size=64), corpus_text=TEXT * 3,
                                     weights_dir=tmp_path), Limits())
    assert the_cli.max_seconds is None


def test_a_run_stops_and_saves_when_its_time_is_up(tmp_path, monkeypatch):
    run = admitted(tmp_path, train=quick(steps=10_000), limits=Limits(max_train_seconds=3600))
    assert run.max_seconds == 3600
    run.max_seconds = 0.5
    result = run_training(run)
    assert result.stopped and result.stop_reason == "time limit" and 0 < result.steps_done < 10_000
    assert json.loads((tmp_path / "mine" / "training.json").read_text())["steps_done"] == result.steps_done


def test_the_killer_request_is_refused_with_the_batch_that_fits(tmp_path):
    """1 layer, 1 head, embedding 1024, context 1024, batch 1024: ~150 GiB; refused before any model exists."""
    killer = dict(layers_num=1, heads_num=1, embedding_dim=1024, context_size=1024, dropout_rate=0.0, use_bias=False)
    budget = MemoryBudget(8 * 2**30, "a test's 8 GiB")
    config = ModelConfig(vocabulary_size=len(set(TEXT)), **killer)
    largest = largest_batch(budget.total, parameters=config.parameter_count(), layers_num=1, embedding_dim=1024,
                            context_size=1024, vocabulary_size=config.vocabulary_size)
    with pytest.raises(BudgetError, match=rf"over this server's memory budget of 8.0 GiB.*lower batch_size to at "
                                          rf"most {largest} \(now 1,024\)"):
        admitted(tmp_path, model=killer, train=quick(steps=1, batch_size=1024), corpus_text=TEXT * 5, budget=budget)
    assert budget.reserved == 0 and 1 <= largest < 1024
    preview = admission.preview(config, 1024, 1, Limits(), budget=budget)  # the estimate says so before Start
    assert [refusal for refusal in preview.refusals if f"lower batch_size to at most {largest}" in refusal]
    assert budget.reserved == 0


def test_a_run_holds_its_memory_until_it_ends_and_a_refusal_gives_it_back(tmp_path, monkeypatch):
    budget = MemoryBudget(8 * 2**30, "a test's 8 GiB")
    run = admitted(tmp_path, budget=budget)
    assert budget.reserved == run.memory == run.cost.bytes > 0
    run.release_memory()
    run.release_memory()  # once only
    assert budget.reserved == 0
    with pytest.raises(ConfigError, match="this server stops a run"):  # a refusal after the reservation
        admitted(tmp_path, "long", budget=budget, train=quick(steps=20_000), limits=Limits(max_train_seconds=1))
    assert budget.reserved == 0
    hog = MemoryBudget(8 * 2**30)
    hog.acquire(Cost("others", (("held", 8 * 2**30 - 2**20),)))
    with pytest.raises(BudgetError, match="other requests hold .*; to fit now, even batch_size 1 does not fit"):
        admitted(tmp_path, "later", budget=hog)


# --------------------------------------------------------------------------------------------- corpora and disk
def test_a_visitors_corpus_is_capped_in_bytes_and_named_as_theirs(tmp_path):
    text = "é" * 2000  # 2,000 characters, 4,000 bytes of UTF-8
    for uploaded, label in [(True, "an uploaded file"), (False, "the pasted text")]:
        with pytest.raises(CorpusError, match=f"{label} is larger than this server's limit of 3,000 bytes"):
            admitted(tmp_path, corpus_text=text + "ab" * 10, uploaded=uploaded, limits=Limits(max_upload_bytes=3000))
    run = admitted(tmp_path, uploaded=True, corpus_name="notes")
    assert run.corpus.label == "an uploaded file" and run.corpus.name == "notes"


def test_a_new_run_makes_room_by_removing_the_visitors_own_oldest_never_anothers_recent_run(tmp_path):
    finished(tmp_path, "others", OTHER)  # another visitor's, saved first: the oldest, but saved within the hour
    for name in ("old", "middle", "new"):
        time.sleep(0.02)
        finished(tmp_path, name)
    run_training(prepare_run(RunRequest("operators", SMALL, quick(steps=2), corpus_text=TEXT, weights_dir=tmp_path)))
    run = admitted(tmp_path, "newest", limits=Limits(max_runs=4))
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["middle", "new",
                                                                                         "operators", "others"]
    assert any(note.startswith("to make room, this server removed the run old (a visitor keeps at most 5 runs")
               for note in run.notes), run.notes
    run_training(run)
    with pytest.raises(ValueError, match="kept at least that long"):  # OTHER's run and VISITOR's: all recent
        admitted(tmp_path, "a-stranger", Visitor("d" * 64), limits=Limits(max_runs=4))


# ----------------------------------------------------------------------------------------------------- preview
def test_the_preview_says_what_start_would_refuse_and_changes_nothing(tmp_path):
    config = ModelConfig(vocabulary_size=65, **SMALL)
    limits = Limits(max_train_seconds=1, max_steps=100)
    budget = MemoryBudget(8 * 2**30)
    before = budget.reserved
    preview = admission.preview(config, 8, 5000, limits, budget=budget)
    assert preview.memory > 0 and preview.seconds == preview.by_steps > 1
    assert preview.refusals == ("over this server's 1s limit for a run",
                                "steps 5000 is above this server's limit of 100 (PLAYGROUND_MAX_STEPS)")
    assert budget.reserved == before and not list(tmp_path.iterdir())
    capped = admission.preview(config, 8, 100, limits, time_budget_seconds=0.01)
    assert capped.seconds == 0.01 < capped.by_steps and capped.refusals == ()


# ------------------------------------------------------------------------------------ a client's hour of training
class FakeClock:
    def __init__(self):
        self.now = 10_000.0

    def __call__(self):
        return self.now


def test_the_training_clock_counts_each_clients_last_hour():
    fake = FakeClock()
    clock = admission.TrainingClock(fake)
    hold = clock.started("c")
    fake.now += 3000
    assert clock.held("c") == 3000 and clock.held("other") == 0  # a run still going counts up to now
    clock.ended(hold)
    fake.now += 1000  # the first 400 s of the hold have left the window
    assert clock.held("c") == pytest.approx(2600)
    assert clock.free_in("c", 3600, 1200) == pytest.approx(200)  # 2600 - 200 = 2400 held: 1200 of 3600 back
    fake.now += 3000
    assert clock.held("c") == 0 and not clock._holds  # an hour later nothing is kept


def test_a_client_holds_the_training_slot_at_most_its_hour(tmp_path):
    """One visitor could hold the only training slot for an hour and start again at once."""
    fake = FakeClock()
    clock = admission.TrainingClock(fake)
    limits = Limits(max_train_seconds=600)
    same_client = Visitor("e" * 64, client="1" * 64)  # a new token, the same address
    hold = clock.started(same_client.share)
    fake.now += 500
    clock.ended(hold)
    run = admitted(tmp_path, "short", same_client, limits=limits, clock=clock)
    assert run.max_seconds == 100  # what is left of its hour: the run stops there
    assert run.record == {"owner": "e" * 64, "client": "1" * 64}
    with pytest.raises(ConfigError, match=r"lower steps .* \(what is left of this address's 10m 00s of training an "
                                          r"hour, PLAYGROUND_MAX_TRAIN_SECONDS\)"):
        admitted(tmp_path, "long", same_client, limits=limits, clock=clock, train=quick(steps=20_000, batch_size=64),
                 model=dict(SMALL, embedding_dim=64, context_size=64))
    fake.now += 60
    hold = clock.started(same_client.share)
    fake.now += 60
    clock.ended(hold)
    with pytest.raises(ConfigError, match=r"this address has held the training slot for 9m 20s in the last hour.*"
                                          r"try again in about \d+ minutes"):
        admitted(tmp_path, "again", same_client, limits=limits, clock=clock)
    assert admitted(tmp_path, "someone-else", Visitor("f" * 64, client="2" * 64), limits=limits,
                    clock=clock).max_seconds == 600


# ------------------------------------------------------------------------------------------------ the long lane
def test_long_requests_take_places_short_ones_none_and_a_client_holds_its_share_at_most():
    work = admission.LongWork(places=2, waiting=1, per_client=1, short_seconds=2.0, wait_seconds=30.0)
    assert work.workers == 5
    first, second = work.hold("alice", 30.0), work.hold("bob", 30.0)
    first.__enter__()
    second.__enter__()
    with work.hold("alice", 0.5), work.hold("carol", 1.0):  # short: they run beside two long ones
        pass
    with pytest.raises(admission.BusyError, match="this address already has 1 long request running or waiting"):
        work.hold("alice", 30.0).__enter__()
    placed = threading.Event()

    def carol():
        with work.hold("carol", 30.0):
            placed.set()

    waiter = threading.Thread(target=carol)
    waiter.start()
    while work._queued < 1:  # carol waits for a place
        time.sleep(0.01)
    with pytest.raises(admission.BusyError, match="2 long requests are running and 1 more wait for a place"):
        work.hold("dave", 30.0).__enter__()
    first.__exit__(None, None, None)  # alice's ends: carol takes the place
    assert placed.wait(30)
    waiter.join(30)
    second.__exit__(None, None, None)
    assert (work._running, work._queued, work._clients) == (0, 0, {})


def test_no_free_place_in_time_is_a_refusal_that_holds_nothing():
    work = admission.LongWork(places=1, waiting=1, per_client=2, short_seconds=2.0, wait_seconds=0.05)
    with work.hold(None, 30.0):  # the server's own work counts against no client
        with pytest.raises(admission.BusyError, match="no place for a long request came free in 0.05 s"):
            work.hold("alice", 30.0).__enter__()
    assert (work._running, work._queued, work._clients) == (0, 0, {})


# ------------------------------------------------------------------------------------ a run on a GPU (unmeasured)
@pytest.mark.parametrize("dropout_rate", [0.0, 0.2])
def test_the_cuda_estimate_is_the_cpus_less_the_attention_only_a_cpu_keeps(dropout_rate):
    """No GPU is at hand to measure a CUDA peak on (tests/test_memory_sweep.py measures the CPU's), so this pins the
    arithmetic: on CUDA a run is priced as on the CPU, less the (B, h, T, T) tensors only the CPU keeps, with dropout
    (model.py: scaled_dot_product_attention keeps none on a GPU), counted here by hand."""
    from playground.training.estimates import memory_cost

    B, h, T, L = 8, 8, 256, 2
    config = ModelConfig(vocabulary_size=65, context_size=T, embedding_dim=64, heads_num=h, layers_num=L,
                         dropout_rate=dropout_rate)
    cpu, cuda = dict(memory_cost(config, B, "cpu").parts), dict(memory_cost(config, B, "cuda").parts)
    explicit = {name: size for name, size in cpu.items() if name not in cuda}
    by_hand = B * h * T * T * (24 * L + 8)  # kept per layer for backward, and one layer's scores while built
    assert explicit == ({"(B, h, T, T) attention with dropout": by_hand} if dropout_rate else {})
    assert cuda == {name: size for name, size in cpu.items() if name not in explicit}


def test_a_cuda_run_is_refused_past_the_gpus_free_memory_with_the_batch_that_fits(monkeypatch):
    """On a GPU, admission checks the run's peak against the device's free memory now (torch.cuda.mem_get_info,
    stubbed here) before it reserves the server's budget: past it, refused with the batch that fits; within it,
    reserved."""
    from types import SimpleNamespace

    import torch

    from playground.training import run
    from playground.training.estimates import memory_cost

    config = ModelConfig(vocabulary_size=65, context_size=256, embedding_dim=64, heads_num=8, layers_num=2)
    cost = memory_cost(config, 64, "cuda")
    plan = SimpleNamespace(config=config, cost=cost, device=torch.device("cuda", 0),
                           request=SimpleNamespace(train=SimpleNamespace(batch_size=64)))
    monkeypatch.setattr(run, "describe", lambda device: "CUDA · a stub GPU")
    free = cost.bytes // 2
    monkeypatch.setattr(run, "free_device_memory", lambda device: free)
    budget = MemoryBudget(8 * 2**30)
    with pytest.raises(BudgetError, match=r"free on CUDA · a stub GPU now; lower batch_size to at most ([\d,]+)") as e:
        admission.reserve_memory(plan, budget)
    fits = int(re.search(r"at most ([\d,]+)", str(e.value)).group(1).replace(",", ""))
    assert 1 <= fits < 64 and memory_cost(config, fits, "cuda").bytes <= free < memory_cost(config, fits + 1,
                                                                                           "cuda").bytes
    assert budget.reserved == 0
    monkeypatch.setattr(run, "free_device_memory", lambda device: cost.bytes)
    assert admission.reserve_memory(plan, budget) == cost.bytes == budget.reserved
