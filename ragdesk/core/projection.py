"""A 2-D view of a snapshot's vector space: PCA, its inverse for a dragged query, and the
passages worth drawing around a question.

The retrieval map draws passages in the plane of the snapshot's first two principal
components. A user drags the question around that plane; :meth:`Projection.lift` turns the
dragged 2-D point back into a full query vector that keeps everything of the original question
that the plane does not show, so retrieval changes only along the directions the user moved:

    q' = q + Pᵀ (p' − P (q − μ))

with ``P`` the 2 × dim matrix of orthonormal components and ``μ`` the mean the PCA removed.
Then ``project(q') == p'`` exactly, and ``(I − PᵀP)(q' − μ) == (I − PᵀP)(q − μ)``.

No Qt here: the GUI runs these functions in worker threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ragdesk.core.errors import RagdeskError
from ragdesk.core.posterior import probs_np, temperature_of
from ragdesk.core.progress import CancelToken
from ragdesk.core.types import Hit, RetrievedDoc

FIT_SAMPLE = 20_000
DEFAULT_NEIGHBOURS = 300
MIN_PASSAGES = 3


class ProjectionUnavailable(RagdeskError):
    """The snapshot has too few passages for a 2-D map to say anything."""

    hint_default = "Import a snapshot with more passages to see the retrieval map."


class VectorSnapshot(Protocol):
    """What the map needs from a snapshot; ``SnapshotIndex`` provides all of it."""

    @property
    def name(self) -> str: ...

    @property
    def size(self) -> int: ...

    def embeddings(self) -> np.ndarray: ...

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]: ...


@dataclass(frozen=True)
class Projection:
    """PCA onto two components: ``mean`` [dim] and orthonormal ``components`` [2, dim]."""

    mean: np.ndarray
    components: np.ndarray
    explained_variance_ratio: tuple[float, float]
    n_fit: int

    @property
    def dim(self) -> int:
        return int(self.mean.shape[0])

    def project(self, vectors: np.ndarray) -> np.ndarray:
        """[n, dim] (or [dim]) → [n, 2] (or [2]) float64 coordinates in the PCA plane."""
        v = np.asarray(vectors, dtype=np.float64)
        out: np.ndarray = (v - self.mean) @ self.components.T
        return out

    def lift(self, point_2d: Sequence[float] | np.ndarray, original_query: np.ndarray
             ) -> np.ndarray:
        """The full float32 query that projects to ``point_2d`` and keeps the original
        question's off-plane component (see the module docstring)."""
        q = np.asarray(original_query, dtype=np.float64).reshape(-1)
        if q.shape[0] != self.dim:
            raise ValueError(f"query has {q.shape[0]} dimensions, the projection {self.dim}")
        p_new = np.asarray(point_2d, dtype=np.float64).reshape(2)
        moved: np.ndarray = q + self.components.T @ (p_new - self.project(q))
        return moved.astype(np.float32)


def fit_projection(vectors: np.ndarray, *, sample: int = FIT_SAMPLE, seed: int = 0,
                   cancel: CancelToken | None = None) -> Projection:
    """PCA fitted on at most ``sample`` rows of ``vectors`` (a memory-map is fine: only the
    sampled rows are read). Deterministic for a given seed."""
    n = int(vectors.shape[0])
    if n < MIN_PASSAGES:
        raise ProjectionUnavailable(
            f"The snapshot has {n} passage{'s' if n != 1 else ''}; a 2-D projection of fewer "
            f"than {MIN_PASSAGES} passages would be meaningless."
        )
    if n > sample:
        rng = np.random.default_rng(seed)
        # Sorted indices read a memory-map front to back instead of seeking at random.
        rows = np.sort(rng.choice(n, size=sample, replace=False))
        x = np.asarray(vectors[rows], dtype=np.float64)
    else:
        x = np.asarray(vectors, dtype=np.float64)
    if cancel is not None:
        cancel.raise_if_cancelled()
    mean = x.mean(axis=0)
    xc = x - mean
    if xc.shape[0] > xc.shape[1]:
        # The right singular vectors of Xc are those of the (dim × dim) scatter matrix,
        # whose SVD is far cheaper than that of a 20k-row sample.
        _, s2, vt = np.linalg.svd(xc.T @ xc, hermitian=True)
        variances = s2
    else:
        _, s, vt = np.linalg.svd(xc, full_matrices=False)
        variances = s**2
    comps = vt[:2].copy()
    # Fix each component's sign (largest |coordinate| positive) so a refit draws the same map.
    for c in comps:
        if c[np.argmax(np.abs(c))] < 0:
            c *= -1.0
    total = float(variances.sum())
    ratio = (float(variances[0] / total), float(variances[1] / total)) if total > 0 else (0.0,
                                                                                         0.0)
    return Projection(mean=mean, components=comps, explained_variance_ratio=ratio,
                      n_fit=int(x.shape[0]))


def snapshot_key(snapshot: VectorSnapshot) -> Hashable:
    """What identifies a snapshot's vectors: its name and size, plus its manifest's creation
    time where it has one (a re-import under the same name gets a new key)."""
    manifest: object = getattr(snapshot, "manifest", None)
    created: object = None
    if isinstance(manifest, dict):
        created = manifest.get("created")
    elif manifest is not None:
        created = getattr(manifest, "created", None)
    return (snapshot.name, int(snapshot.size), None if created is None else str(created))


class ProjectionCache:
    """Fitted projections per snapshot, kept in memory; thread-safe, and one fit per key even
    when several threads ask at once."""

    def __init__(self, max_entries: int = 8) -> None:
        self._max = max_entries
        self._items: OrderedDict[Hashable, Projection] = OrderedDict()
        self._lock = threading.Lock()
        self._fitting: dict[Hashable, threading.Lock] = {}

    def get(self, snapshot: VectorSnapshot, *, cancel: CancelToken | None = None
            ) -> Projection:
        key = snapshot_key(snapshot)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit
            key_lock = self._fitting.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                hit = self._items.get(key)
            if hit is not None:
                return hit
            # Looked up through the module so tests can watch which thread fits.
            proj = _fit_for_cache(snapshot.embeddings(), cancel=cancel)
            with self._lock:
                self._items[key] = proj
                self._fitting.pop(key, None)
                while len(self._items) > self._max:
                    self._items.popitem(last=False)
            return proj

    def __contains__(self, snapshot: object) -> bool:
        try:
            key = snapshot_key(snapshot)  # type: ignore[arg-type]
        except AttributeError:
            return False
        with self._lock:
            return key in self._items

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


def _fit_for_cache(vectors: np.ndarray, *, cancel: CancelToken | None) -> Projection:
    return fit_projection(vectors, cancel=cancel)


_CACHE = ProjectionCache()


def get_projection(snapshot: VectorSnapshot, *, cancel: CancelToken | None = None
                   ) -> Projection:
    """The snapshot's projection, fitted on first use and then served from memory."""
    return _CACHE.get(snapshot, cancel=cancel)


def projection_cache() -> ProjectionCache:
    return _CACHE


def doc_probs(hits: Sequence[Hit], temperature: float = 1.0) -> list[float]:
    """p(z|x) over the top-K (see :mod:`ragdesk.core.posterior`)."""
    return [float(v) for v in probs_np([h.score for h in hits], temperature)]


def retrieved_docs(hits: Sequence[Hit], snapshot: str | None = None,
                   temperature: float = 1.0) -> list[RetrievedDoc]:
    return [RetrievedDoc(id=h.id, title=h.title, text=h.text, score=h.score, prob=p,
                         snapshot=snapshot)
            for h, p in zip(hits, doc_probs(hits, temperature), strict=True)]



def passage_vectors(snapshot: VectorSnapshot, ids: Sequence[int]) -> np.ndarray:
    """Rows of the snapshot's embeddings as float32 (reads only those rows of a memory-map)."""
    if len(ids) == 0:
        return np.zeros((0, int(snapshot.embeddings().shape[1])), dtype=np.float32)
    idx = np.asarray(ids, dtype=np.int64)
    order = np.argsort(idx)
    emb = snapshot.embeddings()
    rows = np.empty((len(idx), emb.shape[1]), dtype=np.float32)
    rows[order] = emb[idx[order]]
    return rows


@dataclass(frozen=True)
class MapPoint:
    """One passage on the map: its id, title, 2-D position, the inner product with the query
    that found it, and its text (for the preview)."""

    id: int
    title: str
    xy: tuple[float, float]
    score: float
    text: str = ""


@dataclass(frozen=True)
class MapData:
    """Everything the retrieval map draws for one question."""

    snapshot: str
    projection: Projection
    query: np.ndarray  # the question's full float32 vector
    query_xy: tuple[float, float]
    points: list[MapPoint]  # the neighbours, nearest first (they include the top K)
    retrieved: list[RetrievedDoc]  # the question's top K, with p(z|x)


@dataclass(frozen=True)
class SearchResult:
    """A search from a (possibly dragged) query: its top K and the map points of any
    retrieved passage that was not drawn yet."""

    query: np.ndarray
    retrieved: list[RetrievedDoc]
    new_points: list[MapPoint]


def build_map(snapshot: VectorSnapshot, query: np.ndarray, *, k: int = 5,
              n_neighbours: int = DEFAULT_NEIGHBOURS,
              projection: Projection | None = None,
              cancel: CancelToken | None = None) -> MapData:
    """The question, its top ``k`` and its ``n_neighbours`` nearest passages (by the same
    inner product retrieval uses), projected into the snapshot's PCA plane."""
    proj = projection if projection is not None else get_projection(snapshot, cancel=cancel)
    q = np.asarray(query, dtype=np.float32).reshape(1, -1)
    if q.shape[1] != proj.dim:
        raise ValueError(f"query has {q.shape[1]} dimensions, the snapshot {proj.dim}")
    want = min(max(k, n_neighbours), int(snapshot.size))
    hits = snapshot.search(q, want)[0]
    if cancel is not None:
        cancel.raise_if_cancelled()
    xy = proj.project(passage_vectors(snapshot, [h.id for h in hits]))
    points = [MapPoint(id=h.id, title=h.title, xy=(float(a), float(b)), score=h.score,
                       text=h.text) for h, (a, b) in zip(hits, xy, strict=True)]
    qxy = proj.project(q[0])
    return MapData(snapshot=snapshot.name, projection=proj, query=q[0].copy(),
                   query_xy=(float(qxy[0]), float(qxy[1])), points=points,
                   retrieved=retrieved_docs(hits[:k], snapshot.name,
                                            temperature_of(snapshot)))


def search_from(snapshot: VectorSnapshot, projection: Projection, query: np.ndarray, *,
                k: int, known_ids: Callable[[int], bool] | None = None) -> SearchResult:
    """Exact top ``k`` for a full query vector, plus map points for retrieved passages the
    map has not drawn (``known_ids`` says which it has)."""
    q = np.asarray(query, dtype=np.float32).reshape(1, -1)
    hits = snapshot.search(q, min(k, int(snapshot.size)))[0]
    fresh = [h for h in hits if known_ids is None or not known_ids(h.id)]
    xy = projection.project(passage_vectors(snapshot, [h.id for h in fresh]))
    new_points = [MapPoint(id=h.id, title=h.title, xy=(float(a), float(b)), score=h.score,
                           text=h.text) for h, (a, b) in zip(fresh, xy, strict=True)]
    return SearchResult(query=q[0].copy(),
                        retrieved=retrieved_docs(hits, snapshot.name, temperature_of(snapshot)),
                        new_points=new_points)


class ArraySnapshot:
    """An in-memory snapshot (vectors and titles) with exact inner-product search: for
    tests and for maps of vectors that live in no snapshot folder."""

    def __init__(self, name: str, vectors: np.ndarray, titles: Sequence[str],
                 texts: Sequence[str] | None = None) -> None:
        if len(titles) != vectors.shape[0]:
            raise ValueError("one title per vector")
        self._name = name
        self._vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self._titles = list(titles)
        self._texts = list(texts) if texts is not None else ["" for _ in titles]

    @property
    def name(self) -> str:
        return self._name

    @property
    def size(self) -> int:
        return int(self._vectors.shape[0])

    def embeddings(self) -> np.ndarray:
        return self._vectors

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        scores = np.asarray(queries, dtype=np.float32) @ self._vectors.T
        out: list[list[Hit]] = []
        for row in scores:
            k_eff = min(k, row.shape[0])
            top = np.argpartition(-row, k_eff - 1)[:k_eff]
            top = top[np.lexsort((top, -row[top]))]
            out.append([Hit(int(i), self._titles[i], self._texts[i], float(row[i]))
                        for i in top])
        return out
