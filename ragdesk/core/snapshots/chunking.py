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
# A "word" longer than this is cut into pieces of this length: text with no white space (a
# sparse file's NULs, a base64 blob, a decompression bomb's "aaaa...") would otherwise be one
# word and one passage of any size, stored and tokenized whole.
MAX_WORD_CHARS = 100
# A passage given already split (DPR's TSV, a JSONL row) longer than this is split into
# blocks as an article is: encoders read a few hundred tokens of it anyway.
MAX_PASSAGE_CHARS = 20_000


@dataclass(frozen=True)
class PassageRow:
    title: str
    text: str
    source_id: str | None


def text_words(text: str) -> list[str]:
    """The white-space separated words of ``text``, each longer than
    :data:`MAX_WORD_CHARS` cut into pieces of that length."""
    out: list[str] = []
    for w in text.split():
        if len(w) <= MAX_WORD_CHARS:
            out.append(w)
        else:
            out.extend(w[i:i + MAX_WORD_CHARS] for i in range(0, len(w), MAX_WORD_CHARS))
    return out


def split_words(text: str, words: int = PASSAGE_WORDS) -> list[str]:
    """Disjoint blocks of ``words`` words (:func:`text_words`); none for empty text."""
    tokens = text_words(text)
    return [" ".join(tokens[i:i + words]) for i in range(0, len(tokens), words)]


def passages(documents: Iterable[Document], words: int = PASSAGE_WORDS) -> Iterator[PassageRow]:
    """Split articles into passages; pre-split sources (DPR TSV) pass through unchanged."""
    for doc in documents:
        if doc.presplit and len(doc.text) <= MAX_PASSAGE_CHARS:
            if doc.text.strip():
                yield PassageRow(doc.title, doc.text, doc.source_id)
            continue
        for block in split_words(doc.text, words):
            yield PassageRow(doc.title, block, doc.source_id)
