"""Selective-answering figures against scikit-learn and naive loops."""

from __future__ import annotations

from typing import cast

import numpy as np
import pytest

from ragdesk.core.evaluation.selective import (
    PROMISES,
    Promises,
    auroc,
    choose_threshold,
    expected_calibration_error,
    given_figures,
    reliability,
    selective_summary,
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auroc_equals_scikit_learn_with_ties(seed: int) -> None:
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    y = rng.random(300) < 0.3
    s = np.round(rng.random(300) + 0.3 * y, 1)  # rounding makes many ties
    assert auroc(s.tolist(), y.tolist()) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_auroc_needs_both_classes() -> None:
    assert auroc([0.1, 0.2], [True, True]) is None


def test_calibration_error_equals_a_naive_loop() -> None:
    rng = np.random.default_rng(7)
    c = rng.random(500)
    y = rng.random(500) < c ** 2
    total = 0.0
    for b in range(10):
        sel = [i for i in range(500) if min(int(c[i] * 10), 9) == b]
        if sel:
            total += float(len(sel) / 500 * abs(np.mean(c[sel]) - np.mean(y[sel])))
    assert expected_calibration_error(c.tolist(), y.tolist()) == pytest.approx(total)
    table = reliability(c.tolist(), y.tolist())
    assert sum(int(b["n"]) for b in table) == 500
    # perfectly calibrated in expectation is far from always-confident
    confident = expected_calibration_error([1.0] * 500, y.tolist())
    assert confident is not None and confident > 0.3


def test_given_figures_by_hand() -> None:
    given = [True, True, False, False, True]
    right = [True, False, True, False, False]
    answerable = [True, True, True, False, False]
    g = given_figures(given, right, answerable)
    assert (g["given"], g["given_right"]) == (3, 1)
    assert g["given_right_share"] == pytest.approx(1 / 3)
    assert g["right_kept_share"] == pytest.approx(1 / 2)
    assert g["unanswerable"] == 2 and g["unanswerable_abstain_share"] == pytest.approx(1 / 2)


def _naive_margin(c: np.ndarray, y: np.ndarray, unans: np.ndarray, th: float,
                  promises: Promises) -> float:
    """The smallest of the three figures' distances above their promises, each in binomial
    standard errors at the promise for the figure's own count of answers."""
    given = [bool(x >= th) for x in c]
    right_given = sum(1 for g, r in zip(given, y, strict=True) if g and r)
    n_given, n_right, n_un = sum(given), int(y.sum()), int(unans.sum())
    abstained = sum(1 for g, u in zip(given, unans, strict=True) if u and not g)
    figures = [(right_given / n_given, promises.given_right, n_given),
               (right_given / n_right, promises.right_kept, n_right),
               (abstained / n_un, promises.unanswerable_abstain, n_un)]
    return float(min((f - p) / ((p * (1 - p) / n) ** 0.5) for f, p, n in figures))


@pytest.mark.parametrize("seed", [3, 11, 29])
@pytest.mark.parametrize("promises", [PROMISES, Promises(0.5, 0.2, 0.9)])
def test_threshold_meets_every_promise_with_the_widest_margin(seed: int,
                                                              promises: Promises) -> None:
    rng = np.random.default_rng(seed)
    c = rng.random(300)
    unans = rng.random(300) < 0.5
    y = (rng.random(300) < c) & ~unans
    answerable = [not u for u in unans]
    t = choose_threshold(c.tolist(), y.tolist(), answerable, promises)
    best = _naive_margin(c, y, unans, t, promises)
    # a naive scan over every confidence: none meets the promises with a wider margin, and
    # none above the chosen threshold meets them as well
    for th in c:
        m = _naive_margin(c, y, unans, float(th), promises)
        assert m <= best + 1e-12
        if th > t:
            assert m < best
    assert t in set(c[y].tolist())


def test_threshold_without_answerability_balances_the_two_other_promises() -> None:
    # ten right answers at the top, then wrong ones: giving the right ten and nothing else
    # meets both promises best
    c = [1.0 - i / 100 for i in range(40)]
    y = [i < 10 for i in range(40)]
    assert choose_threshold(c, y) == pytest.approx(c[9])
    assert choose_threshold(c, [False] * 40) == 1.0


def test_promises_must_be_shares() -> None:
    with pytest.raises(ValueError, match="right_kept"):
        Promises(right_kept=1.0)


def test_summary_skips_answers_without_confidence_and_reports_abstention() -> None:
    s = selective_summary([0.9, None, 0.1, 0.2], [True, False, False, False],
                          [True, True, False, True], [False, False, True, True])
    assert s is not None and s["n"] == 3
    assert s["auroc"] == 1.0
    at_threshold = cast(dict[str, object], s["at_threshold"])
    assert at_threshold["given"] == 1
    assert at_threshold["unanswerable_abstain_share"] == 1.0
    assert selective_summary([None], [True], [True], None) is None
