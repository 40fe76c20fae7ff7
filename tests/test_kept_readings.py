"""What the tabs keep between requests (the Why tab's readings, the Attention tab's heads) is held from the server's
one memory budget, at most a share of it, and given back when a request needs the room: the Why tab's readings kept
+625 MiB between requests outside the budget (issue 54)."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch

from playground import budget
from playground.config import Limits
from playground.ui import why_reading, why_tab
from playground.ui.common import AppContext, RecentReadings, held_bytes
from playground.ui.why_reading import DEFAULT_TEXT

TEXT = "To be, or not to be: that is"
REPO = Path(__file__).resolve().parents[1]
READINGS = "the Why tab's readings"


@pytest.fixture
def ctx(tiny_weights):
    return AppContext(limits=Limits(), weights=tiny_weights, budget=budget.MemoryBudget(512 * budget.MIB, "test"))


def test_held_bytes_counts_each_storage_once_and_walks_containers():
    block = torch.zeros(1000)  # 4,000 bytes
    value = {"a": block, "b": [block[:10], (block[500:],)], "c": "x" * 1000, "model": torch.nn.Linear(100, 100)}
    assert 5000 <= held_bytes(value) < 6000  # the storage once, the text, a few objects; the module nothing


def test_the_why_tabs_readings_are_held_from_the_budget_as_measured(ctx):
    memo = why_tab.ReadingCache(budget=ctx.budget)
    why_tab.why_page(ctx, "shakespeare-char", TEXT, 3, "", "L0 H1", [], "zero", memo=memo)
    why_tab.why_deck(ctx, "shakespeare-char", TEXT, "", memo=memo)
    held = ctx.budget.kept_for(READINGS)
    assert held == memo.held > 100_000  # the text's every-position pass, its keys, the heads' circuits
    assert ctx.budget.reserved == 0  # the reading's own price is given back; what it keeps is held instead
    # the heads' circuit tables are filled in after their piece is kept: measured again when the reading ends
    assert held == sum(held_bytes(value) for _, value, _ in memo._entries.values())


def test_a_request_needing_the_room_evicts_the_readings(ctx):
    memo = why_tab.ReadingCache(budget=ctx.budget)
    why_tab.why_deck(ctx, "shakespeare-char", TEXT, "", memo=memo)
    held = ctx.budget.kept_for(READINGS)
    assert held > 0
    free = ctx.budget.free
    assert free == ctx.budget.total - ctx.budget.kept  # the readings are held beside the loaded checkpoint
    with ctx.budget.reserve(budget.Cost("a big request", (("maps", free + held // 2),))):  # half the readings' room
        assert ctx.budget.kept_for(READINGS) == memo.held <= held // 2
    past = ctx.budget.total - ctx.budget.kept_for("loaded checkpoints") + 1  # more than every reading gives back
    with pytest.raises(budget.BudgetError, match="loaded models"):  # what no cache can give back still refuses
        ctx.budget.acquire(budget.Cost("too big", (("maps", past),)))


class CountingCache(why_tab.ReadingCache):
    """A ReadingCache that notes the kind of every piece it had to read (a miss)."""

    def __init__(self, **options) -> None:
        super().__init__(**options)
        self.read: list[str] = []

    def get(self, key, model, compute):
        def counted():
            self.read.append(key[0])
            return compute()
        return super().get(key, model, counted)


def test_a_second_visitors_first_why_view_reads_nothing_again():
    """Every page load asks the Why tab's first views (why_page, then why_deck, then the other split's) of the shipped
    checkpoint and its default text. Their pieces (a head's looks at every position, the every-position passes) kept
    under a count of 24 evicted each other on the 4 x 4 shipped model, so each visitor's load read about half of them
    again: 2.05 CPU s of app.py a page load, 1.03 with them all kept (benchmarks/page_load_cpu.py's loads)."""
    ctx = AppContext(limits=Limits(), weights=REPO / "weights", budget=budget.MemoryBudget(2048 * budget.MIB, "test"))
    memo = CountingCache(budget=ctx.budget)

    def page_load():
        why_tab.why_page(ctx, "shakespeare-char", DEFAULT_TEXT, -1, "", memo=memo)
        why_tab.why_deck(ctx, "shakespeare-char", DEFAULT_TEXT, "", memo=memo)
        why_tab.why_split_spare(ctx, "shakespeare-char", DEFAULT_TEXT, "", memo=memo)

    page_load()
    first = list(memo.read)
    assert len(first) > why_reading.READING_CACHE_SIZE // 10  # the first visitor's load reads the text
    memo.read.clear()
    page_load()
    assert memo.read == [], f"read again: {memo.read}"
    assert 0 < ctx.budget.kept_for(READINGS) <= 0.25 * ctx.budget.total


def test_readings_keep_to_their_share_of_the_budget_and_never_outlive_their_model():
    memory = budget.MemoryBudget(40_000, "test")
    cache = RecentReadings(100, memory, what="readings", share=0.25)  # 10,000 bytes
    model = torch.nn.Linear(2, 2)
    for i in range(10):
        cache.get(i, model, lambda: torch.zeros(1000))  # about 4,064 bytes each
    assert cache.held == memory.kept_for("readings") <= 10_000
    assert cache.get(9, model, lambda: None) is not None  # the last kept
    del model
    gc.collect()
    cache.measure()
    assert cache.held == memory.kept_for("readings") == 0


def test_the_attention_tabs_heads_are_held_from_the_budget_and_evicted_by_a_request(ctx):
    """The walkthrough's head inputs kept between clicks are held as the Why tab's readings are: one mechanism."""
    from playground.ui import attention_tab

    heads = attention_tab.HeadCache(budget=ctx.budget)
    settings = ["trained checkpoint", "shakespeare-char", 0, 1, 0, 16, 8, "journey", TEXT, True, True, 1.0, False]
    attention_tab.attention_page(ctx, *settings, attention_tab.STEP_TITLES[0], -1, [], heads=heads)
    attention_tab.attention_page(ctx, *settings[:2], 1, *settings[3:], attention_tab.STEP_TITLES[0], -1, [],
                                 heads=heads)
    held = ctx.budget.kept_for("the Attention tab's heads")
    assert held == heads.held > 0 and len(heads._entries) == 2  # two heads' inputs, measured
    assert ctx.budget.reserved == 0
    free = ctx.budget.free
    with ctx.budget.reserve(budget.Cost("a big request", (("maps", free + 1),))):  # one byte past what is free
        assert ctx.budget.kept_for("the Attention tab's heads") == heads.held < held
        assert len(heads._entries) == 1  # the least recently used head given back first
