"""Text for a terminal: control characters shown as escapes instead of acted on."""

from __future__ import annotations

import re

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
