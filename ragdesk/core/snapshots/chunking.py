"""Articles to passages: non-overlapping blocks of 100 words, as DPR built its Wikipedia.

DPR (Karpukhin et al. 2020, section 4.1) split each article into disjoint 100-word text
blocks; the title is kept beside each block, not repeated inside it. The last block of an
article may be shorter.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ragdesk.core.snapshots.sources import Document

PASSAGE_WORDS = 100


@dataclass(frozen=True)
class PassageRow:
    title: str
    text: str
    source_id: str | None


def split_words(text: str, words: int = PASSAGE_WORDS) -> list[str]:
    """Disjoint blocks of ``words`` white-space separated words; none for empty text."""
    tokens = text.split()
    return [" ".join(tokens[i:i + words]) for i in range(0, len(tokens), words)]


def passages(documents: Iterable[Document], words: int = PASSAGE_WORDS) -> Iterator[PassageRow]:
    """Split articles into passages; pre-split sources (DPR TSV) pass through unchanged."""
    for doc in documents:
        if doc.presplit:
            if doc.text.strip():
                yield PassageRow(doc.title, doc.text, doc.source_id)
            continue
        for block in split_words(doc.text, words):
            yield PassageRow(doc.title, block, doc.source_id)
