"""Opening a cited passage's file where the passage sits (``file:…/report.pdf#page=2``,
which PDF viewers and browsers honour): the citation chips and the inspector both offer it.
Kept apart from :mod:`ragdesk.ui.citations`, which looks the places up and feeds the cards
and the inspector, so these widgets need not import that."""

from __future__ import annotations

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices

from ragdesk.ui.infos import CitationPlace


def open_place(place: CitationPlace) -> bool:
    """Open the cited file at its page or heading with the desktop's viewer."""
    if not place.uri:
        return False
    # Looked up on the class at call time, so tests can stand in for the desktop.
    return bool(QDesktopServices.openUrl(QUrl(place.uri)))
