"""A cited passage in its article: the passages around it that come from the same article,
and a link to the article where the snapshot knows its source.

Passages are written in source order, so an article's passages have consecutive ids (see
``chunking``). Which neighbours belong to the same article depends on the format: DPR's
TSV rows are passages with ids of their own, so there the title decides; a document import
keeps one location per passage (file, page, heading), so there the file decides; elsewhere
the title together with the source id (JSONL ``id``, Vital Articles key, MediaWiki page id).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import quote

# The value types live in ragdesk.core.articles (no numpy behind them); their old home
# re-exports them.
from ragdesk.core.articles import Article, ArticlePassage
from ragdesk.core.articles import stored_article as stored_article
from ragdesk.core.errors import CorruptSnapshotError
from ragdesk.core.safe_json import as_object
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE, PassageReader
from ragdesk.core.snapshots.sources import DPR_TSV, WIKI_XML
from ragdesk.core.snapshots.staged import read_build_state
from ragdesk.core.snapshots.starter import VITAL_ARTICLES

if TYPE_CHECKING:
    # Imported when a document passage is met: most snapshots never need the parsers.
    from ragdesk.core.documents.model import Location

# Passages shown on each side of the cited one at most: 30 passages are 3,000 words, more
# than most lead sections and enough context for a long article.
SIDE_PASSAGES = 30
WIKIPEDIA_EN = "https://en.wikipedia.org/wiki/"  # the Vital Articles are English Wikipedia's


class HasFolder(Protocol):
    """A :class:`SnapshotIndex` or :class:`StagedSnapshot`: what this module reads of one."""

    folder: Path
    size: int


def snapshot_source(snapshot: HasFolder) -> dict[str, object]:
    """The manifest's ``source`` of a ready snapshot, or the build state's of a staged one."""
    manifest = getattr(snapshot, "manifest", None)
    if manifest is not None:
        return dict(manifest.source)
    try:
        state = read_build_state(Path(snapshot.folder))
        return dict(as_object(as_object(state["fingerprint"])["source"]))
    except (CorruptSnapshotError, KeyError, TypeError):
        return {}


def _location(source_id: str | None) -> Location | None:
    """A document passage's place (file, page, heading); None for other sources' ids."""
    if not source_id or not source_id.startswith("{"):
        return None
    from ragdesk.core.documents.model import Location

    return Location.from_json(source_id)


def _document_link(folder: Path, location: Location) -> str | None:
    """The cited file, opened at the cited passage's page or heading."""
    from ragdesk.core.documents.citations import citation_uri, document_root

    root = document_root(folder)
    return citation_uri(root, location) if root is not None else None


def article_key(fmt: str | None, title: str, source_id: str | None) -> Hashable:
    """What passages of one article share, in a snapshot of format ``fmt``."""
    if fmt == DPR_TSV:
        return ("title", title)
    location = _location(source_id)
    if location is not None:
        return ("file", location.path)
    return ("article", title, source_id)


def _wiki_title(title: str) -> str:
    return quote(title.replace(" ", "_"), safe="/:(),'!*")


def article_link(source: Mapping[str, object], title: str, source_id: str | None) -> str | None:
    """The address of a passage's article, when the snapshot's source tells it: Wikipedia
    for the Vital Articles, the dump's own wiki for a MediaWiki dump (its ``<base>``), or a
    source id that is itself a URL or the path of an existing file. (A document snapshot's
    passages link to their file at their page: :func:`article_around` does that.)"""
    fmt = source.get("format")
    if fmt == VITAL_ARTICLES and title:
        return WIKIPEDIA_EN + _wiki_title(title)
    if fmt == WIKI_XML:
        site = source.get("site")
        # <base> is the main page's URL; articles live beside it.
        if isinstance(site, str) and site.startswith(("http://", "https://")) and title:
            return site.rsplit("/", 1)[0] + "/" + _wiki_title(title)
        return None
    if source_id and source_id.startswith(("http://", "https://")):
        return source_id
    if source_id and not source_id.startswith("{"):
        try:
            p = Path(source_id)
            if p.is_absolute() and p.is_file():
                return p.as_uri()
        except (OSError, ValueError):
            return None
    return None


def article_around(snapshot: HasFolder, passage_id: int, *,
                   side: int = SIDE_PASSAGES) -> Article:
    """The passages of the cited passage's article, at most ``side`` on each side of it."""
    if not 0 <= passage_id < snapshot.size:
        raise KeyError(f"passage id {passage_id} is outside 0..{snapshot.size - 1}")
    source = snapshot_source(snapshot)
    fmt_value = source.get("format")
    fmt = fmt_value if isinstance(fmt_value, str) else None
    reader = PassageReader(Path(snapshot.folder) / PASSAGES_FILE)
    try:
        # One row more on each side than can be shown, to tell whether the article goes on.
        rows = reader.rows(passage_id - side - 1, passage_id + side + 1)
    finally:
        reader.close()
    at = next(i for i, r in enumerate(rows) if r[0] == passage_id)
    _, title, _, source_id = rows[at]
    key = article_key(fmt, title, source_id)

    def same(i: int) -> bool:
        # Ids must also be consecutive: a gap would mean rows we did not read.
        return (0 <= i < len(rows) and rows[i][0] == passage_id + (i - at)
                and article_key(fmt, rows[i][1], rows[i][3]) == key)

    lo = at
    while lo - 1 >= 0 and at - (lo - 1) <= side and same(lo - 1):
        lo -= 1
    hi = at
    while hi + 1 < len(rows) and (hi + 1) - at <= side and same(hi + 1):
        hi += 1
    location = _location(source_id)
    link = (_document_link(Path(snapshot.folder), location) if location is not None
            else article_link(source, title, source_id))
    return Article(
        title=title,
        passages=tuple(ArticlePassage(r[0], r[2]) for r in rows[lo:hi + 1]),
        cited_id=passage_id, more_before=same(lo - 1), more_after=same(hi + 1),
        link=link, source_id=source_id)
