"""The sparse (BM25) index of a snapshot: tokens, the index files and the per-passage
features the hybrid re-ranker reads. The retrievers that use it are ragdesk.core.retrieval."""

from ragdesk.core.sparse.bm25 import BM25Index
from ragdesk.core.sparse.source import PassageSource
from ragdesk.core.sparse.store import SparseIndex, build_sparse, ensure_sparse

__all__ = [
    "BM25Index",
    "PassageSource",
    "SparseIndex",
    "build_sparse",
    "ensure_sparse",
]
