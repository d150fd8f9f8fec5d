"""Each parser against documents whose content the test wrote, and the splitter's promises:
no word lost or repeated, no passage across two pages or sections, about 100 words each."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragdesk.core.documents import parse_file, split_document
from ragdesk.core.documents.model import Block, DocumentError, ParsedDocument
from tests.documents.makers import words, write_docx, write_pdf


def test_pdf_pages_and_title(tmp_path: Path) -> None:
    pdf = write_pdf(tmp_path / "r.pdf", [["alpha (one) beta"], [], ["gamma delta"]],
                    title="Report (draft)")
    doc = parse_file(pdf)
    assert doc.title == "Report (draft)"
    assert [(b.text, b.page) for b in doc.blocks] == [("alpha (one) beta", 1),
                                                      ("gamma delta", 3)]
    untitled = parse_file(write_pdf(tmp_path / "u.pdf", [["x y"]]))
    assert untitled.title == "u.pdf"


@pytest.mark.parametrize("content", [b"", b"%PDF-1.4\n%%EOF", b"not a pdf", b"%PDF-1.7\n1 0 obj"])
def test_unreadable_pdfs(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(content)
    with pytest.raises(DocumentError):
        parse_file(bad)


def test_docx_headings_tables_and_title(tmp_path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_paragraph("Quarterly", style="Title")
    d.add_heading("Numbers", level=2)
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "region", "sales"
    table.cell(1, 0).text, table.cell(1, 1).text = "north", "12"
    d.add_paragraph("After the table.")
    d.save(str(tmp_path / "q.docx"))
    doc = parse_file(tmp_path / "q.docx")
    assert doc.title == "Quarterly"  # no core title: the Title-styled paragraph
    assert [(b.text, b.heading, b.is_heading) for b in doc.blocks] == [
        ("Quarterly", "Quarterly", True), ("Numbers", "Numbers", True),
        ("region | sales", "Numbers", False), ("north | 12", "Numbers", False),
        ("After the table.", "Numbers", False)]
    titled = parse_file(write_docx(tmp_path / "t.docx", "Props Title", [("H", ["p"])]))
    assert titled.title == "Props Title"
    (tmp_path / "zip.docx").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(DocumentError, match="not a readable DOCX"):
        parse_file(tmp_path / "zip.docx")


def test_markdown_structure(tmp_path: Path) -> None:
    md = tmp_path / "m.md"
    md.write_text("---\ntitle: meta\n---\nIntro line.\n\n# Main Title\n\n## Part *one*\n\n"
                  "Text with `code` and [a link](http://x).\n\n```\nprint(1)\n```\n\n"
                  "- first\n- second\n", encoding="utf-8")
    doc = parse_file(md)
    assert doc.title == "Main Title"
    assert [(b.text, b.heading) for b in doc.blocks] == [
        ("Intro line.", None), ("Main Title", "Main Title"), ("Part one", "Part one"),
        ("Text with code and a link.", "Part one"), ("print(1)", "Part one"),
        ("first", "Part one"), ("second", "Part one")]


def test_html_skips_scripts_and_keeps_anchors(tmp_path: Path) -> None:
    page = tmp_path / "p.html"
    page.write_text("<!doctype html><html><head><title> My &amp; Page </title>"
                    "<script>var x = '<p>no</p>';</script></head><body>"
                    "<nav>Home</nav><h2 id='a1'>First <b>bold</b></h2><p>One<br>two</p>"
                    "<style>p{}</style><ul><li>item</li></ul></body></html>",
                    encoding="utf-8")
    doc = parse_file(page)
    assert doc.title == "My & Page"
    assert [(b.text, b.heading, b.anchor) for b in doc.blocks] == [
        ("Home", None, None), ("First bold", "First bold", "a1"), ("One", "First bold", "a1"),
        ("two", "First bold", "a1"), ("item", "First bold", "a1")]


def test_html_without_a_head_end_tag(tmp_path: Path) -> None:
    page = tmp_path / "h.htm"
    page.write_text("<html><head><title>T</title><meta charset=utf-8><body><p>Body text",
                    encoding="utf-8")
    doc = parse_file(page)
    assert doc.title == "T" and [b.text for b in doc.blocks] == ["Body text"]


def test_text_encodings(tmp_path: Path) -> None:
    (tmp_path / "u.txt").write_bytes("\ufeffcafé\r\n\r\nsecond para".encode())
    (tmp_path / "w.txt").write_bytes("na\xefve caf\xe9".encode("cp1252"))
    (tmp_path / "s.txt").write_bytes("wide text".encode("utf-16"))
    assert [b.text for b in parse_file(tmp_path / "u.txt").blocks] == ["café", "second para"]
    assert [b.text for b in parse_file(tmp_path / "w.txt").blocks] == ["naïve café"]
    assert [b.text for b in parse_file(tmp_path / "s.txt").blocks] == ["wide text"]
    (tmp_path / "blank.txt").write_text(" \n\n ", encoding="utf-8")
    with pytest.raises(DocumentError, match="holds no text"):
        parse_file(tmp_path / "blank.txt")


def _doc() -> ParsedDocument:
    return ParsedDocument("T", [
        Block("Title", heading="Title", is_heading=True),
        Block("Setup", heading="Setup", is_heading=True),
        Block(words("a", 70), heading="Setup"), Block(words("b", 70), heading="Setup"),
        Block(words("c", 230), heading="Setup"), Block(words("d", 10), heading="Setup"),
        Block("Use", heading="Use", is_heading=True), Block(words("e", 30), heading="Use"),
        Block("Tail", heading="Tail", is_heading=True), Block(words("x", 99), heading="Tail"),
        Block(words("y", 10), heading="Tail"),
        Block(words("p", 40), page=1), Block(words("q", 40), page=2),
    ])


def test_split_keeps_every_word_once_and_never_crosses_a_section() -> None:
    doc = _doc()
    passages = split_document(doc, "f.md")
    assert " ".join(p.text for p in passages).split() == \
        " ".join(b.text for b in doc.blocks).split()
    for p in passages:
        n = len(p.text.split())
        assert n <= 125  # the budget plus a short tail folded in
        assert p.title == "T" and p.location.path == "f.md"
    by_place = [(p.location.heading, p.location.page, p.text.split()[0]) for p in passages]
    # Headings lead into their section; a paragraph that does not fit starts a passage; one
    # longer than 100 words is cut at 100.
    assert by_place == [("Setup", None, "Title"), ("Setup", None, "b0"), ("Setup", None, "c0"),
                        ("Setup", None, "c100"), ("Setup", None, "c200"), ("Use", None, "Use"),
                        ("Tail", None, "Tail"), (None, 1, "p0"), (None, 2, "q0")]
    assert len(passages[0].text.split()) == 72 and passages[4].text.split()[-1] == "d9"
    # The 10-word tail of "Tail" joined the passage before it rather than standing alone.
    assert len(passages[6].text.split()) == 110


def test_an_oversized_file_is_refused_unread(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.documents import parsers

    monkeypatch.setattr(parsers, "MAX_FILE_BYTES", 10)
    (tmp_path / "big.txt").write_text("x" * 11, encoding="utf-8")
    with pytest.raises(DocumentError, match="is 11 B, over the 10 B ragdesk reads"):
        parse_file(tmp_path / "big.txt")


def test_a_password_protected_pdf_is_named_as_such(tmp_path: Path) -> None:
    from pypdf import PdfReader, PdfWriter

    plain = write_pdf(tmp_path / "plain.pdf", [["secret text"]])
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt(user_password="pw", owner_password="owner", algorithm="RC4-128")
    with open(tmp_path / "locked.pdf", "wb") as fh:
        writer.write(fh)
    with pytest.raises(DocumentError, match="is encrypted"):
        parse_file(tmp_path / "locked.pdf")
    # Encrypted for permissions only (an empty user password) still reads.
    writer = PdfWriter(clone_from=PdfReader(plain))
    writer.encrypt(user_password="", owner_password="owner", algorithm="RC4-128")
    with open(tmp_path / "open.pdf", "wb") as fh:
        writer.write(fh)
    assert [b.text for b in parse_file(tmp_path / "open.pdf").blocks] == ["secret text"]


def test_an_unreadable_file_is_a_user_error_not_a_bug(tmp_path: Path) -> None:
    """Whoever calls parse_file outside the importer (which reports the file by name and
    goes on) gets an error every front end shows as the user's, with its message."""
    from ragdesk.core.errors import RagdeskError

    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"not a pdf")
    with pytest.raises(RagdeskError) as ei:
        parse_file(bad)
    assert isinstance(ei.value, DocumentError) and ei.value.message.startswith(
        "is not a readable PDF")
