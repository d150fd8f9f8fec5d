"""Per-file results of an import in progress: the passages a file gave and their vectors.

A file's entry is written when the file is fully encoded (vectors first, then the passages,
whose file is the commit mark), so an import that is killed and run again encodes only the
files it had not finished.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from ragdesk.core.atomic import write_json_atomic
from ragdesk.core.documents.model import DocPassage, Location


class FileCache:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> tuple[list[DocPassage], np.ndarray] | None:
        try:
            rows = json.loads((self.folder / f"{key}.json").read_text(encoding="utf-8"))
            vectors = np.load(self.folder / f"{key}.npy", allow_pickle=False)
            passages = [DocPassage(r["title"], r["text"], _location(r["location"]))
                        for r in rows]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # absent or torn by a crash: encode the file again
        if vectors.ndim != 2 or vectors.shape[0] != len(passages):
            return None
        return passages, vectors

    def put(self, key: str, passages: list[DocPassage], vectors: np.ndarray) -> None:
        tmp = self.folder / f"{key}.tmp.npy"
        np.save(tmp, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
        os.replace(tmp, self.folder / f"{key}.npy")
        write_json_atomic(self.folder / f"{key}.json",
                          [{"title": p.title, "text": p.text,
                            "location": p.location.to_json()} for p in passages])


def _location(raw: str) -> Location:
    loc = Location.from_json(raw)
    if loc is None:
        raise ValueError("not a location")
    return loc
