"""Fixtures of the explore-view tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtWidgets import QApplication


@pytest.fixture()
def no_app_style_sheet(qapp: QApplication) -> Iterator[None]:
    """A style sheet left by a main window of an earlier test would override the palette a
    test sets on its widgets."""
    sheet = qapp.styleSheet()
    qapp.setStyleSheet("")
    yield
    qapp.setStyleSheet(sheet)
