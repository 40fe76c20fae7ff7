"""The Attention tab's "heads that do something recognisable": every head of the chosen checkpoint scored on probe
inputs (playground/lens/head_scores.py), as a ranked table; picking a row opens that head in the tab's stages.

Owns the table's rows, its cost check and the row -> (layer, head) step; the scoring is head_scores.py's.
"""

from __future__ import annotations

import gradio as gr

from playground import budget
from playground.checks import count
from playground.lens import head_scores
from playground.lens.walkthrough.lessons import STEP_TITLES
from playground.ui.common import AppContext, keep_on_refusal, scroll_to_js
from playground.ui.events import wire

HEADERS = ["pattern", "layer", "head", "score", "chance", "× chance"]
TOP_PER_PATTERN = 3
PATTERN_STEP = STEP_TITLES.index("6. Softmax weights")  # where a picked head opens: its attention pattern
EXPLAINED = (
    "Each head is run on random characters whose second half repeats the first. **previous token**: the weight "
    "from each position to the one before it. **induction**: from a repeated token to the token that followed its "
    "first copy (how a model continues a pattern it has seen once). **duplicate token**: to the earlier copy "
    "itself. **first token**: parked on position 0 when the head has nothing to do. *chance* is what a head "
    f"spreading its weight evenly would score; the table lists up to {TOP_PER_PATTERN} heads per pattern that score "
    f"at least {head_scores.RECOGNISABLE_RATIO:g}× chance. The scores are averages: on your own text a head may "
    "do its pattern at most positions and something else at a few (a previous-token head often looks at itself "
    "on punctuation). Pick a row to open that head above."
)


def score_table(ctx: AppContext, checkpoint: str) -> tuple[list[list], str]:
    """The best heads of each pattern in ``checkpoint``, as table rows, and a sentence on the strongest."""
    loaded = ctx.checkpoint(checkpoint)
    config = loaded.config
    sequences = head_scores.DEFAULT_SEQUENCES
    length = 2 * min(head_scores.MAX_REPEAT_LENGTH, config.context_size // 2)
    with ctx.budget.reserve(cost(config), hint="try again when the server is less busy"):
        scores = head_scores.score_heads(loaded.model, sequences=sequences)
    best = head_scores.best_per_pattern(scores, TOP_PER_PATTERN)
    rows = [[s.pattern, s.layer, s.head, round(s.score, 3), round(s.chance, 3),
             round(s.score / s.chance, 1) if s.chance else None] for s in best]
    top = scores[0]
    note = (f"{loaded.name}: {count(config.layers_num, 'layer')} × {count(config.heads_num, 'head')} scored on "
            f"{sequences} probes of {length} tokens. Strongest: layer {top.layer} head {top.head}, **{top.pattern}**, "
            f"{top.score:.2f} against {top.chance:.2f} by chance.")
    missing = head_scores.missing_patterns(scores)
    if missing:
        note += (f" No head reaches {head_scores.RECOGNISABLE_RATIO:g}× chance for {_listed(missing)}: this model "
                 f"has no such head, so the table lists none.")
    return rows, note


def cost(config) -> budget.Cost:
    """What scoring every head holds: one forward pass over the probes (DEFAULT_SEQUENCES rows of 2L tokens) with
    every layer's maps; the scores themselves are a few numbers a head."""
    length = 2 * min(head_scores.MAX_REPEAT_LENGTH, config.context_size // 2)
    return budget.inference_cost(parameters=config.parameter_count(), layers_num=config.layers_num,
                                 heads_num=config.heads_num, embedding_dim=config.embedding_dim,
                                 context_size=length, vocabulary_size=config.vocabulary_size,
                                 batch_size=head_scores.DEFAULT_SEQUENCES, attention_maps=True)


def _listed(names: list[str]) -> str:
    """['a'] -> '**a**'; ['a', 'b', 'c'] -> '**a**, **b** or **c**'."""
    bold = [f"**{name}**" for name in names]
    return bold[0] if len(bold) == 1 else ", ".join(bold[:-1]) + " or " + bold[-1]


def open_head(event: gr.SelectData) -> tuple:
    """A picked row -> the Attention tab's source, layer, head and step: the softmax weights, the pattern the row was
    ranked by (step 1, the input X, shows no pattern)."""
    row = event.row_value if event is not None else None
    if not row or len(row) < 3:
        return gr.skip(), gr.skip(), gr.skip(), gr.skip()
    return "trained checkpoint", int(row[1]), int(row[2]), STEP_TITLES[PATTERN_STEP]


def build(ctx: AppContext, source: gr.Radio, checkpoint: gr.Dropdown, layer: gr.Number, head: gr.Number,
          step: gr.Radio, shown_at: str) -> None:
    """The accordion; picking a row opens that head and scrolls the page back to the element ``shown_at`` (the
    stage's heading: on a phone the table sits far below it, and the pick seemed to do nothing)."""
    with gr.Accordion("Heads that do something recognisable", open=False):
        gr.Markdown(EXPLAINED)
        score = gr.Button("Score every head of this checkpoint")
        table = gr.Dataframe(headers=HEADERS, interactive=False, label="ranked heads", wrap=True,
                             elem_classes=["playground-table"])  # on a phone: scrolls sideways, headers whole
        note = gr.Markdown(label="head scores")
    keep_on_refusal(wire(score.click, score_table, ctx, checkpoint, [table, note], api_name="attention_head_scores",
                         api_visibility="private", **ctx.fast_lane), [table, note],
                    "attention_head_scores_refused")
    table.select(open_head, None, [source, layer, head, step], api_name="attention_open_head",
                 api_visibility="private").then(
        None, js=f"() => {scroll_to_js(shown_at)}",
        api_name="attention_show_opened_head", api_visibility="private")
