"""Index manager ▸ Import…: the name suggested from the file is replaced by what the user
types, not added to ("nopemy snap!"), and a path that is not there is said not to exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from ragdesk.ui.import_dialog import ImportDialog


def _dialog(qtbot: Any) -> ImportDialog:
    dialog = ImportDialog(None, taken=[], encoders=["enc"], default_encoder="enc")
    qtbot.addWidget(dialog)
    dialog.show()
    qtbot.waitExposed(dialog)
    dialog.activateWindow()
    return dialog


@pytest.mark.parametrize("how", ["click", "tab"])
def test_typing_replaces_the_suggested_name(qtbot: Any, tmp_path: Path, how: str) -> None:
    dialog = _dialog(qtbot)
    dialog.source.setText(str(tmp_path / "nope.jsonl"))
    assert dialog.name.text() == "nope"
    if how == "click":
        qtbot.mouseClick(dialog.name, Qt.MouseButton.LeftButton,
                         pos=dialog.name.rect().center())
    else:
        dialog.source.setFocus()
        qtbot.keyClick(dialog.source, Qt.Key.Key_Tab)
        qtbot.keyClick(dialog.browse, Qt.Key.Key_Tab)  # the Browse… button comes first
    qtbot.waitUntil(dialog.name.hasFocus, timeout=2_000)
    qtbot.keyClicks(dialog.name, "my-snap")
    assert dialog.name.text() == "my-snap"
    # Typed by the user: another file no longer renames it, and a click keeps the cursor.
    dialog.source.setText(str(tmp_path / "other.jsonl"))
    assert dialog.name.text() == "my-snap"
    dialog.source.setFocus()
    qtbot.mouseClick(dialog.name, Qt.MouseButton.LeftButton, pos=dialog.name.rect().center())
    qtbot.keyClicks(dialog.name, "x")
    assert dialog.name.text() != "x" and "x" in dialog.name.text()


def test_a_missing_source_is_said_not_to_exist(qtbot: Any, tmp_path: Path) -> None:
    dialog = _dialog(qtbot)
    missing = tmp_path / "nope.jsonl"
    dialog.source.setText(str(missing))
    assert dialog.validate() == f"{missing} does not exist."
    dialog.source.setText(str(tmp_path))  # there, but a folder
    dialog.format.setCurrentIndex(dialog.format.findData("jsonl"))
    assert dialog.validate() == f"{tmp_path} is not a file."
    dialog.format.setCurrentIndex(dialog.format.findData("docs"))
    dialog.source.setText(str(tmp_path / "no-such-folder"))
    assert dialog.validate() == f"{tmp_path / 'no-such-folder'} does not exist."
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    dialog.source.setText(str(tmp_path / "a.txt"))
    dialog.format.setCurrentIndex(dialog.format.findData("docs"))
    assert dialog.validate() == f"{tmp_path / 'a.txt'} is not a folder."


def test_a_chooser_starts_in_the_files_folder_or_home(tmp_path: Path) -> None:
    """Never the process's working folder, and never an error for a path it cannot expand."""
    from ragdesk.ui.dialogs import start_folder

    f = tmp_path / "questions.jsonl"
    f.write_text("{}\n")
    assert start_folder(str(f)) == str(tmp_path)
    assert start_folder(str(tmp_path)) == str(tmp_path)
    assert start_folder("") == str(Path.home())
    assert start_folder("relative/name.jsonl") == str(Path.home())
    assert start_folder("~no-such-user-here/x.jsonl") == str(Path.home())  # had raised
