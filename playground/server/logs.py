"""What the server's log keeps of a line: at most MAX_LOG_LINE characters (app.py wraps stderr in CappedLines).

A traceback's last line quotes the value that raised it, and a visitor's value may be megabytes long; the
handlers' own refusals are one short line each (common.friendly, events.wire), and this bounds everything else
written to stderr, so a public server's log grows by at most MAX_LOG_LINE characters a line.

    stream = CappedLines(sys.stderr, limit=20)
    stream.write("x" * 50 + "\\n")   # writes "xxxxxxxxxxxxxxxxxxxx... (50 characters)\\n"
"""

from __future__ import annotations

import io
from typing import TextIO

MAX_LOG_LINE = 4_000  # characters: a traceback's lines and our own log lines are far shorter


class CappedLines(io.TextIOBase):
    """A text stream that passes each line written to ``stream`` cut to ``limit`` characters (a line is what one
    write call carries between newlines: print and traceback write a line at a time)."""

    def __init__(self, stream: TextIO, limit: int = MAX_LOG_LINE):
        super().__init__()
        self.stream, self.limit = stream, limit

    def write(self, text: str) -> int:
        lines = text.split("\n")
        cut = [line if len(line) <= self.limit else f"{line[:self.limit]}... ({len(line):,} characters)"
               for line in lines]
        self.stream.write("\n".join(cut))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self.stream, "encoding", "utf-8")
