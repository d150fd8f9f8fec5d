"""Colours the explore views share, so citation [n] has one colour in the map and the bars.

Backgrounds, text and grid lines come from the widget's palette, so the views follow the
light and dark themes; only the identity colours are fixed.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette

# Tableau 10 (the same order as ragdesk/ui/theme.py): distinct for the usual K ≤ 10.
_RANK_COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac")

QUERY_COLOUR = QColor("#d62728")


def rank_colour(rank: int) -> QColor:
    """Colour of the passage at 0-based ``rank`` (citation number rank + 1)."""
    return QColor(_RANK_COLOURS[rank % len(_RANK_COLOURS)])


def background(pal: QPalette) -> QColor:
    return pal.color(QPalette.ColorRole.Base)


def ink(pal: QPalette, alpha: int = 255) -> QColor:
    """The text colour, optionally translucent (grid lines, bar tracks, neighbour dots)."""
    c = QColor(pal.color(QPalette.ColorRole.Text))
    c.setAlpha(alpha)
    return c


def muted(pal: QPalette) -> QColor:
    return pal.color(QPalette.ColorRole.PlaceholderText)
