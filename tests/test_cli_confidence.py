"""`index calibrate --confidence` fits the confidence model on answered questions, stores it
with the snapshot, and `eval` then reports every answer's confidence and the figures."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_eval import _run, _snapshot, tiny_setup  # noqa: F401  (the fixture)


def _by_hand(model: dict[str, Any], features: dict[str, float]) -> float:
    z = model["intercept"] + sum(
        w * (features[n] - m) / s
        for n, m, s, w in zip(model["names"], model["mean"], model["scale"], model["weights"],
                              strict=True))
    return 1 / (1 + math.exp(-z))


def test_calibrate_confidence_then_eval_reports_it(
        tiny_setup: dict[str, Any], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.cli.main import main
    from ragdesk.core.evaluation import calibrate

    monkeypatch.setattr(calibrate, "_check_inside_bounds", lambda fit: None)
    first = tmp_path / "first.jsonl"
    code, _, err = _run(tiny_setup, capsys, "--out", str(first), "--json")
    assert code == 0, err
    rows = [json.loads(line) for line in first.read_text().splitlines()]
    # a question set on which the tiny generator is right half of the time: the gold answer
    # of every other question is its own prediction
    qs = [{"question": r["question"],
           "answer": [r["prediction"]] if i % 2 == 0 and r["prediction"].strip() else
           ["zqxj vvkw"]} for i, r in enumerate(rows)]
    qpath = tmp_path / "fit.jsonl"
    qpath.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")

    data = str(tiny_setup["data_dir"])
    assert main(["--data-dir", data, "index", "calibrate", "tiny", str(qpath), "--pack", "tiny",
                 "--docs", "2", "--confidence", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = out["confidence"]
    assert model["fitted_on"]["questions"] == len(rows) and model["fitted_on"]["right"] > 0
    # answered as `ask` answers (the settings' K and mode), not with the τ fit's --docs
    assert model["fitted_on"]["source"].endswith(", K=5") and model["modes"] == ["token"]
    folder = _snapshot(tiny_setup).folder
    try:
        stored = json.loads((folder / "confidence.json").read_text())
        assert list(stored["models"].values()) == [model]
        second = tmp_path / "second.jsonl"
        code, summary, err = _run(tiny_setup, capsys, "--out", str(second), "--json")
        assert code == 0, err
        conf = json.loads(summary)["confidence"]
        assert conf is not None and conf["n"] == len(rows) and 0 <= conf["ece"] <= 1
        for r in (json.loads(line) for line in second.read_text().splitlines()):
            assert r["confidence"] == pytest.approx(_by_hand(model, r["features"]), abs=1e-9)
            assert r["abstained"] == (r["confidence"] < model["threshold"])
    finally:
        for name in ("confidence.json", "calibration.json"):
            (folder / name).unlink(missing_ok=True)
