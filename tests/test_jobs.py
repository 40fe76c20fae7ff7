import dataclasses
import functools
import json
import re
import threading
import time

import pytest
import torch

from playground.budget import BudgetError, MemoryBudget
from playground.config import TrainConfig
from playground.server import admission
from playground.server.jobs import FAILED, FINISHED, STOPPED, JobBusyError, JobStatus, NotYourRunError, TrainingJobs
from playground.server.tenancy import Visitor
from playground.training.loop import StepMetrics, TrainResult
from playground.training.probes import ProbeSnapshot
from playground.training.run import RunRequest, run_training

SMALL = dict(layers_num=1, heads_num=2, embedding_dim=16, context_size=16, dropout_rate=0.0, use_bias=False)


def request(tmp_path, text, steps=40, name="job"):
    config = TrainConfig(batch_size=4, steps=steps, learning_rate=3e-3, warmup_steps=1, eval_interval=5,
                         eval_batches=1, checkpoint_interval=1000, sample_interval=10, seed=0)
    return RunRequest(name, SMALL, config, corpus_text=text, weights_dir=tmp_path)


def slow_execute(delay):
    def execute(run, **callbacks):
        original = callbacks["on_step"]

        def on_step(step, metrics):
            time.sleep(delay)
            original(step, metrics)
        return run_training(run, **{**callbacks, "on_step": on_step})
    return execute


def wait_for_a_step(jobs, seconds=60):
    deadline = time.monotonic() + seconds
    while jobs.status().step == 0 and time.monotonic() < deadline:
        time.sleep(0.05)


def test_start_status_finish(tmp_path, shakespeare_text):
    jobs = TrainingJobs()
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=20))
    status = jobs.wait(30)
    assert status.state == FINISHED and status.step == 20
    assert len(status.train_loss) == 20 and [p[0] for p in status.val_loss] == [5, 10, 15, 20]
    seconds = [p[2] for p in status.val_loss]  # (step, loss, seconds since the run started)
    assert seconds == sorted(seconds) and seconds[0] > 0
    assert [s for s, _ in status.samples] == [10, 20]
    assert [p.step for p in status.probes] == [0, 5, 10, 15, 20]
    assert status.probes[-1].weights.shape[:2] == (1, 2)
    assert (tmp_path / "job" / "model.safetensors").is_file()


def test_second_start_is_refused_then_stop_keeps_checkpoint(tmp_path, shakespeare_text):
    jobs = TrainingJobs(execute=slow_execute(0.02))
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=500))
    with pytest.raises(JobBusyError, match=r"a run is in progress \(job, started .*, step \d+ of 500\)"):
        jobs.start(request(tmp_path, shakespeare_text[:5000], name="other"))
    wait_for_a_step(jobs)
    jobs.stop()
    status = jobs.wait(30)
    assert status.state == STOPPED and 0 < status.step < 500
    assert status.samples[-1][0] == status.step  # a Stop between samples still shows what the model writes now
    assert not (tmp_path / "other").exists() and (tmp_path / "job" / "training.json").is_file()


def test_a_crash_in_the_thread_is_reported_and_frees_the_slot(tmp_path, shakespeare_text):
    def crash(run, **callbacks):
        raise RuntimeError("device fell over")

    jobs = TrainingJobs(execute=crash)
    jobs.start(request(tmp_path, shakespeare_text[:5000]))
    status = jobs.wait(10)
    assert status.state == FAILED and "device fell over" in status.message and not status.active
    assert status.message.endswith("It failed before its first checkpoint, so it saved none.")  # no false comfort
    jobs._execute = run_training
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=5))
    assert jobs.wait(30).state == FINISHED
    jobs._execute = crash  # the same run crashing again: its checkpoint of 5 steps is there and is said to be
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=5))
    assert jobs.wait(10).message.endswith("The last good checkpoint is kept.")


def test_bad_request_fails_at_start_and_leaves_the_slot_free(tmp_path):
    jobs = TrainingJobs()
    with pytest.raises(ValueError, match="too short"):
        jobs.start(request(tmp_path, "short text"))
    assert jobs.status().state == "idle"


def test_a_refused_start_keeps_the_last_runs_status(tmp_path, shakespeare_text):
    """A refused Resume (a spent time budget, here) leaves the finished run on screen: its curve and message."""
    jobs = TrainingJobs()
    text = shakespeare_text[:5000]
    budgeted = dataclasses.replace(request(tmp_path, text, steps=20_000), train=TrainConfig(
        batch_size=4, steps=20_000, eval_interval=10**5, eval_batches=1, time_budget_seconds=0.3))
    jobs.start(budgeted)
    finished = jobs.wait(30)
    assert finished.state == FINISHED and "finished: its time budget (0.3s) ended it at step" in finished.message
    assert finished.progress == 1.0
    with pytest.raises(ValueError, match="its whole time budget of 0.3 s"):
        jobs.start(dataclasses.replace(budgeted, resume=True))
    after = jobs.status()
    assert (after.state, after.run_name, after.message, after.val_loss, after.train_loss) == \
        (finished.state, finished.run_name, finished.message, finished.val_loss, finished.train_loss)


def test_status_is_shared_across_viewers(tmp_path, shakespeare_text):
    """A reloaded page is just another status() call on the same manager."""
    jobs = TrainingJobs(execute=slow_execute(0.01), prepare=admission.prepare)
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=30))
    first, second = jobs.status(), jobs.status()
    assert first.run_name == second.run_name == "job" and first.started_at == second.started_at
    jobs.wait(30)


def test_the_manager_only_records_what_the_run_reports(tmp_path, shakespeare_text):
    """The run does the work (steps, samples, probes); the thread only files its reports under the lock."""
    def scripted(run, *, on_step, should_stop, on_sample, on_probe):
        on_probe(ProbeSnapshot(0, ["a"], torch.ones(1, 1, 1, 1)))
        on_step(1, StepMetrics(1, 2, 3.0, 1e-3, 100.0, 0.1, val_loss=2.5))
        on_sample(1, "sampled")
        return TrainResult(steps_done=1, stopped=True)

    jobs = TrainingJobs(execute=scripted)
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=2))
    status = jobs.wait(10)
    assert status.state == STOPPED and status.message == "stopped at step 1; checkpoint saved as job"
    assert status.train_loss == ((1, 3.0),) and status.val_loss == ((1, 2.5, 0.1),)  # (step, loss, seconds)
    assert status.samples == ((1, "sampled"),)
    assert [p.step for p in status.probes] == [0] and status.tokens_per_second == 100.0


OWNER, OTHER, ADMIN = Visitor("a" * 64), Visitor("b" * 64), Visitor("c" * 64, admin=True)




def test_only_the_owner_or_the_admin_stops_a_run(tmp_path, shakespeare_text):
    jobs = TrainingJobs(execute=slow_execute(0.02))
    jobs.start(request(tmp_path, shakespeare_text[:5000], 500), OWNER)
    assert jobs.owned_by(OWNER) and jobs.owned_by(ADMIN) and not jobs.owned_by(OTHER) and not jobs.owned_by(None)
    with pytest.raises(NotYourRunError, match=r"^this run belongs to another visitor; it ends by itself at step 500 "
                                              r"\(or after 1h 00m, this server's time limit\) or when its owner "
                                              r"stops it$"):
        jobs.stop(OTHER)
    assert jobs.status().state == "running"
    status = jobs.status()
    assert "a" * 64 not in repr(status)  # what every viewer polls names no owner
    jobs.stop(OWNER)
    assert jobs.wait(30).state == STOPPED
    jobs.stop(OTHER)  # nothing runs: nothing to refuse
    jobs.start(request(tmp_path, shakespeare_text[:5000], 500, name="job2"), OWNER)
    jobs.stop(ADMIN)
    assert jobs.wait(30).state == STOPPED


@pytest.mark.parametrize("ending", ["finish", "stop", "crash"])
def test_a_run_holds_its_memory_until_it_ends_however_it_ends(tmp_path, shakespeare_text, ending):
    budget = MemoryBudget(8 * 2**30)
    proceed = threading.Event()  # the run waits until the test has seen its memory held

    def crash_later(run, **callbacks):
        callbacks["on_step"](1, StepMetrics(1, 2, 3.0, 1e-3, 100.0, 0.1))
        raise RuntimeError("device fell over")

    work = {"finish": run_training, "stop": slow_execute(0.02), "crash": crash_later}[ending]

    def execute(run, **callbacks):
        proceed.wait(30)
        return work(run, **callbacks)

    jobs = TrainingJobs(prepare=functools.partial(admission.prepare, budget=budget), execute=execute)
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=10 if ending == "finish" else 500), OWNER)
    assert budget.reserved > 0
    if ending == "stop":
        jobs.stop(OWNER)
    proceed.set()
    status = jobs.wait(60)
    assert status.state == {"finish": FINISHED, "stop": STOPPED, "crash": FAILED}[ending], status.message
    assert budget.reserved == 0


def test_a_refused_start_holds_no_memory_and_leaves_the_slot_free(tmp_path, shakespeare_text):
    budget = MemoryBudget(8 * 2**30)
    jobs = TrainingJobs(prepare=functools.partial(admission.prepare, budget=budget))
    killer = dict(layers_num=1, heads_num=1, embedding_dim=1024, context_size=1024, dropout_rate=0.0,
                  use_bias=False)
    big = dataclasses.replace(request(tmp_path, shakespeare_text[:50_000], 500), model=killer,
                              train=TrainConfig(batch_size=1024, steps=10))
    with pytest.raises(BudgetError, match="lower batch_size to at most"):
        jobs.start(big, OWNER)
    assert budget.reserved == 0 and jobs.status().state == "idle"


def test_the_time_limit_ends_a_run_with_a_message(tmp_path, shakespeare_text):
    def prepare(request, visitor, **options):
        run = admission.prepare(request, visitor, **options)
        run.max_seconds = 0.3
        return run

    jobs = TrainingJobs(prepare=prepare, execute=slow_execute(0.01))
    jobs.start(request(tmp_path, shakespeare_text[:5000], 500), OWNER)
    status = jobs.wait(60)
    assert status.state == STOPPED and 0 < status.step < 500
    assert status.samples[-1][0] == status.step  # a Stop between samples still shows what the model writes now
    assert re.match(r"stopped by this server's time limit \(0s\) at step \d+; checkpoint saved as job$", status.message)


def test_a_resumed_run_counts_its_earlier_time_in_elapsed(tmp_path, shakespeare_text):
    jobs = TrainingJobs()
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=20))
    first = jobs.wait(30)
    earlier = json.loads((tmp_path / "job" / "training.json").read_text())["wall_seconds"]
    jobs.start(dataclasses.replace(request(tmp_path, shakespeare_text[:5000], steps=30), resume=True))
    status = jobs.wait(30)
    assert status.state == FINISHED and status.start_step == first.step == 20
    assert status.seconds_before == pytest.approx(earlier) and status.total_seconds > earlier


def test_how_a_run_ends_reads_as_one_sentence():
    budgeted = JobStatus(steps=3000, time_budget_seconds=50, time_limit_seconds=3600)
    assert budgeted.how_it_ends() == ("it ends by itself at step 3000 or once its training steps have taken 50s (its "
                                      "time budget), after 1h 00m at the latest (this server's time limit), or when "
                                      "its owner stops it")
    assert JobStatus(steps=500).how_it_ends() == "it ends by itself at step 500 or when its owner stops it"


def test_the_slot_is_counted_against_the_starters_client_until_the_run_ends(tmp_path, shakespeare_text):
    clock = admission.TrainingClock()
    visitor = Visitor("d" * 64, client="9" * 64)
    proceed = threading.Event()

    def execute(run, **callbacks):
        proceed.wait(30)
        return run_training(run, **callbacks)

    jobs = TrainingJobs(prepare=functools.partial(admission.prepare, clock=clock), execute=execute, clock=clock)
    jobs.start(request(tmp_path, shakespeare_text[:5000], steps=5), visitor)
    assert [hold[1] for hold in clock._holds[visitor.share]] == [None]  # held while it runs
    proceed.set()
    assert jobs.wait(30).state == FINISHED
    assert clock._holds[visitor.share][0][1] is not None and clock.held(visitor.share) > 0
    assert clock.held(OWNER.share) == 0
