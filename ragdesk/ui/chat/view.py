"""The conversation: a scrolling column of answer cards (the empty state until the first),
following the newest text while it streams."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFrame, QScrollArea, QVBoxLayout, QWidget

from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.chat.empty_state import EmptyState


class ChatView(QScrollArea):
    """A scrolling column of AnswerCards that follows the newest text while it streams."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("ChatView")
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.container = QWidget()
        self.container.setObjectName("ChatContainer")
        self.column = QVBoxLayout(self.container)
        self.column.setContentsMargins(20, 16, 20, 16)
        self.column.setSpacing(14)
        self.empty = EmptyState()
        self.column.addWidget(self.empty)
        self.column.addStretch(1)
        self.setWidget(self.container)
        self.cards: list[AnswerCard] = []
        self._stick = True
        bar = self.verticalScrollBar()
        bar.valueChanged.connect(self._on_scrolled)
        bar.rangeChanged.connect(self._on_range)

    def add_card(self, card: AnswerCard) -> AnswerCard:
        self.empty.setVisible(False)
        self.column.insertWidget(self.column.count() - 1, card)
        self.cards.append(card)
        self._stick = True
        QTimer.singleShot(0, self.scroll_to_bottom)
        return card

    def card(self, request_id: int) -> AnswerCard | None:
        for c in self.cards:
            if c.request_id == request_id:
                return c
        return None

    def clear(self) -> None:
        for c in self.cards:
            self.column.removeWidget(c)
            c.deleteLater()
        self.cards = []
        self.empty.setVisible(True)

    def scroll_to_bottom(self) -> None:
        self.verticalScrollBar().setValue(self._follow(self.verticalScrollBar().maximum()))

    def _follow(self, hi: int) -> int:
        """Where following the newest text stops: the bottom, unless the newest card is
        taller than the pane; then its top (the question and the answer) stays in view and
        the chips below are a scroll away."""
        card = self.cards[-1] if self.cards else None
        if card is None or card.y() <= 0:  # not laid out yet: the next range change is
            return hi
        return max(0, min(hi, card.y() - self.column.spacing()))

    def _on_scrolled(self, value: int) -> None:
        bar = self.verticalScrollBar()
        self._stick = value >= self._follow(bar.maximum()) - 8

    def _on_range(self, _lo: int, hi: int) -> None:
        # Follow streaming text down; the empty state is read from its top.
        if self._stick and self.cards:
            self.verticalScrollBar().setValue(self._follow(hi))
