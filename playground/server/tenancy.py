"""Who asks, and what is theirs: a visitor, the one rule for changing what someone started, the runs stored in the
weights folder and whose they are, and making room for a new one.

A visitor's run records its owner as ``"owner": owner_hash(token)`` in training.json (never the token), and the
client it came from as ``"client": client_hash(address)`` (never the address). Quotas are by client: the address
the Space's proxy appends to X-Forwarded-For (never a hop the client wrote itself), else the connection's,
so a new session id or token is not a new share. The rules:

    shipped checkpoint           read-only for everyone            (checkpoints.SHIPPED_CHECKPOINTS)
    a name that exists           replaced only on purpose (``replace``) and only by its owner or the admin
    resume                       your own run; one without an owner record only with the admin token
    stop                         your own run, or the admin's token (server/jobs.py asks ``may_change`` too)
    disk                         make_room: a client's own oldest past their share, then others' runs unsaved
                                 for run_keep_seconds; never another client's recent run, never an operator's

The command line is the operator's: it never comes here, and a run it starts records no owner.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

from playground.checkpoints import store as checkpoints
from playground.checkpoints.export import CLIENT_FIELD, OWNER_FIELD
from playground.config import Limits
from playground.training.estimates import format_seconds

logger = logging.getLogger(__name__)

FORWARDED_FOR = "x-forwarded-for"
LOCAL_CLIENT = "local"  # a call with no connection (a handler called from Python)


def owner_hash(token: str) -> str:
    """What training.json records for the owner of a run: a SHA-256 of their token, never the token itself."""
    return hashlib.sha256(f"attention-playground owner:{token}".encode("utf-8", "surrogatepass")).hexdigest()


def client_hash(address: str) -> str:
    """What training.json and the server's ledgers keep of a client's address: a SHA-256, never the address."""
    return hashlib.sha256(f"attention-playground client:{address}".encode("utf-8", "surrogatepass")).hexdigest()


def trusts_forwarded() -> int:
    """How many proxies in front of the server append to X-Forwarded-For, 0 where none is trusted: on a Hugging Face
    Space (SPACE_ID set) its proxy appends the address it saw; elsewhere only where PLAYGROUND_TRUST_FORWARDED_FOR=1
    says a proxy in front does (a client could forge it otherwise). PLAYGROUND_FORWARDED_PROXIES (Limits) says how
    many there are (1)."""
    if os.environ.get("SPACE_ID") or os.environ.get("PLAYGROUND_TRUST_FORWARDED_FOR", "").strip() == "1":
        return Limits.from_env().forwarded_proxies
    return 0


def client_address(headers, connection_host: str | None, trust_forwarded: int) -> str:
    """Who is asking, by address: the hop of X-Forwarded-For that the last of ``trust_forwarded`` trusted proxies
    appended (True: one), else the connection's address; LOCAL_CLIENT without either. Each proxy appends the
    address it saw, so what the client sent itself comes first and is never read:

        X-Forwarded-For: 6.6.6.6, 203.0.113.7   one proxy -> 203.0.113.7 (6.6.6.6 is the client's own claim)

    A header with fewer hops than proxies came from none of them: the connection's address. At most 64 characters
    are kept (an address is shorter; a forged header longer)."""
    proxies = int(trust_forwarded)
    forwarded = ""
    if proxies > 0 and headers is not None:
        try:
            forwarded = str(headers.get(FORWARDED_FOR) or "")
        except (AttributeError, TypeError):
            forwarded = ""
    hops = [hop.strip() for hop in forwarded.split(",")] if forwarded else []
    appended = hops[-proxies] if proxies > 0 and len(hops) >= proxies else ""
    return (appended or (connection_host or "").strip() or LOCAL_CLIENT)[:64]


def scope_client(scope: dict, trust_forwarded: int) -> str:
    """client_address for an ASGI request's scope (the HTTP middleware's view of a request)."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope.get("headers") or ()}
    host = (scope.get("client") or (None,))[0]
    return client_address(headers, host if isinstance(host, str) else None, trust_forwarded)


@dataclass(frozen=True)
class Visitor:
    """Who asks for a run, or to stop one, through the app (the command line asks as the operator: no Visitor).

    ``owner`` is ``owner_hash`` of their token: what training.json records and the job manager compares, never the
    token itself. ``admin``: the token was the Space owner's PLAYGROUND_ADMIN_TOKEN, which may stop, resume or
    replace any visitor's run (never a shipped checkpoint). ``client``: ``client_hash`` of the address the request
    came from, whose share of the server's quotas it counts against ("" where unknown: the owner stands in).
    """

    owner: str
    admin: bool = False
    client: str = ""

    @property
    def share(self) -> str:
        """Whose quotas this visitor's requests count against: their client, else their owner hash."""
        return self.client or self.owner

    def may_change(self, recorded_owner: str | None) -> bool:
        """Whether this visitor may resume, replace or stop what ``recorded_owner`` started."""
        return self.admin or (recorded_owner is not None and hmac.compare_digest(recorded_owner, self.owner))


def recorded_owner(name: str, directory: Path | None = None) -> str | None:
    """The owner hash a run's training.json records, or None (an operator's run, an older one, or no run)."""
    owner = (checkpoints.read_training(name, directory) or {}).get(OWNER_FIELD)
    return owner if isinstance(owner, str) and owner else None


def owner_to_record(visitor: Visitor | None, name: str, directory: Path | None, *, resume: bool,
                    replace: bool) -> str | None:
    """Apply the rules of the module docstring to a run about to start as ``name``; return the owner hash its
    training.json will record (None: an operator's run). Raises CheckpointError saying what to do instead."""
    recorded = recorded_owner(name, directory)
    if visitor is None:  # the server itself (tests): a resumed run keeps its owner, a new one has none
        return recorded if resume else None
    verb = "resume" if resume else "replace"
    if checkpoints.is_shipped(name):
        raise checkpoints.CheckpointError(
            f"{name!r} came with the app and is read-only for everyone: pick another run name, such as "
            f"{checkpoints.fresh_run_name(directory)}")
    if resume:
        if not checkpoints.exists(name, directory):
            raise checkpoints.MissingCheckpointError(f"no checkpoint named {name!r} to resume")
    elif not checkpoints.exists(name, directory):
        return visitor.owner
    elif not replace:
        raise checkpoints.CheckpointError(
            f"a run named {name!r} already exists: tick \"replace it\" to start it over (only its owner can), or pick "
            f"a new name such as {checkpoints.fresh_run_name(directory)}")
    if not visitor.may_change(recorded):
        if recorded is None:
            raise checkpoints.CheckpointError(
                f"{name!r} was not started by a visitor of this server (it has no owner record): only the Space "
                f"owner's admin token can {verb} it; pick another run name, such as "
                f"{checkpoints.fresh_run_name(directory)}")
        raise checkpoints.CheckpointError(
            f"{name!r} belongs to another visitor: only its owner can {verb} it; pick another run name, such as "
            f"{checkpoints.fresh_run_name(directory)}")
    return recorded if resume else visitor.owner  # a resumed run stays its owner's (an operator's: none)


@dataclass(frozen=True)
class StoredRun:
    name: str
    size: int  # bytes of all its files
    saved_at: float  # when its weights were last written
    owner: str | None  # recorded_owner: None for an operator's run
    client: str | None = None  # the client_hash it records (None for an older run or an operator's)

    def belongs_to(self, owner: str | None, client: str | None) -> bool:
        """Whether this run counts against the share of ``owner`` or of ``client`` (a visitor's own runs)."""
        return (owner is not None and self.owner == owner) or (bool(client) and self.client == client)


def stored_runs(directory: Path | None = None) -> list[StoredRun]:
    """Every run folder in the weights folder (not the shipped ones, not hidden leftovers), oldest save first."""
    parent = checkpoints.weights_dir(directory)
    runs = []
    if not parent.is_dir():
        return runs
    for entry in parent.iterdir():
        if entry.name.startswith(".") or not entry.is_dir() or checkpoints.is_shipped(entry.name):
            continue
        try:
            files = [f for f in entry.iterdir() if f.is_file()]
            size = sum(f.stat().st_size for f in files)
            weights = entry / checkpoints.WEIGHTS_FILE
            saved_at = weights.stat().st_mtime if weights.is_file() else entry.stat().st_mtime
        except OSError:
            continue
        record = checkpoints.read_training(entry.name, parent) or {}
        owner, client = record.get(OWNER_FIELD), record.get(CLIENT_FIELD)
        runs.append(StoredRun(entry.name, size, saved_at, owner if isinstance(owner, str) and owner else None,
                              client if isinstance(client, str) and client else None))
    return sorted(runs, key=lambda run: (run.saved_at, run.name))


def make_room(directory: Path | None, incoming_bytes: int, *, max_runs: int, max_bytes: int,
              keep: frozenset[str] | set[str] = frozenset(), replacing: str | None = None, owner: str | None = None,
              max_per_owner: int | None = None, protect_seconds: float = 0.0, now: float | None = None,
              client: str | None = None) -> list[str]:
    """Remove visitor runs until one more of ``incoming_bytes`` fits; return the names removed.

    The quota counts visitor runs only (those with an owner record): at most ``max_runs`` folders and
    ``max_bytes`` together, the incoming run included. ``replacing`` names the run the incoming one will
    replace (a resumed or replaced run): it is not counted. Never removed: a shipped checkpoint, an operator's
    run (no owner record), ``replacing`` or a name in ``keep`` (a run in progress).

    For a visitor (``owner``, an owner hash, and ``client``, a client hash: a run recording either is theirs) the
    rules are fair to everyone else:

      1. a visitor keeps at most ``max_per_owner`` runs: past it, their own oldest go first (by client too, so one
         client changing session id every few runs meets the same share);
      2. then, for the server's room, other visitors' runs saved more than ``protect_seconds`` ago, oldest first,
         and only then the visitor's own; another visitor's run saved more recently is never removed, so one
         visitor starting many small runs cannot wipe out everyone else's.

    Raises CheckpointError, and removes nothing, when even that would not make room.

        20 visitor runs, max_runs 20: the oldest (no one's within protect_seconds) goes, the new one is the 20th.
    """
    parent = checkpoints.weights_dir(directory)
    now = time.time() if now is None else now
    runs = [run for run in stored_runs(parent) if run.owner is not None and run.name != replacing]
    removable = [run for run in runs if run.name not in keep]
    own = [run for run in removable if run.belongs_to(owner, client)]
    count, total = len(runs) + 1, sum(run.size for run in runs) + incoming_bytes
    doomed: list[StoredRun] = []
    if owner is not None and max_per_owner is not None:
        held = sum(1 for run in runs if run.belongs_to(owner, client)) + 1
        for run in own:
            if held <= max_per_owner:
                break
            doomed.append(run)
            held, count, total = held - 1, count - 1, total - run.size
    others = [run for run in removable if not run.belongs_to(owner, client)]
    protected = [run for run in others if now - run.saved_at < protect_seconds]
    stale = [run for run in others if now - run.saved_at >= protect_seconds]
    for run in stale + [run for run in own if run not in doomed]:
        if count <= max_runs and total <= max_bytes:
            break
        doomed.append(run)
        count, total = count - 1, total - run.size
    if count > max_runs or total > max_bytes:
        if incoming_bytes <= max_bytes and protected:
            wait = max(1, math.ceil((min(run.saved_at for run in protected) + protect_seconds - now) / 60))
            raise checkpoints.CheckpointError(
                f"this server keeps at most {max_runs} visitor runs in {max_bytes:,} bytes, and the room is taken "
                f"by other visitors' runs saved in the last {protect_seconds / 60:g} minutes, which are kept at "
                f"least that long; the oldest of them may make room in about {wait} minute{'s' * (wait != 1)}: "
                "try then, or replace one of your own runs")
        raise checkpoints.CheckpointError(
            f"this run's checkpoint would take about {incoming_bytes:,} bytes and this server keeps at most "
            f"{max_runs} visitor runs in {max_bytes:,} bytes; lower the model's size"
        )
    for run in doomed:
        checkpoints.remove(run.name, parent)
        whose = "this visitor's own oldest" if run.belongs_to(owner, client) else "the oldest"
        logger.info("removed the visitor run %s (%d bytes, %s) to make room", run.name, run.size, whose)
    return [run.name for run in doomed]


def make_room_for(visitor: Visitor, directory: Path | None, incoming_bytes: int, limits: Limits,
                  keep=frozenset(), replacing: str | None = None) -> list[str]:
    """make_room under this server's limits, for a visitor's new run or converted checkpoint: the names of the runs
    removed (their own oldest past ``max_runs_per_visitor``; others' only when saved more than ``run_keep_seconds``
    ago)."""
    return make_room(directory, incoming_bytes, max_runs=limits.max_runs, max_bytes=limits.max_runs_bytes, keep=keep,
                     replacing=replacing, owner=visitor.owner, max_per_owner=limits.max_runs_per_visitor,
                     protect_seconds=limits.run_keep_seconds, client=visitor.client or None)


def removed_note(removed: list[str], limits: Limits) -> str:
    """What a visitor's new run cost: 'to make room, this server removed the run my-run-1 (...)'."""
    return (f"to make room, this server removed the run{'s' * (len(removed) > 1)} {', '.join(removed)} (a visitor "
            f"keeps at most {limits.max_runs_per_visitor} runs and their oldest go first; other visitors' runs are "
            f"kept for at least {format_seconds(limits.run_keep_seconds)} after their last save)")
