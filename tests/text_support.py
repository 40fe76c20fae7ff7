"""What the tests of the page's words share: the words a reader sees before opening a fold (issue 29's "pictures
first": at most 60 of them in any view)."""

from __future__ import annotations

import re

MOST_WORDS = 60  # a view's words in sight before its "more" fold


def visible_words(markdown: str) -> int:
    """The words a reader sees before opening a fold: the text outside <details>, and each fold's summary. HTML tags
    are not words, nor a table's rules, | and |---| (the knock-out table's were counted as 21; p(`e`) is one)."""
    shown = re.sub(r"<details><summary>(.*?)</summary>.*?</details>", r"\1", markdown, flags=re.S)
    shown = re.sub(r"<[^>]+>", " ", shown)
    shown = re.sub(r"[#|]", " ", re.sub(r"[*`]", "", shown))
    return len([word for word in shown.split() if not set(word) <= set("-:")])
