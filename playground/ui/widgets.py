"""Small HTML pieces several tabs share: the token chips. Owns their markup and colours, not the tabs' layout.

    chips_html("a∑", tokenizer) -> two chips: "a" over its ID, and "∑" in red over "?" (not in the vocabulary)
"""

from __future__ import annotations

import html

from playground.tokenizer import CharTokenizer, escape_char

_PALETTE = ("#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5", "#cffafe", "#e0e7ff")


def chips_html(text: str, tokenizer: CharTokenizer) -> str:
    """One chip per character: the character (escaped) over its ID; unknown characters in red."""
    chips = []
    for position, ch in enumerate(text):
        unknown = bool(tokenizer.find_unknown(ch))
        token_id = "?" if unknown else str(tokenizer.encode(ch).item())
        colour = "#fecaca" if unknown else _PALETTE[int(token_id) % len(_PALETTE)]
        border = "2px solid #dc2626" if unknown else "1px solid #cbd5e1"
        meaning = "not in the vocabulary" if unknown else f"-> {token_id}"
        title = f"position {position}: {escape_char(ch)!r} {meaning}"
        chips.append(
            f'<span class="tok-chip{" tok-unknown" if unknown else ""}" title="{html.escape(title)}" '
            f'style="display:inline-flex;flex-direction:column;align-items:center;margin:2px;padding:2px 6px;'
            f'border-radius:6px;background:{colour};border:{border};font-family:monospace;color:#111">'
            f'<span style="font-size:1.1em;white-space:pre">{html.escape(escape_char(ch))}</span>'
            f'<span style="font-size:0.75em;color:#475569">{token_id}</span></span>'
        )
    return '<div class="tok-chips" style="line-height:2.2">' + "".join(chips) + "</div>"
