"""The folder being imported: which files it holds, and ``documents.json``, the record of
what each file gave the snapshot (its hash and its passage rows), which makes a re-import
incremental."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ragdesk.core.documents.parsers import PARSER_VERSION, supported

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
    encoder: dict[str, Any]
    parser_version: int
    words: int
    files: dict[str, FileEntry]

    def to_json(self) -> dict[str, Any]:
        return {"format": DOCUMENTS_FORMAT, "root": self.root, "encoder": self.encoder,
                "parser_version": self.parser_version, "words": self.words,
                "files": [asdict(f) for f in self.files.values()]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> FolderRecord:
        files = [FileEntry(**f) for f in d["files"]]
        return cls(str(d["root"]), dict(d["encoder"]), int(d["parser_version"]),
                   int(d["words"]), {f.path: f for f in files})

    def reusable_for(self, encoder: dict[str, Any], words: int) -> bool:
        """Whether this import's vectors fit a new one made with ``encoder``."""
        return (self.encoder == encoder and self.parser_version == PARSER_VERSION
                and self.words == words)


def read_folder_record(snapshot_folder: Path) -> FolderRecord | None:
    """The record of a snapshot imported from a folder; None for any other snapshot."""
    try:
        raw = json.loads((snapshot_folder / DOCUMENTS_FILE).read_text(encoding="utf-8"))
        return FolderRecord.from_json(raw)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def scan_folder(root: Path) -> tuple[list[str], int]:
    """Relative paths (forward slashes, sorted) of the files ragdesk reads under ``root``,
    and how many other files were passed over. Hidden files and folders are skipped, and
    links to folders are not followed (they can loop)."""
    found: list[str] = []
    other = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fname in filenames:
            if fname.startswith(".") or fname.startswith("~$"):  # ~$: Word's lock files
                continue
            path = Path(dirpath) / fname
            if supported(path) and path.is_file():
                found.append(path.relative_to(root).as_posix())
            else:
                other += 1
    return sorted(found), other


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_HASH_BLOCK):
            h.update(block)
    return h.hexdigest()


def cache_key(rel: str, sha: str) -> str:
    """Vectors depend on the content and on the title, which may be the file name."""
    return hashlib.sha256(f"{rel}\0{sha}".encode()).hexdigest()[:40]
