"""A stage's matrices as files a learner can open elsewhere: labelled CSV and .npy (never pickle).

Owns the file formats and names (``step2_Q.csv``, ``step2_Q.npy``, ...). Writes into a folder it is given;
where that folder lives and how long it is kept belong to the caller (the tab puts it in Gradio's temp space).

    to_csv(torch.tensor([[1.0, 2.0]]), ["a"], ["x", "y"]) -> ',x,y\\na,1.0,2.0\\n'
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import torch

from playground.lens.walkthrough.trace import STAGE_KEYS, HeadTrace

_SPREADSHEET_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# never quoted: "5:," is "5:comma", in words anyone reads (a code point such as "5:U+002C" looks like a bug)
_SPELLED = {",": "comma", '"': "quote", "\n": "\\n", "\r": "\\r"}


def _safe_label(label: Any) -> str:
    """A label no CSV reader splits or quotes: the comma and the quote spelled as words, line breaks as \\n and \\r,
    and one that a spreadsheet would run as a formula behind an apostrophe."""
    text = "".join(_SPELLED.get(character, character) for character in str(label))
    return "'" + text if text.startswith(_SPREADSHEET_FORMULA_STARTS) else text


def to_csv(tensor: torch.Tensor, row_labels: list[str], col_labels: list[str]) -> str:
    """A labelled CSV of a 2-D tensor: header "", col labels; then one row per row label.

    Numbers use the shortest form that reads back exactly as float32, the .npy's type ("-inf" for masked scores);
    read as float64 they differ from the float32 values by less than half a float32 step (about 6e-8 of their
    size). Labels that a spreadsheet would run as a formula (starting with = + - @) get a leading apostrophe, and
    none is ever quoted (a comma token's is "comma"), so a line splits on every comma: ``numpy.loadtxt`` reads it.
    """
    if not isinstance(tensor, torch.Tensor) or tensor.dim() != 2:
        raise ValueError("to_csv needs a 2-D tensor")
    rows, cols = tensor.shape
    if len(row_labels) != rows or len(col_labels) != cols:
        raise ValueError(
            f"the tensor is {rows} × {cols} but got {len(row_labels)} row and {len(col_labels)} column labels"
        )
    values = tensor.detach().cpu().numpy()
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_NONE)  # raises if a label needed quotes
    writer.writerow(["", *(_safe_label(label) for label in col_labels)])
    for label, row in zip(row_labels, values):
        writer.writerow([_safe_label(label), *(str(value) for value in row)])
    return buffer.getvalue()


def to_npy_bytes(tensor: torch.Tensor) -> bytes:
    """The tensor as the bytes of a .npy file (numpy.load reads it back; no pickle)."""
    buffer = io.BytesIO()
    np.save(buffer, tensor.detach().cpu().numpy(), allow_pickle=False)
    return buffer.getvalue()


def write_stage(trace: HeadTrace, key: str, folder: Path) -> list[Path]:
    """Write stage ``key``'s matrices into an existing folder as CSV and .npy; returns the paths in pairs.

    Stage "qkv" (step 2) -> step2_Q.csv, step2_Q.npy, step2_K.csv, step2_K.npy, step2_V.csv, step2_V.npy; a name of
    several words joins them with "_" (step4_scores_not_scaled.csv). A CSV's token labels carry their position
    ("0:To", "1:be" ... "5:be"), so a repeated token's rows stay apart; feature columns keep theirs ("d0", "x3").
    """
    matrices = trace.matrices(key)  # refuses an unknown key
    number = STAGE_KEYS.index(key) + 1
    paths = []
    for matrix in matrices:
        stem = f"step{number}_{re.sub(r'[^A-Za-z0-9]+', '_', matrix.name).strip('_')}"
        rows = [f"{position}:{label}" for position, label in enumerate(matrix.row_labels)]
        columns = rows if matrix.col_labels == matrix.row_labels else matrix.col_labels
        csv_path, npy_path = folder / f"{stem}.csv", folder / f"{stem}.npy"
        csv_path.write_text(to_csv(matrix.values, rows, columns), encoding="utf-8")
        npy_path.write_bytes(to_npy_bytes(matrix.values))
        paths += [csv_path, npy_path]
    return paths
