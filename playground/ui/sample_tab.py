"""Sample tab: stream text from a checkpoint with temperature, top-k, top-p, a seed and a KV cache.

Every generated token (a character, or a GPT-2 checkpoint's BPE piece) keeps the distribution it was drawn from;
tapping or clicking it in the coloured text shows the top-10 candidates and what that token attended to, on a phone
as on a desktop. Every token's two charts (as changes to the first one's, up to MAX_SENT_BARS bars) follow a
finished text into the page's chart deck (ui/chart_deck.py), so a tap is drawn in the page without asking the
server; a token or a head the page does not hold is asked for, and that head's charts follow. A generation
is priced before it starts (sampling.check_sampling_time, sampling.sampling_cost) and shown as it grows, in
batches the browser keeps up with.
"""

from __future__ import annotations

import hashlib
import html
import json
import secrets
import time
from dataclasses import replace

import gradio as gr
import torch

from playground import checks
from playground.budget import human, inference_cost
from playground.checks import count
from playground.config import ModelConfig
from playground.device import describe
from playground.model.families import lab_prompt
from playground.model.sampling import (
    SamplingSettings,
    check_sampling_time,
    rebuild_length,
    sampling_cost,
    start_text,
    stream,
)
from playground.text.tokenizer import CharTokenizer, Tokenizer, escape_char, labels, list_unknown, without_unknown
from playground.ui import bring_model, chart_deck, plots, publish
from playground.ui.common import TAP_PX, AppContext, checkpoint_dropdown, checkpoint_loaded, fold, keep_on_refusal
from playground.ui.events import wire

DEFAULT_PROMPT = "ROMEO:\n"
INSPECT_DECK_ID = "sample"  # the inspector's chart deck (chart_deck): its hosts are sample-chart-0 and -1
UPDATE_SECONDS = 0.08  # the text changes at most this often: a person sees it grow and the browser keeps up
STEP_CLASS = "sample-step"  # the inspector's arrows: the character before or after the one picked
PICKED_ELEM_ID = "sample-picked"  # the hidden box a tap or click on a character writes "<position> #<stamp>" into
INSPECT_ELEM_ID = "sample-inspect"  # the inspector's accordion
PHONE_WIDTH = chart_deck.PHONE_WIDTH
SLIDER_MIN_WIDTH = 200  # px: on a phone a slider takes a row of its own, its label on one line
# the page's side of the inspector: page/sample.js's window.samplePage
PICK_JS = "window.samplePage.listen(element);"  # the coloured text's js_on_load: a click on a character picks it


def step_pick_js(delta: int) -> str:
    """A js= function for the inspector's arrows: the picked character moved by ``delta`` within the text (its outline
    too), stamped like a tap. On a phone a character is a 10 px wide target; a tap near it and the arrows reach the
    one meant. Nothing picked yet: the first character."""
    return f"(picked) => window.samplePage.step(picked, {int(delta)})"


# A picked character: drawn from the deck the page holds when it is there for the layer and head in the fields
# (no request); otherwise the stamped pick goes to the hidden "need" box, whose change asks the server. The
# inspector's first chart, once drawn, is brought fully onto the screen (it opens below the text)
SHOW_PICKED_JS = "(picked, layer, head) => window.samplePage.showPicked(picked, layer, head)"
# The server's deck of one view arrived: kept and drawn (then revealed on a phone)
DRAW_JS = "(raw, position) => window.samplePage.drawSent(raw, position)"
# Every character's views arrived: kept, nothing drawn (``more``: added to a deck of the same text and head)
TAKE_JS = "(raw) => { window.samplePage.take(raw, %s); }"
# A new generation starts: the views held belong to the old text, so a tap until the new ones arrive asks the server
FORGET_JS = "() => { window.samplePage.forget(); }"
# On a touch screen each character is a tap target at least 44 px tall (a finger's, as the platforms' guidelines
# say): its padding grows the coloured box (a 19 px glyph + 2 x 14 px = 47 px) and the lines stand 52 px apart, so no
# two boxes overlap (tests/test_browser_phone.py measures it) whatever the monospace font's glyph box, up to 24 px
# (Noto Sans Mono's is 22 px: at 48 px apart its boxes overlapped by 2 px)
COLOURED_CSS = """
.sample-coloured { font-family: monospace; white-space: pre-wrap; overflow-wrap: anywhere; line-height: 1.9;
                  font-size: 1rem; }
.sample-coloured [data-position] { cursor: pointer; color: #111; border-radius: 2px; }
.sample-coloured .picked { outline: 2px solid #2563eb; outline-offset: 1px; }
@media (pointer: coarse) {
  .sample-coloured { line-height: 52px; }
  .sample-coloured [data-position] { padding: 14px 0; }
}
"""


def checkpoint_summary(ctx: AppContext, name: str) -> str:
    loaded = ctx.checkpoint(name)
    config = loaded.config
    val = f"{loaded.val_loss:.3f}" if loaded.val_loss is not None else "not recorded"
    device = next(loaded.model.parameters()).device
    return (f"**{loaded.name}** · {loaded.model.parameter_count():,} parameters · {count(config.layers_num, 'layer')} "
            f"× {count(config.heads_num, 'head')} · embedding {config.embedding_dim} · context {config.context_size} · "
            f"vocabulary {config.vocabulary_size} · validation loss {val} · runs on {describe(device)}"
            + ("" if config.has_kv_cache else " · no KV cache: each step re-reads the last "
               f"{config.context_size} {_plural(loaded.tokenizer)}, as the notebook's generate does")
            + f"\n\n{loaded.description}")


CACHE_INFO = ("the same text, faster, within the model's context; past it the cache is rebuilt from the last half, "
              "so the text can differ")


def cache_box(ctx: AppContext, name: str) -> gr.Checkbox:
    """The KV cache box for a newly chosen checkpoint: usable where the model keeps a cache; greyed out, saying
    why, for notebook 004's model, which re-reads its window at every step (a ticked box there changed nothing)."""
    if ctx.checkpoint(name).config.has_kv_cache:
        return gr.Checkbox(interactive=True, info=CACHE_INFO)
    return gr.Checkbox(interactive=False, info="this model keeps no KV cache: each step re-reads its window, as "
                                               "notebook 004's generate does")


def fitting_prompt(ctx: AppContext, name: str, prompt: str, offered: str) -> tuple[str, str, str]:
    """(a prompt to offer, the prompt it replaces, the prompt this page offers from now on) for a newly chosen
    checkpoint: a prompt the page offered (the default, or one this function gave) that the new vocabulary cannot
    read becomes its readable characters, or, when none are left, the notebook's "w" for notebook 004's model
    ("ROMEO:\\n" -> "w" for the toy lab on "hello world") and the model's start text for any other; "" offers
    nothing. A prompt the model reads, or one the learner typed, is left as it is (Generate says which characters
    the model lacks). The page puts the offer in the box only if the box still
    holds the prompt it replaces (KEEP_TYPED_JS): the learner may have typed meanwhile."""
    if not isinstance(prompt, str) or prompt not in (DEFAULT_PROMPT, offered):
        return "", "", offered
    try:
        loaded = ctx.checkpoint(name)
    except (ValueError, OSError, RuntimeError):
        return "", "", offered  # the summary says why it does not load
    tokenizer = loaded.tokenizer
    if not tokenizer.find_unknown(prompt):
        return "", "", offered
    fitted = (without_unknown(tokenizer, prompt) or lab_prompt(loaded.config, tokenizer.find_unknown)
              or start_text(tokenizer))
    return fitted, prompt, fitted


# in the page, as the offer arrives: the offer only where the box still holds what it replaces
KEEP_TYPED_JS = "(offer, replaced, current) => window.samplePage.keepTyped(offer, replaced, current)"


def _plural(tokenizer: Tokenizer) -> str:
    """What the generated tokens are called: "characters", or "tokens" for a subword tokenizer."""
    return f"{tokenizer.token_name}s"


def _span(position: int, token) -> str:
    """One character on a background from orange (drawn with low probability) to white (near-certain); a tap or
    click on it inspects it, a hover shows its top candidates. The component's template wraps the spans, so a
    longer text only appends to its value and Gradio streams just the new spans."""
    shade = int(255 * token.probability)
    title = f"#{position}: p = {token.probability:.3f}; top: " + ", ".join(
        f"{label!r} {p:.2f}" for label, p in token.candidates[:5])
    text = html.escape(token.text).replace("\n", "↵<br>")
    return (f'<span data-position="{position}" title="{html.escape(title)}" style="background:rgb(255,'
            f'{155 + shade * 100 // 255},{80 + shade * 175 // 255})">{text}</span>')


SHARES = {2: "half", 3: "a third", 4: "a quarter"}  # kv_heads / heads_num said in words where it is one of these


def grouped_cache_sentence(config: ModelConfig, length: int, cache_bytes: int) -> str:
    """For a model whose query heads share K/V heads, the bytes the real cache (``cache_bytes``, the sum of its
    tensors' sizes over ``length`` tokens) takes a token, against a cache with one K/V head per query head:
    '2 K/V heads for 4 query heads: 4,096 bytes a token, half of 8,192 with one K/V head per query head'.
    '' where every query head has its own K/V head, or the cache is empty."""
    heads, kv_heads = config.heads_num, config.kv_heads
    if kv_heads == heads or not length or not cache_bytes:
        return ""
    per_token = cache_bytes // length  # every layer holds one key and one value per K/V head for each token
    ungrouped = per_token * heads // kv_heads
    share = SHARES.get(heads // kv_heads, f"1/{heads // kv_heads}")  # heads_num is a multiple of kv_heads
    return (f"{kv_heads} K/V head{'s' * (kv_heads != 1)} for {heads} query heads: {per_token:,} bytes a token, "
            f"{share} of {ungrouped:,} with one K/V head per query head (each K/V head's keys and values are read by "
            f"{heads // kv_heads} query heads; the cache keeps them once)")


def _cache_line(config: ModelConfig, length: int, use_cache: bool, rebuilt: int = 0, unit: str = "tokens",
                first_rebuilt: int = 0, cache_bytes: int = 0) -> str:
    """What the KV cache held at the end (``cache_bytes``: its tensors' bytes, from the sampler's own cache), and,
    once it was rebuilt past the context (first before new token ``first_rebuilt``), what that changed."""
    if not config.has_kv_cache:
        return (f"No KV cache: notebook 004's model re-reads its last {config.context_size} {unit} at every step (the "
                f"notebook's idx[:, -{config.context_size}:])")
    if not use_cache:
        return "KV cache off: every step recomputes keys and values for the whole window"
    numbers = 2 * config.layers_num * config.kv_heads * length * config.head_size
    layers = "the model's one layer" if config.layers_num == 1 else f"each of the {config.layers_num} layers"
    per = "per head" if config.kv_heads == config.heads_num else "per K/V head"
    line = (f"KV cache: {layers} holds {length} keys and {length} values {per}, one "
            f"of each for every token the model sees now (the prompt and what it has written, up to its context); a "
            f"new token computes only its own key and value and reads the rest from the cache "
            f"({numbers:,} numbers, {human(numbers * 4)} in fp32)")
    grouped = grouped_cache_sentence(config, length, cache_bytes)
    if grouped:
        line += f". {grouped}"
    if rebuilt:
        half = rebuild_length(config.context_size)
        line += (f". It filled the model's context of {config.context_size} and was rebuilt from the last {half} "
                 f"{unit} {'once' if rebuilt == 1 else f'{rebuilt} times'}"
                 + (f", first before new {unit.removesuffix('s')} {first_rebuilt}" if first_rebuilt else "")
                 + ": a cached key cannot move to a new "
                 f"position, so past the context each draw here read {half} to {config.context_size} {unit}, where "
                 f"without the cache every draw reads the last {config.context_size}, and the two texts can part "
                 f"from there (switch the KV cache off for the sliding-window text nanoGPT's sample.py and "
                 f"transformers give)")
    return line


def speed_sentence(rate: float, use_cache: bool, other_rate: float | None = None, unit: str = "tokens",
                   other_differs: str = "") -> str:
    """'836 characters/s with the KV cache', and the last speed the other way on the same checkpoint if there is
    one: as a ratio when that run's settings were the same, else with the settings it had (``other_differs``)."""
    mode, other = ("with", "without") if use_cache else ("without", "with")
    sentence = f"{rate:,.0f} {unit}/s {mode} the KV cache"
    if not other_rate:
        return sentence + f"; switch it {'off' if use_cache else 'on'} to compare"
    if other_differs:  # unlike runs: no ratio
        return sentence + (f" ({other_rate:,.0f} {other} it last time, but at {other_differs}: draw again with "
                           "the same settings to compare)")
    faster = rate / other_rate if use_cache else other_rate / rate
    return sentence + f" ({other_rate:,.0f} {other} it last time: {faster:,.1f}× faster)"


def duration(seconds: float) -> str:
    """A run's time to what is meaningful: '45 ms' under a second (where '0.0 s' said nothing), else '2.3 s'."""
    if seconds < 0.001:
        return "under 1 ms"
    return f"{seconds * 1000:,.0f} ms" if seconds < 1 else f"{seconds:,.1f} s"


def speed_settings(settings: SamplingSettings, prompt_length: int) -> dict:
    """What a speed is compared on besides the cache: the prompt's length, how many it draws, and how (not the
    seed). Keys as the page words them."""
    return {"prompt length": prompt_length, "max new tokens": settings.max_new_tokens,
            "temperature": settings.temperature, "top-k": settings.top_k or 0, "top-p": settings.top_p or 1,
            "greedy": "on" if settings.greedy else "off"}


def differences(then: dict, now: dict) -> str:
    """'temperature 0.8, top-k 20': the settings of the run ``then`` that differ from ``now``'s."""
    return ", ".join(f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}"
                     for name, value in then.items() if now.get(name) != value)


def max_request_seconds(ctx: AppContext) -> float:
    """PLAYGROUND_MAX_REQUEST_SECONDS through the server's Limits (60 s where Limits has no such field yet)."""
    return getattr(ctx.limits, "max_request_seconds", 60)


def sample(ctx: AppContext, checkpoint: str, prompt: str, max_new_tokens, temperature, top_k, top_p, seed,
           greedy: bool, use_cache: bool, drop_unknown: bool = False, history: dict | None = None,
           request: gr.Request = None, *, update_seconds: float = UPDATE_SECONDS, clock=time.monotonic):
    """Generator handler: yields (text so far, coloured HTML, stats Markdown, history state).

    Refuses before it starts when the estimate (sampling.check_sampling_time) is over the server's time per
    request, stops at that limit if the server turns out slower than estimated (the text so far is kept), and
    holds the memory it needs (sampling.sampling_cost) from the server's budget while it runs; a long one (over
    SHORT_SECONDS) holds one of the long places too (ctx.long_work, refused at once when its client has its share or
    none comes free), a short one none. The text is
    shown at most every ``update_seconds`` and once more at the end, with the full text.
    """
    prompt = checks.text(prompt, "The prompt", ctx.limits.max_text_chars)
    use_cache = checks.flag(use_cache, "KV cache")
    greedy = checks.flag(greedy, "greedy")
    drop_unknown = checks.flag(drop_unknown, "drop unknown characters from the prompt")
    # checked here under the page's labels (the core allows 0 new tokens and names its fields top_k, top_p)
    max_new_tokens = checks.whole_number(max_new_tokens, "max new tokens", 1, ctx.limits.max_new_tokens)
    top_k = 0 if top_k in (None, "") else checks.whole_number(top_k, "top-k (0 = off)", 0)
    settings = SamplingSettings(max_new_tokens=max_new_tokens, temperature=temperature,
                                top_k=top_k or None,  # the field's 0 means off
                                top_p=None if top_p in (None, "", 1) else top_p,  # and so does its 1
                                greedy=greedy, seed=None if seed in (None, "") else seed).within(ctx.limits)
    drawn = settings.seed is None and not settings.greedy  # an empty seed box: a fresh seed, said so it can be reused
    if drawn:  # greedy (the box, or temperature 0) draws nothing
        settings = replace(settings, seed=secrets.randbelow(checks.MAX_SEED + 1))
    loaded = ctx.checkpoint(checkpoint)
    tokenizer = loaded.tokenizer
    notes = [f"the seed box was empty, so seed {settings.seed} was drawn: type it there to draw this text again"] \
        if drawn else []
    if settings.greedy and not greedy:  # SamplingSettings made temperature 0 greedy
        notes.append("temperature 0 is greedy decoding: each character is the most likely one, and the colours show "
                     "the model's own probabilities (temperature 1)")
    unknown = tokenizer.find_unknown(prompt)
    if unknown:
        listed = list_unknown(unknown)
        if not drop_unknown:
            raise ValueError(f"the prompt has {len(unknown)} character(s) this model does not know: {listed}. "
                             "Tick 'drop unknown characters' to remove them, or edit the prompt.")
        prompt = without_unknown(tokenizer, prompt)
        notes.append(f"dropped {len(unknown)} unknown character(s): {listed}")
    vocabulary_size = loaded.tokenizer.vocabulary_size
    if settings.top_k is not None and settings.top_k > vocabulary_size:
        notes.append(f"top-k {settings.top_k} is larger than the vocabulary; clamped to {vocabulary_size}")
        settings = replace(settings, top_k=vocabulary_size)
    start = prompt or start_text(tokenizer)
    if not prompt:
        if start == "\n":
            origin = "a newline"
        elif isinstance(tokenizer, CharTokenizer):
            origin = f"{escape_char(start)!r}, the vocabulary's first symbol"
        else:
            origin = f"{start!r}, the special token that separated the documents it was trained on"
        notes.append(f"the prompt is empty: generation starts from {origin}")
    prompt_ids = tokenizer.encode(start).tolist()
    config = loaded.config
    use_cache = use_cache and config.has_kv_cache  # notebook 004's model has none: its stats line says so
    parameters = loaded.model.parameter_count()
    limit = max_request_seconds(ctx)
    estimate = check_sampling_time(config, parameters, len(prompt_ids), settings, use_cache, limit,
                                   token_name=tokenizer.token_name)
    cost = sampling_cost(config, parameters)
    device = describe(next(loaded.model.parameters()).device)
    all_speeds = dict((history or {}).get("speeds", {}))
    speeds = dict(all_speeds.get(loaded.name, {}))
    mode, other = ("with", "without") if use_cache else ("without", "with")
    compared_on = speed_settings(settings, len(prompt_ids))  # a speed is quoted beside one of a like run only

    tokens, spans = [], []

    rebuilt = first_rebuilt = 0

    def shown(cache_length: int):
        elapsed = max(clock() - started, 1e-9)
        rate = len(tokens) / elapsed
        speeds[mode] = {"rate": rate, "settings": compared_on}
        unit = _plural(tokenizer)
        last = speeds.get(other)
        last = last if isinstance(last, dict) else {}  # a state from before settings were kept with a speed
        said = speed_sentence(rate, use_cache, last.get("rate"), unit, differences(last.get("settings", {}),
                                                                                   compared_on)) \
            if config.has_kv_cache else f"{rate:,.0f} {unit}/s"
        stats = (f"{said}. {len(tokens)} {unit} in "
                 f"{duration(elapsed)} on {device}.\n\n"
                 + _cache_line(config, cache_length, use_cache, rebuilt, _plural(tokenizer), first_rebuilt,
                               cache_bytes))
        return prompt + "".join(t.text for t in tokens), "".join(spans), "\n\n".join([stats, *notes])

    with ctx.long_work.hold(ctx.client_of(request), estimate), \
            ctx.budget.reserve(cost, hint="pick a checkpoint with fewer parameters or a shorter context"):
        started = last_shown = clock()
        yield (prompt, "", f"Generating {settings.max_new_tokens} {_plural(tokenizer)}…",
               {"generating": True, "speeds": all_speeds})  # a tap now waits for the finished text
        cache_length = cache_bytes = 0
        for token in stream(loaded.model, tokenizer, prompt, settings, use_cache=use_cache):
            spans.append(_span(len(tokens), token))
            tokens.append(token)
            if token.cache_length < cache_length:  # the cache shrank: rebuilt from the last half
                rebuilt += 1
                first_rebuilt = first_rebuilt or len(tokens)
            cache_length, cache_bytes = token.cache_length, token.cache_bytes
            now = clock()
            if now - started > limit and len(tokens) < settings.max_new_tokens:  # slower than estimated: busy
                notes.append(f"stopped after {len(tokens)} of {settings.max_new_tokens} {_plural(tokenizer)} at "
                             f"this server's limit of {limit:g} s per request (PLAYGROUND_MAX_REQUEST_SECONDS): it is "
                             f"busier than usual; ask for fewer {_plural(tokenizer)}"
                             + ("" if use_cache else " or switch the KV cache on"))
                break
            if now - last_shown >= update_seconds and len(tokens) < settings.max_new_tokens:
                last_shown = now
                yield *shown(cache_length), gr.skip()
        final = shown(cache_length)
    all_speeds[loaded.name] = speeds
    state = {"checkpoint": checkpoint, "prompt": prompt, "prompt_ids": prompt_ids, "speeds": all_speeds,
             "tokens": [{"id": t.token_id, "text": t.text, "probability": t.probability, "candidates": t.candidates,
                         "context": t.context_length} for t in tokens]}
    yield *final, state


def _finished(ctx: AppContext, history: dict | None, layer, head):
    """(the checkpoint, its tokens, layer, head) of a finished text, checked as a tap or the API sends them."""
    if history and history.get("generating"):
        raise ValueError("There is no finished text to inspect yet: wait until the generation ends (or generate "
                         "again), then pick a character")
    if not history or not history.get("tokens"):
        raise ValueError("Generate some text first, then pick a position")
    loaded = ctx.checkpoint(history["checkpoint"])
    config = loaded.config
    layer = checks.whole_number(layer, "layer", 0, config.layers_num - 1)
    head = checks.whole_number(head, "head", 0, config.heads_num - 1)
    return loaded, history["tokens"], layer, head


def _checked_position(loaded, tokens: list, position) -> int:
    position = checks.whole_number(position, "position", 0)
    if position >= len(tokens):
        tokenizer = loaded.tokenizer
        raise ValueError(f"position {checks.number_text(position)} is past the end: this text has {len(tokens)} "
                         f"generated {_plural(tokenizer)}, at positions 0 to {len(tokens) - 1}. Tap or click a "
                         f"{tokenizer.token_name} to pick it.")
    return position


def _windows(loaded, history: dict) -> list[tuple[int, int]]:
    """(start, end) in prompt + generated IDs of what each generated token was drawn after: the window it read
    (the cache's after a rebuild: shorter than the context; a history from before windows were recorded: the
    context)."""
    context_size, before = loaded.config.context_size, len(history["prompt_ids"])
    spans = []
    for position, token in enumerate(history["tokens"]):
        window = checks.whole_number(token.get("context", context_size), "context", 1, context_size)
        end = before + position
        spans.append((max(0, end - window), end))
    return spans


def _attention_rows(ctx: AppContext, loaded, history: dict, positions, layer: int, head: int) -> dict:
    """{position: the attention row (layer, head) of the last token the model read when it drew ``position``}.

    Tokens drawn from windows that start at the same ID share one forward pass over that window up to the last
    token any of them read (causal: a row never sees a later token), whether one position is asked for or all: the
    page's numbers and the server's are one computation. ``ROMEO:\n`` + 200 new characters, no rebuild: 1 pass."""
    full = [*history["prompt_ids"], *(t["id"] for t in history["tokens"])]
    spans = _windows(loaded, history)
    reach: dict[int, int] = {}
    for start, end in spans:
        reach[start] = max(reach.get(start, 0), end)
    groups: dict[int, list[int]] = {}
    for position in positions:
        groups.setdefault(spans[position][0], []).append(position)
    config = loaded.config
    longest = max(reach[start] - start for start in groups)
    cost = inference_cost(parameters=loaded.model.parameter_count(), layers_num=config.layers_num,
                          heads_num=config.heads_num, embedding_dim=config.embedding_dim, context_size=longest,
                          vocabulary_size=config.vocabulary_size, attention_maps=True)
    rows = {}
    device = next(loaded.model.parameters()).device
    with ctx.budget.reserve(cost, hint="pick a checkpoint with fewer parameters or a shorter context"), \
            torch.no_grad():
        for start, members in groups.items():
            ids = torch.tensor([full[start:reach[start]]], dtype=torch.long, device=device)
            weights = loaded.model(ids, return_attention=True).attention_weights[layer][0, head].cpu()  # (T, T)
            for position in members:
                row = spans[position][1] - start - 1
                rows[position] = weights[row, :row + 1]
    return rows


def _shown(values) -> list[float]:
    """Values as the charts carry them, to 4 significant digits (plots.bar_chart_changes'): the page drawing a
    chart from the deck and the server's figure show the same numbers."""
    return [float(f"{v:.4g}") for v in values]


def _inspections(ctx: AppContext, loaded, history: dict, positions, layer: int, head: int) -> dict:
    """{position: (the top-10 bars, the attention bars, the note)}, the bars as keyword arguments of
    plots.bar_chart_changes (labels, values, title, important)."""
    tokenizer, config = loaded.tokenizer, loaded.config
    tokens, spans = history["tokens"], _windows(loaded, history)
    full = [*history["prompt_ids"], *(t["id"] for t in tokens)]
    rows = _attention_rows(ctx, loaded, history, positions, layer, head)
    shown = {}
    for position in positions:
        token = tokens[position]
        candidates = token["candidates"]
        drawn = tokenizer.label(token["id"])
        top = dict(labels=[c for c, _ in candidates], values=_shown(p for _, p in candidates),
                   title=f"Top-10 candidates at #{position}<br>drawn: {drawn!r}, "
                         f"p = {token['probability']:.3f}")  # two lines: a phone is narrow
        start, end = spans[position]
        context_labels = labels(tokenizer, full[start:end])
        weights = rows[position]
        strongest = torch.topk(weights, min(5, weights.numel()))
        attention = dict(labels=context_labels, values=_shown(weights.tolist()),
                         title=f"What drawing #{position} attended to<br>layer {layer}, head {head}",
                         # the largest weights labelled first, then the last token read where it keeps clear of
                         # them (on a phone the tallest bar is often 1 back, beside it)
                         important=[*strongest.indices.tolist(), len(context_labels) - 1])
        query = len(context_labels) - 1  # the query is the last token it read; "1 back" is the one before it
        named = ", ".join(f"{context_labels[i]!r} ({'the query itself' if i == query else f'{query - i} back'}) "
                          f"{w:.2f}" for w, i in zip(strongest.values.tolist(), strongest.indices.tolist()))
        shorter = ""
        before = len(history["prompt_ids"]) + position  # tokens before it: more than it read after a rebuild
        if len(context_labels) < min(before, config.context_size):
            kept = rebuild_length(config.context_size)
            shorter = (f" (the KV cache's window: it had been rebuilt from the last {kept} when it filled the context "
                       f"of {config.context_size}; without the cache it would have read the last "
                       f"{config.context_size})")
        note = (f"{tokenizer.token_name.capitalize()} #{position} ({drawn!r}) was drawn with probability "
                f"{token['probability']:.3f} from the distribution after temperature, top-k and top-p; the model "
                f"saw the last {len(context_labels)} {_plural(tokenizer)}{shorter}. The query is the last of them, "
                f"{context_labels[query]!r}; strongest attention: {named}.")
        shown[position] = (top, attention, note)
    return shown


def _margin_fits(xaxis: dict) -> dict:
    """``xaxis`` with Plotly's automargin only where its labels need more than the chart's bottom margin (slanted,
    or words on two lines): automargin draws a chart twice at every change, and single characters fit as they are."""
    slanted = bool(xaxis.get("tickangle")) or any("<br>" in str(text) for text in xaxis.get("ticktext") or ())
    return {**xaxis, "automargin": slanted}


def _changes(bars: dict) -> dict:
    """plots.bar_chart_changes of one chart, with its automargin (_margin_fits)."""
    changes = plots.bar_chart_changes(**bars)
    changes["layout"]["xaxis"] = _margin_fits(changes["layout"]["xaxis"])
    return changes


def _figures(top: dict, attention: dict) -> tuple:
    figures = (plots.bar_chart(top["labels"], top["values"], top["title"], "probability"),
               plots.bar_chart(attention["labels"], attention["values"], attention["title"], "attention weight",
                               important=attention["important"]))
    for figure in figures:
        figure.update_layout(xaxis=_margin_fits(figure.layout.xaxis.to_plotly_json()))
    return figures


def inspect_position(ctx: AppContext, history: dict | None, position, layer, head):
    """(top-10 bar chart, attention-over-context bar chart, Markdown) for one generated token."""
    loaded, tokens, layer, head = _finished(ctx, history, layer, head)
    position = _checked_position(loaded, tokens, position)
    top, attention, note = _inspections(ctx, loaded, history, [position], layer, head)[position]
    return *_figures(top, attention), note


MAX_SENT_BARS = 40_000  # bars of every character's charts sent with a finished text (~1 MB); later ones are asked for


def _deck_key(history: dict, layer: int, head: int) -> str:
    """The text's and the head's key, ending "|layer|head" (the page compares it with its fields)."""
    text = repr((history.get("checkpoint"), history.get("prompt_ids"),
                 [(t["id"], t.get("context")) for t in history["tokens"]]))
    return f"{hashlib.sha1(text.encode()).hexdigest()[:16]}|{layer}|{head}"


def inspect_deck(ctx: AppContext, history: dict | None, position, layer, head) -> str:
    """The deck of one position's view (the Inspect button, or a tap on a character the page does not hold): the
    server's own figures."""
    loaded, tokens, layer, head = _finished(ctx, history, layer, head)
    position = _checked_position(loaded, tokens, position)
    top, attention, note = _inspections(ctx, loaded, history, [position], layer, head)[position]
    return chart_deck.deck_json(_deck_key(history, layer, head), {str(position): ([note], _figures(top, attention))})


def inspect_need(ctx: AppContext, history: dict | None, need, layer, head):
    """A tapped character the page could not draw ("<position> #<stamp>", written by the page): (the position
    field, the deck of its view)."""
    position = need.split(" #")[0] if isinstance(need, str) else need
    if position in (None, ""):
        raise ValueError("Tap or click a character in the coloured text to inspect it")
    position = checks.whole_number(position, "position", 0)
    return position, inspect_deck(ctx, history, position, layer, head)


def inspect_all(ctx: AppContext, history: dict | None, layer, head):
    """Every generated character's view for (layer, head), as changes to the first one's figures, up to
    MAX_SENT_BARS bars in all: the page then draws a tapped character without asking the server. Nothing (a skip)
    while a text is being generated, where there is none, or where the layer or head fields hold no head (a tap
    then asks the server, which says what is wrong; a finished text is no time for that message)."""
    try:
        loaded, tokens, layer, head = _finished(ctx, history, layer, head)
    except ValueError:
        return gr.skip()
    spans, positions, bars = _windows(loaded, history), [], 0
    for position, (start, end) in enumerate(spans):
        bars += end - start + len(tokens[position]["candidates"])
        if bars > MAX_SENT_BARS:
            break
        positions.append(position)
    if not positions:  # one character's charts over the bound (never with the limits here): each is asked for
        return gr.skip()
    shown = _inspections(ctx, loaded, history, positions, layer, head)
    first = shown[positions[0]]
    bases = {name: json.loads(figure.to_json()) for name, figure in zip(("top", "attention"), _figures(*first[:2]))}
    views = {str(p): ([note], tuple({"base": name, "changes": _changes(bars)}
                                    for name, bars in zip(("top", "attention"), (top, attention))))
             for p, (top, attention, note) in shown.items()}
    return chart_deck.deck_json(_deck_key(history, layer, head), views, bases)


def build(ctx: AppContext) -> gr.Dropdown:
    """The tab; returns its checkpoint picker, which follows this page's newest finished run (ui/__init__.py)."""
    gr.Markdown(
        "Generate text one character at a time from a checkpoint, then tap a character to see how sure the model "
        "was and what it attended to.\n\n" + fold(
            "A GPT-2 checkpoint writes one subword token at a time: type a Hub repo id such as "
            "openai-community/gpt2. Each step the model gives a probability to every character; temperature "
            "sharpens or flattens that distribution, top-k and top-p cut its tail, and the seed makes the draw "
            "repeatable. The KV cache keeps each layer's keys and values so earlier characters are not recomputed: "
            "switch it off and compare the speed (the text is the same until it outgrows the model's context).",
            "temperature, top-k, top-p, the seed, the KV cache")
    )
    checkpoint = checkpoint_dropdown(ctx, "sample")
    names = ctx.checkpoint_names()
    summary = gr.Markdown(checkpoint_summary(ctx, names[0]) if names else "No checkpoint found in weights/.",
                          label="checkpoint")
    prompt = gr.Textbox(DEFAULT_PROMPT, label="Prompt", lines=2)
    with gr.Row():
        max_new_tokens = gr.Number(200, label="max new tokens")
        # a slider's label shares its line with its number box and reset button: at a phone's half width (Gradio's
        # 160 px) "top-p (1 = off)" wrapped onto four lines; each slider takes a row of its own there
        temperature = gr.Slider(0, 2.0, value=0.8, step=0.05, label="temperature", info="0 = greedy",
                                min_width=SLIDER_MIN_WIDTH)
        top_k = gr.Number(0, label="top-k (0 = off)")
        top_p = gr.Slider(0.05, 1.0, value=1.0, step=0.05, label="top-p (1 = off)", min_width=SLIDER_MIN_WIDTH)
        seed = gr.Number(1337, label="seed")
    with gr.Row():
        greedy = gr.Checkbox(False, label="greedy (always the most likely character)")
        use_cache = gr.Checkbox(True, label="KV cache", info=CACHE_INFO)
        drop_unknown = gr.Checkbox(False, label="drop unknown characters from the prompt")
        generate = gr.Button("Generate", variant="primary")
    output = gr.Textbox(label="Text", lines=10, max_lines=30)
    gr.Markdown("Each generated character, coloured by the probability it was drawn with: white ≈ certain, "
                "orange ≈ unlikely; ↵ marks a newline. **Tap or click a character** to see its top-10 candidates "
                "and what it attended to (on a computer, hovering shows its top candidates too).")
    coloured = gr.HTML("", label="coloured text", html_template='<div class="sample-coloured">${value}</div>',
                       css_template=COLOURED_CSS, js_on_load=PICK_JS)
    stats = gr.Markdown(label="stats")
    history = gr.State({})
    with gr.Accordion("Inspect one generated character", open=False, elem_id=INSPECT_ELEM_ID):
        with gr.Row():
            position = gr.Number(0, label="position (0 = first generated character)")
            layer = gr.Number(0, label="layer")
            head = gr.Number(0, label="head")
            inspect = gr.Button("Inspect")
            earlier = gr.Button("◀ before", min_width=TAP_PX, elem_classes=[STEP_CLASS])  # the character before
            later = gr.Button("after ▶", min_width=TAP_PX, elem_classes=[STEP_CLASS])  # the character after
        # the page draws the two charts itself (chart_deck): a tapped character's from the views sent with the text
        with gr.Row():
            chart_deck.hosts(INSPECT_DECK_ID, [0, 1])
        inspect_note = gr.Markdown(label="inspect note")
    deck = gr.Textbox(visible=False, label="inspector deck")
    picked = gr.Textbox(visible="hidden", label="character picked", elem_id=PICKED_ELEM_ID)
    need = gr.Textbox(visible=False, label="character the page asks the server for")

    loaded = checkpoint_loaded(ctx, checkpoint, "sample")  # a name that fails to load goes back (common.py)
    keep_on_refusal(wire(loaded.change, checkpoint_summary, ctx, checkpoint, summary, api_name="checkpoint_info"),
                    [summary], "checkpoint_info_refused")
    wire(loaded.change, cache_box, ctx, checkpoint, use_cache, api_name="sample_cache_box",
         api_visibility="private", show_progress="hidden")
    offered = gr.State(DEFAULT_PROMPT)  # the prompt this page last put in the box (not one the learner typed)
    offer = gr.Textbox(visible=False)  # hidden, not State: the page's own script reads them
    replaced = gr.Textbox(visible=False)
    wire(loaded.change, fitting_prompt, ctx, [checkpoint, prompt, offered], [offer, replaced, offered],
         api_name="sample_prompt", api_visibility="private", show_progress="hidden").then(
        None, [offer, replaced, prompt], prompt, js=KEEP_TYPED_JS, api_name="sample_prompt_offer",
        api_visibility="private", show_progress="hidden")
    sampled = [output, coloured, stats, history]
    generated = wire(generate.click, sample, ctx,
                     [checkpoint, prompt, max_new_tokens, temperature, top_k, top_p, seed, greedy, use_cache,
                      drop_unknown, history],
                     sampled, api_name="sample", **ctx.sample_lane)
    keep_on_refusal(generated, sampled, "sample_refused")
    generate.click(None, None, None, js=FORGET_JS, api_name="sample_forget", api_visibility="private",
                   show_progress="hidden", queue=False)
    quick = dict(api_visibility="private", show_progress="hidden", **ctx.fast_lane)
    # every character's views follow a finished text, and a head's after its first view: a tap then asks nothing
    wire(generated.success, inspect_all, ctx, [history, layer, head], deck, api_name="sample_inspect_all",
         **quick).success(None, deck, None, js=TAKE_JS % "false", api_name="sample_inspect_all_take",
                          api_visibility="private", show_progress="hidden", queue=False)

    def answered(event, name: str) -> None:
        """The server's view drawn, then every character's for its head."""
        event.success(None, [deck, position], inspect_note, js=DRAW_JS, api_name=f"{name}_draw",
                      api_visibility="private", show_progress="hidden", queue=False)
        wire(event.success, inspect_all, ctx, [history, layer, head], deck, api_name=f"{name}_all", **quick).success(
            None, deck, None, js=TAKE_JS % "true", api_name=f"{name}_all_take", api_visibility="private",
            show_progress="hidden", queue=False)

    asked = wire(inspect.click, inspect_deck, ctx, [history, position, layer, head], deck, api_name="sample_inspect",
                 api_visibility="private", **ctx.fast_lane)
    keep_on_refusal(asked, [deck], "sample_inspect_refused")
    answered(asked, "sample_inspect")
    for button, delta, name in ((earlier, -1, "sample_pick_earlier"), (later, 1, "sample_pick_later")):
        button.click(None, picked, picked, js=step_pick_js(delta), api_name=name, api_visibility="private",
                     show_progress="hidden", queue=False)
    picked.change(None, [picked, layer, head], [position, inspect_note, need], js=SHOW_PICKED_JS,
                  api_name="sample_picked", api_visibility="private", show_progress="hidden", queue=False)
    needed = wire(need.change, inspect_need, ctx, [history, need, layer, head], [position, deck],
                  api_name="sample_inspect_picked", **quick)
    keep_on_refusal(needed, [position, deck], "sample_inspect_picked_refused")
    answered(needed, "sample_inspect_picked")
    bring_model.build(ctx)  # a nanoGPT checkpoint, uploaded and converted, joins the checkpoint lists
    publish.build(ctx)  # the Space owner's: shown only where PLAYGROUND_ADMIN_TOKEN is set
    return checkpoint
