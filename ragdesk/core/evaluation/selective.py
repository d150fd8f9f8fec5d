"""How well a confidence tells right answers from wrong ones (selective question answering).

AUROC (right vs wrong), expected calibration error over equal-width bins with its reliability
table, and the figures at one threshold: answers given, the share of them that are right, the
share of right answers kept, and the share of questions the snapshot cannot answer on which
the answer abstains. Plain loops over sorted arrays; scikit-learn is the tests' reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragdesk.core.safe_json import as_float, as_int


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """P(a random positive scores above a random negative), ties counting one half (the
    Mann-Whitney statistic); None without both classes."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1  # the mean rank of a run of ties
        i = j + 1
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def reliability(confidence: Sequence[float], right: Sequence[bool],
                bins: int = 10) -> list[dict[str, float | int]]:
    """Per equal-width bin of confidence: its count, mean confidence and share right."""
    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(right, dtype=np.float64)
    idx = np.minimum((c * bins).astype(int), bins - 1)
    out: list[dict[str, float | int]] = []
    for b in range(bins):
        sel = idx == b
        n = int(sel.sum())
        out.append({"low": b / bins, "high": (b + 1) / bins, "n": n,
                    "mean_confidence": float(c[sel].mean()) if n else 0.0,
                    "share_right": float(y[sel].mean()) if n else 0.0})
    return out


def expected_calibration_error(confidence: Sequence[float], right: Sequence[bool],
                               bins: int = 10) -> float | None:
    """Σ_bins (n_b / n) |mean confidence_b - share right_b|."""
    n = len(confidence)
    if n == 0:
        return None
    table = reliability(confidence, right, bins)
    return float(sum(int(b["n"]) / n * abs(float(b["mean_confidence"]) - float(b["share_right"]))
                     for b in table))


def given_figures(given: Sequence[bool], right: Sequence[bool],
                  answerable: Sequence[bool | None]) -> dict[str, object]:
    """What a user sees: the answers given (not abstained) and how many of them are right,
    the right answers kept, and abstention on the questions the snapshot cannot answer."""
    g = np.asarray(given, dtype=bool)
    y = np.asarray(right, dtype=bool)
    unanswerable = np.array([a is False for a in answerable], dtype=bool)
    n_given, n_right = int(g.sum()), int(y.sum())
    return {
        "given": n_given,
        "given_right": int((g & y).sum()),
        "given_right_share": float((g & y).sum() / n_given) if n_given else None,
        "right_kept_share": float((g & y).sum() / n_right) if n_right else None,
        "unanswerable": int(unanswerable.sum()),
        "unanswerable_abstain_share": (float((~g & unanswerable).sum() / unanswerable.sum())
                                       if unanswerable.any() else None),
    }


@dataclass(frozen=True)
class Promises:
    """What an answer's confidence promises a user at the shipped threshold: of the answers
    given, at least ``given_right`` are right; at least ``right_kept`` of the right answers
    are still given (a withheld one costs a click, "Show the guess"); on the questions the
    snapshot cannot answer, at least ``unanswerable_abstain`` say "not found"."""

    given_right: float = 0.20
    right_kept: float = 0.40
    unanswerable_abstain: float = 0.85

    def __post_init__(self) -> None:
        for name in ("given_right", "right_kept", "unanswerable_abstain"):
            if not 0.0 < getattr(self, name) < 1.0:
                raise ValueError(f"{name} must lie strictly between 0 and 1")


PROMISES = Promises()


def _excess(share: float, promise: float, n: int) -> float:
    """How many standard errors ``share`` of ``n`` lies above ``promise`` (the binomial
    error at the promise): the same footing for figures near 1 and figures near 0."""
    return (share - promise) / math.sqrt(promise * (1.0 - promise) / n)


def _margin(given: np.ndarray, y: np.ndarray, answerable: Sequence[bool | None],
            promises: Promises) -> float:
    """The smallest of the figures' margins over their promises (:func:`given_figures`), in
    standard errors."""
    f = given_figures(given.tolist(), y.tolist(), answerable)
    n_given, n_unanswerable = as_int(f["given"]), as_int(f["unanswerable"])
    if not n_given:
        return -math.inf
    margins = [_excess(as_float(f["given_right_share"]), promises.given_right, n_given),
               _excess(as_float(f["right_kept_share"]), promises.right_kept, int(y.sum()))]
    if n_unanswerable:
        margins.append(_excess(as_float(f["unanswerable_abstain_share"]),
                               promises.unanswerable_abstain, n_unanswerable))
    return min(margins)


def choose_threshold(confidence: Sequence[float], right: Sequence[bool],
                     answerable: Sequence[bool | None] | None = None,
                     promises: Promises = PROMISES) -> float:
    """The threshold that meets every promise with the widest margin on held-out answers:
    the one whose smallest margin (figure minus promise, in standard errors of a figure of
    that many answers) is largest; the higher threshold on a tie. Candidates are the right
    answers' confidences, each the highest threshold that still gives that right answer.
    ``answerable`` None or all unknown: no abstention figure.

    Why not a fixed share of right answers kept: a share fitted at exactly what the fitting
    lines give lands under it on new questions about half the time, and how much the other
    figures can give up for it follows from the model's quality, not from the rule. Why
    standard errors rather than ratios to the promises: a share near 1 (abstention) cannot
    exceed its promise by much of a ratio, so ratios would make it bind first. Why not the
    best F1 of "given" against "right": with few right answers its optimum sits on a flat,
    noisy ridge."""
    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(right, dtype=bool)
    if not y.any():
        return 1.0
    marks: Sequence[bool | None] = [None] * len(c) if answerable is None else answerable
    best_t, best_m = 1.0, -math.inf
    for t in np.unique(c[y])[::-1]:
        m = _margin(c >= t, y, marks, promises)
        if m > best_m:
            best_t, best_m = float(t), m
    return best_t


def selective_summary(confidence: Sequence[float | None], right: Sequence[bool],
                      answerable: Sequence[bool | None], abstained: Sequence[bool] | None,
                      bins: int = 10) -> dict[str, object] | None:
    """The confidence figures of an evaluation (None when no answer has a confidence);
    ``abstained`` None: the run did not abstain, so there are no "given" figures."""
    marks = list(abstained) if abstained is not None else [False] * len(confidence)
    rows = [(c, r, a, m) for c, r, a, m in zip(confidence, right, answerable, marks,
                                                 strict=True) if c is not None]
    if not rows:
        return None
    conf = [float(c) for c, _, _, _ in rows]
    ok = [bool(r) for _, r, _, _ in rows]
    ans = [a for _, _, a, _ in rows]
    on_answerable = [(c, r) for c, r, a, _ in rows if a]
    return {
        "n": len(rows),
        "auroc": auroc(conf, ok),
        "auroc_answerable": auroc([c for c, _ in on_answerable], [r for _, r in on_answerable]),
        "ece": expected_calibration_error(conf, ok, bins),
        "mean_confidence": float(np.mean(conf)),
        "share_right": float(np.mean(ok)),
        "at_threshold": (given_figures([not m for _, _, _, m in rows], ok, ans)
                         if abstained is not None else None),
        "reliability": reliability(conf, ok, bins),
    }
