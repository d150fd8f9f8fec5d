"""Fitting the confidence model on evaluated questions (never the ones reported on).

Outcomes are exact match of the best guess; every question counts, answerable or not, since
a user asks both kinds. The threshold is chosen on cross-validated predictions, so that it is
set as it will be met: on answers the model has not seen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from ragdesk.core.confidence.features import FEATURES
from ragdesk.core.confidence.model import ConfidenceModel, fit_confidence
from ragdesk.core.evaluation.selective import (
    auroc,
    choose_threshold,
    expected_calibration_error,
    given_figures,
)
from ragdesk.core.safe_json import as_float, as_object

FOLDS = 5
L2 = 1.0


def _cross_validated(rows: Sequence[Mapping[str, float]], right: np.ndarray,
                     l2: float, folds: int, names: Sequence[str]) -> np.ndarray:
    """Each answer's P(right) from a model fitted without its fold (fixed, interleaved
    folds: reproducible, and each holds every part of the file)."""
    out = np.zeros(len(rows))
    idx = np.arange(len(rows))
    for f in range(folds):
        test = idx % folds == f
        train = ~test
        if right[train].min() == right[train].max():
            out[test] = float(right[train].mean())
            continue
        model = fit_confidence([rows[i] for i in idx[train]], right[train].tolist(),
                               threshold=0.5, l2=l2, names=names)
        out[test] = [model.predict(rows[i]) for i in idx[test]]
    return out


def fit_on_results(results: Sequence[Mapping[str, object]], *, source: str, l2: float = L2,
                   folds: int = FOLDS, names: Sequence[str] = FEATURES,
                   modes: Sequence[str] = ()) -> ConfidenceModel:
    """A model from evaluation rows (``eval --out`` lines or ``QuestionResult.to_json()``):
    each needs ``features`` and ``em``. ``names``: the features it reads (without
    :data:`CLOSED_BOOK`, answers skip the pass that computes those); ``modes``: the reading
    mode the rows were answered in (only such answers get a confidence from it)."""
    unknown = sorted(set(names) - set(FEATURES))
    if unknown or not names:
        raise ValueError(f"not features ragdesk computes: {unknown}" if unknown
                         else "no features to fit on")
    rows = [r for r in results if r.get("features") and r.get("em") is not None]
    if len(rows) < 2 * folds:
        raise ValueError(f"only {len(rows)} answered questions with features; the confidence "
                         "model needs a few hundred")
    feats = [{k: as_float(v) for k, v in as_object(r["features"]).items()} for r in rows]
    right = np.array([as_float(r["em"]) >= 1.0 for r in rows], dtype=bool)
    if right.all() or not right.any():
        raise ValueError("the answers are all right or all wrong; nothing to tell apart")
    answerable: list[bool | None] = [
        a if isinstance(a := r.get("answerable"), bool) else None for r in rows]
    cv = _cross_validated(feats, right, l2, folds, names)
    threshold = choose_threshold(cv.tolist(), right.tolist(), answerable)
    given = cv >= threshold
    figures = given_figures(given.tolist(), right.tolist(), answerable)
    fitted_on = {
        "source": source, "questions": len(rows), "right": int(right.sum()), "l2": l2,
        "cross_validated": {
            "folds": folds, "auroc": auroc(cv.tolist(), right.tolist()),
            "ece": expected_calibration_error(cv.tolist(), right.tolist()),
            "given": figures["given"],
            "given_right_share": figures["given_right_share"],
            "right_kept_share": figures["right_kept_share"],
            "unanswerable_abstain_share": figures["unanswerable_abstain_share"],
        },
    }
    return fit_confidence(feats, right.tolist(), threshold=threshold, l2=l2, names=names,
                          fitted_on=fitted_on, modes=modes)
