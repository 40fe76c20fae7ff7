"""One head step by step: the trace, where weights come from, what-ifs, export. The maths behind the Attention tab.

    trace.py     trace_head -> HeadTrace: the seven stages' tensors (maths only), q and k turned where rotary
    rotation.py  a rotary head's rotation stage (each pair's angle, q and k before and after) and the shift proof
    lessons.py   STEP_TITLES, each stage's formula and explanation, the what-ifs' sentences (words only)
    sources.py   HeadInputs from a checkpoint head (any family, through its named points), a seeded random head
                 or TEXTBOOK_PRESETS; which K/V head a query head shares (kv_sharing)
    whatifs.py   mask leaks, softmax saturation, mask order, one query's row; the notes each stage shows;
                 a model's head with W_K tied to W_Q or V = X, and the loss it costs
    export.py    a stage's matrices as CSV and .npy files
    text.py      typed text -> token IDs cut to the model's context

Knows nothing about Gradio, Plotly or figures. The multi-head family behind the Compare tab is
playground.attention, which does not import this package.

    from playground.lens.walkthrough import journey_preset, stages
    trace = journey_preset().trace(mask=True)     # trace.output[0] -> [-0.4519, 0.2216], the book's numbers
    stages(trace)[5].title -> "6. Softmax weights"
"""

from playground.lens.walkthrough.export import to_csv, to_npy_bytes, write_stage
from playground.lens.walkthrough.lessons import STEP_LABELS, STEP_TITLES, Stage, notes_at, stages
from playground.lens.walkthrough.rotation import (
    ROTATION_TEXT,
    RotationAt,
    ShiftProof,
    pair_angles,
    pair_labels,
    rotation_at,
    shift_proof,
)
from playground.lens.walkthrough.sources import (
    TEXTBOOK_PRESETS,
    HeadInputs,
    KVSharing,
    TextbookPreset,
    checkpoint_head_inputs,
    journey_preset,
    kv_sharing,
    lab_preset,
    random_head,
    trace_checkpoint_head,
)
from playground.lens.walkthrough.text import PreparedText, prepare_text
from playground.lens.walkthrough.trace import (
    DEFAULT_SWITCHES,
    STAGE_KEYS,
    SWITCHED_STAGES,
    HeadTrace,
    StageMatrix,
    stage_shapes,
    trace_head,
)
from playground.lens.walkthrough.whatifs import (
    HEAD_CHANGES,
    HeadChange,
    HeadChangeError,
    MaskLeak,
    Mix,
    QueryRow,
    Saturation,
    mask_leak,
    mask_order_difference,
    query_row,
    row_entropy,
    saturation,
    stage_notes,
    tied_query_key,
    value_is_input,
    whatif_traces,
)

__all__ = [
    "DEFAULT_SWITCHES",
    "HEAD_CHANGES",
    "ROTATION_TEXT",
    "STAGE_KEYS",
    "STEP_LABELS",
    "STEP_TITLES",
    "SWITCHED_STAGES",
    "TEXTBOOK_PRESETS",
    "HeadChange",
    "HeadChangeError",
    "HeadInputs",
    "HeadTrace",
    "KVSharing",
    "MaskLeak",
    "Mix",
    "PreparedText",
    "QueryRow",
    "RotationAt",
    "Saturation",
    "ShiftProof",
    "Stage",
    "StageMatrix",
    "TextbookPreset",
    "checkpoint_head_inputs",
    "journey_preset",
    "kv_sharing",
    "lab_preset",
    "mask_leak",
    "mask_order_difference",
    "notes_at",
    "pair_angles",
    "pair_labels",
    "prepare_text",
    "query_row",
    "random_head",
    "rotation_at",
    "row_entropy",
    "saturation",
    "shift_proof",
    "stage_notes",
    "stage_shapes",
    "stages",
    "to_csv",
    "to_npy_bytes",
    "trace_checkpoint_head",
    "tied_query_key",
    "trace_head",
    "value_is_input",
    "whatif_traces",
    "write_stage",
]
