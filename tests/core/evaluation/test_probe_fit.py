"""The reading probe fitted beside the confidence model, against scikit-learn: the probe on
every row, and the out-of-fold scores the model is fitted on (row i in fold i mod 5)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragdesk.core.confidence import FEATURES, READING_PROBE, ConfidenceModel
from ragdesk.core.confidence.probe import Probe, decode_state, encode_state, row_state
from ragdesk.core.evaluation.confidence_fit import FOLDS, fit_on_results, rescore
from ragdesk.core.evaluation.probe_fit import PROBE_L2
from ragdesk.core.evaluation.selective import auroc
from tests.core.evaluation.fit_rows import PLAIN

LAYER, DIM = 5, 12


def _rows(seed: int, n: int) -> list[dict[str, object]]:
    """Rows whose outcome follows one direction of the reading state (the features are
    noise), with states on a wide scale as a real residual stream's; every seventh row has
    no state (an empty answer)."""
    rng = np.random.default_rng(seed)
    states = rng.normal(size=(n, DIM)) * rng.uniform(0.1, 300.0, size=DIM)
    direction = rng.normal(size=DIM) / states.std(axis=0)
    answerable = rng.random(n) < 2 / 3
    right = (rng.random(n) < 1 / (1 + np.exp(-(2.0 * states @ direction - 3.0)))) & answerable
    rows: list[dict[str, object]] = []
    for i in range(n):
        row: dict[str, object] = {
            "features": dict(zip(PLAIN, map(float, rng.normal(size=len(PLAIN))), strict=True)),
            "em": float(right[i]), "answerable": bool(answerable[i])}
        if i % 7:
            row["reading_state"] = {"layer": LAYER, "float32": encode_state(states[i])}
        rows.append(row)
    return rows


def _states(rows: list[dict[str, object]]) -> tuple[np.ndarray, np.ndarray]:
    held = [(s, r["em"] == 1.0) for r in rows if (s := row_state(r)) is not None]
    return np.array([s.values for s, _ in held]), np.array([ok for _, ok in held])


def _sk_decision(x: np.ndarray, y: np.ndarray, at: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    mean, scale = x.mean(axis=0), x.std(axis=0)
    ref = LogisticRegression(C=1 / PROBE_L2, tol=1e-12, max_iter=100_000).fit(
        (x - mean) / scale, y)
    out: np.ndarray = ref.decision_function((at - mean) / scale)
    return out


def test_the_probe_and_its_out_of_fold_scores_equal_a_scikit_learn_reference() -> None:
    rows = _rows(0, 700)
    model = fit_on_results(rows, source="synthetic")
    assert model.probe is not None and model.probe.layer == LAYER
    assert model.names == FEATURES
    x, y = _states(rows)
    ref = _sk_decision(x, y, x)
    assert [model.probe.score(s) for s in x] == pytest.approx(ref, rel=1e-4, abs=1e-4)

    # the model weighs the scores of probes that did not see the row (interleaved folds)
    fold = np.arange(len(y)) % FOLDS
    oof = np.zeros(len(y))
    for f in range(FOLDS):
        oof[fold == f] = _sk_decision(x[fold != f], y[fold != f], x[fold == f])
    at = model.names.index(READING_PROBE)
    assert model.mean[at] == pytest.approx(oof.mean(), abs=1e-4)
    n = len(rows)  # rows without a state stand at the mean, as a model reads them
    assert model.scale[at] == pytest.approx(oof.std() * np.sqrt(len(y) / n), rel=1e-4)
    assert not np.allclose(oof, ref, atol=1e-2)
    # the state holds the signal: the probe carries the model
    weights = dict(zip(model.names, model.weights, strict=True))
    assert weights[READING_PROBE] == max(weights.values()) > 0.5
    assert model.fitted_on["cross_validated"]["auroc"] > 0.75
    assert (held_out := auroc(oof.tolist(), y.tolist())) is not None and held_out > 0.75


def test_a_probe_survives_the_model_file_and_rescoring_reads_the_rows_state() -> None:
    rows = _rows(1, 500)
    model = fit_on_results(rows, source="synthetic")
    again = ConfidenceModel.from_json(json.loads(json.dumps(model.to_json())))
    assert again.probe is not None and model.probe is not None
    assert again.probe.layer == model.probe.layer
    for r in rows[:50]:
        state = row_state(r)
        feats = dict(r["features"])  # type: ignore[call-overload]
        if state is not None:
            feats[READING_PROBE] = model.probe.score(state.values)
            assert again.probe.score(state.values) == pytest.approx(feats[READING_PROBE],
                                                                    rel=1e-5, abs=1e-5)
        assert rescore(again, r)[0] == pytest.approx(model.predict(feats), abs=1e-5)
    # a row without a state reads the probe's feature at its mean: no weight either way
    bare = next(r for r in rows if "reading_state" not in r)
    assert rescore(model, bare)[0] == pytest.approx(
        model.predict(dict(bare["features"])), abs=1e-12)  # type: ignore[call-overload]


def test_rows_without_states_give_a_model_without_a_probe() -> None:
    rows = [{k: v for k, v in r.items() if k != "reading_state"} for r in _rows(2, 400)]
    model = fit_on_results(rows, source="synthetic")
    assert model.probe is None and READING_PROBE not in model.names
    mixed = _rows(3, 400)  # states of two layers: not one probe's inputs
    for r in mixed[::2]:
        if "reading_state" in r:
            r["reading_state"] = {"layer": LAYER + 1, "float32": encode_state([1.0] * DIM)}
    assert fit_on_results(mixed, source="synthetic").probe is None


def test_states_and_probes_that_are_not_well_formed_are_refused() -> None:
    values = [1.5, -2.0, 3e4]
    assert decode_state(encode_state(values)) == values
    for bad in (None, "", "not base64!", "AAA=", encode_state([float("nan")])):
        assert decode_state(bad) is None
    assert row_state({"reading_state": {"layer": "9", "float32": encode_state(values)}}) is None
    with pytest.raises(ValueError, match="layer and its weights"):
        Probe.from_json({"layer": -1, "weights": [1.0], "intercept": 0.0})
    with pytest.raises(ValueError, match="non-finite"):
        Probe.from_json({"layer": 1, "weights": [float("inf")], "intercept": 0.0})
    with pytest.raises(ValueError, match="3 numbers for a probe of 2"):
        Probe(1, (1.0, 2.0), 0.0).score(values)


def test_an_evaluation_row_keeps_the_answers_state_for_the_next_fit() -> None:
    from ragdesk.core.evaluation.runner import QuestionResult
    from ragdesk.core.types import ReadingState

    values = [0.5, -1.25, 812.0]
    row = QuestionResult(1, "q", ["a"], True, 0, [], reading_state=ReadingState(7, values))
    stored = json.loads(json.dumps(row.to_json()))
    assert row_state(stored) == ReadingState(7, values)
    bare = QuestionResult(2, "q", ["a"], True, 0, []).to_json()
    assert "reading_state" not in bare and row_state(bare) is None
