"""Dense, sparse (BM25) and hybrid retrieval over a snapshot.

``retrieve(snapshot, question, q_vec, k, mode)`` returns hits best first:

- ``dense``: the snapshot's exact inner-product search; ``Hit.score`` = d(z)·q(x).
- ``sparse``: BM25 over the snapshot's titles and texts; ``score`` = the BM25 score.
- ``hybrid``: candidates = top-``depth`` dense ∪ top-``depth`` BM25 (``depth`` = 200), each
  described by its exact inner product, its exact BM25 score and a few text features
  (:mod:`.features`), and ranked by a linear re-ranker fitted on half of NQ-open dev
  (:mod:`.rerank`); ``score`` = the re-ranker's log-odds that the passage holds the answer.
  Plain score fusion (normalized BM25 added to the inner product, any weight) and
  reciprocal-rank fusion do not beat dense retrieval on the starter snapshot; see
  bench/results/retrieval.md.

Sparse and hybrid hits are :class:`ScoredHit`, a :class:`Hit` that also carries
``dense_score`` (the exact d(z)·q(x), when a question vector was given) and ``sparse_score``
(BM25). The engine's p(z|x) must stay ``softmax(d(z)·q(x))`` — the distribution the
generator was trained with — so the engine's retrievers (:func:`sparse_retrieve`,
:func:`hybrid_retrieve`) hand it hits whose ``score`` is ``dense_score``: the hybrid decides
*which* K passages the generator reads, not how much it trusts each one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ragdesk.core.encoders import passage_input
from ragdesk.core.errors import BadInputError
from ragdesk.core.options import RetrieverName, check_retriever_name
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.retrieval.fusion import rank_candidates
from ragdesk.core.retrieval.protocol import SearchableSnapshot
from ragdesk.core.retrieval.request import RetrievalRequest, encode_question
from ragdesk.core.retrieval.rerank import DEFAULT_RERANKER, Reranker
from ragdesk.core.sparse.bm25 import top_k
from ragdesk.core.sparse.features import candidate_features
from ragdesk.core.sparse.store import SparseIndex, ensure_sparse
from ragdesk.core.types import Hit

if TYPE_CHECKING:
    from ragdesk.core.encoders import EncoderInfo, TextEncoder


@dataclass(frozen=True)
class ScoredHit(Hit):
    """A hit with both component scores; ``score`` is what it was ranked by."""

    dense_score: float | None = None  # exact d(z)·q(x)
    sparse_score: float | None = None  # BM25


@dataclass(frozen=True)
class Ranked:
    """One question's ranking before passages are fetched."""

    ids: np.ndarray  # int64 [m], best first
    scores: np.ndarray  # what the ranking used
    dense: np.ndarray | None  # exact inner products, aligned with ids
    sparse: np.ndarray | None  # BM25 scores, aligned with ids


def exact_inner_products(embeddings: np.ndarray, ids: np.ndarray, q: np.ndarray) -> np.ndarray:
    """d(z)·q(x) for the passages ``ids`` (sorted access keeps memory-mapped reads local)."""
    if ids.size == 0:
        return np.zeros(0, dtype=np.float32)
    order = np.argsort(ids, kind="stable")
    rows = np.asarray(embeddings[ids[order]], dtype=np.float32)
    out = np.empty(ids.shape[0], dtype=np.float32)
    out[order] = rows @ np.asarray(q, dtype=np.float32).reshape(-1)
    return out


def hybrid_candidates(question: str, dense_ids: np.ndarray, q: np.ndarray,
                      embeddings: np.ndarray, index: SparseIndex, depth: int
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One question's candidates and their re-ranker features.

    Candidates: its top-``depth`` dense ids (given) and top-``depth`` BM25 passages with a
    positive score. Returns (ids, features [m, F], exact inner products, BM25 scores).
    """
    bm25_all = index.bm25.scores(question)
    sparse_ids, _ = top_k(bm25_all, depth)
    cand = np.unique(np.concatenate([np.asarray(dense_ids[:depth], dtype=np.int64),
                                     sparse_ids]))
    q = np.asarray(q, dtype=np.float32).reshape(-1)
    dense = exact_inner_products(embeddings, cand, q)
    sparse = bm25_all[cand].astype(np.float32)
    terms = sorted(set(index.bm25.query_ids(question)))
    feats = candidate_features(
        question=question, ids=cand, dense=dense, bm25=sparse,
        q_norm=float(np.linalg.norm(q)), query_terms=terms,
        term_idf=index.bm25.idf(terms).tolist(), text_postings=index.text_postings(),
        title_postings=index.title_postings, passage_features=index.passage_features)
    return cand, feats, dense, sparse


def hybrid_rank(question: str, dense_ids: np.ndarray, q: np.ndarray, embeddings: np.ndarray,
                index: SparseIndex, k: int, reranker: Reranker = DEFAULT_RERANKER) -> Ranked:
    """The top ``k`` of one question's candidates under the re-ranker."""
    cand, feats, dense, sparse = hybrid_candidates(question, dense_ids, q, embeddings, index,
                                                   reranker.depth)
    scores = reranker.score(feats)
    pos = rank_candidates(cand, scores, k)
    return Ranked(ids=cand[pos], scores=scores[pos], dense=dense[pos], sparse=sparse[pos])


def rank_batch(
    snapshot: SearchableSnapshot,
    questions: Sequence[str],
    q_vecs: np.ndarray | None,
    k: int,
    mode: RetrieverName = "dense",
    *,
    reranker: Reranker = DEFAULT_RERANKER,
    index: SparseIndex | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> list[Ranked]:
    """Rank passages for a batch of questions without fetching their texts."""
    check_retriever_name(mode)
    if k < 1:
        raise BadInputError(f"The number of passages must be at least 1, not {k}.")
    if mode != "sparse" and q_vecs is None:
        raise ValueError(f"mode {mode!r} needs question vectors")
    q = None if q_vecs is None else np.asarray(q_vecs, dtype=np.float32).reshape(
        len(questions), -1)
    if mode == "dense":
        assert q is not None
        out = []
        for hits in snapshot.search(q, k):
            ids = np.asarray([h.id for h in hits], dtype=np.int64)
            sc = np.asarray([h.score for h in hits], dtype=np.float32)
            out.append(Ranked(ids=ids, scores=sc, dense=sc, sparse=None))
        return out
    if mode == "hybrid" and not snapshot.has_dense:
        snapshot.embeddings()  # raises DensePendingError: hybrid needs the vectors
    if index is None:
        index = ensure_sparse(snapshot, progress=progress, cancel=cancel)
    # A staged snapshot has no vectors yet: BM25 alone (dense scores come from elsewhere).
    emb = snapshot.embeddings() if q is not None and snapshot.has_dense else None
    if mode == "sparse":
        out = []
        for i, question in enumerate(questions):
            ids, sc = index.bm25.search([question], k)[0]
            dense = (exact_inner_products(emb, ids, q[i])
                     if emb is not None and q is not None else None)
            out.append(Ranked(ids=ids, scores=sc, dense=dense, sparse=sc))
        return out
    assert q is not None and emb is not None
    dense_ids = _dense_ids(snapshot, q, max(reranker.depth, 1))
    out = []
    for i, question in enumerate(questions):
        if cancel is not None:
            cancel.raise_if_cancelled()
        out.append(hybrid_rank(question, dense_ids[i], q[i], emb, index, k, reranker))
    return out


def _dense_ids(snapshot: SearchableSnapshot, q: np.ndarray, k: int) -> list[np.ndarray]:
    """Top-``k`` dense ids per query (no texts fetched)."""
    _, ids = snapshot.search_ids(q, min(k, int(snapshot.size)))
    return [row[row >= 0].astype(np.int64) for row in np.asarray(ids)]


def retrieve_batch(
    snapshot: SearchableSnapshot,
    questions: Sequence[str],
    q_vecs: np.ndarray | None,
    k: int,
    mode: RetrieverName = "dense",
    *,
    reranker: Reranker = DEFAULT_RERANKER,
    index: SparseIndex | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
) -> list[list[Hit]]:
    """Top-``k`` hits per question, best first (see the module docstring for the scores)."""
    if mode == "dense":
        assert q_vecs is not None
        hits: list[list[Hit]] = snapshot.search(
            np.asarray(q_vecs, dtype=np.float32).reshape(len(questions), -1), k)
        return hits
    ranked = rank_batch(snapshot, questions, q_vecs, k, mode, reranker=reranker, index=index,
                        progress=progress, cancel=cancel)
    all_ids = sorted({int(i) for r in ranked for i in r.ids})
    passages = {p.id: p for p in snapshot.get_passages(all_ids)} if all_ids else {}
    out: list[list[Hit]] = []
    for r in ranked:
        row: list[Hit] = []
        for j, pid in enumerate(r.ids.tolist()):
            p = passages[pid]
            row.append(ScoredHit(
                id=pid, title=p.title, text=p.text, score=float(r.scores[j]),
                dense_score=None if r.dense is None else float(r.dense[j]),
                sparse_score=None if r.sparse is None else float(r.sparse[j])))
        out.append(row)
    return out


def retrieve(snapshot: SearchableSnapshot, question: str, q_vec: np.ndarray | None, k: int,
             mode: RetrieverName = "dense", *, reranker: Reranker = DEFAULT_RERANKER) -> list[Hit]:
    """One question; ``q_vec`` is its question-encoder vector (None only for ``sparse``)."""
    vecs = None if q_vec is None else np.asarray(q_vec, dtype=np.float32).reshape(1, -1)
    return retrieve_batch(snapshot, [question], vecs, k, mode, reranker=reranker)[0]


def dense_scored(hits: Sequence[Hit]) -> list[Hit]:
    """The same passages and order with ``score`` = the exact inner product, for p(z|x)."""
    out: list[Hit] = []
    for h in hits:
        d = h.dense_score if isinstance(h, ScoredHit) else None
        out.append(Hit(id=h.id, title=h.title, text=h.text,
                       score=float(h.score if d is None else d)))
    return out


def with_dense_scores(hits: Sequence[Hit], encoder: TextEncoder, q: np.ndarray,
                      passage_encoder: EncoderInfo) -> list[Hit]:
    """BM25 hits of a snapshot whose vectors are pending, given their exact d(z)·q(x).

    p(z|x) is defined on inner products (and τ was fitted on them), so while the passage
    vectors are being computed the K retrieved passages are encoded here, with the question
    encoder — possible when it is the very model that encodes the passages (a
    sentence-transformers snapshot queried with its own encoder, as the starter pack is).
    Otherwise the hits keep their BM25 scores.
    """
    same = (encoder.info.family == "sentence-transformers"
            and encoder.info.id == passage_encoder.id and encoder.info.dim == passage_encoder.dim)
    if not hits or not same:
        return list(hits)
    # one string per passage: sentence-transformers (checked above) takes no (title, text) pair
    texts = [str(passage_input(encoder, h.title, h.text)) for h in hits]
    vecs = encoder.encode(texts, role="passage")  # the question encoder, with passages' prompt
    dense = vecs @ np.asarray(q, dtype=np.float32).reshape(-1)
    return [ScoredHit(id=h.id, title=h.title, text=h.text, score=h.score,
                      dense_score=float(d),
                      sparse_score=h.sparse_score if isinstance(h, ScoredHit) else None)
            for h, d in zip(hits, dense.tolist(), strict=True)]


def _engine_hits(req: RetrievalRequest, mode: RetrieverName) -> list[Hit]:
    q = encode_question(req)
    hits = retrieve(req.snapshot, req.question, q[0], req.n_docs, mode)
    if not req.snapshot.has_dense:
        hits = with_dense_scores(hits, req.question_encoder, q[0], req.snapshot.encoder)
    return dense_scored(hits)


def sparse_retrieve(req: RetrievalRequest) -> list[Hit]:
    """BM25's top ``n_docs``, scored by their exact inner products for p(z|x)."""
    return _engine_hits(req, "sparse")


def hybrid_retrieve(req: RetrievalRequest) -> list[Hit]:
    """The re-ranked dense ∪ BM25 candidates, scored by their exact inner products."""
    return _engine_hits(req, "hybrid")
