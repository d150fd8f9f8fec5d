"""Which parser reads which file, chosen by the file name's suffix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ragdesk.core.documents.model import DocumentError, ParsedDocument
from ragdesk.core.documents.parse_docx import parse_docx
from ragdesk.core.documents.parse_html import parse_html
from ragdesk.core.documents.parse_markdown import parse_markdown
from ragdesk.core.documents.parse_pdf import parse_pdf
from ragdesk.core.documents.parse_text import parse_text
from ragdesk.core.units import human_bytes

Parser = Callable[[Path], ParsedDocument]

PARSERS: dict[str, Parser] = {
    ".pdf": parse_pdf,
    ".docx": parse_docx,
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".html": parse_html,
    ".htm": parse_html,
    ".txt": parse_text,
    ".text": parse_text,
}
SUFFIXES = tuple(PARSERS)
# Bumped whenever a parser or the splitter changes what passages a file gives: vectors kept
# from an earlier import are reused only for passages made the same way.
PARSER_VERSION = 1
MAX_FILE_BYTES = 256 * 2**20


def supported(path: Path) -> bool:
    return path.suffix.lower() in PARSERS


def parse_file(path: Path) -> ParsedDocument:
    """Parse one file; anything that makes it unreadable is a :class:`DocumentError`."""
    parser = PARSERS.get(path.suffix.lower())
    if parser is None:
        raise DocumentError(f"has a suffix ragdesk does not read ({path.suffix or 'none'})")
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            # Parsers hold a file (and its text) in memory; a file this large is a disk image
            # or a scan, not a document to split into passages.
            raise DocumentError(f"is {human_bytes(size)}, over the {human_bytes(MAX_FILE_BYTES)} "
                                "ragdesk reads from one document")
        doc = parser(path)
    except OSError as exc:
        raise DocumentError(f"cannot be read ({exc.strerror or exc})") from exc
    except RecursionError as exc:
        raise DocumentError("is nested too deeply to read") from exc
    if not any(b.text.strip() for b in doc.blocks):
        raise DocumentError("holds no text")
    return doc
