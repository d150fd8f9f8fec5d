"""P(right) from an answer's features: a logistic regression, fitted on held-out questions.

Standardized features, an L2 penalty and Newton's method (iteratively reweighted least
squares): a few kilobytes of coefficients, numpy only, no heavy dependency at run time.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ragdesk.core.confidence.features import FEATURES
from ragdesk.core.confidence.probe import Probe

FORMAT = 1


@dataclass(frozen=True)
class ConfidenceModel:
    """``P(right) = sigmoid(b + Σ w_f (x_f - mean_f) / scale_f)``; ``threshold``: below it an
    answer says "not found in this snapshot"."""

    names: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    intercept: float
    threshold: float
    # what it was fitted on and how it measured there, for `index list` and the docs
    fitted_on: dict[str, Any] = field(default_factory=dict)
    # The reading modes of the answers it was fitted on: another mode's features fall
    # elsewhere (RAG-Sequence has no per-token posteriors; one prompt read together has one
    # source), so its answers get no confidence rather than a miscalibrated one. Empty: a
    # model from before modes were recorded, read for every mode.
    modes: tuple[str, ...] = ()
    # P(right) of the reader's answer from memory (features: MEMORY_FEATURES), fitted on the
    # same questions; None: answers come from the passages alone.
    memory: ConfidenceModel | None = None
    # P(right) of the answer kept of the two (features: KEPT_FEATURES, both candidates'
    # P(right) and what links them); None: the kept answer's own P(right) stands.
    kept: ConfidenceModel | None = None
    # The linear probe of the reader's state whose score is the ``reading_probe`` feature;
    # None: answers skip the pass that reads that state.
    probe: Probe | None = None

    def predict(self, features: Mapping[str, float]) -> float:
        z = self.intercept
        for name, m, s, w in zip(self.names, self.mean, self.scale, self.weights, strict=True):
            x = float(features.get(name, m))
            z += w * (x - m) / s
        return _sigmoid(z)

    def reads_any(self, names: Sequence[str]) -> bool:
        """Whether any of ``names`` has a weight in this model."""
        return any(w != 0.0 for n, w in zip(self.names, self.weights, strict=True)
                   if n in names)

    def fits(self, mode: str) -> bool:
        """Whether answers read in ``mode`` are what this model was fitted on."""
        return not self.modes or mode in self.modes

    def abstains(self, confidence: float) -> bool:
        return confidence < self.threshold

    def measured(self) -> dict[str, Any]:
        """How the answers the engine gives under this model measured where it was fitted:
        the memory part's figures where answers may come from memory (``right``, and
        ``cross_validated``: AUROC, ECE, answers given and their share right, ...), the
        passages' own figures otherwise; empty for a model that records none."""
        memory = self.fitted_on.get("with_memory")
        return dict(memory) if isinstance(memory, dict) else dict(self.fitted_on)

    def to_json(self) -> dict[str, Any]:
        out = {"format": FORMAT, "names": list(self.names), "mean": list(self.mean),
               "scale": list(self.scale), "weights": list(self.weights),
               "intercept": self.intercept, "threshold": self.threshold,
               "fitted_on": self.fitted_on, "modes": list(self.modes)}
        for key, part in (("memory", self.memory), ("kept", self.kept)):
            if part is not None:
                out[key] = part.to_json()
        if self.probe is not None:
            out["probe"] = self.probe.to_json()
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ConfidenceModel:
        if int(d.get("format", 0)) != FORMAT:
            raise ValueError(f"unknown confidence model format {d.get('format')!r}")
        names = tuple(str(n) for n in d["names"])
        cols = [tuple(float(v) for v in d[key]) for key in ("mean", "scale", "weights")]
        if any(len(c) != len(names) for c in cols) or any(s <= 0 for s in cols[1]):
            raise ValueError("confidence model columns do not match its feature names")
        values = [*cols[0], *cols[1], *cols[2], float(d["intercept"]), float(d["threshold"])]
        if not all(math.isfinite(v) for v in values):
            raise ValueError("confidence model holds a non-finite number")
        modes = d.get("modes") or []
        if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
            raise ValueError("confidence model modes must be a list of mode names")
        parts: dict[str, ConfidenceModel | None] = {}
        for key in ("memory", "kept"):
            raw = d.get(key)
            if raw is not None and (not isinstance(raw, dict) or "memory" in raw
                                    or "kept" in raw):
                raise ValueError(f"a confidence model's {key} part must be one plain model")
            parts[key] = None if raw is None else cls.from_json(raw)
        if parts["kept"] is not None and parts["memory"] is None:
            raise ValueError("a confidence model with a kept part needs a memory part")
        probe = d.get("probe")
        if probe is not None and not isinstance(probe, dict):
            raise ValueError("a confidence model's probe must be an object")
        return cls(names, cols[0], cols[1], cols[2], float(d["intercept"]),
                   float(d["threshold"]), dict(d.get("fitted_on") or {}), tuple(modes),
                   parts["memory"], parts["kept"],
                   None if probe is None else Probe.from_json(probe))


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def feature_matrix(rows: Sequence[Mapping[str, float]],
                   names: Sequence[str] = FEATURES) -> np.ndarray:
    return np.array([[float(r.get(n, 0.0)) for n in names] for r in rows], dtype=np.float64)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0,
                 iterations: int = 50) -> tuple[np.ndarray, float]:
    """Weights and intercept minimizing ``Σ logloss + l2/2 |w|²`` (the intercept is not
    penalized), by Newton's method; the same optimum as scikit-learn's
    ``LogisticRegression(C=1/l2)``."""
    n, d = x.shape
    a = np.hstack([x, np.ones((n, 1))])
    beta = np.zeros(d + 1)
    penalty = np.full(d + 1, float(l2))
    penalty[-1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(a @ beta)))
        grad = a.T @ (p - y) + penalty * beta
        hess = (a * (p * (1 - p))[:, None]).T @ a + np.diag(penalty) + 1e-9 * np.eye(d + 1)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    return beta[:-1], float(beta[-1])


def fit_confidence(rows: Sequence[Mapping[str, float]], right: Sequence[bool], *,
                   threshold: float, l2: float = 1.0, names: Sequence[str] = FEATURES,
                   fitted_on: dict[str, Any] | None = None, modes: Sequence[str] = (),
                   ) -> ConfidenceModel:
    """A :class:`ConfidenceModel` for answers with these features and outcomes."""
    if len(rows) != len(right) or not rows:
        raise ValueError("need one outcome per answer, and at least one answer")
    y = np.asarray(right, dtype=np.float64)
    if y.min() == y.max():
        raise ValueError("the answers are all right or all wrong; nothing to tell apart")
    x = feature_matrix(rows, names)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0  # a constant feature: weight 0 under the penalty anyway
    w, b = fit_logistic((x - mean) / scale, y, l2=l2)
    return ConfidenceModel(tuple(names), tuple(float(v) for v in mean),
                           tuple(float(v) for v in scale), tuple(float(v) for v in w), b,
                           float(threshold), dict(fitted_on or {}), tuple(modes))
