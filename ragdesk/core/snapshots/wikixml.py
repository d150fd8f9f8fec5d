"""Streaming reader of MediaWiki XML dumps: one page in memory at a time."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ragdesk.core.errors import BadInputError
from ragdesk.core.snapshots.wikitext import wikitext_to_text

REDIRECT_PREFIX = "#redirect"
# The XML of one page at most: the longest Wikipedia articles are about 1 MB of wikitext. The
# parser holds a page's text whole before it hands the page over, and an 896-byte .bz2 can
# hold a 1 GB one.
MAX_PAGE_BYTES = 64 << 20


class _PageBound:
    """The dump's stream as the XML parser reads it, refused once one page (or what comes
    before the first) runs past :data:`MAX_PAGE_BYTES`."""

    def __init__(self, stream: IO[bytes], path: Path, where: str) -> None:
        self.stream, self.path, self.where = stream, path, where
        self.done = 0  # bytes handed to the parser
        self.page_start = 0  # where the page being read began, as near as the parser says

    def read(self, n: int = -1) -> bytes:
        data = self.stream.read(n if n >= 0 else 1 << 16)
        self.done += len(data)
        if self.done - self.page_start > MAX_PAGE_BYTES:
            raise BadInputError(
                f"has a page longer than {MAX_PAGE_BYTES:,} bytes{self.where}; ragdesk does "
                "not read pages this large (a decompression bomb?).", path=self.path)
        return data


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _child(elem: ET.Element, name: str) -> ET.Element | None:
    for c in elem:
        if _local(c.tag) == name:
            return c
    return None


def _article(page: ET.Element, namespace_names: set[str]) -> tuple[str, str, str | None] | None:
    """(title, plain text, page id) of an article page; None for redirects and other
    namespaces."""
    title_el = _child(page, "title")
    title = (title_el.text or "").strip() if title_el is not None else ""
    ns_el = _child(page, "ns")
    if ns_el is not None:
        if (ns_el.text or "").strip() != "0":
            return None
    elif ":" in title and title.split(":", 1)[0].strip().lower() in namespace_names:
        return None  # dumps older than schema 0.5 have no <ns>; go by the title prefix
    if _child(page, "redirect") is not None:
        return None
    revisions = [c for c in page if _local(c.tag) == "revision"]
    if not revisions:
        return None
    text_el = _child(revisions[-1], "text")
    wikitext = (text_el.text or "") if text_el is not None else ""
    if wikitext.lstrip()[: len(REDIRECT_PREFIX)].lower() == REDIRECT_PREFIX:
        return None
    text = wikitext_to_text(wikitext)
    # The page id names the article on its wiki for good (titles get renamed): kept as the
    # passages' source id, so that a citation can link to the page.
    id_el = _child(page, "id")
    page_id = (id_el.text or "").strip() if id_el is not None else ""
    return (title, text, page_id or None) if text else None


def site_base(stream: IO[bytes]) -> str | None:
    """The wiki's address from a dump's ``<siteinfo><base>`` (its main page's URL), reading
    no further than the first page; None when the dump does not give it or cannot be read."""
    try:
        for _event, elem in ET.iterparse(stream, events=("end",)):
            tag = _local(elem.tag)
            if tag == "base":
                return (elem.text or "").strip() or None
            if tag in ("siteinfo", "page"):
                return None
    except (ET.ParseError, EOFError, OSError):
        return None
    return None


def iter_articles(stream: IO[bytes], path: Path, compressed: bool
                  ) -> Iterator[tuple[str, str, str | None]]:
    """Yield (title, text, page id) for each article of a dump, clearing parsed pages as it
    goes."""
    where = " of the decompressed XML" if compressed else ""
    namespace_names: set[str] = set()
    root: ET.Element | None = None
    bound = _PageBound(stream, path, where)
    try:
        for event, elem in ET.iterparse(bound, events=("start", "end")):
            if root is None:
                root = elem
                if _local(elem.tag) != "mediawiki":
                    raise BadInputError(
                        f"is XML but not a MediaWiki dump (its root element is "
                        f"<{_local(elem.tag)}>).", path=path)
                continue
            if event != "end":
                continue
            tag = _local(elem.tag)
            if tag == "namespaces":
                namespace_names = {
                    (n.text or "").strip().lower() for n in elem
                    if n.get("key") not in (None, "0") and n.text
                }
            elif tag == "page":
                article = _article(elem, namespace_names)
                root.clear()  # keeps memory flat on multi-gigabyte dumps
                bound.page_start = bound.done
                if article is not None:
                    yield article
    except ET.ParseError as exc:
        line, col = exc.position
        reason = str(exc).rsplit(": line", 1)[0]
        raise BadInputError(
            f"is not well-formed XML: {reason} (column {col}{where}).", path=path, line=line,
            hint="The dump may be truncated or damaged; download it again.",
        ) from exc
    except EOFError as exc:
        raise BadInputError(
            "ends early: the .bz2 file is truncated (an incomplete download?).", path=path,
            hint="Download the dump again and check its size or checksum.",
        ) from exc
    except OSError as exc:
        if compressed:
            raise BadInputError(f"is a damaged .bz2 file ({exc}).", path=path,
                                hint="Download the dump again.") from exc
        raise
