"""The retrieval-collapse guard.

Lewis et al. (2020) report that on some tasks (story generation, in preliminary experiments)
the retriever "collapsed": it learned to return the same passages whatever the input, after
which the generator learns to ignore them.
Two signals, measured over the same evaluation questions at every evaluation, catch that:

- ``distinct_top1``: how many different passages come first. A collapsed retriever sends
  every question to the same few passages. Collapse when it falls to at most
  ``distinct_ratio`` (default 0.5) times its value at the first evaluation.
- ``mean_entropy``: the mean entropy (nats) of p(z|x) over the top K. A retriever that has
  stopped telling passages apart for a question either puts all mass on one passage
  (entropy → 0) or none on any (entropy → log K). Collapse when the mean falls to at most
  ``entropy_low_ratio`` (default 0.25) times its first value, or when it rises above
  ``entropy_high_fraction`` (default 0.99) of log K after starting below it.

The first evaluation (before any training, when there is an evaluation set) is the baseline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from ragdesk.core.posterior import entropy, probs_np
from ragdesk.core.safe_json import as_float, as_int

ACTIONS = ("warn", "stop", "freeze-retriever")


@dataclass(frozen=True)
class RetrievalStats:
    n_questions: int
    n_docs: int
    mean_entropy: float  # nats, of p(z|x) over the top n_docs
    distinct_top1: int
    temperature: float = 1.0  # τ of the p(z|x) the entropy is of

    def to_json(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, object]) -> RetrievalStats:
        return cls(as_int(d["n_questions"]), as_int(d["n_docs"]), as_float(d["mean_entropy"]),
                   as_int(d["distinct_top1"]), as_float(d.get("temperature", 1.0)))


def retrieval_stats(scores: np.ndarray, top1_ids: Sequence[int],
                    temperature: float) -> RetrievalStats:
    """``scores`` [n, K]: the retrieval scores d(z)·q(x) of each question's top K; p(z|x) is
    the engine's (:func:`ragdesk.core.posterior.probs_np`, with the snapshot's τ): at τ = 1 a
    normalized encoder's cosines give every passage about 1/K, and neither signal could fire."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] == 0:
        raise ValueError("scores must be a non-empty [n, K] array")
    ent = [entropy(probs_np(row, temperature)) for row in s]
    return RetrievalStats(n_questions=int(s.shape[0]), n_docs=int(s.shape[1]),
                          mean_entropy=float(np.mean(ent)),
                          distinct_top1=len(set(int(i) for i in top1_ids)),
                          temperature=float(temperature))


@dataclass(frozen=True)
class CollapseThresholds:
    distinct_ratio: float = 0.5
    entropy_low_ratio: float = 0.25
    entropy_high_fraction: float = 0.99


@dataclass(frozen=True)
class CollapseVerdict:
    collapsed: bool
    reasons: tuple[str, ...]

    def describe(self) -> str:
        return "; ".join(self.reasons) if self.reasons else "no sign of retrieval collapse"


def check_collapse(baseline: RetrievalStats, now: RetrievalStats,
                   thresholds: CollapseThresholds | None = None) -> CollapseVerdict:
    t = thresholds or CollapseThresholds()
    reasons: list[str] = []
    if now.distinct_top1 <= t.distinct_ratio * baseline.distinct_top1 and (
            now.distinct_top1 < baseline.distinct_top1):
        reasons.append(
            f"{now.distinct_top1} distinct top-1 passages over {now.n_questions} questions, "
            f"down from {baseline.distinct_top1} (limit: {t.distinct_ratio:.0%} of it)")
    if baseline.mean_entropy > 0 and now.mean_entropy <= t.entropy_low_ratio * (
            baseline.mean_entropy):
        reasons.append(
            f"mean entropy of p(z|x) {now.mean_entropy:.3f} nats, down from "
            f"{baseline.mean_entropy:.3f} (limit: {t.entropy_low_ratio:.0%} of it)")
    high = t.entropy_high_fraction * math.log(max(now.n_docs, 1))
    if baseline.mean_entropy < high <= now.mean_entropy and now.n_docs > 1:
        reasons.append(
            f"mean entropy of p(z|x) {now.mean_entropy:.3f} nats is within "
            f"{1 - t.entropy_high_fraction:.0%} of the uniform log K = "
            f"{math.log(now.n_docs):.3f}, up from {baseline.mean_entropy:.3f}")
    return CollapseVerdict(bool(reasons), tuple(reasons))
