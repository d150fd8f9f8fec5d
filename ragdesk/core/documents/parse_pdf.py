"""PDF with pypdf (pure Python, BSD): the text of each page, page numbers kept."""

from __future__ import annotations

import logging
from pathlib import Path

from ragdesk.core.documents.model import Block, DocumentError, ParsedDocument
from ragdesk.core.documents.parse_text import paragraphs

log = logging.getLogger(__name__)


def parse_pdf(path: Path) -> ParsedDocument:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    # pypdf logs every repair it attempts on a damaged file; the import reports the file once.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        reader = PdfReader(path, strict=False)
        if reader.is_encrypted and not _try_empty_password(reader):
            raise DocumentError("is encrypted; ragdesk cannot read it without the password")
        title = _title(reader) or path.name
        blocks: list[Block] = []
        for number, page in enumerate(reader.pages, 1):
            text = page.extract_text() or ""
            blocks.extend(Block(p, page=number) for p in paragraphs(text))
    except DocumentError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError,
            OSError, RecursionError, AssertionError, ZeroDivisionError) as exc:
        # pypdf signals a damaged file with many exception types; all mean "unreadable".
        raise DocumentError(f"is not a readable PDF ({type(exc).__name__}: {exc})") from exc
    if not blocks:
        raise DocumentError("has no text layer (a scanned PDF?); ragdesk does not run OCR")
    return ParsedDocument(title, blocks)


def _try_empty_password(reader: object) -> bool:
    try:
        return bool(reader.decrypt(""))  # type: ignore[attr-defined]
    except Exception:  # a missing crypto backend or a real password: both "cannot read"
        return False


def _title(reader: object) -> str | None:
    try:
        meta = reader.metadata  # type: ignore[attr-defined]
        title = meta.title if meta is not None else None
    except Exception:  # damaged metadata must not cost the text
        log.debug("unreadable PDF metadata", exc_info=True)
        return None
    title = " ".join(str(title).split()) if title else ""
    return title or None
