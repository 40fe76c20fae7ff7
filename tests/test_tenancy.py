"""The server's tenancy: owner records, the stored runs, making room fairly (server/tenancy.py)."""

import os
import time

import pytest
from test_checkpoints import make_model

from playground.checkpoints import store as checkpoints
from playground.checkpoints.store import CheckpointError, save_checkpoint
from playground.server import tenancy


def visitor_run(directory, name, age, owner="a" * 64, padding=0, client=None):
    """A saved run ``age`` seconds old (by its weights' time), owned by ``owner`` (None: an operator's), from
    ``client``."""
    model, tokenizer = make_model()
    training = {"steps_done": 1, **({"owner": owner} if owner else {}), **({"client": client} if client else {})}
    path = save_checkpoint(model, tokenizer, name, directory=directory, training=training)
    if padding:
        (path / "README.md").write_bytes(b"x" * padding)
    moment = time.time() - age
    os.utime(path / "model.safetensors", (moment, moment))
    return path


def visible(directory):
    return sorted(p.name for p in directory.iterdir() if not p.name.startswith("."))


def test_owner_records(tmp_path):
    token = "a-browser-token"
    assert tenancy.owner_hash(token) == tenancy.owner_hash(token) != tenancy.owner_hash(token + "x")
    assert token not in tenancy.owner_hash(token) and len(tenancy.owner_hash(token)) == 64
    visitor_run(tmp_path, "my-run-1", age=5, owner=tenancy.owner_hash(token))
    visitor_run(tmp_path, "operators", age=5, owner=None)
    assert tenancy.recorded_owner("my-run-1", tmp_path) == tenancy.owner_hash(token)
    assert tenancy.recorded_owner("operators", tmp_path) is None
    assert tenancy.recorded_owner("absent", tmp_path) is None


def test_make_room_removes_the_oldest_visitor_runs_first(tmp_path):
    checkpoints.recover(tmp_path)
    visitor_run(tmp_path, "shakespeare-char", age=100, owner="a" * 64)  # shipped, oldest, even with an owner
    visitor_run(tmp_path, "operators", age=90, owner=None)  # the command line's: not a visitor run
    for age, name in [(40, "v-old"), (30, "v-middle"), (20, "v-new"), (10, "v-newest")]:
        visitor_run(tmp_path, name, age)
    removed = tenancy.make_room(tmp_path, 1000, max_runs=3, max_bytes=10**9)
    assert removed == ["v-old", "v-middle"]  # 4 visitor runs and the incoming one: 5 -> 3
    assert visible(tmp_path) == ["operators", "shakespeare-char", "v-new", "v-newest"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith((".tmp-", ".old-"))]
    assert tenancy.make_room(tmp_path, 1000, max_runs=3, max_bytes=10**9) == []  # 2 + 1 fit


def test_one_visitor_cannot_wipe_out_other_visitors_recent_runs(tmp_path):
    """The stranger's attack: 18 one-step runs from one session removed everyone's runs. Now a visitor's own oldest
    go past their share, other visitors' runs only once unsaved for ``protect_seconds``, and a full server of
    others' recent runs refuses with when room may come, removing nothing."""
    alice, mallory = "a" * 64, "m" * 64
    rules = dict(max_runs=4, max_bytes=10**9, max_per_owner=2, protect_seconds=3600)
    visitor_run(tmp_path, "alice-1", age=7200, owner=alice)  # unsaved for two hours: may go for anyone
    visitor_run(tmp_path, "alice-2", age=600, owner=alice)
    for index, age in enumerate((500, 400)):
        visitor_run(tmp_path, f"spam-{index}", age=age, owner=mallory)
    # mallory's third run: over mallory's share of 2, so mallory's own oldest goes, no one else's
    assert tenancy.make_room(tmp_path, 1000, owner=mallory, **rules) == ["spam-0"]
    visitor_run(tmp_path, "spam-2", age=10, owner=mallory)
    assert tenancy.make_room(tmp_path, 1000, owner=mallory, **rules) == ["spam-1"]
    visitor_run(tmp_path, "spam-3", age=5, owner=mallory)
    assert visible(tmp_path) == ["alice-1", "alice-2", "spam-2", "spam-3"]
    # a new visitor when the server is full: alice's run unsaved for two hours goes, never her recent one
    assert tenancy.make_room(tmp_path, 1000, owner="n" * 64, **rules) == ["alice-1"]
    visitor_run(tmp_path, "newcomer", age=1, owner="n" * 64)
    with pytest.raises(CheckpointError, match=r"runs saved in the last 60 minutes, which are kept at least that long; "
                                              r"the oldest of them may make room in about 50 minutes"):
        tenancy.make_room(tmp_path, 1000, owner="o" * 64, **rules)
    assert visible(tmp_path) == ["alice-2", "newcomer", "spam-2", "spam-3"]  # a refusal removes nothing
    # without an owner (the rules of old): the oldest go first, whoever saved them
    assert tenancy.make_room(tmp_path, 1000, max_runs=4, max_bytes=10**9) == ["alice-2"]


def test_make_room_counts_bytes_keeps_what_it_is_told_and_never_half_does_it(tmp_path):
    for age, name in [(30, "a"), (20, "b"), (10, "c")]:
        visitor_run(tmp_path, name, age, padding=100_000)
    size = sum(run.size for run in tenancy.stored_runs(tmp_path)) // 3
    # room for two runs' bytes, the incoming one included: the two oldest go unless kept
    assert tenancy.make_room(tmp_path, size, max_runs=20, max_bytes=2 * size, keep={"a"}) == ["b", "c"]
    assert visible(tmp_path) == ["a"]
    visitor_run(tmp_path, "b", 20, padding=100_000)
    # a run being replaced (resumed, or started over) is not counted: it makes way for itself
    assert tenancy.make_room(tmp_path, size, max_runs=2, max_bytes=10**9, replacing="a") == []
    with pytest.raises(CheckpointError, match="keeps at most 20 visitor runs in 100,000 bytes; lower the model's size"):
        tenancy.make_room(tmp_path, 10**9, max_runs=20, max_bytes=100_000)
    assert visible(tmp_path) == ["a", "b"]  # a refusal removes nothing


# ------------------------------------------------------------------------------------------- clients, not sessions
def test_the_client_is_the_hop_the_proxy_appended_only_behind_a_trusted_proxy():
    headers = {"x-forwarded-for": "10.9.9.9, 203.0.113.7"}  # the first hop is what the client sent: never read
    assert tenancy.client_address(headers, "10.0.0.2", trust_forwarded=True) == "203.0.113.7"
    assert tenancy.client_address(headers, "10.0.0.2", trust_forwarded=False) == "10.0.0.2"  # a forgeable header
    assert tenancy.client_address({}, "192.0.2.1", trust_forwarded=True) == "192.0.2.1"
    assert tenancy.client_address(None, None, trust_forwarded=True) == tenancy.LOCAL_CLIENT
    assert len(tenancy.client_address({"x-forwarded-for": "x" * 10_000}, None, trust_forwarded=True)) == 64
    assert tenancy.client_hash("203.0.113.7") != tenancy.client_hash("203.0.113.8")
    assert "203.0.113.7" not in tenancy.client_hash("203.0.113.7")
    assert tenancy.Visitor("o" * 64, client="c" * 64).share == "c" * 64 and tenancy.Visitor("o" * 64).share == "o" * 64


def test_a_client_changing_session_id_meets_one_share_and_leaves_everyone_elses_runs(tmp_path):
    """A visitor who changed session id every 4 runs filled the 20-run limit in 27 s and everyone else's runs were
    refused for an hour: the share is the client's, whatever owner hash each run records."""
    mallory, alice = "m" * 64, "a" * 64
    rules = dict(max_runs=20, max_bytes=10**9, max_per_owner=5, protect_seconds=3600)
    visitor_run(tmp_path, "alice-1", age=100, owner="o" * 64, client=alice)
    for index in range(5):  # five runs, each from a fresh session of one client
        visitor_run(tmp_path, f"spam-{index}", age=50 - index, owner=f"{index}" * 64, client=mallory)
    removed = tenancy.make_room(tmp_path, 1000, owner="9" * 64, client=mallory, **rules)
    assert removed == ["spam-0"]  # the client's own oldest, never alice's
    assert [run.client for run in tenancy.stored_runs(tmp_path) if run.name == "alice-1"] == [alice]
