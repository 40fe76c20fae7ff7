"""Small HTML pieces several tabs share: the token chips. Owns their markup and colours, not the tabs' layout.

    chips_html("a∑", tokenizer) -> two chips: "a" over its ID, and "∑" in red over "?" (not in the vocabulary)
    chips_html("Hello world", gpt2_tokenizer) -> "Hello" over 15496, "␣world" over 995

One chip per token, whatever the tokenizer (tokenizer.Tokenizer.pieces): a character, or a BPE piece.
"""

from __future__ import annotations

import html

from playground.text.tokenizer import Tokenizer

_PALETTE = ("#dbeafe", "#dcfce7", "#fef9c3", "#fce7f3", "#ede9fe", "#ffedd5", "#cffafe", "#e0e7ff")


def chips_html(text: str, tokenizer: Tokenizer, caption: str = "") -> str:
    """One chip per token: its label (escaped: "␣" for a space) over its ID; unknown characters in red.

    ``caption``, when given, heads the row ("BPE: 3 tokens").
    """
    chips = []
    for index, piece in enumerate(tokenizer.pieces(text)):
        unknown = piece.token_id is None
        token_id = "?" if unknown else str(piece.token_id)
        colour = "#fecaca" if unknown else _PALETTE[(piece.token_id if tokenizer.kind == "character" else index)
                                                    % len(_PALETTE)]
        border = "2px solid #dc2626" if unknown else "1px solid #cbd5e1"
        chips.append(
            f'<span class="tok-chip{" tok-unknown" if unknown else ""}" title="{html.escape(piece.detail)}" '
            f'style="display:inline-flex;flex-direction:column;align-items:center;margin:2px;padding:2px 6px;'
            f'border-radius:6px;background:{colour};border:{border};font-family:monospace;color:#111">'
            f'<span style="font-size:1.1em;white-space:pre">{html.escape(piece.label)}</span>'
            f'<span style="font-size:0.75em;color:#475569">{token_id}</span></span>'
        )
    heading = f'<div class="tok-caption" style="font-weight:600">{html.escape(caption)}</div>' if caption else ""
    row = f"tok-{tokenizer.kind.lower()}"  # tok-character or tok-bpe: a page (or a test) can tell the rows apart
    return (f'<div class="tok-row {row}">{heading}<div class="tok-chips" style="line-height:2.2">'
            + "".join(chips) + "</div></div>")
