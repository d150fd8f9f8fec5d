"""Finding the main window's parts the way a user sees them, through Qt: its actions by
name (``ActionSpec.name`` is the QAction's objectName) and the error dialog open over it
(``dialogs.show_error`` names it), instead of accessors kept in the window for tests."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMessageBox, QWidget

from ragdesk.core.types import Answer

ANSWER_TIMEOUT_MS = 180_000
# An import or quantization of a tiny snapshot, on a machine loaded by other tests.
JOB_TIMEOUT_MS = 300_000


def type_question(qtbot: Any, window: Any, text: str) -> None:
    window.question.setFocus()
    qtbot.keyClicks(window.question, text)


def ask(qtbot: Any, window: Any, text: str) -> Answer:
    """Type ``text`` into the window's question box and press Enter, as a user asks; the
    finished answer."""
    type_question(qtbot, window, text)
    with qtbot.waitSignal(window.conversation.answerFinished, timeout=ANSWER_TIMEOUT_MS) as sig:
        qtbot.keyClick(window.question, Qt.Key.Key_Return)
    answer = sig.args[1]
    assert isinstance(answer, Answer)
    return answer


def action(window: QWidget, name: str) -> QAction:
    """The window's action of that row of ``window_actions.ACTIONS``."""
    found = window.findChild(QAction, name)
    assert found is not None, f"no action {name!r}"
    return found


def error_box(window: QWidget) -> QMessageBox | None:
    """The error dialog shown over ``window`` now (a closed one is gone: it is deleted)."""
    shown = [b for b in window.findChildren(QMessageBox, "ErrorDialog") if b.isVisible()]
    return shown[-1] if shown else None


def no_error(window: QWidget) -> bool:
    """No error dialog is open over ``window``."""
    return error_box(window) is None


def answer_packs(window: Any, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The packs the window's backend is asked to answer with, from now on, in order."""
    asked: list[str] = []
    real_answer = window.backend.answer

    def answer(question: str, params: Any, *, pack: str, **kw: Any) -> Any:
        asked.append(pack)
        return real_answer(question, params, pack=pack, **kw)

    monkeypatch.setattr(window.backend, "answer", answer)
    return asked
