"""The retrieval posterior ``p(z|x) = softmax_z(s(z, x) / τ)`` over the top-K passages.

``s`` is the exact inner product ``d(z)·q(x)`` the snapshot returns. τ = 1 for DPR: its
vectors are unnormalized, inner products are in the tens and the softmax is peaked (the RAG
paper, and transformers' ``RagTokenForGeneration``, use exactly that). A normalized encoder
(cosines in [-1, 1], e.g. all-MiniLM-L6-v2) was trained with a temperature —
sentence-transformers' ``MultipleNegativesRankingLoss`` multiplies cosines by ``scale=20`` —
and without it every one of five passages gets about 0.2, so the generator marginalizes over
irrelevant passages as much as over the right one and the per-token colours are noise.

τ for a snapshot comes, in order, from a fit stored with the snapshot
(:func:`fit_temperature`, ``ragdesk index calibrate``), from :data:`KNOWN_TEMPERATURES` for
encoders ragdesk ships or has measured, else from the encoder's kind
(:func:`default_temperature`).

This module is the one place p(z|x) is computed: the engine, training and the explore views
all call it. The torch form keeps autograd (training); the numpy form serves views that do
not load torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

# One range for every τ: a question's override (AnswerOptions.check), a stored fit, the
# fit's search.
from ragdesk.core.options import MAX_TEMPERATURE, MIN_TEMPERATURE

if TYPE_CHECKING:
    import torch

DPR_TEMPERATURE = 1.0
# 1 / sentence-transformers' default MultipleNegativesRankingLoss scale (20).
NORMALIZED_TEMPERATURE = 0.05

# Measured with ``ragdesk index calibrate`` on the starter snapshot (12,324 Vital Articles
# passages), fitted on NQ-open dev lines 1,001-3,610 (never the lines the EM figures use;
# 515 questions with an answer passage and another in their top 20; mean log-likelihood
# of the answer passages -1.998, against -2.341 at τ = 1);
# see docs/benchmarks.md.
KNOWN_TEMPERATURES: dict[str, float] = {
    "sentence-transformers/all-MiniLM-L6-v2": 0.088,
}



def default_temperature(encoder_id: str | None, normalized: bool) -> float:
    """τ for an encoder without a stored fit."""
    if encoder_id is not None and encoder_id in KNOWN_TEMPERATURES:
        return KNOWN_TEMPERATURES[encoder_id]
    return NORMALIZED_TEMPERATURE if normalized else DPR_TEMPERATURE


def temperature_of(snapshot: object) -> float:
    """τ of an opened snapshot (``SnapshotIndex.temperature``); 1 for anything that does not
    say, as for DPR."""
    t = getattr(snapshot, "temperature", 1.0)
    return float(t) if isinstance(t, (int, float)) else 1.0


def check_temperature(temperature: float) -> float:
    t = float(temperature)
    if not (math.isfinite(t) and MIN_TEMPERATURE <= t <= MAX_TEMPERATURE):
        raise ValueError(f"The retrieval temperature must be between {MIN_TEMPERATURE} and "
                         f"{MAX_TEMPERATURE}, not {temperature!r}.")
    return t


def log_probs(scores: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(z|x) over the last dimension of ``scores`` ([K] or [B, K]), in float32.

    τ = 1 divides nothing, so the result is bit-identical to transformers' log-softmax of the
    doc scores.
    """
    import torch

    s = scores.float()
    if temperature != 1.0:
        s = s / float(temperature)
    return torch.log_softmax(s, dim=-1)


def probs_np(scores: Sequence[float] | np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """p(z|x) [K] in float64 from plain scores (what views without torch use)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return s
    s = s / float(temperature)
    e = np.exp(s - s.max())
    out: np.ndarray = e / e.sum()
    return out


def entropy(p: Sequence[float] | np.ndarray) -> float:
    """Shannon entropy in nats (0 log 0 = 0)."""
    a = np.asarray(p, dtype=np.float64)
    a = a[a > 0]
    return float(-(a * np.log(a)).sum())


@dataclass(frozen=True)
class TemperatureFit:
    temperature: float
    questions: int  # questions with at least one positive passage in their top K
    log_likelihood: float  # mean log Σ_{z positive} p(z|x) at the fitted τ
    log_likelihood_at_1: float  # the same at τ = 1, for comparison


def _mean_loglik(scores: np.ndarray, positive: np.ndarray, valid: np.ndarray,
                 temperature: float) -> float:
    s = np.where(valid, scores / temperature, -np.inf)
    m = s.max(axis=1, keepdims=True)
    lse_all = m[:, 0] + np.log(np.exp(s - m).sum(axis=1))
    sp = np.where(positive & valid, s, -np.inf)
    mp = sp.max(axis=1, keepdims=True)  # every row has a positive (fit_temperature keeps those)
    lse_pos = mp[:, 0] + np.log(np.exp(sp - mp).sum(axis=1))
    return float((lse_pos - lse_all).mean())


def fit_temperature(scores: Sequence[Sequence[float]],
                    positives: Sequence[Sequence[bool]]) -> TemperatureFit:
    """The τ that maximizes the likelihood of the passages that hold the answer:
    ``mean_q log Σ_{z ∈ pos(q)} softmax(s_q / τ)_z`` over questions with at least one positive
    among their retrieved passages (the others say nothing about τ).

    The objective is one-dimensional and smooth in log τ; a coarse grid finds the basin and a
    golden-section search refines it.
    """
    rows = [(np.asarray(s, dtype=np.float64), np.asarray(p, dtype=bool))
            for s, p in zip(scores, positives, strict=True)]
    rows = [(s, p) for s, p in rows if p.size == s.size and p.any() and not p.all()]
    if not rows:
        raise ValueError("No question has both a passage with its answer and one without "
                         "among its retrieved passages; the temperature cannot be fitted.")
    width = max(s.size for s, _ in rows)
    s_mat = np.zeros((len(rows), width))
    p_mat = np.zeros((len(rows), width), dtype=bool)
    valid = np.zeros((len(rows), width), dtype=bool)
    for i, (s, p) in enumerate(rows):
        s_mat[i, :s.size] = s
        p_mat[i, :s.size] = p
        valid[i, :s.size] = True

    def f(log_t: float) -> float:
        return _mean_loglik(s_mat, p_mat, valid, math.exp(log_t))

    lo, hi = math.log(MIN_TEMPERATURE), math.log(MAX_TEMPERATURE)
    grid = np.linspace(lo, hi, 61)
    values = [f(float(g)) for g in grid]
    best = int(np.argmax(values))
    a = float(grid[max(best - 1, 0)])
    b = float(grid[min(best + 1, len(grid) - 1)])
    ratio = (math.sqrt(5) - 1) / 2
    c, d = b - ratio * (b - a), a + ratio * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(60):
        if fc > fd:
            b, d, fd = d, c, fc
            c = b - ratio * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + ratio * (b - a)
            fd = f(d)
    log_t = (a + b) / 2
    return TemperatureFit(temperature=math.exp(log_t), questions=len(rows),
                          log_likelihood=f(log_t), log_likelihood_at_1=f(0.0))


__all__ = [
    "DPR_TEMPERATURE",
    "KNOWN_TEMPERATURES",
    "NORMALIZED_TEMPERATURE",
    "TemperatureFit",
    "check_temperature",
    "default_temperature",
    "entropy",
    "fit_temperature",
    "log_probs",
    "probs_np",
    "temperature_of",
]
