"""``passages.sqlite``: passage id (= embedding row), title and text.

Written once in the staging folder (rollback journal, so the finished file is self-contained),
then only ever opened read-only and immutable, which needs no locks and writes nothing.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from ragdesk.core.errors import (
    CorruptSnapshotError,
    DiskFullError,
    disk_full_message,
    is_disk_full,
)
from ragdesk.core.snapshots.chunking import PassageRow
from ragdesk.core.types import Passage

PASSAGES_FILE = "passages.sqlite"
_IN_CHUNK = 500  # ids per "IN (...)" query, well under SQLite's variable limit

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS passages (id INTEGER PRIMARY KEY, title TEXT NOT NULL,"
    " text TEXT NOT NULL, source_id TEXT)",
)


@contextmanager
def sqlite_errors(path: Path) -> Iterator[None]:
    """SQLite reports a full disk as an OperationalError; give it the user-facing type."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if is_disk_full(exc):
            raise DiskFullError(disk_full_message(path)) from exc
        raise
    except sqlite3.DatabaseError as exc:
        raise CorruptSnapshotError(f"{path} is not a readable passage database ({exc}).") \
            from exc


class PassageWriter:
    """Appends passages with ids 0, 1, 2, ... in the staging folder."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with sqlite_errors(path):
            self._con = sqlite3.connect(path)
            self._con.execute("PRAGMA journal_mode = DELETE")
            self._con.execute("PRAGMA synchronous = NORMAL")
            for stmt in SCHEMA:
                self._con.execute(stmt)
            self._con.commit()
        self.count = self._count()

    def _count(self) -> int:
        with sqlite_errors(self.path):
            return int(self._con.execute("SELECT COUNT(*) FROM passages").fetchone()[0])

    def add(self, rows: Sequence[PassageRow]) -> None:
        """Add one batch in one transaction."""
        start = self.count
        with sqlite_errors(self.path):
            self._con.executemany(
                "INSERT INTO passages (id, title, text, source_id) VALUES (?, ?, ?, ?)",
                [(start + i, r.title, r.text, r.source_id) for i, r in enumerate(rows)],
            )
            self._con.commit()
        self.count += len(rows)

    def lengths(self) -> np.ndarray:
        """Characters of title + text per passage, indexed by id (to sort encoding batches)."""
        out = np.zeros(self.count, dtype=np.int64)
        with sqlite_errors(self.path):
            cur = self._con.execute("SELECT id, length(title) + length(text) FROM passages")
            while True:
                rows = cur.fetchmany(65536)
                if not rows:
                    break
                arr = np.asarray(rows, dtype=np.int64)
                out[arr[:, 0]] = arr[:, 1]
        return out

    def fetch(self, ids: Sequence[int]) -> list[tuple[str, str]]:
        """(title, text) for each id, in the order given."""
        found: dict[int, tuple[str, str]] = {}
        with sqlite_errors(self.path):
            for s in range(0, len(ids), _IN_CHUNK):
                part = [int(i) for i in ids[s:s + _IN_CHUNK]]
                marks = ",".join("?" * len(part))
                for pid, title, text in self._con.execute(
                        f"SELECT id, title, text FROM passages WHERE id IN ({marks})", part):
                    found[int(pid)] = (title, text)
        return [found[int(i)] for i in ids]

    def close(self) -> None:
        self._con.close()


class PassageReader:
    """Read-only access shared by threads (one connection behind a lock)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not path.is_file():
            raise CorruptSnapshotError(f"{path} is missing.")
        uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
        self._lock = threading.Lock()
        with sqlite_errors(path):
            self._con: sqlite3.Connection | None = sqlite3.connect(
                uri, uri=True, check_same_thread=False)
            self._con.execute("SELECT 1 FROM passages LIMIT 1").fetchall()

    def _conn(self) -> sqlite3.Connection:
        if self._con is None:
            raise RuntimeError(f"{self.path} is closed")
        return self._con

    def count(self) -> int:
        with self._lock, sqlite_errors(self.path):
            return int(self._conn().execute("SELECT COUNT(*) FROM passages").fetchone()[0])

    def get(self, ids: Sequence[int]) -> list[Passage]:
        wanted = [int(i) for i in ids]
        found: dict[int, Passage] = {}
        with self._lock, sqlite_errors(self.path):
            con = self._conn()
            for s in range(0, len(wanted), _IN_CHUNK):
                part = sorted(set(wanted[s:s + _IN_CHUNK]))
                marks = ",".join("?" * len(part))
                for pid, title, text in con.execute(
                        f"SELECT id, title, text FROM passages WHERE id IN ({marks})", part):
                    found[int(pid)] = Passage(int(pid), title, text)
        missing = [i for i in wanted if i not in found]
        if missing:
            raise CorruptSnapshotError(
                f"{self.path} has no passage with id {missing[0]} (of {len(missing)} missing).")
        return [found[i] for i in wanted]

    def rows(self, first: int, last: int) -> list[tuple[int, str, str, str | None]]:
        """(id, title, text, source id) of the passages ``first..last`` (inclusive), in id
        order: an article's passages have consecutive ids, so this reads around a citation."""
        with self._lock, sqlite_errors(self.path):
            return [(int(i), t, x, s) for i, t, x, s in self._conn().execute(
                "SELECT id, title, text, source_id FROM passages WHERE id BETWEEN ? AND ? "
                "ORDER BY id", (int(first), int(last)))]

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None
