"""The map's canvas: paints passages, the retrieved ones with rank and p(z|x), and the query
handle; turns drags of the handle (or the arrow keys) into data coordinates and hovering into
a passage.

The retrieved passages are numbered like the answer card's, [1]…[K] in the card's colours,
only while they are the card's passages. When the answer read other passages (BM25, hybrid,
picked by hand), the map's own are "d1"…"dK" in one neutral colour, and the card's are drawn
as squares under the card's numbers where they lie in the plane.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFocusEvent,
    QFont,
    QFontMetrics,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QToolTip, QWidget

from ragdesk.core.projection import MapPoint, Projection
from ragdesk.core.types import RetrievedDoc
from ragdesk.core.units import percent, prior_text
from ragdesk.ui.explore.keys import (
    MAP_ARROWS,
    MAP_ASK_KEYS,
    MAP_FINE_STEP_PX,
    MAP_RESET_KEY,
    MAP_STEP_PX,
)
from ragdesk.ui.explore.map_labels import paint_focus, paint_label, paint_tip, place_label
from ragdesk.ui.explore.palette import (
    QUERY_COLOUR,
    background,
    ink,
    label_colour,
    muted,
    query_label_colour,
    rank_colour,
)

__all__ = ["MapCanvas", "place_label"]

HANDLE_GRAB_PX = 14.0
HOVER_PX = 7.0
MARGIN_PX = 28.0
MIN_WIDTH_PX = 300
MIN_HEIGHT_PX = 200
CARD_MARK_PX = 8.0  # half the side of the square that marks a card's passage


class MapCanvas(QWidget):
    """Paints the map and turns mouse drags of the query handle into data coordinates."""

    handleMoved = Signal(float, float)
    handleReleased = Signal(float, float)
    hoveredChanged = Signal(object)  # MapPoint or None
    askRequested = Signal()  # Enter: ask from the query's passages
    resetRequested = Signal()  # Home: the query back at the question

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setMinimumSize(MIN_WIDTH_PX, MIN_HEIGHT_PX)
        # Tab reaches it, so the query moves without a mouse (the arrow keys).
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.setAccessibleName("Retrieval map")
        self.setAccessibleDescription("Arrow keys move the query; Enter asks from its "
                                      "passages; Home brings it back to the question.")
        self._points: list[MapPoint] = []
        self._ranks: dict[int, tuple[int, float]] = {}
        self._numbered = True  # the retrieved passages are the card's: [n] in its colours
        self._card_marks: dict[int, int] = {}  # passage id -> the card's rank (not numbered)
        self._question_ids: set[int] = set()  # retrieved at the question, ringed once dragged
        self._question_xy: tuple[float, float] | None = None
        self._handle_xy: tuple[float, float] | None = None
        self._box = (0.0, 1.0, 0.0, 1.0)  # xmin, xmax, ymin, ymax in data units
        self._axis_labels = ("PC 1", "PC 2")
        self._message = ""
        self._dragging = False
        self._hovered: MapPoint | None = None
        self._query_box: QRectF | None = None
        self._label_boxes: list[QRectF] = []

    # -- data ---------------------------------------------------------------------------
    def set_map(self, points: Sequence[MapPoint], question_xy: tuple[float, float],
                projection: Projection, question_ids: Sequence[int] = ()) -> None:
        self._points = list(points)
        self._question_ids = set(question_ids)
        self._question_xy = question_xy
        self._handle_xy = question_xy
        xs = [p.xy[0] for p in self._points] + [question_xy[0]]
        ys = [p.xy[1] for p in self._points] + [question_xy[1]]
        xmin, xmax, ymin, ymax = min(xs), max(xs), min(ys), max(ys)
        # A little room to drag past the outermost passages on either axis; more would
        # leave the passages a small part of the canvas (dragging works past the box too).
        padx = 0.05 * max(xmax - xmin, 1e-9)
        pady = 0.05 * max(ymax - ymin, 1e-9)
        self._box = (xmin - padx, xmax + padx, ymin - pady, ymax + pady)
        r1, r2 = projection.explained_variance_ratio
        self._axis_labels = (f"PC 1 ({percent(r1)} of variance)", f"PC 2 ({percent(r2)})")
        self._message = ""
        self.update()

    def add_points(self, points: Sequence[MapPoint]) -> None:
        known = {p.id for p in self._points}
        self._points.extend(p for p in points if p.id not in known)
        self.update()

    def set_retrieved(self, docs: Sequence[RetrievedDoc], numbered: bool = True) -> None:
        """The query's passages in rank order; ``numbered``: they are the answer card's, so
        they wear its [n] and colours (else "d1"… in a neutral colour)."""
        self._ranks = {d.id: (r, d.prob) for r, d in enumerate(docs)}
        self._numbered = numbered
        self.update()

    def set_card_marks(self, marks: Sequence[tuple[MapPoint, int]]) -> None:
        """The answer card's passages, each with its rank on the card, when they are not the
        query's (drawn as squares with the card's [n])."""
        self.add_points([pt for pt, _ in marks])
        self._card_marks = {pt.id: rank for pt, rank in marks}
        self.update()

    def card_marks(self) -> dict[int, int]:
        return dict(self._card_marks)

    def rank_label(self, rank: int) -> str:
        """How the query's passage at ``rank`` is named on the map and in its table."""
        return f"[{rank + 1}]" if self._numbered else f"d{rank + 1}"

    def label_text(self, rank: int, prob: float) -> str:
        """The label beside the query's passage at ``rank``: its name and p(z|x)."""
        return f"{self.rank_label(rank)} {percent(prob)}"

    def set_handle(self, xy: tuple[float, float]) -> None:
        self._handle_xy = xy
        self.update()

    def set_message(self, text: str) -> None:
        """A centred note shown instead of the map (empty: show the map)."""
        self._message = text
        if text:
            self._points, self._ranks, self._card_marks = [], {}, {}
            self._question_xy = self._handle_xy = None
        self.update()

    def points(self) -> list[MapPoint]:
        return list(self._points)

    def knows(self, passage_id: int) -> bool:
        return any(p.id == passage_id for p in self._points)

    @property
    def dragging(self) -> bool:
        return self._dragging

    # -- coordinates --------------------------------------------------------------------
    def _scale(self) -> tuple[float, float, float]:
        """Pixels per data unit (equal on both axes, so the map keeps the plane's geometry)
        and the pixel offsets that centre the box."""
        xmin, xmax, ymin, ymax = self._box
        w = max(1.0, self.width() - 2 * MARGIN_PX)
        h = max(1.0, self.height() - 2 * MARGIN_PX)
        s = min(w / max(xmax - xmin, 1e-12), h / max(ymax - ymin, 1e-12))
        ox = MARGIN_PX + (w - s * (xmax - xmin)) / 2
        oy = MARGIN_PX + (h - s * (ymax - ymin)) / 2
        return s, ox, oy

    def to_widget(self, xy: tuple[float, float] | Sequence[float]) -> QPointF:
        xmin, _, _, ymax = self._box
        s, ox, oy = self._scale()
        return QPointF(ox + (xy[0] - xmin) * s, oy + (ymax - xy[1]) * s)

    def to_data(self, pos: QPointF) -> tuple[float, float]:
        xmin, _, _, ymax = self._box
        s, ox, oy = self._scale()
        return (xmin + (pos.x() - ox) / s, ymax - (pos.y() - oy) / s)

    def handle_widget_pos(self) -> QPointF | None:
        return None if self._handle_xy is None else self.to_widget(self._handle_xy)

    def point_at(self, pos: QPointF) -> MapPoint | None:
        best: MapPoint | None = None
        best_d = HOVER_PX
        for p in self._points:
            w = self.to_widget(p.xy)
            d = math.hypot(w.x() - pos.x(), w.y() - pos.y())
            if d <= best_d:
                best, best_d = p, d
        return best

    # -- mouse --------------------------------------------------------------------------
    def mousePressEvent(self, event: QMouseEvent) -> None:
        hp = self.handle_widget_pos()
        pos = event.position()
        if (event.button() == Qt.MouseButton.LeftButton and hp is not None
                and math.hypot(hp.x() - pos.x(), hp.y() - pos.y()) <= HANDLE_GRAB_PX):
            self._dragging = True
            self.setCursor(Qt.CursorShape.ClosedHandCursor)
            event.accept()
            return
        super().mousePressEvent(event)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        pos = event.position()
        if self._dragging:
            xy = self.to_data(pos)
            self.set_handle(xy)
            self.handleMoved.emit(xy[0], xy[1])
            event.accept()
            return
        hp = self.handle_widget_pos()
        over_handle = hp is not None and math.hypot(hp.x() - pos.x(),
                                                    hp.y() - pos.y()) <= HANDLE_GRAB_PX
        self.setCursor(Qt.CursorShape.OpenHandCursor if over_handle
                       else Qt.CursorShape.ArrowCursor)
        hovered = None if over_handle else self.point_at(pos)
        self._set_hovered(hovered, event.globalPosition().toPoint())
        super().mouseMoveEvent(event)

    def _set_hovered(self, hovered: MapPoint | None, where: QPoint | None) -> None:
        if hovered is not self._hovered:
            self._hovered = hovered
            self.hoveredChanged.emit(hovered)
            if hovered is None or where is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(where, self._hover_text(hovered), self)
            self.update()

    def mouseReleaseEvent(self, event: QMouseEvent) -> None:
        if self._dragging and event.button() == Qt.MouseButton.LeftButton:
            self._dragging = False
            self.setCursor(Qt.CursorShape.OpenHandCursor)
            xy = self.to_data(event.position())
            self.set_handle(xy)
            self.handleReleased.emit(xy[0], xy[1])
            event.accept()
            return
        super().mouseReleaseEvent(event)

    def leaveEvent(self, event: QEvent) -> None:
        if self._hovered is not None:
            self._hovered = None
            self.hoveredChanged.emit(None)
            self.update()
        super().leaveEvent(event)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in MAP_ARROWS and self._handle_xy is not None:
            fine = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
            step = MAP_FINE_STEP_PX if fine else MAP_STEP_PX
            dx, dy = MAP_ARROWS[key]
            at = self.to_widget(self._handle_xy)
            xy = self.to_data(QPointF(at.x() + dx * step, at.y() + dy * step))
            self.set_handle(xy)
            self.handleMoved.emit(xy[0], xy[1])
        elif key in MAP_ASK_KEYS:
            self.askRequested.emit()
        elif key == MAP_RESET_KEY:
            self.resetRequested.emit()
        else:
            super().keyPressEvent(event)
            return
        event.accept()

    def focusInEvent(self, event: QFocusEvent) -> None:
        super().focusInEvent(event)
        self.update()  # the focus frame and the keys' line

    def focusOutEvent(self, event: QFocusEvent) -> None:
        super().focusOutEvent(event)
        self.update()

    def _hover_text(self, p: MapPoint) -> str:
        rank = self._ranks.get(p.id)
        card = self._card_marks.get(p.id)
        parts = [] if rank is None else [f"{self.rank_label(rank[0])} {p.title}  —  "
                                         f"{prior_text(rank[1])}"]
        if card is not None:
            parts.append(f"the card's [{card + 1}] {p.title}" if not parts
                         else f"the card's [{card + 1}]")
        return "  ·  ".join(parts) or p.title

    # -- painting -----------------------------------------------------------------------
    def sizeHint(self) -> QSize:
        return QSize(620, 480)

    def paintEvent(self, event: QPaintEvent) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        pal = self.palette()
        p.fillRect(self.rect(), background(pal))
        if self._message or self._handle_xy is None:
            p.setPen(muted(pal))
            p.drawText(self.rect().adjusted(24, 24, -24, -24),
                       int(Qt.AlignmentFlag.AlignCenter) | int(Qt.TextFlag.TextWordWrap),
                       self._message or "Ask a question to see its passages on the map.")
        else:
            self._paint_axes(p)
            self._paint_links(p)
            self._paint_points(p)
            self._paint_query(p)
            self._paint_hover(p)
        if self.hasFocus():
            paint_focus(p, self, keys=self._handle_xy is not None and not self._message)
        p.end()

    def _paint_axes(self, p: QPainter) -> None:
        p.setPen(QPen(ink(self.palette(), 28), 1))
        xmin, xmax, ymin, ymax = self._box
        if xmin < 0 < xmax:
            a, b = self.to_widget((0.0, ymin)), self.to_widget((0.0, ymax))
            p.drawLine(a, b)
        if ymin < 0 < ymax:
            a, b = self.to_widget((xmin, 0.0)), self.to_widget((xmax, 0.0))
            p.drawLine(a, b)
        f = QFont(self.font())
        f.setPointSizeF(max(7.0, f.pointSizeF() * 0.85))
        p.setFont(f)
        p.setPen(muted(self.palette()))
        r = self.rect()
        p.drawText(QRectF(0, r.height() - 20, r.width() - 8, 18),
                   int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter),
                   self._axis_labels[0] + " →")
        p.save()
        p.translate(14, r.height() - 8)
        p.rotate(-90)
        p.drawText(QRectF(0, -10, r.height() - 16, 18),
                   int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
                   self._axis_labels[1] + " →")
        p.restore()

    def dot_colour(self, rank: int) -> QColor:
        """The fill of the query's passage at ``rank``: the card's colour while they are
        the card's passages, else one neutral colour (no [n] colour for another passage)."""
        return QColor(rank_colour(rank)) if self._numbered else ink(self.palette(), 170)

    def label_colour(self, rank: int) -> QColor:
        """The text colour of the label of the query's passage at ``rank``."""
        bg = background(self.palette())
        return label_colour(rank, bg) if self._numbered else ink(self.palette())

    def _paint_links(self, p: QPainter) -> None:
        if self._handle_xy is None:
            return
        h = self.to_widget(self._handle_xy)
        by_id = {pt.id: pt for pt in self._points}
        for pid, (rank, prob) in self._ranks.items():
            drawn = by_id.get(pid)
            if drawn is None:
                continue
            c = self.dot_colour(rank)
            c.setAlpha(70 + int(150 * prob))
            p.setPen(QPen(c, 1.0 + 3.0 * prob))
            p.drawLine(h, self.to_widget(drawn.xy))
        if self._question_xy is not None and self._question_xy != self._handle_xy:
            pen = QPen(QUERY_COLOUR, 1.2, Qt.PenStyle.DashLine)
            p.setPen(pen)
            p.drawLine(self.to_widget(self._question_xy), h)

    def _paint_points(self, p: QPainter) -> None:
        pal = self.palette()
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(ink(pal, 95))
        for pt in self._points:
            if pt.id not in self._ranks:
                p.drawEllipse(self.to_widget(pt.xy), 3.0, 3.0)
        # Where the question's own passages were, so the change a drag makes stays visible.
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(ink(pal, 150), 1.2, Qt.PenStyle.DotLine))
        for pt in self._points:
            if pt.id in self._question_ids and pt.id not in self._ranks:
                p.drawEllipse(self.to_widget(pt.xy), 7.0, 7.0)
        by_id = {pt.id: pt for pt in self._points}
        shown = sorted(((rank, prob, self.to_widget(by_id[pid].xy))
                        for pid, (rank, prob) in self._ranks.items() if pid in by_id),
                       key=lambda t: t[0])
        # Draw the lowest ranks last so rank 1 ends up on top.
        for rank, prob, c in reversed(shown):
            radius = self._dot_radius(prob)
            p.setPen(QPen(background(pal), 1.5))
            p.setBrush(self.dot_colour(rank))
            p.drawEllipse(c, radius, radius)
        marks = sorted(((rank, self.to_widget(by_id[pid].xy))
                        for pid, rank in self._card_marks.items() if pid in by_id),
                       key=lambda t: t[0])
        p.setBrush(Qt.BrushStyle.NoBrush)
        for rank, c in marks:
            p.setPen(QPen(rank_colour(rank), 2.5))
            p.drawRect(QRectF(c.x() - CARD_MARK_PX, c.y() - CARD_MARK_PX, 2 * CARD_MARK_PX,
                              2 * CARD_MARK_PX))
        plate = background(pal)
        self._paint_labels(p, [(self.label_text(rank, prob), self.label_colour(rank), c,
                                self._dot_radius(prob)) for rank, prob, c in shown]
                           + [(f"[{rank + 1}]", label_colour(rank, plate), c, CARD_MARK_PX)
                              for rank, c in marks])

    def _paint_labels(self, p: QPainter, labels: list[tuple[str, QColor, QPointF, float]]
                      ) -> None:
        """The query's label, then ``labels`` (text, colour, the centre and radius of the
        mark it names), each where it covers no mark and no label placed before it."""
        f = QFont(self.font())
        f.setBold(True)
        fm = QFontMetrics(f)
        p.setFont(f)
        plate = background(self.palette())
        bounds = self.label_bounds()
        taken = [QRectF(c.x() - r, c.y() - r, 2 * r, 2 * r) for _, _, c, r in labels]
        hp = self.handle_widget_pos()
        query_box: QRectF | None = None
        if hp is not None:
            taken.append(QRectF(hp.x() - 11, hp.y() - 11, 22, 22))  # the star
            text = self._query_label()
            # The star's label goes first: it is the one thing on the map to grab.
            query_box = place_label(hp, 11, fm.horizontalAdvance(text) + 10, fm.height() + 2,
                                    taken, bounds)
            taken.append(query_box)
        first_label = len(taken) - (1 if query_box is not None else 0)
        for text, colour, c, radius in labels:
            box = place_label(c, radius, fm.horizontalAdvance(text) + 8, fm.height() + 2,
                              taken, bounds)
            taken.append(box)
            paint_label(p, box, text, colour, plate)
        self._query_box = query_box
        self._label_boxes = taken[first_label:]

    def label_bounds(self) -> QRectF:
        """Where labels may go: inside the canvas, clear of the axis titles along the left
        and bottom edges."""
        return QRectF(self.rect()).adjusted(20, 4, -4, -20)

    def label_boxes(self) -> list[QRectF]:
        """The query label's, the rank labels' and the card marks' boxes as last painted
        (for tests)."""
        return list(self._label_boxes)

    @staticmethod
    def _dot_radius(prob: float) -> float:
        return 5.0 + 7.0 * math.sqrt(prob)

    def _query_label(self) -> str:
        return "query (drag me)" if self._question_xy == self._handle_xy else "query"

    def _paint_query(self, p: QPainter) -> None:
        if self._question_xy is not None and self._question_xy != self._handle_xy:
            c = self.to_widget(self._question_xy)
            p.setPen(QPen(QUERY_COLOUR, 1.5))
            p.setBrush(Qt.BrushStyle.NoBrush)
            p.drawEllipse(c, 6.0, 6.0)
        if self._handle_xy is None:
            return
        c = self.to_widget(self._handle_xy)
        r = 10.0
        star = QPolygonF()
        for i in range(10):
            ang = -math.pi / 2 + i * math.pi / 5
            rr = r if i % 2 == 0 else r * 0.45
            star.append(QPointF(c.x() + rr * math.cos(ang), c.y() + rr * math.sin(ang)))
        bg = background(self.palette())
        p.setPen(QPen(bg, 1.5))
        p.setBrush(QBrush(QUERY_COLOUR))
        p.drawPolygon(star)
        box = self._query_box
        if box is None:
            return
        f = QFont(self.font())
        f.setBold(True)
        p.setFont(f)
        paint_label(p, box, self._query_label(), query_label_colour(bg), bg)

    def _paint_hover(self, p: QPainter) -> None:
        pt = self._hovered
        if pt is None:
            return
        c = self.to_widget(pt.xy)
        p.setPen(QPen(ink(self.palette()), 1.5))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawEllipse(c, 8.0, 8.0)
        paint_tip(p, QFont(self.font()), c, self._hover_text(pt), self.width())
