"""Colours the explore views share, so citation [n] has one colour in the map, the bars and
the answer card.

Backgrounds, text and grid lines come from the widget's palette, so the views follow the
light and dark themes; only the identity colours are fixed. Text drawn in an identity colour
(a map label, a table's "[n]") uses :func:`label_colour`, the same hue made dark or light
enough to read on the background it sits on.
"""

from __future__ import annotations

from PySide6.QtGui import QColor, QPalette

from ragdesk.ui.theme import contrast_ratio, mix, passage_color, readable_text_on

QUERY_COLOUR = QColor("#d62728")
# WCAG 2 AA for normal text; labels are small, so there is no large-text allowance.
TEXT_CONTRAST = 4.5


def rank_colour(rank: int) -> QColor:
    """Colour of the passage at 0-based ``rank`` (citation number rank + 1)."""
    return passage_color(rank)


def background(pal: QPalette) -> QColor:
    return pal.color(QPalette.ColorRole.Base)


def ink(pal: QPalette, alpha: int = 255) -> QColor:
    """The text colour, optionally translucent (grid lines, bar tracks, neighbour dots)."""
    c = QColor(pal.color(QPalette.ColorRole.Text))
    c.setAlpha(alpha)
    return c


def muted(pal: QPalette) -> QColor:
    return pal.color(QPalette.ColorRole.PlaceholderText)


def readable(colour: QColor, on: QColor, ratio: float = TEXT_CONTRAST) -> QColor:
    """``colour`` as text on ``on``: unchanged when it already reads, else moved towards
    the near-black or near-white that reads on ``on`` (the theme's one rule) just far
    enough, so the hue that ties it to its passage stays."""
    if contrast_ratio(colour, on) >= ratio:
        return QColor(colour)
    target = readable_text_on(on)
    for step in range(1, 21):
        # In 8 bits a channel, as it is drawn and written into HTML ("#4a739f"): rounding
        # after the check could take the ratio back under the bar.
        c = QColor(mix(colour, target, step / 20).name())
        if contrast_ratio(c, on) >= ratio:
            return c
    return target


def label_colour(rank: int, on: QColor) -> QColor:
    """The colour of passage ``rank``'s label text on the background ``on``."""
    return readable(rank_colour(rank), on)


def query_label_colour(on: QColor) -> QColor:
    """The colour of the query's label text on the background ``on``."""
    return readable(QUERY_COLOUR, on)
