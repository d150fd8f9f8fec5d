"""DOCX with python-docx (MIT): paragraphs and tables in body order, headings from the
paragraph styles (Word has no pages until it lays the text out, so DOCX keeps headings).

A DOCX is a zip of XML that python-docx reads whole into lxml trees: a 1 MB file can
expand to gigabytes (a zip bomb) or hold 300k paragraphs (GBs of trees and proxies, and
minutes of style look-ups). What it expands to is bounded before python-docx sees it, from
the zip's central directory (member count, sizes, compression ratio; zipfile never reads a
member past its recorded size) and a streamed count of the body's paragraphs and elements,
and the text taken out is bounded while it is read.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.core.documents.model import Block, DocumentError, ParsedDocument
from ragdesk.core.units import human_bytes

if TYPE_CHECKING:
    from docx.document import Document
    from docx.text.paragraph import Paragraph

MAX_MEMBERS = 5_000
MAX_TOTAL_BYTES = 512 * 2**20  # every member expanded (python-docx loads them all)
MAX_XML_BYTES = 32 * 2**20  # one XML part: its lxml tree takes several times this
MAX_RATIO = 250  # deflated XML is 5-20x smaller (empty paragraphs ~200x); a bomb ~1000x
RATIO_FROM_BYTES = 2**20  # small members may compress better than that, harmlessly
MAX_PARAGRAPHS = 100_000  # a 1,000-page manual has ~20k
MAX_ELEMENTS = 2_000_000  # XML elements of the body, each a node in memory
MAX_TEXT_CHARS = 32 * 2**20
_BODY = "word/document.xml"
_SCAN_BLOCK = 1 << 20


def _refuse(message: str) -> DocumentError:
    return DocumentError(f"{message}; ragdesk does not read DOCX files this large (a zip bomb?)")


def check_expansion(path: Path) -> None:
    """Refuse a DOCX whose parts expand beyond what one document needs, reading only the
    central directory and streaming the body once."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > MAX_MEMBERS:
            raise _refuse(f"holds {len(infos):,} parts")
        for info in infos:
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > RATIO_FROM_BYTES and ratio > MAX_RATIO:
                raise _refuse(f"has a part ({info.filename}) compressed {ratio:,.0f} to 1")
            if info.filename.endswith((".xml", ".rels")) and info.file_size > MAX_XML_BYTES:
                raise _refuse(f"has a part ({info.filename}) of {human_bytes(info.file_size)}")
        total = sum(i.file_size for i in infos)
        if total > MAX_TOTAL_BYTES:
            raise _refuse(f"expands to {human_bytes(total)}")
        if _BODY in zf.namelist():
            _count_body(zf)


def _count_body(zf: zipfile.ZipFile) -> None:
    paragraphs = elements = 0
    tail = b""
    with zf.open(_BODY) as fh:
        while block := fh.read(_SCAN_BLOCK):
            data = tail + block
            # A tag cut at the block's end is counted in the next block, once.
            cut = data.rfind(b"<")
            data, tail = (data[:cut], data[cut:]) if cut >= 0 else (data, b"")
            paragraphs += data.count(b"<w:p>") + data.count(b"<w:p ")
            elements += data.count(b"<") - data.count(b"</") - data.count(b"<?")
            if paragraphs > MAX_PARAGRAPHS:
                raise _refuse(f"has over {MAX_PARAGRAPHS:,} paragraphs")
            if elements > MAX_ELEMENTS:
                raise _refuse(f"has over {MAX_ELEMENTS:,} XML elements in its body")


def parse_docx(path: Path) -> ParsedDocument:
    import docx
    from docx.opc.exceptions import PackageNotFoundError

    try:
        check_expansion(path)
        document = docx.Document(str(path))
        props_title = (document.core_properties.title or "").strip()
        blocks, styled_title = _blocks(document)
    # python-docx meets a part it did not expect (styles.xml without styles, say) with
    # AttributeError, TypeError or IndexError: the file is unreadable, not ragdesk broken
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, AttributeError,
            TypeError, IndexError) as exc:
        raise DocumentError(f"is not a readable DOCX file ({type(exc).__name__}: {exc})") \
            from exc
    except Exception as exc:  # lxml raises its own syntax errors for a damaged part
        if type(exc).__module__.startswith("lxml"):
            raise DocumentError(f"is not a readable DOCX file ({exc})") from exc
        raise
    return ParsedDocument(props_title or styled_title or path.name, blocks)


def _blocks(document: Document) -> tuple[list[Block], str | None]:
    blocks: list[Block] = []
    heading: str | None = None
    title: str | None = None
    chars = 0
    for text, style in _runs(document):
        chars += len(text)
        if chars > MAX_TEXT_CHARS:
            raise _refuse(f"holds over {MAX_TEXT_CHARS:,} characters of text")
        if style == "Title" and title is None:
            title = text
        level = _heading_level(style)
        if level is not None or style == "Title":
            heading = text
            blocks.append(Block(text, heading=heading, is_heading=True))
        else:
            blocks.append(Block(text, heading=heading))
    return blocks, title


def _runs(document: Document) -> Iterator[tuple[str, str]]:
    """(text, style name) of every non-empty paragraph; a table row is one paragraph."""
    from docx.enum.style import WD_STYLE_TYPE
    from docx.table import Table, _Cell

    # Paragraph.style resolves the default style by scanning every style, per paragraph
    # (minutes for 100k paragraphs): names are looked up once per style id instead.
    names: dict[str | None, str] = {}

    def style_name(item: Paragraph) -> str:
        style_id = item._p.style  # what Paragraph.style looks up
        if style_id not in names:
            style = document.part.get_style(style_id, WD_STYLE_TYPE.PARAGRAPH)
            names[style_id] = (style.name if style is not None else "") or ""
        return names[style_id]

    for item in document.iter_inner_content():
        if isinstance(item, Table):
            for row in item.rows:
                # The cells as written, not row.cells: that lays them out on the table's
                # grid, repeating a cell over every column its gridSpan claims (a 10 KB file
                # can claim 100 million) and a vertically merged one down its rows.
                cells = [" ".join(_Cell(tc, item).text.split()) for tc in row._tr.tc_lst]
                text = " | ".join(dict.fromkeys(c for c in cells if c))
                if text:
                    yield text, ""
            continue
        text = " ".join(item.text.split())
        if text:
            yield text, style_name(item)


def _heading_level(style: str) -> int | None:
    if style.startswith("Heading "):
        digits = style.removeprefix("Heading ").strip()
        return int(digits) if digits.isdigit() else None
    return None
