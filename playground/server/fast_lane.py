"""The fast lane's places (tokenize, the attention steps, the views): a share per client and a time cap per call.

Gradio's queue gives the fast lane's events its workers first come, first served, so one client looping four Why
views held all four places and another visitor's tokenize waited behind them (0.25 s -> 2.0 s median). Gradio
hands the lane's events to more workers than there are places (ui's ``FAST_WORKERS``), and each call takes a place
here before it runs:

- a client holds at most ``per_client`` places at once; its other calls wait, and a caller from another client
  takes the next free place before them (waiting callers are served first come, first served among those whose
  client is under its share);
- a call that runs past ``max_seconds`` stops counting against the shared places (it keeps its client's share until
  it ends), so slow calls never hold the lane for everyone;
- a call that waits past ``wait_seconds`` for a place other clients hold is refused as busy (``FastLaneBusyError``),
  never queued forever; the time it waits behind its own client's calls is not counted (up to ``own_wait_seconds``
  in all, ten waits by default). The Attention tab sends
  up to five calls of the lane for one change (the first view, the deck, the spares, the positions, the rotation),
  one after another with one place per client: on a loaded machine a page's newest call could wait out the 30 s
  behind its own older ones and be refused, losing the page's latest update. A client's calls waiting at once are
  bounded by Gradio's workers for the lane and by its events' ``always_last`` (one waiting per event).

    places 4, per client 1: one client's four loops run one at a time; another client's tokenize takes a second
    place at once.

Knows nothing of Gradio: callers name the client (tenancy's rule) and hold ``place(client)`` around the work.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator


class FastLaneBusyError(RuntimeError):
    """No place came free within the wait: the caller is told to try again."""


class FastLane:
    def __init__(self, places: int, per_client: int, max_seconds: float, wait_seconds: float,
                 clock: Callable[[], float] = time.monotonic, own_wait_seconds: float | None = None):
        self.places, self.per_client = int(places), int(per_client)
        self.max_seconds, self.wait_seconds = float(max_seconds), float(wait_seconds)
        # behind its own client's calls a call waits this long in all (they may never end): 10 waits by default
        self.own_wait_seconds = float(own_wait_seconds if own_wait_seconds is not None else 10 * wait_seconds)
        self.clock = clock
        self._running: dict[int, tuple[str, float]] = {}  # ticket -> (client, when it started)
        self._waiting: list[tuple[int, str]] = []  # (ticket, client), first come first
        self._tickets = itertools.count()
        self._changed = threading.Condition()

    def held(self, client: str | None = None) -> int:
        """Calls running now: a client's, or every call that still counts against the shared places."""
        with self._changed:
            return self._client_counts()[client] if client is not None else self._in_use()

    def _client_counts(self) -> Counter:
        return Counter(client for client, _ in self._running.values())

    def _in_use(self) -> int:
        """Places taken: calls started less than max_seconds ago (older ones have outrun their time cap)."""
        now = self.clock()
        return sum(1 for _, started in self._running.values() if now - started < self.max_seconds)

    def _may_start(self, ticket: int) -> bool:
        """Under the lock: whether ``ticket`` takes a place now: one is free, its client is under its share, and no
        caller waiting before it could take it."""
        if self._in_use() >= self.places:
            return False
        counts = self._client_counts()
        for waiting, client in self._waiting:
            if counts[client] < self.per_client:
                return waiting == ticket  # the first caller that may run
        return False

    def _behind_own(self, ticket: int, client: str) -> bool:
        """Under the lock: whether ``ticket`` waits for its own client's calls (those running and those waiting
        before it fill the client's share), not for a place other clients hold."""
        earlier = sum(1 for waiting, other in self._waiting if other == client and waiting < ticket)
        return self._client_counts()[client] + earlier >= self.per_client

    @contextlib.contextmanager
    def place(self, client: str) -> Iterator[None]:
        """Hold a place for ``client`` while the block runs; FastLaneBusyError after waiting ``wait_seconds``."""
        ticket = next(self._tickets)
        left, then = self.wait_seconds, self.clock()
        given_up = then + self.own_wait_seconds
        with self._changed:
            self._waiting.append((ticket, client))
            try:
                while not self._may_start(ticket):
                    now = self.clock()
                    if not self._behind_own(ticket, client):  # only a wait for other clients counts
                        left -= now - then
                    then = now
                    if left <= 0 or now >= given_up:
                        raise FastLaneBusyError(
                            f"This server's quick views are busy (you have {self._client_counts()[client]} running, "
                            f"at most {self.per_client} at once): try again in a moment.")
                    # woken when a call ends; and at least every tenth of a second, since a call passing its time
                    # cap frees a place without ending
                    self._changed.wait(max(0.01, min(left, given_up - now, 0.1, self.max_seconds)))
            finally:
                self._waiting.remove((ticket, client))
                self._changed.notify_all()
            self._running[ticket] = (client, self.clock())
        try:
            yield
        finally:
            with self._changed:
                del self._running[ticket]
                self._changed.notify_all()
