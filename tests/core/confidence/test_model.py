"""The confidence model: its logistic regression against scikit-learn's, its file format."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from ragdesk.core.confidence import FEATURES, ConfidenceModel, fit_confidence, fit_logistic


def _data(seed: int, n: int = 400, d: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d))
    w = rng.normal(size=d)
    y = (rng.random(n) < 1 / (1 + np.exp(-(x @ w - 0.5)))).astype(float)
    return x, y


@pytest.mark.parametrize("l2", [0.1, 1.0, 10.0])
def test_fit_equals_scikit_learn(l2: float) -> None:
    from sklearn.linear_model import LogisticRegression

    x, y = _data(int(l2 * 10))
    w, b = fit_logistic(x, y, l2=l2)
    ref = LogisticRegression(C=1 / l2, tol=1e-12, max_iter=10_000).fit(x, y)
    assert w == pytest.approx(ref.coef_[0], abs=1e-5)
    assert b == pytest.approx(ref.intercept_[0], abs=1e-5)


def test_predict_is_the_standardized_regression_and_survives_json() -> None:
    from sklearn.linear_model import LogisticRegression

    x, y = _data(3, d=len(FEATURES))
    rows = [dict(zip(FEATURES, r, strict=True)) for r in x]
    model = fit_confidence(rows, [bool(v) for v in y], threshold=0.4)
    z = (x - x.mean(axis=0)) / x.std(axis=0)
    ref = LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000).fit(z, y)
    back = ConfidenceModel.from_json(model.to_json())
    for row, want in zip(rows[:20], ref.predict_proba(z[:20])[:, 1], strict=True):
        assert back.predict(row) == pytest.approx(want, abs=1e-6)
    assert back.abstains(0.39) and not back.abstains(0.4)


def test_the_modes_a_model_was_fitted_on_survive_json_and_decide_what_it_judges() -> None:
    x, y = _data(6, d=len(FEATURES))
    rows = [dict(zip(FEATURES, r, strict=True)) for r in x]
    model = fit_confidence(rows, [bool(v) for v in y], threshold=0.5, modes=("together",))
    back = ConfidenceModel.from_json(model.to_json())
    assert back.modes == ("together",) and back == model
    assert back.fits("together") and not back.fits("token")
    older = {k: v for k, v in model.to_json().items() if k != "modes"}
    assert ConfidenceModel.from_json(older).fits("sequence")  # fitted before modes: any
    with pytest.raises(ValueError, match="modes"):
        ConfidenceModel.from_json({**model.to_json(), "modes": "together"})


def test_a_missing_feature_counts_as_its_mean() -> None:
    x, y = _data(4, d=len(FEATURES))
    rows = [dict(zip(FEATURES, r, strict=True)) for r in x]
    model = fit_confidence(rows, [bool(v) for v in y], threshold=0.5)
    full = dict(zip(model.names, model.mean, strict=True))
    partial = {k: v for k, v in full.items() if k != FEATURES[0]}
    assert model.predict(partial) == pytest.approx(model.predict(full))
    assert model.predict(full) == pytest.approx(1 / (1 + math.exp(-model.intercept)))


@pytest.mark.parametrize("change", [{"weights": [1.0]}, {"scale": None}, {"intercept": "nan"},
                                    {"format": 9}])
def test_damaged_model_files_are_refused(change: dict[str, object]) -> None:
    x, y = _data(5, d=len(FEATURES))
    good = fit_confidence([dict(zip(FEATURES, r, strict=True)) for r in x],
                          [bool(v) for v in y], threshold=0.5).to_json()
    if change.get("scale", 1) is None:
        good["scale"] = [0.0] * len(FEATURES)
    else:
        good.update(change)
    with pytest.raises((ValueError, TypeError)):
        ConfidenceModel.from_json(good)


def test_one_class_cannot_be_fitted() -> None:
    with pytest.raises(ValueError, match="all right or all wrong"):
        fit_confidence([{"logprob": -1.0}, {"logprob": -2.0}], [True, True], threshold=0.5)


def test_the_starter_pack_ships_a_model_fitted_only_on_fitting_lines() -> None:
    """The shipped model is found for the starter's GGUF wherever the data directory is, and
    says it was fitted on NQ-open dev lines after 1,000 (lines 1-1,000 are for evaluation)."""
    import re

    from ragdesk.core.confidence import confidence_model
    from ragdesk.core.models.starter import GGUF_NAME
    from ragdesk.core.starter_encoder import ENCODER_ID

    model, where = confidence_model(None, f"/anywhere/models/starter/{GGUF_NAME}", ENCODER_ID)
    assert model is not None and where.startswith("shipped")
    assert set(model.names) == set(FEATURES) and 0 < model.threshold < 1
    lines = re.search(r"lines (\d+)-(\d+)", model.fitted_on["source"])
    assert lines is not None
    first, last = map(int, lines.groups())
    assert first >= 1001 and last <= 3610
    assert model.modes == ("token",)  # the starter's default, which its answers were read in
    assert confidence_model(None, f"/anywhere/{GGUF_NAME}", "another/encoder")[0] is None


def test_the_reader_pack_ships_a_model_for_answers_read_together() -> None:
    """The reader pack's model is found for its GGUF with the starter's encoder, was fitted on
    fitting lines only, judges the pack's default mode alone, and reads no closed-book
    feature (so its answers skip that pass)."""
    import re

    from ragdesk.core.confidence import CLOSED_BOOK, confidence_model
    from ragdesk.core.models.reader import DEFAULT_MODE, QWEN_READER
    from ragdesk.core.starter_encoder import ENCODER_ID

    model, where = confidence_model(None, f"/anywhere/models/reader/{QWEN_READER.name}",
                                    ENCODER_ID)
    assert model is not None and where.startswith("shipped")
    assert model.modes == (DEFAULT_MODE,) and not model.reads_any(CLOSED_BOOK)
    lines = re.search(r"lines (\d+)-(\d+)", model.fitted_on["source"])
    assert lines is not None
    first, last = map(int, lines.groups())
    assert first >= 1001 and last <= 3610 and 0 < model.threshold < 1


def test_the_measured_figures_are_of_the_answers_the_engine_gives() -> None:
    """A model with a memory part measured what the engine gives (the answer kept of the two)
    under ``with_memory``; the passages' figures are the rest. ``measured`` picks for every
    reader of them."""
    from ragdesk.core.confidence import confidence_model
    from ragdesk.core.models.reader import QWEN_READER
    from ragdesk.core.models.starter import GGUF_NAME
    from ragdesk.core.starter_encoder import ENCODER_ID

    reader = confidence_model(None, f"/anywhere/{QWEN_READER.name}", ENCODER_ID)[0]
    starter = confidence_model(None, f"/anywhere/{GGUF_NAME}", ENCODER_ID)[0]
    assert reader is not None and reader.memory is not None
    assert starter is not None and starter.memory is None
    kept = reader.fitted_on["with_memory"]
    assert reader.measured()["cross_validated"] == kept["cross_validated"]
    assert reader.measured()["right"] == kept["right"] > reader.fitted_on["right"]
    assert starter.measured()["cross_validated"] == starter.fitted_on["cross_validated"]
    assert starter.measured()["right"] == starter.fitted_on["right"]


def test_a_snapshots_model_for_another_mode_leaves_the_shipped_one_in_place(
        tmp_path: Path) -> None:
    """The lookup passes over a model fitted on another mode's answers: the reader's shipped
    model (read together) still judges together answers on a snapshot calibrated for
    RAG-Token, whose own model judges the RAG-Token ones."""
    from ragdesk.core.confidence import confidence_model, write_snapshot_model
    from ragdesk.core.models.reader import QWEN_READER
    from ragdesk.core.starter_encoder import ENCODER_ID

    x, y = _data(7, d=len(FEATURES))
    own = fit_confidence([dict(zip(FEATURES, r, strict=True)) for r in x],
                         [bool(v) for v in y], threshold=0.5, modes=("token",))
    write_snapshot_model(tmp_path, QWEN_READER.name, own)
    gguf = f"/anywhere/models/reader/{QWEN_READER.name}"
    token, where = confidence_model(tmp_path, gguf, ENCODER_ID, "token")
    assert token == own and where == "fitted for this snapshot"
    together, where = confidence_model(tmp_path, gguf, ENCODER_ID, "together")
    assert together is not None and together != own and where.startswith("shipped")
    assert together.modes == ("together",)
    assert confidence_model(tmp_path, gguf, ENCODER_ID, "sequence") == (None, "none")
