"""Retrieval: which K passages a question reads, and p(z|x) over them.

- :mod:`.protocol`: what a retriever needs of a snapshot (:class:`SearchableSnapshot`);
- :mod:`.request`: :class:`RetrievalRequest` and the checks every retriever makes;
- :mod:`.dense` (DPR-style inner product), :mod:`.hybrid` (BM25, and dense ∪ BM25 re-ranked,
  with :mod:`.fusion` and :mod:`.rerank`); the BM25 index itself is ``ragdesk.core.sparse``;
- :mod:`.registry`: retrievers by name for ``Engine.answer(retriever=...)``;
- :mod:`.scores`: p(z|x) = softmax(d(z)·q(x) / τ) and the docs an answer cites.
"""

from ragdesk.core.retrieval.dense import dense_retrieve
from ragdesk.core.retrieval.fusion import DEFAULT_HYBRID, HybridParams, fuse_scores, rrf
from ragdesk.core.retrieval.hybrid import (
    ScoredHit,
    dense_scored,
    hybrid_retrieve,
    rank_batch,
    retrieve,
    retrieve_batch,
    sparse_retrieve,
)
from ragdesk.core.retrieval.protocol import SearchableSnapshot
from ragdesk.core.retrieval.registry import get_retriever, register_retriever
from ragdesk.core.retrieval.request import RetrievalRequest, Retriever, check_n_docs
from ragdesk.core.retrieval.rerank import DEFAULT_RERANKER, Reranker, fit_reranker
from ragdesk.core.retrieval.scores import doc_log_probs, retrieved_docs

__all__ = [
    "DEFAULT_HYBRID",
    "DEFAULT_RERANKER",
    "HybridParams",
    "Reranker",
    "RetrievalRequest",
    "Retriever",
    "ScoredHit",
    "SearchableSnapshot",
    "check_n_docs",
    "dense_retrieve",
    "dense_scored",
    "doc_log_probs",
    "fit_reranker",
    "fuse_scores",
    "get_retriever",
    "hybrid_retrieve",
    "rank_batch",
    "register_retriever",
    "retrieve",
    "retrieve_batch",
    "retrieved_docs",
    "rrf",
    "sparse_retrieve",
]
