"""What a new user hit on a fresh clone: the index manager's Import button, small snapshots,
an interrupted setup, wording and layout that read wrong, sub-word pieces in the views and a
snapshot switched from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt

from tests.ui.conftest import write_jsonl


def test_the_index_managers_import_button_opens_the_import_dialog(qtbot: Any,
                                                                   window: Any) -> None:
    manager = window.open_index_manager()
    qtbot.mouseClick(manager.import_button, Qt.MouseButton.LeftButton)
    dialog = manager.import_dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.reimport is None and dialog.format.isEnabled()
    assert window.last_error is None
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
    assert window.last_error is None
