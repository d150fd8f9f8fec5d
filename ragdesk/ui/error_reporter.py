"""The window's one place for error dialogs, with a button for the action that fixes it."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from PySide6.QtWidgets import QMessageBox, QWidget

from ragdesk.ui.dialogs import show_error
from ragdesk.ui.reports import ErrorReport

# An error's ``action`` (ragdesk.core.errors.ACTIONS) -> the button's text and what it does.
FixActions = Mapping[str, tuple[str, Callable[[], object]]]


class ErrorReporter:
    def __init__(self, parent: QWidget, fixes: FixActions) -> None:
        self.parent = parent
        self.fixes = fixes
        self.silent = False  # set while closing: nobody is there to read a dialog

    def report(self, report: ErrorReport, title: str = "ragdesk") -> None:
        if self.silent:
            return
        box = show_error(self.parent, report, title)
        fix = self.fixes.get(report.action) if report.action else None
        if fix is not None:
            text, slot = fix
            button = box.addButton(text, QMessageBox.ButtonRole.ActionRole)
            button.clicked.connect(lambda _c=False, f=slot: f())
