"""What a new user hit on a fresh clone: the index manager's Import button, small snapshots,
an interrupted setup, wording and layout that read wrong, sub-word pieces in the views and a
snapshot switched from the command line."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt


def test_the_index_managers_import_button_opens_the_import_dialog(qtbot: Any,
                                                                   window: Any) -> None:
    manager = window.open_index_manager()
    qtbot.mouseClick(manager.import_button, Qt.MouseButton.LeftButton)
    dialog = manager.import_dialog
    assert dialog is not None and dialog.isVisible()
    assert dialog.reimport is None and dialog.format.isEnabled()
    assert window.last_error is None
    dialog.reject()
