"""Searching a snapshot's index variant: exact inner products over the embeddings (``flat``),
or a compressed FAISS index's candidates re-scored exactly from them (see
:mod:`.faiss_variants`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragdesk.core.safe_json import as_int
from ragdesk.core.snapshots.faiss_variants import (
    FLAT,
    exact_search,
    pad_results,
    read_index,
    set_search_params,
)

if TYPE_CHECKING:
    import faiss

RERANK_CHUNK = 16  # queries gathered at once: chunk x candidates x dim floats in memory


def _repeats(ids: np.ndarray) -> np.ndarray:
    """True where an id already occurred earlier in its row."""
    order = np.argsort(ids, axis=1, kind="stable")
    srt = np.take_along_axis(ids, order, axis=1)
    rep = np.zeros(ids.shape, dtype=bool)
    np.put_along_axis(rep, order[:, 1:], srt[:, 1:] == srt[:, :-1], axis=1)
    return rep


def candidate_scores(emb: np.ndarray, queries: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """Exact inner product of each query with each of its candidates (-inf for -1 ids).

    Rows are read from the (memory-mapped) embeddings once per chunk of queries, in id order.
    """
    q = np.ascontiguousarray(queries, dtype=np.float32)
    out = np.full(candidates.shape, -np.inf, dtype=np.float32)
    for s in range(0, len(q), RERANK_CHUNK):
        cand = candidates[s:s + RERANK_CHUNK]
        valid = (cand >= 0) & ~_repeats(cand)
        if not valid.any():
            continue
        uniq, inverse = np.unique(cand[valid], return_inverse=True)
        vecs = np.asarray(emb[uniq], dtype=np.float32)
        rows = np.nonzero(valid)[0]  # which query of the chunk each valid candidate belongs to
        part = out[s:s + RERANK_CHUNK]
        part[valid] = np.einsum("nd,nd->n", vecs[inverse], q[s:s + RERANK_CHUNK][rows])
    return out


def top_k_of(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best (scores, ids) per row, best first; -1 ids pad rows with fewer."""
    width = scores.shape[1]
    s = np.where(ids >= 0, scores, -np.inf).astype(np.float32)
    if width > k:
        part = np.argpartition(-s, k - 1, axis=1)[:, :k]
        s = np.take_along_axis(s, part, axis=1)
        ids = np.take_along_axis(ids, part, axis=1)
    order = np.argsort(-s, axis=1, kind="stable")
    s = np.take_along_axis(s, order, axis=1)
    i = np.where(np.isfinite(s), np.take_along_axis(ids, order, axis=1), -1)
    return pad_results(s, i.astype(np.int64), k)


def rerank(emb: np.ndarray, queries: np.ndarray, candidates: np.ndarray,
           k: int) -> tuple[np.ndarray, np.ndarray]:
    """Re-score candidates with exact inner products and keep the best ``k``."""
    return top_k_of(candidate_scores(emb, queries, candidates), candidates, k)


class Searcher:
    """Top-k by exact inner product: ``search(queries, k) -> (scores, ids)``."""

    variant = FLAT

    def __init__(self, emb: np.ndarray) -> None:
        self.emb = emb

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        return exact_search(self.emb, queries, k)

    @property
    def resident_bytes(self) -> int:
        return int(self.emb.nbytes)


class RerankSearcher(Searcher):
    """Candidates from a compressed FAISS index, re-scored exactly from the embeddings."""

    def __init__(self, emb: np.ndarray, index: faiss.Index, variant: str,
                 params: Mapping[str, object], index_bytes: int) -> None:
        super().__init__(emb)
        self.index = index
        self.variant = variant
        self.params = dict(params)
        self.candidates = as_int(params.get("rerank", 100))
        self.index_bytes = index_bytes
        set_search_params(index, variant, params)

    def candidates_for(self, queries: np.ndarray, kc: int) -> np.ndarray:
        _, ids = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), kc)
        return np.asarray(ids, dtype=np.int64)

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        kc = min(max(k, self.candidates), self.index.ntotal) or k
        return rerank(self.emb, queries, self.candidates_for(queries, kc), k)

    @property
    def resident_bytes(self) -> int:
        return self.index_bytes


def open_searcher(folder: Path, emb: np.ndarray, variant: str, file: str,
                  params: dict[str, object]) -> Searcher:
    if variant == FLAT:
        return Searcher(emb)
    path = folder / file
    index = read_index(path, ondisk=bool(params.get("ondisk")))
    return RerankSearcher(emb, index, variant, params, path.stat().st_size)
