"""Selective-answering figures against scikit-learn and naive loops."""

from __future__ import annotations

import numpy as np
import pytest

from ragdesk.core.evaluation.selective import (
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
            total += len(sel) / 500 * abs(np.mean(c[sel]) - np.mean(y[sel]))
    assert expected_calibration_error(c.tolist(), y.tolist()) == pytest.approx(total)
    table = reliability(c.tolist(), y.tolist())
    assert sum(int(b["n"]) for b in table) == 500
    # perfectly calibrated in expectation is far from always-confident
    assert expected_calibration_error([1.0] * 500, y.tolist()) > 0.3


def test_given_figures_by_hand() -> None:
    given = [True, True, False, False, True]
    right = [True, False, True, False, False]
    answerable = [True, True, True, False, False]
    g = given_figures(given, right, answerable)
    assert (g["given"], g["given_right"]) == (3, 1)
    assert g["given_right_share"] == pytest.approx(1 / 3)
    assert g["right_kept_share"] == pytest.approx(1 / 2)
    assert g["unanswerable"] == 2 and g["unanswerable_abstain_share"] == pytest.approx(1 / 2)


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9])
def test_threshold_is_the_highest_that_keeps_the_share_of_right_answers(keep: float) -> None:
    rng = np.random.default_rng(11)
    c = rng.random(200)
    y = rng.random(200) < c
    t = choose_threshold(c.tolist(), y.tolist(), keep=keep)

    def kept(th: float) -> float:
        return float((c[y] >= th).mean())

    assert kept(t) >= keep
    # a naive scan: no higher threshold among the confidences keeps as many
    assert all(kept(th) < keep for th in c if th > t)


def test_summary_skips_answers_without_confidence_and_reports_abstention() -> None:
    s = selective_summary([0.9, None, 0.1, 0.2], [True, False, False, False],
                          [True, True, False, True], [False, False, True, True])
    assert s is not None and s["n"] == 3
    assert s["auroc"] == 1.0
    assert s["at_threshold"]["given"] == 1
    assert s["at_threshold"]["unanswerable_abstain_share"] == 1.0
    assert selective_summary([None], [True], [True], None) is None
