"""Fitting the confidence model on evaluation rows, against scikit-learn: the coefficients on
all rows, and the threshold and figures on held-out folds (row i in fold i mod 5)."""

from __future__ import annotations

import numpy as np
import pytest

from ragdesk.core.confidence import CLOSED_BOOK, FEATURES
from ragdesk.core.evaluation.confidence_fit import FOLDS, L2, fit_on_results
from ragdesk.core.evaluation.selective import auroc, choose_threshold, given_figures


def _rows(seed: int, n: int) -> list[dict[str, object]]:
    """Rows whose outcome follows two of the features, the rest noise; one question in
    three unanswerable and never right; a few rows without features (not answered)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, len(FEATURES)))
    answerable = rng.random(n) < 2 / 3
    right = (rng.random(n) < 1 / (1 + np.exp(-(1.5 * x[:, 0] + 0.7 * x[:, 3] - 2.5)))) \
        & answerable
    rows: list[dict[str, object]] = [
        {"features": dict(zip(FEATURES, map(float, r), strict=True)), "em": float(ok),
         "answerable": bool(a)} for r, ok, a in zip(x, right, answerable, strict=True)]
    return [*rows, {"features": None, "em": 0.0, "answerable": True}]


def _standardized(x: np.ndarray, on: np.ndarray) -> np.ndarray:
    vec: np.ndarray = (x - on.mean(axis=0)) / on.std(axis=0)
    return vec


def test_fit_and_threshold_equal_a_scikit_learn_reference() -> None:
    from sklearn.linear_model import LogisticRegression

    rows = _rows(0, 600)
    model = fit_on_results(rows, source="synthetic")
    kept = rows[:-1]
    x = np.array([[r["features"][n] for n in FEATURES] for r in kept])  # type: ignore[index]
    y = np.array([r["em"] == 1.0 for r in kept])
    answerable = [bool(r["answerable"]) for r in kept]

    ref = LogisticRegression(C=1 / L2, tol=1e-12, max_iter=10_000).fit(_standardized(x, x), y)
    assert model.weights == pytest.approx(ref.coef_[0], abs=1e-5)
    assert model.intercept == pytest.approx(ref.intercept_[0], abs=1e-5)

    held_out = np.zeros(len(kept))
    fold = np.arange(len(kept)) % FOLDS
    for f in range(FOLDS):
        train, test = fold != f, fold == f
        m = LogisticRegression(C=1 / L2, tol=1e-12, max_iter=10_000).fit(
            _standardized(x[train], x[train]), y[train])
        held_out[test] = m.predict_proba(_standardized(x[test], x[train]))[:, 1]
    threshold = choose_threshold(held_out.tolist(), y.tolist(), answerable)
    assert model.threshold == pytest.approx(threshold, abs=1e-6)
    figures = given_figures((held_out >= threshold).tolist(), y.tolist(), answerable)
    cv = model.fitted_on["cross_validated"]
    assert model.fitted_on["questions"] == len(kept)
    assert model.fitted_on["right"] == int(y.sum())
    assert cv["auroc"] == pytest.approx(auroc(held_out.tolist(), y.tolist()), abs=1e-6)
    assert cv["given"] == figures["given"]
    assert cv["unanswerable_abstain_share"] == figures["unanswerable_abstain_share"]


def test_rows_that_cannot_be_fitted_are_refused() -> None:
    rows = _rows(1, 300)
    with pytest.raises(ValueError, match="a few hundred"):
        fit_on_results(rows[:5], source="synthetic")
    wrong = [{**r, "em": 0.0} for r in rows]
    with pytest.raises(ValueError, match="all right or all wrong"):
        fit_on_results(wrong, source="synthetic")


def test_a_model_without_the_closed_book_features_reads_only_the_others() -> None:
    from sklearn.linear_model import LogisticRegression

    rows = _rows(2, 500)
    names = [n for n in FEATURES if n not in CLOSED_BOOK]
    model = fit_on_results(rows, source="synthetic", names=names)
    assert model.names == tuple(names)
    assert not model.reads_any(CLOSED_BOOK)
    assert fit_on_results(rows, source="synthetic").reads_any(CLOSED_BOOK)
    kept = rows[:-1]
    x = np.array([[r["features"][n] for n in names] for r in kept])  # type: ignore[index]
    y = np.array([r["em"] == 1.0 for r in kept])
    ref = LogisticRegression(C=1 / L2, tol=1e-12, max_iter=10_000).fit(_standardized(x, x), y)
    assert model.weights == pytest.approx(ref.coef_[0], abs=1e-5)
    with pytest.raises(ValueError, match="not features"):
        fit_on_results(rows, source="synthetic", names=["logprob", "shoe_size"])
