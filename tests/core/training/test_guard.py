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


def test_retrieval_stats_match_a_naive_computation() -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=(6, 4)) * 3
    top1 = [5, 5, 2, 9, 2, 5]
    st = retrieval_stats(scores, top1)
    ents = []
    for row in scores:
        z = sum(math.exp(x) for x in row)
        ents.append(-sum(math.exp(x) / z * math.log(math.exp(x) / z) for x in row))
    assert st.mean_entropy == pytest.approx(sum(ents) / len(ents), rel=1e-9)
    assert st.distinct_top1 == 3
    assert (st.n_questions, st.n_docs) == (6, 4)


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
