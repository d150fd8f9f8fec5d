"""Help ▸ Keyboard shortcuts and Help ▸ About."""

from __future__ import annotations

import html
from collections.abc import Iterable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QDialog,
    QHeaderView,
    QMessageBox,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ragdesk._version import __version__
from ragdesk.ui.explore.keys import KEY_ROWS as EXPLORE_KEY_ROWS
from ragdesk.ui.resources import app_icon


def _keys(a: QAction) -> str:
    return a.shortcut().toString(QKeySequence.SequenceFormat.NativeText)


def shortcut_rows(actions: Iterable[QAction], dock_toggles: Iterable[QAction]
                  ) -> list[tuple[str, str]]:
    """Every key the window answers to: its actions', the docks' (the checkable actions
    among ``actions`` are the explore views', which show and hide docks too) and the keys
    inside the explore views."""
    rows = [("Send the question", "Enter"), ("New line in the question", "Shift+Enter")]
    keyed = [a for a in actions if not a.shortcut().isEmpty()]
    rows += [(a.text().replace("&", "").rstrip("…"), _keys(a)) for a in keyed
             if not a.isCheckable()]
    views = [a for a in keyed if a.isCheckable()]
    rows += [(f"Show or hide {a.text().replace('&', '')}", _keys(a))
             for a in [*dock_toggles, *views]]
    rows += EXPLORE_KEY_ROWS
    rows.append(("Menus", "Alt + the underlined letter"))
    return rows


def show_shortcuts(parent: QWidget, rows: list[tuple[str, str]]) -> QDialog:
    d = QDialog(parent)
    d.setObjectName("ShortcutsDialog")
    d.setWindowTitle("Keyboard shortcuts")
    lay = QVBoxLayout(d)
    table = QTableWidget(len(rows), 2)
    table.setHorizontalHeaderLabels(["Action", "Keys"])
    table.verticalHeader().setVisible(False)
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.setShowGrid(False)
    table.setAlternatingRowColors(True)
    for r, (what, keys) in enumerate(rows):
        table.setItem(r, 0, QTableWidgetItem(what))
        table.setItem(r, 1, QTableWidgetItem(keys))
    table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
    table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
    lay.addWidget(table)
    close = QPushButton("Close")
    close.clicked.connect(d.accept)
    lay.addWidget(close, 0, Qt.AlignmentFlag.AlignRight)
    d.resize(460, 560)
    d.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    d.open()
    return d


def show_about(parent: QWidget, data_root: str) -> QMessageBox:
    box = QMessageBox(parent)
    box.setWindowTitle("About ragdesk")
    box.setIconPixmap(app_icon().pixmap(64, 64))
    box.setText(f"<b>ragdesk {html.escape(__version__)}</b>")
    box.setInformativeText(
        "Retrieval-Augmented Generation over local Wikipedia snapshots, after Lewis et "
        "al. (2020), <i>Retrieval-Augmented Generation for Knowledge-Intensive NLP "
        f"Tasks</i>.<br/><br/>Data directory: {html.escape(data_root)}")
    box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    box.open()
    return box
