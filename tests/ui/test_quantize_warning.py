"""The index manager shows quantize's warning when the recall fell short of its target."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ragdesk.ui.ops import Lane
from tests.ui.probes import JOB_TIMEOUT_MS

WARNING = ("recall@20 is 0.551, below the target 0.95: the best tried search setting "
           "(nprobe=256, rerank=1000) misses 45% of the top-20 passages exact search finds.")


def test_a_recall_below_the_target_is_shown(qtbot: Any, window: Any,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    w = window
    # The core's warning is tested against exact search (tests/core/snapshots/test_variants.py);
    # here only what the manager does with a result that carries one.
    monkeypatch.setattr(w.backend, "quantize",
                        lambda name, variant, progress, cancel: SimpleNamespace(warning=WARNING))
    m = w.open_index_manager()
    m.select("wiki-a")
    dlg = m.open_quantize()
    with qtbot.waitSignal(w.ops.events(Lane.JOBS).finished, timeout=JOB_TIMEOUT_MS):
        dlg.accept()
    qtbot.waitUntil(lambda: WARNING in m.message.text(), timeout=10_000)
    assert m.message.text() == f"Built a new index variant of “wiki-a”. Warning: {WARNING}"
