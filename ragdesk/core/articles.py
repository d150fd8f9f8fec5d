"""What a whole article is, as a value: the cited passage among its neighbours.

Kept apart from :mod:`ragdesk.core.snapshots.articles` (which reads snapshots, and so loads
numpy) so that the GUI can show and type articles without reaching into the snapshots: a
front end gets an :class:`Article` from its backend, or makes one with
:func:`stored_article` from a passage an answer stored.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragdesk.core.types import RetrievedDoc


@dataclass(frozen=True)
class ArticlePassage:
    id: int
    text: str


@dataclass(frozen=True)
class Article:
    """The passages of one article around a cited passage, in reading order."""

    title: str
    passages: tuple[ArticlePassage, ...]
    cited_id: int
    more_before: bool  # the article goes on before the first passage here
    more_after: bool  # ... and after the last one
    link: str | None  # the article's address (https: or file:) when the snapshot knows it
    source_id: str | None  # the source's own id of the article (page id, JSONL id, ...)
    stored_only: bool = False  # only the cited passage, as stored with an answer

    @property
    def cited_index(self) -> int:
        return next(i for i, p in enumerate(self.passages) if p.id == self.cited_id)


def stored_article(doc: RetrievedDoc) -> Article:
    """The cited passage alone, as an answer stored it: what can be shown once its snapshot
    is gone."""
    return Article(title=doc.title, passages=(ArticlePassage(doc.id, doc.text),),
                   cited_id=doc.id, more_before=False, more_after=False, link=None,
                   source_id=None, stored_only=True)
