"""What the Why tab draws of a reading (why_reading.Reading): the parts' bar chart, a head's chain from its pattern
to the next character, its QK and OV tables with the cells a position reads outlined, the ranking, and the parts and
the chain as the numbers an API client reads. The words on them come from why_sentences; nothing here runs the model.
"""

from __future__ import annotations

from playground.lens import circuits
from playground.ui import chain_plots, plots
from playground.ui.why_reading import Reading
from playground.ui.why_sentences import (
    circuits_heading,
    key_back,
    parts_axis,
    parts_title,
    past_window,
    who_decides,
)

# px: a part's row on a touch screen, where a tap on it opens that head: a finger's smallest target (WCAG 2.5.8), and
# the shipped model's 27 parts still fit one phone screen; the head list is the 44 px way there
PART_TOUCH_ROW_PX = 24
IMPORTANT_BARS = 3  # bars labelled first in each chart of a head's reading: the tallest, the strongest pushes


def colours(values: list[float]) -> list[str]:
    return ["#2f9e44" if v >= 0 else "#e03131" for v in values]


def parts_figure(reading: Reading, position: int):
    values = reading.attributions[position].values.tolist()
    return plots.horizontal_bar_chart(reading.attributions[position].names, values, parts_title(reading, position),
                                      parts_axis(reading, position), colours=colours(values),
                                      touch_row_px=PART_TOUCH_ROW_PX)


def chain_arguments(reading: Reading, position: int, layer: int, which: int) -> dict:
    """The chain at ``position`` as chain_changes' (and chain_figure's) arguments. Where not every key's label
    fits a phone, the tallest weights and the strongest pushes keep theirs, then the query: the bars a reader
    looks at first are never the unlabelled ones."""
    chain = reading.chain(position, layer, which)
    tallest = sorted(range(position + 1), key=lambda i: -float(chain.weights[i]))[:IMPORTANT_BARS]
    strongest = sorted(range(position + 1), key=lambda i: -abs(float(chain.pushes[i])))[:IMPORTANT_BARS]
    return dict(labels=chain.labels, weights=chain.weights.tolist(), writes=chain.writes.tolist(),
                pushes=chain.pushes.tolist(), head=circuits.head_name(layer, which),
                target=reading.label(chain.target), position=position, part=chain.part, others=chain.others,
                logit=chain.logit, probability=chain.probability, other=reading.label(chain.other),
                other_probability=chain.other_probability, guessed=chain.guessed, room_px=plots.LABEL_ROOM_PX,
                versus=chain.versus, logits=(chain.target_logit, chain.other_logit),
                decides=not who_decides(reading.attributions[position], (layer, which)),
                important=[*(i for pair in zip(tallest, strongest) for i in pair), position])


def chain_changes(reading: Reading, position: int, layer: int, which: int) -> dict:
    """The chain's picture at ``position`` as changes to chain_plots.chain_base (what the heads deck sends a view)."""
    return chain_plots.chain_changes(**chain_arguments(reading, position, layer, which))


def numbers(reading: Reading, position: int, layer: int, which: int) -> dict:
    """The parts and the chain of head ``which`` of ``layer`` at ``position`` as plain numbers (what /why's figures
    draw, unrounded float32): the parts sum to ``logit``; the keys' pushes (weight x write) sum to the head's
    ``part``, which with ``others`` is the logit. A worked key: weight 0.7, write +2.0 -> push +1.4."""
    parts = reading.attributions[position]
    chain = reading.chain(position, layer, which)
    tokenizer, ids = reading.tokenizer, reading.ids.tolist()

    def token(token_id: int) -> dict:
        return {"character": tokenizer.decode([token_id]), "token_id": token_id}

    return {
        # what the parts split: "versus", logit(target) - logit(runner_up); "alone", the target's logit. ``total`` is
        # what they sum to (the difference, or the logit), as ``part`` + ``others`` of the head does
        "split": "versus" if chain.versus else "alone", "total": chain.logit,
        "position": position, "target": token(chain.target), "logit": chain.target_logit,
        "probability": chain.probability, "guessed": chain.guessed,
        # the likeliest token other than the target: the runner-up where the target is the guess, else the guess
        "runner_up": {**token(chain.other), "probability": chain.other_probability, "logit": chain.other_logit},
        "parts": [{"name": name, "kind": kind, "value": value}
                  for name, kind, value in zip(parts.names, parts.kinds, parts.values.tolist())],
        "head": {"name": circuits.head_name(layer, which), "part": chain.part, "others": chain.others,
                 "keys": [{"position": key, **token(ids[key]), "weight": weight, "write": write, "push": push}
                          for key, (weight, write, push) in enumerate(zip(chain.weights.tolist(),
                                                                          chain.writes.tolist(),
                                                                          chain.pushes.tolist()))]},
    }


def parts_changes(reading: Reading, position: int) -> dict:
    """The parts' figure at ``position`` as changes to the deck's base figure (no figure built)."""
    values = [float(f"{v:.6g}") for v in reading.attributions[position].values.tolist()]  # they sum to the logit
    title, top = plots._title_layout(parts_title(reading, position))
    return {"data": [{"x": values, "marker": {"color": colours(values)}}],
            "layout": {"title": title, "margin": {"t": top},
                       "xaxis": {"title": {"text": parts_axis(reading, position)}}}}


def circuits_view(reading: Reading, layer: int, which: int) -> tuple[str, object, object]:
    """(heading, QK heatmap, OV heatmap) of one head over the vocabulary (or the subset). The text's heads are kept
    together, one piece of the memo (every head's are sent to the page, and would push the rest out one by one)."""
    held = reading.memo.get(("circuits", reading.name, tuple(reading.ids.tolist()), reading.distance), reading.model,
                            dict)
    if (layer, which) not in held:
        held[(layer, which)] = read_circuits(reading, layer, which)
    return held[(layer, which)]


def cell_shapes(reading: Reading, position: int, layer: int, which: int) -> list[list[dict]]:
    """The outlines of Reading.table_cells on the QK and the OV table (Plotly shapes, [QK's, OV's]): the row this
    position reads and, inside it, the cell. Empty where table_cells is None."""
    cells = reading.table_cells(position, layer, which)
    if cells is None:
        return [[], []]
    n = len(reading.table_rows())
    return [plots.cell_outline(row, column, n) for row, column in (cells[:2], cells[2:])]


def read_circuits(reading: Reading, layer: int, which: int) -> tuple[str, object, object]:
    """(heading, QK heatmap, OV heatmap) of one head over the vocabulary (or the subset)."""
    chosen = circuits.head_name(layer, which)
    vocabulary = reading.vocabulary()
    qk, ov = reading.tables(layer, which)
    direct = " (direct path: embeddings only)" if layer > 0 else ""  # on the tables themselves; more: CIRCUIT_MORE
    apart = "" if reading.distance is None else f", {key_back(reading.distance)}"  # a rotary model's: one distance
    if past_window(reading):
        apart += ", masked by the window"
    qk_map = plots.vocabulary_heatmap(qk, vocabulary, f"QK of {chosen}{apart}{direct}: query (row) → key character",
                                      x_title="key", y_title="query", hover="query %{y} → key %{x}: score %{z:.3f}")
    ov_map = plots.vocabulary_heatmap(ov, vocabulary, f"OV of {chosen}{direct}: attended (row) → next character",
                                      x_title="promoted", y_title="attended",
                                      hover="attending to %{y}, the logit of %{x}: %{z:.3f}")
    return circuits_heading(reading, layer, which), qk_map, ov_map


def ranking(reading: Reading):
    if reading.effects is None:
        return None
    ordered = sorted(reading.effects, key=lambda e: (e.layer, e.head))
    return plots.horizontal_bar_chart([circuits.head_name(e.layer, e.head) for e in ordered],
                                      [e.added for e in ordered], "Loss added when each head alone is knocked out",
                                      "added loss")
