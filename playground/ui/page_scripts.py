"""The page's own scripts, ``playground/ui/page/*.js`` (one file per concern, sent once in the page's head), and its
stylesheet, ``page/app.css``.

Each file defines one object on ``window`` (``chartDeck``, ``whyPage``, ``attentionPage``, ``samplePage``...), and
the tabs' ``js=`` strings are short calls into them. The values a script shares with Python (element ids, event
names, deck names, the words both sides write) come from one generated prelude, ``window.playgroundConstants``,
written here from the Python constants, so no constant is pasted into a script by hand. The files are read when the
app is built (``head``, cached), not at import time. The stylesheet's ``${NAME}`` are filled the same way, from the
Python constants the scripts and tabs share (``style_constants``), when the app is built (``stylesheet``).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from string import Template

PAGE = Path(__file__).parent / "page"
# in the order they run: common.js first (the others use it), chart_deck.js before the tabs that draw decks
SCRIPTS = ("common.js", "chart_deck.js", "attention.js", "model.js", "why_page.js", "sample.js", "score.js")
STYLESHEET = "app.css"


def constants() -> dict:
    """The Python values the page's scripts read, by script: ``window.playgroundConstants.<name>.<CONSTANT>``."""
    from playground.lens.walkthrough import STEP_TITLES
    from playground.ui import attention_tab, chart_deck, model_tab, plots, sample_tab, score_views, why_page

    return {
        "chartDeck": {name: getattr(chart_deck, name) for name in (
            "TAP_READ_MS", "TAP_EVENT", "DRAWN_EVENT", "HOST_CLASS", "WIDE_CLASS", "PINNED_CLASS", "TICKED_CLASS",
            "NARROW_WIDTH", "WAITING_ATTR", "PHONE_WIDTH", "REVEAL_BELOW")} | {"LABEL_STEPS": list(plots.LABEL_STEPS)},
        "attention": {name: getattr(attention_tab, name) for name in (
            "DECK", "QUERY_ELEM_ID", "STAGE_ELEM_ID", "ROW_FOOT_PX", "POSITIONS_HELD")}
        | {"STEP_TITLES": list(STEP_TITLES)},
        "model": model_tab.page_constants(),
        "why": {name: getattr(why_page, name) for name in (
            "STRONGEST", "KNOCK_HINT", "LOOK_FOR_KNOCK", "KNOCK_FOLD", "KNOCK_NAMED", "KNOCK_COLUMNS", "KNOCK_BARELY",
            "KNOCK_FALLS", "KNOCK_BARELY_MOVES", "HERE", "DECK", "HEADS_DECK", "CIRCUITS_DECK", "RANKING_DECK",
            "EVERY_KEY", "KEY_CHAR_PX", "KEY_GAP_PX", "KEY_GLYPHS", "HEADING_ELEM_ID", "NARROW_PX", "HEAD_ELEM_ID",
            "PARTS_ELEM_ID", "PICKER_ELEM_ID", "PICKED_ELEM_ID", "PART_NOTE_ELEM_ID", "KNOCKED_ELEM_ID",
            "CHOSEN_LINE_PX", "PART_NOTE_CLASS", "PART_NOTES", "PART_NOTE_STAYS")},
        "score": {name: getattr(score_views, name) for name in (
            "WHY_SCORE_ELEM_ID", "ATTENTION_SCORE_ELEM_ID", "ATTENTION_SCORE_PICKED_ELEM_ID")},
        "sample": {name: getattr(sample_tab, name) for name in (
            "INSPECT_DECK_ID", "INSPECT_ELEM_ID", "PICKED_ELEM_ID", "PHONE_WIDTH")},
    }


def prelude() -> str:
    """``window.playgroundConstants = {...};``: constants() as JSON, safe inside a ``<script>`` element."""
    return "window.playgroundConstants = " + json.dumps(constants(), ensure_ascii=False).replace("</", "<\\/") + ";"


@functools.cache
def head() -> str:
    """The HTML for the page's head: the prelude, then every script in SCRIPTS, each in its own ``<script>``."""
    sources = [prelude()] + [(PAGE / name).read_text(encoding="utf-8") for name in SCRIPTS]
    return "".join(f"<script>\n{source}\n</script>\n" for source in sources)


def style_constants() -> dict[str, str]:
    """The Python values the stylesheet reads, as ``${NAME}``: class names, element ids, widths the scripts share."""
    from playground.ui import attention_tab, chart_deck, common, why_page

    values = {name: getattr(chart_deck, name) for name in (
        "HOST_CLASS", "WIDE_CLASS", "TICKED_CLASS", "WAITING_ATTR", "WAITING_AFTER_S", "PHONE_WIDTH", "NARROW_WIDTH")}
    values |= {name: getattr(why_page, name) for name in ("PART_NOTE_ELEM_ID", "PART_NOTE_CLASS")}
    values |= {"STAGE_ELEM_ID": attention_tab.STAGE_ELEM_ID, "ATTENTION_DECK": attention_tab.DECK,
               "WAITING_NOTE": json.dumps(chart_deck.WAITING_NOTE, ensure_ascii=False),  # a CSS string
               "TAP_TARGETS": common.TAP_TARGETS, "TAP_PX": common.TAP_PX}
    return {name: str(value) for name, value in values.items()}


@functools.cache
def stylesheet() -> str:
    """``page/app.css`` with its ``${NAME}`` filled from style_constants (a name it lacks fails the build)."""
    return Template((PAGE / STYLESHEET).read_text(encoding="utf-8")).substitute(style_constants())
