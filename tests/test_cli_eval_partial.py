"""A long `eval --out` keeps what it answered when it stops early."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_eval import _run, tiny_setup  # noqa: F401  (the fixture)


def test_a_stopped_eval_keeps_its_answered_lines(
        tiny_setup: dict[str, Any], tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.cli import eval_cmd

    real = eval_cmd.make_answerer

    def failing_after_three(*args: Any, **kwargs: Any) -> Any:
        engine, answer = real(*args, **kwargs)
        calls = []

        def answer_or_stop(question: str) -> Any:
            calls.append(question)
            if len(calls) > 3:
                raise KeyboardInterrupt  # what Ctrl-C does in the middle of an answer
            return answer(question)

        return engine, answer_or_stop

    monkeypatch.setattr(eval_cmd, "make_answerer", failing_after_three)
    out = tmp_path / "preds.jsonl"
    code, _, _ = _run(tiny_setup, capsys, "--docs", "2", "--out", str(out))
    assert code == 130
    assert not out.exists()  # no complete file pretends to be one
    lines = [json.loads(x) for x in (tmp_path / "preds.jsonl.partial").read_text().splitlines()]
    assert [r["question"] for r in lines] == [q["question"] for q in tiny_setup["items"][:3]]
    assert all(isinstance(r["prediction"], str) and "confidence" in r for r in lines)

    monkeypatch.setattr(eval_cmd, "make_answerer", real)
    code, _, err = _run(tiny_setup, capsys, "--docs", "2", "--limit", "4", "--out", str(out))
    assert code == 0, err
    assert len(out.read_text().splitlines()) == 4
    assert not (tmp_path / "preds.jsonl.partial").exists()
