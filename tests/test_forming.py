"""Heads forming in the Train tab (issue 52): every head's pattern scores drawn as lines over a run's snapshots, the
step a head became a previous-character head marked, the probe heatmap's mask grey and its 1-back stripe marked; and
the Sample inspector's "back" counted from the query, as everywhere else."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from playground.config import Limits
from playground.lens import head_scores
from playground.lens.head_forming import PREVIOUS_TOKEN_HEAD
from playground.server.jobs import JobStatus
from playground.training.probes import ProbeSnapshot
from playground.ui import forming_plots, sample_tab, train_tab
from playground.ui.common import AppContext
from playground.ui.plots import MASKED_COLOUR


def snapshot(step: int, previous: list[list[float]], induction: list[list[float]] | None = None) -> dict:
    """A snapshot of a 2-layer, 2-head run: ``previous`` its previous-token scores, the others fixed."""
    flat = [[0.1, 0.1], [0.1, 0.1]]
    return {"step": step, "previous token": previous, "same token": flat, "first token": [[0.5, 0.2], [0.3, 0.3]],
            "spread": flat, "induction": induction or flat}


SNAPSHOTS = [snapshot(0, [[0.06, 0.07], [0.05, 0.06]]), snapshot(100, [[0.13, 0.08], [0.05, 0.06]]),
             snapshot(200, [[0.41, 0.09], [0.05, 0.06]], [[0.02, 0.02], [0.03, 0.35]]),
             snapshot(300, [[0.52, 0.1], [0.05, 0.33]], [[0.02, 0.02], [0.03, 0.6]])]


def panel_traces(figure, row: int) -> list:
    """The traces drawn in the figure's ``row``-th panel (1 at the top)."""
    axis = "y" if row == 1 else f"y{row}"
    return [trace for trace in figure.data if trace.yaxis == axis]


def test_every_heads_scores_are_lines_over_the_steps_and_the_step_a_head_formed_is_marked():
    figure = forming_plots.forming_chart(SNAPSHOTS, chosen=(0, 0), shown_step=200, repeat_length=32)
    titles = [note.text for note in figure.layout.annotations]
    for _, name in forming_plots.FORMING_PANELS:
        assert name in titles
    lines = [t for t in panel_traces(figure, 1) if t.mode != "markers"]
    assert [t.name for t in lines] == ["L0 H0", "L0 H1", "L1 H0", "L1 H1"]  # every head, "L<layer> H<head>"
    assert list(lines[0].x) == [0, 100, 200, 300] and list(lines[0].y) == [0.06, 0.13, 0.41, 0.52]
    assert lines[0].line.width > lines[1].line.width  # the head the heatmap shows, bold
    assert [list(t.y) for t in panel_traces(figure, 4) if t.name == "L1 H1"] == [[0.1, 0.1, 0.35, 0.6]]
    # a star where each head first reached PREVIOUS_TOKEN_HEAD: L0 H0 at 200 (0.41), L1 H1 at 300 (0.33)
    stars = {t.name: (list(t.x), list(t.y)) for t in panel_traces(figure, 1) if t.mode == "markers"}
    assert stars == {"L0 H0 formed": ([200], [0.41]), "L1 H1 formed": ([300], [0.33])}
    title = figure.layout.title.text.replace("<br>", " ")
    assert "L0 H0 at step 200" in title and "L1 H1 at step 300" in title
    # the threshold, dashed, in the top panel, and the heatmap's snapshot as a band across all
    dashed = [s for s in figure.layout.shapes if s.type == "line" and s.y0 == s.y1 == PREVIOUS_TOKEN_HEAD]
    assert len(dashed) == 1
    assert len([s for s in figure.layout.shapes if s.x0 == s.x1 == 200 and s.line.width == 6]) == 4  # every panel
    assert figure.layout.meta["forming"]["formed"] == [{"layer": 0, "head": 0, "step": 200},
                                                       {"layer": 1, "head": 1, "step": 300}]


def test_the_induction_panels_even_spread_keeps_to_a_sliding_window():
    """The dotted line is the weight an even spread puts on the induction key: over a sliding window's keys for a
    model with one (head_scores.chance_levels), not over every key before."""
    def chance(window=None) -> float:
        figure = forming_plots.forming_chart(SNAPSHOTS, repeat_length=32, window=window)
        return next(s.y0 for s in figure.layout.shapes if s.type == "line" and s.y0 == s.y1
                    and s.y0 != PREVIOUS_TOKEN_HEAD)
    assert chance() == pytest.approx(head_scores.chance_levels(32)["induction"])
    assert chance(40) == pytest.approx(head_scores.chance_levels(32, 40)["induction"]) and chance(40) > chance()


def test_no_head_formed_yet_is_said_and_no_scores_draw_nothing():
    figure = forming_plots.forming_chart(SNAPSHOTS[:2])
    assert "no head puts 0.3 of its weight on the character before yet (step 100)" in \
        figure.layout.title.text.replace("<br>", " ")
    assert not [t for t in figure.data if t.mode == "markers" and "formed" in t.name]
    assert forming_plots.forming_chart([]) is None and forming_plots.forming_chart([None]) is None


def test_the_probe_heatmaps_masked_cells_are_grey_and_the_1_back_stripe_is_marked_off_the_diagonal():
    tokens = list("hello")
    weights = torch.eye(5)  # every query on itself: the diagonal
    figure = forming_plots.probe_heatmap(weights, tokens, "Probe attention at step 0 · layer 0 head 0")
    values, grey = figure.data
    z = np.array(values.z, dtype=float)
    hidden = np.triu(np.ones((5, 5), dtype=bool), 1)
    assert np.isnan(z[hidden]).all() and not np.isnan(z[~hidden]).any()  # not white "value 0"
    assert grey.colorscale[0][1] == MASKED_COLOUR and (np.array(grey.z, dtype=float)[hidden] == 1).all()
    assert "masked" in values.customdata[0][4] and values.customdata[0][4].startswith("row 0 (h), column 4 (o)")
    line, = figure.layout.shapes
    # the line y = x + 2 runs along the lower-left corners of the cells (p, p - 1), from row 1 to the last
    assert (line.x0, line.y0, line.x1, line.y1) == (-0.5, 1.5, 2.5, 4.5)
    assert line.y0 - line.x0 == line.y1 - line.x1 == 2  # never through a diagonal cell (y - x = 0 there)
    assert "1-back stripe" in figure.layout.annotations[0].text


def test_the_status_draws_the_forming_lines_while_a_run_trains_and_once_it_has_finished():
    probes = tuple(ProbeSnapshot(s["step"], list("abc"), torch.full((2, 2, 3, 3), 1 / 3), scores=s)
                   for s in SNAPSHOTS)
    status = JobStatus(state="running", run_name="r", step=250, steps=400, probes=probes[:3],
                       settings={"context_size": 64})
    *_, slider, forming = train_tab.render_status(status, 1, 1)
    assert [t.name for t in panel_traces(forming, 1) if t.mode != "markers"][-1] == "L1 H1"
    assert {t.name for t in forming.data if t.mode == "markers"} == {"L0 H0 formed"}
    finished = dataclasses.replace(status, state="finished", step=400, probes=probes)
    *_, probe, slider, forming = train_tab.render_status(finished, 0, 0, snapshot=1)
    assert "step 100" in probe.layout.title.text and slider.value == 1
    # the slider says how often a snapshot comes (it said "at each evaluation" while they came every 25 steps)
    assert "(4 saved, at each evaluation)" in slider.label  # a run whose probe interval is not known
    every = dataclasses.replace(finished, settings={"probe_interval": 25}, steps=3000)
    assert "(4 saved, every 25 steps and at each evaluation)" in train_tab.render_status(every)[4].label
    widened = dataclasses.replace(every, steps=20000)  # at most MAX_PROBE_SNAPSHOTS: every 100 steps
    assert "every 100 steps" in train_tab.render_status(widened)[4].label
    assert any(s.x0 == s.x1 == 100 and s.line.width == 6 for s in forming.layout.shapes)  # the heatmap's snapshot
    assert {t.name for t in forming.data if t.mode == "markers"} == {"L0 H0 formed", "L1 H1 formed"}
    # the induction panel's even spread: L = min(48, 64 // 2) = 32
    assert any("an even spread: 0.0" in (note.text or "") for note in forming.layout.annotations)
    assert train_tab.render_status(dataclasses.replace(status, probes=()))[5] is None
    idle = train_tab.render_status(JobStatus())
    assert len(idle) == 6 and idle[5] is None


@pytest.fixture
def ctx(tiny_weights):
    return AppContext(limits=Limits(), weights=tiny_weights)


def test_the_sample_inspector_counts_back_from_the_query(ctx):
    """"'n' (1 back)" named the query character itself, while "previous" and "1 back" elsewhere mean the one before."""
    _, _, _, state = list(sample_tab.sample(ctx, "shakespeare-char", "ROMEO:", 6, 1.0, 5, 0.9, 3, False, True))[-1]
    itself = 0
    for position in range(6):
        _, attention, note = sample_tab.inspect_position(ctx, state, position, 0, 0)
        weights = list(attention.data[0].y)
        last = len(weights) - 1  # the query: the last character read before drawing #position
        assert "The query is the last of them, " in note
        for part in note.split("strongest attention: ")[1].rstrip(".").split(", "):
            where, weight = part[part.rindex("(") + 1:part.rindex(")")], float(part.rsplit(" ", 1)[1])
            back = 0 if where == "the query itself" else int(where.removesuffix(" back"))
            assert back > 0 or where == "the query itself"
            assert weight == pytest.approx(weights[last - back], abs=0.006)  # "1 back": the one before the query
            itself += back == 0
    assert itself  # the query itself was among the strongest somewhere, and said so
