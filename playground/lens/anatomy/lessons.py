"""The Model tab's words: the five level titles, the model map's parts, and what to look for at each level
(level 3 also explains notebook 002's forgotten transpose, block by block).

The ONE place the level titles live (the tab's level picker, its headings and the ``level`` argument of
``/model_view`` use ``LEVEL_TITLES``). Holds words only: the numbers come from levels.py, and each function
here turns them into sentences a learner reads, the way walkthrough/lessons.py does for the seven stages.

    LEVEL_TITLES[0] -> "1. One score"        map_parts(4) -> ["Embeddings", "Layer 0", ..., "Layer 3",
                                                             "Final norm", "LM head", "Next-character probabilities"]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from playground import checks
from playground.lens.anatomy.levels import LEVELS, AllHeads, BlockWalk, ForgottenJoin, LogitLens, ScoreCell
from playground.lens.walkthrough.lessons import MASKED_WEIGHT_HOVER as MASKED_WEIGHT_HOVER  # the Model tab's too

LEVEL_TITLES = ("1. One score", "2. One head", "3. All heads", "4. The block", "5. The model")  # one per LEVELS
LEVEL_LABELS = ("1 · score", "2 · head", "3 · all heads", "4 · block", "5 · model")  # the picker's short labels
NORM_ORDER_LABELS = {"pre": "pre-norm (GPT)", "post": "post-norm (notebooks 002/003)"}
ATTENTION_LABELS = {True: "decoder (causal mask)", False: "encoder (no mask)"}
ACTIVATION_LABELS = {"gelu": "GELU", "relu": "ReLU"}
GPT_SWITCHES = "pre-norm, causal, GELU (a GPT)"  # how every checkpoint's blocks were trained
EMBEDDINGS, FINAL_NORM, LM_HEAD, PROBABILITIES = "Embeddings", "Final norm", "LM head", "Next-character probabilities"
MODEL_PARTS = (EMBEDDINGS, FINAL_NORM, LM_HEAD, PROBABILITIES)  # the map's parts outside the blocks
DROPPED_HOVER = "dropped by dropout: this weight is 0 in training"
FORGET_TRANSPOSE_LABEL = "forget the transpose (notebook 002's bug)"
FORGET_TRANSPOSE_INFO = "join the heads with .view(B, T, h·d) straight from (B, h, T, d), as notebook 002's code does"
WRAPPER_HAS_NO_TRANSPOSE = (
    "The wrapper joins its heads with `torch.cat(..., dim=-1)`: it has no transpose to forget. The what-if runs "
    "on the book's batched `MultiHeadAttention`, whose context vectors go through `.transpose(1, 2)` and then "
    "`.contiguous().view(b, num_tokens, d_out)`: here that view comes straight after `attn_weights @ values`.")
RIGHT_MARK = "✓"  # a block the forgotten transpose happens to leave where it belongs
SUBSCRIPT_DIGITS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def subscript(number: int) -> str:
    """A whole number as subscript digits, for formulas: subscript(12) -> "₁₂"."""
    return str(number).translate(SUBSCRIPT_DIGITS)


# A notebook's own model (book_models.py): one line to look for, the rest behind "more"
BOOK_LOOK_FOR = {
    "002": "no grey cells: an encoder's tokens read every token, later ones too.",
    "003": "the grey upper triangle in both layers (the causal mask); layer 2 reads layer 1's output.",
    "004": "in the last picture each head reads only its own 8 of the 16 features; GPT's heads read all of them.",
}
BOOK_MORE = {
    "002": "Notebook 002's `MultiHeadAttention` computes q, k and v in one `qkv_layer`, laid out per head: head i's "
           "q, k and v are its output features [3·d·i, 3·d·(i+1)). The layer is post-norm: "
           "`norm1(x + attention(x))`, then `norm2(x + ffn(x))`. The notebook joins the heads without a transpose; "
           "here they are joined right (the **forget the transpose** switch at level 3 shows the notebook's way). "
           "The table puts the shapes the notebook prints for its own sizes beside this view's.",
    "003": "Notebook 003 writes W_q, W_k, W_v and W_o as four Linear layers and calls attention as "
           "`attention(x, x, x, mask)`. Both layers are post-norm; the mask is `tril(ones(T, T))`, so every score "
           "above the diagonal is −∞ and its weight exactly 0. The table's middle column is the notebook's shape "
           "comments.",
    "004": "Notebook 004's `MultiHeadAttention(C, num_heads)` hands head i the slice `x[..., i·C_head:(i+1)·C_head]` "
           "of each embedding, with key, query and value of C_head × C_head; `proj` then mixes the heads. So a "
           "head cannot see the other heads' features at all. The model has no residual, no norm and no MLP: "
           "logits = output(attn(token_emb + pos_emb)).",
}

TEXTBOOK_NO_MODEL = (
    "The book's inputs are six hand-made 3-d vectors: they have no vocabulary, so there is no LM head and no "
    "next character to predict. Pick **trained checkpoint** as the source to see the whole model.")


def level_key(title_or_key: str) -> str:
    """"3. All heads" or "heads" -> "heads"; ValueError naming the levels otherwise."""
    if title_or_key in LEVEL_TITLES:
        return LEVELS[LEVEL_TITLES.index(title_or_key)]
    if title_or_key in LEVELS:
        return title_or_key
    raise ValueError(f"level: {checks.shown(title_or_key)} is not one of the levels ({', '.join(LEVEL_TITLES)})")


def block_part(layer: int) -> str:
    """The map's name for block ``layer``: "Layer 0". Layers and heads are counted from 0 everywhere on screen (L3 H1 is
    layer 3, head 1; notebook 003's layer1 and layer2 are layers 0 and 1)."""
    return f"Layer {layer}"


def map_parts(layers_num: int) -> list[str]:
    """The model drawn as its parts, in the order data flows through them."""
    return [EMBEDDINGS, *(block_part(layer) for layer in range(layers_num)), FINAL_NORM, LM_HEAD, PROBABILITIES]


def _vector(values, limit: int = 8) -> str:
    shown = ", ".join(f"{v:.4f}" for v in values[:limit])
    return f"[{shown}{', …' if len(values) > limit else ''}]"


# --------------------------------------------------------------------------------------------- 1. one score

def score_formula(query: int, key: int, head_size: int) -> str:
    return (f"S[{query}, {key}] = q_{query} · k_{key} = Σₙ q_{query}[n] × k_{key}[n]  ({head_size} products), "
            f"then ÷ √{head_size}")


def score_text(cell: ScoreCell, query: int, key: int, query_token: str, key_token: str, masked: bool,
               weight: float) -> str:
    """What the one score shows, with its numbers."""
    d = cell.head_size
    products = cell.products.tolist()
    largest = max(range(d), key=lambda n: abs(products[n]))
    positive = sum(p > 0 for p in products)
    text = (f"Query **{query}** `{query_token}` asks, key **{key}** `{key_token}` answers. Multiply them feature by "
            f"feature: {d} products, {positive} positive and {d - positive} negative. They add up to the raw score "
            f"**{cell.total:.4f}**; divided by √{d} = {math.sqrt(d):.3f} that is **{cell.scaled:.4f}**, cell "
            f"({query}, {key}) of the scaled scores. The biggest single product is feature d{largest} "
            f"({products[largest]:+.4f}).")
    if masked:
        text += (f" Key {key} comes after query {query}, so the causal mask replaces this score with "
                 "−∞ and its weight is exactly 0: the token never sees it, however large the score is.")
    else:
        text += (f" After softmax over the row, this cell's weight is **{weight:.4f}**. A score is "
                 "large when q and k point the same way: many large products with the same sign. Try another key "
                 "and see which one the query likes best.")
    return text


def score_look_for(query: int, key: int, masked: bool, total: float, scaled: float, head_size: int) -> str:
    """Level 1's one line: what the three pictures show at a glance. The framed cell is the scaled score, so the line
    goes from the bars' sum to it: the raw score is not the number in the framed cell."""
    if masked:
        return f"key {key} comes after query {query}: the mask makes this score −∞, its weight exactly 0."
    return (f"the products' bars add up to the raw score {total:.4f}; ÷ √{head_size} it is the framed cell, "
            f"{scaled:.4f}. Same-sign products make it large.")


def score_table(cell: ScoreCell, limit: int = 64) -> str:
    """The products as a Markdown table (the first ``limit`` features), with the sum below."""
    rows = ["| feature | q_i | k_j | q_i × k_j |", "|---|---|---|---|"]
    for n, (q, k, p) in enumerate(zip(cell.q.tolist()[:limit], cell.k.tolist()[:limit], cell.products.tolist())):
        rows.append(f"| d{n} | {q:.4f} | {k:.4f} | {p:+.4f} |")
    if cell.head_size > limit:
        rows.append(f"| … | | | ({cell.head_size - limit} more) |")
    rows.append(f"| **sum** | | | **{cell.total:.4f}** |")
    rows.append(f"| **÷ √{cell.head_size}** | | | **{cell.scaled:.4f}** |")
    return "\n".join(rows)


# --------------------------------------------------------------------------------------------- 2. one head

def head_text(where: str, query: int, query_token: str, weights_row: Sequence[float], tokens: Sequence[str],
              attention_tab_hint: str) -> str:
    row = list(weights_row)
    best = max(range(len(row)), key=row.__getitem__)
    return (f"This is {where}: its attention weights, one row per query, and its output (weights · V). Query "
            f"**{query}** `{query_token}` puts its largest weight, **{row[best]:.3f}**, on token {best} "
            f"(`{tokens[best]}`). A dark diagonal means each token looks at itself, a dark first column is a "
            f"resting place when nothing else fits, a stripe just left of the diagonal reads the previous "
            f"character. {attention_tab_hint}")


HEAD_LOOK_FOR = "a dark diagonal, a dark first column, or a stripe just left of the diagonal in the weights."
HEADS_LOOK_FOR = ("each panel is one head's pattern over the same text; where two differ, they read different keys. "
                  "W_O turns the heads' joined outputs into one row per token, which the stream adds: level 4's "
                  "“+ attention”.")
TEXTBOOK_HEADS_LOOK_FOR = "the wrapper's rows are 4 wide, the batched layer's 2 wide, on the same six inputs."
FORGOTTEN_LOOK_FOR = "the blocks move: one head's rows fill whole joined rows, so colours run in bands."
LENS_LOOK_FOR = "the guesses sharpen from the embeddings to the last block, whose reading is exactly the output."
TEXTBOOK_MODEL_LOOK_FOR = "no chart here: the book's six hand-made inputs have no vocabulary to predict."


# --------------------------------------------------------------------------------------------- 3. all heads

def heads_formula(heads: AllHeads) -> str:
    h, d = heads.heads_num, heads.head_size
    formula = f"out = concat(head₀, …, head{subscript(h - 1)})  ({heads.length} × {h}·{d} = {h * d})"
    return formula + ("  then · W_out" if heads.projected is not None else "  (no output projection)")


def heads_text(heads: AllHeads, query: int, query_token: str) -> str:
    h, d = heads.heads_num, heads.head_size
    favourites = [int(heads.weights[i, query].argmax()) for i in range(h)]
    pattern = ", ".join(f"head {i} → token {j}" for i, j in enumerate(favourites[:8]))
    text = (f"{heads.description}. Every head reads the same input, with its own weights, so each draws its own "
            f"pattern. For query **{query}** `{query_token}` the favourite key of each head: {pattern}"
            f"{' …' if h > 8 else ''}. Their outputs ({d} features each) are laid side by side: features "
            f"0–{d - 1} come from head 0, {d}–{2 * d - 1} from head 1, and so on.")
    if heads.projected is not None:
        text += (" The output projection then mixes them: each output feature is a weighted sum of every head's "
                 "features, so the heads can combine what they found.")
    else:
        text += " Nothing mixes them afterwards: without an output projection the heads stay in separate columns."
    return text


def textbook_heads_text(wrapper: AllHeads, batched: AllHeads) -> str:
    """Notebook 001's numbers, read off the screen."""
    same = "both gave the same rows" if wrapper.batch_rows_equal and batched.batch_rows_equal \
        else "the two gave different rows"
    return (f"Notebook 001, on screen. With `torch.manual_seed(123)`, the book's `MultiHeadAttentionWrapper(d_in=3, "
            f"d_out=2, context_length=6, 0.0, num_heads=2)` concatenates two heads of width 2: row 0 is "
            f"**{_vector(wrapper.concatenated[0].tolist())}**. The batched `MultiHeadAttention(d_in=3, d_out=2, 6, "
            f"0.0, num_heads=2)` splits d_out = 2 into two heads of width 1, concatenates them and projects with "
            f"out_proj: row 0 is **{_vector(batched.projected[0].tolist())}**. Run on a batch of two copies of the "
            f"input, {same}. "
            "(The book's wrapper gives each head d_out features; this project's family counts d_out as the total, "
            "so the same wrapper is written with d_out 4 here.) The wrapper's first two columns are notebook 001's "
            "single CausalAttention head.")


# --------------------------------------------------------------------------------------------- 3. what if: no transpose

def forgotten_formula(heads: AllHeads) -> str:
    h, d, T = heads.heads_num, heads.head_size, heads.length
    formula = (f"out = heads.contiguous().view(B, T, h·d)  ← no .transpose(1, 2) first: (B, {h}, {T}, {d}) read in "
               f"memory order as (B, {T}, {h * d})")
    return formula + ("  then · W_out" if heads.projected is not None else "")


def block_source(head: int, token: int, tokens: Sequence[str]) -> str:
    """ "head 0, token 5 `o`": where a block of the joined row was read from."""
    return f"head {head}, token {token} `{tokens[token]}`"


def forgotten_cell(head: int, token: int, right: bool) -> str:
    """The map's short cell word: "h0·t5", with RIGHT_MARK where the block is in its right place."""
    return f"h{head}·t{token}" + (f" {RIGHT_MARK}" if right else "")


def forgotten_hover(row: int, block: int, head_size: int, head: int, token: int, tokens: Sequence[str]) -> str:
    """One cell of the map: "row 2 `b`, block 1 (features 48–95) ← head 0, token 5 `o`; right: head 1, token 2"."""
    where = (f"row {row} `{tokens[row]}`, block {block} ({_features(block, head_size)}) ← "
             f"{block_source(head, token, tokens)}")
    if (head, token) == (block, row):
        return where + ": the right place"
    return where + f"; the right join puts {block_source(block, row, tokens)} here"


def _row_sources(forgotten: ForgottenJoin, row: int, tokens: Sequence[str], limit: int = 8) -> str:
    sources = forgotten.block_sources[row].tolist()
    parts = [f"block {i} ← {block_source(head, token, tokens)}" for i, (head, token) in enumerate(sources[:limit])]
    return "; ".join(parts) + ("; …" if len(sources) > limit else "")


def _positions(rows: Sequence[int], limit: int = 12) -> str:
    shown = ", ".join(str(r) for r in rows[:limit])
    return shown + (", …" if len(rows) > limit else "")


def forgotten_text(heads: AllHeads, query: int, tokens: Sequence[str]) -> str:
    """Why the transpose is needed, what forgetting it did to these heads, and what to look for."""
    forgotten = heads.forgotten
    h, d, T = heads.heads_num, heads.head_size, heads.length
    alone = T // h  # the first rows read head 0 alone: each row takes h blocks, and head 0 has T
    if h == 1 or T == 1:  # nothing to scramble: said below
        layout = ""
    elif alone:
        layout = (f"So row 0 takes head 0's rows for {_tokens_range(0, h)}, row 1 the next ones, …: a token's row "
                  f"gets whole rows of *other tokens*, and the first {checks.count(alone, 'row')} "
                  f"{'hold' if alone > 1 else 'holds'} head 0 alone. ")
    else:  # fewer tokens than heads: one row takes every token of several heads
        layout = (f"So row 0 takes {_row_heads(0, h, T)}, row 1 the next ones, …: a token's row gets whole rows of "
                  f"*other tokens*, about {h // T} heads' worth each. ")
    text = (f"**What if you forget the transpose?** Notebook 002's code joins the heads with "
            f"`.contiguous().view(B, T, h·d)` straight from (B, h, T, d). The heads' outputs lie in memory as "
            f"(h, T, d) = ({h}, {T}, {d}): head 0's {checks.count(T, 'row')} of {checks.count(d, 'feature')} first, "
            f"then head 1's, and so on. A view moves nothing: it cuts that same memory, in order, into "
            f"{checks.count(T, 'row')} of {h * d}. " + layout +
            f"`.transpose(1, 2)` first makes it (B, T, h, d), so that after `.contiguous()` each token's {h} head "
            "rows lie side by side and the view joins the right pieces. PyTorch raises no error: the shapes match "
            "either way, which is why the bug is silent. ")
    if h == 1 or T == 1:
        why = ("with one head, (1, T, d) and (T, 1, d)" if h == 1 else "with one token, (h, 1, d) and (1, h, d)")
        return text + (f"Here {why} hold the same numbers in the same order, so both joins agree: there is "
                       "nothing to scramble: "
                       + ("try a layer with more heads." if h == 1 else "try a longer text."))
    misplaced, mixed = int(forgotten.misplaced.sum()), forgotten.mixed_rows
    own = sorted(set(range(T)) - set(mixed))
    text += (f"Here, with the same weights: **{misplaced} of the {T * h} blocks** ({checks.count(d, 'feature')} "
             "each) land in the "
             f"wrong place, and **{len(mixed)} of the {T} rows** mix other tokens' features"
             + (f" (only row{'s' if len(own) > 1 else ''} {_positions(own)} read{'' if len(own) > 1 else 's'} its "
                f"own token alone)" if own else "") + ". ")
    output = "the output projection" if heads.projected is not None else "the output"
    text += (f"The layer's output differs from the right one by up to **{forgotten.output_difference:.2f}** "
             f"(the joined features by up to {forgotten.concatenated_difference:.2f}): that is the difference a "
             "learner sees comparing notebook 002's numbers with this project's, with no error to explain it. "
             f"Row **{query}** `{tokens[query]}` now holds: {_row_sources(forgotten, query, tokens)} (the right "
             f"join: head 0–{h - 1} of token {query}), and {output} then mixes those pieces into every feature. ")
    bands = (f"run in horizontal bands, about {checks.count(alone, 'row')} per head," if alone else
             f"change every {checks.count(T, 'block')} along a row (one head's {checks.count(T, 'token')}),")
    return text + (f"In the map, the colours (the source head) {bands} instead of repeating head 0, "
                   f"1, … across every row; the {RIGHT_MARK} cells are the few blocks that land right by chance "
                   "(row 0's first block and the last row's last block always do).")


def _tokens_range(first: int, last: int) -> str:
    """ "token 0" or "tokens 0–3": positions first..last-1."""
    return f"token {first}" if last - first == 1 else f"tokens {first}–{last - 1}"


def _row_heads(row: int, h: int, T: int) -> str:
    """What row ``row`` of the forgotten join reads when it spans several heads: "head 0's rows for tokens 0–1, then
    head 1's for tokens 0–1" (blocks row·h .. row·h + h - 1, block b being head b // T's row for token b % T)."""
    pieces: list[tuple[int, int, int]] = []  # (head, first token, last token + 1)
    for block in range(row * h, row * h + h):
        head, token = divmod(block, T)
        if pieces and pieces[-1][0] == head:
            pieces[-1] = (head, pieces[-1][1], token + 1)
        else:
            pieces.append((head, token, token + 1))
    said = [f"head {head}'s rows for {_tokens_range(first, last)}" for head, first, last in pieces]
    return ", then ".join(said)


def forgotten_table(forgotten: ForgottenJoin, tokens: Sequence[str], first_row: int = 0, rows: int = 16,
                    blocks: int = 8) -> str:
    """Where each d-wide block of rows first_row.. of the wrong join came from, and each row's largest difference
    from the right output, as a Markdown table of at most ``rows`` rows and ``blocks`` blocks."""
    T, h, d = forgotten.length, forgotten.heads_num, forgotten.pitfall.head_size
    first_row = max(0, min(first_row, T - rows))
    shown = range(first_row, min(T, first_row + rows))
    right_output = forgotten.right_projected if forgotten.right_projected is not None else forgotten.right_concatenated
    wrong_output = forgotten.wrong_projected if forgotten.wrong_projected is not None else forgotten.wrong_concatenated
    rows_shown = slice(shown.start, shown.stop)
    difference = (wrong_output[rows_shown] - right_output[rows_shown]).abs().amax(dim=1).tolist()  # (rows,)
    sources = forgotten.block_sources[rows_shown].tolist()  # (rows, h, 2)
    misplaced = forgotten.misplaced[rows_shown].tolist()  # (rows, h)
    columns = [f"block {i} ({_features(i, d)})" for i in range(min(h, blocks))]
    cut = [f"rows {shown.start}–{shown.stop - 1} of {T}"] if len(shown) < T else []
    cut += [f"blocks 0–{blocks - 1} of {h}"] if h > blocks else []
    table = [f"**Without the transpose: where each block of a row was read from** ({RIGHT_MARK}: the right place"
             + "".join(f"; {c}" for c in cut) + ")", "",
             "| row | " + " | ".join(columns) + " | output: max \\|wrong − right\\| |",
             "|---|" + "---|" * (len(columns) + 1)]
    for n, t in enumerate(shown):
        cells = [forgotten_cell(head, token, not misplaced[n][i])
                 for i, (head, token) in enumerate(sources[n][:blocks])]
        table.append(f"| {t} {_cell_word(tokens[t])} | " + " | ".join(cells) + f" | {difference[n]:.4f} |")
    return "\n".join(table)


def _features(block: int, head_size: int) -> str:
    first, last = block * head_size, (block + 1) * head_size - 1
    return f"d{first}" if first == last else f"d{first}–d{last}"


def _cell_word(token: str) -> str:
    """A token as code in a Markdown table cell: its pipes escaped, a backtick inside a double-backtick span."""
    token = token.replace("|", "\\|")
    return f"`` {token} ``" if "`" in token else f"`{token}`"


# --------------------------------------------------------------------------------------------- 4. the block

def block_formula(walk: BlockWalk) -> str:
    f = "GELU" if walk.activation == "gelu" else "ReLU"
    mlp = f"MLP(x) = W₂·{f}(W₁·x)"
    if walk.norm_order == "pre":
        return f"a = x + Attn(LN₁(x));   out = a + MLP(LN₂(a));   {mlp}"
    return f"a = LN₁(x + Attn(x));   out = LN₂(a + MLP(a));   {mlp}"


def switches_text(walk: BlockWalk) -> str:
    words = [NORM_ORDER_LABELS[walk.norm_order], ATTENTION_LABELS[walk.causal], ACTIVATION_LABELS[walk.activation],
             f"attention dropout p = {walk.dropout_p:g} (seed {walk.seed})" if walk.dropout_p else "dropout off"]
    return ", ".join(words)


def what_each_part_adds(walk: BlockWalk) -> str:
    """In plain words, what the block's two parts add to the stream, with this model's sizes: what the output
    projection and the MLP are for, which the formula alone does not say."""
    C, h, hidden = walk.points[0].values.size(1), walk.weights.size(0), walk.mlp_hidden.size(1)
    f = "GELU" if walk.activation == "gelu" else "ReLU"
    return (f"**What each part adds.** Attention moves information *between* positions: each of the {h} heads reads "
            f"a weighted mix of the tokens it may see, {C // h} numbers wide, and the output projection W_O writes "
            f"all {h} back into the {C}-wide stream, each head along directions of its own, where later layers and "
            f"the LM head can read them. The MLP works on each position *alone*: W₁ compares the stream with "
            f"{hidden} learned patterns, {f} keeps the ones that match, and W₂ adds a learned vector for each match, "
            "so what attention gathered becomes features the next layers (and the next character) use. Both add to "
            "the stream; neither overwrites it. ")


def block_text(walk: BlockWalk, query: int, trained_as: str) -> str:
    """Level 4's fold: what each part adds, the switches, ‖x‖ along the block, and what dropout did at ``query``."""
    means = [(point.name, float(point.norms.mean())) for point in walk.points]
    path = " → ".join(f"{name} {value:.2f}" for name, value in means)
    text = what_each_part_adds(walk)
    text += (f"Switches: {switches_text(walk)}. The mean length ‖x‖ of the tokens' vectors at each point: {path}. ")
    if walk.norm_order == "pre":
        text += ("In pre-norm the residual stream is never normalised inside the block: each part "
                 "reads a LayerNorm'd copy and *adds* its result, so the stream's length can grow from block to "
                 "block while every LayerNorm output stays on LayerNorm's own scale. ")
    else:
        text += ("In post-norm every residual add is followed by a LayerNorm, so after each part "
                 "the stream is set to LayerNorm's own scale, which its learned gain decides: longer or shorter than "
                 "the sum before it, whatever that sum's length. So the stream cannot build up from block to block, "
                 "as it can in pre-norm. ")
    if trained_as and (walk.norm_order, walk.causal, walk.activation) != ("pre", True, "gelu"):
        text += (f"These weights were trained as {trained_as}; a switch that differs runs the same weights another "
                 "way, so compare the numbers rather than expect good predictions. ")
    if not walk.causal:
        text += ("Encoder mode: with no mask every row of the weights fills in, so earlier tokens read later ones. ")
    hidden = walk.mlp_hidden
    zero = float((hidden == 0).float().mean())
    negative = float((hidden < 0).float().mean())
    text += (f"In the MLP's {hidden.size(1)} hidden units, {ACTIVATION_LABELS[walk.activation]} leaves "
             f"{zero:.0%} exactly 0 and {negative:.0%} negative (ReLU: none negative; GELU: small negatives pass). ")
    if walk.dropout_p:
        h = walk.weights.size(0)
        dropped = walk.dropped[:, query]  # (h, T) the weights the query's row lost, in every head
        seen = int(walk.visible[query].sum()) * h
        scale = 1.0 / (1.0 - walk.dropout_p)
        text += (f"Dropout (training mode) zeroed **{int(dropped.sum())} of the {seen}** weights the {h} heads give "
                 f"at position {query} (grey on the right) and multiplied every kept one by 1/(1−{walk.dropout_p:g}) "
                 f"= **{scale:.4f}**, so each row still sums to about 1 on average. The same seed drops the same "
                 "weights; another seed drops others.")
        kept = walk.weights[:, query] * ((~dropped) & walk.visible[query])  # (h, T) the kept weights, 0 elsewhere
        if kept.max() > 0:
            k, j = divmod(int(kept.argmax()), kept.size(1))  # the largest kept weight: the clearest example
            before, after = float(walk.weights[k, query, j]), float(walk.dropped_weights[k, query, j])
            text += (f" For example the largest kept weight, head {k} on key {j}: {before:.4f} × {scale:.4f} = "
                     f"{after:.4f}.")
    return text


# the stream points of a block as its guesses name them (block_walk's names: what the stream holds there)
BLOCK_POINTS = {"residual add 1": "+ attention", "residual add 2 (block output)": "+ MLP (the output)",
                "LayerNorm 1": "+ attention, LayerNorm 1", "LayerNorm 2 (block output)": "+ MLP, LayerNorm 2"}


def block_look_for(walk: BlockWalk, guesses: bool = False) -> str:
    """Level 4's one line, for the norm order switched on; ``guesses``: the view shows the query's guesses after each
    part (a checkpoint's block), and the line points at what attention and the MLP change there first."""
    changed = "where each head looks from the query; " + (
        "how attention, then the MLP, change its next-character guess; " if guesses else "")
    if walk.norm_order == "pre":
        # not "brings its copy back to scale", which reads as shrinking it: ‖x‖ can rise (2.6 to 9.3) through a norm
        return f"{changed}the stream's length ‖x‖ grows at each residual add; each LayerNorm sets its copy to a " \
               "length of its own, longer or shorter than the stream's."
    return f"{changed}after each residual add a LayerNorm sets the stream back to its own scale: it cannot build up."


# --------------------------------------------------------------------------------------------- 5. the model

def lens_formula(layers_num: int) -> str:
    blocks = "after the model's one block" if layers_num == 1 else f"after each of the {layers_num} blocks"
    return f"{blocks}: probabilities = softmax(LM head(final norm(residual stream)))"


def lens_text(lens: LogitLens, position: int, labels: Mapping[int, str] | Sequence[str], tokens: Sequence[str]) -> str:
    """How each block changes the prediction after position ``position``; ``labels[id]`` names a vocabulary id."""
    steps = []
    for stage in lens.stages:
        best = int(stage.top_ids[position, 0])
        steps.append(f"{stage.name}: `{labels[best]}` {float(stage.top_probs[position, 0]):.2f}")
    final = lens.stages[-1]
    choice = labels[int(final.top_ids[position, 0])]
    text = (f"After position **{position}** `{tokens[position]}` the model's top guess for the next character is "
            f"**`{choice}`** ({float(final.top_probs[position, 0]):.2f}). Reading the stream through the final "
            f"norm and the LM head after each part: {' → '.join(steps)}. ")
    if position + 1 < len(tokens):
        actual = float(final.next_probs[position])
        first = float(lens.stages[0].next_probs[position])
        text += (f"The character that really comes next, `{tokens[position + 1]}`, gets {first:.2f} from the "
                 f"embeddings alone and **{actual:.2f}** at the end. ")
    text += ("The embeddings alone can only guess from the current character (like a bigram table); "
             "each block adds context from earlier characters, and the guesses sharpen. The last block's "
             "reading is exactly the model's output.")
    return text


# The model level's Look-for line by the part of the map clicked: where that part is in the pictures, so Embeddings,
# Final norm, LM head and the probabilities each say their own in sight (what each part is also sits behind the fold)
LENS_LOOK_FOR_BY_PART = {
    EMBEDDINGS: "**Embeddings** are the left chart's first column: the token and position embeddings alone, read "
                "through the final norm and LM head, guess from the current character only.",
    FINAL_NORM: "**Final norm** ({norm}) comes before every reading in the left chart: each column is the "
                "stream after a part, normalised, then scored by the LM head.",
    LM_HEAD: "**LM head** turns the normalised stream into one logit per character; softmax makes them the "
             "probabilities coloured here, the model's own in the right chart.",
}


FINAL_NORMS = {False: "LayerNorm `ln_f`", True: "RMSNorm `norm`"}  # a GPT's, the Llama family's: class, state_dict name


def lens_look_for(part: str, rms_norm: bool = False) -> str:
    """The model level's Look-for line for the part of the map clicked (the probabilities, or none: LENS_LOOK_FOR);
    ``rms_norm``: the model's final norm is the Llama family's RMSNorm, not a GPT's LayerNorm."""
    return LENS_LOOK_FOR_BY_PART.get(part, LENS_LOOK_FOR).format(norm=FINAL_NORMS[rms_norm])
