"""The Index menu lists snapshots by the names users gave them, "&" included."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QMenu

from ragdesk.ui.actions import mnemonic
from ragdesk.ui.index_menu import IndexMenu
from ragdesk.ui.state import AppState
from tests.ui.fakes import snap


def test_a_snapshot_name_with_an_ampersand_is_shown_as_written(qapp: Any) -> None:
    state = AppState("tiny")
    state.set_snapshots([snap("R&D notes", active=True), snap("wiki")])
    menu = QMenu()
    entries = IndexMenu(menu, state, []).actions
    # Qt shows "&&" as "&" and takes no mnemonic from it; one "&" would underline the "D"
    assert entries["R&D notes"].text().startswith("R&&D notes")
    assert mnemonic(entries["R&D notes"].text()) is None
    assert entries["wiki"].text().startswith("wiki")
