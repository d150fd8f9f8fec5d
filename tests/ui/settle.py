"""Waiting for a layout to be done instead of sleeping a fixed time: a resize, a dock shown or
a card filled is laid out in passes (each posts the next), and some widgets lay out again on
a short timer (the heat map coalesces streamed tokens). Fast where the machine is fast, and
as long as it takes under load."""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QWidget

# Single-shot timers up to this long under a widget are taken for a deferred relayout; longer
# ones (a status line's fade, an undo offer) are not waited for.
DEFERRED_MS = 1_000
# Readings alike in a row (one event-loop pass of about 10 ms apart) that count as settled.
ALIKE = 3


def _geometry(widgets: tuple[QWidget, ...]) -> list[tuple[int, int, int, int, bool]]:
    every = [x for w in widgets for x in (w, *w.findChildren(QWidget))]
    return [(g.x(), g.y(), g.width(), g.height(), x.isVisible())
            for x in every for g in (x.geometry(),)]


def _deferred(widgets: tuple[QWidget, ...]) -> bool:
    return any(t.isActive() and t.isSingleShot() and t.interval() <= DEFERRED_MS
               for w in widgets for t in w.findChildren(QTimer))


def settle(qtbot: Any, *widgets: QWidget, timeout: int = 10_000) -> None:
    """Wait until no geometry or visibility under ``widgets`` changes over two event-loop
    passes and no deferred relayout is pending under them."""
    seen: list[list[tuple[int, int, int, int, bool]]] = []

    def settled() -> bool:
        seen.append(_geometry(widgets))
        del seen[:-ALIKE]
        return (len(seen) == ALIKE and all(s == seen[0] for s in seen)
                and not _deferred(widgets))

    qtbot.waitUntil(settled, timeout=timeout)
