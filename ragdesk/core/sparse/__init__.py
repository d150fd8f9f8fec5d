"""Sparse (BM25) retrieval per snapshot and hybrid dense + sparse retrieval."""

from ragdesk.core.sparse.bm25 import BM25Index
from ragdesk.core.sparse.fusion import DEFAULT_HYBRID, HybridParams, fuse_scores, rrf
from ragdesk.core.sparse.hybrid import (
    MODES,
    ScoredHit,
    dense_scored,
    register_engine_retrievers,
    retrieve,
    retrieve_batch,
)
from ragdesk.core.sparse.rerank import DEFAULT_RERANKER, Reranker, fit_reranker
from ragdesk.core.sparse.store import SparseIndex, build_sparse, ensure_sparse

__all__ = [
    "DEFAULT_HYBRID",
    "DEFAULT_RERANKER",
    "MODES",
    "BM25Index",
    "HybridParams",
    "Reranker",
    "ScoredHit",
    "SparseIndex",
    "build_sparse",
    "dense_scored",
    "ensure_sparse",
    "fit_reranker",
    "fuse_scores",
    "register_engine_retrievers",
    "retrieve",
    "retrieve_batch",
    "rrf",
]
