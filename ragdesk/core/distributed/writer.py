"""Embedding shards written whole: the ids, then the vectors, each to a temporary name and
renamed into place (:func:`ragdesk.core.atomic.write_bytes_atomic`).

The ids file goes first: ``index import`` takes a ``NAME.npy`` without ``NAME.ids.npy`` as
following on from the shards before it, so a vectors file must never appear alone. A lone
ids file (a job killed between the two renames) is ignored by the import and rewritten on
resume.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ragdesk.core.atomic import write_bytes_atomic
from ragdesk.core.distributed.plan import ShardPlan


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def write_shard(folder: Path, plan: ShardPlan, i: int, vectors: np.ndarray) -> None:
    """Write shard ``i``: ``vectors`` are its passages' in order, ids from the plan."""
    start, stop = plan.bounds(i)
    if vectors.shape[0] != stop - start:
        raise RuntimeError(f"shard {i} came back with {vectors.shape[0]} vectors for its "
                           f"{stop - start} passages")
    vec_path, ids_path = plan.paths(folder, i)
    write_bytes_atomic(ids_path, _npy_bytes(np.arange(start, stop, dtype=np.int64)))
    write_bytes_atomic(vec_path, _npy_bytes(np.ascontiguousarray(vectors)))


def write_returned(folder: Path, plan: ShardPlan, batch: dict[str, np.ndarray]) -> int:
    """Write the shards of a batch the actors returned (``shard``, ``start``, ``rows`` and
    padded ``vectors`` per row, see :class:`.actor.PassageEncoder`); their passage count."""
    total = 0
    for shard, start, rows, vectors in zip(batch["shard"], batch["start"], batch["rows"],
                                           batch["vectors"], strict=True):
        if int(start) != plan.bounds(int(shard))[0]:
            raise RuntimeError(f"shard {int(shard)} came back starting at {int(start)}")
        write_shard(folder, plan, int(shard), np.asarray(vectors)[:int(rows)])
        total += int(rows)
    return total
