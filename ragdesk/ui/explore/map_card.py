"""What the retrieval map knows of the answer card it stands beside: the card's passages, and
the words the map says when its own passages are not those, or its snapshot is gone."""

from __future__ import annotations

from dataclasses import dataclass, field

from ragdesk.core import projection as projmod
from ragdesk.core.projection import MapData, MapPoint, Projection, VectorSnapshot
from ragdesk.core.retriever_names import RETRIEVER_TITLES, retriever_in_sentence
from ragdesk.core.types import RetrievedDoc


@dataclass(frozen=True)
class MapReady:
    """A map drawn in the worker, for the GUI thread to show."""

    snapshot: VectorSnapshot
    data: MapData
    # The answer's passages when the map's dense top K at the question are not them, each
    # placed in the plane with its rank on the card; None: the map's passages are the card's.
    card_marks: list[tuple[MapPoint, int]] | None = None


@dataclass
class CardPassages:
    """What the map is told about the answer it shows."""

    docs: list[RetrievedDoc] = field(default_factory=list)
    retriever: str | None = None


def differs_text(retriever: str | None, k: int) -> str:
    """What the map says when its passages are not the answer card's."""
    other = retriever if retriever in RETRIEVER_TITLES and retriever != "dense" else None
    how = (f"This answer's passages came from {retriever_in_sentence(other)} retrieval"
           if other else "This answer read other passages")
    last = f"–d{k}" if k > 1 else ""
    card = f"The card's [1]–[{k}] are the squares" if k > 1 else "The card's [1] is the square"
    return (f"{how}; the map searches by dense vectors, so its passages (d1{last}) are not "
            f"the card's. {card}.")


def removed_text(name: str) -> str:
    return (f"The snapshot {name} has been removed: the map shows what it held, and Ask "
            "from here is off.")


def place_card_passages(snap: VectorSnapshot, proj: Projection, docs: list[RetrievedDoc]
                        ) -> list[tuple[MapPoint, int]]:
    """The card's passages in the plane, each with its rank on the card (those the snapshot
    does not hold are left out)."""
    held = [(rank, d) for rank, d in enumerate(docs) if 0 <= d.id < int(snap.size)]
    xy = proj.project(projmod.passage_vectors(snap, [d.id for _, d in held]))
    return [(MapPoint(id=d.id, title=d.title, xy=(float(a), float(b)), score=d.score,
                      text=d.text), rank) for (rank, d), (a, b) in zip(held, xy, strict=True)]
