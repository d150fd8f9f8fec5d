"""The retrieval map's projection: PCA against scikit-learn, the lift's two invariants,
neighbour selection against a numpy exact search, and the cache."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ragdesk.core import projection as projmod
from ragdesk.core.projection import (
    ArraySnapshot,
    ProjectionCache,
    ProjectionUnavailable,
    build_map,
    doc_probs,
    fit_projection,
    search_from,
)


def _vectors(n: int = 400, dim: int = 16, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    # Anisotropic so the first two components are well separated.
    scale = np.linspace(3.0, 0.2, dim)
    return (rng.standard_normal((n, dim)) * scale + rng.standard_normal(dim)).astype(np.float32)


def _snapshot(n: int = 400, dim: int = 16, seed: int = 0) -> ArraySnapshot:
    v = _vectors(n, dim, seed)
    return ArraySnapshot("test", v, [f"Passage {i}" for i in range(n)])


def test_pca_matches_scikit_learn() -> None:
    from sklearn.decomposition import PCA

    v = _vectors()
    proj = fit_projection(v)
    ref = PCA(n_components=2, svd_solver="full").fit(v.astype(np.float64))
    np.testing.assert_allclose(proj.mean, ref.mean_, atol=1e-9)
    for mine, theirs in zip(proj.components, ref.components_, strict=True):
        # PCA fixes components only up to sign.
        sign = np.sign(mine @ theirs)
        np.testing.assert_allclose(mine, sign * theirs, atol=1e-8)
    np.testing.assert_allclose(proj.explained_variance_ratio, ref.explained_variance_ratio_,
                               rtol=1e-8)
    np.testing.assert_allclose(np.abs(proj.project(v)), np.abs(ref.transform(v)), atol=1e-6)
    np.testing.assert_allclose(proj.components @ proj.components.T, np.eye(2), atol=1e-12)


def test_pca_wide_matrix_path_matches_scikit_learn() -> None:
    # Fewer rows than dimensions takes the plain-SVD branch.
    from sklearn.decomposition import PCA

    v = _vectors(n=10, dim=40)
    proj = fit_projection(v)
    ref = PCA(n_components=2, svd_solver="full").fit(v.astype(np.float64))
    np.testing.assert_allclose(np.abs(proj.project(v)), np.abs(ref.transform(v)), atol=1e-6)


def test_fit_samples_at_most_the_limit_and_reads_a_memmap(tmp_path) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    v = (rng.standard_normal((3000, 8)) * [6, 3, 1, 1, 0.5, 0.5, 0.2, 0.2]).astype(np.float32)
    path = tmp_path / "emb.npy"
    np.save(path, v.astype(np.float16))
    mm = np.load(path, mmap_mode="r")
    proj = fit_projection(mm, sample=500, seed=3)
    assert proj.n_fit == 500
    # A sample gives nearly the same plane as the whole set.
    full = fit_projection(v)
    overlap = np.abs(proj.components @ full.components.T)
    assert overlap[0, 0] > 0.99 and overlap[1, 1] > 0.99


@pytest.mark.parametrize("n", [0, 1, 2])
def test_fewer_than_three_passages_is_meaningless(n: int) -> None:
    with pytest.raises(ProjectionUnavailable, match="meaningless"):
        fit_projection(np.ones((n, 4), dtype=np.float32))


def test_three_passages_are_enough() -> None:
    proj = fit_projection(_vectors(n=3, dim=5))
    assert proj.components.shape == (2, 5)


def test_lift_projects_back_and_keeps_off_plane_component() -> None:
    v = _vectors()
    proj = fit_projection(v)
    rng = np.random.default_rng(1)
    q = rng.standard_normal(int(v.shape[1])).astype(np.float32)
    target = np.array([2.5, -1.25])
    moved = proj.lift(target, q)
    assert moved.dtype == np.float32
    np.testing.assert_allclose(proj.project(moved), target, atol=1e-5)
    # Independent check of the off-plane part: remove the plane with a projector built here.
    p = proj.components
    off = np.eye(v.shape[1]) - p.T @ p
    np.testing.assert_allclose(off @ (moved - proj.mean), off @ (q - proj.mean), atol=1e-5)
    # Not moving is the identity.
    np.testing.assert_allclose(proj.lift(proj.project(q), q), q, atol=1e-5)


def test_build_map_neighbours_equal_numpy_exact_search() -> None:
    snap = _snapshot()
    v = snap.embeddings()
    q = v[7] + 0.1
    data = build_map(snap, q, k=5, n_neighbours=50, projection=fit_projection(v))
    scores = v @ q
    order = np.argsort(-scores)
    assert [p.id for p in data.points] == order[:50].tolist()
    assert [d.id for d in data.retrieved] == order[:5].tolist()
    e = np.exp(scores[order[:5]] - scores[order[0]])
    np.testing.assert_allclose([d.prob for d in data.retrieved], e / e.sum(), rtol=1e-5)
    np.testing.assert_allclose([p.xy for p in data.points],
                               data.projection.project(v[order[:50]]), atol=1e-6)
    np.testing.assert_allclose(data.query_xy, data.projection.project(q), atol=1e-6)


def test_search_from_reports_only_unseen_points() -> None:
    snap = _snapshot()
    proj = fit_projection(snap.embeddings())
    q = snap.embeddings()[3]
    seen = {int(i) for i in np.argsort(-(snap.embeddings() @ q))[:2]}
    res = search_from(snap, proj, q, k=5, known_ids=seen.__contains__)
    assert len(res.retrieved) == 5
    assert {p.id for p in res.new_points} == {d.id for d in res.retrieved} - seen


def test_doc_probs_is_a_softmax() -> None:
    from ragdesk.core.types import Hit

    hits = [Hit(i, "", "", s) for i, s in enumerate([3.0, 1.0, -2.0])]
    p = np.array(doc_probs(hits))
    ref = np.exp([3.0, 1.0, -2.0]) / np.exp([3.0, 1.0, -2.0]).sum()
    np.testing.assert_allclose(p, ref, rtol=1e-12)


def test_cache_fits_once_per_snapshot_even_from_many_threads(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    calls: list[int] = []
    real = projmod._fit_for_cache

    def counting(vectors, *, cancel):  # type: ignore[no-untyped-def]
        calls.append(threading.get_ident())
        return real(vectors, cancel=cancel)

    monkeypatch.setattr(projmod, "_fit_for_cache", counting)
    cache = ProjectionCache()
    a, b = _snapshot(seed=0), ArraySnapshot("other", _vectors(seed=1), ["t"] * 400)
    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get(a))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert all(r is results[0] for r in results)
    assert a in cache and b not in cache
    cache.get(b)
    assert len(calls) == 2
