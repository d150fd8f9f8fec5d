"""Where questions are typed: the question box with its Send and Stop buttons."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent, QKeySequence
from PySide6.QtWidgets import (
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from ragdesk.ui.resources import icon


class QuestionBox(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line; grows to a few lines as the user types."""

    submitted = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("QuestionBox")
        self.setPlaceholderText("Ask a question…   (Enter sends, Shift+Enter adds a line)")
        self.setTabChangesFocus(True)
        self.setAccessibleName("Question")
        self.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAsNeeded)
        self.document().contentsChanged.connect(self._fit)
        self._fit()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
                self.insertPlainText("\n")
            else:
                self.submitted.emit()
            return
        super().keyPressEvent(event)

    def _fit(self) -> None:
        lines = max(2, min(6, int(self.document().size().height())))
        fm = self.fontMetrics()
        # Padding from the stylesheet (6 px each side) plus the frame and document margins.
        self.setFixedHeight(lines * fm.lineSpacing() + 2 * self.frameWidth()
                            + int(self.document().documentMargin() * 2) + 14)


class CopyPassThrough(QObject):
    """Lets the window's Copy action run when a read-only text has no selection."""

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if (event.type() == QEvent.Type.ShortcutOverride and isinstance(event, QKeyEvent)
                and event.matches(QKeySequence.StandardKey.Copy)
                and isinstance(obj, QTextEdit) and obj.isReadOnly()
                and not obj.textCursor().hasSelection()):
            event.ignore()
            return True
        return False


class Composer(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("Composer")
        self.question = QuestionBox()
        self.send_button = QPushButton(icon("send"), "Send")
        self.send_button.setObjectName("SendButton")
        self.send_button.setToolTip("Send the question (Enter)")
        self.stop_button = QPushButton(icon("stop"), "Stop")
        self.stop_button.setObjectName("StopButton")
        self.stop_button.setToolTip("Stop generating (Esc)")
        self.stop_button.setEnabled(False)
        row = QHBoxLayout(self)
        row.setContentsMargins(20, 10, 20, 14)
        row.setSpacing(8)
        row.addWidget(self.question, 1)
        buttons = QVBoxLayout()
        buttons.setSpacing(6)
        buttons.addWidget(self.send_button)
        buttons.addWidget(self.stop_button)
        buttons.addStretch(1)
        row.addLayout(buttons)

    def set_answering(self, busy: bool) -> None:
        self.stop_button.setEnabled(busy)
        self.send_button.setEnabled(not busy)

    def refresh_icons(self) -> None:
        self.send_button.setIcon(icon("send"))
        self.stop_button.setIcon(icon("stop"))
