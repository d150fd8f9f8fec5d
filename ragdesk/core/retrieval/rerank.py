"""The hybrid re-ranker: a logistic-regression score over :mod:`.features`.

score(z, x) = bias + sum_f weight_f * (feature_f(z, x) - mean_f) / scale_f, the log-odds that
passage z holds an answer to x. Its weights were fitted on NQ-open dev lines 1,001-3,610 over
the starter snapshot (all-MiniLM-L6-v2, Vital Articles), and checked on lines 1-1,000, by
``python -m bench.retrieval_bench`` (which prints the fitted values to paste here; see
bench/results/retrieval.md). With another encoder the ``dense_cos`` feature keeps
its meaning (a cosine), so the weights still apply, but they were not tuned for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ragdesk.core.sparse.features import FEATURE_NAMES


@dataclass(frozen=True)
class Reranker:
    weights: Mapping[str, float]
    means: Mapping[str, float]
    scales: Mapping[str, float]
    bias: float = 0.0
    depth: int = 200  # candidates taken from each retriever
    note: str = ""
    names: tuple[str, ...] = field(default=FEATURE_NAMES)

    def __post_init__(self) -> None:
        missing = [n for n in self.names if n not in self.weights]
        if missing:
            raise ValueError(f"reranker weights lack {missing}")

    def score(self, features: np.ndarray) -> np.ndarray:
        """[m, len(names)] features -> [m] scores."""
        w = np.array([self.weights[n] for n in self.names], dtype=np.float64)
        mu = np.array([self.means.get(n, 0.0) for n in self.names], dtype=np.float64)
        sd = np.array([self.scales.get(n, 1.0) or 1.0 for n in self.names], dtype=np.float64)
        out: np.ndarray = ((features - mu) / sd) @ w + self.bias
        return out

    def to_json(self) -> dict[str, object]:
        return {"weights": dict(self.weights), "means": dict(self.means),
                "scales": dict(self.scales), "bias": self.bias, "depth": self.depth,
                "note": self.note}


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 10.0,
                 iterations: int = 50) -> tuple[np.ndarray, float]:
    """L2-regularized logistic regression by Newton's method (bias not penalized).

    ``x`` standardized features [n, f], ``y`` 0/1 labels [n]; returns (weights, bias).
    """
    xb = np.hstack([x, np.ones((x.shape[0], 1))])
    w = np.zeros(xb.shape[1])
    reg = np.eye(xb.shape[1]) * l2
    reg[-1, -1] = 0.0
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        grad = xb.T @ (p - y) + reg @ w
        hess = (xb * (p * (1 - p))[:, None]).T @ xb + reg
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w[:-1], float(w[-1])


def fit_reranker(features: np.ndarray, labels: np.ndarray, *, l2: float = 10.0,
                 depth: int = 200, note: str = "") -> Reranker:
    """Fit the re-ranker on candidate features (rows) and has-answer labels."""
    mu = features.mean(axis=0)
    sd = features.std(axis=0)
    sd[sd == 0] = 1.0
    w, bias = fit_logistic((features - mu) / sd, labels.astype(np.float64), l2=l2)
    names = FEATURE_NAMES
    return Reranker(weights={n: float(v) for n, v in zip(names, w, strict=True)},
                    means={n: float(v) for n, v in zip(names, mu, strict=True)},
                    scales={n: float(v) for n, v in zip(names, sd, strict=True)},
                    bias=bias, depth=depth, note=note)


# Fitted by `python -m bench.retrieval_bench` (see the module docstring); standardized
# weights, so their sizes compare.
DEFAULT_RERANKER = Reranker(
    weights={
        "dense_cos": 0.951292,
        "dense_z": -0.152201,
        "dense_logrank": -0.0190128,
        "bm25_z": -0.226813,
        "bm25_max": 0.336374,
        "bm25_logrank": 0.0549371,
        "coverage": 0.195202,
        "title_coverage": -0.0687825,
        "title_in_question": 0.000714095,
        "first": -0.0529081,
        "log_length": 0.378473,
        "when_years": 0.101648,
        "when_months": -0.026865,
        "how_many_numbers": 0.0918917,
        "how_many_number_words": 0.144664,
        "who_capitals": 0.143635,
        "where_capitals": 0.226399,
        "who_bio": -0.0113463,
        "bio": -0.00683225,
    },
    means={
        "dense_cos": 0.150184,
        "dense_z": -2.76609e-18,
        "dense_logrank": 4.90584,
        "bm25_z": 1.77272e-19,
        "bm25_max": 0.263187,
        "bm25_logrank": 4.90584,
        "coverage": 0.136763,
        "title_coverage": 0.00808447,
        "title_in_question": 0.00520639,
        "first": 0.827619,
        "log_length": 4.04781,
        "when_years": 0.15921,
        "when_months": 0.0302988,
        "how_many_numbers": 0.109741,
        "how_many_number_words": 0.0633871,
        "who_capitals": 0.0409981,
        "where_capitals": 0.0207828,
        "who_bio": 0.00380439,
        "bio": 0.0111454,
    },
    scales={
        "dense_cos": 0.126446,
        "dense_z": 1,
        "dense_logrank": 0.970293,
        "bm25_z": 1,
        "bm25_max": 0.224185,
        "bm25_logrank": 0.970293,
        "coverage": 0.123108,
        "title_coverage": 0.0374296,
        "title_in_question": 0.0719673,
        "first": 0.377711,
        "log_length": 0.74161,
        "when_years": 0.57704,
        "when_months": 0.234347,
        "how_many_numbers": 0.619578,
        "how_many_number_words": 0.387208,
        "who_capitals": 0.0901426,
        "where_capitals": 0.0664732,
        "who_bio": 0.0615623,
        "bio": 0.104982,
    },
    bias=-4.56912, depth=200,
    note="fitted on NQ-open dev lines 1,001-3,610, starter snapshot",
)
