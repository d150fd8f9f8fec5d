"""Documents to passages of about 100 words that follow the document's structure.

DPR's passages are disjoint 100-word blocks; for a user's documents the block boundaries also
decide what a citation points at, so a passage never spans two PDF pages or two sections:
paragraphs are packed greedily up to the word budget within a section, a paragraph longer than
the budget is cut into budget-sized pieces, and short pieces (under a quarter of the budget: a
heading, a section's tail) join their neighbour in the same section rather than stand alone.
"""

from __future__ import annotations

from collections.abc import Iterator

from ragdesk.core.documents.model import Block, DocPassage, Location, ParsedDocument
from ragdesk.core.snapshots.chunking import text_words

PASSAGE_WORDS = 100


def _sections(blocks: list[Block]) -> Iterator[list[Block]]:
    """Runs of blocks on one page under one heading; a heading starts a new run, except
    right after another heading (a title and its first section heading are one run)."""
    run: list[Block] = []
    for block in blocks:
        only_headings = all(b.is_heading for b in run)
        if run and (block.page != run[-1].page
                    or (block.is_heading and not only_headings)
                    or (not block.is_heading and block.heading != run[-1].heading)):
            yield run
            run = []
        run.append(block)
    if run:
        yield run


def _pack(words_per_block: list[list[str]], budget: int) -> list[list[str]]:
    chunks: list[list[str]] = []
    current: list[str] = []
    for words in words_per_block:
        # A short start (a heading, a one-line paragraph) is filled up from the next
        # paragraph rather than left as a passage of its own.
        if len(current) >= budget // 4 and len(current) + len(words) > budget:
            chunks.append(current)
            current = []
        while len(words) > budget:
            room = budget - len(current)
            current.extend(words[:room])
            chunks.append(current)
            current, words = [], words[room:]
        current.extend(words)
    if current:
        if chunks and len(current) < budget // 4:
            chunks[-1].extend(current)
        else:
            chunks.append(current)
    return chunks


def split_document(doc: ParsedDocument, path: str,
                   words: int = PASSAGE_WORDS) -> list[DocPassage]:
    """Passages of ``doc`` (read from ``path``, relative to the imported folder)."""
    out: list[DocPassage] = []
    for section in _sections(doc.blocks):
        last = section[-1]  # after a run of headings, the nearest one
        where = Location(path, section[0].page, last.heading, last.anchor)
        for chunk in _pack([text_words(b.text) for b in section], words):
            out.append(DocPassage(doc.title, " ".join(chunk), where))
    return out
