"""A compact copy of a large ``tokenizer.json`` in a ragdesk-owned model folder, which the
``tokenizers`` library reads faster than the file itself.

Reading Gemma 3's file (262,144 tokens, 514,906 merges) is a large part of a one-shot
``ragdesk ask``'s start (docs/benchmarks.md). Two things in its form cost time and carry
nothing: the indentation, and the merges written as pairs of strings (``["a", "b"]``), which
the reader parses more slowly than the older ``"a b"`` form it also reads. The copy is that
file without indentation, with its merges in the older form, where no
merge holds a space (else the older form cannot carry it) and where the copy reads back into
the same tokenizer (its serialization equal to the original's); it is made once, beside the
file, named after the file's size and modification time, so that a changed file is never
read through a stale copy.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from tokenizers import Tokenizer

from ragdesk.core.atomic import remove_temp_files, write_bytes_atomic
from ragdesk.core.errors import DiskFullError
from ragdesk.core.file_stamps import file_stamp

log = logging.getLogger(__name__)

# smaller files are read quickly in either form
MIN_BYTES = 4 << 20
_PREFIX = "ragdesk-compact-"
# a temporary file older than this is a killed writer's
_STALE_TEMP_S = 3600


def compact_path(path: Path) -> Path:
    size, mtime_ns = file_stamp(path)
    return path.with_name(f"{_PREFIX}{path.stem}.{size}.{mtime_ns}.json")


def _not_kept_path(compact: Path) -> Path:
    """Beside a compact copy's name: the file that says it cannot be made (so that the
    seconds of trying are not spent again at every start)."""
    return compact.with_suffix(".none")


def read_tokenizer_file(path: Path, *, keep_compact: bool = False) -> Tokenizer:
    """The tokenizer of ``path`` (a ``tokenizer.json``); ``keep_compact``: the folder is
    ragdesk's own, so its compact copy is read where it exists and made where it does not."""
    if not keep_compact or path.stat().st_size < MIN_BYTES:
        return Tokenizer.from_file(str(path))
    compact = compact_path(path)
    if compact.is_file():
        try:
            return Tokenizer.from_file(str(compact))
        except Exception as exc:  # the Rust reader raises plain Exceptions
            log.warning("The compact tokenizer copy %s is unreadable (%s); making it again.",
                        compact, exc)
    tok = Tokenizer.from_file(str(path))
    if not _not_kept_path(compact).exists():
        remove_temp_files(path.parent, lambda name: name.startswith(_PREFIX),
                          min_age_s=_STALE_TEMP_S)
        _keep_compact(tok, compact)
    return tok


def _keep_compact(tok: Tokenizer, compact: Path) -> None:
    original = tok.to_str()
    text = _compact_text(original)
    if text is None or Tokenizer.from_str(text).to_str() != original:
        log.info("%s cannot be kept in the compact form; reading the file itself", compact)
        with contextlib.suppress(OSError):
            _not_kept_path(compact).touch()
        return
    try:
        write_bytes_atomic(compact, text.encode("utf-8"))
    except (OSError, DiskFullError) as exc:
        log.warning("Could not keep a compact tokenizer copy in %s: %s", compact, exc)
        return
    stem = compact.name.split(".")[0]
    for old in compact.parent.glob(f"{stem}.*"):
        if old != compact:
            old.unlink(missing_ok=True)


def _compact_text(original: str) -> str | None:
    """The serialization ``original`` without indentation and with its merges as "a b"
    strings; None where a merge cannot take that form."""
    data = json.loads(original)
    model = data.get("model") or {}
    merges = model.get("merges")
    if model.get("type") != "BPE" or not isinstance(merges, list) or not all(
            isinstance(m, list) and len(m) == 2
            and all(isinstance(p, str) and p and " " not in p for p in m) for m in merges):
        return None
    model["merges"] = [f"{a} {b}" for a, b in merges]
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
