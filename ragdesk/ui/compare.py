"""Compare snapshots: one question against two snapshots, answers side by side.

This is the paper's index hot-swap demo (a 2016 and a 2018 Wikipedia give different answers
to "who is the president of ..." without touching the model's parameters).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.options import AnswerOptions
from ragdesk.core.units import plural
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.conversation import Conversation
from ragdesk.ui.infos import SnapshotInfo
from ragdesk.ui.resources import icon
from ragdesk.ui.state import AppState


class CompareDialog(QDialog):
    def __init__(self, parent: QWidget, state: AppState, conversation: Conversation,
                 params: Callable[[], AnswerOptions]) -> None:
        super().__init__(parent)
        self.conversation = conversation
        self.params = params
        self.setObjectName("CompareDialog")
        self.setWindowTitle("Compare snapshots")
        self.setModal(False)
        self.cards: list[AnswerCard | None] = [None, None]

        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 14, 14, 12)
        lay.setSpacing(10)
        intro = QLabel("Ask one question against two snapshots with the same model: the "
                       "answers differ only in what each snapshot knows.")
        intro.setWordWrap(True)
        intro.setObjectName("CompareIntro")
        lay.addWidget(intro)

        lay.addLayout(self._question_row())

        grid = QGridLayout()
        grid.setHorizontalSpacing(14)
        self.pickers: list[QComboBox] = []
        self.columns: list[QVBoxLayout] = []
        for col, mnemonic in enumerate(("&Left", "&Right")):
            head = QHBoxLayout()
            # A box layout in a grid whose two spacings differ gets none of its own: the
            # label touched its box.
            head.setSpacing(8)
            lab = QLabel(f"{mnemonic} snapshot")
            combo = QComboBox()
            combo.setMinimumContentsLength(18)
            lab.setBuddy(combo)
            head.addWidget(lab)
            head.addWidget(combo, 1)
            grid.addLayout(head, 0, col)
            scroll = QScrollArea()
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            holder = QWidget()
            holder.setObjectName("ChatContainer")
            column = QVBoxLayout(holder)
            column.setContentsMargins(0, 4, 0, 4)
            column.addStretch(1)
            scroll.setWidget(holder)
            grid.addWidget(scroll, 1, col)
            self.pickers.append(combo)
            self.columns.append(column)
        grid.setRowStretch(1, 1)
        lay.addLayout(grid, 1)

        self.note = QLabel()
        self.note.setObjectName("CompareNote")
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        state.snapshotsChanged.connect(self.set_snapshots)
        self.set_snapshots(state.snapshots)
        self.resize(1100, 620)

    def _question_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.question = QLineEdit()
        self.question.setPlaceholderText("Question")
        # Enter in the question presses the default button, "Compare".
        q_label = QLabel("&Question")
        q_label.setBuddy(self.question)
        row.addWidget(q_label)
        row.addWidget(self.question, 1)
        self.go = QPushButton(icon("compare"), "&Compare")
        self.go.setDefault(True)
        self.go.clicked.connect(self.run)
        row.addWidget(self.go)
        return row

    def set_snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
        usable = [s for s in snapshots if s.ready and not s.unusable_reason]
        for col, combo in enumerate(self.pickers):
            keep = combo.currentData()
            combo.clear()
            for s in usable:
                combo.addItem(f"{s.name}  ({plural(s.passages, 'passage')})", s.name)
            i = combo.findData(keep) if keep else -1
            if i < 0:
                i = min(col, combo.count() - 1)
            combo.setCurrentIndex(i)
        enough = len(usable) >= 2
        self.go.setEnabled(enough)
        self.note.setText("" if enough else
                          "Comparing needs two snapshots that the current model pack can "
                          "query; import another one in Index ▸ Manage indexes.")

    def set_pair(self, left: str, right: str) -> None:
        for combo, name in zip(self.pickers, (left, right), strict=True):
            combo.setCurrentIndex(combo.findData(name))

    def run(self) -> None:
        q = self.question.text().strip()
        names = [c.currentData() for c in self.pickers]
        if not q or None in names:
            self.question.setFocus()
            return
        if self.running():
            return
        for col, name in enumerate(names):
            old = self.cards[col]
            if old is not None:
                self.columns[col].removeWidget(old)
                self.conversation.forget(old)
                old.deleteLater()
            card = self.conversation.ask(q, self.params(), snapshot=str(name), in_chat=False)
            self.columns[col].insertWidget(0, card, 0, Qt.AlignmentFlag.AlignTop)
            self.cards[col] = card
        self.note.setText(f"Same question, same model; left: {names[0]}, right: {names[1]}.")

    def running(self) -> bool:
        return any(c is not None and c.state.active for c in self.cards)

    def closeEvent(self, event: QCloseEvent) -> None:
        for card in self.cards:
            if card is not None and card.state.active:
                self.conversation.cancel(card)
        super().closeEvent(event)
