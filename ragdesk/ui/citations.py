"""Where a cited passage of a folder snapshot sits in its file ("report.pdf · p. 2"), shown
on the answer's citation chips and in the inspector (which open the file there with
:func:`ragdesk.ui.places.open_place`).

The places are read once per finished answer on the reads lane (a few rows of the
snapshot's passage table), never on the GUI thread; answers from other snapshots get none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from ragdesk.core.types import Answer, RetrievedDoc
from ragdesk.ui.infos import CitationPlace
from ragdesk.ui.ops import Op, OpRunner
from ragdesk.ui.reports import ErrorReport

if TYPE_CHECKING:
    from ragdesk.ui.chat.card import AnswerCard
    from ragdesk.ui.inspector import PassageInspector

log = logging.getLogger(__name__)

PlaceLookup = Callable[[Sequence[RetrievedDoc]], dict[int, CitationPlace]]


class CitationPlaces(QObject):
    """Looks up the places of each finished answer's citations and hands them to its card;
    :meth:`places` answers the inspector."""

    placesFound = Signal(object)  # Answer whose places arrived

    def __init__(self, ops: OpRunner, lookup: PlaceLookup,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.ops = ops
        self.lookup = lookup
        # Keyed by id(answer); the answer is kept with its places so the id is not reused.
        self._found: dict[int, tuple[Answer, dict[int, CitationPlace]]] = {}

    def watch(self, card: AnswerCard) -> None:
        """Look up ``card``'s places when it is answered (now, for a reopened answer)."""
        card.answered.connect(lambda _a, c=card: self._look_up(c))
        if card.answer is not None:
            self._look_up(card)

    def places(self, answer: Answer | None) -> dict[int, CitationPlace]:
        entry = self._found.get(id(answer)) if answer is not None else None
        return entry[1] if entry is not None and entry[0] is answer else {}

    def _look_up(self, card: AnswerCard) -> None:
        answer = card.answer
        if answer is None or not answer.docs:
            return
        docs = list(answer.docs)

        def found(places: dict[int, CitationPlace]) -> None:
            if not places:
                return
            key = id(answer)
            self._found[key] = (answer, places)
            card.destroyed.connect(lambda _o=None: self._found.pop(key, None))
            card.set_places(places)
            self.placesFound.emit(answer)

        def failed(report: ErrorReport) -> None:
            # Only a decoration is missing; the answer and its passages are all there.
            log.info("citation places unavailable: %s", report.message)

        # Parented to the card: a card deleted meanwhile is not touched.
        Op(lambda _c: self.lookup(docs), parent=card, title="Citation places").success(
            found).failure(failed).run(self.ops)


def install_citations(ops: OpRunner, lookup: PlaceLookup, inspector: PassageInspector,
                      parent: QObject) -> CitationPlaces:
    """The window's citation places: ``inspector`` shows the selected passage's, and every
    card (asked, compared or reopened) is to be watched through :meth:`CitationPlaces.watch`
    (the window's ``wire_card``)."""
    places = CitationPlaces(ops, lookup, parent)
    inspector.set_place_source(places.places)
    places.placesFound.connect(inspector.places_changed)
    return places
