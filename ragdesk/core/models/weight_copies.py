"""The lean decoder's bfloat16 and int8 copies of a converted model's weights, kept in a file
beside the model, so that the next process maps them instead of making them again.

A one-shot ``ragdesk ask`` with the starter pack spent about half a second making these
copies (the output layer's int8 rows alone a quarter of one); mapped from the page cache they
cost almost nothing, and the pages a question never needs (the bfloat16 output layer, which
only products of many rows read) are never read. The file is derived data: it names the
weights file it was made from (size and modification time), the torch version and its own
format, and a file that does not match, cannot be read or is not laid out as the kernels need
is ignored (the copies are made again and the file rewritten). Packs whose copies would exceed
:data:`MAX_BYTES` keep making them at every start rather than double their disk use.

Every tensor starts on a 64-byte boundary of the mapped file: ``torch._weight_int8pack_mm``
crashes (segmentation fault) on an int8 weight that is not aligned so, and safetensors' own
writer packs tensors back to back after a header of any length. So the file is written here,
in the safetensors format (read back by safetensors, which checks it), with padding tensors
between the copies and spaces at the end of the header.
"""

from __future__ import annotations

import json
import logging
import struct
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from ragdesk.core.atomic import remove_temp_files, write_atomic
from ragdesk.core.models.mapped_weights import WEIGHTS_FILE

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

COPIES_FILE = "ragdesk-weight-copies.safetensors"
FORMAT = "1"
# the starter's copies are 0.8 GB (bfloat16 and int8 of 270M weights); the 1.5B reader's
# would be 4.6 GB beside its 6.2 GB converted weights
MAX_BYTES = 1 << 30
ALIGN = 64
_PAD = "__pad__."
# folder -> the thread writing its copies
_writing: dict[Path, threading.Thread] = {}
_writing_lock = threading.Lock()
_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "I8": "int8",
           "U8": "uint8", "I32": "int32", "I64": "int64"}


def _stamp(folder: Path) -> dict[str, str]:
    import torch

    st = (folder / WEIGHTS_FILE).stat()
    return {"ragdesk_weight_copies": FORMAT, "weights_size": str(st.st_size),
            "weights_mtime_ns": str(st.st_mtime_ns), "torch": torch.__version__}


def read_copies(folder: Path) -> dict[str, torch.Tensor] | None:
    """The copies stored beside ``folder``'s weights, mapped (nothing read until used); None
    where there is no file of these weights that can be used as it is."""
    path = folder / COPIES_FILE
    if not path.is_file():
        return None
    try:
        from safetensors import safe_open

        stamp = _stamp(folder)
        with safe_open(str(path), "pt") as fh:
            if fh.metadata() != stamp:
                log.info("%s was made from other weights or another torch; not used", path)
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


def keep_copies(folder: Path, copies: Mapping[str, torch.Tensor]) -> None:
    """:func:`write_copies` on a thread of its own, so that the answer that made the copies
    need not wait for almost a gigabyte to reach the disk (a one-shot ``ask`` prints its
    answer, then finishes the write before it exits). One write per folder at a time."""
    with _writing_lock:
        if folder in _writing:
            return
        thread = threading.Thread(target=_write_then_forget, args=(folder, dict(copies)),
                                  name="ragdesk-weight-copies")
        _writing[folder] = thread
    thread.start()


def wait_for_writes(timeout_s: float | None = None) -> None:
    """Wait for the writes :func:`keep_copies` started."""
    with _writing_lock:
        threads = list(_writing.values())
    for thread in threads:
        thread.join(timeout_s)


def _write_then_forget(folder: Path, copies: Mapping[str, torch.Tensor]) -> None:
    try:
        write_copies(folder, copies)
    finally:
        with _writing_lock:
            _writing.pop(folder, None)


def write_copies(folder: Path, copies: Mapping[str, torch.Tensor]) -> bool:
    """Store ``copies`` beside ``folder``'s weights (atomically); False where they are too
    large to keep or cannot be written (a warning says why; nothing half-written stays)."""
    size = sum(_nbytes(t) for t in copies.values())
    if not copies or size > MAX_BYTES:
        return False
    path = folder / COPIES_FILE
    remove_temp_files(folder, lambda name: name == COPIES_FILE, min_age_s=3600)
    try:
        header, parts = _layout(copies, _stamp(folder))
        write_atomic(path, lambda fh: _write(fh, header, parts))
    except (OSError, KeyError) as exc:  # KeyError: a type the format has no name for
        log.warning("Could not store the weight copies in %s (%s); they are made again at "
                    "the next start.", path, exc)
        return False
    return True


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
