"""Fitting the confidence model on evaluated questions (never the ones reported on).

Outcomes are exact match of the best guess; every question counts, answerable or not, since
a user asks both kinds. The threshold is chosen on cross-validated predictions, so that it is
set as it will be met: on answers the model has not seen.

Rows that also carry the reader's answer from memory (``other`` and the memory features, see
:mod:`ragdesk.core.confidence.memory`) get a memory part as well, fitted in two steps as the
engine answers: the passages' answers are judged first (cross-validated, so the memory part
reads the passages' P(right) as it will meet it), then the answers from memory beside them.
The engine's rule then picks one candidate per question, and the threshold is chosen on what
it keeps.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragdesk.core.confidence.features import FEATURES, READING_PROBE
from ragdesk.core.confidence.memory import (
    KEPT_FEATURES,
    MEMORY_FEATURES,
    judge_memory,
    keeps_memory,
    kept_features,
)
from ragdesk.core.confidence.model import ConfidenceModel, fit_confidence
from ragdesk.core.confidence.probe import Probe, row_state
from ragdesk.core.evaluation.folds import interleaved
from ragdesk.core.evaluation.metrics import exact_match
from ragdesk.core.evaluation.probe_fit import fit_probe
from ragdesk.core.evaluation.selective import (
    auroc,
    choose_threshold,
    expected_calibration_error,
    given_figures,
)
from ragdesk.core.safe_json import as_float, as_object

FOLDS = 5
L2 = 1.0


def cross_validated(rows: Sequence[Mapping[str, float]], right: np.ndarray,
                    l2: float, folds: int, names: Sequence[str]) -> np.ndarray:
    """Each answer's P(right) from a model fitted without its fold (:func:`.folds.interleaved`)."""
    out = np.zeros(len(rows))
    idx = np.arange(len(rows))
    for test, train in interleaved(len(rows), folds):
        if right[train].min() == right[train].max():
            out[test] = float(right[train].mean())
            continue
        model = fit_confidence([rows[i] for i in idx[train]], right[train].tolist(),
                               threshold=0.5, l2=l2, names=names)
        out[test] = [model.predict(rows[i]) for i in idx[test]]
    return out


def _figures(cv: np.ndarray, right: np.ndarray, answerable: Sequence[bool | None],
             folds: int) -> tuple[float, dict[str, object]]:
    """The threshold chosen on cross-validated P(right), and the figures there."""
    threshold = choose_threshold(cv.tolist(), right.tolist(), answerable)
    figures = given_figures((cv >= threshold).tolist(), right.tolist(), answerable)
    return threshold, {
        "folds": folds, "auroc": auroc(cv.tolist(), right.tolist()),
        "ece": expected_calibration_error(cv.tolist(), right.tolist()),
        "given": figures["given"],
        "given_right_share": figures["given_right_share"],
        "right_kept_share": figures["right_kept_share"],
        "unanswerable_abstain_share": figures["unanswerable_abstain_share"],
    }


def _texts(row: Mapping[str, object]) -> tuple[str, str | None]:
    """(the passages' answer, the answer from memory or None) of one evaluation row."""
    prediction = row.get("prediction")
    other = row.get("other")
    kept = prediction if isinstance(prediction, str) else ""
    second = other if isinstance(other, str) else None
    return (second or "", kept) if row.get("from_memory") is True else (kept, second)


def _gold(row: Mapping[str, object]) -> list[str]:
    answers = row.get("answers")
    return [a for a in answers if isinstance(a, str)] if isinstance(answers, list) else []


def _passages_right(row: Mapping[str, object]) -> bool:
    """Whether the passages' answer was right: the row's own ``em`` unless the row kept the
    answer from memory instead."""
    if row.get("from_memory") is True:
        return exact_match(_texts(row)[0], _gold(row)) >= 1.0
    return as_float(row["em"]) >= 1.0


def _log_loss(p: np.ndarray, y: np.ndarray) -> float:
    q = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(np.where(y, np.log(q), np.log(1 - q))))


@dataclass(frozen=True)
class _MemoryFit:
    part: ConfidenceModel
    kept: ConfidenceModel | None
    threshold: float
    fitted_on: dict[str, object]


def _memory_part(rows: Sequence[Mapping[str, object]], feats: Sequence[Mapping[str, float]],
                 passage_cv: np.ndarray, right: np.ndarray,
                 answerable: Sequence[bool | None], l2: float, folds: int,
                 ) -> _MemoryFit | None:
    """The memory part, the kept part where it judges the answers kept better than the
    larger of the two P(right) (lower cross-validated log loss), the threshold chosen on
    the candidates the engine then keeps, and those figures; None when the rows hold no
    answers from memory or when keeping them would make no more answers right
    (cross-validated) than the passages' answers alone."""
    read = [i for i, r in enumerate(rows)
            if _texts(r)[1] is not None and all(n in feats[i] for n in MEMORY_FEATURES)]
    if len(read) < 2 * folds or len(read) < len(rows) // 2:
        return None
    mem_feats = [{**{n: feats[i][n] for n in MEMORY_FEATURES},
                  "passage_confidence": float(passage_cv[i])} for i in read]
    mem_right = np.array([exact_match(_texts(rows[i])[1] or "", _gold(rows[i])) >= 1.0
                          for i in read])
    if mem_right.all() or not mem_right.any():
        return None
    mem_cv = cross_validated(mem_feats, mem_right, l2, folds, MEMORY_FEATURES)
    use = [keeps_memory(float(passage_cv[i]), float(mem_cv[j]),
                        bool(mem_feats[j]["memory_agrees"])) for j, i in enumerate(read)]
    final, kept_right = passage_cv.copy(), right.copy()
    for j, i in enumerate(read):
        final[i] = max(final[i], mem_cv[j])
        if use[j]:
            kept_right[i] = mem_right[j]
    if kept_right.sum() <= right.sum():
        return None
    kept_feats = [kept_features(float(passage_cv[i]), float(mem_cv[j]), mem_feats[j], use[j])
                  for j, i in enumerate(read)]
    kept_cv = cross_validated(kept_feats, kept_right[read], l2, folds, KEPT_FEATURES)
    stacked = final.copy()
    stacked[read] = kept_cv
    with_kept = _log_loss(stacked, kept_right) < _log_loss(final, kept_right)
    threshold, figures = _figures(stacked if with_kept else final, kept_right, answerable,
                                  folds)
    part = fit_confidence(mem_feats, mem_right.tolist(), threshold=threshold, l2=l2,
                          names=MEMORY_FEATURES, fitted_on={
                              "questions": len(read), "right": int(mem_right.sum()),
                              "auroc_cross_validated": auroc(mem_cv.tolist(),
                                                             mem_right.tolist())})
    kept = fit_confidence(kept_feats, kept_right[read].tolist(), threshold=threshold, l2=l2,
                          names=KEPT_FEATURES, fitted_on={
                              "questions": len(read),
                              "log_loss_cross_validated": _log_loss(stacked, kept_right),
                              "log_loss_of_the_larger": _log_loss(final, kept_right)}
                          ) if with_kept else None
    return _MemoryFit(part, kept, threshold, {
        "right": int(kept_right.sum()), "right_from_passages_alone": int(right.sum()),
        "from_memory": int(sum(use)), "kept_part": with_kept, "cross_validated": figures})


def fit_on_results(results: Sequence[Mapping[str, object]], *, source: str, l2: float = L2,
                   folds: int = FOLDS, names: Sequence[str] = FEATURES,
                   modes: Sequence[str] = ()) -> ConfidenceModel:
    """A model from evaluation rows (``eval --out`` lines or ``QuestionResult.to_json()``):
    each needs ``features`` and ``em``. ``names``: the features it reads (without
    :data:`CLOSED_BOOK`, answers skip the pass that computes those); ``modes``: the reading
    mode the rows were answered in (only such answers get a confidence from it). Rows with
    the reader's answers from memory (``other``, ``answers`` and the memory features) give
    the model a memory part where keeping those answers makes more of them right."""
    unknown = sorted(set(names) - set(FEATURES))
    if unknown or not names:
        raise ValueError(f"not features ragdesk computes: {unknown}" if unknown
                         else "no features to fit on")
    rows = [r for r in results if r.get("features") and r.get("em") is not None]
    if len(rows) < 2 * folds:
        raise ValueError(f"only {len(rows)} answered questions with features; the confidence "
                         "model needs a few hundred")
    feats = [{k: as_float(v) for k, v in as_object(r["features"]).items()} for r in rows]
    right = np.array([_passages_right(r) for r in rows], dtype=bool)
    if right.all() or not right.any():
        raise ValueError("the answers are all right or all wrong; nothing to tell apart")
    answerable: list[bool | None] = [
        a if isinstance(a := r.get("answerable"), bool) else None for r in rows]
    probe = _probe_part(rows, feats, right, folds) if READING_PROBE in names else None
    if probe is None:
        names = [n for n in names if n != READING_PROBE]
    # a feature no row holds (a generator without the pass that computes it) tells nothing
    names = [n for n in names if any(n in f for f in feats)]
    cv = cross_validated(feats, right, l2, folds, names)
    threshold, figures = _figures(cv, right, answerable, folds)
    fitted_on: dict[str, object] = {
        "source": source, "questions": len(rows), "right": int(right.sum()), "l2": l2,
        "cross_validated": figures}
    memory = _memory_part(rows, feats, cv, right, answerable, l2, folds)
    if memory is not None:
        threshold, fitted_on["with_memory"] = memory.threshold, memory.fitted_on
    model = dataclasses.replace(
        fit_confidence(feats, right.tolist(), threshold=threshold, l2=l2, names=names,
                       fitted_on=fitted_on, modes=modes), probe=probe)
    if memory is None:
        return model
    return dataclasses.replace(model, memory=memory.part, kept=memory.kept)


def _probe_part(rows: Sequence[Mapping[str, object]], feats: list[dict[str, float]],
                right: np.ndarray, folds: int) -> Probe | None:
    """The reading probe, where most rows hold a reading state of one layer and size; each
    row's ``reading_probe`` feature becomes its out-of-fold score (rows without a state: the
    mean, as a model reads a missing feature). None: too few states to fit one."""
    found = [(i, st) for i, r in enumerate(rows) if (st := row_state(r)) is not None]
    held = [i for i, _ in found]
    shapes = {(st.layer, len(st.values)) for _, st in found}
    if len(held) < len(rows) // 2 or len(shapes) != 1:
        return None
    outcomes = right[held]
    if outcomes.min() == outcomes.max() or len(held) < 2 * folds:
        return None
    matrix = np.array([st.values for _, st in found], dtype=np.float64)
    probe, scores = fit_probe(matrix, outcomes, found[0][1].layer, folds)
    fill = float(scores.mean())
    for f in feats:
        f[READING_PROBE] = fill
    for i, score in zip(held, scores, strict=True):
        feats[i][READING_PROBE] = float(score)
    return probe


def rescore(model: ConfidenceModel, row: Mapping[str, object]) -> tuple[float, bool]:
    """(confidence, right) of the answer the engine would give under ``model`` for one
    evaluation row that has ``features``: the passages' answer, or the one from memory where
    the row holds it and the model's memory part keeps it (the engine's rule)."""
    feats = {k: as_float(v) for k, v in as_object(row["features"]).items()}
    state = row_state(row)
    if model.probe is not None and state is not None and model.probe.reads(state):
        feats[READING_PROBE] = model.probe.score(state.values)
    p = model.predict(feats)
    memory_text = _texts(row)[1]
    if (model.memory is None or memory_text is None
            or not all(n in feats for n in MEMORY_FEATURES)):
        return p, _passages_right(row)
    verdict = judge_memory(model, p, feats)
    right = (exact_match(memory_text, _gold(row)) >= 1.0 if verdict.from_memory
             else _passages_right(row))
    return verdict.confidence, right
