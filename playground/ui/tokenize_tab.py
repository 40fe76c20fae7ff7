"""Tokenize tab: text -> tokens with IDs, the round trip, counts and the vocabulary table.

The checkpoint's own tokenizer decides the chips: one per character for the playground's checkpoints, one per
BPE piece for a GPT-2 layout checkpoint, shown beside the same text in characters (how many tokens each needs),
with the byte-level space marker explained and, on request, the merges that built a word.

The result is drawn when the page opens and again as the text, the vocabulary source or the checkpoint
changes, without a click; the Tokenize button (api_name "tokenize") stays for the API and for people who
press it. While typing, a refusal (empty text for "this text", a name that is not a checkpoint) is shown in
place of the counts instead of as an error pop-up on every keystroke.
"""

from __future__ import annotations

import functools
from collections import Counter

import gradio as gr

from playground import checks
from playground.text.data import Corpus, is_tiny_shakespeare
from playground.text.subword import SPACE_MARKER_NOTE, BPETokenizer
from playground.text.tokenizer import CharTokenizer, Tokenizer, escape_char, list_unknown, without_unknown
from playground.ui.common import (
    AppContext,
    checkpoint_dropdown,
    default_corpus_choice,
    fold,
    keep_on_refusal,
    message_for,
)
from playground.ui.events import wire
from playground.ui.widgets import chips_html

SOURCES = ("loaded checkpoint", "corpus (Tiny Shakespeare)", "this text")
DEFAULT_TEXT = "Hello world"
TABLE_HEADERS = ["ID", "character", "shown as", "count"]
PIECE_HEADERS = ["#", "ID", "token in the vocabulary", "shown as", "characters"]
MAX_WORD_CHARS = 64  # the merges of a word or two: a step per merge, each listing the word's symbols



def source_choices(corpus: Corpus) -> list[tuple[str, str]]:
    """The vocabulary radio's (label, value) pairs, the corpus's labelled with what it counts in ("corpus: the
    built-in Sonnets (no Tiny Shakespeare)" on a server without it, so the label names the counts shown); the values
    stay the API's."""
    return [(f"corpus: {default_corpus_choice(corpus)}" if value == SOURCES[1] else value, value) for value in SOURCES]


def _unknown_note(unknown: list, warn: bool, where: str = "") -> str:
    """The note naming the characters the vocabulary lacks (the first ten); also a toast when ``warn``."""
    listed = list_unknown(unknown)
    if warn:
        gr.Warning(f"{len(unknown)} character(s) are not in the vocabulary: {listed}")
    return (f"**{len(unknown)} character(s) are not in this vocabulary**{where}: {listed}. They were left out of the "
            "IDs.")

def _vocabulary(ctx: AppContext, source: str, checkpoint: str | None,
                text: str) -> tuple[Tokenizer, str, Counter, str | None]:
    """The tokenizer for ``source``, a name for where its counts come from, those counts, and a notice when
    the corpus counted in is not the one asked for (offline, the built-in Sonnets stand in for Tiny Shakespeare)."""
    if source == SOURCES[0]:
        loaded = ctx.checkpoint(checkpoint or ctx.default_checkpoint_name() or "")
        if not isinstance(loaded.tokenizer, CharTokenizer):
            return loaded.tokenizer, "this text", Counter(), loaded.description
        trained_on = (loaded.training or {}).get("corpus") or {}
        if not is_tiny_shakespeare(trained_on.get("name"), trained_on.get("source")):
            return loaded.tokenizer, "this text", Counter(text), None
        corpus = ctx.corpus()
        notice = None if corpus.is_tiny_shakespeare else \
            f"{loaded.name} was trained on Tiny Shakespeare, but the counts are in {corpus.label}: {corpus.reason}."
        return loaded.tokenizer, corpus.label, ctx.corpus_counts(), notice
    if source == SOURCES[1]:
        corpus, counts = ctx.corpus(), ctx.corpus_counts()
        notice = None if corpus.is_tiny_shakespeare else f"The vocabulary and counts come from {corpus.label}: " \
            f"{corpus.reason}."
        return CharTokenizer(sorted(counts)), corpus.label, counts, notice
    if source == SOURCES[2]:
        if not text:
            raise ValueError("Type some text first: the vocabulary is trained from it")
        return CharTokenizer.train_from_text(text), "this text", Counter(text), None
    raise ValueError(f"unknown vocabulary source {checks.shown(source)}; choose one of: {', '.join(SOURCES)}")


def tokenize(ctx: AppContext, text: str, source: str, checkpoint: str | None, *, warn: bool = True):
    """Plain handler: returns (chips HTML, IDs, decoded round trip, counts Markdown, vocabulary rows).

    ``warn=False`` (live updates while typing) leaves the unknown characters to the counts, with no pop-up.
    """
    text = checks.text(text, "The text", ctx.limits.max_text_chars)
    tokenizer, counts_label, counts, corpus_notice = _vocabulary(ctx, source, checkpoint, text)
    if not isinstance(tokenizer, CharTokenizer):
        return _subword(text, tokenizer, corpus_notice, warn)
    unknown = tokenizer.find_unknown(text)
    known_text = without_unknown(tokenizer, text)
    ids = tokenizer.encode(known_text).tolist()
    decoded = tokenizer.decode(ids)
    notes = [corpus_notice] if corpus_notice else []
    if unknown:
        notes.append(_unknown_note(unknown, warn, " (highlighted in red)"))
    stats = (f"**{len(text)}** characters · **{len(ids)}** tokens · vocabulary of "
             f"**{tokenizer.vocabulary_size}** symbols · round trip "
             f"{'exact' if decoded == text else 'loses the unknown characters'}")
    rows = [[i, ch, escape_char(ch), counts.get(ch, 0)] for i, ch in enumerate(tokenizer.characters)]
    headers = ["ID", "character", "shown as", f"count in {counts_label}"]
    table = {"headers": headers, "data": rows}
    return chips_html(text, tokenizer), str(ids), decoded, "\n\n".join([stats, *notes]), table


def _subword(text: str, tokenizer: Tokenizer, description: str | None, warn: bool):
    """``tokenize`` for a subword tokenizer: its pieces, and the same text as characters beside them."""
    unknown = tokenizer.find_unknown(text)
    known_text = without_unknown(tokenizer, text)
    pieces = tokenizer.pieces(known_text)
    ids = [p.token_id for p in pieces]
    decoded = tokenizer.decode(ids)
    characters = CharTokenizer.train_from_text(text) if text else None
    chips = chips_html(known_text, tokenizer, f"{tokenizer.kind}, the checkpoint's own tokenizer: {len(ids)} tokens")
    if characters is not None:
        chips += chips_html(text, characters, f"The character tokenizer on the same text: {len(text)} tokens")
    ratio = f" ({len(text) / len(ids):.1f} characters a token)" if ids else ""
    stats = (f"**{len(text)}** characters · **{len(ids)}** {tokenizer.kind} tokens{ratio}; the character tokenizer "
             f"needs **{len(text)}** · vocabulary of **{tokenizer.vocabulary_size:,}** tokens · round trip "
             f"{'exact' if decoded == text else 'loses the unknown characters'}")
    notes = [note for note in (description,) if note]
    if isinstance(tokenizer, BPETokenizer) and tokenizer.byte_level:
        notes.append(SPACE_MARKER_NOTE)
    if unknown:
        notes.append(_unknown_note(unknown, warn))
    written = tokenizer.token if isinstance(tokenizer, BPETokenizer) else tokenizer.label
    rows = [[i, p.token_id, written(p.token_id), p.label, known_text[p.start:p.end]] for i, p in enumerate(pieces)]
    table = {"headers": PIECE_HEADERS, "data": rows}
    return chips, str(ids), decoded, "\n\n".join([stats, *notes]), table


def merges(ctx: AppContext, word: str, checkpoint: str | None) -> str:
    """Markdown: the merges that built ``word`` in the checkpoint's BPE tokenizer, step by step."""
    word = checks.text(word, "The word", MAX_WORD_CHARS)
    if not word:
        raise ValueError("Type a word to see the merges that build it")
    loaded = ctx.checkpoint(checkpoint or ctx.default_checkpoint_name() or "")
    tokenizer = loaded.tokenizer
    if not isinstance(tokenizer, BPETokenizer):
        return (f"{loaded.name} has a {tokenizer.kind} tokenizer: every character is a token, so nothing is "
                "merged. Type a GPT-2 Hub repo id (owner/name) in Checkpoint to see BPE merges.")
    label = tokenizer.symbol_label
    parts = []
    for piece in tokenizer.word_merges(word):
        lines = [f"**{label(piece.piece)}** (written `{piece.piece}` in the vocabulary)", "",
                 "start: " + " ".join(f"`{label(s)}`" for s in piece.start)]
        if piece.whole_word:
            lines.append("the whole piece is in the vocabulary: this tokenizer takes it without merging")
        for number, step in enumerate(piece.steps, 1):
            lines.append(f"{number}. `{label(step.left)}` + `{label(step.right)}` (merge {step.rank:,} of the list) "
                         "→ " + " ".join(f"`{label(s)}`" for s in step.symbols))
        library = ", ".join(f"`{label(token)}`" for token in piece.library_tokens)
        lines.append("")
        lines.append(f"The tokenizers library gives {library}" + (
            ": the same." if piece.matches else ": different from this replay (its options differ from the "
                                                "plain merge order)."))
        parts.append("\n".join(lines))
    intro = ("BPE starts from single bytes and applies its merge list in order: each step joins the adjacent pair "
             "that was learnt earliest, wherever it occurs, until no listed pair is left. ")
    note = SPACE_MARKER_NOTE if tokenizer.byte_level else ""
    return intro + note + "\n\n" + "\n\n---\n\n".join(parts)


def tokenize_live(ctx: AppContext, text: str, source: str, checkpoint: str | None):
    """``tokenize`` as the page opens and as a person types: a refusal becomes the counts' text, not an error."""
    try:
        return tokenize(ctx, text, source, checkpoint, warn=False)
    except ValueError as exc:  # CheckpointError and HubError are ValueErrors too
        return "", "", "", f"**{message_for(exc)}**", {"headers": TABLE_HEADERS, "data": []}


# a ``js=`` function: resolves once the tab's chips are drawn (the page's first paint), or after 4 s
DRAWN_JS = "() => window.playgroundPage.whenDrawn('.tok-chips .tok-chip', 4000)"


def build(ctx: AppContext) -> None:
    gr.Markdown(
        "A character-level tokenizer gives every distinct character an ID, in sorted order: the model only ever "
        "sees these numbers. Type some text and see each character's ID.\n\n" + fold(
            "Pick where the vocabulary comes from. A GPT-2 checkpoint from the Hub (type its repo id, e.g. "
            "openai-community/gpt2) brings its own BPE tokenizer: its chips are subword pieces, shown beside the "
            "same text in characters.", "GPT-2's subword tokens")
    )
    with gr.Row():
        with gr.Column(scale=2):
            text = gr.Textbox(DEFAULT_TEXT, label="Text", lines=3, max_lines=12)
        with gr.Column(scale=1):
            # the corpus named once it is read (source_choices), as the page opens
            source = gr.Radio([("corpus" if value == SOURCES[1] else value, value) for value in SOURCES],
                              value=SOURCES[0] if ctx.default_checkpoint_name() else SOURCES[2],
                              label="Vocabulary from")
            checkpoint = checkpoint_dropdown(ctx, "tokenize")
    # the corpus's choice named as the page opens (not as the app is built: reading it may download Tiny Shakespeare)
    gr.on(None, lambda: gr.Radio(choices=source_choices(ctx.corpus())), None, source, api_name="tokenize_corpus_label",
          api_visibility="private", show_progress="hidden")
    run = gr.Button("Tokenize", variant="primary")
    chips = gr.HTML(label="Tokens")
    stats = gr.Markdown(label="counts")
    with gr.Row():
        ids = gr.Textbox(label="Token IDs", lines=2)
        decoded = gr.Textbox(label="Decoded back (round trip)", lines=2)
    table = gr.Dataframe(label="Vocabulary", headers=TABLE_HEADERS, interactive=False, max_height=400,
                         elem_classes=["playground-table"])
    with gr.Accordion("How BPE built a word (a BPE checkpoint's merges)", open=False):
        with gr.Row():
            word = gr.Textbox(" question", label="Word", max_length=MAX_WORD_CHARS,
                              info="a leading space gives the form a word takes inside a sentence")
            show_merges = gr.Button("Show merges")
        merge_steps = gr.Markdown(label="merges")

    inputs, outputs = [text, source, checkpoint], [chips, ids, decoded, stats, table]
    keep_on_refusal(wire(run.click, tokenize, ctx, inputs, outputs, api_name="tokenize", **ctx.fast_lane), outputs,
                    "tokenize_refused")
    keep_on_refusal(wire(text.submit, tokenize, ctx, inputs, outputs, api_name="tokenize_on_enter",
                         api_visibility="private", **ctx.fast_lane), outputs, "tokenize_on_enter_refused")
    # no triggers: when the page loads and whenever an input changes (typing, the source, the checkpoint)
    wire(functools.partial(gr.on, None), tokenize_live, ctx, inputs, outputs, api_name="tokenize_live",
         api_visibility="private", show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane)
    wire(functools.partial(gr.on, [show_merges.click, word.submit]), merges, ctx, [word, checkpoint], merge_steps,
         api_name="tokenize_merges", api_visibility="private", **ctx.fast_lane)
