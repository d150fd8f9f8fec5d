"""Markdown with markdown-it-py (MIT, CommonMark): headings, paragraphs, list items, code
and table cells as blocks; the title is the first level-1 heading."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.core.documents.model import Block, ParsedDocument
from ragdesk.core.documents.parse_text import decode_text

if TYPE_CHECKING:
    from markdown_it.token import Token

# Tokens whose close ends a block of text (a paragraph, a list item's paragraph, a cell).
_INLINE_PARENTS = {"paragraph_open", "heading_open", "th_open", "td_open"}
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n---[ \t]*(?:\n|\Z)", re.DOTALL)


def parse_markdown(path: Path) -> ParsedDocument:
    from markdown_it import MarkdownIt

    source = _strip_front_matter(decode_text(path.read_bytes()))
    tokens = MarkdownIt("commonmark").enable("table").parse(source)
    blocks: list[Block] = []
    heading: str | None = None
    title: str | None = None
    parent = level = ""
    for tok in tokens:
        if tok.type.endswith("_open"):
            parent = tok.type if tok.type in _INLINE_PARENTS else parent
            level = tok.tag if tok.type == "heading_open" else ""
        if tok.type == "inline":
            text = " ".join(_inline_text(tok).split())
            if not text:
                continue
            if parent == "heading_open":
                heading = text
                if title is None and level == "h1":
                    title = text
                blocks.append(Block(text, heading=heading, is_heading=True))
            else:
                blocks.append(Block(text, heading=heading))
        elif tok.type in ("fence", "code_block"):
            code = " ".join(tok.content.split())
            if code:
                blocks.append(Block(code, heading=heading))
    return ParsedDocument(title or path.name, blocks)


def _inline_text(tok: Token) -> str:
    parts: list[str] = []
    for child in tok.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)  # the alt text
    return "".join(parts)


def _strip_front_matter(text: str) -> str:
    """YAML front matter (--- ... ---) is metadata, not prose."""
    return _FRONT_MATTER.sub("", text, count=1)
