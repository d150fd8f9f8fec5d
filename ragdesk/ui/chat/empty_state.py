"""What an empty conversation shows: what to do, and a few questions to try."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from ragdesk.ui.elided import ElidedButton
from ragdesk.ui.flow_layout import FlowLayout
from ragdesk.ui.infos import SnapshotInfo


class EmptyState(QWidget):
    """What an empty conversation shows: what to do, and a few questions to try."""

    exampleChosen = Signal(str)

    EXAMPLES = (
        "Who painted the Mona Lisa?",
        "What causes the seasons on Earth?",
        "When did the Roman Empire fall?",
    )

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(24, 48, 24, 24)
        lay.setSpacing(10)
        lay.addStretch(1)
        title = QLabel("Ask a question")
        title.setObjectName("EmptyTitle")
        tf = QFont(title.font())
        tf.setPointSizeF(tf.pointSizeF() * 1.6)
        tf.setWeight(QFont.Weight.DemiBold)
        title.setFont(tf)
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(title)
        self.hint = QLabel()
        self.hint.setObjectName("EmptyHint")
        self.hint.setWordWrap(True)
        self.hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        lay.addWidget(self.hint)
        # The suggestions wrap onto more lines when the pane is narrow (a docked panel
        # widened), instead of widening the page past the pane's edge.
        self.buttons_box = QWidget()
        row = FlowLayout(self.buttons_box, spacing=8, centred=True)
        self.buttons: list[ElidedButton] = []
        for q in self.EXAMPLES:
            b = ElidedButton(q)
            b.setObjectName("ExampleButton")
            b.setCursor(Qt.CursorShape.PointingHandCursor)
            b.clicked.connect(lambda _=False, q=q: self.exampleChosen.emit(q))
            row.addWidget(b)
            self.buttons.append(b)
        lay.addWidget(self.buttons_box)
        lay.addStretch(2)
        self.set_snapshot(None)

    def set_snapshot(self, info: SnapshotInfo | None) -> None:
        """Name the snapshot questions go to; Wikipedia questions are suggested only where
        they can be answered (not over a folder of the user's own documents)."""
        where = (f"the snapshot “{html.escape(info.name)}”" if info is not None
                 else "the active snapshot")
        own = info is not None and info.documents
        first = (f"ragdesk finds passages in the documents of {where} and writes an answer "
                 "from them." if own else
                 f"ragdesk finds passages in {where} and writes an answer from them.")
        self.hint.setText(f"{first}<br/>Every word is coloured by the passage it came from; "
                          "hover it for the full distribution.")
        self.buttons_box.setVisible(not own)
