"""The forgotten transpose of notebook 002, as numbers a learner can inspect: right and wrong joins, how far
apart they are, and where each feature of the wrong one was read from. The maths only; no words, no UI.

The heads' outputs are (B, h, T, d). Joined right, token t's row is head 0's features of token t, then head 1's,
and so on: output slot s of token t is (head s // d, token t, feature s % d). Joined the notebook's way,
``.contiguous().view(B, T, h·d)`` reads the (h, T, d) block in memory order, so row t takes the flat range
[t·h·d, (t+1)·h·d) of it: its i-th block of d slots is head (t·h + i) // T's row for token (t·h + i) % T.

    h 2, T 4, d 3:  wrong row 0 = head 0 token 0 | head 0 token 1     (right: head 0 token 0 | head 1 token 0)
                    wrong row 3 = head 1 token 2 | head 1 token 3     (right: head 0 token 3 | head 1 token 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch

from playground.textbook.notebook_002 import combine_heads
from playground.textbook.sizes import TextbookError


class FeatureSource(NamedTuple):
    """Where one output feature was read from in the heads' outputs (B, h, T, d)."""

    head: int
    token: int
    feature: int


@dataclass(frozen=True)
class RowMix:
    """What one token's joined row holds, head block by head block (block i = slots [i·d, (i+1)·d))."""

    token: int  # the output row t
    blocks: tuple[tuple[int, int], ...]  # per block i, the (head, token) the wrong join read there, all d features
    right_blocks: tuple[tuple[int, int], ...]  # per block i, (i, t): what the right join reads
    source_tokens: tuple[int, ...]  # the tokens the wrong row mixes, sorted
    wrong_blocks: int  # how many blocks differ from the right join's

    @property
    def reads_only_its_token(self) -> bool:
        return self.source_tokens == (self.token,)


@dataclass(frozen=True)
class ForgottenTranspose:
    """Notebook 002's join of the heads next to the right one, for one (B, h, T, d) tensor of heads' outputs."""

    right: torch.Tensor  # (B, T, h·d): transpose, then view
    wrong: torch.Tensor  # (B, T, h·d): view straight from (B, h, T, d), the notebook's line
    max_abs_difference: float  # max |wrong - right| over every element
    wrong_source: torch.Tensor  # (T, h·d, 3) long: for output (t, s), the (head, token, feature) the wrong join read
    right_source: torch.Tensor  # (T, h·d, 3) long: (s // d, t, s % d)
    num_heads: int
    head_size: int

    @property
    def num_tokens(self) -> int:
        return self.wrong_source.shape[0]

    def source(self, token: int, slot: int, forgot: bool = True) -> FeatureSource:
        """Where output feature ``slot`` of ``token`` came from, in the wrong join (default) or the right one."""
        table = self.wrong_source if forgot else self.right_source
        if not (0 <= token < self.num_tokens and 0 <= slot < table.shape[1]):
            raise TextbookError(f"(token {token}, slot {slot}) is outside the output: {self.num_tokens} tokens "
                                f"of {table.shape[1]} features")
        return FeatureSource(*(int(v) for v in table[token, slot]))

    def row(self, token: int) -> RowMix:
        """Which (head, token) pieces row ``token`` of the wrong join holds, block by block."""
        if not 0 <= token < self.num_tokens:
            raise TextbookError(f"token {token} is outside 0..{self.num_tokens - 1}")
        firsts = self.wrong_source[token, :: self.head_size, :2]  # (h, 2): each block's first slot, head and token
        blocks = tuple((int(head), int(source)) for head, source in firsts)
        right = tuple((i, token) for i in range(self.num_heads))
        return RowMix(
            token=token,
            blocks=blocks,
            right_blocks=right,
            source_tokens=tuple(sorted({source for _, source in blocks})),
            wrong_blocks=sum(a != b for a, b in zip(blocks, right)),
        )

    def rows(self) -> tuple[RowMix, ...]:
        return tuple(self.row(t) for t in range(self.num_tokens))


def _sources(num_heads: int, num_tokens: int, head_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(wrong, right) source tables, each (T, h·d, 3): output (t, s) read (head, token, feature)."""
    width = num_heads * head_size
    t = torch.arange(num_tokens).view(-1, 1).expand(num_tokens, width)  # (T, h·d)
    s = torch.arange(width).view(1, -1).expand(num_tokens, width)
    flat = t * width + s  # position in the (h, T, d) block that the wrong view reads
    wrong = torch.stack((flat // (num_tokens * head_size), (flat // head_size) % num_tokens, flat % head_size), -1)
    right = torch.stack((s // head_size, t, s % head_size), dim=-1)
    return wrong, right


def forgotten_transpose(heads_output: torch.Tensor) -> ForgottenTranspose:
    """Join ``heads_output`` (B, h, T, d) both ways and map the wrong join's features back to their sources."""
    if not isinstance(heads_output, torch.Tensor) or heads_output.dim() != 4:
        shape = tuple(heads_output.shape) if isinstance(heads_output, torch.Tensor) else type(heads_output).__name__
        raise TextbookError(f"heads_output must be a (B, h, T, d) tensor, got {shape}")
    if heads_output.numel() == 0:
        raise TextbookError(f"heads_output is empty: shape {tuple(heads_output.shape)}")
    _, num_heads, num_tokens, head_size = heads_output.shape
    heads_output = heads_output.detach()
    right = combine_heads(heads_output)  # (B, T, h·d)
    wrong = combine_heads(heads_output, forget_transpose=True)
    wrong_source, right_source = _sources(num_heads, num_tokens, head_size)
    return ForgottenTranspose(
        right=right,
        wrong=wrong,
        max_abs_difference=float((wrong - right).abs().max()),
        wrong_source=wrong_source,
        right_source=right_source,
        num_heads=num_heads,
        head_size=head_size,
    )
