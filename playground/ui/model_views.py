"""The Model tab's views: from one score to the whole model, each level's figures and texts (shared by every family's
checkpoint: model_family_views.checkpoint_views makes a checkpoint's views with them), the textbook inputs or a
notebook's own model (no Gradio events: playground.ui.model_tab wires them).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from playground import checks
from playground.checkpoints import store as checkpoints
from playground.lens import anatomy, walkthrough
from playground.lens.anatomy import lessons
from playground.lens.anatomy.lessons import LEVEL_TITLES, MODEL_PARTS
from playground.text.tokenizer import UnknownCharacterError, escape_char
from playground.ui import plots, transpose_picture
from playground.ui.common import fold

BOOK_SOURCES = {title: notebook for notebook, title in anatomy.BOOK_MODELS.items()}  # source -> notebook
SOURCES = ("trained checkpoint", "textbook inputs", *BOOK_SOURCES)
BOOK_INPUTS = ("your text", "the notebook's own inputs")
ATTENTION_MODES = {"decoder": True, "encoder": False}  # the switch's value -> causal
DEFAULT_TEXT = "To be, or not to be: that is the question."
CONTROL_MIN_WIDTH = 160
SHOWN_ID = "model-text"  # in the page once the tab is opened: its first view is made then (events.once_shown)
LEVEL_ELEM_ID = "model-level"  # the level's heading: a level picked on a phone is scrolled to where it starts
TABLE_ROWS = 16  # rows of the forgotten transpose's table, around the query
TEXTBOOK_TRAINED_AS = ""  # the textbook block is seeded, not trained: no "trained as" caveat


class View(NamedTuple):
    """What one view shows: the map's part, the heading, up to four figures, a numbers table (folded), the map's
    parts, and a picture in HTML where the level has one."""

    part: str
    heading: str
    plot_a: object
    plot_b: object
    plot_c: object
    plot_d: object
    numbers: str
    parts: list[str]
    picture: str = ""  # HTML drawn above the figures: level 3's forgotten transpose, its blocks moving


class Settings(NamedTuple):
    """The view's settings, checked where they enter."""

    level: str
    layer: object  # checked against the model where there is one
    head: object
    query: object
    key: object
    norm_order: str
    causal: bool
    activation: str
    dropout: float
    dropout_seed: int
    forget_transpose: bool  # level 3: join the heads the way notebook 002's code does


def view_settings(level, layer, head, query, key, norm_order, attention, activation, dropout, dropout_seed,
                  forget_transpose) -> Settings:
    return Settings(
        lessons.level_key(level), layer, head, query, key, checks.choice(norm_order, "norm order", anatomy.NORM_ORDERS),
        ATTENTION_MODES[checks.choice(attention, "attention", ATTENTION_MODES)],
        checks.choice(activation, "activation", anatomy.ACTIVATIONS),
        checks.real_number(dropout, "dropout", 0.0, 0.95), checks.seed(dropout_seed, "dropout seed"),
        checks.flag(forget_transpose, lessons.FORGET_TRANSPOSE_LABEL))


def token_label(text: str) -> str:
    return "".join(escape_char(ch) for ch in text)


def _current_part(level: str, layer: int, part, parts: list[str]) -> str:
    """The map's value for this view: the part clicked at the model level, else the block being zoomed into."""
    if level == "model":
        return part if part in MODEL_PARTS else lessons.PROBABILITIES
    name = lessons.block_part(layer)
    return name if name in parts else parts[1]


def _clamp_notes(query_clamped: bool, asked_query, key_clamped: bool, asked_key, length: int) -> list[str]:
    notes = []
    if query_clamped:
        notes.append(walkthrough.lessons.query_clamped(int(float(asked_query)), length))
    if key_clamped:
        notes.append(f"Key position {checks.number_text(int(float(asked_key)))} is past the end: the text has "
                     f"{length} tokens, so the last one, {length - 1}, is shown.")
    return notes


def _heading(level: str, look_for: str, formula: str, text: str, where: str, notes: list[str]) -> str:
    """The level's title and one "Look for:" line; the formula, the explanation, where the numbers come from and
    any notes behind the fold (pictures first: at most 60 words before it)."""
    rest = (f"`{formula}`\n\n" if formula else "") + text + (f"\n\n*{where}*" if where else "")
    rest += "".join(f"\n\nℹ️ {note}" for note in notes)
    return f"### {LEVEL_TITLES[anatomy.LEVELS.index(level)]}\n\n**Look for:** {look_for}\n\n" + fold(rest)


# --------------------------------------------------------------------------------------------- figures

def _symmetric(*tensors: torch.Tensor) -> dict:
    largest = max((float(t[torch.isfinite(t)].abs().max()) for t in tensors if torch.isfinite(t).any()), default=0.0)
    largest = largest or 1.0
    return dict(colorscale="RdBu", zmin=-largest, zmax=largest)


def _window_start(position: int) -> int:
    return max(0, position - plots.MAX_SIDE // 2)


def _heatmap(matrix: torch.Tensor, row_labels: list[str], col_labels: list[str], title: str, *, row_start: int = 0,
             col_start: int = 0, highlight_row: int | None = None, masked: torch.Tensor | None = None,
             frame: tuple[int, int] | None = None, max_cols: int = plots.MAX_SIDE, **options):
    """plots.heatmap of at most MAX_SIDE rows and ``max_cols`` columns from (row_start, col_start), cut here so the
    title names the window (plots.heatmap's own note offers an export, which this tab has not)."""
    rows, cols = matrix.shape
    side = plots.MAX_SIDE
    r0, c0 = max(0, min(row_start, rows - side)), max(0, min(col_start, cols - max_cols))
    shown_rows, shown_cols = slice(r0, r0 + side), slice(c0, c0 + max_cols)
    cut = [f"rows {r0}–{min(rows, r0 + side) - 1} of {rows}"] if rows > side else []
    cut += [f"columns {c0}–{min(cols, c0 + max_cols) - 1} of {cols}"] if cols > max_cols else []
    if cut:
        title += f" ({', '.join(cut)})"
    hover = options.get("masked_hover")
    if hover is not None and not isinstance(hover, str):  # one per cell: the window's
        options["masked_hover"] = [row[shown_cols] for row in hover[shown_rows]]
    figure = plots.heatmap(matrix[shown_rows, shown_cols], row_labels[shown_rows], col_labels[shown_cols], title,
                           masked=None if masked is None else masked[shown_rows, shown_cols],
                           highlight_row=None if highlight_row is None else highlight_row - r0, max_cols=max_cols,
                           **options)
    if frame is not None:
        plots.frame_cell(figure, frame[0] - r0, frame[1] - c0)
    return figure


def _weights_figure(weights: torch.Tensor, visible: torch.Tensor, tokens: list[str], title: str, query: int):
    """Attention weights, the causally masked cells grey."""
    start = _window_start(query)
    return _heatmap(weights, tokens, tokens, title, colorscale="Blues", zmin=0.0, zmax=1.0, masked=~visible,
                    masked_hover=lessons.MASKED_WEIGHT_HOVER, highlight_row=query, row_start=start, col_start=start,
                    x_title="key token", y_title="query token")


def _reads_figure(weights: torch.Tensor, visible: torch.Tensor, tokens: list[str], title: str, query: int, head: int,
                  dropped: torch.Tensor | None = None, zmax: float = 1.0):
    """Every head's attention weights at one query (heads x keys, ``weights`` (h, T)): what attention read there, beside
    what it changed in the guess (one head's whole pattern does not say what attention read at the query). The
    keys the query may not see are grey (and, after dropout, the ``dropped`` (h, T) ones); ``head``'s row is framed.

    A cell's hover is its head and key and, from the colour's own value, its weight; a grey cell's, from the grey
    layer, why it is grey. So the hover text is the same at every query of a window, and a query spare (the view at
    another position, sent as changes) carries the weights alone."""
    h, T = weights.shape
    masked = (~visible)[None, :].expand(h, -1)
    if dropped is not None:
        masked = masked | dropped
    start = _window_start(query)
    figure = _heatmap(weights, [f"head {n}" for n in range(h)], tokens, title, colorscale="Blues", zmin=0.0,
                      zmax=zmax, masked=masked, highlight_row=head, col_start=start, x_title="key token",
                      y_title="head")
    first = max(0, min(start, T - plots.MAX_SIDE))
    shown, rows = slice(first, first + plots.MAX_SIDE), min(h, plots.MAX_SIDE)  # the window _heatmap draws
    keys = [f"key {j} ({plots._display_label(token)})" for j, token in enumerate(tokens[shown], start=first)]
    cells = np.char.add(np.array([f"head {n} · " for n in range(rows)])[:, None], np.array(keys)[None, :])
    figure.update_traces(customdata=cells, hovertemplate="%{customdata}<br>weight %{z:.4f}<extra></extra>",
                         hoverongaps=False, selector=0)
    if len(figure.data) > 1:  # the grey layer: why each grey cell is grey
        seen = visible[shown].expand(rows, -1)
        why = np.where((seen & dropped[:rows, shown]).numpy() if dropped is not None else False,
                       lessons.DROPPED_HOVER, lessons.MASKED_WEIGHT_HOVER)
        figure.update_traces(customdata=np.char.add(cells, np.char.add("<br>", why)) if dropped is not None else None,
                             hovertemplate=("%{customdata}" if dropped is not None else lessons.MASKED_WEIGHT_HOVER)
                             + "<extra></extra>", hoverinfo=None, hoverongaps=False, selector=1)
    return figure


def _features_figure(matrix: torch.Tensor, tokens: list[str], columns: list[str], title: str, query: int,
                     col_start: int = 0, head_size: int | None = None, heads: list[str] | None = None):
    """Tokens x features. With ``head_size`` (the heads' features side by side, or their projection), the window is
    whole heads, every head of up to MAX_FEATURE_COLUMNS features; ``heads`` names them, with a divider between."""
    window = dict(highlight_row=query, row_start=_window_start(query), y_title="token", **_symmetric(matrix))
    if head_size is None:
        return _heatmap(matrix, tokens, columns, title, col_start=col_start, sparse_columns=True, x_title="feature",
                        **window)
    wide = max(head_size, plots.MAX_FEATURE_COLUMNS // head_size * head_size)
    first = max(0, min(col_start, matrix.size(1) - wide))
    first -= first % head_size  # a window starts at a head's first feature
    if heads is None:
        return _heatmap(matrix, tokens, columns, title, col_start=first, max_cols=wide, sparse_columns=True,
                        x_title="feature", **window)
    figure = _heatmap(matrix, tokens, columns, title, col_start=first, max_cols=wide,
                      x_title=f"feature ({head_size} per head; hover names each)", **window)
    return plots.column_groups(figure, head_size, heads, first)


def _side(n: int) -> int:
    return min(n, plots.MAX_SIDE)


def _figure_cells(level: str, T: int, C: int, h: int, d: int, layers: int, top: int,
                  forget_transpose: bool = False) -> tuple[int, int]:
    """(heatmap cells, bars) the level draws, from the shapes: each heatmap is windowed to MAX_SIDE a side; the
    forgotten transpose's map counts twice (a word and a hover line per cell)."""
    t = _side(T)
    if level == "score":
        return 3 * _side(d) + t * t, d
    if level == "head":
        return t * t + t * _side(d), 0
    if level == "heads":
        shown = min(h, plots.MAX_GRID_PANELS)
        wide = min(C, max(d, plots.MAX_FEATURE_COLUMNS // max(d, 1) * d))  # the join and projection: whole heads
        return shown * plots.grid_side(shown, T) ** 2 + 2 * t * wide + forget_transpose * 2 * t * _side(h), 0
    if level == "block":  # the weights before and after dropout; each token's ‖x‖ at 7 points, or the guesses
        return 2 * t * t + max(7 * t, 3 * anatomy.BLOCK_TOP), 7
    return t * (layers + 1) + t * top + (layers + 1) * top, layers + 1


# --------------------------------------------------------------------------------------------- the levels

def _score_view(trace: walkthrough.HeadTrace, settings: Settings, where: str, notes: list[str]) -> tuple:
    T = trace.length
    query, query_clamped = anatomy.position(settings.query, "query", T)
    key, key_clamped = anatomy.position(settings.key, "key", T)
    notes = notes + _clamp_notes(query_clamped, settings.query, key_clamped, settings.key, T)
    cell = anatomy.one_score(trace.q[query], trace.k[key])
    d = cell.head_size
    tokens = trace.tokens
    features = [f"d{n}" for n in range(d)]
    rows = torch.stack((cell.q, cell.k, cell.products))  # (3, d)
    vectors = _heatmap(rows, [f"q_{query}", f"k_{key}", "q × k"], features,
                            f"q_{query} ({tokens[query]}), k_{key} ({tokens[key]}) and their products",
                            **_symmetric(rows), sparse_columns=True, x_title="feature", height=300)
    products = plots.bar_chart(features, cell.products.tolist(),
                               f"The {d} products: they add up to {cell.total:.4f}", "q_i[n] × k_j[n]",
                               room_px=plots.LABEL_ROOM_PX)  # feature labels fit a phone, as figure 1's do
    start = _window_start(query)
    key_start = start if start <= key < start + plots.MAX_SIDE else _window_start(key)  # the framed cell in view
    scores = _heatmap(trace.masked_scores, tokens, tokens, f"Scaled scores: cell ({query}, {key}) = "
                      f"{cell.scaled:.4f}", **_symmetric(trace.masked_scores), highlight_row=query, row_start=start,
                      col_start=key_start, frame=(query, key), x_title="key token", y_title="query token",
                      masked_hover=walkthrough.lessons.MASKED_SCORE_HOVER)
    masked = bool(trace.masked[query, key])
    text = lessons.score_text(cell, query, key, tokens[query], tokens[key], masked, float(trace.weights[query, key]))
    heading = _heading("score", lessons.score_look_for(query, key, masked, cell.total, cell.scaled, d),
                       lessons.score_formula(query, key, d), text, where, notes)
    return heading, vectors, products, scores, None, lessons.score_table(cell)


def _head_view(trace: walkthrough.HeadTrace, settings: Settings, where: str, notes: list[str],
               attention_hint: str) -> tuple:
    T = trace.length
    query, clamped = anatomy.position(settings.query, "query", T)
    notes = notes + _clamp_notes(clamped, settings.query, False, None, T)
    tokens = trace.tokens
    weights = _weights_figure(trace.weights, ~trace.masked, tokens, "Attention weights (each row sums to 1)", query)
    output = _features_figure(trace.output, tokens, [f"d{n}" for n in range(trace.head_size)],
                              "Output = weights · V", query)
    text = lessons.head_text(where, query, tokens[query], trace.weights[query].tolist(), tokens, attention_hint)
    formula = f"out = softmax(Q·Kᵀ / √{trace.head_size}, causal) · V  ({T} × {trace.head_size})"
    return _heading("head", lessons.HEAD_LOOK_FOR, formula, text, "", notes), weights, output, None, None, ""


def _heads_figures(heads: anatomy.AllHeads, tokens: list[str], query: int, name: str, head: int = 0) -> tuple:
    """The weights grid, the concatenation and the projection; with the transpose forgotten the concatenation's
    columns are blocks (b1·d0), not heads: which head a block holds changes from row to row (see the map)."""
    T = heads.length
    visible = torch.ones(T, T, dtype=torch.bool).tril()
    side = plots.grid_side(min(heads.heads_num, plots.MAX_GRID_PANELS), T)
    grid = plots.heads_grid(heads.weights, tokens, f"{name}: every head's attention weights", masked=~visible,
                            highlight_row=query, start=max(0, query - side // 2))
    d, h = heads.head_size, heads.heads_num
    forgot = heads.forgotten is not None
    scrambled = "scrambled" if h > 1 and T > 1 else "here the same as the right join"  # one head or one token
    columns = [f"{'b' if forgot else 'h'}{i}·d{n}" for i in range(h) for n in range(d)]
    joined = (f"{name}: the heads joined without the transpose ({h} blocks of {d}, {scrambled})" if forgot else
              f"{name}: the heads' outputs side by side ({h} × {d})")
    blocks = [f"{'block' if forgot else 'head'} {i}" for i in range(h)]
    concatenated = _features_figure(heads.concatenated, tokens, columns, joined, query, col_start=head * d,
                                    head_size=d, heads=blocks)
    projected = None
    if heads.projected is not None:  # as wide as the join
        projected = _features_figure(heads.projected, tokens, [f"x{n}" for n in range(heads.projected.size(1))],
                                     f"{name}: the output projection of the join without the transpose "
                                     "(notebook 002's output)"
                                     if forgot else f"{name}: after the output projection", query, col_start=head * d,
                                     head_size=d)
    return grid, concatenated, projected


def _forgotten_map(forgotten: anatomy.ForgottenJoin, tokens: list[str], query: int, name: str):
    """Rows (tokens) x blocks of the scrambled join, coloured by the head each block was read from; each cell
    names its (head, token), ✓ where that is the right place; hover says what the right join puts there."""
    T, d, h = forgotten.length, forgotten.pitfall.head_size, forgotten.heads_num
    first = max(0, min(_window_start(query), T - plots.MAX_SIDE))
    shown = slice(first, first + plots.MAX_SIDE)  # words and hover lines for the rows the figure draws only
    sources = forgotten.block_sources[shown].tolist()  # (rows, h, 2)
    misplaced = forgotten.misplaced[shown].tolist()  # (rows, h)
    words, hover = [[""] * h] * first, [[""] * h] * first  # the rows above the window: never drawn
    for t, row in enumerate(sources, start=first):
        words.append([lessons.forgotten_cell(head, token, not misplaced[t - first][i])
                      for i, (head, token) in enumerate(row)])
        hover.append([lessons.forgotten_hover(t, i, d, head, token, tokens) for i, (head, token) in enumerate(row)])
    return plots.category_heatmap(forgotten.block_sources[..., 0], words, hover, [f"head {i}" for i in range(h)],
                                  tokens, [f"block {i}" for i in range(h)],
                                  f"{name}: where each block came from without the transpose (colour: the head, "
                                  f"{lessons.RIGHT_MARK} the right place)", first_row=first,
                                  highlight_row=query, x_title=f"block of the joined row ({d} features each)",
                                  y_title="row (token)")


def _table_start(query: int, rows: int = TABLE_ROWS) -> int:
    """The first row of a ``rows``-row table that keeps the query in view."""
    return max(0, query - rows // 2)


def _rows_table(title: str, matrix: torch.Tensor, tokens: list[str]) -> str:
    columns = matrix.size(1)
    table = [f"**{title}**", "", "| token | " + " | ".join(f"{n}" for n in range(columns)) + " |",
             "|---|" + "---|" * columns]
    table += [f"| {i} `{token}` | " + " | ".join(f"{v:.4f}" for v in row) + " |"
              for i, (token, row) in enumerate(zip(tokens, matrix.tolist()))]
    return "\n".join(table)


def _block_view(block, x: torch.Tensor, tokens: list[str], heads_num: int, settings: Settings, where: str,
                notes: list[str], trained_as: str, loaded: checkpoints.Checkpoint | None = None) -> tuple:
    """Level 4. What every head reads at the query; of a checkpoint's block (``loaded``: its final norm and LM head
    read the stream), what the query's stream would give as the next character after each part (anatomy.block_lens):
    what the output projection and the MLP add, in the next character. The textbook's block has no LM head: each
    token's ‖x‖ at each point there."""
    T = x.size(0)
    head = checks.index(settings.head, "head", heads_num, "heads per layer")
    query, clamped = anatomy.position(settings.query, "query", T)
    notes = notes + _clamp_notes(clamped, settings.query, False, None, T)
    walk = anatomy.block_walk(block, x, norm_order=settings.norm_order, causal=settings.causal,
                              activation=settings.activation, dropout_p=settings.dropout, seed=settings.dropout_seed)
    before = _reads_figure(walk.weights[:, query], walk.visible[query], tokens,
                           f"Where each head looks from position {query} ({tokens[query]}): its attention weights",
                           query, head)
    after = None
    if walk.dropout_p:
        used = walk.dropped_weights[:, query]
        after = _reads_figure(used, walk.visible[query], tokens,
                              f"The same after dropout (p = {walk.dropout_p:g}): grey = dropped or masked, the rest "
                              f"× {1 / (1 - walk.dropout_p):.3f}", query, head, dropped=walk.dropped[:, query],
                              zmax=max(1.0, float(used.max())))
    names = [point.name for point in walk.points]
    norms = torch.stack([point.norms for point in walk.points])  # (points, T)
    if loaded is not None:
        stream = _block_guesses(loaded, walk, query, tokens)
    else:
        stream = _heatmap(norms, names, tokens, "‖x‖ of each token at each point of the block", colorscale="Viridis",
                          zmin=0.0, col_start=_window_start(query), x_title="token", y_title="point",
                          show_values=False, sparse_columns=True)
    means = plots.bar_chart(names, norms.mean(dim=1).tolist(), "Mean ‖x‖ over the tokens at each point", "‖x‖",
                            height=420)  # room under the bars for the seven points' slanted names
    text = lessons.block_text(walk, query, trained_as)
    heading = _heading("block", lessons.block_look_for(walk, guesses=loaded is not None), lessons.block_formula(walk),
                       text, where, notes)
    return heading, before, after, stream, means, ""


def _block_guesses(loaded: checkpoints.Checkpoint, walk: anatomy.BlockWalk, query: int, tokens: list[str]):
    """The query's next-character guesses at each stream point of the block, as level 5 shows them per block."""
    lens = anatomy.block_lens(loaded.model, walk, query)
    words = [[token_label(loaded.tokenizer.decode([token])) for token in row] for row in lens.top_ids.tolist()]
    ranks = [str(rank + 1) for rank in range(lens.top_ids.size(1))]
    return plots.text_heatmap(lens.top_probs, words, [lessons.BLOCK_POINTS.get(name, name) for name in lens.names],
                              ranks, f"The guess after each part of the block, at position {query} "
                              f"({tokens[query]})", x_title="rank", show_values=True)


def _lens_view(loaded: checkpoints.Checkpoint, ids: torch.Tensor, tokens: list[str], settings: Settings, part: str,
               where: str, notes: list[str]) -> tuple:
    T = ids.numel()
    query, clamped = anatomy.position(settings.query, "query", T)
    notes = notes + _clamp_notes(clamped, settings.query, False, None, T)
    lens = anatomy.logit_lens(loaded.model, ids)
    shown_ids = sorted({int(i) for stage in lens.stages for i in stage.top_ids.flatten().tolist()})
    labels = {i: token_label(loaded.tokenizer.decode([i])) for i in shown_ids}  # only the ids the figures show
    stage_names = [stage.name for stage in lens.stages]
    positions = [f"{i} {token}" for i, token in enumerate(tokens)]
    first_row = _window_start(query)
    top1 = torch.stack([stage.top_probs[:, 0] for stage in lens.stages], dim=1)  # (T, stages)
    top1_words = [[labels[int(stage.top_ids[t, 0])] for stage in lens.stages] for t in range(T)]
    lens_figure = plots.text_heatmap(top1, top1_words, positions, stage_names,
                                     "Top guess for the next character, after each part (colour: its probability)",
                                     highlight_row=query, first_row=first_row, x_title="read after",
                                     y_title="position")
    final = lens.stages[-1]
    ranks = [str(r + 1) for r in range(final.top_ids.size(1))]
    top10 = plots.text_heatmap(final.top_probs, [[labels[int(i)] for i in row] for row in final.top_ids.tolist()],
                               positions, ranks, f"The model's top {len(ranks)} next characters at every position",
                               highlight_row=query, first_row=first_row, x_title="rank", y_title="position")
    here = torch.stack([stage.top_probs[query] for stage in lens.stages])  # (stages, top)
    here_words = [[labels[int(i)] for i in stage.top_ids[query].tolist()] for stage in lens.stages]
    changes = plots.text_heatmap(here, here_words, stage_names, ranks,
                                 f"After position {query} ({tokens[query]}): the top {len(ranks)} after each part",
                                 x_title="rank", y_title="read after")
    choice = labels[int(final.top_ids[query, 0])]
    bars = plots.bar_chart(stage_names, [float(stage.final_choice_probs[query]) for stage in lens.stages],
                           f"Probability of the final guess '{choice}' after each part", "probability")
    text = lessons.lens_text(lens, query, labels, tokens)
    heading = _heading("model", lessons.lens_look_for(part, loaded.config.is_llama),
                       lessons.lens_formula(loaded.config.layers_num), text, where, notes)
    return heading, lens_figure, top10, changes, bars, ""


# --------------------------------------------------------------------------------------------- the sources

def prepared_text(loaded, text: str, settings: Settings, part, parts: list[str], queries: list):
    """(the checkpoint's tokens of ``text``, None), or (None, a view per query position saying which characters its
    tokenizer does not know): the text step every checkpoint's views start from."""
    try:
        return walkthrough.prepare_text(text, loaded.tokenizer, loaded.config.context_size), None
    except UnknownCharacterError as exc:
        message = (f"### {LEVEL_TITLES[anatomy.LEVELS.index(settings.level)]}\n\n**{exc}.** Remove them, or pick "
                   "the textbook inputs.")
        return None, [View(_current_part(settings.level, 0, part, parts), message, None, None, None, None, "", parts)
                      for _ in queries]


def textbook_view(settings: Settings, part) -> View:
    parts = lessons.map_parts(1)
    level = settings.level
    x, tokens = anatomy.textbook_inputs()
    picture = ""
    notes = ["The textbook inputs are fixed: the text box is not used."]
    if level in ("score", "head"):
        inputs = walkthrough.journey_preset(anatomy.TEXTBOOK_SEED)
        where = f"the book's CausalAttention head on \"Your journey starts with one step\" ({inputs.description})"
        if level == "score":
            shown = _score_view(inputs.trace(), settings, where, notes)
        else:
            hint = ("**Open the Attention tab** (textbook preset, journey) to step through this head's seven "
                    "stages with the same numbers.")
            shown = _head_view(inputs.trace(), settings, where, notes, hint)
    elif level == "heads" and settings.forget_transpose:
        query, clamped = anatomy.position(settings.query, "query", len(tokens))
        notes += [lessons.WRAPPER_HAS_NO_TRANSPOSE, *_clamp_notes(clamped, settings.query, False, None, len(tokens))]
        batched = anatomy.textbook_heads("batched", forget_transpose=True)
        grid, concatenated, projected = _heads_figures(batched, tokens, query, "MultiHeadAttention")
        numbers = "\n\n".join((
            lessons.forgotten_table(batched.forgotten, tokens, _table_start(query)),
            _rows_table("MultiHeadAttention without the transpose: after out_proj (batch row 0)", batched.projected,
                        tokens),
            _rows_table("MultiHeadAttention as notebook 001 writes it, with the transpose: after out_proj",
                        batched.forgotten.right_projected, tokens)))
        shown = (_heading("heads", lessons.FORGOTTEN_LOOK_FOR, lessons.forgotten_formula(batched),
                          lessons.forgotten_text(batched, query, tokens), batched.description, notes),
                 grid, concatenated, projected, _forgotten_map(batched.forgotten, tokens, query, "MultiHeadAttention"),
                 numbers)
        picture = transpose_picture.picture(batched.forgotten, tokens)
    elif level == "heads":
        query, clamped = anatomy.position(settings.query, "query", len(tokens))
        notes += _clamp_notes(clamped, settings.query, False, None, len(tokens))
        wrapper, batched = anatomy.textbook_heads("wrapper"), anatomy.textbook_heads("batched")
        wrapper_grid, wrapper_concat, _ = _heads_figures(wrapper, tokens, query, "Wrapper")
        batched_grid, _, batched_out = _heads_figures(batched, tokens, query, "MultiHeadAttention")
        numbers = "\n\n".join((_rows_table("MultiHeadAttentionWrapper: context vectors (batch row 0)",
                                           wrapper.concatenated, tokens),
                               _rows_table("MultiHeadAttention: context vectors after out_proj (batch row 0)",
                                           batched.projected, tokens)))
        text = lessons.textbook_heads_text(wrapper, batched)
        shown = (_heading("heads", lessons.TEXTBOOK_HEADS_LOOK_FOR,
                          "out = concat(head₀, head₁)  then · W_out for MultiHeadAttention", text, "", notes),
                 wrapper_grid, wrapper_concat, batched_grid, batched_out, numbers)
    elif level == "block":
        block = anatomy.textbook_block()
        where = (f"a block around the book's 6 × 3 inputs: one head of width 3, an MLP of 12 units, seeded random "
                 f"weights (torch.manual_seed({anatomy.TEXTBOOK_SEED}), PyTorch's default initialisation)")
        shown = _block_view(block, x, tokens, 1, settings._replace(head=0), where, notes, TEXTBOOK_TRAINED_AS)
    else:
        shown = (_heading("model", lessons.TEXTBOOK_MODEL_LOOK_FOR, "", lessons.TEXTBOOK_NO_MODEL, "", []), None, None,
                 None, None, "")
    return View(_current_part(level, 0, part, parts), *shown, parts, picture)


def book_view(source: str, text: str, book_inputs: str) -> View:
    """A notebook's own model: every head's weights, what each head reads, its shapes beside the notebook's."""
    book = anatomy.book_model(BOOK_SOURCES[source], text, book_inputs == BOOK_INPUTS[1])
    tokens = [token_label(token) for token in book.tokens]
    T = len(tokens)
    future = ~torch.ones(T, T, dtype=torch.bool).tril() if book.causal else None
    layers = len(book.weights)
    grids = [plots.heads_grid(weights, tokens, f"{book.title}" + (f", layer {i + 1}" if layers > 1 else "")
                              + ": every head's attention weights", masked=future)
             for i, weights in enumerate(book.weights)]
    heads_num, width = book.reads.shape
    reads = plots.heatmap(book.reads, [f"head {h}" for h in range(heads_num)], [f"x{c}" for c in range(width)],
                          "What each head reads: the input features its q, k and v are computed from",
                          zmin=0.0, zmax=1.0, x_title="input feature", show_values=False, sparse_columns=True)
    figures = [*grids, reads]
    table = ["| step | the notebook | here |", "|---|---|---|"]
    table += [f"| `{row.step}` | `{row.notebook}` | `{tuple(row.here)}` |" for row in book.shapes]
    heading = (f"### {book.title}\n\n**Look for:** {lessons.BOOK_LOOK_FOR[book.notebook]}\n\n"
               + fold(f"*{book.description}*" + "".join(f"\n\nℹ️ {note}" for note in book.notes)
                      + f"\n\n{lessons.BOOK_MORE[book.notebook]}"))
    figures += [None] * (4 - len(figures))
    return View("", heading, *figures, "\n".join(table), [])


# --------------------------------------------------------------------------------------------- handlers
