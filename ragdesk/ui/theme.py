"""Light and dark palettes, the passage colours and the heat-map colour ramp.

Passage colours are a qualitative palette (Tableau 10) so neighbouring citations stay
distinguishable; token backgrounds are tints of them mixed into the base colour, which keeps
text readable on both themes. The heat map uses a sequential ramp whose high end is the
colour furthest from the base, so "more probable" reads as "more ink" on either theme.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QActionGroup, QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication, QMenu

from ragdesk.ui.resources import stylesheet

# Same order as ragdesk/ui/explore/palette.py so citation [n] has one colour everywhere.
PASSAGE_COLORS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)

THEMES = ("system", "light", "dark")


def is_dark(palette: QPalette | None = None) -> bool:
    pal = palette if palette is not None else QApplication.palette()
    return pal.color(QPalette.ColorRole.Base).lightness() < 128


def mix(a: QColor, b: QColor, t: float) -> QColor:
    """``a`` moved towards ``b`` by ``t`` (0 gives a, 1 gives b)."""
    return QColor.fromRgbF(
        a.redF() + (b.redF() - a.redF()) * t,
        a.greenF() + (b.greenF() - a.greenF()) * t,
        a.blueF() + (b.blueF() - a.blueF()) * t,
        1.0,
    )


def passage_color(k: int) -> QColor:
    """The identity colour of the passage at rank ``k`` (0-based)."""
    base = QColor(PASSAGE_COLORS[k % len(PASSAGE_COLORS)])
    if k >= len(PASSAGE_COLORS):
        # Past ten passages, repeat the hues a shade darker so ranks 1 and 11 still differ.
        base = base.darker(100 + 35 * (k // len(PASSAGE_COLORS)))
    return base


def passage_tint(k: int, palette: QPalette | None = None) -> QColor:
    """The background a token drawn from passage ``k`` gets."""
    pal = palette if palette is not None else QApplication.palette()
    base = pal.color(QPalette.ColorRole.Base)
    return mix(base, passage_color(k), 0.42 if is_dark(pal) else 0.36)


_LIGHT_RAMP = ("#f7fbff", "#c6dbef", "#6baed6", "#2171b5", "#08306b")
_DARK_RAMP = ("#1b1f24", "#173a5e", "#1f6fb2", "#4fa3e0", "#d6ecff")


def heat_ramp(palette: QPalette | None = None) -> list[QColor]:
    """The colour stops of the heat map's ramp for this palette."""
    pal = palette if palette is not None else QApplication.palette()
    return [QColor(c) for c in (_DARK_RAMP if is_dark(pal) else _LIGHT_RAMP)]


def heat_color(value: float, palette: QPalette | None = None,
               stops: list[QColor] | None = None) -> QColor:
    """Sequential colour for a probability in [0, 1] (pass ``stops`` when painting many)."""
    if stops is None:
        stops = heat_ramp(palette)
    v = min(1.0, max(0.0, value)) * (len(stops) - 1)
    i = min(int(v), len(stops) - 2)
    return mix(stops[i], stops[i + 1], v - i)


def readable_text_on(bg: QColor) -> QColor:
    # Relative luminance decides black or white text (WCAG's formula, close enough here).
    lum = 0.2126 * bg.redF() + 0.7152 * bg.greenF() + 0.0722 * bg.blueF()
    return QColor("#111111") if lum > 0.5 else QColor("#f5f5f5")


def light_palette() -> QPalette:
    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#f3f4f6",
        QPalette.ColorRole.WindowText: "#1f2328",
        QPalette.ColorRole.Base: "#ffffff",
        QPalette.ColorRole.AlternateBase: "#f6f8fa",
        QPalette.ColorRole.ToolTipBase: "#ffffff",
        QPalette.ColorRole.ToolTipText: "#1f2328",
        QPalette.ColorRole.PlaceholderText: "#8b949e",
        QPalette.ColorRole.Text: "#1f2328",
        QPalette.ColorRole.Button: "#f6f8fa",
        QPalette.ColorRole.ButtonText: "#1f2328",
        QPalette.ColorRole.BrightText: "#cf222e",
        QPalette.ColorRole.Light: "#ffffff",
        QPalette.ColorRole.Midlight: "#eaeef2",
        QPalette.ColorRole.Mid: "#d0d7de",
        QPalette.ColorRole.Dark: "#afb8c1",
        QPalette.ColorRole.Shadow: "#8c959f",
        QPalette.ColorRole.Highlight: "#2f6feb",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#0969da",
        QPalette.ColorRole.LinkVisited: "#8250df",
    }
    for role, color in roles.items():
        p.setColor(role, QColor(color))
    _disabled(p, "#8c959f")
    return p


def dark_palette() -> QPalette:
    p = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#22272e",
        QPalette.ColorRole.WindowText: "#d5dbe1",
        QPalette.ColorRole.Base: "#1c2128",
        QPalette.ColorRole.AlternateBase: "#262c34",
        QPalette.ColorRole.ToolTipBase: "#2d333b",
        QPalette.ColorRole.ToolTipText: "#e6edf3",
        QPalette.ColorRole.PlaceholderText: "#768390",
        QPalette.ColorRole.Text: "#d5dbe1",
        QPalette.ColorRole.Button: "#2d333b",
        QPalette.ColorRole.ButtonText: "#d5dbe1",
        QPalette.ColorRole.BrightText: "#ff7b72",
        QPalette.ColorRole.Light: "#3b434d",
        QPalette.ColorRole.Midlight: "#343b44",
        QPalette.ColorRole.Mid: "#444c56",
        QPalette.ColorRole.Dark: "#15191e",
        QPalette.ColorRole.Shadow: "#0d1014",
        QPalette.ColorRole.Highlight: "#316dca",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.Link: "#539bf5",
        QPalette.ColorRole.LinkVisited: "#b083f0",
    }
    for role, color in roles.items():
        p.setColor(role, QColor(color))
    _disabled(p, "#636e7b")
    return p


def _disabled(p: QPalette, color: str) -> None:
    for role in (QPalette.ColorRole.WindowText, QPalette.ColorRole.Text,
                 QPalette.ColorRole.ButtonText):
        p.setColor(QPalette.ColorGroup.Disabled, role, QColor(color))


def palette_for(theme: str, system: QPalette) -> QPalette:
    if theme == "light":
        return light_palette()
    if theme == "dark":
        return dark_palette()
    # "system": follow the platform's light/dark choice with our tuned palettes.
    return dark_palette() if is_dark(system) else light_palette()


def install_theme(theme: str) -> str:
    """Give the application ``theme``'s palette and the stylesheet; returns the theme used
    (an unknown name follows the system)."""
    if theme not in THEMES:
        theme = "system"
    app = QApplication.instance()
    if isinstance(app, QApplication):
        system = app.style().standardPalette()
        if theme == "system" and QGuiApplication.styleHints().colorScheme() == \
                Qt.ColorScheme.Dark:
            pal = dark_palette()
        else:
            pal = palette_for(theme, system)
        app.setPalette(pal)
        app.setStyleSheet(stylesheet())
    return theme


def theme_menu(menu: QMenu, apply: Callable[[str], None]) -> dict[str, QAction]:
    """View ▸ Theme: one checkable entry per theme, exclusive."""
    group = QActionGroup(menu)
    actions: dict[str, QAction] = {}
    for key in THEMES:
        act = menu.addAction(key.capitalize() if key != "system" else "Follow system")
        act.setCheckable(True)
        act.triggered.connect(lambda _c=False, k=key: apply(k))
        group.addAction(act)
        actions[key] = act
    return actions
