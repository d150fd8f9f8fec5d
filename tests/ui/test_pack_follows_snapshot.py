"""The window answers with the pack the core would use: the pack chosen, unless it cannot
query the active snapshot and that snapshot has a pack of its own (what ``ragdesk ask`` does).

The data directory: the GUI template's DPR snapshots wiki-a and wiki-b, which the chosen
"tiny" pack (DPR) queries, and other-space (sentence-transformers, 24-d), which it cannot,
given a pack of its own, "tiny-st", whose question encoder built it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.session import resolve_pack_name
from ragdesk.core.types import Answer
from ragdesk.ui.backend import Backend
from tests.ui.probes import answer_packs, no_error

TIMEOUT_MS = 180_000
NOTE = "The tiny pack cannot query other-space; answering with its own pack tiny-st."


@pytest.fixture()
def own_pack_data(ui_data: Path, tiny_models: Any) -> Path:
    from ragdesk.core import models
    from ragdesk.core.app import AppContext

    ctx = AppContext(ui_data)
    models.register_pack(ctx.catalog, models.PackSpec(
        name="tiny-st", kind="custom", question_encoder=str(tiny_models.st_encoder),
        passage_encoder=str(tiny_models.st_encoder), generator=str(tiny_models.bart),
        generator_kind="seq2seq", description="tiny random sentence-transformers + BART"))
    ctx.catalog.update_snapshot("other-space", default_pack="tiny-st")
    ctx.catalog.set_active("other-space")
    assert ctx.settings.chosen("model_pack") == "tiny"
    ctx.close()
    return ui_data


@pytest.fixture()
def own_pack_window(qtbot: Any, own_pack_data: Path) -> Iterator[Any]:
    """The window over that data directory, with ``said``: the lines its library gave the
    status bar (the model preload's lines soon replace them there)."""
    from ragdesk.core.app import AppContext
    from ragdesk.ui.main_window import MainWindow

    # The real Backend: each pack loads its own models, so the pack that answers shows.
    # a MainWindow with ``said`` added
    w: Any = MainWindow(Backend(AppContext(own_pack_data)), offer_first_run=False)
    w.said = []
    w.library.activity.connect(w.said.append)
    qtbot.addWidget(w)
    w.show()
    qtbot.waitExposed(w)
    with qtbot.waitSignal(w.state.snapshotsChanged, timeout=30_000):
        w.start()
    yield w
    w.shutdown()
    w.backend.ctx.close()


def _wait_listed_active(qtbot: Any, w: Any, name: str) -> None:
    """Until the list read after the switch to ``name`` has landed."""
    def listed() -> bool:
        info = w.state.snapshot(name)
        return info is not None and info.active

    qtbot.waitUntil(listed, timeout=30_000)


def test_a_snapshot_the_chosen_pack_cannot_query_answers_with_its_own(
        qtbot: Any, own_pack_window: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    w = own_pack_window
    qtbot.waitUntil(lambda: w.state.pack == "tiny-st", timeout=30_000)
    assert w.state.chosen_pack == "tiny"  # the choice is kept: other snapshots use it
    assert w.controls.pack.currentData() == "tiny-st"
    assert "tiny-st" in w.status.pack.text()
    assert w.said == [NOTE]  # once
    assert w.status.pack.toolTip() == NOTE
    assert w.state.snapshot("other-space").unusable_reason is None
    assert w.index_menu.actions["other-space"].isEnabled()

    asked = answer_packs(w, monkeypatch)
    w.question.setPlainText("who wrote the origin of species?")
    with qtbot.waitSignal(w.conversation.answerFinished, timeout=TIMEOUT_MS) as sig:
        w.send()
    got = sig.args[1]
    assert isinstance(got, Answer) and got.snapshot == "other-space"
    assert asked == ["tiny-st"] and w.backend.engine_loaded("tiny-st")
    assert no_error(w)

    # A snapshot the chosen pack queries brings the choice back, at once.
    w.library.switch_snapshot("wiki-a")
    assert w.state.pack == "tiny" and w.controls.pack.currentData() == "tiny"
    _wait_listed_active(qtbot, w, "wiki-a")
    assert w.said == [NOTE, "Switched to wiki-a; the next question uses it."]
    assert w.state.pack == "tiny" and not w.status.pack.toolTip()
    assert no_error(w)


def test_choosing_a_pack_that_cannot_query_the_snapshot_goes_back_and_says_why(
        qtbot: Any, own_pack_window: Any) -> None:
    w = own_pack_window
    combo = w.controls.pack
    qtbot.waitUntil(lambda: w.said == [NOTE], timeout=30_000)
    combo.setCurrentIndex(combo.findData("tiny"))  # the user picks it again
    qtbot.waitUntil(lambda: w.said == [NOTE, NOTE], timeout=30_000)
    assert combo.currentData() == "tiny-st" and w.state.pack == "tiny-st"
    assert w.state.chosen_pack == "tiny"

    # Choosing the snapshot's own pack (the models dialog's "Use") makes it the choice.
    w.library.set_pack("tiny-st")
    qtbot.waitUntil(lambda: w.backend.ctx.settings.get("model_pack") == "tiny-st",
                    timeout=30_000)
    # listed for the new choice: wiki-a, which has no pack of its own, would use it
    qtbot.waitUntil(lambda: w.state.snapshot("wiki-a").answer_pack == "tiny-st",
                    timeout=30_000)
    assert w.state.pack == "tiny-st" and w.state.chosen_pack == "tiny-st"
    assert w.said == [NOTE, NOTE]  # nothing more to say: the choice answers
    assert w.state.snapshot("wiki-a").unusable_reason  # 32-d DPR passages, 24-d questions
    assert no_error(w)


def test_the_window_and_the_core_agree_on_each_snapshots_pack(
        qtbot: Any, own_pack_window: Any) -> None:
    w = own_pack_window
    ctx = w.backend.ctx
    for name in ("wiki-a", "other-space", "wiki-b", "other-space"):
        w.library.switch_snapshot(name)
        _wait_listed_active(qtbot, w, name)
        assert no_error(w), name
        assert w.state.pack == resolve_pack_name(ctx, None, name), name
        assert w.state.pack == resolve_pack_name(ctx), name  # the CLI's, for the active one
        assert w.controls.pack.currentData() == w.state.pack, name

