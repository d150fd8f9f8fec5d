"""The posterior heat map (the paper's Figure 2): passages down, the answer's words across,
each cell the probability that the word came from that passage (sub-word pieces merged as
:mod:`ragdesk.ui.words` does; one click shows the pieces). Painted with QPainter.

An answer read together (all passages in one prompt) has no such rows: no decoder quantity
says which passage a word came from, and every token carries the retrieval prior. The map
then shows one row instead, the passage each word's span is quoted from (the core's
``AnswerToken.quoted_from``), and no scale."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetricsF,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPalette,
    QPen,
)
from PySide6.QtWidgets import QSizePolicy, QToolTip, QWidget

from ragdesk.core.types import AnswerToken, RetrievedDoc
from ragdesk.core.units import percent
from ragdesk.ui.texts import elide
from ragdesk.ui.theme import (
    heat_color,
    heat_ramp,
    passage_color,
    passage_tint,
    readable_text_on,
)
from ragdesk.ui.words import Word, as_words, piece_label, quoted_source

CELL_W = 34
CELL_H = 22  # K = 5 rows fit the dock of a 1280x720 window
PAD = 8
LABEL_FLOOR_PX = 150  # row labels shrink to this before the grid starts to scroll
SWATCH_PX = 10  # the passage-colour bar before each row label, with its gap
SOURCE_STRIP = 4
COLORBAR_W = 12
QWIDGETSIZE_MAX = (1 << 24) - 1  # Qt's "no maximum"
TOGETHER = "together"  # ragdesk.core.options: the passages read in one prompt
QUOTED_LABEL = "Quoted from"
NO_ANSWER_TEXT = "The heat map appears when an answer is selected."
NOT_QUOTED = "–"  # a word no retrieved passage holds (or, while streaming, not judged yet)


def label_width(widest: float, grid_w: float, available: float | None,
                floor: float = LABEL_FLOOR_PX) -> float:
    """Pixels for the row labels' text: all the widest one needs when it fits beside the grid
    in the ``available`` width (None: unknown, so all of it); otherwise what is left there,
    but never less than ``floor`` (or the widest, if narrower), nor than 40% of a view too
    narrow for the floor: then the grid scrolls."""
    if available is None:
        return widest
    floor = min(floor, 0.4 * available)
    return max(min(widest, floor), min(widest, available - grid_w))


class PosteriorHeatMap(QWidget):
    """Words (or sub-word pieces) × passages. Click (or arrows + Enter) selects a cell's
    passage."""

    cellClicked = Signal(int, int)  # column (word, or piece when pieces are shown), passage
    laidOut = Signal()  # the grid's geometry changed

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("PosteriorHeatMap")
        self.tokens: list[AnswerToken] = []
        self.empty_text = NO_ANSWER_TEXT
        self.words: list[Word] = []  # the columns
        self.docs: list[RetrievedDoc] = []
        self.k = 0
        self.mode = "token"  # how a word's numbers are made from its pieces'
        self.pieces = False  # one column per sub-word piece instead of per word
        self.selected_passage: int | None = None
        self.hover: tuple[int, int] | None = None
        self.cursor_cell: tuple[int, int] | None = None
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setSizePolicy(QSizePolicy.Policy.Minimum, QSizePolicy.Policy.Minimum)
        self.setAccessibleName("Posterior heat map")
        self._relayout_timer = QTimer(self)
        self._relayout_timer.setSingleShot(True)
        self._relayout_timer.setInterval(80)
        self._relayout_timer.timeout.connect(lambda: self._relayout(measure=True))
        self._xs: list[float] = [PAD + 56.0]
        self._band = 24.0
        self._available: float | None = None  # the width of the view the map sits in
        self._label_w = 40.0
        self._measure()

    # ---- data ------------------------------------------------------------------------------

    def set_data(self, tokens: Sequence[AnswerToken], docs: Sequence[RetrievedDoc] | None,
                 k: int | None = None, mode: str | None = None,
                 empty_text: str = NO_ANSWER_TEXT) -> None:
        """``empty_text``: what the map says while it has no words to show."""
        self.empty_text = empty_text
        self.tokens = list(tokens)
        self.docs = list(docs or [])
        if mode is not None:
            self.mode = mode
        self.k = k if k is not None else (len(self.tokens[0].posterior) if self.tokens
                                          else len(self.docs))
        self.hover = None
        self._regroup()

    def set_pieces(self, pieces: bool) -> None:
        """One column per sub-word piece (True) or per word."""
        if pieces != self.pieces:
            self.pieces = pieces
            self._regroup()

    def _regroup(self) -> None:
        self.words = as_words(self.tokens, self.mode, self.pieces)
        if self.cursor_cell is not None and (self.cursor_cell[0] >= len(self.words)
                                             or self.cursor_cell[1] >= self.k):
            self.cursor_cell = None
        self._relayout()

    def append_token(self, tok: AnswerToken) -> None:
        self.tokens.append(tok)
        if not self.k:
            self.k = len(tok.posterior)
            self._regroup()
            return
        # The new piece may start a word or lengthen the last one.
        self.words = as_words(self.tokens, self.mode, self.pieces)
        self._grow()
        # Tokens can stream faster than it is worth repainting: coalesce to ~12 per s.
        if not self._relayout_timer.isActive():
            self._relayout_timer.start()

    def set_selected_passage(self, k: int | None) -> None:
        self.selected_passage = k
        self.update()

    @property
    def quoted(self) -> bool:
        """One row of quoted-from passages instead of a row per passage (read together)."""
        return self.mode == TOGETHER

    def rows(self) -> int:
        return 1 if self.quoted else self.k

    def quoted_from(self, i: int) -> int | None:
        """The passage word ``i`` is quoted from (read together), None: none holds it."""
        q = quoted_source(self.tokens, self.words[i].pieces)
        return q if q is not None and q < max(self.k, len(self.docs)) else None

    def column_source(self, i: int) -> int | None:
        """The passage whose colour word ``i`` wears above its column."""
        if self.quoted:
            return self.quoted_from(i)
        return self.words[i].source if self.words[i].posterior else None

    def value(self, i: int, k: int) -> float:
        post = self.words[i].posterior
        return post[k] if k < len(post) else 0.0

    # ---- geometry --------------------------------------------------------------------------

    def _small_font(self) -> QFont:
        f = QFont(self.font())
        f.setPointSizeF(max(6.5, f.pointSizeF() * 0.8))
        return f

    def set_available_width(self, width: float | None) -> None:
        """The width of the view around the map: row labels use what the grid leaves."""
        if width != self._available:
            self._available = width
            self._relayout()

    def _row_label(self, k: int) -> str:
        if self.quoted:
            return QUOTED_LABEL
        if k < len(self.docs):
            return f"[{k + 1}] {' '.join(self.docs[k].title.split())}"
        return f"[{k + 1}]"

    def _label_font(self, k: int) -> QFont:
        f = QFont(self.font())
        f.setWeight(QFont.Weight.DemiBold if k == self.selected_passage and not self.quoted
                    else QFont.Weight.Normal)
        return f

    def row_label_text(self, k: int) -> str:
        """Row ``k``'s label as painted: whole, or shortened with "…" to the label column."""
        fm = QFontMetricsF(self._label_font(k))
        text = self._row_label(k)
        if fm.horizontalAdvance(text) <= self._label_w:
            return text
        return fm.elidedText(text, Qt.TextElideMode.ElideRight, self._label_w)

    def _token_label(self, i: int) -> str:
        word = self.words[i]
        return piece_label(word.text) if self.pieces else elide(word.label, 18)

    def _measure(self) -> None:
        """Column edges and label sizes, computed once per change of data or font (painting
        and hit-testing only read them)."""
        fm = QFontMetricsF(self.font())
        # Measured in the bold face the selected row uses, so selecting never elides a label.
        bold = QFont(self.font())
        bold.setWeight(QFont.Weight.DemiBold)
        bfm = QFontMetricsF(bold)
        widest = max((bfm.horizontalAdvance(self._row_label(k)) for k in range(self.rows())),
                     default=40.0) + 1
        cols = [max(CELL_W, fm.horizontalAdvance(self._token_label(i)) + 12)
                for i in range(len(self.words))]
        chrome = PAD + SWATCH_PX + 8 + PAD  # left pad, swatch, gap to the grid, right pad
        self._label_w = label_width(widest, sum(cols) + chrome, self._available)
        xs = [PAD + SWATCH_PX + self._label_w + 8]
        for w in cols:
            xs.append(xs[-1] + w)
        self._xs = xs
        self._band = fm.height() + 8

    def _grow(self) -> None:
        fm = QFontMetricsF(self.font())
        if len(self._xs) > len(self.words):  # the last word grew: its column is measured again
            self._xs.pop()
        self._xs.append(self._xs[-1] + max(CELL_W, fm.horizontalAdvance(
            self._token_label(len(self.words) - 1)) + 12))
        if self._available is not None and self._xs[-1] + PAD > self._available \
                and self._label_w > LABEL_FLOOR_PX:
            self._measure()  # the grid outgrew the view: give the labels less

    def _label_band(self) -> float:
        return self._band

    def grid_rect(self) -> QRectF:
        xs = self._xs
        y = PAD + self._band + SOURCE_STRIP + 3
        return QRectF(xs[0], y, xs[-1] - xs[0], CELL_H * self.rows())

    def cell_rect(self, i: int, k: int) -> QRectF:
        xs = self._xs
        y = PAD + self._band + SOURCE_STRIP + 3
        return QRectF(xs[i], y + k * CELL_H, xs[i + 1] - xs[i], CELL_H)

    def cell_at(self, pos: QPointF) -> tuple[int, int] | None:
        g = self.grid_rect()
        if not g.contains(pos) or not self.words:
            return None
        i = bisect.bisect_right(self._xs, pos.x()) - 1
        k = int((pos.y() - g.y()) // CELL_H)
        if not 0 <= i < len(self.words):
            return None
        if self.quoted:  # the one row: the cell stands for the passage the word is quoted from
            q = self.quoted_from(i)
            return (i, q) if k == 0 and q is not None else None
        if 0 <= k < self.k:
            return i, k
        return None

    def sizeHint(self) -> QSize:
        if not self.words:  # the placeholder wraps within the view: nothing to scroll to
            return QSize(160, 60)
        g = self.grid_rect()
        return QSize(int(g.right() + PAD), int(max(g.bottom() + PAD, g.y() + 90)))

    def minimumSizeHint(self) -> QSize:
        return self.sizeHint()

    def _relayout(self, measure: bool = True) -> None:
        if measure:
            self._measure()
        self.setMinimumSize(self.sizeHint())
        self.updateGeometry()
        self.update()
        self.laidOut.emit()

    # ---- painting --------------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        text = pal.color(QPalette.ColorRole.Text)
        if not self.words:
            p.setPen(pal.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text))
            # Wrapped within the view: the widget may be wider than the pane showing it.
            width = min(self.width(), self._available or self.width())
            p.drawText(QRectF(0, 0, width, self.height()).adjusted(8, 0, -8, 0),
                       int(Qt.AlignmentFlag.AlignCenter) | int(Qt.TextFlag.TextWordWrap),
                       self.empty_text)
            p.end()
            return
        self._paint_row_labels(p, text)
        self._paint_cells(p, pal, text)
        self._paint_marks(p, pal, text)
        p.end()

    def _paint_row_labels(self, p: QPainter, text: QColor) -> None:
        """Row labels with the passage's colour."""
        for k in range(self.rows()):
            r = self.cell_rect(0, k)
            if not self.quoted:
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(passage_color(k))
                p.drawRoundedRect(QRectF(PAD, r.y() + 6, 4, CELL_H - 12), 2, 2)
            p.setFont(self._label_font(k))
            p.setPen(text)
            p.drawText(QRectF(PAD + SWATCH_PX, r.y(), self._label_w + 1, CELL_H),
                       Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignLeft,
                       self.row_label_text(k))

    def quoted_cell_text(self, i: int) -> str:
        q = self.quoted_from(i)
        return NOT_QUOTED if q is None else f"[{q + 1}]"

    def _paint_quoted_cell(self, p: QPainter, pal: QPalette, i: int) -> None:
        r = self.cell_rect(i, 0).adjusted(0.5, 0.5, -0.5, -0.5)
        q = self.quoted_from(i)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(passage_tint(q, pal) if q is not None else pal.color(QPalette.ColorRole.Base))
        p.drawRect(r)
        p.setPen(pal.color(QPalette.ColorRole.Text) if q is not None
                 else pal.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text))
        p.drawText(r, Qt.AlignmentFlag.AlignCenter, self.quoted_cell_text(i))

    def _paint_cells(self, p: QPainter, pal: QPalette, text: QColor) -> None:
        g = self.grid_rect()
        small = self._small_font()
        stops = heat_ramp(pal)
        p.setFont(small)
        for i, _word in enumerate(self.words):
            if self.quoted:
                self._paint_quoted_cell(p, pal, i)
            for k in range(0 if self.quoted else self.k):
                v = self.value(i, k)
                r = self.cell_rect(i, k)
                bg = heat_color(v, stops=stops)
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(bg)
                p.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5))
                if v >= 0.05:
                    p.setPen(readable_text_on(bg))
                    p.drawText(r, Qt.AlignmentFlag.AlignCenter, f"{round(v * 100)}")
            # Above each column: the token as the chat shows it, on its source's tint.
            col = self.cell_rect(i, 0)
            source = self.column_source(i)
            if source is not None:
                strip = QRectF(col.x() + 1, g.y() - SOURCE_STRIP - 3, col.width() - 2,
                               SOURCE_STRIP)
                p.setPen(Qt.PenStyle.NoPen)
                p.setBrush(passage_color(source))
                p.drawRoundedRect(strip, 1.5, 1.5)
                label = QRectF(col.x() + 1, PAD, col.width() - 2, self._label_band() - 2)
                p.setBrush(passage_tint(source, pal))
                p.drawRoundedRect(label, 3, 3)
            p.setFont(self.font())
            p.setPen(text)
            p.drawText(QRectF(col.x(), PAD, col.width(), self._label_band() - 2),
                       Qt.AlignmentFlag.AlignCenter, self._token_label(i))
            p.setFont(small)

    def _paint_marks(self, p: QPainter, pal: QPalette, text: QColor) -> None:
        """The selected passage's row, and the hovered and keyboard cells."""
        g = self.grid_rect()
        if self.quoted and self.selected_passage is not None:
            # The words quoted from the selected passage.
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2))
            for i in range(len(self.words)):
                if self.quoted_from(i) == self.selected_passage:
                    p.drawRect(self.cell_rect(i, 0))
        elif self.selected_passage is not None and self.selected_passage < self.k:
            row = QRectF(g.x(), g.y() + self.selected_passage * CELL_H, g.width(), CELL_H)
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2))
            p.drawRect(row.adjusted(-1, -1, 1, 1))
        for cell, color in ((self.hover, text), (self.cursor_cell if self.hasFocus() else None,
                                                 pal.color(QPalette.ColorRole.Highlight))):
            if cell is not None:
                p.setBrush(Qt.BrushStyle.NoBrush)
                p.setPen(QPen(color, 1.5))
                i, k = cell
                r = self.cell_rect(i, 0 if self.quoted else k)
                p.drawRect(r.adjusted(1, 1, -1, -1))
                p.setPen(QPen(pal.color(QPalette.ColorRole.Base), 1))  # seen on dark cells
                p.drawRect(r.adjusted(2.5, 2.5, -2.5, -2.5))

    # ---- interaction -----------------------------------------------------------------------

    def tooltip_text(self, i: int, k: int) -> str:
        word = self.words[i]
        what = "piece" if self.pieces else "word"
        if self.quoted:
            q = self.quoted_from(i)
            if q is None:
                return (f"{what} {i + 1} “{word.label}”\nheld by none of the retrieved "
                        "passages (read together: no passage is its source)")
            title = self.docs[q].title if q < len(self.docs) else f"passage {q + 1}"
            return (f"{what} {i + 1} “{word.label}”\nquoted from [{q + 1}] {elide(title, 50)}"
                    "\n(read together: the passages were read in one prompt, so there is "
                    "no probability per passage)")
        title = self.docs[k].title if k < len(self.docs) else f"passage {k + 1}"
        out = (f"{what} {i + 1} “{word.label}”\n[{k + 1}] {elide(title, 50)}\n"
               f"posterior {percent(self.value(i, k), 1)}")
        if len(word.pieces) > 1:
            how = "after its last piece" if self.mode == "sequence" else "mean over pieces"
            parts = " · ".join(f"{piece_label(self.tokens[j].text)} "
                               f"{percent(self.tokens[j].posterior[k], 1)}"
                               for j in word.pieces if k < len(self.tokens[j].posterior))
            out += f" ({how})\npieces: {parts}"
        return out

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        cell = self.cell_at(event.position())
        if cell != self.hover:
            self.hover = cell
            self.update()
        if cell is not None:
            QToolTip.showText(event.globalPosition().toPoint(), self.tooltip_text(*cell), self)
        else:
            QToolTip.hideText()

    def leaveEvent(self, event: object) -> None:
        self.hover = None
        self.update()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        cell = self.cell_at(event.position())
        if cell is not None and event.button() == Qt.MouseButton.LeftButton:
            self.cursor_cell = cell
            self.selected_passage = cell[1]
            self.update()
            self.cellClicked.emit(*cell)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        if not self.words:
            super().keyPressEvent(event)
            return
        if self.quoted:
            self._quoted_key(event)
            return
        i, k = self.cursor_cell or (0, self.selected_passage or 0)
        key = event.key()
        moves = {Qt.Key.Key_Left: (-1, 0), Qt.Key.Key_Right: (1, 0),
                 Qt.Key.Key_Up: (0, -1), Qt.Key.Key_Down: (0, 1)}
        if key in moves:
            di, dk = moves[Qt.Key(key)]
            self.cursor_cell = (min(max(i + di, 0), len(self.words) - 1),
                                min(max(k + dk, 0), self.k - 1))
            self.update()
            r = self.cell_rect(*self.cursor_cell)
            QToolTip.showText(self.mapToGlobal(r.bottomRight().toPoint()),
                              self.tooltip_text(*self.cursor_cell), self)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            self.cursor_cell = (i, k)
            self.selected_passage = k
            self.update()
            self.cellClicked.emit(i, k)
        else:
            super().keyPressEvent(event)

    def _quoted_key(self, event: QKeyEvent) -> None:
        """Left and right move along the one row; Enter shows the word's passage."""
        i = self.cursor_cell[0] if self.cursor_cell else 0
        key = event.key()
        if key in (Qt.Key.Key_Left, Qt.Key.Key_Right):
            i = min(max(i + (1 if key == Qt.Key.Key_Right else -1), 0), len(self.words) - 1)
            self.cursor_cell = (i, self.quoted_from(i) or 0)
            self.update()
            r = self.cell_rect(i, 0)
            QToolTip.showText(self.mapToGlobal(r.bottomRight().toPoint()),
                              self.tooltip_text(i, 0), self)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            q = self.quoted_from(i)
            self.cursor_cell = (i, q or 0)
            if q is not None:
                self.selected_passage = q
                self.cellClicked.emit(i, q)
            self.update()
        else:
            super().keyPressEvent(event)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._relayout()

    def focusInEvent(self, event: object) -> None:
        super().focusInEvent(event)  # type: ignore[arg-type]
        self.update()

    def focusOutEvent(self, event: object) -> None:
        super().focusOutEvent(event)  # type: ignore[arg-type]
        self.update()
