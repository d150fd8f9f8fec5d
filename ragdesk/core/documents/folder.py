"""The folder being imported: which files it holds, and ``documents.json``, the record of
what each file gave the snapshot (its hash and its passage rows), which makes a re-import
incremental."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ragdesk.core.documents.parsers import PARSER_VERSION, supported
from ragdesk.core.safe_json import as_int, as_list, as_object, as_str
from ragdesk.core.safe_paths import is_text_name, link_problem, shown_name

DOCUMENTS_FILE = "documents.json"
DOCUMENTS_FORMAT = 1
_HASH_BLOCK = 1 << 20


@dataclass(frozen=True)
class FileEntry:
    """One imported file: passages ``start .. start + count - 1`` of the snapshot."""

    path: str
    sha256: str
    size: int
    title: str
    start: int
    count: int


@dataclass
class FolderRecord:
    root: str
    encoder: dict[str, object]
    parser_version: int
    words: int
    files: dict[str, FileEntry]

    def to_json(self) -> dict[str, object]:
        return {"format": DOCUMENTS_FORMAT, "root": self.root, "encoder": self.encoder,
                "parser_version": self.parser_version, "words": self.words,
                "files": [asdict(f) for f in self.files.values()]}

    @classmethod
    def from_json(cls, d: dict[str, object]) -> FolderRecord:
        files = [_file_entry(as_object(f)) for f in as_list(d["files"])]
        return cls(str(d["root"]), dict(as_object(d["encoder"])), as_int(d["parser_version"]),
                   as_int(d["words"]), {f.path: f for f in files})

    def reusable_for(self, encoder: dict[str, object], words: int) -> bool:
        """Whether this import's vectors fit a new one made with ``encoder``."""
        return (self.encoder == encoder and self.parser_version == PARSER_VERSION
                and self.words == words)


def _file_entry(f: dict[str, object]) -> FileEntry:
    if set(f) != _FILE_FIELDS:  # as FileEntry(**f) refuses a missing or unknown field
        raise TypeError(f"a file entry has the fields {sorted(f)}, not {sorted(_FILE_FIELDS)}")
    return FileEntry(path=as_str(f["path"]), sha256=as_str(f["sha256"]), size=as_int(f["size"]),
                     title=as_str(f["title"]), start=as_int(f["start"]),
                     count=as_int(f["count"]))


_FILE_FIELDS = frozenset(("path", "sha256", "size", "title", "start", "count"))


def read_folder_record(snapshot_folder: Path) -> FolderRecord | None:
    """The record of a snapshot imported from a folder; None for any other snapshot."""
    try:
        raw = json.loads((snapshot_folder / DOCUMENTS_FILE).read_text(encoding="utf-8"))
        return FolderRecord.from_json(as_object(raw))
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None


def scan_folder(root: Path) -> tuple[list[str], int, list[str]]:
    """Relative paths (forward slashes, sorted) of the files ragdesk reads under ``root``,
    how many other files were passed over, and warnings naming the entries refused. Hidden
    files and folders are skipped; links to folders are not followed (they can loop), and
    a link leading out of ``root`` (to ``/etc/passwd``, to a file beside the folder), a
    dangling link and a loop are refused, as are names that are not UTF-8, which no
    passage, title or message could hold."""
    found: list[str] = []
    refused: list[str] = []
    other = 0
    allowed = [root.resolve()]
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        kept = []
        for d in sorted(dirnames):
            if d.startswith("."):
                continue
            problem = _entry_problem(here / d, root, allowed)
            if problem is not None:
                refused.append(problem)
            elif not (here / d).is_symlink():
                kept.append(d)
        dirnames[:] = kept
        for fname in filenames:
            if fname.startswith(".") or fname.startswith("~$"):  # ~$: Word's lock files
                continue
            path = here / fname
            if not supported(path):
                other += 1
                continue
            problem = _entry_problem(path, root, allowed)
            if problem is not None:
                refused.append(problem)
            elif path.is_file():
                found.append(path.relative_to(root).as_posix())
            else:
                other += 1
    return sorted(found), other, sorted(refused)


def _entry_problem(path: Path, root: Path, allowed: list[Path]) -> str | None:
    """A warning ("NAME: why") for an entry that must not be read, else None."""
    rel = path.relative_to(root).as_posix()
    if not is_text_name(rel):
        return (f"{shown_name(rel)}: its name is not valid UTF-8 text; rename it to import "
                "it")
    if path.is_symlink():
        problem = link_problem(path, allowed)
        if problem is not None:
            return f"{rel}: is a symbolic link {problem}; not followed"
    return None


def inside_folder(path: Path, root: Path) -> bool:
    """Whether ``path`` still leads inside ``root`` (a file may have been swapped for a link
    since the folder was scanned)."""
    return not path.is_symlink() or link_problem(path, [root.resolve()]) is None


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def cache_key(rel: str, sha: str) -> str:
    """Vectors depend on the content and on the title, which may be the file name."""
    return hashlib.sha256(f"{rel}\0{sha}".encode()).hexdigest()[:40]
