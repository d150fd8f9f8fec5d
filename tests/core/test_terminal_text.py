"""A file's name on a terminal: the progress line and the log show its control characters
as escapes, never act on them (retitle the window, recolour, forge a line)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from ragdesk.core.logging_setup import _SafeFormatter
from ragdesk.core.progress import ProgressUpdate, terminal_printer

NAME = "e\x1b]0;PWNED\x07sc\x1b[31m.txt"


def test_the_progress_line_escapes_a_name() -> None:
    out = io.StringIO()
    terminal_printer(out, min_interval=0.0)(
        ProgressUpdate(1, 1, f"reading documents: {NAME}", None, None))
    line = out.getvalue()
    assert "\x1b" not in line and "\x07" not in line
    assert "e\\x1b]0;PWNED\\x07sc\\x1b[31m.txt" in line


def test_a_log_line_cannot_be_forged_by_a_name(tmp_path: Path) -> None:
    record = logging.LogRecord("ragdesk.x", logging.WARNING, __file__, 1, "skipping %s",
                               ("nl2\n2026-12-05 WARNING ragdesk: forged",), None)
    text = _SafeFormatter("%(levelname)s %(name)s: %(message)s").format(record)
    assert text.count("\n") == 0 and "nl2\\n2026-12-05" in text
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        failed = logging.LogRecord("ragdesk.x", logging.ERROR, __file__, 1, "failed %s",
                                   (NAME,), sys.exc_info())
    text = _SafeFormatter("%(message)s").format(failed)
    assert text.startswith("failed e\\x1b]0;PWNED") and "Traceback" in text
    assert "\n" in text  # the traceback keeps its lines
