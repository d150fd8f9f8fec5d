"""HTML with the standard library's tolerant html.parser: <title> (else the first <h1>) is the
title, h1-h6 are headings, block elements end paragraphs, scripts and styles are skipped."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from ragdesk.core.documents.model import Block, ParsedDocument
from ragdesk.core.documents.parse_text import decode_text

_HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
# Not "head": its end tag is optional in HTML, and a page that leaves it out would lose its
# body; what a head holds besides <title> (meta, link, script, style) has no text to keep.
_SKIP = {"script", "style", "noscript", "template", "svg"}
_BLOCKS = _HEADINGS | {
    "p", "div", "li", "ul", "ol", "br", "tr", "td", "th", "table", "pre", "blockquote",
    "section", "article", "header", "footer", "nav", "aside", "main", "dd", "dt", "dl",
    "figcaption", "hr", "form", "body",
}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.title = ""
        self.h1: str | None = None
        self._buf: list[str] = []
        self._skip = 0
        self._in_title = False
        self._heading_tag: str | None = None
        self._heading: str | None = None
        self._anchor: str | None = None
        self._pending_anchor: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        elif tag in _SKIP:
            self._skip += 1
        elif tag in _BLOCKS:
            self._flush()
            if tag in _HEADINGS:
                self._heading_tag = tag
                self._pending_anchor = dict(attrs).get("id") or None

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        elif tag in _SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCKS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data
        elif not self._skip:
            self._buf.append(data)

    def _flush(self) -> None:
        text = " ".join("".join(self._buf).split())
        self._buf = []
        if self._heading_tag is not None:
            tag, self._heading_tag = self._heading_tag, None
            if text:
                self._heading, self._anchor = text, self._pending_anchor
                if tag == "h1" and self.h1 is None:
                    self.h1 = text
                self.blocks.append(Block(text, heading=text, anchor=self._anchor,
                                         is_heading=True))
            return
        if text:
            self.blocks.append(Block(text, heading=self._heading, anchor=self._anchor))


def parse_html(path: Path) -> ParsedDocument:
    collector = _Collector()
    collector.feed(decode_text(path.read_bytes()))
    collector.close()
    collector._flush()
    title = " ".join(collector.title.split()) or collector.h1 or path.name
    return ParsedDocument(title, collector.blocks)
