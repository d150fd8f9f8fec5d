"""The heat map's dock: the map in a scroll area, a caption naming the posterior it shows,
its colour scale beside it, and the switch between words and sub-word pieces."""

from __future__ import annotations

import html

from PySide6.QtCore import QEvent, QMargins, QObject, QPointF, QRectF, QSize, Qt
from PySide6.QtGui import (
    QColor,
    QFontMetricsF,
    QLinearGradient,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
    QResizeEvent,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from ragdesk.ui.heatmap import (
    CELL_H,
    COLORBAR_W,
    PAD,
    QWIDGETSIZE_MAX,
    TOGETHER,
    PosteriorHeatMap,
)
from ragdesk.ui.texts import elide
from ragdesk.ui.theme import heat_color, heat_ramp


class ColourBar(QWidget):
    """The heat map's scale, 0 to 100%. It stands beside the scrolling map rather than at the
    grid's end, so it and its labels stay whole however narrow the pane gets."""

    def __init__(self, heat: PosteriorHeatMap, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.heat = heat
        self.setObjectName("HeatColourBar")
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Preferred)

    def labels(self) -> list[str]:
        # In percent, as the cells and the caption's "(%)" are.
        return ["100", "50", "0"]

    def sizeHint(self) -> QSize:
        fm = QFontMetricsF(self.heat._small_font())
        widest = max(fm.horizontalAdvance(t) for t in self.labels())
        return QSize(int(8 + COLORBAR_W + 4 + widest + 4), 90)

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def bar_rect(self) -> QRectF:
        """Beside the grid's rows when the map is not scrolled; never past this widget."""
        hm = self.heat
        top = hm.grid_rect().y() if hm.tokens else PAD
        fm = QFontMetricsF(hm._small_font())
        top = max(top, fm.ascent())
        height = min(float(max(CELL_H * max(hm.k, 1), 60)),
                     self.height() - top - fm.height())
        return QRectF(8, top, COLORBAR_W, max(20.0, height))

    def paintEvent(self, event: QPaintEvent) -> None:
        if not self.heat.tokens or self.heat.quoted:
            return
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        stops = heat_ramp(pal)
        bar = self.bar_rect()
        grad = QLinearGradient(bar.bottomLeft(), bar.topLeft())
        for s in range(11):
            grad.setColorAt(s / 10, heat_color(s / 10, stops=stops))
        p.setPen(QPen(pal.color(QPalette.ColorRole.Mid), 1))
        p.setBrush(grad)
        p.drawRect(bar)
        small = self.heat._small_font()
        fm = QFontMetricsF(small)
        p.setFont(small)
        p.setPen(pal.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text))
        for text, y in zip(self.labels(), (bar.top(), bar.center().y(), bar.bottom()),
                           strict=True):
            p.drawText(QPointF(bar.right() + 4, y + fm.ascent() / 2 - 1), text)
        p.end()


class HeatMapPanel(QWidget):
    """The heat map with a caption saying which posterior it shows, and its colour scale."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        lay = QVBoxLayout(self)
        # Tight margins: at 1280x720 the dock is about 230 px high, and K = 5 rows need most of it.
        lay.setContentsMargins(12, 6, 12, 4)
        lay.setSpacing(4)
        self.caption = QLabel()
        self.caption.setObjectName("HeatCaption")
        self.caption.setWordWrap(True)
        head = QHBoxLayout()
        head.setSpacing(10)
        head.addWidget(self.caption, 1)
        self.pieces_box = QCheckBox("Sub-word &pieces")
        self.pieces_box.setToolTip("One column per piece the generator wrote (“␣”, “1”, "
                                   "“9”…) instead of one per word")
        head.addWidget(self.pieces_box, 0, Qt.AlignmentFlag.AlignTop)
        lay.addLayout(head)
        self.map = PosteriorHeatMap()
        self.pieces_box.toggled.connect(self._show_pieces)
        self.scroller = QScrollArea()
        self.scroller.setFrameShape(QFrame.Shape.NoFrame)
        self.scroller.setWidget(self.map)
        self.scroller.setWidgetResizable(True)
        self.scroller.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
        self.colour_bar = ColourBar(self.map)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(4)
        row.addWidget(self.scroller, 1)
        row.addWidget(self.colour_bar)
        row.addStretch(0)
        self._row = row
        lay.addLayout(row, 1)
        # The scale sits beside the grid, which moves and grows as the data changes.
        self.map.laidOut.connect(self._follow_map)
        # A caption that wraps onto another line shortens the view without resizing the panel.
        self.scroller.installEventFilter(self)
        self._mode: str | None = None
        self._question: str | None = None
        self._note: str | None = None
        self.set_mode(None)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._offer_width()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.scroller and event.type() == QEvent.Type.Resize:
            self._offer_width()
        return super().eventFilter(watched, event)

    def _bar_room(self) -> int:
        """The vertical scroll bar's width when the map's rows do not all fit its view (the
        bar then takes that much of it), else nothing: labels are not shortened for a bar
        that is not there."""
        tall = self.map.sizeHint().height() > self.scroller.height()
        return self.scroller.verticalScrollBar().sizeHint().width() if tall else 0

    def _offer_width(self) -> None:
        # The map's view may be as wide as the panel less the scale (and a vertical scroll
        # bar, when the rows need one): row labels use what the grid leaves of that.
        lay = self.layout()
        m = lay.contentsMargins() if lay is not None else QMargins()
        self.map.set_available_width(max(0, self.width() - m.left() - m.right()
                                         - self.colour_bar.sizeHint().width()
                                         - self._row.spacing() - self._bar_room()))

    def _follow_map(self) -> None:
        # A narrow map keeps its scale next to it instead of at the pane's far edge.
        widest = (self.map.sizeHint().width() + self._bar_room()
                  + 2 * self.scroller.frameWidth()
                  if self.map.tokens else QWIDGETSIZE_MAX)  # the placeholder: all of it
        self.scroller.setMaximumWidth(widest)
        self.colour_bar.update()
        self._offer_width()  # more or fewer rows: a vertical bar may come or go

    def _show_pieces(self, on: bool) -> None:
        self.map.set_pieces(on)
        self.set_mode(self._mode, self._question, self._note)

    def set_mode(self, mode: str | None, question: str | None = None,
                 note: str | None = None) -> None:
        """Say which posterior the map shows; ``note``: what the card says about the answer
        that the map should repeat (not found, pieced from several passages)."""
        self._mode, self._question, self._note = mode, question, note
        if mode is None:
            self.caption.setText("Select an answer to see where each of its words came from.")
            return
        self.map.mode = mode
        unit = "piece" if self.pieces_box.isChecked() else "word"
        # No probabilities to scale (read together): the scale goes.
        self.colour_bar.setVisible(mode != TOGETHER)
        # The question is the selected card's (marked in the chat) and goes to the tooltip:
        # on the caption's line it took two more lines of a low dock (1280x720) from the grid.
        q = f"<b>{html.escape(elide(question, 120))}</b><br/>" if question else ""
        extra = f" &nbsp;·&nbsp; <i>{html.escape(note)}</i>" if note else ""
        if mode == TOGETHER:
            self.caption.setText(f"Read together: the passage each {unit} is quoted from"
                                 f"{extra}")
            self.caption.setToolTip(
                f"{q}The passages were read together, in one prompt, so no number says how "
                f"much each passage gave each {unit}: there are no per-passage rows. Each "
                f"{unit} shows the passage its span is quoted from (“–”: none of the retrieved "
                "passages holds it, or, while the answer is being written, not judged yet).")
            return
        # Short, so the grid keeps its rows in a low dock; the words are in the tooltip.
        # non-breaking spaces: the caption wraps between words, never inside the formula
        formula = (f"p(z&nbsp;|&nbsp;x,&nbsp;y<sub>i</sub>,&nbsp;y<sub>&lt;i</sub>) per {unit}"
                   if mode == "token" else f"p(z&nbsp;|&nbsp;x,&nbsp;y<sub>≤i</sub>) after each "
                   f"{unit}")
        what = (f"which passage generated each {unit}" if mode == "token"
                else f"the running posterior after each {unit}")
        self.caption.setText(f"{formula} (%){extra}")
        self.caption.setToolTip(
            f"{q}The {what}, in percent. Rows: retrieved passages. Columns: the answer's "
            f"{unit}s" + ("" if unit == "piece" else " (a word of several pieces shows their "
                          "mean; RAG-Sequence: the posterior after its last piece)")
            + f". The strip above each column is the colour the chat gives that {unit}.")

    def heat_colour_of(self, v: float) -> QColor:
        return heat_color(v, self.map.palette())
