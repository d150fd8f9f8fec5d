"""Fitting the confidence model on evaluation rows, against scikit-learn: the coefficients on
all rows, and the threshold and figures on held-out folds (row i in fold i mod 5)."""

from __future__ import annotations

import numpy as np
import pytest

from ragdesk.core.confidence import CLOSED_BOOK, QUOTED_PASSAGE_LP, ConfidenceModel
from ragdesk.core.confidence.memory import MEMORY_FEATURES
from ragdesk.core.evaluation.confidence_fit import FOLDS, L2, fit_on_results
from ragdesk.core.evaluation.selective import auroc, choose_threshold, given_figures
from tests.core.evaluation.fit_rows import PLAIN


def _rows(seed: int, n: int) -> list[dict[str, object]]:
    """Rows whose outcome follows two of the features, the rest noise; one question in
    three unanswerable and never right; a few rows without features (not answered)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, len(PLAIN)))
    answerable = rng.random(n) < 2 / 3
    right = (rng.random(n) < 1 / (1 + np.exp(-(1.5 * x[:, 0] + 0.7 * x[:, 3] - 2.5)))) \
        & answerable
    rows: list[dict[str, object]] = [
        {"features": dict(zip(PLAIN, map(float, r), strict=True)), "em": float(ok),
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
    x = np.array([[r["features"][n] for n in PLAIN] for r in kept])  # type: ignore[index]
    y = np.array([r["em"] == 1.0 for r in kept])
    answerable = [bool(r["answerable"]) for r in kept]

    ref = LogisticRegression(C=1 / L2, tol=1e-12, max_iter=10_000).fit(_standardized(x, x), y)
    assert model.weights == pytest.approx(ref.coef_[0], abs=1e-5)
    assert model.intercept == pytest.approx(ref.intercept_[0], abs=1e-5)

    held_out = _cv_reference(x, y)
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
    names = [n for n in PLAIN if n not in CLOSED_BOOK]
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


def test_a_feature_no_row_holds_is_left_out_of_the_model() -> None:
    """A generator without the pass behind a feature (BART: no lean decoder to read the answer
    again) gives rows without it: the model is the one fitted on the others."""
    rows = _rows(5, 400)
    for r in rows[:-1]:
        del r["features"][QUOTED_PASSAGE_LP]  # type: ignore[attr-defined]
    model = fit_on_results(rows, source="synthetic")
    assert QUOTED_PASSAGE_LP not in model.names
    others = [n for n in PLAIN if n != QUOTED_PASSAGE_LP]
    assert model.names == tuple(others)
    same = fit_on_results(rows, source="synthetic", names=others)
    assert model.weights == pytest.approx(same.weights) and model.threshold == same.threshold


def _cv_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's P(right) from scikit-learn fitted without its fold (row i in fold i mod 5)."""
    from sklearn.linear_model import LogisticRegression

    out = np.zeros(len(y))
    fold = np.arange(len(y)) % FOLDS
    for f in range(FOLDS):
        train, test = fold != f, fold == f
        m = LogisticRegression(C=1 / L2, tol=1e-12, max_iter=10_000).fit(
            _standardized(x[train], x[train]), y[train])
        out[test] = m.predict_proba(_standardized(x[test], x[train]))[:, 1]
    return out


def _memory_rows(seed: int, n: int, memory_signal: float) -> list[dict[str, object]]:
    """Rows that also carry an answer from memory, right as the first memory feature says
    (``memory_signal`` scales it; 0: right at random, about one in twenty); a third of the
    rows kept that answer (``from_memory``: ``prediction`` is then the memory's, ``other``
    the passages')."""
    rng = np.random.default_rng(seed)
    rows = _rows(seed, n)[:-1]
    out: list[dict[str, object]] = []
    for i, r in enumerate(rows):
        m = dict(zip(MEMORY_FEATURES, map(float, rng.normal(size=len(MEMORY_FEATURES))),
                     strict=True))
        m["memory_agrees"] = float(i % 11 == 0)
        m_right = bool(rng.random() < 1 / (1 + np.exp(-(memory_signal * m["memory_logprob"]
                                                         - 1.0 - 3.0 * (memory_signal == 0)))))
        p_text, m_text = ("paris" if r["em"] == 1.0 else "lyon"), (
            "paris" if m_right else f"rome {i}")
        kept_memory = i % 3 == 0
        out.append({**r, "answers": ["Paris"], "features": {**r["features"], **m},  # type: ignore[dict-item]
                    "from_memory": kept_memory,
                    "prediction": m_text if kept_memory else p_text,
                    "other": p_text if kept_memory else m_text,
                    "em": float(m_right if kept_memory else r["em"] == 1.0)})
    return out


def _log_loss(p: np.ndarray, y: np.ndarray) -> float:
    from sklearn.metrics import log_loss

    return float(log_loss(y, np.clip(p, 1e-6, 1 - 1e-6), labels=[False, True]))


@pytest.mark.parametrize("seed,with_kept", [(7, False), (4, True)])
def test_rows_with_answers_from_memory_give_a_memory_part_fitted_on_what_it_will_meet(
        seed: int, with_kept: bool) -> None:
    from sklearn.linear_model import LogisticRegression

    from ragdesk.core.confidence.memory import KEPT_FEATURES, kept_features

    rows = _memory_rows(seed, 900, memory_signal=2.0)
    model = fit_on_results(rows, source="synthetic")
    assert model.memory is not None and model.memory.names == MEMORY_FEATURES

    # The passages' outcome is their answer's, whichever candidate the row kept.
    p_right = np.array([(r["other"] if r["from_memory"] else r["prediction"]) == "paris"
                        for r in rows])
    m_right = np.array([(r["prediction"] if r["from_memory"] else r["other"]) == "paris"
                        for r in rows])
    x = np.array([[r["features"][n] for n in PLAIN] for r in rows])  # type: ignore[index]
    assert model.fitted_on["right"] == int(p_right.sum())
    p_cv = _cv_reference(x, p_right)
    # The memory part reads the passages' P(right) as answering meets it: held out.
    xm = np.array([[p_cv[i] if n == "passage_confidence" else r["features"][n]  # type: ignore[index]
                    for n in MEMORY_FEATURES] for i, r in enumerate(rows)])
    ref = LogisticRegression(C=1 / L2, tol=1e-12, max_iter=10_000).fit(
        _standardized(xm, xm), m_right)
    assert model.memory.weights == pytest.approx(ref.coef_[0], abs=1e-5)

    # The candidate the engine's rule keeps (a naive loop here), judged by the larger P
    # or by the kept part, whichever has the lower held-out log loss; the threshold is
    # chosen on that.
    m_cv = _cv_reference(xm, m_right)
    larger, right, kept_x = [], [], []
    for i in range(len(rows)):
        feats = dict(zip(MEMORY_FEATURES, xm[i], strict=True))
        use_memory = m_cv[i] > p_cv[i] and feats["memory_agrees"] != 1.0
        larger.append(max(p_cv[i], m_cv[i]))
        right.append(bool(m_right[i] if use_memory else p_right[i]))
        kf = kept_features(p_cv[i], m_cv[i], feats, use_memory)
        kept_x.append([kf[n] for n in KEPT_FEATURES])
    y, kx = np.array(right), np.array(kept_x)
    stacked = _cv_reference(kx, y)
    assert (model.kept is not None) is with_kept
    assert with_kept == (_log_loss(stacked, y) < _log_loss(np.array(larger), y))
    shown = stacked if with_kept else np.array(larger)
    answerable = [bool(r["answerable"]) for r in rows]
    assert model.threshold == pytest.approx(
        choose_threshold(shown.tolist(), right, answerable), abs=1e-6)
    with_memory = model.fitted_on["with_memory"]
    assert with_memory["right"] == sum(right) > with_memory["right_from_passages_alone"]
    assert with_memory["cross_validated"]["auroc"] == pytest.approx(auroc(shown.tolist(),
                                                                          right))
    if model.kept is not None:
        ref = LogisticRegression(C=1 / L2, tol=1e-12, max_iter=10_000).fit(
            _standardized(kx, kx), y)
        assert model.kept.weights == pytest.approx(ref.coef_[0], abs=1e-5)
    back = ConfidenceModel.from_json(model.to_json())
    assert back.memory == model.memory and back.kept == model.kept


def test_answers_from_memory_that_make_no_more_answers_right_give_no_memory_part() -> None:
    rows = _memory_rows(4, 600, memory_signal=0.0)
    assert any((r["other"] if not r["from_memory"] else r["prediction"]) == "paris"
               for r in rows)  # some are right: the part is left out for being worse
    model = fit_on_results(rows, source="synthetic")
    assert model.memory is None and "with_memory" not in model.fitted_on
