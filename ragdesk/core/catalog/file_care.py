"""Keeping the catalog's one SQLite file usable: a checked backup beside it, a file emptied
by a crash put back from that backup, damage found by SQLite's own check reported with how
to restore, and SQLite's failures translated into errors that say what to do.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import threading
import time
from pathlib import Path

from ragdesk.core.errors import (
    CatalogBusyError,
    CatalogError,
    DiskFullError,
    is_disk_full,
)

log = logging.getLogger(__name__)

BACKUP_SUFFIX = ".backup"  # catalog.sqlite.backup: the copy an emptied catalog comes back from


# Below this much free space, an SQLite I/O failure is taken for a full disk: SQLite then
# says "disk I/O error" or "unable to open database file" rather than "disk is full".
_NEARLY_FULL = 4 << 20


def _disk_nearly_full(path: Path) -> bool:
    try:
        return shutil.disk_usage(path.parent).free < _NEARLY_FULL
    except OSError:
        return False


def restore_hint(path: Path) -> str:
    """How to put a damaged catalog's backup in its place, by hand (the WAL and its index
    go too: replayed onto the backup, they would damage it)."""
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if not backup.exists():
        return CatalogError.hint_default
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(backup.stat().st_mtime))
    return (f"Its backup of {when} is kept as it was; to go back to it, close ragdesk and "
            f"run: mv {path} {path}.damaged && rm -f {path}-wal {path}-shm && cp {backup} {path} "
            "(snapshots imported since then are registered again from their folders; model "
            "packs imported since then must be imported again).")


def sqlite_check(con: sqlite3.Connection, pragma: str) -> str | None:
    """The first problem ``PRAGMA quick_check`` / ``integrity_check`` finds (None: ok); a
    busy or unreadable file raises (OperationalError), it is not damage."""
    try:
        rows = con.execute(f"PRAGMA {pragma}").fetchall()
    except sqlite3.OperationalError:
        raise
    except sqlite3.DatabaseError as exc:  # "database disk image is malformed"
        return str(exc)
    first = str(rows[0][0]) if rows else "no answer"
    return None if first == "ok" else " ".join(first.split())


def translate(exc: BaseException, path: Path) -> Exception:
    msg = str(getattr(exc, "orig", exc))
    if "locked" in msg or "busy" in msg:
        return CatalogBusyError(f"The catalog {path} is locked by another process.")
    if ("disk" in msg and "full" in msg) or _disk_nearly_full(path) or is_disk_full(exc):
        # Checked before the "not a database" cases: on a full disk the file is fine, and
        # "move the file aside" would be the wrong advice.
        return DiskFullError(f"The disk is full while using the catalog {path} ({msg}).")
    if "not a database" in msg or "malformed" in msg or "file is encrypted" in msg:
        return CatalogError(f"The catalog {path} is not a valid ragdesk database ({msg}).",
                            restore_hint(path))
    if "readonly" in msg or "unable to open" in msg:
        return CatalogError(
            f"The catalog {path} cannot be opened for writing ({msg}).",
            "Check the permissions of the data directory, or choose another with --data-dir.",
        )
    return CatalogError(f"The catalog {path} could not be used: {msg}.")


class CatalogFile:
    """The file care :class:`~ragdesk.core.catalog.catalog.Catalog` inherits: what went wrong
    with its file and what was done about it, for the front end to show."""

    path: Path
    # ``restored`` when the file was put back from its backup (snapshots imported since
    # then are to be registered again from their folders: snapshots.recover does that).
    problem: str | None
    restored: bool
    # Set when SQLite's own check fails: the backup is then never refreshed from it.
    damaged: bool

    @property
    def backup_path(self) -> Path:
        return self.path.with_name(self.path.name + BACKUP_SUFFIX)

    def _file_stamp(self) -> tuple[int, ...]:
        stamp: list[int] = []
        for p in (self.path, self.path.with_name(self.path.name + "-wal")):
            try:
                st = p.stat()
                stamp += [st.st_size, st.st_mtime_ns]
            except OSError:
                stamp += [-1, -1]
        return tuple(stamp)

    def _write_backup(self) -> None:
        """A consistent copy beside the catalog (SQLite's online backup), replaced atomically;
        what a catalog found empty is restored from. Never fails the caller.

        One process at a time (a file lock; another busy with it makes a copy as recent), so
        the temporary copies (and journals) of writers killed mid-copy can be removed here;
        nothing else ever would.
        """
        from filelock import FileLock, Timeout

        lock = FileLock(str(self.path.with_name(f".{self.backup_path.name}.lock")))
        try:
            lock.acquire(timeout=0)
        except (Timeout, OSError):
            return
        try:
            for stale in self.path.parent.glob(f".{self.backup_path.name}.tmp-*"):
                stale.unlink(missing_ok=True)
            self._copy_to_backup()
        finally:
            lock.release()

    def _copy_to_backup(self) -> None:
        if self.damaged:
            return  # the last good copy is worth more than a copy of the damage
        tmp = self.path.with_name(f".{self.backup_path.name}.tmp-{os.getpid()}-"
                                  f"{threading.get_ident()}")
        try:
            src = sqlite3.connect(str(self.path), timeout=1.0)
            try:
                dst = sqlite3.connect(str(tmp))
                try:
                    src.backup(dst)
                    # The online backup copies damaged pages as they are: check the copy
                    # (a consistent snapshot of the live file) before it replaces the
                    # last good one.
                    problem = sqlite_check(dst, "integrity_check")
                finally:
                    dst.close()
            finally:
                src.close()
            if problem is not None:
                self.damaged = True
                log.warning("the catalog %s fails SQLite's integrity check (%s); its backup "
                            "%s was kept as it was", self.path, problem, self.backup_path)
                tmp.unlink(missing_ok=True)
                return
            os.replace(tmp, self.backup_path)
        except (OSError, sqlite3.Error):
            log.warning("could not back up the catalog %s", self.path, exc_info=True)
            tmp.unlink(missing_ok=True)

    def _check_is_sqlite(self, timeout_s: float) -> None:
        """Refuse a file that is not an SQLite database, asking SQLite itself.

        Not by reading its header with open(): POSIX locks belong to the process, and closing
        any handle on the file drops every lock this process holds on it, those of another
        Catalog's connections included; another process could then checkpoint and delete the
        WAL under them ("disk I/O error"). SQLite's own connections share one lock record
        per file and never do that."""
        try:
            con = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                                  timeout=timeout_s)
            try:
                con.execute("PRAGMA schema_version").fetchone()
                self._quick_check(con)
            finally:
                con.close()
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                # Held exclusively for the whole busy timeout: waiting again in the real
                # open below would double what the timeout promises.
                raise translate(exc, self.path) from exc
            return  # cannot open or read it now (full disk, permissions): the real open
            # below reports that, with the hint for its cause
        except sqlite3.DatabaseError as exc:
            raise CatalogError(f"The catalog {self.path} is not an SQLite database.") from exc

    def _quick_check(self, con: sqlite3.Connection) -> None:
        """SQLite's quick structural check (milliseconds for a catalog): a damaged file is
        reported, with how to restore its backup, and never copied over that backup."""
        problem = sqlite_check(con, "quick_check")
        if problem is None:
            return
        self.damaged = True
        self.problem = (f"The catalog {self.path} is damaged (SQLite's check says: "
                        f"{problem[:200]}). " + restore_hint(self.path))
        log.warning("%s", self.problem)

    def _replace_empty_file(self) -> None:
        """A catalog of 0 bytes is one that was truncated (SQLite never leaves one): put its
        backup in its place, or say exactly what a new, empty catalog means."""
        backup = self.backup_path
        try:
            with open(backup, "rb") as fh:
                usable = fh.read(16) == b"SQLite format 3\x00"
        except OSError:
            usable = False
        if not usable:
            # No backup: either brand new (SQLite creates the file empty, and a second process
            # can see it so for a moment) or lost before its first backup. Only snapshot
            # folders beside it tell the second case from the first.
            if not any((self.path.parent / "snapshots").glob("*/manifest.json")):
                return
            self.problem = (
                f"The catalog {self.path} was empty (0 bytes) and has no usable backup; a new "
                "one was made. Snapshot folders are registered again from their manifests "
                "(`ragdesk index list`); choose the active one again with `ragdesk index "
                "switch NAME`, and import custom model packs again with `ragdesk models "
                "import`.")
            log.warning("%s", self.problem)
            return
        stamp = time.strftime("%Y%m%d-%H%M%S")
        for suffix in ("-wal", "-shm"):
            # Leftovers of the lost file must not be replayed onto the restored one.
            side = self.path.with_name(self.path.name + suffix)
            if side.exists():
                os.replace(side, side.with_name(f"{side.name}.orphan-{stamp}"))
        tmp = self.path.with_name(f".{self.path.name}.restore-{os.getpid()}")
        shutil.copyfile(backup, tmp)
        os.replace(tmp, self.path)
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(backup.stat().st_mtime))
        self.restored = True
        self.problem = (
            f"The catalog {self.path} was empty (0 bytes); it was restored from its backup "
            f"of {when}. Snapshots imported since then are registered again from their "
            "folders; a model pack imported since then must be imported again "
            "(`ragdesk models list` shows the packs the catalog knows).")
        log.warning("%s", self.problem)
