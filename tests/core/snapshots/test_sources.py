"""Each source format, format detection, and every kind of bad input, with file and line."""

from __future__ import annotations

import bz2
import json
from pathlib import Path

import pytest

from ragdesk.core.errors import BadInputError, NotFoundError
from ragdesk.core.snapshots.chunking import passages, split_words
from ragdesk.core.snapshots.sources import Document, detect_format, open_source
from ragdesk.core.snapshots.starter import vital_articles_path
from ragdesk.core.snapshots.wikitext import wikitext_to_text
from tests.core.snapshots.util import naive_passages, write_jsonl

NS = "http://www.mediawiki.org/xml/export-0.10/"

ADA = """{{Infobox person|name=Ada Lovelace|birth_date=1815}}
'''Ada Lovelace''' (born '''Augusta Ada Byron''';<ref name="b">{{cite book|title=Bio}}</ref> \
10 December 1815) was an [[England|English]] [[mathematician]].<ref>A footnote.</ref>
[[File:Ada Lovelace portrait.jpg|thumb|right|A portrait of [[Ada Lovelace|Ada]]]]

== Early life ==
She was born in [[London]]. <!-- hidden comment -->
{| class="wikitable"
|-
| cell one || cell two
|}
[[Category:1815 births]]
[[fr:Ada Lovelace]]
"""


def page(title: str, ns: int, text: str, redirect: str | None = None) -> str:
    red = f'<redirect title="{redirect}" />' if redirect else ""
    return (f"<page><title>{title}</title><ns>{ns}</ns><id>1</id>{red}<revision><id>2</id>"
            f"<text xml:space=\"preserve\">{_esc(text)}</text></revision></page>")


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def dump(pages: list[str]) -> str:
    return (f'<mediawiki xmlns="{NS}" version="0.10"><siteinfo><sitename>Test</sitename>'
            '<namespaces><namespace key="0" /><namespace key="1">Talk</namespace>'
            '<namespace key="10">Template</namespace></namespaces></siteinfo>'
            + "".join(pages) + "</mediawiki>")


def sample_dump() -> str:
    return dump([
        page("Ada Lovelace", 0, ADA),
        page("Lovelace", 0, "#REDIRECT [[Ada Lovelace]]", redirect="Ada Lovelace"),
        page("Talk:Ada Lovelace", 1, "Discussion about the article."),
        page("Template:Infobox", 10, "{{{name}}} template body"),
        page("Analytical Engine", 0, "The '''Analytical Engine''' was a proposed "
             "[[mechanical computer]] designed by [[Charles Babbage]]."),
    ])


def read_all(path: Path, fmt: str | None = None) -> list[Document]:
    return list(open_source(path, fmt).documents())


# ---- formats ---------------------------------------------------------------------------


def test_jsonl_reads_titles_texts_ids_and_skips_blank_lines(tmp_path: Path) -> None:
    p = tmp_path / "a.jsonl"
    p.write_text('\ufeff{"title": "A", "text": "alpha beta", "id": 7}\n\n'
                 '{"text": "no title here"}\n', encoding="utf-8")
    docs = read_all(p)
    assert docs == [Document("A", "alpha beta", "7"), Document("", "no title here", None)]
    assert detect_format(p) == "jsonl"


def test_dpr_tsv_rows_are_passages_as_they_are(tmp_path: Path) -> None:
    p = tmp_path / "psgs_w100.tsv"
    p.write_text('id\ttext\ttitle\n1\t"Aaron is a prophet, ""high priest"""\tAaron\n'
                 "2\tplain text\tSecond\n", encoding="utf-8")
    docs = read_all(p)
    assert [(d.source_id, d.title, d.text, d.presplit) for d in docs] == [
        ("1", "Aaron", 'Aaron is a prophet, "high priest"', True),
        ("2", "Second", "plain text", True),
    ]
    # A pre-split passage is never re-split, even when longer than 100 words.
    long_doc = Document("T", " ".join(["w"] * 150), "x", presplit=True)
    assert [r.text for r in passages([long_doc])] == [long_doc.text]


@pytest.mark.parametrize("compressed", [False, True])
def test_wiki_xml_keeps_articles_only_and_strips_markup(tmp_path: Path, compressed: bool) -> None:
    raw = sample_dump().encode("utf-8")
    p = tmp_path / ("dump.xml.bz2" if compressed else "dump.xml")
    p.write_bytes(bz2.compress(raw) if compressed else raw)
    assert detect_format(p) == "wiki-xml"
    docs = read_all(p)
    assert [d.title for d in docs] == ["Ada Lovelace", "Analytical Engine"]
    ada = docs[0].text
    assert "Ada Lovelace (born Augusta Ada Byron; 10 December 1815) was an English " \
           "mathematician." in ada
    assert "She was born in London." in ada
    for junk in ("[[", "]]", "{{", "}}", "<ref", "footnote", "thumb", "portrait", "Category",
                 "fr:", "cell one", "Infobox", "hidden comment", "Early life", "'''"):
        assert junk not in ada, junk
    assert docs[1].text == ("The Analytical Engine was a proposed mechanical computer designed "
                            "by Charles Babbage.")


def test_wiki_xml_is_streamed(tmp_path: Path) -> None:
    """The first article arrives while most of a multi-megabyte dump is still unread."""
    body = "Word " * 2000
    pages = [page(f"Article {i}", 0, body) for i in range(600)]
    p = tmp_path / "big.xml"
    p.write_text(dump(pages), encoding="utf-8")
    src = open_source(p)
    it = src.documents()
    first = next(it)
    assert first.title == "Article 0"
    assert src.size > 5_000_000
    assert src.bytes_read < src.size / 4
    assert sum(1 for _ in it) == 599


def test_wikitext_to_text_matches_parser_on_plain_prose() -> None:
    assert wikitext_to_text("A [[b|c]] d ''e'' [[f]].") == "A c d e f."


def test_vital_articles_by_name_and_by_path() -> None:
    by_name = open_source("vital-articles")
    assert by_name.fmt == "vital-articles"
    assert by_name.label == "vital-articles"
    path = vital_articles_path()
    assert detect_format(path) == "vital-articles"
    raw = json.loads(path.read_text(encoding="utf-8"))
    expected = [(v["title"], v["extract"]) for v in raw.values()][:25]
    got = [(d.title, d.text) for d in by_name.documents()][:25]
    assert got == expected


def test_split_words_matches_a_plain_loop() -> None:
    text = " ".join(f"w{i}" for i in range(257)) + "  \n trailing"
    blocks = split_words(text)
    assert [len(b.split()) for b in blocks] == [100, 100, 58]
    assert blocks == [t for _, t in naive_passages([("t", text)])]
    assert split_words("   ") == []


# ---- bad input -------------------------------------------------------------------------


def test_malformed_jsonl_names_file_and_line(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "bad.jsonl", [("a", "one"), ("b", "two")])
    with open(p, "a", encoding="utf-8") as fh:
        fh.write('{"title": "c", "text": "three"\n')
    with pytest.raises(BadInputError) as ei:
        read_all(p)
    assert ei.value.line == 3
    assert str(p) in ei.value.message and "line 3" in ei.value.message
    assert "not valid JSON" in ei.value.message


def test_jsonl_without_text_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"title": "a", "text": "ok"}\n{"title": "b", "body": "x"}\n')
    with pytest.raises(BadInputError, match=r"line 2: has no \"text\""):
        read_all(p)


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.jsonl"
    p.write_bytes(b"")
    with pytest.raises(BadInputError, match="is empty"):
        open_source(p)


def test_binary_file(tmp_path: Path) -> None:
    p = tmp_path / "image.jsonl"
    p.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    with pytest.raises(BadInputError, match="binary file"):
        open_source(p)


def test_wrong_encoding_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "latin1.jsonl"
    p.write_bytes('{"title": "ok", "text": "fine"}\n{"title": "Zürich", "text": "café"}\n'
                  .encode("latin-1"))
    with pytest.raises(BadInputError) as ei:
        read_all(p)
    assert ei.value.line == 2
    assert "not UTF-8" in ei.value.message and "iconv" in ei.value.hint


def test_wrong_encoding_in_vital_json_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "vital.json"
    p.write_bytes('{\n "A": {"title": "A", "extract": "x"},\n "B": {"title": "Bé", "extract": '
                  '"y"}\n}\n'.encode("latin-1"))
    with pytest.raises(BadInputError) as ei:
        read_all(p, "vital-articles")
    assert ei.value.line == 3


def test_utf16_is_refused_with_a_hint(tmp_path: Path) -> None:
    p = tmp_path / "u16.jsonl"
    p.write_bytes('{"title": "a", "text": "b"}\n'.encode("utf-16"))
    with pytest.raises(BadInputError, match="UTF-16"):
        open_source(p)


def test_truncated_bz2_dump(tmp_path: Path) -> None:
    body = "".join(page(f"A{i}", 0, f"Article {i} " * 300) for i in range(200))
    full = bz2.compress(dump([body]).encode("utf-8"))
    p = tmp_path / "cut.xml.bz2"
    p.write_bytes(full[: len(full) * 2 // 3])
    with pytest.raises(BadInputError, match="truncated") as ei:
        read_all(p)
    assert str(p) in ei.value.message


def test_truncated_plain_xml_names_the_line(tmp_path: Path) -> None:
    text = sample_dump()
    p = tmp_path / "cut.xml"
    p.write_text(text[: len(text) - 40].replace("><", ">\n<"), encoding="utf-8")
    with pytest.raises(BadInputError, match="not well-formed XML") as ei:
        read_all(p)
    assert ei.value.line is not None and ei.value.line > 1


def test_xml_that_is_not_a_dump(tmp_path: Path) -> None:
    p = tmp_path / "feed.xml"
    p.write_text("<rss><channel><item>x</item></channel></rss>")
    with pytest.raises(BadInputError, match="not a MediaWiki dump"):
        read_all(p)


def test_tsv_without_dpr_header(tmp_path: Path) -> None:
    p = tmp_path / "x.tsv"
    p.write_text("1\tsome text\tTitle\n")
    with pytest.raises(BadInputError, match="header") as ei:
        read_all(p)
    assert ei.value.line == 1


def test_tsv_short_row_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "x.tsv"
    p.write_text("id\ttext\ttitle\n1\tok\tT\n2\tmissing title\n")
    with pytest.raises(BadInputError, match="column") as ei:
        read_all(p)
    assert ei.value.line == 3


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "notes.txt"
    p.write_text("just some notes\n")
    with pytest.raises(BadInputError, match="cannot recognise") as ei:
        open_source(p)
    assert "--format" in ei.value.hint
    with pytest.raises(NotFoundError):
        open_source(tmp_path / "nope.jsonl")
    with pytest.raises(BadInputError, match="not a known format"):
        open_source(write_jsonl(tmp_path / "a.jsonl", [("a", "b")]), "csv")


def test_reading_is_heard_after_every_long_line_even_without_passages(tmp_path: Path) -> None:
    """A line may be 64 MB of spaces: progress and Cancel must not wait for 1,024 of them."""
    from ragdesk.core.snapshots.sources import open_source

    src = tmp_path / "spaces.jsonl"
    src.write_bytes(b'{"title": "t", "text": "one passage"}\n'
                    + (b" " * (2 << 20) + b"\n") * 3)
    source = open_source(src)
    heard: list[int] = []
    source.on_read = lambda: heard.append(source.bytes_read)
    assert [d.text for d in source.documents()] == ["one passage"]
    assert len(heard) == 3 and heard == sorted(heard) and heard[-1] == src.stat().st_size
