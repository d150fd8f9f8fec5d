"""A compact copy of a large ``tokenizer.json`` in a ragdesk-owned model folder, which the
``tokenizers`` library reads faster than the file itself.

Gemma 3's file (262,144 tokens, 514,906 merges, 33 MB as transformers writes it) takes the
Rust reader about a second, a quarter of a one-shot ``ragdesk ask``. Two things in its form
cost time and carry nothing: the indentation, and the merges written as pairs of strings
(``["a", "b"]``), which the reader parses more slowly than the older ``"a b"`` form it also
reads. The copy is that file without indentation, with its merges in the older form, where no
merge holds a space (else the older form cannot carry it) and where the copy reads back into
the same tokenizer (its serialization equal to the original's); it is made once, beside the
file, named after the file's size and modification time, so that a changed file is never
read through a stale copy.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from tokenizers import Tokenizer

from ragdesk.core.atomic import write_bytes_atomic

log = logging.getLogger(__name__)

# smaller files read in a small fraction of a second either way
MIN_BYTES = 4 << 20
_PREFIX = "ragdesk-compact-"


def compact_path(path: Path) -> Path:
    st = path.stat()
    return path.with_name(f"{_PREFIX}{path.stem}.{st.st_size}.{st.st_mtime_ns}.json")


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
    _keep_compact(tok, compact)
    return tok


def _keep_compact(tok: Tokenizer, compact: Path) -> None:
    original = tok.to_str()
    data = json.loads(original)
    model = data.get("model") or {}
    merges = model.get("merges")
    if model.get("type") != "BPE" or not isinstance(merges, list) or not all(
            isinstance(m, list) and len(m) == 2
            and all(isinstance(p, str) and p and " " not in p for p in m) for m in merges):
        return
    model["merges"] = [f"{a} {b}" for a, b in merges]
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    if Tokenizer.from_str(text).to_str() != original:
        log.info("%s does not read back as the same tokenizer; not kept", compact)
        return
    try:
        write_bytes_atomic(compact, text.encode("utf-8"))
    except OSError as exc:
        log.warning("Could not keep a compact tokenizer copy in %s: %s", compact, exc)
        return
    stem = compact.name.split(".")[0]
    for old in compact.parent.glob(f"{stem}.*.json"):
        if old != compact:
            old.unlink(missing_ok=True)
