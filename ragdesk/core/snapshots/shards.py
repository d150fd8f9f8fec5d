"""Precomputed passage vectors as a folder of shards (``index import --embeddings DIR``).

What a cluster job writes for a Wikipedia-sized corpus: many files, each a slice of the
vectors, in any order. A shard is

- ``NAME.npy``: a float16/float32 array [rows, dim]; its ids are in ``NAME.ids.npy`` (a 1-D
  integer array, one id per row) when that file exists, else they follow on from the
  shards before it (in name order, digits compared as numbers: ``part-2`` before
  ``part-10``);
- ``NAME.parquet``: columns ``id`` (integer) and ``embedding`` (a list of float16/float32,
  ``dim`` long), read one record batch at a time (pyarrow: ``pip install ragdesk[parquet]``).

An id is the passage's number in the snapshot: its position (from 0) in the order the
source gives passages (a DPR TSV's rows in file order). Every id in ``0..n-1`` must occur
exactly once; a duplicate, an id out of range or a missing id is a :class:`BadInputError`
naming the shard. Other files in the folder (a job's logs, ``_SUCCESS``) are ignored.

Memory is bounded by ``BLOCK_ROWS`` rows of vectors (a record batch for parquet) plus one int16
(int32 past 32,767 shards) per passage to check the ids: 42 MB for DPR's 21M passages.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from ragdesk.core.errors import BadInputError, RagdeskError
from ragdesk.core.pages import release_pages
from ragdesk.core.progress import CancelToken

if TYPE_CHECKING:
    import pyarrow as pa

NPY = ".npy"
PARQUET = ".parquet"
IDS_SUFFIX = ".ids.npy"
BLOCK_ROWS = 16384  # 48 MiB of 768-d float32 vectors per block (and its converted copy)
ID_COLUMN = "id"
VECTOR_COLUMN = "embedding"
FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))
SHARDS_HINT = ("A folder of embeddings holds .npy shards (ids in NAME.ids.npy, or following "
               "on in name order) or .parquet shards with `id` and `embedding` columns.")


@dataclass(frozen=True)
class Shard:
    path: Path
    rows: int
    dtype: np.dtype[np.generic]
    ids_path: Path | None = None  # .npy shards with their own ids
    first_id: int = 0  # .npy shards without: ids first_id .. first_id + rows - 1


def _natural_key(path: Path) -> list[int | str]:
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path.name)]


def _parquet() -> ModuleType:
    """``pyarrow.parquet``, imported only when a parquet file is read."""
    try:
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError as exc:
        raise RagdeskError(
            "Reading parquet files needs the pyarrow package.",
            "Install it with `pip install ragdesk[parquet]` (or `pip install pyarrow`).") \
            from exc
    return pq


def _check_float(dtype: np.dtype[np.generic], path: Path) -> None:
    if dtype not in FLOAT_DTYPES:
        raise BadInputError(f"holds {dtype} vectors; expected float16 or float32.", path=path)


def _check_dim(dim: int, expected: int, path: Path) -> None:
    if dim != expected:
        raise BadInputError(
            f"holds {dim}-dimensional vectors, but the encoder makes {expected}-dimensional "
            "ones.", path=path, hint="Pass the encoder that computed these embeddings with "
            "--encoder.")


def _npy_shard(path: Path, dim: int, first_id: int) -> Shard:
    try:
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise BadInputError(f"is not a NumPy .npy array ({exc}).", path=path) from exc
    if arr.ndim != 2:
        raise BadInputError(f"holds an array of shape {arr.shape}; expected [rows, {dim}].",
                            path=path)
    _check_dim(int(arr.shape[1]), dim, path)
    _check_float(arr.dtype, path)
    ids_path = path.with_name(path.name[:-len(NPY)] + IDS_SUFFIX)
    if not ids_path.is_file():
        return Shard(path, int(arr.shape[0]), arr.dtype, None, first_id)
    try:
        ids = np.load(ids_path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise BadInputError(f"is not a NumPy .npy array ({exc}).", path=ids_path) from exc
    if ids.ndim != 1 or ids.shape[0] != arr.shape[0] or ids.dtype.kind not in "iu":
        raise BadInputError(
            f"holds {ids.dtype} ids of shape {ids.shape}; expected {arr.shape[0]:,} integer "
            f"ids, one per row of {path.name}.", path=ids_path)
    return Shard(path, int(arr.shape[0]), arr.dtype, ids_path)


def _vector_type(path: Path, schema: pa.Schema) -> tuple[np.dtype[np.generic], int | None]:
    """The vectors' dtype and, for fixed-size lists, their length."""
    import pyarrow as pa

    names = schema.names
    if ID_COLUMN not in names or VECTOR_COLUMN not in names:
        raise BadInputError(f"has the columns {names}; expected `{ID_COLUMN}` and "
                            f"`{VECTOR_COLUMN}`.", path=path, hint=SHARDS_HINT)
    id_type = schema.field(ID_COLUMN).type
    if not pa.types.is_integer(id_type):
        raise BadInputError(f"has {id_type} ids; expected integers.", path=path)
    vtype = schema.field(VECTOR_COLUMN).type
    if not (pa.types.is_list(vtype) or pa.types.is_large_list(vtype)
            or pa.types.is_fixed_size_list(vtype)):
        raise BadInputError(f"has `{VECTOR_COLUMN}` of type {vtype}; expected a list of "
                            "floats.", path=path)
    value = vtype.value_type
    if not pa.types.is_floating(value):
        raise BadInputError(f"holds {value} vectors; expected float16 or float32.", path=path)
    size = vtype.list_size if pa.types.is_fixed_size_list(vtype) else None
    return np.dtype(value.to_pandas_dtype()), size


def _parquet_shard(path: Path, dim: int) -> Shard:
    pq = _parquet()
    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own ArrowInvalid / OSError subclasses
        raise BadInputError(f"is not a readable parquet file ({exc}).", path=path) from exc
    dtype, size = _vector_type(path, pf.schema_arrow)
    _check_float(dtype, path)
    if size is not None:
        _check_dim(size, dim, path)
    return Shard(path, int(pf.metadata.num_rows), dtype)


@dataclass
class EmbeddingShards:
    folder: Path
    shards: list[Shard]
    dim: int

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.shards)

    @property
    def dtype(self) -> np.dtype[np.generic]:
        """float16 when every shard is (halving the snapshot's vectors), else float32."""
        if all(s.dtype == np.float16 for s in self.shards):
            return np.dtype(np.float16)
        return np.dtype(np.float32)

    def fingerprint(self) -> list[dict[str, object]]:
        out = []
        for s in self.shards:
            for p in (s.path, s.ids_path):
                if p is not None:
                    st = p.stat()
                    out.append({"name": p.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns})
        return out

    def blocks(self, shard: Shard, vectors: bool = True
               ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """(ids int64, vectors or None) one block at a time."""
        if shard.path.suffix == PARQUET:
            yield from self._parquet_blocks(shard, vectors)
            return
        arr = np.load(shard.path, mmap_mode="r", allow_pickle=False)
        ids_all = (np.load(shard.ids_path, mmap_mode="r", allow_pickle=False)
                   if shard.ids_path is not None else None)
        for start in range(0, shard.rows, BLOCK_ROWS):
            stop = min(shard.rows, start + BLOCK_ROWS)
            ids = (np.asarray(ids_all[start:stop], dtype=np.int64) if ids_all is not None
                   else np.arange(shard.first_id + start, shard.first_id + stop, dtype=np.int64))
            yield ids, np.asarray(arr[start:stop]) if vectors else None
            # the caller is done with the block: keep the shard's pages out of the RSS
            release_pages(arr, start, stop)
            if ids_all is not None:
                release_pages(ids_all, start, stop)

    def _parquet_blocks(self, shard: Shard, vectors: bool
                        ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        pq = _parquet()
        columns = [ID_COLUMN, VECTOR_COLUMN] if vectors else [ID_COLUMN]
        pf = pq.ParquetFile(shard.path)
        for batch in pf.iter_batches(batch_size=BLOCK_ROWS, columns=columns):
            ids_col = batch.column(0)
            if ids_col.null_count:
                raise BadInputError("has a row without an id.", path=shard.path)
            ids = ids_col.to_numpy().astype(np.int64, copy=False)
            yield ids, self._vectors(shard, batch.column(1)) if vectors else None

    def _vectors(self, shard: Shard, col: pa.Array) -> np.ndarray:
        import pyarrow as pa

        if col.null_count:
            raise BadInputError("has a row without an embedding.", path=shard.path)
        if not pa.types.is_fixed_size_list(col.type):
            lengths = np.diff(col.offsets.to_numpy())
            if len(lengths) and (lengths != self.dim).any():
                bad = int(lengths[lengths != self.dim][0])
                raise BadInputError(f"has a {bad}-dimensional embedding; the encoder makes "
                                    f"{self.dim}-dimensional ones.", path=shard.path)
        flat = col.flatten().to_numpy(zero_copy_only=False)
        return np.asarray(flat).reshape(len(col), self.dim)


def open_shards(folder: Path, dim: int) -> EmbeddingShards:
    """The shards of ``folder``, each opened and checked (shape, dtype, columns) without
    reading its vectors."""
    files = sorted((p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")
                    and not p.name.endswith(IDS_SUFFIX)
                    and p.suffix in (NPY, PARQUET)), key=_natural_key)
    if not files:
        raise BadInputError("holds no .npy or .parquet shards.", path=folder, hint=SHARDS_HINT)
    shards: list[Shard] = []
    next_id = 0
    for p in files:
        shard = _npy_shard(p, dim, next_id) if p.suffix == NPY else _parquet_shard(p, dim)
        shards.append(shard)
        next_id += shard.rows
    return EmbeddingShards(folder, shards, dim)


def _owner_array(n: int, shards: int) -> np.ndarray:
    return np.full(n, -1, dtype=np.int16 if shards < np.iinfo(np.int16).max else np.int32)


def check_ids(emb: EmbeddingShards, n: int, limited: bool,
              cancel: CancelToken | None = None) -> None:
    """Every id in ``0..n-1`` exactly once (ids past ``n`` are skipped when ``limited``:
    ``--limit`` imports the first ``n`` passages)."""
    owner = _owner_array(n, len(emb.shards))
    for i, shard in enumerate(emb.shards):
        for ids, _ in emb.blocks(shard, vectors=False):
            if cancel is not None:
                cancel.raise_if_cancelled()
            ids = _in_range(ids, n, limited, shard)
            _check_unique(ids, owner, i, emb)
            owner[ids] = i
    missing = np.flatnonzero(owner < 0)
    if len(missing):
        raise BadInputError(_missing_message(missing, owner, emb, n), path=emb.folder,
                            hint=SHARDS_HINT)


def _in_range(ids: np.ndarray, n: int, limited: bool, shard: Shard) -> np.ndarray:
    out = (ids < 0) | (ids >= n)
    if not out.any():
        return ids
    if limited:
        bad = ids[ids < 0]
        if not len(bad):
            return ids[~out]
    else:
        bad = ids[out]
    raise BadInputError(
        f"has the id {int(bad[0])}, outside the source's passages 0..{n - 1:,} (an id is the "
        "passage's position in the source, from 0).", path=shard.path, hint=SHARDS_HINT)


def _check_unique(ids: np.ndarray, owner: np.ndarray, i: int, emb: EmbeddingShards) -> None:
    seen = owner[ids] >= 0
    if seen.any():
        dup = int(ids[seen][0])
        other = emb.shards[int(owner[dup])].path.name
        raise BadInputError(f"has the id {dup}, which {other} has already: every passage "
                            "needs exactly one vector.", path=emb.shards[i].path)
    ordered = np.sort(ids)
    same = ordered[1:] == ordered[:-1]
    if same.any():
        dup = int(ordered[1:][same][0])
        raise BadInputError(f"has the id {dup} twice: every passage needs exactly one "
                            "vector.", path=emb.shards[i].path)


def _missing_message(missing: np.ndarray, owner: np.ndarray, emb: EmbeddingShards,
                     n: int) -> str:
    first = int(missing[0])
    near = [j for j in (first - 1, first + 1) if 0 <= j < n and owner[j] >= 0]
    where = ""
    if near:
        names = sorted({emb.shards[int(owner[j])].path.name for j in near})
        where = f" (the ids next to it are in {' and '.join(names)})"
    listed = ", ".join(str(int(m)) for m in missing[:5]) + (", ..." if len(missing) > 5 else "")
    return (f"has no vector for {len(missing):,} of the source's {n:,} passages: ids "
            f"{listed}{where}.")


def copy_shards(emb: EmbeddingShards, mm: np.ndarray, n: int, limited: bool, start: int,
                on_shard: Callable[[int, int], None],
                cancel: CancelToken | None = None) -> None:
    """Write every shard from ``start`` on into ``mm`` (rows by id), calling
    ``on_shard(shards_done, rows_done)`` after each so that a killed import resumes there."""
    done_rows = sum(min(s.rows, n) for s in emb.shards[:start])
    for i in range(start, len(emb.shards)):
        shard = emb.shards[i]
        for ids, vectors in emb.blocks(shard):
            if cancel is not None:
                cancel.raise_if_cancelled()
            assert vectors is not None
            if limited:
                keep = ids < n
                ids, vectors = ids[keep], vectors[keep]
            if not np.isfinite(vectors).all():
                bad = int(ids[np.argwhere(~np.isfinite(vectors))[0][0]])
                raise BadInputError(f"the vector of id {bad} holds a NaN or infinite value.",
                                    path=shard.path)
            mm[ids] = vectors.astype(mm.dtype, copy=False)
            done_rows += len(ids)
        on_shard(i + 1, min(done_rows, n))
