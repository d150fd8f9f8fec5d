from __future__ import annotations

import math

import numpy as np
import pytest

from ragdesk.core.training.guard import (
    CollapseThresholds,
    RetrievalStats,
    check_collapse,
    retrieval_stats,
)


@pytest.mark.parametrize("tau", [1.0, 0.088])
def test_retrieval_stats_match_a_naive_computation(tau: float) -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(6, 4)) * 3
    top1 = [5, 5, 2, 9, 2, 5]
    st = retrieval_stats(scores, top1, tau)
    ents = []
    for row in scores:
        z = sum(math.exp(x / tau - max(row) / tau) for x in row)
        ps = [math.exp(x / tau - max(row) / tau) / z for x in row]
        ents.append(-sum(p * math.log(p) for p in ps if p > 0))
    assert st.mean_entropy == pytest.approx(sum(ents) / len(ents), rel=1e-9)
    assert st.temperature == tau
    assert st.distinct_top1 == 3
    assert (st.n_questions, st.n_docs) == (6, 4)


def test_the_guard_sees_the_snapshots_temperature() -> None:
    """Cosines of a normalized encoder (0.5-0.8): at τ = 1 every one of 5 passages gets about
    0.2 and the entropy sits at ln 5 whatever training does; at the encoder's τ it moves."""
    rng = np.random.default_rng(1)
    cos = np.sort(rng.uniform(0.5, 0.8, size=(50, 5)), axis=1)[:, ::-1]
    flat = retrieval_stats(cos, list(range(50)), 1.0)
    seen = retrieval_stats(cos, list(range(50)), 0.088)
    assert flat.mean_entropy > 0.99 * math.log(5)
    assert seen.mean_entropy < 0.9 * math.log(5)


def _stats(entropy: float, distinct: int, n_docs: int = 5) -> RetrievalStats:
    return RetrievalStats(n_questions=100, n_docs=n_docs, mean_entropy=entropy,
                          distinct_top1=distinct)


def test_no_collapse_when_the_retriever_keeps_its_diversity() -> None:
    base = _stats(1.2, 80)
    assert not check_collapse(base, _stats(1.0, 70)).collapsed
    assert not check_collapse(base, base).collapsed


def test_distinct_top1_collapse() -> None:
    v = check_collapse(_stats(1.2, 80), _stats(1.2, 40))
    assert v.collapsed and "distinct top-1" in v.describe()
    assert not check_collapse(_stats(1.2, 80), _stats(1.2, 41)).collapsed


def test_entropy_collapse_both_ways() -> None:
    low = check_collapse(_stats(1.2, 80), _stats(0.3, 80))
    assert low.collapsed and "down from" in low.describe()
    assert not check_collapse(_stats(1.2, 80), _stats(0.31, 80)).collapsed
    uniform = math.log(5)
    high = check_collapse(_stats(1.2, 80), _stats(0.995 * uniform, 80))
    assert high.collapsed and "uniform" in high.describe()
    # A retriever that was near-uniform from the start has not collapsed by staying so.
    assert not check_collapse(_stats(0.995 * uniform, 80),
                              _stats(0.996 * uniform, 80)).collapsed


def test_thresholds_are_configurable() -> None:
    strict = CollapseThresholds(distinct_ratio=0.9)
    assert check_collapse(_stats(1.2, 80), _stats(1.2, 70), strict).collapsed
