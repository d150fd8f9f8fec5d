"""The retrieval API the engine and the GUI use: open a snapshot, search it, switch snapshots.

A :class:`SnapshotIndex` owns open handles (memory-mapped embeddings, the FAISS index, a
read-only passage database), so it keeps answering from the snapshot it was opened on even
when another snapshot becomes active, or this one is removed, until it is closed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragdesk.core.catalog import STAGE_SPARSE, Catalog, SnapshotState
from ragdesk.core.encoders import EncoderInfo, check_query_space, describe_encoder
from ragdesk.core.errors import (
    CorruptSnapshotError,
    EncoderMismatchError,
    NoSnapshotError,
    NotFoundError,
)
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.snapshots.calibration import snapshot_temperature
from ragdesk.core.snapshots.checked import check_on_open
from ragdesk.core.snapshots.lifecycle import recover, snapshot_folder
from ragdesk.core.snapshots.locks import running_imports
from ragdesk.core.snapshots.manifest import EMBEDDINGS_FILE, MANIFEST_FILE, Manifest, read_manifest
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE, PassageReader
from ragdesk.core.snapshots.staged import StagedSnapshot
from ragdesk.core.snapshots.variant_search import Searcher, open_searcher
from ragdesk.core.types import Hit, Passage

log = logging.getLogger(__name__)


def load_embeddings(folder: Path, manifest: Manifest) -> np.ndarray:
    path = folder / EMBEDDINGS_FILE
    try:
        emb: np.ndarray = np.load(path, mmap_mode="r", allow_pickle=False)
    except FileNotFoundError as exc:
        raise CorruptSnapshotError(f"{path} is missing.") from exc
    except (OSError, ValueError) as exc:
        raise CorruptSnapshotError(f"{path} cannot be read as a NumPy array ({exc}).") from exc
    if emb.shape != (manifest.passages, manifest.dim) or emb.dtype.name != \
            manifest.embeddings_dtype:
        raise CorruptSnapshotError(
            f"{path} holds {emb.dtype} {emb.shape}, but the manifest says "
            f"{manifest.embeddings_dtype} ({manifest.passages}, {manifest.dim}).")
    return emb


class SnapshotIndex:
    """One opened snapshot and one of its index variants. Safe to search from many threads."""

    has_dense = True  # see StagedSnapshot: an unfinished import that answers with BM25

    def __init__(self, name: str, folder: Path, manifest: Manifest, variant: str | None = None):
        self.name = name
        self.folder = folder
        self.manifest = manifest
        self.encoder: EncoderInfo = manifest.encoder
        self.size = manifest.passages
        self.created: str | None = manifest.created
        self.variant = variant or manifest.default_variant
        entry = manifest.variants.get(self.variant)
        if entry is None:
            have = ", ".join(sorted(manifest.variants))
            raise NotFoundError(
                f"The snapshot {name!r} has no {self.variant} index (it has {have}).",
                f"Build it with `ragdesk index quantize {name} --variant {self.variant}`.")
        self._emb = load_embeddings(folder, manifest)
        self._passages = PassageReader(folder / PASSAGES_FILE)
        self._searcher: Searcher | None = open_searcher(folder, self._emb, self.variant,
                                                        entry.file, entry.params)
        self._closed = False
        self._lock = threading.Lock()
        # read once: an answer in flight keeps the τ it started with
        self.temperature, self.temperature_source = snapshot_temperature(folder, self.encoder)

    @classmethod
    def open(cls, folder: Path, variant: str | None = None, name: str | None = None, *,
             progress: ProgressCallback | None = None, cancel: CancelToken | None = None
             ) -> SnapshotIndex:
        """Open for answering: the files read are checked against the manifest's checksums
        first (hashed only at their first open or once changed; see ``checked``)."""
        manifest = read_manifest(folder)
        name = name or manifest.name
        check_on_open(name, folder, manifest, variant or manifest.default_variant,
                      progress=progress, cancel=cancel)
        return cls(name, folder, manifest, variant)

    def __repr__(self) -> str:
        return (f"SnapshotIndex({self.name!r}, variant={self.variant!r}, "
                f"passages={self.size}, encoder={self.encoder.id!r})")

    # ---- checks ----------------------------------------------------------------------

    @property
    def query_precision(self) -> str:
        """The precision its questions are encoded in (the manifest's record)."""
        return self.manifest.query_precision

    def check_query_encoder(self, info: EncoderInfo) -> None:
        """Refuse a question encoder of another family or dimension than the passages'."""
        check_query_space(self.name, self.encoder, info)

    def _queries(self, queries: np.ndarray) -> np.ndarray:
        q = np.asarray(queries, dtype=np.float32)
        if q.ndim == 1:
            q = q[None, :]
        if q.ndim != 2 or q.shape[1] != self.manifest.dim:
            raise EncoderMismatchError(
                f"The query vectors have shape {tuple(np.shape(queries))}, but the snapshot "
                f"{self.name!r} holds {self.manifest.dim}-d vectors from "
                f"{describe_encoder(self.encoder)}.")
        return np.ascontiguousarray(q)

    @property
    def searcher(self) -> Searcher:
        """The variant's search structure (benchmarks and tuning tools reach into it)."""
        return self._search_ready()

    def _search_ready(self) -> Searcher:
        if self._searcher is None:
            raise RuntimeError(f"the snapshot index {self.name!r} is closed")
        return self._searcher

    # ---- search ----------------------------------------------------------------------

    def search_ids(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(exact inner-product scores, passage ids), each [n, k]; -1 ids pad short rows."""
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        return self._search_ready().search(self._queries(queries), k)

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        """Top-k passages per query, best first, with exact inner-product scores."""
        scores, ids = self.search_ids(queries, k)
        wanted = sorted({int(i) for i in ids.ravel() if i >= 0})
        by_id = {p.id: p for p in self._passages.get(wanted)} if wanted else {}
        return [
            [Hit(int(i), by_id[int(i)].title, by_id[int(i)].text, float(s))
             for s, i in zip(srow, irow, strict=True) if i >= 0]
            for srow, irow in zip(scores, ids, strict=True)
        ]

    def get_passages(self, ids: Sequence[int]) -> list[Passage]:
        bad = [int(i) for i in ids if not 0 <= int(i) < self.size]
        if bad:
            raise KeyError(f"passage id {bad[0]} is outside 0..{self.size - 1}")
        return self._passages.get(ids)

    def embeddings(self) -> np.ndarray:
        """The passage vectors, memory-mapped read-only; row i is passage i."""
        return self._emb

    @property
    def resident_bytes(self) -> int:
        """Bytes the search structure keeps in memory (the flat variant pages embeddings in)."""
        return self._search_ready().resident_bytes

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._searcher = None
            self._passages.close()


def nothing_active(data: DataDir) -> NoSnapshotError:
    """The error for "no snapshot is active", saying so when one is being imported (the
    starter's setup, another process's import): its first stage makes it active within
    seconds, and setting up the starter again would only wait for the running one."""
    running = running_imports(data)
    if not running:
        return NoSnapshotError("No snapshot is active.")
    return NoSnapshotError(
        f"No snapshot is active yet: {running[0]!r} is being imported.",
        hint="Ask again in a few seconds: it answers with BM25 keyword search as soon as its "
             "passages are indexed, before its dense vectors are done.")


def open_snapshot(data: DataDir, catalog: Catalog, name: str | None = None,
                  variant: str | None = None, *, progress: ProgressCallback | None = None,
                  cancel: CancelToken | None = None) -> SnapshotIndex:
    """Open a ready snapshot (the active one when ``name`` is None) with a variant (its
    default, set by ``ragdesk index switch NAME --variant V``, when ``variant`` is None).
    ``progress`` and ``cancel`` reach the checksum check of a first open."""
    if name is None:
        name = catalog.active_snapshot()
        if name is None:
            raise nothing_active(data)
    folder, _ = snapshot_folder(data, catalog, name)
    if not (folder / MANIFEST_FILE).exists():
        raise CorruptSnapshotError(f"The folder of snapshot {name!r} ({folder}) is missing or "
                                   "incomplete.")
    return SnapshotIndex.open(folder, variant, name, progress=progress, cancel=cancel)


def open_searchable(data: DataDir, catalog: Catalog, name: str | None = None
                    ) -> SnapshotIndex | StagedSnapshot:
    """Like :func:`open_snapshot`, but a snapshot whose staged import has reached its BM25
    stage opens as a :class:`StagedSnapshot` (BM25 only) instead of being refused."""
    if name is None:
        name = catalog.active_snapshot()
        if name is None:
            raise nothing_active(data)
    rec = catalog.get_snapshot(name)
    if rec.state != SnapshotState.READY.value and rec.stage == STAGE_SPARSE:
        return StagedSnapshot(name, data.staging_dir / rec.slug)
    return open_snapshot(data, catalog, name)


class SnapshotLibrary:
    """Opened snapshots by name, and the active one.

    ``switch`` opens the new snapshot first and only then marks it active, so a broken
    snapshot never becomes active; indexes already handed out stay open and usable.
    """

    def __init__(self, data: DataDir, catalog: Catalog) -> None:
        self.data = data
        self.catalog = catalog
        self._lock = threading.Lock()
        self._open: dict[str, tuple[int, SnapshotIndex]] = {}
        # Not closed when the import finishes: an answer in flight may still read it.
        self._staged_open: dict[str, StagedSnapshot] = {}
        try:
            recover(data, catalog)
        except (OSError, CorruptSnapshotError) as exc:
            log.warning("could not tidy %s: %s", data.root, exc)

    def get(self, name: str) -> SnapshotIndex | StagedSnapshot:
        """The opened snapshot ``name``: its complete index when it is ready, else, while a
        staged import encodes it, its BM25-only :class:`StagedSnapshot`."""
        rec = self.catalog.get_snapshot(name)
        if rec.state != SnapshotState.READY.value and rec.stage == STAGE_SPARSE:
            return self._staged(name, rec.slug)
        folder, _ = snapshot_folder(self.data, self.catalog, name)
        try:
            stamp = (folder / MANIFEST_FILE).stat().st_mtime_ns
        except FileNotFoundError as exc:
            raise CorruptSnapshotError(f"The folder of snapshot {name!r} ({folder}) is "
                                       "missing or incomplete.") from exc
        with self._lock:
            cached = self._open.get(name)
            if cached is not None and cached[0] == stamp and cached[1].folder == folder:
                return cached[1]
            index = SnapshotIndex.open(folder, None, name)
            # A replaced entry is not closed: whoever holds it may still be searching.
            self._open[name] = (stamp, index)
            return index

    def _staged(self, name: str, slug: str) -> StagedSnapshot:
        folder = self.data.staging_dir / slug
        with self._lock:
            cached = self._staged_open.get(name)
            if cached is not None and cached.folder == folder:
                return cached
            snap = StagedSnapshot(name, folder)
            self._staged_open[name] = snap
            return snap

    def current(self) -> SnapshotIndex | StagedSnapshot:
        name = self.catalog.active_snapshot()
        if name is None:
            return open_snapshot(self.data, self.catalog, None)  # raises the helpful error
        return self.get(name)

    def switch(self, name: str) -> SnapshotIndex | StagedSnapshot:
        index = self.get(name)
        self.catalog.set_active(name)
        return index

    def close(self) -> None:
        with self._lock:
            for _, index in self._open.values():
                index.close()
            self._open.clear()
            for staged in self._staged_open.values():
                staged.close()
            self._staged_open.clear()
