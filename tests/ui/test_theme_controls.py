"""The themes' outline-only controls reach WCAG's 3:1 non-text contrast against what they sit
on, measured on the pixels drawn; the theme choices have one name and a mnemonic each."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QDockWidget,
    QLabel,
    QMainWindow,
    QStyle,
    QStyleOptionButton,
    QWidget,
)

from ragdesk.ui.theme import contrast_ratio, install_theme

NON_TEXT = 3.0


def _contrasting(image: QImage, rect: QRect, background: QColor) -> int:
    """How many pixels of ``rect`` stand out from ``background`` by at least 3:1."""
    return sum(contrast_ratio(image.pixelColor(x, y), background) >= NON_TEXT
               for x in range(rect.left(), rect.right() + 1)
               for y in range(rect.top(), rect.bottom() + 1))


@pytest.fixture()
def themed(qapp: QApplication) -> Iterator[None]:
    """The application's palette and stylesheet as they were before, after the test (the
    theme's proxy style stays: the app installs it once, at its start, too)."""
    palette, sheet = qapp.palette(), qapp.styleSheet()
    yield
    qapp.setPalette(palette)
    qapp.setStyleSheet(sheet)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_an_unchecked_box_and_a_docks_buttons_stand_out(qtbot: Any, themed: None,
                                                        theme: str) -> None:
    install_theme(theme)
    window = QMainWindow()
    qtbot.addWidget(window)
    window.setCentralWidget(QLabel("answers"))
    dock = QDockWidget("Retrieval map", window)
    box = QCheckBox("Sub-word pieces")
    dock.setWidget(box)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
    window.resize(500, 300)
    window.show()
    qtbot.waitExposed(window)
    image = window.grab().toImage()
    background = window.palette().color(QPalette.ColorRole.Window)

    opt = QStyleOptionButton()
    opt.initFrom(box)
    indicator = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, opt, box)
    indicator.translate(box.mapTo(window, indicator.topLeft()) - indicator.topLeft())
    assert not box.isChecked() and indicator.width() >= 10
    # its outline: four sides of the box, nearly all of their pixels
    outline = 2 * (indicator.width() + indicator.height()) - 4
    assert _contrasting(image, indicator, background) >= 0.8 * outline

    for name in ("qt_dockwidget_floatbutton", "qt_dockwidget_closebutton"):
        button = dock.findChild(QWidget, name)
        assert button is not None and button.isVisible()
        rect = QRect(button.mapTo(window, button.rect().topLeft()), button.size())
        assert _contrasting(image, rect, background) >= 14, name  # a glyph, not a speck


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_control_edge_colour_has_3_to_1_on_window_and_base(qapp: QApplication,
                                                               themed: None,
                                                               theme: str) -> None:
    from ragdesk.ui.theme import control_edge

    install_theme(theme)
    pal = QApplication.palette()
    for role in (QPalette.ColorRole.Window, QPalette.ColorRole.Base,
                 QPalette.ColorRole.AlternateBase):
        assert contrast_ratio(control_edge(pal), pal.color(role)) >= NON_TEXT, role


def test_the_theme_choices_are_named_alike_with_mnemonics(qtbot: Any, window: Any) -> None:
    w = window
    in_menu = {k: a.text() for k, a in w.theme_actions.items()}
    assert in_menu == {"system": "&Follow system", "light": "&Light", "dark": "&Dark"}
    dialog = w.open_settings()
    offered = {dialog.theme.itemData(i): dialog.theme.itemText(i)
               for i in range(dialog.theme.count())}
    assert offered == {k: t.replace("&", "") for k, t in in_menu.items()}
    dialog.reject()
