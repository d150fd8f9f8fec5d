"""Plain text: paragraphs are separated by blank lines; the title is the file name."""

from __future__ import annotations

import re
from pathlib import Path

from ragdesk.core.documents.model import Block, ParsedDocument

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


def decode_text(raw: bytes) -> str:
    """UTF-8 (with or without BOM), UTF-16 by its BOM, else Windows-1252: a text file on a
    desktop is one of those, and a wrong guess costs a few odd characters, not the file."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return raw.decode("utf-16", errors="replace")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("cp1252", errors="replace")


def paragraphs(text: str) -> list[str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return [" ".join(p.split()) for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


def parse_text(path: Path) -> ParsedDocument:
    text = decode_text(path.read_bytes())
    return ParsedDocument(path.name, [Block(p) for p in paragraphs(text)])
