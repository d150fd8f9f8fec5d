"""Whole articles around a cited passage, and links to them, on snapshots built by the real
importer; checked against the DPR split written plainly (util.naive_passages)."""

from __future__ import annotations

import bz2
import json
from pathlib import Path
from typing import Any

from ragdesk.core.snapshots import import_snapshot, open_snapshot
from ragdesk.core.snapshots.articles import article_around, article_link, stored_article
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE, PassageReader
from ragdesk.core.snapshots.sources import open_source
from ragdesk.core.types import RetrievedDoc
from tests.core.snapshots.util import naive_passages, open_data


def words(tag: str, n: int) -> str:
    return " ".join(f"{tag}{i}" for i in range(n))


def src_jsonl(tmp_path: Path) -> Path:
    p = tmp_path / "one.jsonl"
    p.write_text(json.dumps({"title": "T", "text": "x"}) + "\n", encoding="utf-8")
    return p


def test_each_passage_opens_its_own_whole_article(tmp_path: Path, dpr_ctx: Any) -> None:
    data, catalog = open_data(tmp_path / "data")
    # Two neighbouring articles share a title but not an id: they stay apart.
    articles = [("Alpha", words("a", 250), "A1"), ("Beta", words("b", 50), "B1"),
                ("Gamma", words("g", 320), "G1"), ("Gamma", words("h", 130), "G2")]
    src = tmp_path / "s.jsonl"
    src.write_text("".join(json.dumps({"id": i, "title": t, "text": x}) + "\n"
                           for t, x, i in articles), encoding="utf-8")
    import_snapshot(data, catalog, src, name="Arts", encoder=dpr_ctx)
    index = open_snapshot(data, catalog, "Arts")
    expected: list[tuple[int, list[str]]] = []  # (article number, its passages) per passage
    for n, (title, text, _) in enumerate(articles):
        chunks = [x for _, x in naive_passages([(title, text)])]
        expected += [(n, chunks)] * len(chunks)
    assert index.size == len(expected) == 3 + 1 + 4 + 2

    for pid, (n, chunks) in enumerate(expected):
        art = article_around(index, pid)
        assert art.title == articles[n][0] and art.source_id == articles[n][2]
        assert [p.text for p in art.passages] == chunks
        assert art.passages[art.cited_index].id == pid
        assert index.get_passages([pid])[0].text == art.passages[art.cited_index].text
        assert not art.more_before and not art.more_after and art.link is None

    # Gamma (ids 4..7) seen from its third passage with one passage on each side.
    art = article_around(index, 6, side=1)
    assert [p.id for p in art.passages] == [5, 6, 7]
    assert art.more_before and not art.more_after
    art = article_around(index, 4, side=2)
    assert [p.id for p in art.passages] == [4, 5, 6] and art.more_after and not art.more_before
    index.close()


def test_dpr_rows_group_by_title_and_wiki_dumps_keep_page_ids(tmp_path: Path,
                                                               dpr_ctx: Any) -> None:
    data, catalog = open_data(tmp_path / "data")
    tsv = tmp_path / "psgs.tsv"
    rows = [("1", "Aaron is a prophet.", "Aaron"), ("2", "He was the brother.", "Aaron"),
            ("3", "Abba is a band.", "ABBA"), ("4", "From Sweden.", "ABBA")]
    tsv.write_text("id\ttext\ttitle\n" + "".join("\t".join(r) + "\n" for r in rows),
                   encoding="utf-8")
    import_snapshot(data, catalog, tsv, name="DPR", encoder=dpr_ctx)
    index = open_snapshot(data, catalog, "DPR")
    assert [p.text for p in article_around(index, 3).passages] == ["Abba is a band.",
                                                                   "From Sweden."]
    index.close()

    def page(pid: int, title: str, text: str) -> str:
        return (f"<page><title>{title}</title><ns>0</ns><id>{pid}</id><revision><id>9</id>"
                f"<text>{text}</text></revision></page>")

    dump = tmp_path / "dump.xml"
    dump.write_text(
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/"><siteinfo>'
        "<sitename>Wikipedia</sitename><base>https://de.wikipedia.org/wiki/Wikipedia:Hauptseite"
        "</base></siteinfo>" + page(303, "Ada Lovelace", words("w", 150))
        + page(12, "Zürich See", "Ein See.") + "</mediawiki>", encoding="utf-8")
    import_snapshot(data, catalog, dump, name="Wiki", encoder=dpr_ctx)
    index = open_snapshot(data, catalog, "Wiki")
    reader = PassageReader(index.folder / PASSAGES_FILE)
    assert [r[3] for r in reader.rows(0, 10)] == ["303", "303", "12"]  # page ids kept
    reader.close()
    ada = article_around(index, 1)
    assert [p.id for p in ada.passages] == [0, 1] and ada.source_id == "303"
    assert ada.link == "https://de.wikipedia.org/wiki/Ada_Lovelace"
    assert article_around(index, 2).link == "https://de.wikipedia.org/wiki/Z%C3%BCrich_See"
    index.close()
    # The address comes from the dump's head, compressed or not, and only from its siteinfo.
    packed = tmp_path / "dump.xml.bz2"
    packed.write_bytes(bz2.compress(dump.read_bytes()))
    assert open_source(packed).site == "https://de.wikipedia.org/wiki/Wikipedia:Hauptseite"
    no_base = tmp_path / "nobase.xml"
    no_base.write_text('<mediawiki><siteinfo><sitename>W</sitename></siteinfo>'
                       + page(1, "A", "text") + "</mediawiki>", encoding="utf-8")
    assert open_source(no_base).site is None
    assert open_source(src_jsonl(tmp_path)).site is None


def test_links_from_what_the_source_knows(tmp_path: Path) -> None:
    assert article_link({"format": "vital-articles"}, "Ada Lovelace", "Ada Lovelace") == \
        "https://en.wikipedia.org/wiki/Ada_Lovelace"
    assert article_link({"format": "wiki-xml"}, "Ada", "303") is None  # no <base>: no guess
    assert article_link({"format": "jsonl"}, "T", "https://example.org/t") == \
        "https://example.org/t"
    doc = tmp_path / "notes.txt"
    doc.write_text("x", encoding="utf-8")
    assert article_link({"format": "jsonl"}, "T", str(doc)) == doc.as_uri()
    assert article_link({"format": "jsonl"}, "T", "doc7") is None
    assert article_link({"format": "jsonl"}, "T", None) is None


def test_stored_article_is_the_cited_passage_alone() -> None:
    art = stored_article(RetrievedDoc(41, "Radium", "Radium is an element.", 70.0, 0.9, "old"))
    assert art.stored_only and art.cited_index == 0 and art.passages[0].id == 41
    assert art.passages[0].text == "Radium is an element." and art.link is None


def test_a_document_passage_opens_its_whole_file(tmp_path: Path, dpr_ctx: Any) -> None:
    from ragdesk.core.documents import import_folder

    data, catalog = open_data(tmp_path / "data")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "guide.md").write_text(
        f"# Setup Guide\n\n## Install\n\n{words('i', 150)}\n\n## Configure\n\n"
        f"{words('c', 120)}\n", encoding="utf-8")
    (folder / "other.md").write_text(f"# Other\n\n{words('o', 60)}\n", encoding="utf-8")
    import_folder(data, catalog, folder, name="Docs", encoder=dpr_ctx)
    index = open_snapshot(data, catalog, "Docs")
    passages = index.get_passages(list(range(index.size)))
    in_guide = [p.id for p in passages if p.title == "Setup Guide"]  # its first heading
    assert len(in_guide) == 3  # two sections, the first over 100 words
    cited = in_guide[-1]
    art = article_around(index, cited)
    # Every passage of guide.md and none of other.md, in reading order.
    assert [p.id for p in art.passages] == sorted(in_guide)
    assert "o0 " not in " ".join(p.text for p in art.passages)
    assert art.link is not None and art.link.startswith((folder / "guide.md").as_uri())
    index.close()
