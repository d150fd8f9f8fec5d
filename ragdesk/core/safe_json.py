"""The one reading layer for JSON and JSONL that comes from outside: bounded depth, size and
line length, and text that can be written back out (no lone surrogates).

``json.loads`` recurses once per nesting level, so a line of 100k ``[`` ends in a
RecursionError; a stream without a newline (``/dev/zero``) is read into memory whole by a
plain ``for line in fh``; and ``"\\ud800"`` parses into a string that every later
``encode("utf-8")`` (SQLite, a file, a socket) refuses. Each of these is refused here, as a
:class:`BadInputError` naming the file and line, before it reaches the rest of ragdesk.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ragdesk.core.errors import BadInputError

MAX_DEPTH = 64
MAX_BYTES = 64 << 20  # one JSON document read whole
MAX_LINE_BYTES = 1 << 20  # one JSONL line (questions, requests)
MAX_PASSAGE_LINE_BYTES = 64 << 20  # one JSONL document line: a whole article may be long

# A string literal (escapes skipped), or one bracket: brackets inside strings do not nest.
# A string never closed runs to the end of the text in one match: otherwise the search
# would start again at every later quote and scan to the end each time (quadratic).
_TOKENS = re.compile(r'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(?:"|\Z)|[\[\]{}]', re.DOTALL)
# Only an escape can put a lone surrogate into a parsed string from strictly decoded text.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")

def as_int(value: object) -> int:
    """``int(value)`` for a value read from JSON, whose type only a check can tell: a number
    or a numeric string converts as ``int`` converts it; anything else raises ``TypeError``,
    as ``int`` would."""
    if isinstance(value, (int, float, str)):
        return int(value)
    raise TypeError(f"int() argument must be a string or a number, not {type(value).__name__!r}")




def as_float(value: object) -> float:
    """``float(value)`` for a value read from JSON: a number or a numeric string converts as
    ``float`` converts it; anything else raises ``TypeError``, as ``float`` would."""
    if isinstance(value, (int, float, str)):
        return float(value)
    raise TypeError(f"float() argument must be a string or a real number, not "
                    f"{type(value).__name__!r}")

def as_str(value: object) -> str:
    """A value read from JSON that must be a string; anything else raises ``TypeError``."""
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a string, not {type(value).__name__!r}")


def as_opt_str(value: object) -> str | None:
    """A value read from JSON that must be a string or null; else ``TypeError``."""
    return None if value is None else as_str(value)

def as_object(value: object) -> dict[str, object]:
    """A value read from JSON that must be an object (a dict, whose keys JSON makes
    strings); anything else raises ``TypeError``."""
    if isinstance(value, dict):
        return value
    raise TypeError(f"expected a JSON object, not {type(value).__name__!r}")


def as_list(value: object) -> list[object]:
    """A value read from JSON that must be an array; anything else raises ``TypeError``."""
    if isinstance(value, list):
        return value
    raise TypeError(f"expected a JSON array, not {type(value).__name__!r}")


def as_opt_float(value: object) -> float | None:
    """A value read from JSON that must be a number or null, kept as it is (an ``int``
    stays an ``int``); anything else raises ``TypeError``."""
    if value is None or isinstance(value, (int, float)):
        return value
    raise TypeError(f"expected a number or null, not {type(value).__name__!r}")


def check_depth(text: str, max_depth: int = MAX_DEPTH, *, path: Path | str | None = None,
                line: int | None = None, hint: str | None = None) -> None:
    """Refuse JSON text nested deeper than ``max_depth`` without parsing it."""
    if text.count("[") + text.count("{") <= max_depth:
        return  # cannot nest deeper than it has brackets: the common case costs two counts
    depth = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > max_depth:
                raise BadInputError(
                    f"is nested more than {max_depth} levels deep (at character "
                    f"{m.start() + 1}); ragdesk does not read JSON this deep.",
                    path=path, line=line, hint=hint)
        elif c in "]}":
            depth -= 1


def check_text(value: str, *, path: Path | str | None = None, line: int | None = None,
               what: str = "text") -> str:
    """``value`` if it encodes as UTF-8; a lone surrogate (which SQLite, files and sockets
    all refuse later, far from here) is refused with its position."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadInputError(
            f"the {what} holds an unpaired surrogate (U+{ord(value[exc.start]):04X} at "
            f"character {exc.start + 1}), which is not text.",
            hint="Remove or replace it; only valid Unicode text can be stored.",
            path=path, line=line) from None
    return value


def check_strings(obj: object, path: Path | str | None = None, line: int | None = None) -> None:
    """Refuse a parsed JSON value holding a string (or key) that is not text."""
    # Iterative: the depth is bounded already, but this walks every value of a large line.
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, str):
            check_text(o, path=path, line=line, what="JSON text")
        elif isinstance(o, dict):
            for k, v in o.items():
                check_text(k, path=path, line=line, what="JSON text")
                stack.append(v)
        elif isinstance(o, (list, tuple)):
            stack.extend(o)


def loads_bounded(data: str | bytes, *, max_depth: int = MAX_DEPTH,
                  max_bytes: int = MAX_BYTES, path: Path | str | None = None,
                  line: int | None = None, hint: str | None = None) -> Any:
    """``json.loads`` for untrusted input: at most ``max_bytes`` (characters for text), at
    most ``max_depth`` levels, UTF-8 (a BOM is allowed), no lone surrogates anywhere, and
    every failure a :class:`BadInputError` (``hint`` says what the input should look like)."""
    if len(data) > max_bytes:
        raise BadInputError(f"is larger than the {max_bytes:,} bytes ragdesk reads as one "
                            "JSON document.", hint=hint, path=path, line=line)
    if isinstance(data, bytes):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadInputError(f"is not UTF-8 text (byte {exc.start + 1}).", hint=hint,
                                path=path, line=line) from None
    else:
        text = check_text(data, path=path, line=line)
    text = text.removeprefix("\ufeff")
    check_depth(text, max_depth, path=path, line=line, hint=hint)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"line {exc.lineno}, column {exc.colno}" if exc.lineno > 1 else f"column {exc.colno}"
        raise BadInputError(f"is not valid JSON ({exc.msg} at {at}).", hint=hint,
                            path=path, line=line) from None
    except RecursionError:  # a smaller stack than max_depth needs: still not a bug
        raise BadInputError("is nested too deeply to read.", hint=hint,
                            path=path, line=line) from None
    except ValueError:  # an integer longer than Python converts (sys.int_max_str_digits)
        raise BadInputError("holds a number with more digits than ragdesk reads.", hint=hint,
                            path=path, line=line) from None
    if _SURROGATE_ESCAPE.search(text):
        check_strings(obj, path, line)
    return obj


def read_bounded(path: str | os.PathLike[str], max_bytes: int = MAX_BYTES) -> bytes:
    """A whole file, refused (before more than ``max_bytes`` + 1 are read) when it is larger:
    a device or a pipe has no size to check first."""
    p = Path(path)
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except FileNotFoundError as exc:
        raise BadInputError("no such file.", path=p) from exc
    except IsADirectoryError as exc:
        raise BadInputError("is a folder, not a file.", path=p) from exc
    except OSError as exc:
        raise BadInputError(f"cannot be read: {exc.strerror or exc}.", path=p) from exc
    if len(data) > max_bytes:
        raise BadInputError(f"is larger than the {max_bytes:,} bytes ragdesk reads here.",
                            path=p)
    return data


def load_file_bounded(path: str | os.PathLike[str], *, max_depth: int = MAX_DEPTH,
                      max_bytes: int = MAX_BYTES, hint: str | None = None) -> Any:
    """A JSON file read with :func:`read_bounded` and parsed with :func:`loads_bounded`."""
    return loads_bounded(read_bounded(path, max_bytes), max_depth=max_depth,
                         max_bytes=max_bytes, path=Path(path), hint=hint)


def iter_lines_bounded(fh: IO[bytes], *, max_line_bytes: int = MAX_LINE_BYTES,
                       path: Path | str | None = None, start: int = 1
                       ) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, the line's bytes with its newline) of a binary stream, each
    line read with a bound: a line longer than ``max_line_bytes`` (an endless stream without
    a newline, such as ``/dev/zero``) is refused once that much is read, never held whole."""
    lineno = start - 1
    while True:
        data = fh.readline(max_line_bytes + 1)
        if not data:
            return
        lineno += 1
        if len(data) > max_line_bytes and not data.endswith(b"\n"):
            raise BadInputError(
                f"is longer than {max_line_bytes:,} bytes with no line break; ragdesk reads "
                "one JSON value per line (is this the right file?).", path=path, line=lineno)
        yield lineno, data


def read_model_json(path: Path) -> Any:
    """A model folder's JSON file as transformers' plain ``json.load`` reads it, bounded: None
    where it is missing, unreadable, too large or too deep, or starts with a byte-order mark
    (which ``json.load`` refuses), so that the caller falls back to transformers' reading."""
    try:
        raw = read_bounded(path)
        return None if raw.startswith(b"\xef\xbb\xbf") else loads_bounded(raw, path=path)
    except BadInputError:
        return None
