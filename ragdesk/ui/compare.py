"""Compare snapshots: one question against two snapshots, answers side by side.

This is the paper's index hot-swap demo (a 2016 and a 2018 Wikipedia give different answers
to "who is the president of ..." without touching the model's parameters).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, Qt
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

NEEDS_TWO = ("Comparing needs two snapshots that the current model pack can query; import "
             "another one in Index ▸ Manage indexes.")
NEEDS_DIFFERENT = "Choose two different snapshots: one compared with itself shows nothing."


class CompareDialog(QDialog):
    def __init__(self, parent: QWidget, state: AppState, conversation: Conversation,
                 params: Callable[[], AnswerOptions]) -> None:
        super().__init__(parent)
        self.state = state
        self.conversation = conversation
        self.params = params
        self.setObjectName("CompareDialog")
        self.setWindowTitle("Compare snapshots")
        self.setModal(False)
        self.cards: list[AnswerCard | None] = [None, None]
        self.card_snapshots: list[str | None] = [None, None]

        lay = QVBoxLayout(self)
        lay.setContentsMargins(14, 14, 14, 12)
        lay.setSpacing(10)
        intro = QLabel("Ask one question against two snapshots with the same model: the "
                       "answers differ only in what each snapshot knows.")
        intro.setWordWrap(True)
        intro.setObjectName("CompareIntro")
        lay.addWidget(intro)

        lay.addLayout(self._question_row())
        lay.addLayout(self._sides(), 1)
        self.note = QLabel()
        self.note.setObjectName("CompareNote")
        self.note.setWordWrap(True)
        lay.addWidget(self.note)
        for signal in (conversation.answerFinished, conversation.answerFailed):
            signal.connect(lambda _rid, _x: self._update_buttons())
        state.snapshotsChanged.connect(self.set_snapshots)
        self.set_snapshots(state.snapshots)
        self.resize(1100, 620)

    def _sides(self) -> QGridLayout:
        """Each side: its snapshot picker above the column its answer card goes in."""
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
            combo.currentIndexChanged.connect(lambda _i: self._sides_changed())
            lab.setBuddy(combo)
            head.addWidget(lab)
            head.addWidget(combo, 1)
            grid.addLayout(head, 0, col)
            scroll = QScrollArea()
            # A scroll area takes Tab by default; framed by nothing and often empty, it was
            # a stop that showed no focus. The cards' chips and buttons take Tab themselves,
            # and the area scrolls to the one that has it.
            scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
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
        return grid

    def _question_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.question = QLineEdit()
        self.question.setPlaceholderText("Question")
        # Enter in the question presses the default button, "Compare".
        q_label = QLabel("&Question")
        q_label.setBuddy(self.question)
        row.addWidget(q_label)
        row.addWidget(self.question, 1)
        self.go = QPushButton("&Compare")
        self.go.setDefault(True)
        self.go.clicked.connect(self.run)
        row.addWidget(self.go)
        self.stop = QPushButton("S&top")
        self.stop.setObjectName("CompareStop")
        self.stop.setToolTip("Stop both answers")
        self.stop.clicked.connect(self.cancel)
        self.stop.setVisible(False)
        row.addWidget(self.stop)
        self._tint_icons()
        return row

    def _tint_icons(self) -> None:
        self.go.setIcon(icon("compare"))
        self.stop.setIcon(icon("stop"))
        for card in self.cards:
            if card is not None:
                card.refresh_icons()

    def changeEvent(self, event: QEvent) -> None:
        # Icons are tinted for the palette they were made in: a dark glyph stayed on the
        # dark theme's buttons after a switch (the window redraws only its own cards').
        if event.type() == QEvent.Type.PaletteChange:
            self._tint_icons()
        super().changeEvent(event)

    # ---- the two sides -----------------------------------------------------------------

    def names(self) -> list[str | None]:
        return [c.currentData() for c in self.pickers]

    def set_snapshots(self, snapshots: Sequence[SnapshotInfo]) -> None:
        """Offer the snapshots the pack can query; each side keeps its choice while it is
        listed, and the two sides start on different snapshots when there are two."""
        usable = [s for s in snapshots if s.ready and not s.unusable_reason]
        names = [s.name for s in usable]
        left, right = (n if n in names else None for n in self.names())
        if left is None and names:
            others = [n for n in names if n != right] or names
            active = self.state.active_snapshot
            left = active if active in others else others[0]
        if right is None or right == left:
            right = next((n for n in names if n != left), left)
        for combo, name in zip(self.pickers, (left, right), strict=True):
            # One change for the whole list, not one per item: a side emptied halfway
            # through would drop a card whose snapshot is still there.
            combo.blockSignals(True)
            combo.clear()
            for s in usable:
                combo.addItem(f"{s.name}  ({plural(s.passages, 'passage')})", s.name)
            combo.setCurrentIndex(combo.findData(name) if name else -1)
            combo.blockSignals(False)
        self._sides_changed()

    def set_pair(self, left: str, right: str) -> None:
        for combo, name in zip(self.pickers, (left, right), strict=True):
            combo.setCurrentIndex(combo.findData(name))

    def _sides_changed(self) -> None:
        """A card stays only under the snapshot it answered from: after its side changed
        (or its snapshot was removed) it would be read as the new snapshot's answer."""
        for col, name in enumerate(self.names()):
            if self.cards[col] is not None and self.card_snapshots[col] != name:
                self._drop(col)
        self._update_buttons()

    def _drop(self, col: int) -> None:
        old = self.cards[col]
        if old is not None:
            self.columns[col].removeWidget(old)
            self.conversation.forget(old)  # cancels it when it still runs
            old.hide()  # now, not when deleteLater gets round to it
            old.deleteLater()
        self.cards[col] = None
        self.card_snapshots[col] = None

    def _problem(self) -> str | None:
        left, right = self.names()
        if left is None or right is None or self.pickers[0].count() < 2:
            return NEEDS_TWO
        return NEEDS_DIFFERENT if left == right else None

    def _update_buttons(self) -> None:
        running = self.running()
        problem = self._problem()
        self.go.setEnabled(problem is None and not running)
        self.stop.setVisible(running)
        if problem is not None:
            self.note.setText(problem)
        elif all(c is None for c in self.cards):
            self.note.setText("")
        else:
            left, right = self.names()
            self.note.setText(f"Same question, same model; left: {left}, right: {right}.")

    # ---- comparing ---------------------------------------------------------------------

    def run(self) -> None:
        q = self.question.text().strip()
        names = self.names()
        if not q or None in names:
            self.question.setFocus()
            return
        if self.running() or self._problem() is not None:
            return
        for col, name in enumerate(names):
            self._drop(col)
            card = self.conversation.ask(q, self.params(), snapshot=str(name), in_chat=False)
            self.columns[col].insertWidget(0, card, 0, Qt.AlignmentFlag.AlignTop)
            self.cards[col] = card
            self.card_snapshots[col] = str(name)
        self._update_buttons()

    def running(self) -> bool:
        return any(c is not None and c.state.active for c in self.cards)

    def cancel(self) -> None:
        """Stop both answers (each card then says it was stopped)."""
        for card in self.cards:
            if card is not None and card.state.active:
                self.conversation.cancel(card)

    def reject(self) -> None:
        # Esc and the close button both come here (QDialog's closeEvent calls reject):
        # answers nobody sees any more must not keep the engine busy.
        self.cancel()
        super().reject()
