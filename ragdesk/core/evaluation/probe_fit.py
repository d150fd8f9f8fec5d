"""Fitting the reading probe (:class:`ragdesk.core.confidence.probe.Probe`) on evaluated
questions, beside the confidence model.

The confidence model is fitted on the probe's out-of-fold scores, so that it weighs the probe
as it meets it on new questions, not as it scores the answers it was fitted on.
"""

from __future__ import annotations

import numpy as np

from ragdesk.core.confidence.model import fit_logistic
from ragdesk.core.confidence.probe import Probe
from ragdesk.core.evaluation.folds import interleaved

# A strong penalty: hundreds of dimensions against about a hundred right answers.
PROBE_L2 = 30.0


def _fit(states: np.ndarray, right: np.ndarray, layer: int, l2: float) -> Probe:
    mean = states.mean(axis=0)
    scale = states.std(axis=0)
    scale[scale < 1e-9] = 1.0
    w, b = fit_logistic((states - mean) / scale, right.astype(np.float64), l2=l2)
    folded = w / scale  # standardization folded in: one dot product when answering
    return Probe(layer, tuple(float(v) for v in folded), float(b - folded @ mean))


def fit_probe(states: np.ndarray, right: np.ndarray, layer: int, folds: int,
              l2: float = PROBE_L2) -> tuple[Probe, np.ndarray]:
    """The probe fitted on every row [n, d], and each row's score from a probe fitted
    without its fold (the interleaved folds of the confidence model's cross-validation)."""
    if states.ndim != 2 or len(states) != len(right) or len(states) < 2 * folds:
        raise ValueError("need one reading state per outcome, a few hundred of them")
    out = np.zeros(len(states))
    for test, train in interleaved(len(states), folds):
        if right[train].min() == right[train].max():
            continue  # nothing to tell apart: the fold's scores stay neutral
        fold = _fit(states[train], right[train], layer, l2)
        out[test] = states[test] @ np.asarray(fold.weights) + fold.intercept
    return _fit(states, right, layer, l2), out
