"""The lean decoder's bfloat16 and int8 copies of a converted model's weights, kept in a file
beside the model, so that the next process maps them instead of making them again.

Making these copies was a large part of a one-shot ``ragdesk ask``'s start (see "Weight
copies and a compact tokenizer kept on disk" in docs/benchmarks.md); mapped from the page
cache they cost almost nothing, and the pages a question never needs (the bfloat16 output
layer, which only products of many rows read) are never read. The file is derived data: it
names the weights file it was made from (size and modification time), the torch version and
its own format, and a file that does not match, cannot be read or is not laid out as the
kernels need is ignored (the copies are made again and the file rewritten). Packs whose copies
would exceed :data:`MAX_BYTES` keep making them at every start rather than add that much disk
use; of those, whole kinds of copies are kept while they fit, in
:func:`~ragdesk.core.engine.lean_parts.keeping_order` (those found by running the model, then
the int8 rows, then the bfloat16 weights).

Every tensor starts on a 64-byte boundary of the mapped file: ``torch._weight_int8pack_mm``
crashes (segmentation fault) on an int8 weight that is not aligned so, and safetensors' own
writer packs tensors back to back after a header of any length. So the file is written here,
in the safetensors format (read back by safetensors, which checks it), with padding tensors
between the copies and spaces at the end of the header.
"""

from __future__ import annotations

import json
import logging
import shutil
import struct
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ragdesk.core.atomic import remove_temp_files, write_atomic
from ragdesk.core.errors import DiskFullError
from ragdesk.core.file_stamps import file_stamp
from ragdesk.core.models.mapped_weights import WEIGHTS_FILE

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

COPIES_FILE = "ragdesk-weight-copies.safetensors"
FORMAT = "1"
# the starter's copies fit (bfloat16, int8 and 4-bit copies of 270M weights, 0.8 GB); of the
# 1.5B reader's (about 4.2 GB, more than half its converted weights' size again) the 4-bit
# and int8 ones do (1.14 GB), the slowest part of its start to make
MAX_BYTES = 2 << 30
# room the disk keeps after the copies (a cache must not be what fills it)
_MIN_FREE_AFTER = 2 << 30
# a temporary file older than this is a killed writer's
_STALE_TEMP_S = 3600
ALIGN = 64
_PAD = "__pad__."
# folder -> the thread writing its copies
_writing: dict[Path, threading.Thread] = {}
_writing_lock = threading.Lock()
_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "I8": "int8",
           "U8": "uint8", "I32": "int32", "I64": "int64"}


def weights_stamp(folder: Path) -> dict[str, str]:
    """What copies of ``folder``'s weights, as the file is now, are stored under. Taken before
    the weights are mapped (and checked after), so that copies are never filed under another
    version of the file than the one they were read from or made of."""
    import torch

    from ragdesk._version import __version__

    size, mtime_ns = file_stamp(folder / WEIGHTS_FILE)
    # ragdesk's version too: a release may change how a copy is made (the quantization, the
    # order of fused weights) without changing its shape
    return {"ragdesk_weight_copies": FORMAT, "ragdesk": __version__,
            "weights_size": str(size), "weights_mtime_ns": str(mtime_ns),
            "torch": torch.__version__}


def read_copies(folder: Path, stamp: Mapping[str, str]) -> dict[str, torch.Tensor] | None:
    """The copies stored beside ``folder``'s weights under ``stamp``, mapped (nothing read
    until used); None where there is no such file that can be used as it is."""
    remove_temp_files(folder, lambda name: name == COPIES_FILE, min_age_s=_STALE_TEMP_S)
    path = folder / COPIES_FILE
    if not path.is_file():
        return None
    try:
        from safetensors import safe_open

        with safe_open(str(path), "pt") as fh:
            if fh.metadata() != dict(stamp):
                log.info("%s was made from other weights or another version; not used", path)
                return None
            copies = {k: fh.get_tensor(k) for k in fh.keys()  # noqa: SIM118
                      if not k.startswith(_PAD)}
    except Exception as exc:  # the Rust reader raises its own error types for damaged files
        log.warning("The stored weight copies %s cannot be read (%s); making them again.",
                    path, exc)
        return None
    if any(t.data_ptr() % ALIGN for t in copies.values()):
        log.warning("The stored weight copies %s are not aligned; making them again.", path)
        return None
    return copies


def keep_copies(folder: Path, copies: Mapping[str, torch.Tensor],
                stamp: Mapping[str, str]) -> None:
    """:func:`write_copies` on a thread of its own, so that the answer that made the copies
    need not wait for the disk (a one-shot ``ask`` prints its answer, then finishes the write
    before it exits). One write per folder at a time."""
    with _writing_lock:
        if folder in _writing:
            return
        thread = threading.Thread(target=_write_then_forget,
                                  args=(folder, dict(copies), dict(stamp)),
                                  name="ragdesk-weight-copies")
        _writing[folder] = thread
        try:
            thread.start()
        except RuntimeError:  # no thread to be had (interpreter shutting down)
            del _writing[folder]


def wait_for_writes(timeout_s: float | None = None) -> None:
    """Wait for the writes :func:`keep_copies` started."""
    with _writing_lock:
        threads = list(_writing.values())
    for thread in threads:
        thread.join(timeout_s)


def _write_then_forget(folder: Path, copies: Mapping[str, torch.Tensor],
                       stamp: Mapping[str, str]) -> None:
    try:
        write_copies(folder, copies, stamp)
    except Exception:  # a cache: whatever went wrong, the answer stands and says nothing
        log.warning("Could not store the weight copies in %s", folder, exc_info=True)
    finally:
        with _writing_lock:
            _writing.pop(folder, None)


def write_copies(folder: Path, copies: Mapping[str, torch.Tensor],
                 stamp: Mapping[str, str]) -> bool:
    """Store ``copies`` beside ``folder``'s weights under ``stamp`` (atomically); where they
    are too large to keep whole, the kinds that fit (:func:`_what_fits`) unless the file holds
    them already. False where nothing was stored: nothing fits or all that fits is stored,
    the disk has too little room left, the weights are no longer the version ``stamp`` names,
    or the file cannot be written (logged; nothing half-written stays)."""
    size = sum(_nbytes(t) for t in copies.values())
    path = folder / COPIES_FILE
    if size > MAX_BYTES:
        copies = _what_fits(copies)
        part = sum(_nbytes(t) for t in copies.values())
        stored = _stored_already(folder, copies, stamp)
        what = (f"; the {part} bytes that fit are stored already" if stored
                else f"; only the {part} bytes that fit") if part else ""
        log.info("Not storing %d bytes of weight copies in %s (at most %d)%s", size, path,
                 MAX_BYTES, what)
        if stored:
            return False
        size = part
    if not copies:  # nothing fits
        return False
    try:
        free = shutil.disk_usage(folder).free
        if free < size + _MIN_FREE_AFTER:
            log.info("Not storing the weight copies in %s: %d bytes free", path, free)
            return False
        if weights_stamp(folder) != dict(stamp):
            log.info("%s changed since it was read; its copies are not stored", folder)
            return False
        remove_temp_files(folder, lambda name: name == COPIES_FILE, min_age_s=_STALE_TEMP_S)
        header, parts = _layout(copies, dict(stamp))
        write_atomic(path, lambda fh: _write(fh, header, parts))
    except (OSError, KeyError, DiskFullError) as exc:  # KeyError: a type with no name here
        log.warning("Could not store the weight copies in %s (%s); they are made again at "
                    "the next start.", path, exc)
        return False
    return True


def _what_fits(copies: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Whole kinds of ``copies``, in :func:`keeping_order`, while they fit in
    :data:`MAX_BYTES`."""
    from ragdesk.core.engine.lean_parts import keeping_order

    kept: dict[str, torch.Tensor] = {}
    for order in sorted({keeping_order(name) for name in copies}):
        kind = {name: t for name, t in copies.items() if keeping_order(name) == order}
        if sum(_nbytes(t) for t in (*kept.values(), *kind.values())) > MAX_BYTES:
            break
        kept.update(kind)
    return kept


def _stored_already(folder: Path, copies: Mapping[str, torch.Tensor],
                    stamp: Mapping[str, str]) -> bool:
    """Whether ``folder``'s file holds every one of ``copies`` (the same shape and type)
    under ``stamp``: a pack whose copies are kept in part misses the rest at every start, and
    must not rewrite the part each time."""
    stored = read_copies(folder, stamp) or {}
    return bool(copies) and all(
        (t := stored.get(name)) is not None and t.shape == c.shape and t.dtype == c.dtype
        for name, c in copies.items())


def _nbytes(t: torch.Tensor) -> int:
    return int(t.numel()) * int(t.element_size())


def _layout(copies: Mapping[str, torch.Tensor], metadata: dict[str, str]
            ) -> tuple[bytes, list[torch.Tensor]]:
    """The header (its length padded so that the data start on a multiple of :data:`ALIGN`)
    and the tensors to write after it, padding tensors included, each aligned."""
    import torch

    names = {v: k for k, v in _DTYPES.items()}
    entries: dict[str, object] = {"__metadata__": metadata}
    parts: list[torch.Tensor] = []
    offset = 0
    for i, (name, tensor) in enumerate(sorted(copies.items())):
        gap = -offset % ALIGN
        if gap:
            entries[f"{_PAD}{i}"] = {"dtype": "U8", "shape": [gap],
                                     "data_offsets": [offset, offset + gap]}
            parts.append(torch.zeros(gap, dtype=torch.uint8))
            offset += gap
        t = tensor.detach().contiguous()
        entries[name] = {"dtype": names[str(t.dtype).removeprefix("torch.")],
                         "shape": list(t.shape), "data_offsets": [offset, offset + _nbytes(t)]}
        parts.append(t)
        offset += _nbytes(t)
    header = json.dumps(entries, separators=(",", ":")).encode("utf-8")
    header += b" " * (-(8 + len(header)) % ALIGN)
    return header, parts


def _write(fh: BinaryIO, header: bytes, parts: list[torch.Tensor]) -> None:
    import torch

    fh.write(struct.pack("<Q", len(header)))
    fh.write(header)
    for t in parts:
        if t.numel():
            fh.write(t.reshape(-1).view(torch.uint8).numpy().data)
