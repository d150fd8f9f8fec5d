"""Fusion math for hybrid retrieval (pure numpy; no snapshot, no model).

The hybrid score of a candidate passage z for question x is

    s(z) = d(z)·q(x) + w * bm25(z, x) / max_{z' in C} bm25(z', x)

over the candidate set C = (top-``depth`` dense) ∪ (top-``depth`` BM25), where d(z)·q(x) is
the exact inner product from the snapshot embeddings and bm25 is the exact BM25 score (0 when
no query term occurs). Dividing by the best BM25 score in C puts the sparse term on a fixed
[0, w] scale whatever the question length, while the dense term keeps its own units, so the
hybrid score stays in inner-product units and ranks like dense retrieval when w = 0.
``w`` and ``depth`` were tuned on one half of NQ-open dev (see bench/retrieval_bench.py).

Other normalizations ("minmax", "zscore") and reciprocal-rank fusion are kept for the
benchmark's comparison.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NORMALIZATIONS = ("max", "minmax", "zscore", "raw")


@dataclass(frozen=True)
class HybridParams:
    weight: float = 0.2
    depth: int = 100  # candidates taken from each of dense and BM25
    norm: str = "max"


DEFAULT_HYBRID = HybridParams()


def _scale(x: np.ndarray, norm: str) -> np.ndarray:
    x = x.astype(np.float64, copy=False)
    if x.size == 0:
        return x
    if norm == "raw":
        return x
    if norm == "max":
        top = x.max()
        return x / top if top > 0 else np.zeros_like(x)
    if norm == "minmax":
        lo, hi = x.min(), x.max()
        return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)
    if norm == "zscore":
        sd = x.std()
        return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)
    raise ValueError(f"unknown normalization {norm!r}; choose from {NORMALIZATIONS}")


def fuse_scores(dense: np.ndarray, sparse: np.ndarray, weight: float,
                norm: str = "max") -> np.ndarray:
    """Hybrid scores of one question's candidates (``dense`` and ``sparse`` aligned).

    With ``norm="max"`` the dense inner products are kept as they are and the BM25 scores are
    divided by their maximum; other normalizations rescale both sides the same way.
    """
    if dense.shape != sparse.shape:
        raise ValueError(f"dense {dense.shape} and sparse {sparse.shape} must align")
    d = dense.astype(np.float64) if norm == "max" else _scale(dense, norm)
    return d + weight * _scale(sparse, norm)


def rank_candidates(ids: np.ndarray, fused: np.ndarray, k: int) -> np.ndarray:
    """Positions into ``ids`` of the best ``k`` candidates, best first, ties by lower id."""
    order = np.lexsort((ids, -fused))
    return order[:k]


def rrf(rankings: Sequence[Sequence[int]], k: int = 60,
        weights: Sequence[float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Reciprocal-rank fusion (Cormack et al. 2009): sum_r w_r / (k + rank_r(z)), rank 1-based.

    Returns (ids, scores) best first, ties by lower id.
    """
    w = list(weights) if weights is not None else [1.0] * len(rankings)
    acc: dict[int, float] = {}
    for ranking, wr in zip(rankings, w, strict=True):
        for r, pid in enumerate(ranking, start=1):
            acc[int(pid)] = acc.get(int(pid), 0.0) + wr / (k + r)
    if not acc:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    ids = np.fromiter(acc.keys(), dtype=np.int64, count=len(acc))
    scores = np.fromiter(acc.values(), dtype=np.float64, count=len(acc))
    order = np.lexsort((ids, -scores))
    return ids[order], scores[order]
