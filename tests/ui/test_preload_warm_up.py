"""The window's model preload answers the engine's made-up question with the window's own
answer options, so that the user's first question finds the prompt opening computed."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.options import AnswerOptions
from ragdesk.ui.infos import PackInfo
from ragdesk.ui.ops import Lane
from tests.ui.conftest import SharedModelsBackend, open_window


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


class LatePacks(SharedModelsBackend):
    """Its packs are read only when the test says so, after the snapshots (the two reads run
    side by side, so either may land first), and the tiny pack reads in RAG-Sequence by its
    own default where the settings say RAG-Token."""

    release = threading.Event()

    def packs(self) -> list[PackInfo]:
        self.release.wait(60)
        return [dataclasses.replace(p, default_mode="sequence") if p.name == "tiny" else p
                for p in super().packs()]


def test_the_preload_waits_for_the_packs_and_warms_up_in_the_packs_own_mode(
        qtbot: Any, warm_ups: list[tuple[AnswerOptions, float]], ui_data: Path,
        tiny_parts: tuple[Any, Any]) -> None:
    SharedModelsBackend.parts = tiny_parts
    LatePacks.release.clear()
    w = open_window(qtbot, ui_data, LatePacks)  # returns once the snapshots are shown
    try:
        assert w.state.usable_snapshots() and not w.state.packs
        assert w.params().mode == "token"  # the settings' mode, until the packs are known
        LatePacks.release.set()
        qtbot.waitUntil(lambda: bool(warm_ups), timeout=120_000)
        qtbot.waitUntil(lambda: not w.ops.busy(Lane.ENGINE), timeout=30_000)
        (options, _spent), = warm_ups
        assert options.mode == "sequence"
        assert options == w.params()
    finally:
        LatePacks.release.set()
        w.shutdown()
        w.backend.ctx.close()
