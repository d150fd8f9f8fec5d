"""A citation chip: one retrieved passage under an answer, which opens it in the
inspector (and a folder snapshot's file at the passage's page)."""

from __future__ import annotations

import html

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from ragdesk.core.types import RetrievedDoc
from ragdesk.core.units import percent, prior_text
from ragdesk.ui.elided import ElidedButton
from ragdesk.ui.infos import CitationPlace
from ragdesk.ui.places import open_place
from ragdesk.ui.texts import elide
from ragdesk.ui.theme import passage_color


def prior_tip(prob: float) -> str:
    """What a chip's "retrieval 95%" is, for its tooltip."""
    return (f"Retrieval probability p(z|x) = {percent(prob, 1)}: the retriever's share of "
            "belief in this passage among the passages read, not the answer's confidence")


class CitationChip(ElidedButton):
    """``[n] Title  retrieval 95%`` — opens the passage in the inspector. In a narrow pane
    the title shortens with "…"; the rank and the probability stay."""

    def __init__(self, k: int, doc: RetrievedDoc, parent: QWidget | None = None) -> None:
        super().__init__(elide(doc.title, 60), parent, prefix=f"[{k + 1}]  ",
                         suffix=f"   {prior_text(doc.prob)}")
        self.k = k
        self.doc = doc
        self.setObjectName("CitationChip")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.setToolTip(
            f"<b>[{k + 1}] {html.escape(doc.title)}</b><br/>{prior_tip(doc.prob)}"
            f"<br/>score {doc.score:.2f}"
            + (f" &nbsp;·&nbsp; {html.escape(doc.snapshot)}" if doc.snapshot else "")
            + f"<br/><br/>{html.escape(elide(doc.text, 240))}")
        c = passage_color(k).name()
        self.setStyleSheet(f"QPushButton#CitationChip {{ border-left: 4px solid {c}; }}")
        self.place: CitationPlace | None = None

    def set_place(self, place: CitationPlace) -> None:
        """Name the page or heading of a folder snapshot's passage beside its title, and
        offer to open the file there (the context menu)."""
        self.place = place
        doc = self.doc
        where = f" · {elide(place.short, 28)}" if place.short else ""
        self.set_parts(f"[{self.k + 1}]  ", elide(doc.title, 60),
                       f"{where}   {prior_text(doc.prob)}")
        self.setToolTip(self.toolTip().replace(
            "<br/><br/>", f"<br/>{html.escape(place.label)}<br/><br/>", 1))
        if place.uri:
            act = QAction(f"Open {place.file_name}" + (
                f" at page {place.page}" if place.page is not None else ""), self)
            act.triggered.connect(lambda: open_place(place))
            self.addAction(act)
            self.setContextMenuPolicy(Qt.ContextMenuPolicy.ActionsContextMenu)
