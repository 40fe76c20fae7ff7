"""What the Why tab shows of a reading: the headings and sentences (who decides, where a head looks, what it writes,
its circuits in words, a knock-out's table) and the figures (the parts, a head's chain, its QK and OV tables, the
ranking). Everything here takes the reading (why_reading.Reading) first; nothing here runs the model.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from playground.lens import circuits, head_scores
from playground.text.tokenizer import CharTokenizer, labels
from playground.ui import chain_plots, plots
from playground.ui.why_page import (
    HERE,
    KNOCK_BARELY,
    KNOCK_BARELY_MOVES,
    KNOCK_COLUMNS,
    KNOCK_FALLS,
    KNOCK_FOLD,
    KNOCK_HINT,
    KNOCK_NAMED,
    LOOK_FOR_KNOCK,
)
from playground.ui.why_reading import (
    TABLE_RANK_SHOWN,
    WORD_PLACES,
    _dropped_line,
    _head_at,
    _label,
    _names,
    _pairs_in_words,
    _Reading,
    _strongest,
)

QUIET_HEADS = 0.5  # the heads (or the named head) write less than this fraction of the largest other part: said
# px: a part's row on a touch screen, where a tap on it opens that head: a finger's smallest target (WCAG 2.5.8; the
# rows were 18 px), and the shipped model's 27 parts still fit one phone screen; the head list is the 44 px way there
PART_TOUCH_ROW_PX = 24
LOOK_FOR_PARTS = "**Look for:** the longest bars. Green pushed this character up, red down."
# the two characters by name: with a target typed, "the guess" read as the model's (a learner's `!` against the
# model's `?`)
LOOK_FOR_VERSUS = "**Look for:** the longest bars. Green favours `{target}`, red `{rival}`."
LOOK_FOR_HEAD = ("**Look for:** read down: weight (①) × write (②) = push (③); pushes sum to the head's bar (④); "
                 "softmax (⑤).")
# target, where the head pushed it up) is called low, with its reason: the head looks by position, or (past the first
# layer) reads what the layers before wrote, neither of which the tables read
LOOKED_AT = 2  # the keys the head's heading names as where it looked most at this query
IMPORTANT_BARS = 3  # bars labelled first in each chart of a head's reading: the tallest, the strongest pushes
LOOK_FOR_CIRCUITS = "**Look for:** dark blue cells: strong pairs."  # where no cell is outlined (_in_the_tables)
LOOKS_LISTED = 4  # more places a head looks over the text, behind the fold
WRITES_LISTED = 3  # the tokens a head raises most over the text, behind the fold (the first in sight)
NEAREST = {"own word": "its own word"}  # a place named after "one place:" (WORD_PLACES' "within" does not read there)
# a head with no one place over the text: where it looked at the position on screen is the chain's, above (a learner
# read "most weight: the word before" in sight as a second answer beside the chain's key there)
CHAIN_HOLDS = "trust the chain above"  # where the tables' ranks are low (_in_the_tables): it is what the head did
NO_ONE_PLACE = "No one place: where it looks changes with the query"
LOOKS_RATIO = 1.5  # a place gets this many times an even spread's weight: the head looks there more than chance (word
# starts are a quarter of a text's keys: a head with 49% on them against 25% was said to look nowhere in particular)
BESIDE = 0.5  # a second place, sharing no key with the first, named beside it where it gets this much of the first's
# weight beyond an even spread (a learner read layer 2's "at the word before" where, at the default position, the
# heads looked within their own word, with nearly as much of their weight there over the text)
LOOKS_CLEARLY = 0.15  # a place gets this much of a head's weight beyond an even spread: the head looks there (a
# learner read L3 H1's 9% on newlines, against 3%, as its job, which no chain of it showed)
# when the Look-for line calls a rank low (_low, _in_the_tables), said behind the fold: a stranger found "18th" low at
# one position and "39th of 65" unremarked at another (where the head had pushed the guess down)
LOW_RANKS = (f"The Look-for line calls a rank low past the {TABLE_RANK_SHOWN}rd and past a quarter of its row; the "
             "guess's rank in OV only where the head pushed it up, since one it pushed down ranks low as the chain "
             "says.")
CIRCUIT_MORE = ("Both tables read each character's token embedding alone, without its position, through the "
                "layer's LayerNorm: for a layer past the first that is the direct path, as if the head read the input "
                "itself. QK: the scaled score a query character gives a key character (softmax runs over a row). OV: "
                "the logits the head writes when all its weight is on one character, through W_V, W_O, the final "
                "norm and the LM head.")
ROTARY_MORE = ("Both tables read each token's embedding alone through the layer's RMSNorm: for a layer past the "
               "first that is the direct path. Positions enter as a rotation of q and k, so a score depends on how far "
               "back the key is: QK is drawn for keys the **distance** box's number of tokens back. A grouped head "
               "reads the K/V head it shares. OV: the logits the head writes when all its weight is on one token, "
               "through W_V, W_O, the final norm and the LM head.")
NOTEBOOK_MORE = ("Notebook 004's model: one layer of heads, each reading its own slice of the embedding, then the "
                 "output projection and the output layer, with no norm, MLP or residual. Both tables read each "
                 "character's token embedding alone, without its position. QK: the scaled score a query character "
                 "gives a key character. OV: the logits the head writes when all its weight is on one character, "
                 "through W_V, its columns of the projection and the output layer (without its bias).")


def _colours(values: list[float]) -> list[str]:
    return ["#2f9e44" if v >= 0 else "#e03131" for v in values]


def _who_decides(parts: circuits.LogitAttribution, named: tuple[int, int]) -> str:
    """A sentence where the heads together, or the head named, write little beside the largest other part (an MLP,
    an embedding, a bias), from the numbers: "No head decides this one: the heads together write +0.30, L2 MLP
    +2.90; all bars sum to +4.10; the longest head bar is L2 H3's." (the head the list opens, which may have pushed
    against the guess: a learner expected a green one); "" where a head does decide."""
    values = parts.values.tolist()
    others = [(abs(v), name, v) for name, kind, v in zip(parts.names, parts.kinds, values) if kind != "head"]
    heads = [v for kind, v in zip(parts.kinds, values) if kind == "head"]
    if not others or not heads:
        return ""
    _, largest, written = max(others)
    together, own = sum(heads), parts.head(*named)
    if abs(together) < QUIET_HEADS * abs(written):
        return (f" **No head decides this one:** the heads together write {together:+.2f}, {largest} {written:+.2f}; "
                f"all bars sum to {parts.logit:+.2f}; the longest head bar is {circuits.head_name(*named)}'s.")
    if abs(own) < QUIET_HEADS * abs(written):
        return (f" **No one head decides this one:** {circuits.head_name(*named)} writes {own:+.2f}, {largest} "
                f"{written:+.2f}; all bars sum to {parts.logit:+.2f}.")
    return ""


def _who_pushed(parts: circuits.LogitAttribution, named: tuple[int, int], target: str) -> str:
    """Where the head named decides (_who_decides says nothing), that it pushed hardest, its part and which way:
    " **L3 H1 pushed hardest** for `?`: +2.81." (a learner read "-2.66" under a typed target as a push for it; the
    character last, "against `.`." read as "..")."""
    part = parts.head(*named)
    way = "for" if part >= 0 else "against"
    return f" **{circuits.head_name(*named)} pushed hardest** {way} `{target}`: {part:+.2f}."


def _heading(reading: _Reading, position: int) -> str:
    parts = reading.attributions[position]
    target_id = parts.target_id
    probabilities = reading.probabilities[position]
    name = _label(reading.tokenizer.label(target_id))
    rank = int((probabilities > probabilities[target_id]).sum()) + 1
    strongest = _strongest(reading, position)
    said = _who_decides(parts, strongest) or _who_pushed(parts, strongest, name)
    quiet = said + _dropped_line(reading)
    if parts.rival_id is None:
        return (f"### Why `{name}` after `{reading.tokens[position]}` (position {position})\n\n{LOOK_FOR_PARTS}"
                f"{quiet}\n\nThe model gives `{name}` probability {float(probabilities[target_id]):.3f} (its choice "
                f"number {rank}); its logit {parts.logit:.3f} is the sum of these {len(parts.names)} bars.")
    rival = _label(reading.tokenizer.label(parts.rival_id))
    role = "the runner-up" if rank == 1 else "the model's guess"
    logits = reading.logits[position]
    return (f"### Why `{name}` and not `{rival}` after `{reading.tokens[position]}` (position {position})\n\n"
            f"{LOOK_FOR_VERSUS.format(target=name, rival=rival)}{quiet}\n\n"
            f"`{name}` (p {float(probabilities[target_id]):.3f}) against {role} "
            f"`{rival}` ({float(probabilities[parts.rival_id]):.3f}): logits {float(logits[target_id]):.3f} − "
            f"{float(logits[parts.rival_id]):.3f} = {parts.logit:+.3f} is the sum of these {len(parts.names)} bars.")


def _head_heading(reading: _Reading, position: int, layer: int, which: int) -> str:
    weights, shares = (keys[position] for keys in reading.keys[(layer, which)])
    seen = slice(0, position + 1)
    # the character whose push has the head's own sign: a head that lowers the logit is read by what pushed down
    part = reading.attributions[position].head(layer, which)
    top = int((shares[seen] if part >= 0 else -shares[seen]).argmax())
    pushed = "Pushed it up most" if float(shares[top]) >= 0 else "Pushed it down most"
    parts = reading.attributions[position]
    what = "the logit" if parts.rival_id is None else "the logit difference"
    # what the head looked for at this query, beside the circuits' pair over the vocabulary (a stranger read "␣ looks
    # for a" as what it did here)
    looked = _looked_most(reading, position, layer, which)
    at = " and ".join(f"{_at(reading, i)} ({float(weights[i]):.2f})" for i in looked)
    # a head below zero said in words: where no head decides, the head with the longest bar can be one that worked
    # against the guess, and a stranger found only its sign saying so
    against = f", **against** `{_label(reading.tokenizer.label(parts.target_id))}`" if part < 0 else ""
    return (f"### {circuits.head_name(layer, which)} at position {position}\n\n{LOOK_FOR_HEAD}\n\nIts part "
            f"of {what}: {part:+.3f} of {parts.logit:+.3f}{against}. After `{reading.tokens[position]}` it looked most "
            f"at {at}. {pushed}: `{reading.tokens[top]}` at {top} (weight {float(weights[top]):.2f}, "
            f"{float(shares[top]):+.3f}).")


def _looked_most(reading: _Reading, position: int, layer: int, which: int) -> list[int]:
    """The LOOKED_AT keys the head weighed most at ``position``, the heaviest first."""
    weights = reading.keys[(layer, which)][0][position, : position + 1]
    return torch.topk(weights, min(LOOKED_AT, position + 1)).indices.tolist()


def _texts(reading: _Reading, position: int) -> tuple[str, str, str]:
    """(heading, the head's heading, the knock-out heading) at ``position``."""
    return (_heading(reading, position), _head_heading(reading, position, *_head_at(reading, position)),
            _knock_text(reading, position))


def _knock_text(reading: _Reading, position: int) -> str:
    """The knock-out heading at ``position``. The page writes the same from the same numbers (why_page's
    knockText): keep the two alike."""
    names = _names(reading.knocked_heads)
    more = len(reading.knocked_heads) - KNOCK_NAMED + 1  # past KNOCK_NAMED: three named, the rest counted
    titled = f"{_names(reading.knocked_heads[:KNOCK_NAMED - 1])} and {more} more" if more > 1 else names
    lines = [f"### {f'Knocked out: {titled}' if names else 'Knock heads out'}\n\n{LOOK_FOR_KNOCK}"]
    if names:
        target = _label(reading.tokenizer.label(reading.targets[position]))
        intact, knocked = reading.knocks[""], reading.knocks[names]
        guess, knocked_guess = (_label(reading.tokenizer.label(k.guesses[position])) for k in (intact, knocked))
        p_target, knocked_p = intact.target_probabilities[position], knocked.target_probabilities[position]
        table = [KNOCK_COLUMNS, "|---|---|---|---|"]
        if intact.loss is not None:
            change = knocked.loss - intact.loss
            table.append(f"| loss on the text | {intact.loss:.3f} | {knocked.loss:.3f} | {change:+.3f} |")
        table.append(f"| guess at position {position} | `{guess}` | `{knocked_guess}` | "
                     f"{'same' if guess == knocked_guess else 'changed'} |")
        table.append(f"| p(`{target}`) | {p_target:.3f} | {knocked_p:.3f} | {knocked_p - p_target:+.3f} |")
        lines.append("\n".join(table))
        if intact.loss is not None and abs(change) < KNOCK_BARELY:
            lines.append(KNOCK_BARELY_MOVES[len(reading.knocked_heads) > 1])
        elif intact.loss is not None and change < 0:
            lines.append(KNOCK_FALLS[len(reading.knocked_heads) > 1])
    else:
        lines.append(KNOCK_HINT)
    lines.append(KNOCK_FOLD[0] + reading.ranking_note + KNOCK_FOLD[1])  # the ranking's words, behind the fold
    return "\n\n".join(lines)


def _contest(reading: _Reading, position: int) -> tuple[str, str | None]:
    """The target's label and its rival's at ``position`` (None where the bars split the target's logit alone)."""
    parts = reading.attributions[position]
    rival = None if parts.rival_id is None else _label(reading.tokenizer.label(parts.rival_id))
    return _label(reading.tokenizer.label(parts.target_id)), rival


def _parts_title(reading: _Reading, position: int) -> str:
    target, rival = _contest(reading, position)
    if rival is None:
        return f"The logit of '{target}', part by part"
    return f"The logit of '{target}' − the logit of '{rival}', part by part"


def _parts_axis(reading: _Reading, position: int) -> str:
    """What the parts' bars are, under them: "added to logit('u') − logit('a')", in the logit's own units (a stranger
    read a bare "logit" as the model's; another read "share of" as a fraction, where the bars add up to +2.852)."""
    target, rival = _contest(reading, position)
    return f"added to logit('{target}')" if rival is None else f"added to logit('{target}') − logit('{rival}')"


def _parts_figure(reading: _Reading, position: int):
    values = reading.attributions[position].values.tolist()
    return plots.horizontal_bar_chart(reading.attributions[position].names, values, _parts_title(reading, position),
                                      _parts_axis(reading, position), colours=_colours(values),
                                      touch_row_px=PART_TOUCH_ROW_PX)


class Chain(NamedTuple):
    """One head at one position, from its pattern to the next character: the model's own numbers (float32)."""

    labels: list[str]  # the keys read, positions 0 to the position
    weights: torch.Tensor  # (position + 1,): where the head looked
    writes: torch.Tensor  # (position + 1,): what it writes from each key onto the target, per unit of weight
    pushes: torch.Tensor  # weights * writes: each key's share of the head's part
    part: float  # the head's part of the logit (its bar)
    others: float  # every other part, summed
    logit: float  # the model's logit of the target
    target: int
    probability: float  # the target's probability
    other: int  # the best other token: the runner-up where the target is the guess, else the guess
    other_probability: float
    guessed: bool  # the target is the model's guess
    target_logit: float = 0.0  # the model's logits of the target and of the other token
    other_logit: float = 0.0
    versus: bool = False  # the chain reads logit(target) - logit(other): part, others and logit are differences


def _chain(reading: _Reading, position: int, layer: int, which: int) -> Chain:
    """The chain of head ``which`` of ``layer`` at ``position``, from the reading (nothing computed again)."""
    seen = slice(0, position + 1)
    weights, shares = (keys[position, seen] for keys in reading.keys[(layer, which)])
    parts = reading.attributions[position]
    index = parts.names.index(circuits.head_name(layer, which))
    others = torch.cat([parts.values[:index], parts.values[index + 1:]]).sum()
    probabilities = reading.probabilities[position]
    best, second = torch.topk(probabilities, 2).indices.tolist()
    guessed = best == parts.target_id
    other = second if guessed else best
    if parts.rival_id is not None:
        other = parts.rival_id  # the likeliest other token too, whatever ties make topk choose
    logits = reading.logits[position]
    return Chain(reading.tokens[seen], weights, reading.writes[(layer, which)][position, seen], shares,
                 float(parts.values[index]), float(others), parts.logit, parts.target_id,
                 float(probabilities[parts.target_id]), other, float(probabilities[other]), guessed,
                 float(logits[parts.target_id]), float(logits[other]), parts.rival_id is not None)


def _chain_arguments(reading: _Reading, position: int, layer: int, which: int) -> dict:
    """The chain at ``position`` as chain_changes' (and chain_figure's) arguments. Where not every key's label
    fits a phone, the tallest weights and the strongest pushes keep theirs, then the query (a stranger found the
    tallest bar unlabelled)."""
    chain = _chain(reading, position, layer, which)
    name = reading.tokenizer.label
    tallest = sorted(range(position + 1), key=lambda i: -float(chain.weights[i]))[:IMPORTANT_BARS]
    strongest = sorted(range(position + 1), key=lambda i: -abs(float(chain.pushes[i])))[:IMPORTANT_BARS]
    return dict(labels=chain.labels, weights=chain.weights.tolist(), writes=chain.writes.tolist(),
                pushes=chain.pushes.tolist(), head=circuits.head_name(layer, which),
                target=_label(name(chain.target)), position=position, part=chain.part, others=chain.others,
                logit=chain.logit, probability=chain.probability, other=_label(name(chain.other)),
                other_probability=chain.other_probability, guessed=chain.guessed, room_px=plots.LABEL_ROOM_PX,
                versus=chain.versus, logits=(chain.target_logit, chain.other_logit),
                decides=not _who_decides(reading.attributions[position], (layer, which)),
                important=[*(i for pair in zip(tallest, strongest) for i in pair), position])


def _chain_changes(reading: _Reading, position: int, layer: int, which: int) -> dict:
    """The chain's picture at ``position`` as changes to chain_plots.chain_base (what the heads deck sends a view)."""
    return chain_plots.chain_changes(**_chain_arguments(reading, position, layer, which))


def _numbers(reading: _Reading, position: int, layer: int, which: int) -> dict:
    """The parts and the chain of head ``which`` of ``layer`` at ``position`` as plain numbers (what /why's figures
    draw, unrounded float32): the parts sum to ``logit``; the keys' pushes (weight x write) sum to the head's
    ``part``, which with ``others`` is the logit. A worked key: weight 0.7, write +2.0 -> push +1.4."""
    parts = reading.attributions[position]
    chain = _chain(reading, position, layer, which)
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


def _parts_changes(reading: _Reading, position: int) -> dict:
    """The parts' figure at ``position`` as changes to the deck's base figure (no figure built)."""
    values = [float(f"{v:.6g}") for v in reading.attributions[position].values.tolist()]  # they sum to the logit
    title, top = plots._title_layout(_parts_title(reading, position))
    return {"data": [{"x": values, "marker": {"color": _colours(values)}}],
            "layout": {"title": title, "margin": {"t": top},
                       "xaxis": {"title": {"text": _parts_axis(reading, position)}}}}


def _circuits_view(reading: _Reading, layer: int, which: int) -> tuple[str, object, object]:
    """(heading, QK heatmap, OV heatmap) of one head over the vocabulary (or the subset). The text's heads are kept
    together, one piece of the memo (every head's are sent to the page, and would push the rest out one by one)."""
    held = reading.memo.get(("circuits", reading.name, tuple(reading.ids.tolist()), reading.distance), reading.model,
                            dict)
    if (layer, which) not in held:
        held[(layer, which)] = _read_circuits(reading, layer, which)
    return held[(layer, which)]


def _tables(reading: _Reading, layer: int, which: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The head's QK and OV tables over the vocabulary (or the subset), kept with the text's other heads'."""
    held = reading.memo.get(("tables", reading.name, tuple(reading.ids.tolist()), reading.distance), reading.model,
                            dict)
    if (layer, which) not in held:
        held[(layer, which)] = (circuits.qk_circuit(reading.model, layer, which, reading.subset, reading.distance),
                                circuits.ov_circuit(reading.model, layer, which, reading.subset))
    return held[(layer, which)]


def _table_rows(reading: _Reading) -> list[int]:
    """The token ids of the circuit tables' rows (and columns), in order: the vocabulary, or the subset."""
    return (reading.subset.tolist() if reading.subset is not None
            else list(range(reading.model.config.vocabulary_size)))


def _table_cells(reading: _Reading, position: int, layer: int, which: int) -> tuple[int, ...] | None:
    """The cells of the head's tables this position reads, as their rows' and columns' indices: (the query's QK row,
    the column of the key the head weighed most; that key's OV row, the target's column, or where a BPE guess is not
    in the table the column its row promotes most). None where the query or the key is outside the tables (a long
    BPE text)."""
    index = {token: row for row, token in enumerate(_table_rows(reading))}
    key = _looked_most(reading, position, layer, which)[0]
    query, looked, target = (int(reading.ids[position]), int(reading.ids[key]),
                             reading.attributions[position].target_id)
    if not {query, looked} <= index.keys():
        return None
    _, ov = _tables(reading, layer, which)
    column = index[target] if target in index else int(ov[index[looked]].argmax())
    return index[query], index[looked], index[looked], column


def _in_the_tables(reading: _Reading, position: int, layer: int, which: int) -> str:
    """The circuits' Look-for line: where this position's query and the key it looked at most sit in the head's
    tables below, in words: "**Look for:** outlined cells, position 30: QK row `e` ranks `f` 4th of the text's 32;
    OV row `f` ranks `␣` 39th of 65.", and where they are low "… QK row `o` ranks `h` 29th; OV row `h` ranks `?` 18th.
    Both low: tables read characters, not layers 0–2; trust the chain above." The tables' strongest pairs are not
    what the head did at this position, and their ranks can seem to contradict the chain: a low rank (_low: the key
    in QK, or the target in OV where the head pushed it up) is named, its reason said, and that the chain holds: a
    head that looks by position (_by_position), at any layer, reads what the tables leave out; past the first layer,
    the layers before. A target outside the tables (a
    BPE guess) gives what the key's OV row promotes most instead. Where the query or the key is outside them (a long
    BPE text) nothing is outlined, and the line is LOOK_FOR_CIRCUITS. The same cells are outlined on the tables
    (_cell_shapes)."""
    cells = _table_cells(reading, position, layer, which)
    if cells is None:
        return f"\n\n{LOOK_FOR_CIRCUITS}"
    query, key, _, column = cells
    rows = _table_rows(reading)
    index = {token: row for row, token in enumerate(rows)}
    qk, ov = _tables(reading, layer, which)
    in_text = sorted({index[token] for token in reading.ids.tolist() if token in index})
    qk_rank = int((qk[query, in_text] > qk[query, key]).sum()) + 1
    name = lambda row: _label(reading.tokenizer.label(rows[row]))  # noqa: E731
    ov_rank = None
    if rows[column] == reading.attributions[position].target_id:
        ov_rank = int((ov[key] > ov[key, column]).sum()) + 1
    # a target the head pushed down ranks low in the key's OV row as the chain says: no reason to give
    pushed_up = reading.attributions[position].head(layer, which) > 0
    lows = [kind for kind, low in (("QK", _low(qk_rank, len(in_text))),
                                   ("OV", ov_rank is not None and pushed_up and _low(ov_rank, len(rows)))) if low]
    low = " Both low:" if len(lows) == 2 else f" {''.join(lows)} low:"  # which rank (a learner could not tell)
    # which answer holds, said with the reason: a learner given low ranks beside the chain's key read two answers.
    # Then the ranks go without their rows' lengths ("29th", not "29th of the text's 32"): "low" says as much, and
    # the words in sight stay within 60
    why = ""
    if lows and _by_position(_looks(reading, layer, which)):
        why = f"{low} tables leave out position; {CHAIN_HOLDS}."
    elif layer > 0 and lows:  # the tables read embeddings alone (the direct path), not what the layers before wrote
        before = f"layers 0–{layer - 1}" if layer > 1 else "layer 0"
        why = f"{low} tables read characters, not {before}; {CHAIN_HOLDS}."
    of_text, of_rows = ("", "") if why else (f" of the text's {len(in_text)}", f" of {len(rows)}")
    promotes = (f"ranks `{name(column)}` {_ordinal(ov_rank)}{of_rows}" if ov_rank is not None
                else f"promotes `{name(column)}` most")  # a BPE guess outside the table's tokens: its row's first
    at = ""
    if reading.distance is not None:  # rotary positions: the QK table holds one distance, the key may sit at another
        back = position - _looked_most(reading, position, layer, which)[0]
        at = (f" at distance {reading.distance}" if back == reading.distance
              else f" at distance {reading.distance} (this key sits {back} back: set distance {back} to read its own)")
    return (f"\n\n**Look for:** outlined cells, position {position}: QK row `{name(query)}`{at} ranks "
            f"`{name(key)}` {_ordinal(qk_rank)}{of_text}; OV row `{name(key)}` {promotes}.{why}")


def _looks(reading: _Reading, layer: int, which: int) -> list[head_scores.Look]:
    """Where the head looks over the text (head_scores.looks_over_text), the clearest first; [] where its weights
    were not read (a model with more heads than MAX_RANKED_HEADS keeps only the heads it shows)."""
    if (layer, which) not in reading.keys:
        return []

    def read() -> list[head_scores.Look]:
        words = None
        if isinstance(reading.tokenizer, CharTokenizer):  # a BPE token's letters are not its word's
            words = head_scores.word_numbers("".join(reading.tokenizer.characters[i] for i in reading.ids.tolist()))
        return head_scores.looks_over_text(reading.keys[(layer, which)][0], reading.ids, words,
                                           reading.model.config.sliding_window)

    return reading.memo.get(("looks", reading.name, tuple(reading.ids.tolist()), layer, which), reading.model, read)


def _above(look: head_scores.Look) -> bool:
    """Whether a place gets LOOKS_RATIO times what an even spread gives it."""
    return look.share >= LOOKS_RATIO * look.chance


def _clear(look: head_scores.Look) -> bool:
    """Whether the head clearly looks there: LOOKS_RATIO times an even spread and LOOKS_CLEARLY beyond it."""
    return _above(look) and look.lift >= LOOKS_CLEARLY


def _by_position(looks: list[head_scores.Look]) -> bool:
    """Whether the head clearly looks by position (a distance back, or position 0), which its tables leave out."""
    return bool(looks) and _clear(looks[0]) and looks[0].kind in ("distance", "first")


def _look_name(reading: _Reading, look: head_scores.Look) -> str:
    """A Look's place in words: "1 back", "at itself", "at position 0", "at `\\n`", "within its own word", "at the
    word before", "at word starts"."""
    if look.kind in WORD_PLACES:
        return WORD_PLACES[look.kind]
    if look.kind == "distance":
        return "at itself" if look.what == 0 else f"{look.what} back"
    if look.kind == "first":
        return "at position 0"
    return f"at `{_label(reading.tokenizer.label(look.what))}`"


def _beside(reading: _Reading, looks: list[head_scores.Look]) -> head_scores.Look | None:
    """The place named beside the first, where the first is clear (_clear): one that shares no key with it
    (head_scores.apart), gets LOOKS_RATIO times an even spread's weight and BESIDE times the first's weight beyond it;
    None where none does."""
    if not looks or not _clear(looks[0]):
        return None
    first = int(reading.ids[0])
    return next((look for look in looks[1:] if head_scores.apart(looks[0], look, first) and _above(look)
                 and look.lift >= BESIDE * looks[0].lift), None)


def _looks_line(reading: _Reading, layer: int, which: int) -> str:
    """What the head does over the learner's text, in sight under "What L0 H2 does over your text": "Looks 1 back (92%
    of its weight overall; by chance: 5%); writes `␣` most.", with a second place where one shares no key with the first
    and comes near it (_beside: "Looks at `\\n` (23% …) and at position 0 (20%; 5%)"); where no place gets LOOKS_RATIO
    times an even spread and LOOKS_CLEARLY beyond it (_clear), that where it looks changes from query to query, the
    chain above being what it did at the position on screen; its strongest look and the place that comes nearest are
    behind the fold (_looks_more): in sight, "most weight: the word before" read as a second answer beside the chain's
    key at that position. The QK and OV tables cannot say either: a previous-token head looks by position, which
    they leave out, and a later layer's head reads what the layers before wrote. What it writes is the token _writes
    puts first. Only what it writes where its weights were not read."""
    looks = _looks(reading, layer, which)
    writes = f"writes `{_label(reading.tokenizer.label(_writes(reading, layer, which)[0][0]))}` most"
    if not looks:
        return f"\n\n{writes.capitalize()}."
    top = looks[0]
    if _clear(top):
        second = _beside(reading, looks)
        beside = "" if second is None else \
            f" and {_look_name(reading, second)} ({second.share:.0%}; {second.chance:.0%})"
        # "overall": a learner read the text's average as where the head looked at the position on screen
        return (f"\n\nLooks {_look_name(reading, top)} ({top.share:.0%} of its weight overall; by "
                f"chance: {top.chance:.0%}){beside}; {writes}.")
    return f"\n\n{NO_ONE_PLACE}; {writes}."


def _no_one_place_more(reading: _Reading, layer: int, which: int) -> str:
    """For the fold of a head with no one place (_looks_line): its strongest look over the text (one concrete look,
    head_scores.strongest_look: "`␣`@54 to `R`@48 (0.94)") and the place that comes nearest to one; "" for a head
    that has one."""
    looks = _looks(reading, layer, which)
    if not looks or _clear(looks[0]):
        return ""
    top = looks[0]
    nearest = NEAREST.get(top.kind) or _look_name(reading, top).removeprefix("at ")
    strongest = head_scores.strongest_look(reading.keys[(layer, which)][0], reading.model.config.sliding_window)
    example = "" if strongest is None else \
        f"Its strongest look: {_at(reading, strongest[0])} to {_at(reading, strongest[1])} ({strongest[2]:.2f}). "
    return (f"{example}Nearest to one place: {nearest}, {top.share:.0%} of its weight (by chance: "
            f"{top.chance:.0%}).\n\n")


def _at(reading: _Reading, position: int) -> str:
    """A token of the text at its position, as the chain names its keys: "`h`@63"."""
    return f"`{reading.tokens[position]}`@{position}"


def _writes(reading: _Reading, layer: int, which: int) -> list[tuple[int, float]]:
    """What the head writes over the text (circuits.head_writes: its mean share of each logit, centred), the
    WRITES_LISTED tokens it raises most, the most first: (token id, share). Every head's at once, one piece of the memo
    per text."""
    written = reading.memo.get(("writes", reading.name, tuple(reading.ids.tolist())), reading.model,
                               lambda: circuits.head_writes(reading.model, reading.ids))[layer, which]
    top = torch.topk(written, min(WRITES_LISTED, written.numel()))
    return list(zip(top.indices.tolist(), top.values.tolist()))


def _looks_more(reading: _Reading, layer: int, which: int) -> str:
    """For the fold: the next LOOKS_LISTED places the head looks over the text, those with LOOKS_RATIO times an even
    spread (a learner read "at itself 8% (6%)" as a place it looks). A character model's words are said to be runs of
    letters (a learner asked whether the space after a word is in it). Then the WRITES_LISTED tokens it writes
    most, with their shares."""
    writes = ", ".join(f"`{_label(reading.tokenizer.label(token))}` {value:+.2f}"
                       for token, value in _writes(reading, layer, which))
    wrote = (f"What it writes most over your text, its mean share of each logit less the mean over every logit: "
             f"{writes}.\n\n")
    first = _no_one_place_more(reading, layer, which)
    every = _looks(reading, layer, which)
    named = [*every[:1], _beside(reading, every)]  # in sight already (_looks_line), or just before (_no_one_place_more)
    looks = [look for look in every if look not in named and _above(look)][:LOOKS_LISTED]
    if not looks:
        return first + wrote
    listed = "; ".join(f"{_look_name(reading, look)} {look.share:.0%} ({look.chance:.0%})" for look in looks)
    words = " A word is a run of letters: spaces and punctuation are in none." if isinstance(
        reading.tokenizer, CharTokenizer) else ""
    return (f"{first}Where else it looks over your text, weight (and by chance): {listed}. \"By chance\" is what a "
            f"place would get if the head spread its weight evenly over every position a query may see. The line above "
            f"names a place that gets at least {LOOKS_RATIO:g} times its chance and {LOOKS_CLEARLY * 100:g} points of "
            f"weight more than chance.{words}\n\n{wrote}")


def _low(rank: int, of: int) -> bool:
    """A rank in a table's row the chain would not lead a reader to expect: past TABLE_RANK_SHOWN and a quarter of
    the row (a learner read "4th of 32" called low as a contradiction)."""
    return rank > max(TABLE_RANK_SHOWN, of // 4)


def _cell_shapes(reading: _Reading, position: int, layer: int, which: int) -> list[list[dict]]:
    """The outlines of _table_cells on the QK and the OV table (Plotly shapes, [QK's, OV's]): the row this position
    reads and, inside it, the cell. Empty where _table_cells is None."""
    cells = _table_cells(reading, position, layer, which)
    if cells is None:
        return [[], []]
    n = len(_table_rows(reading))
    return [plots.cell_outline(row, column, n) for row, column in (cells[:2], cells[2:])]


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _read_circuits(reading: _Reading, layer: int, which: int) -> tuple[str, object, object]:
    model, tokenizer, subset = reading.model, reading.tokenizer, reading.subset
    config = model.config
    chosen = circuits.head_name(layer, which)
    vocabulary = [_label(label) for label in labels(tokenizer, subset if subset is not None else
                                                    torch.arange(config.vocabulary_size))]
    qk, ov = _tables(reading, layer, which)
    direct = " (direct path: embeddings only)" if layer > 0 else ""  # on the tables themselves; more: CIRCUIT_MORE
    shown_of = "" if subset is None else f" ({subset.numel()} of the {config.vocabulary_size:,} tokens: the text's, " \
                                         "then the lowest ids)"
    # the pairs in words are among the text's own characters: one the model never saw keeps a random embedding,
    # whose entries can be the table's largest and mean nothing
    in_text = set(reading.ids.tolist())
    among = [k for k, token in enumerate(subset.tolist() if subset is not None else range(config.vocabulary_size))
             if token in in_text]
    looks, promotes = (_pairs_in_words(qk, vocabulary, "looks for", among),
                       _pairs_in_words(ov, vocabulary, "promotes", among))
    # a learner read layer 0's "`!` looks for `!`" against its line in sight, "1 back: 74%"
    by_position = ("This head looks by position, which the tables leave out: their pairs say little of it. "
                   if _by_position(_looks(reading, layer, which)) else "")
    # past the first layer the pairs are the direct path's, like the tables: a stranger read "`o` looks for `J`" as a
    # second answer beside the chain
    direct_pairs = ("Like the tables, the pairs below read the characters alone, not what the layers before wrote; the "
                    "chain above is what the head did. " if layer > 0 else "")
    # the strongest pairs in sight, the rest behind the fold (a stranger counted 94 words before it)
    heading = (f"### What {chosen} does over your text{_looks_line(reading, layer, which)}{HERE}\n\n"
               f"<details><summary>more</summary>\n\n{_looks_more(reading, layer, which)}"
               f"{by_position}{direct_pairs}The strongest pairs among your text's characters: "
               f"{'; '.join(looks)}; {'; '.join(promotes)}.{shown_of}\n\n"
               f"{_more(config)} {LOW_RANKS}\n\n</details>")
    apart = "" if reading.distance is None else f", {_back(reading.distance)}"  # a rotary model's: at one distance
    qk_map = plots.vocabulary_heatmap(qk, vocabulary, f"QK of {chosen}{apart}{direct}: query (row) → key character",
                                      x_title="key", y_title="query", hover="query %{y} → key %{x}: score %{z:.3f}")
    ov_map = plots.vocabulary_heatmap(ov, vocabulary, f"OV of {chosen}{direct}: attended (row) → next character",
                                      x_title="promoted", y_title="attended",
                                      hover="attending to %{y}, the logit of %{x}: %{z:.3f}")
    return heading, qk_map, ov_map


def _back(distance: int) -> str:
    """Where a rotary QK table's key sits: "key 1 back", "key 3 back", "key at the query" (distance 0)."""
    return "key at the query" if distance == 0 else f"key {distance} back"


def _more(config) -> str:
    """What the tables read, for this kind of model (behind the circuits' fold)."""
    if config.is_llama:
        return ROTARY_MORE
    return CIRCUIT_MORE if config.is_gpt else NOTEBOOK_MORE


def _ranking(reading: _Reading):
    if reading.effects is None:
        return None
    ordered = sorted(reading.effects, key=lambda e: (e.layer, e.head))
    return plots.horizontal_bar_chart([circuits.head_name(e.layer, e.head) for e in ordered],
                                      [e.added for e in ordered], "Loss added when each head alone is knocked out",
                                      "added loss")
