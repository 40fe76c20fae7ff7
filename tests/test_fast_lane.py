"""The fast lane's places: a share per client and a time cap per call (server/fast_lane.py), and every event of the
lane holding one (events.share_fast_lane). Four Why loops from one client took another visitor's tokenize from
0.25 s to 2.0 s median: they held all four places of the lane (issue 54)."""

from __future__ import annotations

import inspect
import threading
import time
from types import SimpleNamespace

import gradio as gr
import pytest

from playground.config import Limits
from playground.server.fast_lane import FastLane, FastLaneBusyError
from playground.ui import events
from playground.ui.common import FAST_LANE, AppContext


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def hold(lane, client, started: threading.Event, done: threading.Event, errors: list):
    def run():
        try:
            with lane.place(client):
                started.set()
                done.wait(10)
        except FastLaneBusyError as exc:
            errors.append(str(exc))
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def wait_for(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_one_client_holds_its_share_and_another_takes_a_place_at_once():
    lane = FastLane(places=4, per_client=2, max_seconds=60, wait_seconds=10)
    done, errors = threading.Event(), []
    loops = [threading.Event() for _ in range(4)]
    threads = [hold(lane, "looper", started, done, errors) for started in loops]
    wait_for(lambda: sum(started.is_set() for started in loops) == 2)
    time.sleep(0.2)
    assert sum(started.is_set() for started in loops) == 2 and lane.held("looper") == 2  # the other two wait
    visitor = threading.Event()
    threads.append(hold(lane, "visitor", visitor, done, errors))
    assert visitor.wait(2)  # a place was free for them, the looper's waiting calls notwithstanding
    assert lane.held() == 3
    done.set()
    for thread in threads:
        thread.join(10)
    assert all(started.is_set() for started in loops) and not errors and lane.held() == 0


def test_a_call_past_its_time_cap_frees_its_place_but_not_its_clients_share():
    clock = Clock()
    lane = FastLane(places=1, per_client=1, max_seconds=5, wait_seconds=60, clock=clock)
    done, errors = threading.Event(), []
    slow = threading.Event()
    threads = [hold(lane, "slow", slow, done, errors)]
    assert slow.wait(2)
    again, other = threading.Event(), threading.Event()
    threads += [hold(lane, "slow", again, done, errors), hold(lane, "other", other, done, errors)]
    assert not other.wait(0.3)  # the one place is taken
    clock.now = 5.0  # the slow call has run its time cap: the place is free for the other client...
    assert other.wait(2)
    time.sleep(0.2)
    assert not again.is_set()  # ...while its own client's next call waits for it to end
    done.set()
    for thread in threads:
        thread.join(10)
    assert again.is_set() and not errors


def test_a_call_waiting_past_its_wait_is_refused_as_busy():
    lane = FastLane(places=1, per_client=1, max_seconds=60, wait_seconds=0.2)
    done, errors = threading.Event(), []
    first = threading.Event()
    threads = [hold(lane, "a", first, done, errors)]
    assert first.wait(2)
    threads.append(hold(lane, "b", threading.Event(), done, errors))
    threads[-1].join(5)
    assert errors and "busy" in errors[0]
    done.set()
    threads[0].join(5)
    assert lane.held() == 0


def test_every_fast_lane_event_holds_a_place_under_its_clients_name(tiny_weights):
    ctx = AppContext(limits=Limits(), weights=tiny_weights)
    ctx.fast_places = FastLane(places=4, per_client=1, max_seconds=60, wait_seconds=0.2, own_wait_seconds=0.4)
    with gr.Blocks() as app:
        box = gr.Textbox()
        seen = []

        def view(text, request: gr.Request):
            seen.append(ctx.fast_places.held(ctx.client_of(request)))
            return text

        def steps(text):
            yield text

        box.submit(view, box, box, api_name="view", **ctx.fast_lane)
        box.change(steps, box, box, api_name="steps", **ctx.fast_lane)
        box.blur(lambda text: text, box, box, api_name="slow_lane", concurrency_id="long")
    assert events.share_fast_lane(app, ctx) == 2
    fns = {fn.api_name: fn.fn for fn in app.fns.values()}
    assert "request" in inspect.signature(fns["view"]).parameters  # Gradio still gives it the request
    assert inspect.isgeneratorfunction(fns["steps"]) and fns["slow_lane"].__name__ == "<lambda>"
    request = SimpleNamespace(client=SimpleNamespace(host="10.1.2.3"), headers={})
    from gradio.context import LocalContext

    LocalContext.request.set(request)
    assert fns["view"]("hi", request) == "hi" and seen == [1]  # held under the request's client while it ran
    # that client's share is taken and never given back: its next call is refused after own_wait_seconds
    with ctx.fast_places.place(ctx.client_of(request)):
        with pytest.raises(gr.Error, match="busy"):
            fns["view"]("hi", request)
    assert list(fns["steps"]("a")) == ["a"] and ctx.fast_places.held() == 0
    assert FAST_LANE == ctx.fast_lane["concurrency_id"] and ctx.fast_lane["concurrency_limit"] > 4


def test_a_call_waiting_behind_its_own_clients_calls_is_never_refused_for_it():
    """The page's newest call waits behind its own older ones (one place per client) as long as they run: that wait
    is the client's own, not a busy server, so it never counts against wait_seconds; a wait for other clients'
    places still does."""
    clock = Clock()
    lane = FastLane(places=2, per_client=1, max_seconds=600, wait_seconds=30, clock=clock)
    done, errors = threading.Event(), []
    first, newest = threading.Event(), threading.Event()
    threads = [hold(lane, "page", first, done, errors)]
    assert first.wait(2)
    threads.append(hold(lane, "page", newest, done, errors))
    wait_for(lambda: len(lane._waiting) == 1)
    clock.now = 100.0  # far past the wait, all of it behind the page's own first call
    time.sleep(0.3)  # the waiting call looks at the clock at least every tenth of a second
    assert not errors and not newest.is_set()
    done.set()
    assert newest.wait(2) and not errors  # it ran once its own first call ended
    for thread in threads:
        thread.join(5)
    # another client's wait, with both places held by others, is still refused once it passes wait_seconds
    done.clear()
    threads = [hold(lane, name, started, done, errors) for name, started in (("a", threading.Event()),
                                                                             ("b", threading.Event()))]
    wait_for(lambda: lane.held() == 2)
    threads.append(hold(lane, "c", threading.Event(), done, errors))
    wait_for(lambda: len(lane._waiting) == 1)
    clock.now = 200.0
    threads[-1].join(5)
    assert errors and "busy" in errors[0]
    done.set()
    for thread in threads:
        thread.join(5)
