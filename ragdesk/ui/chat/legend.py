"""The legend under an answer: each passage's colour and its share of the answer."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QRectF, QSize, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QMouseEvent, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QSizePolicy, QWidget

from ragdesk.core.units import percent
from ragdesk.ui.theme import passage_color, passage_tint


class Legend(QWidget):
    """Colour swatches for passages 1..K with each one's share of the answer's tokens (by
    the source each token is shown with); the swatches wrap onto another line when the card
    is narrow rather than dropping off. An answer no single passage holds (RAG-Token pieced
    it together) says so and draws no percentages: a "100%" would claim one passage holds
    it."""

    passageClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.k = 0
        self.counts: list[int] = []
        self.mixed = False
        self.guess = False  # the answer abstained: these are the sources of its guess
        self._entries: list[tuple[int, str, bool]] = []  # (rank, text, has tokens)
        self.setMouseTracking(True)
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self._rects: list[QRectF] = []
        self.setToolTip("Each passage's share of the words it is cited for")

    def set_counts(self, k: int, counts: Sequence[int], *, mixed: bool = False,
                   guess: bool = False) -> None:
        self.counts = list(counts)
        self.k = k
        self.mixed, self.guess = mixed, guess
        total = sum(self.counts) or 1
        share = [(self.counts[r] if r < len(self.counts) else 0) / total for r in range(k)]
        if mixed:
            self._entries = [(r, f"[{r + 1}]", True) for r in range(k) if share[r] > 0]
            self.setToolTip("No retrieved passage holds this whole answer: its words come from "
                            "these passages (" + ", ".join(
                                f"[{r + 1}] {percent(share[r])}" for r in range(k)
                                if share[r] > 0) + " of its tokens)")
        else:
            self._entries = [(r, f"[{r + 1}] {percent(share[r])}", share[r] > 0)
                             for r in range(k)]
            self.setToolTip("Each passage's share of the words it is cited for (the heat map "
                            "shows how much every passage weighed in each word)")
        self.updateGeometry()
        self.update()

    def label(self) -> str:
        if self.mixed:
            return "The guess, from several passages:" if self.guess \
                else "From several passages:"
        # the shares count the words each passage is cited for, not the posterior's mass
        return "The guess's words from:" if self.guess else "Words cited from:"

    def texts(self) -> list[str]:
        return [text for _, text, _ in self._entries]

    def _font(self) -> QFont:
        f = QFont(self.font())
        f.setPointSizeF(f.pointSizeF() * 0.92)
        return f

    def _line_h(self) -> int:
        return QFontMetrics(self._font()).height() + 6

    def layout_rects(self, width: int) -> tuple[QRectF, list[QRectF]]:
        """The label's box and each swatch-and-text box at this width."""
        fm = QFontMetrics(self._font())
        h = fm.height()
        pad = (self._line_h() - h) / 2
        label = QRectF(0, pad, fm.horizontalAdvance(self.label()) + 2, h)
        x, y = label.right() + 6, pad
        rects = []
        for text in self.texts():
            w = h * 0.8 + 4 + fm.horizontalAdvance(text) + 2
            if x + w > width and x > label.right() + 6:
                x, y = label.right() + 6, y + self._line_h()
            rects.append(QRectF(x, y, w, h))
            x += w + 12
        return label, rects

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        _, rects = self.layout_rects(width)
        lines = len({r.y() for r in rects}) or 1
        return lines * self._line_h()

    def sizeHint(self) -> QSize:
        return QSize(300, self.heightForWidth(300))

    def minimumSizeHint(self) -> QSize:
        label, rects = self.layout_rects(0)
        widest = max((r.width() for r in rects), default=0.0)
        return QSize(int(label.width() + 6 + widest), self._line_h())

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setFont(self._font())
        fm = QFontMetrics(self._font())
        h = fm.height()
        muted = self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
        label, rects = self.layout_rects(self.width())
        self._rects = rects
        p.setPen(muted)
        p.drawText(label, Qt.AlignmentFlag.AlignVCenter, self.label())
        for rect, (k, text, used) in zip(rects, self._entries, strict=True):
            sw = h * 0.8
            p.setPen(passage_color(k))
            p.setBrush(passage_tint(k, self.palette()) if used else self.palette().base())
            p.drawRoundedRect(QRectF(rect.x(), rect.y() + (h - sw) / 2, sw, sw), 3, 3)
            p.setPen(self.palette().color(QPalette.ColorRole.Text) if used else muted)
            p.drawText(QRectF(rect.x() + sw + 4, rect.y(), rect.width() - sw - 4, h),
                       Qt.AlignmentFlag.AlignVCenter, text)
        p.end()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        for r, (k, _text, _used) in zip(self._rects, self._entries, strict=False):
            if r.contains(event.position()):
                self.passageClicked.emit(k)
                return
