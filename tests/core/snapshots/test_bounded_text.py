"""Text with no white space, passages given far too long, and a wiki page that expands
without end: each becomes passages of bounded size, or is refused, never held whole."""

from __future__ import annotations

import bz2
import io
from pathlib import Path

import pytest

import ragdesk.core.snapshots.wikixml as wikixml
from ragdesk.core.documents.model import Block, ParsedDocument
from ragdesk.core.documents.splitting import split_document
from ragdesk.core.errors import BadInputError
from ragdesk.core.snapshots.chunking import (
    MAX_PASSAGE_CHARS,
    MAX_WORD_CHARS,
    PASSAGE_WORDS,
    passages,
    split_words,
)
from ragdesk.core.snapshots.sources import Document

LONGEST = PASSAGE_WORDS * (MAX_WORD_CHARS + 1)  # 100 words of the longest kind


def test_a_run_without_white_space_is_cut_into_words_and_passages() -> None:
    blob = "x" * 1_000_003
    blocks = split_words(f"before {blob} after")
    assert "".join("".join(b.split()) for b in blocks) == "before" + blob + "after"
    assert max(len(w) for b in blocks for w in b.split()) == MAX_WORD_CHARS
    assert max(len(b) for b in blocks) <= LONGEST
    assert split_words("plain words stay as they are") == ["plain words stay as they are"]


def test_a_passage_given_far_too_long_is_split_as_an_article_is() -> None:
    fine = Document("t", "a ready passage", "1", presplit=True)
    huge = Document("t", "word " * (MAX_PASSAGE_CHARS // 2), "2", presplit=True)
    rows = list(passages([fine, huge]))
    assert rows[0].text == "a ready passage"
    assert len(rows) == 1 + -(-(MAX_PASSAGE_CHARS // 2) // PASSAGE_WORDS)
    assert all(r.source_id == "2" and len(r.text) <= LONGEST for r in rows[1:])


def test_a_document_without_white_space_becomes_bounded_passages() -> None:
    doc = ParsedDocument("zeros", [Block("\0" * 500_000)])
    out = split_document(doc, "zeros.txt")
    assert sum(len(p.text.replace(" ", "")) for p in out) == 500_000
    assert max(len(p.text) for p in out) <= LONGEST


def _dump(text_bytes: int) -> bytes:
    head = (b'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"><page>'
            b"<title>Big</title><ns>0</ns><id>1</id><revision><text>")
    return head + b"a" * text_bytes + b"</text></revision></page></mediawiki>"


def test_a_page_that_expands_past_the_bound_is_refused_while_it_is_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wikixml, "MAX_PAGE_BYTES", 1 << 20)
    small = list(wikixml.iter_articles(io.BytesIO(_dump(1000)), Path("d.xml"), False))
    assert small and small[0][0] == "Big"
    packed = bz2.compress(_dump(8 << 20))  # 8 MB of one page from a few hundred bytes
    assert len(packed) < 2000
    stream = bz2.BZ2File(io.BytesIO(packed))
    read: list[int] = []
    real = stream.read

    def counted(n: int = -1) -> bytes:
        data = real(n)
        read.append(len(data))
        return data

    monkeypatch.setattr(stream, "read", counted)
    with pytest.raises(BadInputError, match="has a page longer than"):
        list(wikixml.iter_articles(stream, Path("bomb.xml.bz2"), True))
    assert sum(read) <= (1 << 20) + (1 << 17)  # refused once the bound was passed
