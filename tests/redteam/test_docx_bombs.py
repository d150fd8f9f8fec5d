"""The DOCX size cap was on the file, not on what it expands to.

A 1.1 MB DOCX of 300k paragraphs reached 3.7 GB RSS and was still reading after 240 s; a
0.59 MB DOCX bomb peaked at 1.6 GB. Both must be refused by name with a clear warning, in
bounded memory and time, while the rest of the folder imports.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.documents.model import DocumentError
from ragdesk.core.documents.parse_docx import parse_docx
from tests.documents.makers import write_docx
from tests.redteam.peak_rss import SCRIPT, peak_kb

_HEAD = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
         '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
         "<w:body>")
_TAIL = "<w:sectPr/></w:body></w:document>"


def _docx_with_body(path: Path, write_body: Any) -> Path:
    """A real DOCX (python-docx's template) whose word/document.xml is streamed by
    ``write_body(fh)``: the test never holds the expanded body in memory."""
    base = path.with_name(path.name + ".base.docx")
    write_docx(base, "Base", [("Heading", ["text"])])
    with zipfile.ZipFile(base) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED,
                                                       compresslevel=9) as zout:
        for item in zin.infolist():
            if item.filename == "word/document.xml":
                info = zipfile.ZipInfo("word/document.xml", item.date_time)
                info.compress_type = zipfile.ZIP_DEFLATED
                with zout.open(info, "w") as fh:
                    fh.write(_HEAD.encode())
                    write_body(fh)
                    fh.write(_TAIL.encode())
            else:
                zout.writestr(item, zin.read(item.filename))
    base.unlink()
    return path


def long_docx(path: Path, paragraphs: int = 300_000) -> Path:
    def body(fh: Any) -> None:
        for start in range(0, paragraphs, 10_000):
            fh.write("".join(f"<w:p><w:r><w:t>Line {i}, {i % 97}.</w:t>"
                             "</w:r></w:p>" for i in range(start, start + 10_000)).encode())
    return _docx_with_body(path, body)


def bomb_docx(path: Path, megabytes: int = 600) -> Path:
    def body(fh: Any) -> None:
        fh.write(b"<w:p><w:r><w:t>")
        block = b"a" * 2**20
        for _ in range(megabytes):
            fh.write(block)
        fh.write(b"</w:t></w:r></w:p>")
    return _docx_with_body(path, body)


def lying_bomb(src: Path, path: Path) -> Path:
    """The bomb with its body's recorded size rewritten to 1 KB in both headers: only what
    zipfile reads (bounded by the recorded size) can protect the parser."""
    data = bytearray(src.read_bytes())
    name = b"word/document.xml"
    for sig, size_at in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = 0
        while (at := data.find(sig, at)) >= 0:
            name_len_at = 26 if sig == b"PK\x03\x04" else 28
            header = 30 if sig == b"PK\x03\x04" else 46
            n = struct.unpack_from("<H", data, at + name_len_at)[0]
            if data[at + header:at + header + n] == name:
                struct.pack_into("<I", data, at + size_at, 1024)
            at += 4
    path.write_bytes(bytes(data))
    return path


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bombs") / "docs"
    folder.mkdir()
    long = long_docx(folder / "long.docx")
    bomb = bomb_docx(folder / "bomb.docx")
    lying_bomb(bomb, folder / "liar.docx")
    (folder / "good.md").write_text("# Good\n\nThe ferry leaves at noon on Sundays.\n",
                                    encoding="utf-8")
    return {"folder": folder, "long": long, "bomb": bomb}


def test_the_files_are_what_the_issue_describes(bombs: dict[str, Path]) -> None:
    assert 0.9e6 < bombs["long"].stat().st_size < 1.6e6, bombs["long"].stat().st_size
    assert bombs["bomb"].stat().st_size < 0.7e6, bombs["bomb"].stat().st_size


@pytest.mark.parametrize(("name", "why"), [("long.docx", "paragraphs"),
                                           ("bomb.docx", "compressed"),
                                           ("liar.docx", "not a readable DOCX")])
def test_each_is_refused_with_a_clear_reason(bombs: dict[str, Path], name: str,
                                             why: str) -> None:
    with pytest.raises(DocumentError, match=why):
        parse_docx(bombs["folder"] / name)


def test_a_long_document_under_the_caps_still_reads_quickly(tmp_path: Path) -> None:
    import time

    start = time.monotonic()
    doc = parse_docx(long_docx(tmp_path / "ok.docx", 20_000))
    assert len(doc.blocks) == 20_000
    assert time.monotonic() - start < 30  # minutes before: a style scan per paragraph


_RSS_SCRIPT = SCRIPT


def test_folder_import_refuses_them_in_bounded_memory(bombs: dict[str, Path], tiny_models,  # type: ignore[no-untyped-def]
                                                      tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_SCRIPT, "--data-dir", str(tmp_path / "data"), "index",
         "import", str(bombs["folder"]), "--format", "docs", "--name", "docs", "--encoder",
         str(tiny_models.st_encoder), "--json"],
        capture_output=True, text=True, timeout=240, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout)
    assert res["added"] == ["good.md"]
    warnings = "\n".join(res["warnings"])
    for name in ("long.docx", "bomb.docx", "liar.docx"):
        assert f"{name}: " in warnings, warnings
    assert "zip bomb" in warnings
    peak = peak_kb(proc.stderr)
    print(f"peak RSS of the folder import: {peak / 1024:.0f} MB")
    assert peak < 1024 * 1024, f"peak RSS {peak / 1024:.0f} MB"


def test_a_cell_claiming_a_hundred_million_columns_is_read_once(tmp_path: Path) -> None:
    """gridSpan tells Word how many grid columns a cell covers; laid out on the grid it
    would be repeated that many times (a 10 KB file held a process at 1.5 GB and growing).
    The cells are read as written."""
    def body(fh: Any) -> None:
        fh.write(b'<w:tbl><w:tblGrid><w:gridCol/><w:gridCol/></w:tblGrid><w:tr>'
                 b'<w:tc><w:tcPr><w:gridSpan w:val="100000000"/></w:tcPr>'
                 b'<w:p><w:r><w:t>wide cell</w:t></w:r></w:p></w:tc>'
                 b'<w:tc><w:p><w:r><w:t>next</w:t></w:r></w:p></w:tc></w:tr></w:tbl>'
                 b'<w:p><w:r><w:t>After.</w:t></w:r></w:p>')
    doc = parse_docx(_docx_with_body(tmp_path / "span.docx", body))
    assert [b.text for b in doc.blocks] == ["wide cell | next", "After."]


def test_a_merged_cell_is_read_once(tmp_path: Path) -> None:
    import docx

    d = docx.Document()
    table = d.add_table(rows=2, cols=3)
    table.cell(0, 0).merge(table.cell(0, 1)).text = "both columns"
    table.cell(0, 2).text = "third"
    table.cell(1, 0).merge(table.cell(1, 2)).text = "the whole row"
    d.save(str(tmp_path / "m.docx"))
    assert [b.text for b in parse_docx(tmp_path / "m.docx").blocks] == [
        "both columns | third", "the whole row"]


def test_a_styles_part_python_docx_cannot_read_is_an_unreadable_file(tmp_path: Path) -> None:
    good = write_docx(tmp_path / "g.docx", "T", [("H", ["text"])])
    bad = tmp_path / "badstyle.docx"
    with zipfile.ZipFile(good) as zin, zipfile.ZipFile(bad, "w") as zout:
        for item in zin.infolist():
            data = b"<notstyles/>" if item.filename == "word/styles.xml" else \
                zin.read(item.filename)
            zout.writestr(item, data)
    with pytest.raises(DocumentError, match="not a readable DOCX"):
        parse_docx(bad)
