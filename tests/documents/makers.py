"""Test documents built on the spot: a PDF written by hand (pypdf reads PDFs but cannot lay
out text), a DOCX made with python-docx, Markdown, HTML and text files."""

from __future__ import annotations

from pathlib import Path


def _pdf_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _page_stream(lines: list[str]) -> bytes:
    ops = ["BT", "/F1 11 Tf", "14 TL", "72 760 Td"]
    for line in lines:
        ops.append(f"({_pdf_escape(line)}) Tj T*")
    ops.append("ET")
    return "\n".join(ops).encode("latin-1")


def write_pdf(path: Path, pages: list[list[str]], title: str | None = None) -> Path:
    """A PDF whose page i shows ``pages[i]``, one line each, in Helvetica."""
    objects: list[bytes] = []  # object i + 1
    n = len(pages)
    page_ids = [3 + 2 * i for i in range(n)]
    font_id = 3 + 2 * n
    info_id = font_id + 1
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode())
    for i, lines in enumerate(pages):
        stream = _page_stream(lines)
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {page_ids[i] + 1} "
            f"0 R /Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode())
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica "
                   b"/Encoding /WinAnsiEncoding >>")
    objects.append(f"<< /Title ({_pdf_escape(title or '')}) >>".encode("latin-1"))
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % i + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R"
    trailer += f" /Info {info_id} 0 R" if title else ""
    out += trailer.encode() + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    path.write_bytes(bytes(out))
    return path


def write_docx(path: Path, title: str, sections: list[tuple[str, list[str]]]) -> Path:
    import docx

    d = docx.Document()
    d.core_properties.title = title
    for heading, paragraphs in sections:
        d.add_heading(heading, level=1)
        for p in paragraphs:
            d.add_paragraph(p)
    d.save(str(path))
    return path


def words(prefix: str, n: int) -> str:
    """``n`` distinct words: passages whose lengths are known exactly."""
    return " ".join(f"{prefix}{i}" for i in range(n))
