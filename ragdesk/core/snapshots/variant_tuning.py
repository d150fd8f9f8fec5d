"""Measuring and tuning a compressed index variant against exact search: recall@k, stand-in
questions sampled from the passages, and the search knobs (``nprobe`` / ``ef_search``,
``rerank``) that reach a target recall at the least cost."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from ragdesk.core.progress import CancelToken
from ragdesk.core.safe_json import as_int
from ragdesk.core.snapshots.faiss_variants import IVF_PQ, set_search_params, training_sample
from ragdesk.core.snapshots.variant_search import RerankSearcher

RECALL_K = 20
# Grids the tuner walks; a value is skipped when it does not apply (nprobe > nlist).
NPROBE_GRID = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
EF_GRID = (16, 32, 48, 64, 96, 128, 192, 256, 384, 512)
RERANK_GRID = (20, 30, 50, 75, 100, 150, 200, 300, 400, 600, 800, 1000)


def recall_at_k(approx: np.ndarray, exact: np.ndarray, k: int = RECALL_K) -> float:
    """Mean fraction of the exact top-k ids that the approximate top-k found."""
    a, e = approx[:, :k], exact[:, :k]
    found = ((a[:, :, None] == e[:, None, :]) & (e[:, None, :] >= 0)).any(axis=1)
    total = int((e >= 0).sum())
    return float(found.sum() / total) if total else 1.0


# Questions are far from the passages that answer them (NQ-open dev questions reach a mean
# cosine of 0.47 with their best all-MiniLM-L6-v2 passage), and an index is much harder to
# search from there than from a stored vector: tuned on stored passage vectors, IVF-PQ
# reached recall@20 0.96 on them but 0.86 on the questions. Passage vectors pushed away to
# cosine 0.4 in a random direction gave recall within about 0.03 of the questions' across
# the whole probes x candidates grid (bench/index_bench.py).
PROXY_COSINE = 0.4


def sample_queries(emb: np.ndarray, n: int, seed: int = 1,
                   cosine: float = PROXY_COSINE) -> np.ndarray:
    """Stand-in questions for tuning: sampled passage vectors turned to ``cosine`` with
    their passage in a random direction (``cosine=1`` gives the passage vectors)."""
    p = training_sample(emb, min(n, emb.shape[0]), seed)
    norms = np.linalg.norm(p, axis=1, keepdims=True)
    u = p / np.where(norms > 0, norms, 1.0)
    if cosine >= 1.0:
        return u.astype(np.float32)
    noise = np.random.default_rng(seed + 1).standard_normal(p.shape).astype(np.float32)
    noise -= np.sum(noise * u, axis=1, keepdims=True) * u  # orthogonal to the passage
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    out: np.ndarray = (cosine * u + np.sqrt(1 - cosine**2) * noise).astype(np.float32)
    return out


FOUND_CHUNK = 256  # queries compared at once: chunk x candidates x k booleans


def found_at_depth(candidates: np.ndarray, exact: np.ndarray, k: int = RECALL_K
                   ) -> dict[int, float]:
    """For each depth r in 1..width: the share of the exact top-k ids (-1 ids are not ids)
    among the first r candidates. A lookup table, so every depth costs nothing more."""
    e = exact[:, :k]
    first = np.full(e.shape, np.iinfo(np.int64).max, dtype=np.int64)
    for s in range(0, len(e), FOUND_CHUNK):
        eq = candidates[s:s + FOUND_CHUNK, :, None] == e[s:s + FOUND_CHUNK, None, :]
        hit = eq.any(axis=1)
        first[s:s + len(hit)] = np.where(hit, eq.argmax(axis=1), first[s:s + len(hit)])
    valid = e >= 0
    total = int(valid.sum())
    if not total:
        return dict.fromkeys(range(1, candidates.shape[1] + 1), 1.0)
    # found_by[r] = exact ids first seen at a position < r, over all queries
    pos = first[valid]
    counts = np.bincount(pos[pos < candidates.shape[1]], minlength=candidates.shape[1])
    cum = np.cumsum(counts)
    return {r: float(cum[r - 1] / total) for r in range(1, candidates.shape[1] + 1)}


@dataclass(frozen=True)
class TuneResult:
    params: dict[str, int]  # search parameters chosen: nprobe or ef_search, and rerank
    recall: float
    table: list[dict[str, float]]  # every point tried: params, recall, cost


def _cost(variant: str, build: Mapping[str, object], knob: int, rr: int, n: int, dim: int) -> float:
    """Rough work per query: codes scanned + exact rows read (a random read costs more)."""
    if variant == IVF_PQ:
        scanned = knob * n / max(1, as_int(build["nlist"])) * as_int(build["m"])
    else:
        scanned = knob * as_int(build["M"]) * dim / 4
    return scanned + rr * dim * 4


def tune(searcher: RerankSearcher, queries: np.ndarray, exact_ids: np.ndarray, *,
         target: float, k: int = RECALL_K, knobs: tuple[int, ...] | None = None,
         reranks: tuple[int, ...] | None = None,
         cancel: CancelToken | None = None,
         on_point: Callable[[dict[str, float]], None] | None = None) -> TuneResult:
    """Cheapest (probes or ef, rerank) whose recall@k on ``queries`` reaches ``target``.

    One candidate search per probe setting serves every rerank depth: candidate lists come
    ordered by approximate score, so depth r uses the first r of them. Re-ranking by exact
    score keeps every exact top-k id that is among the candidates (only exact top-k ids can
    outscore one), so recall@k after re-ranking is the share of exact top-k ids among the
    candidates (``found_at_depth``), and no vector has to be read to tune.
    """
    variant = searcher.variant
    n, dim = searcher.emb.shape
    build = searcher.params
    knob_name = "nprobe" if variant == IVF_PQ else "ef_search"
    if knobs is None:
        limit = as_int(build["nlist"]) if variant == IVF_PQ else 10**9
        knobs = tuple(v for v in (NPROBE_GRID if variant == IVF_PQ else EF_GRID) if v <= limit)
    rr_grid = tuple(sorted({min(r, n) for r in (reranks or RERANK_GRID) if r >= k})) \
        or (min(k, n),)
    table: list[dict[str, float]] = []
    best: dict[str, float] | None = None
    for knob in knobs:
        if cancel is not None:
            cancel.raise_if_cancelled()
        # Only depths that would still be cheaper than the best setting found are worth it.
        depths = [rr for rr in rr_grid if best is None
                  or _cost(variant, build, knob, rr, n, dim) < best["cost"]]
        if not depths:
            break  # more probes only cost more
        set_search_params(searcher.index, variant, {knob_name: knob})
        found = found_at_depth(searcher.candidates_for(queries, max(depths)), exact_ids, k)
        for rr in depths:
            point: dict[str, float] = {knob_name: knob, "rerank": rr, "recall": found[rr],
                     "cost": _cost(variant, build, knob, rr, n, dim)}
            table.append(point)
            if on_point is not None:
                on_point(point)
            if point["recall"] >= target:
                if best is None or point["cost"] < best["cost"]:
                    best = point
                break  # deeper reranks at this setting only cost more
    if best is None:
        best = max(table, key=lambda p: (p["recall"], -p["cost"]))
    chosen = {knob_name: int(best[knob_name]), "rerank": int(best["rerank"])}
    set_search_params(searcher.index, variant, {**build, **chosen})
    searcher.params.update(chosen)
    searcher.candidates = chosen["rerank"]
    return TuneResult(chosen, float(best["recall"]), table)
