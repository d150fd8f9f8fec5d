"""Icons and the stylesheet, found next to the package or in the source checkout.

Icons are monochrome SVGs drawn with ``currentColor``; they are tinted with the palette's
text colour at load time so the same files work in light and dark themes.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from PySide6.QtCore import QByteArray, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QIcon, QImage, QPainter, QPalette, QPixmap
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QApplication

_PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def resources_dir() -> Path:
    """``ragdesk/resources``: the same place in a checkout, a wheel and the PyInstaller bundle."""
    return _PACKAGE_ROOT / "resources"


def stylesheet() -> str:
    path = resources_dir() / "ragdesk.qss"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""  # the app is usable unstyled; a missing file is not worth an error


@cache
def _svg_text(name: str) -> str | None:
    try:
        return (resources_dir() / "icons" / f"{name}.svg").read_text(encoding="utf-8")
    except OSError:
        return None


def _render(svg: str, size: int, ratio: float) -> QPixmap:
    renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
    px = max(1, round(size * ratio))
    image = QImage(px, px, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(Qt.GlobalColor.transparent)
    painter = QPainter(image)
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    renderer.render(painter, QRectF(0, 0, px, px))
    painter.end()
    pixmap = QPixmap.fromImage(image)
    pixmap.setDevicePixelRatio(ratio)
    return pixmap


_icon_cache: dict[tuple[str, str, str], QIcon] = {}


def icon(name: str, color: QColor | None = None) -> QIcon:
    """A themed icon; an empty QIcon when the file is missing (never an error)."""
    svg = _svg_text(name)
    if svg is None:
        return QIcon()
    app = QApplication.instance()
    palette = app.palette() if isinstance(app, QApplication) else QPalette()
    normal = color if color is not None else palette.color(QPalette.ColorRole.WindowText)
    disabled = palette.color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText)
    key = (name, normal.name(), disabled.name())
    cached = _icon_cache.get(key)
    if cached is not None:
        return cached
    ratio = 2.0  # render at 2x so the icon stays sharp on HiDPI screens
    result = QIcon()
    for size in (16, 20, 24, 32):
        result.addPixmap(_render(svg.replace("currentColor", normal.name()), size, ratio),
                         QIcon.Mode.Normal)
        result.addPixmap(_render(svg.replace("currentColor", disabled.name()), size, ratio),
                         QIcon.Mode.Disabled)
    _icon_cache[key] = result
    return result


def app_icon() -> QIcon:
    svg = _svg_text("ragdesk")
    if svg is None:
        return QIcon()
    result = QIcon()
    for size in (16, 24, 32, 48, 64, 128, 256):
        result.addPixmap(_render(svg, size, 1.0))
    return result


def icon_size() -> QSize:
    return QSize(18, 18)
