"""Wikipedia-scale sources: DPR's psgs_w100.tsv gzip-compressed as DPR ships it,
and parquet passage files, both streamed."""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import BadInputError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import import_snapshot, open_snapshot
from ragdesk.core.snapshots import parquet_passages as pp
from ragdesk.core.snapshots.sources import DPR_TSV, JSONL, PARQUET, detect_format, open_source
from tests.core.snapshots.util import open_data

ROWS = [(str(i + 1), f'passage {i} says "hello"\tx' if i == 3 else f"passage {i} text",
         f"Title {i % 7}") for i in range(3000)]


def tsv_bytes(rows: list[tuple[str, str, str]] = ROWS) -> bytes:
    def cell(s: str) -> str:
        return '"' + s.replace('"', '""') + '"' if any(c in s for c in '"\t') else s

    return ("id\ttext\ttitle\n" + "".join(f"{a}\t{cell(b)}\t{c}\n" for a, b, c in rows)
            ).encode("utf-8")


def write_parquet(path: Path, rows: list[tuple[str, str, str]], row_group: int = 500,
                  with_ids: bool = True) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols: dict[str, Any] = {"text": [r[1] for r in rows], "title": [r[2] for r in rows]}
    if with_ids:
        cols = {"id": [int(r[0]) for r in rows], **cols}
    pq.write_table(pa.table(cols), path, row_group_size=row_group)


def test_gzipped_dpr_tsv_reads_as_the_plain_file(tmp_path: Path) -> None:
    plain, packed = tmp_path / "psgs_w100.tsv", tmp_path / "psgs_w100.tsv.gz"
    plain.write_bytes(tsv_bytes())
    packed.write_bytes(gzip.compress(tsv_bytes()))
    assert detect_format(packed) == DPR_TSV
    docs = [(d.source_id, d.title, d.text, d.presplit) for d in open_source(plain).documents()]
    assert [(d.source_id, d.title, d.text, d.presplit)
            for d in open_source(packed).documents()] == docs
    assert docs[3][2] == 'passage 3 says "hello"\tx' and len(docs) == 3000


def test_gzipped_jsonl_and_headerless_names(tmp_path: Path) -> None:
    p = tmp_path / "articles.jsonl.gz"
    p.write_bytes(gzip.compress(b'{"title": "A", "text": "alpha"}\n'))
    assert detect_format(p) == JSONL
    assert [d.text for d in open_source(p).documents()] == ["alpha"]
    xml = tmp_path / "dump.xml.gz"
    xml.write_bytes(gzip.compress(b"<mediawiki></mediawiki>"))
    with pytest.raises(BadInputError, match=r"reads \.tsv\.gz and \.jsonl\.gz"):
        open_source(xml)


def test_gzipped_tsv_is_streamed(tmp_path: Path) -> None:
    """Progress is the compressed file's position, and it moves before the end: the file is
    read as the passages are taken, not all at once."""
    rng = random.Random(0)
    rows = [(str(i), "".join(rng.choices("abcdefghij ", k=400)), "T") for i in range(5000)]
    p = tmp_path / "psgs_w100.tsv.gz"
    p.write_bytes(gzip.compress(tsv_bytes(rows), compresslevel=1))
    src = open_source(p)
    docs = src.documents()
    for _ in range(2100):
        next(docs)
    assert 0 < src.bytes_read < src.size * 0.6
    assert sum(1 for _ in docs) == 2900 and src.bytes_read == src.size


def test_truncated_gzip_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "psgs_w100.tsv.gz"
    p.write_bytes(gzip.compress(tsv_bytes())[:-200])
    with pytest.raises(BadInputError, match=r"psgs_w100\.tsv\.gz, line \d+: ends early"):
        list(open_source(p).documents())


def test_parquet_passages_stream_by_batch(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "psgs.parquet"
    write_parquet(p, ROWS)
    assert detect_format(p) == PARQUET
    monkeypatch.setattr(pp, "BATCH_ROWS", 256)
    src = open_source(p)
    seen: list[int] = []
    docs = []
    for d in src.documents():
        docs.append((d.source_id, d.title, d.text, d.presplit))
        seen.append(src.bytes_read)
    assert docs == [(a, c, b, True) for a, b, c in ROWS]
    assert 0 < seen[300] < seen[1000] < src.size  # progress by batch, not after the whole file


def test_parquet_without_ids_or_titles(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "p.parquet"
    pq.write_table(pa.table({"text": ["one", "two"]}), p)
    assert [(d.source_id, d.title, d.text) for d in open_source(p).documents()] == [
        (None, "", "one"), (None, "", "two")]


def test_bad_parquet_files(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "p.parquet"
    pq.write_table(pa.table({"body": ["x"]}), p)
    with pytest.raises(BadInputError, match="needs `text`"):
        list(open_source(p).documents())
    pq.write_table(pa.table({"text": ["x", None, "z"]}), p)
    with pytest.raises(BadInputError, match="row 1 has no text"):
        list(open_source(p).documents())
    pq.write_table(pa.table({"text": [1, 2]}), p)
    with pytest.raises(BadInputError, match="`text` column of int64"):
        list(open_source(p).documents())
    p.write_bytes(b"PAR1 not really")
    with pytest.raises(BadInputError, match="not a readable parquet file"):
        list(open_source(p).documents())


@pytest.fixture()
def env(tmp_path: Path) -> tuple[DataDir, Catalog]:
    return open_data(tmp_path / "data")


def test_import_of_gzipped_tsv_and_parquet(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                           tmp_path: Path) -> None:
    data, catalog = env
    rows = ROWS[:40]
    gz, parquet = tmp_path / "psgs.tsv.gz", tmp_path / "psgs.parquet"
    gz.write_bytes(gzip.compress(tsv_bytes(rows)))
    write_parquet(parquet, rows, row_group=16)
    import_snapshot(data, catalog, gz, name="gz", encoder=dpr_ctx)
    import_snapshot(data, catalog, parquet, name="pq", encoder=dpr_ctx)
    a, b = open_snapshot(data, catalog, "gz"), open_snapshot(data, catalog, "pq")
    assert a.size == b.size == 40
    assert a.get_passages(list(range(40))) == b.get_passages(list(range(40)))
    assert (a.embeddings() == b.embeddings()).all()
    assert a.manifest.source["format"] == DPR_TSV and b.manifest.source["format"] == PARQUET
    a.close()
    b.close()
