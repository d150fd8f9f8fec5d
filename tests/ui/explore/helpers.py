"""Shared pieces of the explore-view tests: vectors with structure, an independent exact
search, the lift written out again, and synthetic answers."""

from __future__ import annotations

import threading

import numpy as np

from ragdesk.core.projection import ArraySnapshot, Projection
from ragdesk.core.types import Answer, AnswerToken, Hit, RetrievedDoc


def clustered_vectors(n: int = 600, dim: int = 24, seed: int = 0) -> np.ndarray:
    """Passages in a few clusters spread along the leading directions, like topics."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((6, dim)) * np.linspace(4.0, 0.5, dim)
    labels = rng.integers(0, len(centres), n)
    return (centres[labels] + rng.standard_normal((n, dim)) * 0.6).astype(np.float32)


def array_snapshot(n: int = 600, dim: int = 24, seed: int = 0, name: str = "arrays"
                   ) -> ArraySnapshot:
    v = clustered_vectors(n, dim, seed)
    return ArraySnapshot(name, v, [f"Passage {i}" for i in range(n)],
                         [f"text of passage {i}" for i in range(n)])


def lift_by_hand(proj: Projection, xy: tuple[float, float], q: np.ndarray) -> np.ndarray:
    """q' = q + Pᵀ(p' − P(q − μ)), written out independently of ``Projection.lift``."""
    p = np.asarray(proj.components, dtype=np.float64)
    mu = np.asarray(proj.mean, dtype=np.float64)
    q64 = np.asarray(q, dtype=np.float64)
    return (q64 + p.T @ (np.asarray(xy, dtype=np.float64) - p @ (q64 - mu))).astype(np.float32)


def exact_top_k(vectors: np.ndarray, q: np.ndarray, k: int) -> tuple[list[int], list[float]]:
    """Top k by exact inner product with FAISS' flat index, and p(z|x) = softmax of scores."""
    import faiss

    index = faiss.IndexFlatIP(vectors.shape[1])
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    scores, ids = index.search(np.asarray(q, dtype=np.float32).reshape(1, -1), k)
    s = scores[0].astype(np.float64)
    e = np.exp(s - s.max())
    return ids[0].tolist(), (e / e.sum()).tolist()


class GatedSnapshot:
    """An ArraySnapshot whose searches wait for a gate, to hold a search in flight."""

    def __init__(self, inner: ArraySnapshot) -> None:
        self.inner = inner
        self.gate = threading.Event()
        self.gate.set()
        self.searches = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def size(self) -> int:
        return self.inner.size

    def embeddings(self) -> np.ndarray:
        return self.inner.embeddings()

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        self.searches += 1
        self.gate.wait(timeout=20)
        return self.inner.search(queries, k)


def synthetic_answer(mode: str, n_tokens: int, k: int = 5, seed: int = 0,
                     question: str = "who wrote the iliad") -> Answer:
    """An answer with random (but properly normalised) stored posteriors."""
    rng = np.random.default_rng(seed)
    prior = rng.dirichlet(np.ones(k))
    docs = [RetrievedDoc(id=100 + i, title=f"Title {i + 1}", text=f"text {i}", score=float(-i),
                         prob=float(prior[i])) for i in range(k)]
    words = ["Homer", " is", " the", " author", " of", " the", " Iliad", " and", " the",
             " Odyssey", ".", "</s>"]
    tokens = [AnswerToken(id=1000 + i, text=words[i % len(words)],
                          posterior=[float(x) for x in rng.dirichlet(np.ones(k) * 0.7)])
              for i in range(n_tokens)]
    return Answer(question=question, text="".join(t.text for t in tokens),
                  token_ids=[t.id for t in tokens], tokens=tokens, docs=docs, logprob=-3.2,
                  mode=mode, decoding="thorough" if mode == "sequence" else None)
