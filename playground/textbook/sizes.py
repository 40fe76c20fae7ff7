"""The checks every textbook class shares: one error type, one rule for head sizes and one for lengths.

    check_heads(64, 4) -> 16            (each head gets 64 // 4 features)
    check_heads(10, 4) -> TextbookError "d_model (10) must be divisible by num_heads (4)"
"""

from __future__ import annotations


class TextbookError(ValueError):
    """A textbook class was built or called with sizes it cannot take; the message says which and why."""


def check_positive(**sizes: int) -> None:
    """Each named size is a positive integer: check_positive(d_model=0) -> TextbookError naming d_model."""
    for label, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise TextbookError(f"{label} must be a positive integer, got {value!r}")


def check_dropout(dropout: float) -> None:
    if not 0.0 <= dropout < 1.0:
        raise TextbookError(f"dropout must be in [0, 1), got {dropout}")


def check_heads(d_model: int, num_heads: int, width_name: str = "d_model", heads_name: str = "num_heads") -> int:
    """The width of one head, d_model // num_heads, once both are positive and num_heads divides d_model."""
    check_positive(**{width_name: d_model, heads_name: num_heads})
    if d_model % num_heads != 0:
        raise TextbookError(f"{width_name} ({d_model}) must be divisible by {heads_name} ({num_heads})")
    return d_model // num_heads


def check_length(tokens: int, max_len: int, max_name: str = "max_len") -> None:
    """A sequence of ``tokens`` fits the model's position table of ``max_len`` rows."""
    if tokens > max_len:
        raise TextbookError(f"{tokens} tokens exceed {max_name} ({max_len}): pass at most {max_len} tokens")
