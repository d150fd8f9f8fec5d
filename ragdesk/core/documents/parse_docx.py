"""DOCX with python-docx (MIT): paragraphs and tables in body order, headings from the
paragraph styles (Word has no pages until it lays the text out, so DOCX keeps headings)."""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ragdesk.core.documents.model import Block, DocumentError, ParsedDocument


def parse_docx(path: Path) -> ParsedDocument:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        document = docx.Document(str(path))
        props_title = (document.core_properties.title or "").strip()
        blocks, styled_title = _blocks(document)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise DocumentError(f"is not a readable DOCX file ({type(exc).__name__}: {exc})") \
            from exc
    except Exception as exc:  # lxml raises its own syntax errors for a damaged part
        if type(exc).__module__.startswith("lxml"):
            raise DocumentError(f"is not a readable DOCX file ({exc})") from exc
        raise
    return ParsedDocument(props_title or styled_title or path.name, blocks)


def _blocks(document: Any) -> tuple[list[Block], str | None]:
    blocks: list[Block] = []
    heading: str | None = None
    title: str | None = None
    for text, style in _runs(document):
        if style == "Title" and title is None:
            title = text
        level = _heading_level(style)
        if level is not None or style == "Title":
            heading = text
            blocks.append(Block(text, heading=heading, is_heading=True))
        else:
            blocks.append(Block(text, heading=heading))
    return blocks, title


def _runs(document: Any) -> Iterator[tuple[str, str]]:
    """(text, style name) of every non-empty paragraph; a table row is one paragraph."""
    from docx.table import Table

    for item in document.iter_inner_content():
        if isinstance(item, Table):
            for row in item.rows:
                cells = [" ".join(c.text.split()) for c in row.cells]
                text = " | ".join(dict.fromkeys(c for c in cells if c))  # merged cells repeat
                if text:
                    yield text, ""
            continue
        text = " ".join(item.text.split())
        if text:
            style = item.style.name if item.style is not None else ""
            yield text, style or ""


def _heading_level(style: str) -> int | None:
    if style.startswith("Heading "):
        digits = style.removeprefix("Heading ").strip()
        return int(digits) if digits.isdigit() else None
    return None
