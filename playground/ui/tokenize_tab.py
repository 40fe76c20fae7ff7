"""Tokenize tab: text -> character tokens with IDs, the round trip, counts and the vocabulary table.

The result is drawn when the page opens and again as the text, the vocabulary source or the checkpoint
changes, without a click; the Tokenize button (api_name "tokenize") stays for the API and for people who
press it. While typing, a refusal (empty text for "this text", a name that is not a checkpoint) is shown in
place of the counts instead of as an error pop-up on every keystroke.
"""

from __future__ import annotations

from collections import Counter

import gradio as gr

from playground import checks
from playground.data import is_tiny_shakespeare
from playground.tokenizer import CharTokenizer, escape_char
from playground.ui.common import AppContext, bound, checkpoint_dropdown, message_for
from playground.ui.widgets import chips_html

SOURCES = ("loaded checkpoint", "corpus (Tiny Shakespeare)", "this text")
DEFAULT_TEXT = "Hello world"
TABLE_HEADERS = ["ID", "character", "shown as", "count"]


def _vocabulary(ctx: AppContext, source: str, checkpoint: str | None,
                text: str) -> tuple[CharTokenizer, str, Counter, str | None]:
    """The tokenizer for ``source``, a name for where its counts come from, those counts, and a notice when
    the corpus counted in is not the one asked for (offline, the built-in Sonnets stand in for Tiny Shakespeare)."""
    if source == SOURCES[0]:
        loaded = ctx.checkpoint(checkpoint or ctx.default_checkpoint_name() or "")
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
    raise ValueError(f"unknown vocabulary source {source!r}; choose one of: {', '.join(SOURCES)}")


def tokenize(ctx: AppContext, text: str, source: str, checkpoint: str | None, *, warn: bool = True):
    """Plain handler: returns (chips HTML, IDs, decoded round trip, counts Markdown, vocabulary rows).

    ``warn=False`` (live updates while typing) leaves the unknown characters to the counts, with no pop-up.
    """
    text = checks.text(text, "The text", ctx.limits.max_text_chars)
    tokenizer, counts_label, counts, corpus_notice = _vocabulary(ctx, source, checkpoint, text)
    unknown = tokenizer.find_unknown(text)
    known_text = "".join(c for c in text if not tokenizer.find_unknown(c))
    ids = tokenizer.encode(known_text).tolist()
    decoded = tokenizer.decode(ids)
    notes = [corpus_notice] if corpus_notice else []
    if unknown:
        listed = ", ".join(f"{escape_char(u.character)!r} at {u.position}" for u in unknown[:10])
        notes.append(f"**{len(unknown)} character(s) are not in this vocabulary** (highlighted in red): {listed}"
                     f"{' ...' if len(unknown) > 10 else ''}. They were left out of the IDs.")
        if warn:
            gr.Warning(f"{len(unknown)} character(s) are not in the vocabulary: {listed}")
    stats = (f"**{len(text)}** characters · **{len(ids)}** tokens · vocabulary of "
             f"**{tokenizer.vocabulary_size}** symbols · round trip "
             f"{'exact' if decoded == text else 'loses the unknown characters'}")
    rows = [[i, ch, escape_char(ch), counts.get(ch, 0)] for i, ch in enumerate(tokenizer.characters)]
    headers = ["ID", "character", "shown as", f"count in {counts_label}"]
    table = {"headers": headers, "data": rows}
    return chips_html(text, tokenizer), str(ids), decoded, "\n\n".join([stats, *notes]), table


def tokenize_live(ctx: AppContext, text: str, source: str, checkpoint: str | None):
    """``tokenize`` as the page opens and as a person types: a refusal becomes the counts' text, not an error."""
    try:
        return tokenize(ctx, text, source, checkpoint, warn=False)
    except ValueError as exc:  # CheckpointError and HubError are ValueErrors too
        return "", "", "", f"**{message_for(exc)}**", {"headers": TABLE_HEADERS, "data": []}


def build(ctx: AppContext) -> None:
    gr.Markdown(
        "A character-level tokenizer gives every distinct character an ID: the IDs are the characters in "
        "sorted order. The model only ever sees these numbers. Type some text and see each character's ID; "
        "pick where the vocabulary comes from."
    )
    with gr.Row():
        with gr.Column(scale=2):
            text = gr.Textbox(DEFAULT_TEXT, label="Text", lines=3, max_lines=12)
        with gr.Column(scale=1):
            source = gr.Radio(list(SOURCES), value=SOURCES[0] if ctx.default_checkpoint_name() else SOURCES[2],
                              label="Vocabulary from")
            checkpoint = checkpoint_dropdown(ctx, "tokenize")
    run = gr.Button("Tokenize", variant="primary")
    chips = gr.HTML(label="Tokens")
    stats = gr.Markdown(label="counts")
    with gr.Row():
        ids = gr.Textbox(label="Token IDs", lines=2)
        decoded = gr.Textbox(label="Decoded back (round trip)", lines=2)
    table = gr.Dataframe(label="Vocabulary", headers=TABLE_HEADERS, interactive=False, max_height=400,
                         elem_classes=["playground-table"])

    handler = bound(tokenize, ctx)
    inputs, outputs = [text, source, checkpoint], [chips, ids, decoded, stats, table]
    run.click(handler, inputs, outputs, api_name="tokenize", **ctx.fast_lane)
    text.submit(handler, inputs, outputs, api_name="tokenize_on_enter", api_visibility="private", **ctx.fast_lane)
    # no triggers: when the page loads and whenever an input changes (typing, the source, the checkpoint)
    gr.on(None, bound(tokenize_live, ctx), inputs, outputs, api_name="tokenize_live", api_visibility="private",
          show_progress="hidden", trigger_mode="always_last", **ctx.fast_lane)
