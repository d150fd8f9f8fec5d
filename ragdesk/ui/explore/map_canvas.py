"""The map's canvas: paints passages, the retrieved ones with rank and p(z|x), and the query
handle; turns drags of the handle into data coordinates and hovering into a passage."""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QFont,
    QFontMetrics,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPaintEvent,
    QPen,
    QPolygonF,
)
from PySide6.QtWidgets import QToolTip, QWidget

from ragdesk.core.projection import MapPoint, Projection
from ragdesk.core.types import RetrievedDoc
from ragdesk.ui.explore.palette import QUERY_COLOUR, background, ink, muted, rank_colour

HANDLE_GRAB_PX = 14.0
HOVER_PX = 7.0
MARGIN_PX = 28.0


def place_label(c: QPointF, radius: float, w: float, h: float, taken: Sequence[QRectF],
                bounds: QRectF) -> QRectF:
    """A ``w`` x ``h`` box for the label of a mark of ``radius`` at ``c``: the first spot
    around it (right, left, above, below, the diagonals, then the same a step further out)
    that lies inside ``bounds`` and covers no box in ``taken``; failing that, the spot inside
    ``bounds`` that covers the least of them, so a label may be hidden in part by another
    only when the map is too crowded for any other place, and never runs off the canvas."""
    best: QRectF | None = None
    best_overlap = math.inf
    for step in range(3):
        gap = radius + 3 + step * (h + 2)
        spots = [(gap, -h / 2), (-gap - w, -h / 2), (-w / 2, -gap - h), (-w / 2, gap),
                 (gap * 0.7, -gap * 0.7 - h), (gap * 0.7, gap * 0.7),
                 (-gap * 0.7 - w, -gap * 0.7 - h), (-gap * 0.7 - w, gap * 0.7)]
        for dx, dy in spots:
            box = QRectF(c.x() + dx, c.y() + dy, w, h)
            if not bounds.contains(box):
                continue
            overlap = sum(box.intersected(t).width() * box.intersected(t).height()
                          for t in taken if box.intersects(t))
            if overlap == 0:
                return box
            if overlap < best_overlap:
                best, best_overlap = box, overlap
    if best is not None:
        return best
    # Too near the edge for any spot: to the right of the mark, moved inside the bounds.
    box = QRectF(c.x() + radius + 3, c.y() - h / 2, w, h)
    box.moveLeft(min(max(box.left(), bounds.left()), bounds.right() - w))
    box.moveTop(min(max(box.top(), bounds.top()), bounds.bottom() - h))
    return box


class MapCanvas(QWidget):
    """Paints the map and turns mouse drags of the query handle into data coordinates."""

    handleMoved = Signal(float, float)
    handleReleased = Signal(float, float)
    hoveredChanged = Signal(object)  # MapPoint or None

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setMinimumSize(320, 260)
        self.setFocusPolicy(Qt.FocusPolicy.ClickFocus)
        self._points: list[MapPoint] = []
        self._ranks: dict[int, tuple[int, float]] = {}
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
        self._axis_labels = (f"PC 1 ({r1:.0%} of variance)", f"PC 2 ({r2:.0%})")
        self._message = ""
        self.update()

    def add_points(self, points: Sequence[MapPoint]) -> None:
        known = {p.id for p in self._points}
        self._points.extend(p for p in points if p.id not in known)
        self.update()

    def set_retrieved(self, docs: Sequence[RetrievedDoc]) -> None:
        self._ranks = {d.id: (r, d.prob) for r, d in enumerate(docs)}
        self.update()

    def set_handle(self, xy: tuple[float, float]) -> None:
        self._handle_xy = xy
        self.update()

    def set_message(self, text: str) -> None:
        """A centred note shown instead of the map (empty: show the map)."""
        self._message = text
        if text:
            self._points, self._ranks = [], {}
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
        if hovered is not self._hovered:
            self._hovered = hovered
            self.hoveredChanged.emit(hovered)
            if hovered is None:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPosition().toPoint(), self._hover_text(hovered),
                                  self)
            self.update()
        super().mouseMoveEvent(event)

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

    def _hover_text(self, p: MapPoint) -> str:
        rank = self._ranks.get(p.id)
        if rank is None:
            return p.title
        return f"[{rank[0] + 1}] {p.title}  —  p(z|x) = {rank[1]:.3f}"

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
            p.end()
            return
        self._paint_axes(p)
        self._paint_links(p)
        self._paint_points(p)
        self._paint_query(p)
        self._paint_hover(p)
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

    def _paint_links(self, p: QPainter) -> None:
        if self._handle_xy is None:
            return
        h = self.to_widget(self._handle_xy)
        by_id = {pt.id: pt for pt in self._points}
        for pid, (rank, prob) in self._ranks.items():
            drawn = by_id.get(pid)
            if drawn is None:
                continue
            c = QColor(rank_colour(rank))
            c.setAlpha(70 + int(150 * prob))
            p.setPen(QPen(c, 1.0 + 3.0 * prob))
            p.drawLine(h, self.to_widget(drawn.xy))
        if self._question_xy is not None and self._question_xy != self._handle_xy:
            pen = QPen(QUERY_COLOUR, 1.2, Qt.PenStyle.DashLine)
            p.setPen(pen)
            p.drawLine(self.to_widget(self._question_xy), h)

    def _paint_points(self, p: QPainter) -> None:
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(ink(self.palette(), 95))
        for pt in self._points:
            if pt.id not in self._ranks:
                p.drawEllipse(self.to_widget(pt.xy), 3.0, 3.0)
        # Where the question's own passages were, so the change a drag makes stays visible.
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.setPen(QPen(ink(self.palette(), 150), 1.2, Qt.PenStyle.DotLine))
        for pt in self._points:
            if pt.id in self._question_ids and pt.id not in self._ranks:
                p.drawEllipse(self.to_widget(pt.xy), 7.0, 7.0)
        by_id = {pt.id: pt for pt in self._points}
        shown = sorted(((rank, prob, self.to_widget(by_id[pid].xy))
                        for pid, (rank, prob) in self._ranks.items() if pid in by_id),
                       key=lambda t: t[0])
        dots = [QRectF(c.x() - r, c.y() - r, 2 * r, 2 * r)
                for _, prob, c in shown for r in [self._dot_radius(prob)]]
        # Draw the lowest ranks last so rank 1 ends up on top.
        for (rank, prob, c), _ in reversed(list(zip(shown, dots, strict=True))):
            radius = self._dot_radius(prob)
            p.setPen(QPen(background(self.palette()), 1.5))
            p.setBrush(rank_colour(rank))
            p.drawEllipse(c, radius, radius)
        f = QFont(self.font())
        f.setBold(True)
        fm = QFontMetrics(f)
        p.setFont(f)
        plate = QColor(background(self.palette()))
        plate.setAlpha(220)
        bounds = self.label_bounds()
        taken = list(dots)
        hp = self.handle_widget_pos()
        query_box: QRectF | None = None
        if hp is not None:
            star = QRectF(hp.x() - 11, hp.y() - 11, 22, 22)
            taken.append(star)
            text = self._query_label()
            # The star's label goes first: it is the one thing on the map to grab.
            query_box = place_label(hp, 11, fm.horizontalAdvance(text) + 10, fm.height() + 2,
                                    taken, bounds)
            taken.append(query_box)
        for (rank, prob, c), dot in zip(shown, dots, strict=True):
            label = f"[{rank + 1}] {prob:.2f}"
            box = place_label(c, dot.width() / 2, fm.horizontalAdvance(label) + 8,
                              fm.height() + 2, taken, bounds)
            taken.append(box)
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(plate)
            p.drawRoundedRect(box, 3, 3)
            p.setPen(rank_colour(rank))
            p.drawText(box, int(Qt.AlignmentFlag.AlignCenter), label)
        self._query_box = query_box
        self._label_boxes = taken[len(dots) + (1 if hp is not None else 0):]

    def label_bounds(self) -> QRectF:
        """Where labels may go: inside the canvas, clear of the axis titles along the left
        and bottom edges."""
        return QRectF(self.rect()).adjusted(20, 4, -4, -20)

    def label_boxes(self) -> list[QRectF]:
        """The rank labels' and the query label's boxes as last painted (for tests)."""
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
        p.setPen(QPen(background(self.palette()), 1.5))
        p.setBrush(QBrush(QUERY_COLOUR))
        p.drawPolygon(star)
        box = self._query_box
        if box is None:
            return
        f = QFont(self.font())
        f.setBold(True)
        p.setFont(f)
        plate = QColor(background(self.palette()))
        plate.setAlpha(220)
        p.setPen(Qt.PenStyle.NoPen)
        p.setBrush(plate)
        p.drawRoundedRect(box, 3, 3)
        p.setPen(QUERY_COLOUR)
        p.drawText(box, int(Qt.AlignmentFlag.AlignCenter), self._query_label())

    def _paint_hover(self, p: QPainter) -> None:
        pt = self._hovered
        if pt is None:
            return
        c = self.to_widget(pt.xy)
        p.setPen(QPen(ink(self.palette()), 1.5))
        p.setBrush(Qt.BrushStyle.NoBrush)
        p.drawEllipse(c, 8.0, 8.0)
        text = self._hover_text(pt)
        f = QFont(self.font())
        p.setFont(f)
        fm = QFontMetrics(f)
        text = fm.elidedText(text, Qt.TextElideMode.ElideRight, max(80, self.width() - 40))
        tw, th = fm.horizontalAdvance(text) + 12, fm.height() + 6
        x = min(max(4.0, c.x() - tw / 2), self.width() - tw - 4)
        y = c.y() - 14 - th if c.y() - 14 - th > 4 else c.y() + 14
        box = QRectF(x, y, tw, th)
        path = QPainterPath()
        path.addRoundedRect(box, 4, 4)
        p.fillPath(path, QColor(30, 30, 35, 230))
        p.setPen(QColor("white"))
        p.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)
