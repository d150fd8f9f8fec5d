"""From a cited passage back to its file: the location stored with each passage of a folder
snapshot, and a ``file:`` URI that opens it at the page (``#page=N``, which PDF viewers and
browsers honour) or at an HTML heading's anchor."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ragdesk.core.documents.folder import DOCUMENTS_FILE, read_folder_record
from ragdesk.core.documents.model import Location
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE

_IN_CHUNK = 500


def locate_in_folder(snapshot_folder: Path, ids: Sequence[int]) -> dict[int, Location]:
    """Locations of the passages ``ids`` of the snapshot in ``snapshot_folder``; passages
    that do not come from a document (other formats) are left out."""
    db = snapshot_folder / PASSAGES_FILE
    if not ids or not db.is_file():
        return {}
    uri = db.resolve().as_uri() + "?mode=ro&immutable=1"
    out: dict[int, Location] = {}
    con = sqlite3.connect(uri, uri=True)
    try:
        wanted = sorted({int(i) for i in ids})
        for s in range(0, len(wanted), _IN_CHUNK):
            part = wanted[s:s + _IN_CHUNK]
            marks = ",".join("?" * len(part))
            for pid, raw in con.execute(
                    f"SELECT id, source_id FROM passages WHERE id IN ({marks})", part):
                loc = Location.from_json(raw) if raw else None
                if loc is not None:
                    out[int(pid)] = loc
    finally:
        con.close()
    return out


def locate(snapshot: object, ids: Sequence[int]) -> dict[int, Location]:
    """:func:`locate_in_folder` for an opened ``SnapshotIndex`` (anything with ``.folder``)."""
    folder = getattr(snapshot, "folder", None)
    return locate_in_folder(Path(folder), ids) if folder is not None else {}


def document_root(snapshot_folder: Path) -> Path | None:
    """The folder a document snapshot was imported from."""
    try:
        stamp = (snapshot_folder / DOCUMENTS_FILE).stat().st_mtime_ns
    except OSError:
        return None
    return _root(snapshot_folder, stamp)


@functools.lru_cache(maxsize=32)
def _root(snapshot_folder: Path, stamp: int) -> Path | None:
    # Cached by modification time: a server asks for it on every request, and the record of
    # a large folder is a few megabytes of JSON; a re-import writes a new file.
    record = read_folder_record(snapshot_folder)
    return Path(record.root) if record is not None else None


def citation_uri(root: Path, location: Location) -> str:
    """``file:`` URI of the cited file, at its page or heading anchor where it has one."""
    uri = (root / location.path).as_uri()
    if location.page is not None:
        return f"{uri}#page={location.page}"
    if location.anchor:
        return f"{uri}#{location.anchor}"
    return uri


def citation_uris(snapshot: object, ids: Sequence[int]) -> dict[int, str]:
    """``file:`` URIs (at the page or anchor) of the passages ``ids`` of an opened snapshot
    that come from documents; what a "open the cited file" action needs."""
    locations = locate(snapshot, ids)
    folder = getattr(snapshot, "folder", None)
    root = document_root(Path(folder)) if locations and folder is not None else None
    if root is None:
        return {}
    return {pid: citation_uri(root, loc) for pid, loc in locations.items()}
