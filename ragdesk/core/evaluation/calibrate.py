"""Fitting a snapshot's retrieval temperature τ on questions with known answers.

For each question the top-K passages are retrieved densely; a passage is "positive" when it
contains a gold answer (DPR's has-answer test, as in evaluation). τ maximizes the likelihood
that p(z|x) puts on the positive passages (:func:`ragdesk.core.posterior.fit_temperature`).
Questions whose top K holds no positive, or only positives, carry no information on τ and are
left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragdesk.core.errors import BadInputError
from ragdesk.core.evaluation.metrics import AnswerMatcher, passage_string
from ragdesk.core.evaluation.questions import Question
from ragdesk.core.options import MAX_TEMPERATURE, MIN_TEMPERATURE
from ragdesk.core.posterior import TemperatureFit, fit_temperature, probs_np
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback

DEFAULT_CALIBRATION_DOCS = 20
_EDGE = 0.05  # log τ this close to a bound of the search counts as at the bound


@dataclass(frozen=True)
class CalibrationReport:
    fit: TemperatureFit
    questions: int  # questions read
    docs: int  # K of the fit
    # mean largest p(z|x) over the top 5, before (τ = 1) and after; what the GUI shows
    mean_top1_before: float
    mean_top1_after: float

    def to_json(self) -> dict[str, object]:
        return {"temperature": self.fit.temperature, "questions_used": self.fit.questions,
                "questions": self.questions, "docs": self.docs,
                "log_likelihood": self.fit.log_likelihood,
                "log_likelihood_at_1": self.fit.log_likelihood_at_1,
                "mean_top1_prob_at_1": self.mean_top1_before,
                "mean_top1_prob": self.mean_top1_after}


def _check_inside_bounds(fit: TemperatureFit) -> None:
    """A fit at the edge of the search is no maximum, only where the search stopped: the
    scores do not tell the answer passages apart (or always do), and storing it would make
    p(z|x) uniform (or one-hot)."""
    log_t = math.log(fit.temperature)
    if min(log_t - math.log(MIN_TEMPERATURE), math.log(MAX_TEMPERATURE) - log_t) < _EDGE:
        raise BadInputError(
            f"The fitted temperature {fit.temperature:.4g} is at the bound of the search "
            f"({MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}): on these questions the scores do "
            "not single out the passages that hold the answer, so nothing was stored.",
            hint="Calibrate on more (or other) questions with answers, or with a smaller "
                 "--docs.")


def calibrate_temperature(snapshot: Any, encoder: Any, questions: Sequence[Question], *,
                          docs: int = DEFAULT_CALIBRATION_DOCS, batch_size: int = 64,
                          progress: ProgressCallback | None = None,
                          cancel: CancelToken | None = None) -> CalibrationReport:
    """Fit τ for ``snapshot`` (a SnapshotIndex) with its question ``encoder``."""
    if docs < 2:
        raise ValueError("calibration needs at least 2 passages per question")
    size = int(getattr(snapshot, "size", docs))
    if docs > size:
        # Every passage retrieved for every question: τ only spreads p(z|x) over them all,
        # and the fit runs to its upper bound (τ = 100 was stored).
        raise BadInputError(f"--docs {docs:,} is more than the {size:,} passages of the "
                            "snapshot.", hint=f"Use a K below {size:,} (the default is "
                            f"{DEFAULT_CALIBRATION_DOCS}).")
    scores: list[list[float]] = []
    positives: list[list[bool]] = []
    prog = Progress(len(questions), "retrieving for calibration", progress)
    for start in range(0, len(questions), batch_size):
        if cancel is not None:
            cancel.raise_if_cancelled()
        batch = questions[start:start + batch_size]
        vecs = encoder.encode([q.question for q in batch], batch_size=batch_size)
        for q, hits in zip(batch, snapshot.search(vecs, docs), strict=True):
            m = AnswerMatcher(q.answers)
            scores.append([h.score for h in hits])
            positives.append([m.matches(passage_string(h.title, h.text)) for h in hits])
        prog.update(len(batch))
    fit = fit_temperature(scores, positives)
    _check_inside_bounds(fit)

    def top1(t: float) -> float:
        return float(np.mean([probs_np(s[:5], t).max() for s in scores if s]))

    return CalibrationReport(fit=fit, questions=len(questions), docs=docs,
                             mean_top1_before=top1(1.0), mean_top1_after=top1(fit.temperature))
