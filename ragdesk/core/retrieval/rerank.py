"""The hybrid re-ranker: a logistic-regression score over :mod:`.features`.

score(z, x) = bias + sum_f weight_f * (feature_f(z, x) - mean_f) / scale_f, the log-odds that
passage z holds an answer to x. Its weights were fitted on the tuning half of NQ-open dev
(odd lines) over the starter snapshot (all-MiniLM-L6-v2, Vital Articles), and checked on the
other half, by ``python -m bench.retrieval_bench`` (which prints the fitted values to paste
here; see bench/results/retrieval.md). With another encoder the ``dense_cos`` feature keeps
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
        "dense_cos": 0.989208,
        "dense_z": -0.254413,
        "dense_logrank": -0.0526477,
        "bm25_z": 0.0418232,
        "bm25_max": 0.152693,
        "bm25_logrank": 0.0477417,
        "coverage": 0.0862485,
        "title_coverage": -0.0979347,
        "title_in_question": 0.00509039,
        "first": -0.0419873,
        "log_length": 0.361097,
        "when_years": 0.070083,
        "when_months": -0.0351699,
        "how_many_numbers": 0.0697187,
        "how_many_number_words": 0.201859,
        "who_capitals": 0.0532888,
        "where_capitals": 0.141298,
        "who_bio": -0.00593584,
        "bio": -0.0260135,
    },
    means={
        "dense_cos": 0.150818,
        "dense_z": -6.451e-18,
        "dense_logrank": 4.9038,
        "bm25_z": 6.92688e-19,
        "bm25_max": 0.266926,
        "bm25_logrank": 4.9038,
        "coverage": 0.138229,
        "title_coverage": 0.00837524,
        "title_in_question": 0.00538614,
        "first": 0.827587,
        "log_length": 4.04742,
        "when_years": 0.158207,
        "when_months": 0.0301102,
        "how_many_numbers": 0.121308,
        "how_many_number_words": 0.0673585,
        "who_capitals": 0.0375739,
        "where_capitals": 0.0223803,
        "who_bio": 0.00350029,
        "bio": 0.0111389,
    },
    scales={
        "dense_cos": 0.126485,
        "dense_z": 1,
        "dense_logrank": 0.970286,
        "bm25_z": 1,
        "bm25_max": 0.226717,
        "bm25_logrank": 0.970286,
        "coverage": 0.124858,
        "title_coverage": 0.0378978,
        "title_in_question": 0.0731924,
        "first": 0.377739,
        "log_length": 0.740011,
        "when_years": 0.575741,
        "when_months": 0.233389,
        "how_many_numbers": 0.648876,
        "how_many_number_words": 0.396652,
        "who_capitals": 0.0866823,
        "where_capitals": 0.0690898,
        "who_bio": 0.0590596,
        "bio": 0.104951,
    },
    bias=-4.50576, depth=200,
    note="fitted on the odd lines of NQ-open dev, starter snapshot",
)
