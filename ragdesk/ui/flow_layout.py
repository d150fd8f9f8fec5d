"""A layout that places widgets left to right and wraps them, like words (after Qt's
example), optionally centring each line."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QWidget


class FlowLayout(QLayout):
    def __init__(self, parent: QWidget | None = None, spacing: int = 6,
                 centred: bool = False) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._spacing = spacing
        self._centred = centred  # each line centred, like a row of suggestions
        self.setContentsMargins(QMargins(0, 0, 0, 0))

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._do_layout(QRect(0, 0, width, 0), test_only=True)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._do_layout(rect, test_only=False)

    def sizeHint(self) -> QSize:
        return self.minimumSize()

    def minimumSize(self) -> QSize:
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        m = self.contentsMargins()
        return size + QSize(m.left() + m.right(), m.top() + m.bottom())

    def _do_layout(self, rect: QRect, *, test_only: bool) -> int:
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        lines: list[list[tuple[QLayoutItem, QSize]]] = [[]]
        x = 0
        for item in self._items:
            w = item.widget()
            if w is not None and w.isHidden():
                continue
            hint = item.sizeHint()
            # Wider than the whole line: give it the line (down to its minimum) rather than
            # let it run past the edge, where the scroll area or the dock would cut it.
            width = max(min(hint.width(), area.width()), item.minimumSize().width())
            size = QSize(width, hint.height())
            if lines[-1] and x + width > area.width():
                lines.append([])
                x = 0
            lines[-1].append((item, size))
            x += width + self._spacing
        y = area.y()
        for line in lines:
            if not line:
                continue
            used = sum(sz.width() for _, sz in line) + self._spacing * (len(line) - 1)
            lx = area.x() + (max(0, area.width() - used) // 2 if self._centred else 0)
            height = max(sz.height() for _, sz in line)
            for item, sz in line:
                if not test_only:
                    item.setGeometry(QRect(QPoint(lx, y), sz))
                lx += sz.width() + self._spacing
            y += height + self._spacing
        bottom = y - self._spacing if any(lines) else y
        return bottom - rect.y() + m.bottom()

