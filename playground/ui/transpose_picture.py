"""The forgotten transpose as a picture: coloured blocks moving (level 3 of the Model tab, its what-if switch).

Each head's (T, d_k) output is a column of T blocks, one per token, in the head's colour. Joined right
(``.transpose(1, 2)`` then ``.view``), row t holds every head's block for token t: the colours stand in columns.
Joined as notebook 002's code does (``.view`` alone), the (h, T, d_k) memory is cut in order into rows of h blocks:
the blocks move to where ``ForgottenJoin.block_sources`` says they land, and one head's rows fill whole joined rows.
The page animates between the two with CSS alone (no script): an HTML string for a ``gr.HTML``.

    picture(forgotten, tokens)  ->  '<div class="tp-picture" ...>' with one .tp-block per (head, token),
                                    data-right="t,h" and data-wrong="row,block" naming its places in the two joins
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from playground.lens.anatomy import ForgottenJoin
from playground.lens.walkthrough.lessons import FOLD
from playground.ui.plots import CATEGORY_COLOURS

CAPTION = ("Each colour is one head's output, a block per token. Joined right, row t holds every head's block for "
           "token t; notebook 002's view without the transpose moves them: rows mix tokens.")
MORE = ("The heads' outputs lie in memory as (h, T, d_k): head 0's T rows first, then head 1's. .transpose(1, 2) "
        "makes it (T, h, d_k), so after .contiguous() each token's h blocks lie side by side and .view(T, h·d_k) "
        "joins the right pieces. Without it the view cuts head 0's rows, in order, into the first joined rows: a row "
        "holds other tokens' blocks, and a column other heads'. PyTorch raises no error: the shapes match either way.")
HEIGHT_PX = 360  # the grid's height at most: a long text's blocks get thinner, never the picture taller
WIDTH_PX = 280  # the blocks' width at most, all heads together (fits a phone beside the row labels)
LABELLED_PX = 14  # blocks at least this tall carry their token's name
PERIOD_S = 12  # one cycle: the right join, the move, the notebook's join, the move back (long enough to read each
# join); a pointer on the picture, or a tap on a phone, holds it still, and three choices above it show it moving or
# hold either join by name (a hold alone freezes whichever join is showing)
STATES = (("move", "moving"), ("right", "joined right"), ("wrong", "notebook 002's join"))

STYLE = """<style>
.tp-picture { position: relative; margin: 8px 0; font-size: 12px; }
.tp-stage { position: relative; }
.tp-grid { position: relative; margin-left: 96px; }
.tp-block { position: absolute; box-sizing: border-box; border: 1px solid rgba(255,255,255,.7); color: #1f2937;
  text-align: center; overflow: hidden; white-space: nowrap; transform: translate(var(--x0), var(--y0));
  animation: tp-move """ + str(PERIOD_S) + """s ease-in-out infinite; }
.tp-row { position: absolute; left: -96px; width: 92px; text-align: right; overflow: hidden; white-space: nowrap;
  color: #4b5563; }
.tp-title { display: grid; margin-left: 96px; font-weight: 600; }
.tp-title span { grid-area: 1 / 1; }
.tp-axis { margin: 2px 0 4px 96px; color: #4b5563; }
.tp-picture:hover .tp-block, .tp-picture:hover .tp-title span { animation-play-state: paused; }
@media (max-width: 480px) { .tp-title, .tp-axis, .tp-grid { margin-left: 56px; } .tp-row { left: -56px; width: 52px; } }
.tp-title .tp-right { animation: tp-right """ + str(PERIOD_S) + """s ease-in-out infinite; }
.tp-title .tp-wrong { animation: tp-wrong """ + str(PERIOD_S) + """s ease-in-out infinite; opacity: 0; }
@keyframes tp-move { 0%, 30% { transform: translate(var(--x0), var(--y0)); }
  45%, 80% { transform: translate(var(--x1), var(--y1)); } 95%, 100% { transform: translate(var(--x0), var(--y0)); } }
@keyframes tp-right { 0%, 30% { opacity: 1; } 40%, 85% { opacity: 0; } 95%, 100% { opacity: 1; } }
@keyframes tp-wrong { 0%, 35% { opacity: 0; } 45%, 80% { opacity: 1; } 90%, 100% { opacity: 0; } }
@media (prefers-reduced-motion: reduce) {
  .tp-block { animation: none; transform: translate(var(--x1), var(--y1)); }
  .tp-title .tp-right { animation: none; opacity: 0; } .tp-title .tp-wrong { animation: none; opacity: 1; } }
.tp-state { position: absolute; opacity: 0; width: 1px; height: 1px; margin: 0; }
.tp-states { margin: 0 0 6px 96px; display: flex; flex-wrap: wrap; gap: 4px; align-items: center; color: #4b5563; }
.tp-states label { border: 1px solid #d1d5db; border-radius: 4px; padding: 2px 8px; cursor: pointer;
  min-height: 28px; display: inline-flex; align-items: center; color: #1f2937; }
@media (pointer: coarse) { .tp-states label { min-height: 44px; } }
@media (max-width: 480px) { .tp-states { margin-left: 0; } }
.tp-s-move:checked ~ .tp-states .tp-l-move, .tp-s-right:checked ~ .tp-states .tp-l-right,
.tp-s-wrong:checked ~ .tp-states .tp-l-wrong { background: #e5e7eb; font-weight: 700; }
.tp-state:focus-visible ~ .tp-states { outline: 2px solid #f97316; outline-offset: 2px; }
.tp-s-right:checked ~ .tp-stage .tp-block { animation: none; transform: translate(var(--x0), var(--y0)); }
.tp-s-wrong:checked ~ .tp-stage .tp-block { animation: none; transform: translate(var(--x1), var(--y1)); }
.tp-s-right:checked ~ .tp-title .tp-right, .tp-s-wrong:checked ~ .tp-title .tp-wrong { animation: none; opacity: 1; }
.tp-s-right:checked ~ .tp-title .tp-wrong, .tp-s-wrong:checked ~ .tp-title .tp-right { animation: none; opacity: 0; }
</style>"""


def colour(head: int) -> str:
    """The head's colour: the one the map of the scrambled join gives it (plots.category_heatmap)."""
    return CATEGORY_COLOURS[head % len(CATEGORY_COLOURS)]


def picture(forgotten: ForgottenJoin, tokens: Sequence[str]) -> str:
    """The blocks of both joins, each (head, token) block moving between its place in the right join (row token,
    column head) and its place in notebook 002's (where block_sources puts it)."""
    T, h = forgotten.length, forgotten.heads_num
    d = forgotten.pitfall.head_size
    width = max(12, min(56, WIDTH_PX // h))
    height = max(3, min(22, HEIGHT_PX // T))
    wrong_place = {}  # (head, token) -> (row, block) in the notebook's join
    for row, blocks in enumerate(forgotten.block_sources.tolist()):  # (T, h, 2)
        for block, (head, token) in enumerate(blocks):
            wrong_place[head, token] = (row, block)
    cells = []
    for head in range(h):
        for token in range(T):
            row, block = wrong_place[head, token]
            name = html.escape(tokens[token])
            word = f"t{token}" if height >= LABELLED_PX else ""
            cells.append(
                f'<div class="tp-block" data-head="{head}" data-token="{token}" data-right="{token},{head}" '
                f'data-wrong="{row},{block}" title="head {head}, token {token} {name}: right join row {token} '
                f'block {head}; without the transpose row {row} block {block}" '
                f'style="width:{width}px;height:{height}px;line-height:{height - 2}px;background:{colour(head)};'
                f'--x0:{head * width}px;--y0:{token * height}px;--x1:{block * width}px;--y1:{row * height}px">'
                f"{word}</div>")
    # every row named where the blocks are tall enough; else the first and the last (its label ending with the
    # grid), so the rows read as rows
    tall = max(height, LABELLED_PX)
    named = {t: t * height for t in range(T)} if height >= LABELLED_PX else {0: 0, T - 1: max(0, T * height - tall)}
    rows = "".join(f'<div class="tp-row" style="top:{top}px;height:{tall}px;line-height:{tall}px">row {t} '
                   f"{html.escape(tokens[t])}</div>" for t, top in named.items())
    # radios first, siblings of what they change (CSS alone: ``:checked ~``); the labels are the visible choices
    states = "".join(f'<input type="radio" class="tp-state tp-s-{key}" id="tp-{key}" name="tp-state"'
                     f'{" checked" if key == "move" else ""}>' for key, _ in STATES)
    choices = "".join(f'<label class="tp-l-{key}" for="tp-{key}">{html.escape(label)}</label>' for key, label in STATES)
    legend = " ".join(f'<span style="background:{colour(head)};padding:0 4px">head {head}</span>'
                      for head in range(h))
    title = (f'<div class="tp-title"><span class="tp-right">Joined right: .transpose(1, 2), then .view → ({T}, '
             f'{h}·{d})</span><span class="tp-wrong">Notebook 002: .view alone → ({T}, {h}·{d}), rows mixed</span>'
             f'</div><div class="tp-axis">each row: {h} blocks of {d} features · hover or tap to hold</div>')
    return (f'{STYLE}<div class="tp-picture">{states}<div class="tp-states">show: {choices}</div>{title}'
            f'<div class="tp-stage" role="img" aria-label="The heads\' blocks moving from the right join to notebook '
            f'002\'s join without the transpose"><div class="tp-grid" style="width:{h * width}px;'
            f'height:{T * height}px">{rows}{"".join(cells)}</div></div><p>{legend}</p><p class="tp-caption">{CAPTION}'
            f'</p><details><summary>{FOLD}</summary><p>{html.escape(MORE)}</p></details></div>')
