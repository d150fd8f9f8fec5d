"""Light and dark palettes, the passage colours and the heat-map colour ramp.

Passage colours are a qualitative palette (Tableau 10) so neighbouring citations stay
distinguishable; token backgrounds are tints of them mixed into the base colour, which keeps
text readable on both themes. The heat map uses a sequential ramp whose high end is the
colour furthest from the base, so "more probable" reads as "more ink" on either theme.

Fusion draws the parts of a control that are nothing but an outline (a check box's box, a
radio button's ring, a dock's float and close glyphs) in shades of the window colour, about
1.1:1 against it in the dark theme; :class:`ThemeStyle` draws them in :func:`control_edge`,
at least 3:1 (WCAG's non-text contrast) in both themes.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QColor,
    QGuiApplication,
    QIcon,
    QPainter,
    QPalette,
    QPen,
    QPixmap,
)
from PySide6.QtWidgets import QApplication, QMenu, QProxyStyle, QStyle, QStyleOption, QWidget

from ragdesk.ui.resources import stylesheet

# Citation [n] has one colour everywhere: the chat, the heat map and the explore views
# (explore/palette.py) all take it from passage_color.
PASSAGE_COLORS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
)

THEMES = ("system", "light", "dark")
# What each theme is called wherever it is offered (Settings, View ▸ Theme).
THEME_NAMES = {"system": "Follow system", "light": "Light", "dark": "Dark"}

# Light, dark: 4.1:1 and 3.9:1 against their window colour, more against their base.
_CONTROL_EDGE = {False: "#6e7781", True: "#768390"}


def theme_name(key: str) -> str:
    return THEME_NAMES.get(key, key.capitalize())


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


def control_edge(palette: QPalette | None = None) -> QColor:
    """The colour of a control that is only its outline, for this palette's theme."""
    return QColor(_CONTROL_EDGE[is_dark(palette)])


def luminance(c: QColor) -> float:
    """WCAG 2 relative luminance of an opaque colour."""
    def channel(v: float) -> float:
        return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4

    return (0.2126 * channel(c.redF()) + 0.7152 * channel(c.greenF())
            + 0.0722 * channel(c.blueF()))


def contrast_ratio(a: QColor, b: QColor) -> float:
    """WCAG 2 contrast ratio, 1 (same) to 21 (black on white)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


_DARK_TEXT, _LIGHT_TEXT = QColor("#111111"), QColor("#f5f5f5")


def readable_text_on(bg: QColor) -> QColor:
    """Near-black or near-white text, whichever contrasts more with ``bg``."""
    if contrast_ratio(_DARK_TEXT, bg) >= contrast_ratio(_LIGHT_TEXT, bg):
        return QColor(_DARK_TEXT)
    return QColor(_LIGHT_TEXT)


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


_P = QStyle.PrimitiveElement
_SP = QStyle.StandardPixmap
_TITLE_GLYPHS = {_SP.SP_TitleBarCloseButton: "close", _SP.SP_DockWidgetCloseButton: "close",
                 _SP.SP_TitleBarNormalButton: "float"}
_glyph_icons: dict[tuple[str, str], QIcon] = {}


class ThemeStyle(QProxyStyle):
    """Fusion, with outline-only parts drawn in :func:`control_edge`."""

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption,
                      painter: QPainter, widget: QWidget | None = None) -> None:
        super().drawPrimitive(element, option, painter, widget)
        state = option.state
        focused = bool(state & QStyle.StateFlag.State_HasFocus) and bool(
            state & QStyle.StateFlag.State_KeyboardFocusChange)
        # Fusion's own outline stays where it means something else: the keyboard focus
        # (highlighted) and a disabled control (exempt, and meant to look faint).
        if element not in (_P.PE_IndicatorCheckBox, _P.PE_IndicatorRadioButton) or focused \
                or not state & QStyle.StateFlag.State_Enabled:
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.setPen(QPen(control_edge(option.palette), 1))
        r = QRectF(option.rect)
        if element == _P.PE_IndicatorCheckBox:
            painter.drawRect(r.adjusted(0.5, 0.5, -0.5, -0.5))  # Fusion's box, on pixels
        else:
            radius = (r.width() + (int(r.width()) + 1) % 2) / 2.0 - 1  # Fusion's ring
            painter.drawEllipse(r.center() + QPointF(0.5, 0.5), radius, radius)
        painter.restore()

    def standardIcon(self, standardIcon: QStyle.StandardPixmap,
                     option: QStyleOption | None = None,
                     widget: QWidget | None = None) -> QIcon:
        glyph = _TITLE_GLYPHS.get(standardIcon)
        if glyph is None:
            return super().standardIcon(standardIcon, option, widget)
        pal = option.palette if option is not None else (
            widget.palette() if widget is not None else QApplication.palette())
        return glyph_icon(glyph, control_edge(pal))


def glyph_icon(glyph: str, color: QColor) -> QIcon:
    """A dock title button's glyph ("close" or "float") in ``color``, solid: the base
    style's are translucent, which takes their contrast down with them."""
    key = (glyph, color.name())
    cached = _glyph_icons.get(key)
    if cached is not None:
        return cached
    result = QIcon()
    for size in (10, 12, 14, 16, 20, 24, 32):
        pixmap = QPixmap(size, size)
        pixmap.fill(Qt.GlobalColor.transparent)
        p = QPainter(pixmap)
        # Not antialiased: a thin diagonal spread over two pixels is half as dark.
        p.setPen(QPen(color, 1 if size < 18 else 2))
        m = int(size * 0.15)
        far = size - 1 - m
        if glyph == "close":
            p.drawLine(m, m, far, far)
            p.drawLine(far, m, m, far)
        else:  # two windows, the front one lower left
            d = round(size * 0.2)
            p.drawRect(m, m + d, far - m - d, far - m - d)
            p.drawPolyline([QPointF(m + d, m + d), QPointF(m + d, m), QPointF(far, m),
                            QPointF(far, far - d), QPointF(far - d, far - d)])
        p.end()
        result.addPixmap(pixmap)
    _glyph_icons[key] = result
    return result


def install_theme(theme: str) -> str:
    """Give the application ``theme``'s palette and the stylesheet; returns the theme used
    (an unknown name follows the system)."""
    if theme not in THEMES:
        theme = "system"
    app = QApplication.instance()
    if isinstance(app, QApplication):
        if not app.property("ragdeskThemeStyle"):
            # Once: a new style repolishes every widget. The palette is set after it.
            app.setStyle(ThemeStyle("Fusion"))
            app.setProperty("ragdeskThemeStyle", True)
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
    """View ▸ Theme: one checkable entry per theme, exclusive, each with its first letter
    as its mnemonic."""
    group = QActionGroup(menu)
    actions: dict[str, QAction] = {}
    for key in THEMES:
        act = menu.addAction("&" + theme_name(key))
        act.setCheckable(True)
        act.triggered.connect(lambda _c=False, k=key: apply(k))
        group.addAction(act)
        actions[key] = act
    return actions
