"""Helpers shared by the subcommands."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext  # SQLAlchemy: not needed for --version / --help

Handler = Callable[[argparse.Namespace, "AppContext"], int]


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true",
                        help="print the result as JSON on stdout (errors too: "
                             '{"error": ..., "hint": ..., "exit": N})')


def print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


# What a terminal acts on instead of showing: C0 controls (ESC starts the CSI/OSC sequences
# that recolour, move the cursor, retitle the window or write the clipboard; \r and \n redraw
# lines), DEL, C1 controls (0x9b is a one-byte CSI), the Unicode line/paragraph separators and
# bidirectional overrides (which reorder what follows). Lone surrogates (argv bytes that were
# not UTF-8) cannot be written to a UTF-8 stdout at all.
_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"
                     r"\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def terminal_safe(text: object, *, newlines: bool = False) -> str:
    """``text`` for a terminal: every control character shown as an escape (``\\x1b``,
    ``\\n``, ``\\u202e``) instead of being acted on.

    Human (non-JSON) output passes everything that comes from snapshots, model folders,
    names or answers through here: a passage title holding ``\\x1b]0;evil\\x07`` must not
    retitle the window, and a snapshot name holding a newline must not draw a fake table
    row. ``newlines=True`` keeps ``\\n`` and ``\\t`` for multi-line text (answers,
    error messages).
    """
    def escape(m: re.Match[str]) -> str:
        ch = m.group()
        if newlines and ch in "\n\t":
            return ch
        if ch in _NAMED:
            return _NAMED[ch]
        return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"

    return _UNSAFE.sub(escape, str(text))


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    headers = [terminal_safe(h) for h in headers]
    rows = [[terminal_safe(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*headers))
    for row in rows:
        print(fmt.format(*row))
