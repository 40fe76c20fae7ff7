"""The model's anatomy, zoomed from one score to the whole model: the Model tab's core.

    levels.py    the maths of each zoom level: one_score, all_heads / textbook_heads (and forgotten_join, notebook
                 002's forgotten transpose as a what-if), block_walk (and block_lens: the guess at each point of a
                 block), logit_lens, and view_cost (what a view costs, from its shapes)
    book_models.py  the notebooks' own models (002's encoder layer, 003's two-layer transformer, 004's sliced
                 heads): their heads, what each head reads, their shapes beside the notebook's
    lessons.py   the level titles, the model map's parts and what to look for at each level (words only)

Level 2 (one head) is the Attention tab's walk-through (playground.lens.walkthrough), reused as it is. Knows nothing
about Gradio, Plotly or figures.

    from playground.lens.anatomy import block_walk, logit_lens
    block_walk(model.blocks[0], x, norm_order="post", causal=False, activation="relu", dropout_p=0.1, seed=1)
    logit_lens(model, ids).stages[-1].top_ids[0]     -> the model's 10 likeliest characters after the first
"""

from playground.lens.anatomy import lessons
from playground.lens.anatomy.book_models import BOOK_MODELS, BookModel, ShapeRow, book_model
from playground.lens.anatomy.levels import (
    ACTIVATIONS,
    BLOCK_TOP,
    FORGOTTEN_MAP_BYTES,
    LEVELS,
    NORM_ORDERS,
    TEXTBOOK_LAYERS,
    TEXTBOOK_SEED,
    TOP,
    AllHeads,
    BlockLens,
    BlockWalk,
    ForgottenJoin,
    LensStage,
    LogitLens,
    ScoreCell,
    StreamPoint,
    all_heads,
    block_input,
    block_lens,
    block_walk,
    check_token_ids,
    forgotten_join,
    logit_lens,
    one_score,
    position,
    textbook_block,
    textbook_heads,
    textbook_inputs,
    view_cost,
)

__all__ = [
    "BOOK_MODELS",
    "BookModel",
    "ShapeRow",
    "book_model",
    "ACTIVATIONS",
    "BLOCK_TOP",
    "FORGOTTEN_MAP_BYTES",
    "LEVELS",
    "NORM_ORDERS",
    "TEXTBOOK_LAYERS",
    "TEXTBOOK_SEED",
    "TOP",
    "AllHeads",
    "BlockLens",
    "BlockWalk",
    "ForgottenJoin",
    "LensStage",
    "LogitLens",
    "ScoreCell",
    "StreamPoint",
    "all_heads",
    "block_input",
    "block_lens",
    "block_walk",
    "check_token_ids",
    "forgotten_join",
    "lessons",
    "logit_lens",
    "one_score",
    "position",
    "textbook_block",
    "textbook_heads",
    "textbook_inputs",
    "view_cost",
]
