"""The retrieval map's side: the query's passages in a table, a preview of the passage picked
(how to use the map until one is), and the buttons."""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPalette, QResizeEvent, QTextDocument
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ragdesk.core.types import RetrievedDoc
from ragdesk.core.units import percent, prior_text
from ragdesk.ui.explore.palette import background, ink, label_colour

HINT = ("Drag the ★ (or Tab to the map and press the arrow keys) to move the query: the "
        "passages it retrieves light up, and dotted rings mark the question's own. Dots near "
        "the query in 2-D need not be the nearest: retrieval uses the full vectors. Hover a "
        "dot or pick a passage to read it here.")
HINT_MIN_WIDTH_PX = 280
TITLE = "Retrieved passages"
DENSE_TITLE = "Dense retrieval (not the card's passages)"


class PassagesPanel(QWidget):
    rowChosen = Signal(int)  # a row was clicked or moved to with the keyboard

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel(f"<b>{TITLE}</b>", self)
        self.question_label = QLabel(self)
        self.question_label.setWordWrap(True)
        self.question_label.setTextFormat(Qt.TextFormat.PlainText)
        self.table = QTableWidget(0, 3, self)
        self.table.setHorizontalHeaderLabels(["#", "Retrieval", "Title"])
        share = QTableWidgetItem("Retrieval")
        share.setToolTip("p(z|x): the retriever's share of belief in the passage among these")
        self.table.setHorizontalHeaderItem(1, share)
        self.table.verticalHeader().setVisible(False)
        # Rows as tall as the text needs: the default left the preview too little room in a
        # 720-pixel-high window.
        self.table.verticalHeader().setDefaultSectionSize(QFontMetrics(self.font()).height()
                                                          + 8)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setTabKeyNavigation(False)  # Tab leaves the table, arrows move in it
        hdr = self.table.horizontalHeader()
        hdr.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        hdr.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        hdr.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.table.currentCellChanged.connect(lambda row, _c, _r, _pc: self._chosen(row))
        self.table.cellClicked.connect(lambda row, _c: self._chosen(row))
        self.table.setToolTip("Pick a passage (click, or the arrow keys) to read it below.")
        # The hint is the preview's text, not its placeholder (a placeholder neither wraps
        # nor scrolls), and the preview is always tall enough to show all of it: a passage
        # picked later gets at least that much room too.
        self.preview = QTextBrowser(self)
        self.preview.setOpenLinks(False)
        self.status_label = QLabel(self)
        self.status_label.setWordWrap(True)
        self.status_label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.ask_button = QPushButton("Ask from here", self)
        self.ask_button.setToolTip("Generate an answer from the passages the dragged query "
                                   "retrieves (Enter on the map).")
        self.reset_button = QPushButton("Back to the question", self)
        self.reset_button.setToolTip("Put the query back at the question (Home on the map).")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(6, 0, 0, 0)
        lay.addWidget(self.title)
        lay.addWidget(self.question_label)
        lay.addWidget(self.table)
        lay.addWidget(self.preview, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.reset_button)
        buttons.addWidget(self.ask_button)
        lay.addLayout(buttons)
        lay.addWidget(self.status_label)
        self._docs: list[RetrievedDoc] = []
        self._names: list[str] = []
        self._numbered = True
        self._hinting = False  # the preview shows the hint, not a passage
        self.show_hint()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._fit_hint()

    def _hint_html(self) -> str:
        muted = self.palette().color(QPalette.ColorGroup.Disabled,
                                     QPalette.ColorRole.Text).name()
        return f"<div style='color:{muted}'>{html.escape(HINT)}</div>"

    def _fit_hint(self) -> None:
        """The preview's least height: the hint's, wrapped at the preview's width."""
        doc = QTextDocument()
        doc.setDefaultFont(self.preview.font())
        doc.setDocumentMargin(self.preview.document().documentMargin())
        doc.setHtml(self._hint_html())
        # Not narrower than a side dock gets: while the view is first laid out the preview
        # can be a sliver for a moment, and a hint as tall as that made the window taller.
        doc.setTextWidth(max(HINT_MIN_WIDTH_PX, self.preview.viewport().width()))
        need = int(doc.size().height()) + 2 * self.preview.frameWidth() + 2
        if need != self.preview.minimumHeight():
            self.preview.setMinimumHeight(need)

    def show_hint(self) -> None:
        self.preview.setHtml(self._hint_html())
        self._hinting = True

    def set_docs(self, docs: list[RetrievedDoc], names: list[str], numbered: bool,
                 k: int) -> None:
        """The query's passages, named ``names`` ("[1]", or "d1" when they are not the
        card's, in ink instead of the card's colours)."""
        self._docs, self._names, self._numbered = list(docs), list(names), numbered
        self.title.setText(f"<b>{TITLE if numbered else DENSE_TITLE}</b>")
        self.table.blockSignals(True)  # a new list is not a pick
        self.table.setRowCount(len(docs))
        for row, (d, name) in enumerate(zip(docs, names, strict=True)):
            rank = QTableWidgetItem(name)
            f = rank.font()
            f.setBold(True)
            rank.setFont(f)
            prob = QTableWidgetItem(percent(d.prob))
            prob.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            prob.setToolTip(f"p(z|x) = {percent(d.prob, 1)}")
            title = QTableWidgetItem(d.title)
            title.setToolTip(f"{d.title}\n\n{d.text[:400]}")
            for col, item in enumerate((rank, prob, title)):
                self.table.setItem(row, col, item)
        self.table.blockSignals(False)
        self._colour_names()
        self._fit_table_height(k)

    def _colour_names(self) -> None:
        """The card's colours, made readable on the table's background; the text colour for
        names that are not the card's. Again when the theme changes: an item keeps the
        colour it was given."""
        base = background(self.palette())  # the table's own may not have changed yet
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is None:
                continue
            if self._numbered:
                item.setForeground(label_colour(row, base))
            else:
                item.setData(Qt.ItemDataRole.ForegroundRole, None)

    def name_colour(self, row: int) -> QColor:
        """The colour of row ``row``'s name as shown."""
        base = background(self.palette())
        return label_colour(row, base) if self._numbered else ink(self.palette())

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._colour_names()
            if self._hinting:
                self.show_hint()

    def _fit_table_height(self, k: int) -> None:
        """Just tall enough for K rows, so the preview gets the rest."""
        rows = max(k, self.table.rowCount())
        row_h = self.table.verticalHeader().defaultSectionSize()
        self.table.setFixedHeight(self.table.horizontalHeader().sizeHint().height()
                                  + rows * row_h + 2 * self.table.frameWidth() + 2)

    def _chosen(self, row: int) -> None:
        if 0 <= row < len(self._docs):
            # Tabbing in makes the first row current without selecting it: the row read in
            # the preview is the one highlighted.
            if not self.table.selectionModel().isRowSelected(row):
                self.table.selectRow(row)
            self.rowChosen.emit(row)

    def show_preview(self, pid: int, title: str, text: str) -> None:
        ids = [d.id for d in self._docs]
        badge = ""
        if pid in ids:
            r = ids.index(pid)
            colour = self.name_colour(r).name()
            badge = (f"<span style='color:{colour}'><b>{html.escape(self._names[r])}</b>"
                     f"</span> {prior_text(self._docs[r].prob)} · ")
        self._hinting = False
        self.preview.setHtml(f"<p><b>{html.escape(title)}</b></p><p>{badge}passage {pid}</p>"
                             f"<p>{html.escape(text)}</p>")

