"""The window's model preload answers the engine's made-up question with the window's own
answer options, so that the user's first question finds the prompt opening computed."""

from __future__ import annotations

from typing import Any

import pytest

from ragdesk.core.options import AnswerOptions
from ragdesk.ui.ops import Lane


@pytest.fixture()
def warm_ups(monkeypatch: pytest.MonkeyPatch) -> list[tuple[AnswerOptions, float]]:
    from ragdesk.core.engine import Engine

    calls: list[tuple[AnswerOptions, float]] = []
    real = Engine.warm_up

    def recording(self: Engine, options: AnswerOptions, **kw: Any) -> float:
        spent = real(self, options, **kw)
        calls.append((options, spent))
        return spent

    monkeypatch.setattr(Engine, "warm_up", recording)
    return calls


def test_the_preload_warms_the_engine_with_the_windows_options(
        qtbot: Any, warm_ups: list[tuple[AnswerOptions, float]], window: Any) -> None:
    qtbot.waitUntil(lambda: bool(warm_ups), timeout=120_000)
    qtbot.waitUntil(lambda: not window.ops.busy(Lane.ENGINE), timeout=30_000)
    (options, spent), = warm_ups  # once, by the preload
    assert options == window.params()
    assert spent > 0
