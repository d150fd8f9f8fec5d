"""Where the map's labels go, and the boxes they are painted in."""

from __future__ import annotations

import math
from collections.abc import Sequence

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPainterPath, QPalette, QPen
from PySide6.QtWidgets import QWidget

from ragdesk.ui.explore.keys import MAP_KEYS_LINE


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


def paint_label(p: QPainter, box: QRectF, text: str, colour: QColor, plate: QColor) -> None:
    """``text`` in ``colour`` on an opaque plate of the canvas' background, so its contrast
    is the one :func:`ragdesk.ui.explore.palette.readable` measured, whatever lies under."""
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(plate)
    p.drawRoundedRect(box, 3, 3)
    p.setPen(colour)
    p.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)


def paint_tip(p: QPainter, font: QFont, c: QPointF, text: str, width: float) -> None:
    """A dark box with ``text`` above the point ``c`` (below it near the top edge), inside a
    canvas ``width`` wide."""
    p.setFont(font)
    fm = QFontMetrics(font)
    text = fm.elidedText(text, Qt.TextElideMode.ElideRight, int(max(80, width - 40)))
    tw, th = fm.horizontalAdvance(text) + 12, fm.height() + 6
    x = min(max(4.0, c.x() - tw / 2), width - tw - 4)
    y = c.y() - 14 - th if c.y() - 14 - th > 4 else c.y() + 14
    box = QRectF(x, y, tw, th)
    path = QPainterPath()
    path.addRoundedRect(box, 4, 4)
    p.fillPath(path, QColor(30, 30, 35, 230))
    p.setPen(QColor("white"))
    p.drawText(box, int(Qt.AlignmentFlag.AlignCenter), text)


def paint_focus(p: QPainter, canvas: QWidget, keys: bool) -> None:
    """A frame in the highlight colour round a canvas that has the keyboard and, when there
    is a query to move (``keys``), a line naming the keys that move it."""
    pal = canvas.palette()
    p.setPen(QPen(pal.color(QPalette.ColorRole.Highlight), 2))
    p.setBrush(Qt.BrushStyle.NoBrush)
    p.drawRect(QRectF(canvas.rect()).adjusted(1, 1, -1, -1))
    if not keys:
        return
    f = QFont(canvas.font())
    f.setPointSizeF(max(7.0, f.pointSizeF() * 0.85))
    p.setFont(f)
    p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
    p.drawText(QRectF(8, 4, canvas.width() - 16, QFontMetrics(f).height() + 2),
               int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter), MAP_KEYS_LINE)
