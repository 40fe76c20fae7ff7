"""The Why tab's page script: what runs in the browser, kept apart from the handlers (playground.ui.why_tab) that
send it numbers and figures.

The page holds the decks why_tab sends (chart_deck: every position's parts, heads' chains, circuits, the ranking)
and the knock-out numbers, and draws a new position, a head chosen in the list or by its bar, and a set of knocked
out heads from them without asking the server; what it lacks it asks for through hidden boxes. The headings it
writes are the ones the server writes from the same numbers (why_sentences.knock_text and page/why_page.js's knockText:
keep the two alike). This module holds the deck names, the elements' ids, the words both sides write (sent to the
page in page_scripts' prelude) and the js= calls into page/why_page.js; no handler.
"""

from __future__ import annotations

import json

# the words the server and the page both write
STRONGEST = "the head that pushed most"  # the head list's value (an API caller's too)
# its label: "pushed most" reads as toward the guess, and where no head decides the longest bar can push against it
STRONGEST_SHOWN = "the head with the longest bar"
# the list sits above the heading; what a bar left of 0 means is said while nothing is knocked out (with heads
# knocked out, a sentence says so where the loss falls)
KNOCK_HINT = ("Choose heads in the **knock out** list above to knock them out. A bar left of 0: the loss falls "
              "without that head.")
# a bar to the left is a head the text does better without, however long: the line says which way is needed
LOOK_FOR_KNOCK = "**Look for:** heads the text needs (right) or does better without (left)."
KNOCK_FOLD = ("<details><summary>more</summary>\n\n", "\n\n</details>")  # around the ranking's words
# Pictures first (at most 60 words before the fold, the heads' names said once): the heading names up to KNOCK_NAMED
# heads (past that the first three, then "and 2 more": the
# list above names every one), the table's column says "knocked out", and the loss falling is said without the names.
KNOCK_NAMED = 4
# "as above": the charts above this block stay the intact model's
KNOCK_COLUMNS = "| | intact, as above | knocked out | change |"
# A change in the loss smaller than this (nats) is said as none: over a short text, a head replaced by its mean moves
# the loss by a few thousandths either way, and "the loss falls" would say the head hurts
KNOCK_BARELY = 0.01
KNOCK_FALLS = ("**Without it the loss falls**: trained to help, it hurts this text.",  # one head, several
               "**Without them the loss falls**: trained to help, they hurt this text.")
KNOCK_BARELY_MOVES = (f"**The loss barely moves** (under {KNOCK_BARELY}): this text hardly needs it.",
                      f"**The loss barely moves** (under {KNOCK_BARELY}): this text hardly needs them.")
# where the circuits' heading (one per head) takes the line on this position's query and key in its tables (the
# head's reading at the position carries it: why_sentences.in_the_tables)
HERE = "<!-- here -->"

DECK, HEADS_DECK, CIRCUITS_DECK, RANKING_DECK = "why", "why-heads", "why-circuits", "why-ranking"
EVERY_KEY = 256  # the chain names every key, up to this many, where they fit the plot drawn: side by side they read
# as the text itself (the default text's 86 keys on a desktop), where the server's ticks named one key in eight
KEY_CHAR_PX, KEY_GAP_PX = 7, 4  # a character's width (plots.LABEL_CHAR_PX), and the least gap between two labels
KEY_GLYPHS = {"\\n": "⏎", "\\t": "⇥"}  # two-character labels named by one glyph where every key is named

HEADING_ELEM_ID = "why-heading"  # the position's heading, which a new position on a phone scrolls to
NARROW_PX = 700  # a screen narrower than this is a phone's: the answer is scrolled into view
HEAD_ELEM_ID = "why-head"  # the chosen head's heading, where a clicked bar takes the page
PARTS_ELEM_ID = f"{DECK}-chart-0"  # the attribution chart's host, whose head bars open their head
PICKER_ELEM_ID = "why-head-picker"  # the head list, whose options draw their head as they are pressed
PICKED_ELEM_ID = "why-picked-head"  # the hidden box a click on a head's bar writes the head's name into
PART_NOTE_ELEM_ID = "why-part-note"  # under the parts: what a clicked bar that is not a head means
KNOCKED_ELEM_ID = "why-knocked"  # the knock-out list
CHOSEN_LINE_PX = 2.5  # the outline of the chosen head's bar in the parts chart
PART_NOTE_CLASS = "why-part-note"  # the note's paragraph in it (the element takes no room without one shown)
# A part that is not a head has no attention pattern to open: a click on its bar says so, and what its bar is, where
# it was clicked ({name}: the bar's), so the click does not look ignored
PART_NOTES = {
    "mlp": "**{name}** has no attention pattern to open: an MLP reads only this position's own stream and writes "
           "back into it. Its bar, {value}, is what that write adds to the bars' total here.",
    "embedding": "The **{name}** has no attention pattern: it is what this character (or its place) writes before "
                 "any layer, read straight by the final norm and the LM head. Its bar: {value}.",
    "bias": "**{name}**: a constant, the same whatever the text, with no pattern to open. Its bar: {value}.",
}
# after a part's note, which head the views below still show (the head before stays outlined and open, which without
# this line reads as a view half changed); {head}: the outlined bar's
PART_NOTE_STAYS = " The views below stay **{head}**'s, outlined above."
ARGUMENTS = "position, head, knocked"  # what the page's view is drawn for: the last inputs of each drawing event



def take_js(more: bool) -> str:
    """A ``js=`` function (the four decks, the knock-out numbers, checkpoint, text, target, split, position, head,
    knocked) -> the four headings: keeps what arrived and draws the view on screen (page/why_page.js's takeEvent). An
    answer made for other inputs than the page's now (why_decks.settings_of) is left: answers can arrive out of order,
    and an old model's must not draw over the new one's. ``more``: a follow-up, ignored where the settings changed
    since its first answer."""
    return f"(...values) => window.whyPage.takeEvent({json.dumps(more)}, values)"


# a new position, a head chosen, heads ticked: drawn in the page from what it holds; what is not there is asked for
SHOW_EVENT_JS = f"({ARGUMENTS}) => window.whyPage.show({ARGUMENTS})"
# a head's reading at every position arrived: kept, and the view drawn again
TAKE_HEADS_JS = f"(heads, {ARGUMENTS}) => window.whyPage.takeHeads(heads, {ARGUMENTS})"
# the other split's decks arrived: kept (why_tab.why_split_spare)
KEEP_SPLIT_JS = "(raw) => { window.whyPage.keepSplit(raw); }"
# the split switched (split, position, head, knocked) -> the four headings: drawn from the decks kept for it, where the
# page holds them; else left as they are (the server's answer draws it)
SPLIT_JS = f"(split, {ARGUMENTS}) => window.whyPage.split(split, {ARGUMENTS})"
# a knock-out's numbers arrived: kept, and the view drawn again
TAKE_KNOCK_JS = f"(knock, {ARGUMENTS}) => window.whyPage.takeMoreKnock(knock, {ARGUMENTS})"


# (the view of the model before is taken off, not left under the new name; the heading says why nothing is drawn and
# what to do, not that something was removed)
STALE = ("### No view of this checkpoint\n\nIt cannot read this text (the message says why and what to do), so "
         "nothing is drawn here. Change the text, or choose another checkpoint.")
# the checkpoint's first answer refused: the headings say so and every chart is taken off (the next answer draws)
STALE_JS = f"() => window.whyPage.forget({json.dumps([STALE, '', '', ''])})"
# A click on a bar of the attribution chart (on a touch screen, the chart deck's tap): a part named; a head's name
# goes into the hidden box (PICKED_ELEM_ID), whose change opens that head. The parts' note's js_on_load.
PICK_JS = "window.whyPage.listen();"
# A head's bar clicked ("L1 H0 #<click time>"): its name for the head picker, in the page; anything else leaves the
# picker as it is.
PICK_HEAD_JS = "(picked, current) => window.whyPage.pickedHead(picked, current)"
# a head ticked in the knock-out list by a finger closes the list: a multiple choice stays open for the next, and on
# a phone its 16 options covered the knock-out's answer below it (a mouse keeps it open, beside the answer)
KNOCK_CHOSEN_JS = "() => { window.whyPage.knockChosen(); }"
