"""Readers for the sources a snapshot is imported from, streamed and strict.

Formats:

- ``jsonl``: one ``{"title": ..., "text": ...}`` object per line (``"id"`` optional);
- ``dpr-tsv``: DPR's ``psgs_w100.tsv`` (header ``id<TAB>text<TAB>title``), rows already passages;
  like ``jsonl``, also read gzip-compressed (``psgs_w100.tsv.gz``, as DPR distributes it);
- ``parquet``: passages in a parquet file (``text``, optional ``title`` and ``id`` columns),
  read a record batch at a time (see :mod:`.parquet_passages`);
- ``wiki-xml``: a MediaWiki XML dump (``.xml`` or ``.xml.bz2``), streamed page by page; only
  articles (namespace 0) are kept, redirects skipped, markup stripped by mwparserfromhell;
- ``vital-articles``: the starter pack's Wikipedia Vital Articles JSON (``{key: {"title",
  "extract", ...}}``); the literal source ``"vital-articles"`` means the installed file.

Bad input raises :class:`BadInputError` naming the file and, where there is one, the line.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ragdesk.core.errors import BadInputError, NotFoundError
from ragdesk.core.safe_json import (
    MAX_PASSAGE_LINE_BYTES,
    iter_lines_bounded,
    loads_bounded,
    read_bounded,
)
from ragdesk.core.snapshots.starter import VITAL_ARTICLES, vital_articles_path

JSONL = "jsonl"
DPR_TSV = "dpr-tsv"
WIKI_XML = "wiki-xml"
PARQUET = "parquet"
FORMATS = (JSONL, DPR_TSV, WIKI_XML, VITAL_ARTICLES, PARQUET)
GZIP_MAGIC = b"\x1f\x8b"
PARQUET_MAGIC = b"PAR1"

SNIFF_BYTES = 1 << 16
# A Vital Articles file is parsed whole; the starter's is a few MB.
VITAL_MAX_BYTES = 256 << 20
UTF8_HINT = "Convert the file to UTF-8 (for example `iconv -f latin1 -t utf-8 IN > OUT`)."
FORMAT_HINT = f"Pass --format with one of: {', '.join(FORMATS)}."


@dataclass(frozen=True)
class Document:
    """An article (split into passages later) or, when ``presplit``, one ready passage."""

    title: str
    text: str
    source_id: str | None = None
    presplit: bool = False


def _decode(raw: bytes, path: Path, line: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInputError(
            f"is not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {exc.start + 1} "
            "cannot be decoded",
            path=path, line=line, hint=UTF8_HINT,
        ) from exc


def _check_head(path: Path, head: bytes) -> None:
    """Refuse empty, UTF-16 and binary files before any work is done."""
    if not head:
        raise BadInputError("is empty.", path=path,
                            hint="Choose a file with passages or articles in it.")
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise BadInputError("is UTF-16 text; ragdesk reads UTF-8.", path=path, hint=UTF8_HINT)
    if b"\x00" in head:
        raise BadInputError(
            "is a binary file, not text.", path=path,
            hint=f"Import a JSONL, DPR TSV, MediaWiki XML (.xml/.xml.bz2) or Vital Articles "
            f"JSON file. {FORMAT_HINT}",
        )


def _sniff_bz2(path: Path) -> bytes:
    try:
        with bz2.open(path, "rb") as fh:
            return fh.read(4096)
    except EOFError as exc:
        raise BadInputError("ends early: the .bz2 file is truncated (an incomplete download?).",
                            path=path, hint="Download it again.") from exc
    except OSError as exc:
        raise BadInputError(f"is not a readable .bz2 file ({exc}).", path=path) from exc


def detect_format(path: Path) -> str:
    """Guess the format from the file's first bytes and its name."""
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if head.startswith(b"BZh"):
        inner = _sniff_bz2(path)
        if inner.lstrip().startswith(b"<"):
            return WIKI_XML
        raise BadInputError("is a .bz2 file that does not hold a MediaWiki XML dump.",
                            path=path, hint=FORMAT_HINT)
    if head.startswith(GZIP_MAGIC):
        return _gzip_format(path)
    if head.startswith(PARQUET_MAGIC):
        return PARQUET
    _check_head(path, head)
    text = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if not text:
        raise BadInputError("holds only white space.", path=path)
    if text.startswith(b"<"):
        return WIKI_XML
    return _text_format(path, text)


def _sniff_gzip(path: Path) -> bytes:
    try:
        with gzip.open(path, "rb") as fh:
            return fh.read(SNIFF_BYTES)
    except EOFError as exc:
        raise BadInputError("ends early: the .gz file is truncated (an incomplete download?).",
                            path=path, hint="Download it again.") from exc
    except OSError as exc:
        raise BadInputError(f"is not a readable .gz file ({exc}).", path=path) from exc


def _gzip_format(path: Path) -> str:
    """A gzip file's format: what its text would be under its name without ``.gz``; only
    line formats are read compressed (they stream)."""
    inner = _sniff_gzip(path)
    _check_head(path, inner)
    text = inner.removeprefix(b"\xef\xbb\xbf").lstrip()
    named = path.with_suffix("") if path.suffix.lower() == ".gz" else path
    try:
        fmt = None if text.startswith(b"<") else _text_format(named, text)
    except BadInputError:
        fmt = None
    if fmt not in (DPR_TSV, JSONL):
        raise BadInputError("is gzip-compressed; ragdesk reads .tsv.gz and .jsonl.gz, and other "
                            "formats uncompressed.", path=path,
                            hint="Decompress it first (`gunzip FILE`).")
    return str(fmt)


def _text_format(path: Path, text: bytes) -> str:
    """A TSV or JSON file's format, from its first line and its name."""
    first = text.split(b"\n", 1)[0].rstrip(b"\r")
    if [c.strip().lower() for c in first.split(b"\t")[:3]] == [b"id", b"text", b"title"]:
        return DPR_TSV
    suffix = path.suffix.lower()
    if suffix == ".tsv":
        return DPR_TSV
    if suffix in (".jsonl", ".ndjson"):
        return JSONL
    if text.startswith(b"{"):
        try:
            obj = loads_bounded(first)
        except BadInputError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("text"), str):
            return JSONL
        if suffix == ".json":
            return VITAL_ARTICLES
    if text.startswith(b"[") and suffix == ".json":
        return VITAL_ARTICLES
    raise BadInputError("is in a format ragdesk cannot recognise.", path=path, hint=FORMAT_HINT)


_LONG_LINE_BYTES = 1 << 20


class Source:
    """An opened, checked input; ``documents()`` streams it once."""

    def __init__(self, path: Path, fmt: str, label: str) -> None:
        self.path = path
        self.fmt = fmt
        self.label = label
        self.size = path.stat().st_size
        self.bytes_read = 0
        # called as the reading advances (every 1,024 lines), whether or not the lines held
        # passages: a reader's progress and cancel also reach a file of empty lines
        self.on_read: Callable[[], None] | None = None

    def fingerprint(self) -> dict[str, object]:
        st = self.path.stat()
        return {"path": str(self.path), "format": self.fmt, "size": st.st_size,
                "mtime_ns": st.st_mtime_ns}

    def documents(self) -> Iterator[Document]:
        self.bytes_read = 0
        if self.fmt == JSONL:
            yield from self._jsonl()
        elif self.fmt == DPR_TSV:
            yield from self._dpr_tsv()
        elif self.fmt == WIKI_XML:
            yield from self._wiki_xml()
        elif self.fmt == PARQUET:
            yield from self._parquet()
        else:
            yield from self._vital()
        self.bytes_read = self.size

    # ---- line-based formats --------------------------------------------------------

    @contextmanager
    def _open_lines(self) -> Iterator[tuple[IO[bytes], IO[bytes]]]:
        """(the text's bytes, the file): the same for a plain file, a gzip stream over it for
        a .gz one (progress is the compressed file's position, as its size is)."""
        with open(self.path, "rb") as raw:
            if raw.read(2) != GZIP_MAGIC:
                raw.seek(0)
                yield raw, raw
                return
            raw.seek(0)
            with gzip.GzipFile(fileobj=raw, mode="rb") as fh:
                yield fh, raw  # type: ignore[misc]  # GzipFile is an IO[bytes] in all but name

    def _lines(self, fh: IO[bytes], raw: IO[bytes] | None = None
               ) -> Iterator[tuple[int, str]]:
        lineno = 0
        try:
            for lineno, data in iter_lines_bounded(fh, max_line_bytes=MAX_PASSAGE_LINE_BYTES,
                                                   path=self.path):
                line = _decode(data, self.path, lineno)
                if lineno == 1:
                    line = line.removeprefix("\ufeff")
                # every 1,024 lines, and after any long line (a line may be 64 MB of
                # spaces: a thousand of them would be reading for minutes unheard)
                if lineno % 1024 == 0 or len(data) > _LONG_LINE_BYTES:
                    self.bytes_read = (raw or fh).tell()
                    if self.on_read is not None:
                        self.on_read()
                yield lineno, line
        except (EOFError, gzip.BadGzipFile) as exc:
            raise BadInputError(f"ends early: the .gz file is truncated or damaged ({exc}).",
                                path=self.path, line=lineno + 1,
                                hint="Download it again.") from exc

    def _jsonl(self) -> Iterator[Document]:
        with self._open_lines() as (fh, raw):
            for lineno, line in self._lines(fh, raw):
                if not line.strip():
                    continue
                obj = loads_bounded(
                    line, max_bytes=MAX_PASSAGE_LINE_BYTES, path=self.path, line=lineno,
                    hint='Each line must be one JSON object like {"title": "...", '
                    '"text": "..."}.')
                if not isinstance(obj, dict):
                    raise BadInputError(f"holds a JSON {type(obj).__name__}, not an object.",
                                        path=self.path, line=lineno)
                text = obj.get("text")
                if not isinstance(text, str):
                    raise BadInputError('has no "text" string.', path=self.path, line=lineno,
                                        hint='Each line needs {"title": "...", "text": "..."}.')
                title = obj.get("title")
                if title is not None and not isinstance(title, str):
                    raise BadInputError('has a "title" that is not a string.', path=self.path,
                                        line=lineno)
                ident = obj.get("id")
                yield Document(title or "", text, None if ident is None else str(ident))

    def _dpr_tsv(self) -> Iterator[Document]:
        csv.field_size_limit(min(sys.maxsize, 1 << 30))
        with self._open_lines() as (fh, raw):
            line_of = [0]

            def lines() -> Iterator[str]:
                for lineno, line in self._lines(fh, raw):
                    line_of[0] = lineno
                    yield line

            reader = csv.reader(lines(), delimiter="\t")
            try:
                header = next(reader, None)
                if header is None or [h.strip().lower() for h in header[:3]] != [
                        "id", "text", "title"]:
                    raise BadInputError(
                        "does not start with the DPR header id<TAB>text<TAB>title.",
                        path=self.path, line=1,
                        hint="DPR's psgs_w100.tsv starts with that header line.")
                for row in reader:
                    if not row:
                        continue
                    if len(row) < 3:
                        raise BadInputError(
                            f"has {len(row)} column(s); expected id, text and title "
                            "separated by tabs.", path=self.path, line=line_of[0])
                    yield Document(row[2], row[1], row[0], presplit=True)
            except csv.Error as exc:
                raise BadInputError(f"cannot be read as TSV ({exc}).", path=self.path,
                                    line=line_of[0]) from exc

    def _parquet(self) -> Iterator[Document]:
        from ragdesk.core.snapshots.parquet_passages import parquet_passages

        def at(pos: int) -> None:
            self.bytes_read = pos

        for title, text, ident in parquet_passages(self.path, at):
            yield Document(title, text, ident, presplit=True)

    # ---- MediaWiki XML -------------------------------------------------------------

    def _wiki_xml(self) -> Iterator[Document]:
        from ragdesk.core.snapshots.wikixml import iter_articles

        compressed = self.path.suffix.lower() == ".bz2"
        with open(self.path, "rb") as raw:
            if not compressed:
                compressed = raw.read(3) == b"BZh"
                raw.seek(0)
            stream: IO[bytes] = bz2.BZ2File(raw) if compressed else raw
            try:
                for title, text, page_id in iter_articles(stream, self.path, compressed):
                    self.bytes_read = raw.tell()
                    yield Document(title, text, page_id)
            finally:
                if compressed:
                    stream.close()

    @property
    def site(self) -> str | None:
        """A MediaWiki dump's address (its ``<base>``), where citations link to; read from
        the head of the file, so a resumed import that does not read the dump again has it."""
        if self.fmt != WIKI_XML:
            return None
        from ragdesk.core.snapshots.wikixml import site_base

        with open(self.path, "rb") as raw:
            compressed = raw.read(3) == b"BZh"
            raw.seek(0)
            if compressed:
                with bz2.BZ2File(raw) as stream:
                    return site_base(stream)
            return site_base(raw)

    # ---- Vital Articles ------------------------------------------------------------

    def _vital(self) -> Iterator[Document]:
        data = read_bounded(self.path, VITAL_MAX_BYTES)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Re-decode the offending line alone to report its line and column.
            start = data.rfind(b"\n", 0, exc.start) + 1
            end = data.find(b"\n", exc.start)
            _decode(data[start:end if end >= 0 else None], self.path,
                    data.count(b"\n", 0, start) + 1)
            raise
        obj = loads_bounded(text, max_bytes=VITAL_MAX_BYTES, path=self.path)
        items: list[tuple[str | None, object]]
        if isinstance(obj, dict):
            items = [(k, v) for k, v in obj.items()]
        elif isinstance(obj, list):
            items = [(None, v) for v in obj]
        else:
            raise BadInputError("is not a Vital Articles JSON object.", path=self.path)
        for key, entry in items:
            if not isinstance(entry, dict) or not isinstance(entry.get("extract"), str):
                raise BadInputError(
                    f"entry {key!r} has no \"extract\" text; this is not a Vital Articles "
                    "file.", path=self.path, hint=FORMAT_HINT)
            title = entry.get("title") or key or ""
            yield Document(str(title), entry["extract"], None if key is None else str(key))


def resolve_source(source: str | os.PathLike[str]) -> tuple[Path, str]:
    """The file a source names, and how it is shown in messages and the catalog."""
    if str(source) == VITAL_ARTICLES:
        return vital_articles_path(), VITAL_ARTICLES
    path = Path(source).expanduser()
    if not path.exists():
        raise NotFoundError(f"The source {path} does not exist.",
                            "Check the path; it must be a file.")
    if not path.is_file():
        raise BadInputError("is not a file.", path=path)
    return path.resolve(), str(path.resolve())


def open_source(source: str | os.PathLike[str], fmt: str | None = None) -> Source:
    """Resolve, check and identify a source without reading more than its first bytes."""
    path, label = resolve_source(source)
    if str(source) == VITAL_ARTICLES:
        if fmt not in (None, VITAL_ARTICLES):
            raise BadInputError(f"the source {VITAL_ARTICLES!r} is in the {VITAL_ARTICLES} "
                                f"format, not {fmt!r}.")
        fmt = VITAL_ARTICLES
    if fmt is not None and fmt not in FORMATS:
        raise BadInputError(f"{fmt!r} is not a known format.", hint=FORMAT_HINT)
    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if not head.startswith((b"BZh", GZIP_MAGIC, PARQUET_MAGIC)):  # binary; checked inside
        _check_head(path, head)
    detected = fmt or detect_format(path)
    if detected == WIKI_XML and head.startswith(b"BZh"):
        _sniff_bz2(path)
    return Source(path, detected, label)
