"""The newline token ids of a converted GGUF's tokenizer, kept beside it.

Finding the tokens whose text holds a newline walks the whole vocabulary
(:func:`ragdesk.core.engine.generators.newline_token_ids`): for Gemma 3's 262,144 tokens that
is a large share of a one-shot ``ragdesk ask`` that would be paid at every start for a result
that only changes with the tokenizer. ragdesk's own converted folders (``<file>.gguf.hf/``,
written whole by the conversion) therefore keep the result with the stamp of the
``tokenizer.json`` it came from; any other folder (a user's model, which ragdesk does not
write into) is walked every time.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.core.atomic import write_json_atomic
from ragdesk.core.errors import RagdeskError
from ragdesk.core.safe_json import as_int, as_list, as_object, load_file_bounded

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)

NEWLINE_FILE = "ragdesk-newline-ids.json"


def _stamp(folder: Path, tokenizer: PreTrainedTokenizerBase) -> dict[str, int]:
    st = (folder / "tokenizer.json").stat()
    # len(): tokens added after loading would not be in the file the stamp describes
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "tokens": len(tokenizer)}


def _read(path: Path, stamp: dict[str, int]) -> frozenset[int] | None:
    try:
        kept = as_object(load_file_bounded(path))
        if as_object(kept.get("tokenizer")) != stamp:
            return None
        ids = frozenset(as_int(i) for i in as_list(kept.get("ids")))
    except (OSError, ValueError, TypeError, RagdeskError):  # absent or damaged: walk again
        return None
    return ids if all(0 <= i < stamp["tokens"] for i in ids) else None


def converted_newline_ids(folder: Path, tokenizer: PreTrainedTokenizerBase) -> frozenset[int]:
    """The newline token ids of ``tokenizer``, read from ``folder`` (a converted GGUF's folder,
    whose ``tokenizer.json`` it was read from) when kept there for this very file, else found
    and kept there for the next start."""
    from ragdesk.core.engine.generators import newline_token_ids

    try:
        stamp = _stamp(folder, tokenizer)
    except OSError:
        return newline_token_ids(tokenizer)
    path = folder / NEWLINE_FILE
    kept = _read(path, stamp)
    if kept is not None:
        return kept
    ids = newline_token_ids(tokenizer)
    try:
        write_json_atomic(path, {"tokenizer": stamp, "ids": sorted(ids)})
    except (OSError, RagdeskError) as exc:  # read-only or full: found again next time
        log.info("Not keeping the newline token ids in %s: %s", folder, exc)
    return ids
