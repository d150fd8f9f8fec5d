"""The sparse index of a snapshot, kept inside the snapshot folder under ``bm25/``: the BM25
index (bm25s files), title postings and per-passage features for the hybrid re-ranker.

It is built on first use (or ahead of time with :func:`build_sparse`) in a staging folder
beside it and renamed into place only when complete, so a crash never leaves a half-written
index that looks valid. An index written by another tokenizer or format version, or for
another number of passages, is rebuilt. Loaded indexes are shared within the process
(memory-mapped).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragdesk.core.atomic import fsync_dir, write_json_atomic
from ragdesk.core.errors import CorruptSnapshotError, DiskFullError, is_disk_full
from ragdesk.core.pages import release_pages
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.sparse.bm25 import DEFAULT_B, DEFAULT_K1, META_NAME, BM25Index
from ragdesk.core.sparse.features import PASSAGE_COLUMNS, Postings, passage_row
from ragdesk.core.sparse.source import PassageSource
from ragdesk.core.sparse.tokenize import TOKENIZER_VERSION, bm25_tokens

log = logging.getLogger(__name__)

BM25_DIRNAME = "bm25"
SPARSE_FORMAT = 2
FEATURES_FILE = "passage_features.npy"
TITLE_INDPTR_FILE = "title_indptr.npy"
TITLE_INDICES_FILE = "title_indices.npy"
READ_CHUNK = 5000

_lock = threading.Lock()
_key_locks: dict[str, threading.Lock] = {}
_loaded: dict[str, SparseIndex] = {}


@dataclass
class SparseIndex:
    """Everything sparse and hybrid retrieval need for one snapshot."""

    bm25: BM25Index
    title_postings: Postings
    passage_features: np.ndarray  # float32 [n, len(PASSAGE_COLUMNS)]

    @property
    def num_docs(self) -> int:
        return self.bm25.num_docs

    def text_postings(self) -> Postings:
        indptr, indices = self.bm25.postings()
        return Postings(indptr, indices)

    def save(self, folder: Path) -> None:
        self.bm25.save(folder)
        np.save(folder / FEATURES_FILE, self.passage_features)
        np.save(folder / TITLE_INDPTR_FILE, self.title_postings.indptr)
        np.save(folder / TITLE_INDICES_FILE, self.title_postings.indices)

    @classmethod
    def load(cls, folder: Path) -> SparseIndex:
        bm25 = BM25Index.load(folder)
        try:
            feats = np.load(folder / FEATURES_FILE, mmap_mode="r", allow_pickle=False)
            indptr = np.load(folder / TITLE_INDPTR_FILE, mmap_mode="r", allow_pickle=False)
            indices = np.load(folder / TITLE_INDICES_FILE, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise CorruptSnapshotError(f"The sparse index in {folder} cannot be read: {exc}",
                                       hint="Delete that folder; ragdesk rebuilds it on next "
                                            "use.") from exc
        if feats.shape != (bm25.num_docs, len(PASSAGE_COLUMNS)):
            raise CorruptSnapshotError(
                f"{folder / FEATURES_FILE} has shape {feats.shape}, expected "
                f"({bm25.num_docs}, {len(PASSAGE_COLUMNS)}).",
                hint="Delete that folder; ragdesk rebuilds it on next use.")
        return cls(bm25, Postings(indptr, indices), feats)


def bm25_folder(snapshot: PassageSource) -> Path:
    return Path(snapshot.folder) / BM25_DIRNAME


def _source(snapshot: PassageSource) -> dict[str, object]:
    return {"snapshot": snapshot.name, "size": int(snapshot.size),
            "created": snapshot.created, "format": SPARSE_FORMAT}


def _passages(snapshot: PassageSource, chunk: int = READ_CHUNK) -> Iterator[tuple[str, str]]:
    size = int(snapshot.size)
    for start in range(0, size, chunk):
        for p in snapshot.get_passages(list(range(start, min(size, start + chunk)))):
            yield p.title, p.text


def _embedding_norms(snapshot: PassageSource, chunk: int = 65536) -> np.ndarray:
    if not snapshot.has_dense:
        # A staged snapshot (dense vectors pending): BM25 needs no norms; only the hybrid
        # re-ranker does, and it cannot run before the vectors exist. refresh_norms fills
        # them in when they do.
        return np.zeros(int(snapshot.size), dtype=np.float32)
    emb = snapshot.embeddings()
    out = np.empty(emb.shape[0], dtype=np.float32)
    for s in range(0, emb.shape[0], chunk):
        out[s:s + chunk] = np.linalg.norm(np.asarray(emb[s:s + chunk], dtype=np.float32),
                                          axis=1)
    return out


def build_index(
    snapshot: PassageSource,
    *,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> SparseIndex:
    """Build (in memory) the sparse index of a snapshot: BM25 over "title text", title
    postings and passage features (passage ids must run through each article in order)."""
    title_terms: list[list[str]] = []
    rows: list[list[float]] = []

    def texts() -> Iterator[str]:
        prev: str | None = None
        for title, text in _passages(snapshot):
            terms = bm25_tokens(title)
            title_terms.append(terms)
            rows.append(passage_row(len(set(terms)), text, title != prev))
            prev = title
            yield f"{title} {text}" if title else text

    source = {**_source(snapshot), "norms": snapshot.has_dense}
    bm25 = BM25Index.build(texts(), total=int(snapshot.size), k1=k1, b=b,
                           source=source, progress=progress, cancel=cancel)
    vocab = bm25.vocab
    titles = Postings.build([[vocab[t] for t in ts if t in vocab] for ts in title_terms],
                            len(vocab))
    feats = np.asarray(rows, dtype=np.float32).reshape(len(rows), len(PASSAGE_COLUMNS))
    feats[:, PASSAGE_COLUMNS.index("norm")] = _embedding_norms(snapshot)
    return SparseIndex(bm25, titles, feats)


def build_sparse(
    snapshot: PassageSource,
    *,
    k1: float = DEFAULT_K1,
    b: float = DEFAULT_B,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> SparseIndex:
    """Build the snapshot's sparse index and put it in place (replacing any older one)."""
    target = bm25_folder(snapshot)
    index = build_index(snapshot, k1=k1, b=b, progress=progress, cancel=cancel)
    if cancel is not None:
        cancel.raise_if_cancelled()
    staging = target.with_name(f".{BM25_DIRNAME}-staging-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        index.save(staging)
        for f in staging.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        fsync_dir(staging)
        old = None
        if target.exists():
            old = target.with_name(f".{BM25_DIRNAME}-old-{uuid.uuid4().hex[:8]}")
            os.replace(target, old)
        os.replace(staging, target)
        fsync_dir(target.parent)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if is_disk_full(exc):
            raise DiskFullError(f"The disk is full while writing the BM25 index {target}.") \
                from exc
        raise
    loaded = SparseIndex.load(target)
    with _lock:
        _loaded[str(target)] = loaded
    log.info("built the sparse index of %s: %d passages, %d terms", _source(snapshot),
             loaded.num_docs, loaded.bm25.meta.vocab_size)
    return loaded


def _usable(index: SparseIndex, snapshot: PassageSource) -> bool:
    meta = index.bm25.meta
    # Built while the dense vectors were pending (no norms): stale once they exist.
    norms_ok = meta.source.get("norms", True) or not snapshot.has_dense
    return (meta.tokenizer == TOKENIZER_VERSION and meta.num_docs == int(snapshot.size)
            and meta.source.get("format") == SPARSE_FORMAT and bool(norms_ok))


def refresh_norms(folder: Path, embeddings: np.ndarray) -> None:
    """Fill in the passage norms of a sparse index built before the dense vectors existed
    (a staged import calls this once its vectors are complete, before the snapshot is
    renamed into place). The features file is replaced first and the meta after it, each
    atomically: a crash in between leaves ``norms: false``, and the index is rebuilt on use.
    """
    meta_path = folder / META_NAME
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    feats = np.array(np.load(folder / FEATURES_FILE, allow_pickle=False), dtype=np.float32)
    if feats.shape[0] != embeddings.shape[0]:
        raise CorruptSnapshotError(f"{folder / FEATURES_FILE} has {feats.shape[0]} rows, "
                                   f"the embeddings {embeddings.shape[0]}.")
    for s in range(0, feats.shape[0], 65536):
        block = np.asarray(embeddings[s:s + 65536], dtype=np.float32)
        release_pages(embeddings, s, s + 65536)  # one pass: keep the file out of the RSS
        feats[s:s + 65536, PASSAGE_COLUMNS.index("norm")] = np.linalg.norm(block, axis=1)
    tmp = folder / f".{FEATURES_FILE}.{uuid.uuid4().hex[:8]}.npy"
    np.save(tmp, feats)
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, folder / FEATURES_FILE)
    meta.setdefault("source", {})["norms"] = True
    write_json_atomic(meta_path, meta)
    fsync_dir(folder)
    with _lock:
        _loaded.pop(str(folder), None)


def ensure_sparse(
    snapshot: PassageSource,
    *,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> SparseIndex:
    """The snapshot's sparse index: from this process's cache, from disk, or built now."""
    target = bm25_folder(snapshot)
    key = str(target)
    with _lock:
        cached = _loaded.get(key)
        key_lock = _key_locks.setdefault(key, threading.Lock())
    if cached is not None and _usable(cached, snapshot) and target.exists():
        return cached
    with key_lock:  # one builder per index; others wait and then load its result
        with _lock:
            cached = _loaded.get(key)
        if cached is not None and _usable(cached, snapshot) and target.exists():
            return cached
        if target.exists():
            try:
                index = SparseIndex.load(target)
                if _usable(index, snapshot):
                    with _lock:
                        _loaded[key] = index
                    return index
                log.info("sparse index %s is stale (%s); rebuilding", target, index.bm25.meta)
            except CorruptSnapshotError:
                log.warning("sparse index %s is unreadable; rebuilding", target, exc_info=True)
        return build_sparse(snapshot, progress=progress, cancel=cancel)


def forget_loaded() -> None:
    """Drop the process-wide cache (tests; a snapshot removed from disk)."""
    with _lock:
        _loaded.clear()
