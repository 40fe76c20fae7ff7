"""The server's stderr keeps each line to MAX_LOG_LINE characters (playground.server.logs)."""

import io

from playground.server.logs import CappedLines


def test_long_lines_are_cut_and_say_how_long_they_were_the_rest_pass_unchanged():
    target = io.StringIO()
    stream = CappedLines(target, limit=10)
    assert stream.write("short\n" + "x" * 25 + "\nend") == len("short\n" + "x" * 25 + "\nend")
    stream.write("\n")
    assert target.getvalue() == "short\nxxxxxxxxxx... (25 characters)\nend\n"
