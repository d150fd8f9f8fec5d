"""Catalog access: transactional writes, safe sharing between processes (WAL + busy timeout)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import sqlite3
import threading
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import DatabaseError, OperationalError

from ragdesk.core.catalog.migrations import SCHEMA_VERSION, migrate
from ragdesk.core.errors import (
    AlreadyExistsError,
    CatalogBusyError,
    CatalogError,
    DiskFullError,
    NotFoundError,
    is_disk_full,
)

log = logging.getLogger(__name__)

ACTIVE_KEY = "active_snapshot"
BACKUP_SUFFIX = ".backup"  # catalog.sqlite.backup: the copy an emptied catalog comes back from


class SnapshotState(str, Enum):
    IMPORTING = "importing"
    READY = "ready"
    FAILED = "failed"


# SnapshotRecord.stage of a snapshot that is not ready yet but answers with BM25: its
# passages and sparse index are complete (in its staging folder); dense vectors are pending.
STAGE_SPARSE = "sparse"


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _name_digest(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def slugify(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name.strip()).strip("-.").lower()
    # A name with no Latin letter or digit keeps a folder name of its own.
    return slug[:64] or f"snapshot-{_name_digest(name)}"


def unique_slug(name: str, taken: Collection[str]) -> str:
    """The folder name for a new snapshot: :func:`slugify`, or when another snapshot already
    has that folder, the same with a short hash of the name appended.

    Distinct names can share a slug (names differing in case or punctuation; before the
    digest in :func:`slugify`, every name written only in non-Latin letters became
    ``snapshot``); refusing the second name for that was a puzzle the user could not solve
    from the message.
    """
    slug = slugify(name)
    if slug not in taken:
        return slug
    return f"{slug[:55]}-{_name_digest(name)}"


@dataclass(frozen=True)
class IndexVariantRecord:
    variant: str
    file: str
    bytes: int
    bytes_per_passage: float | None
    recall_at_20: float | None
    params: dict[str, Any]
    created_at: str


@dataclass(frozen=True)
class SnapshotRecord:
    id: int
    name: str
    slug: str
    folder: str
    state: str
    passages: int
    encoder_id: str | None
    encoder_family: str | None
    dim: int | None
    source: str | None
    error: str | None
    default_pack: str | None
    created_at: str
    variants: tuple[IndexVariantRecord, ...] = ()
    active: bool = False
    stage: str | None = None  # STAGE_SPARSE while an unfinished import answers with BM25

    @property
    def searchable(self) -> bool:
        """Whether questions can be asked of it now (ready, or BM25-ready while encoding)."""
        return self.state == SnapshotState.READY.value or self.stage == STAGE_SPARSE

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "slug": self.slug,
            "folder": self.folder,
            "state": self.state,
            "passages": self.passages,
            "encoder": self.encoder_id,
            "encoder_family": self.encoder_family,
            "dim": self.dim,
            "source": self.source,
            "error": self.error,
            "default_pack": self.default_pack,
            "created": self.created_at,
            "active": self.active,
            "stage": self.stage,
            "variants": [
                {
                    "variant": v.variant,
                    "file": v.file,
                    "bytes": v.bytes,
                    "bytes_per_passage": v.bytes_per_passage,
                    "recall_at_20": v.recall_at_20,
                    "params": v.params,
                }
                for v in self.variants
            ],
        }


@dataclass(frozen=True)
class ImportJobRecord:
    id: int
    snapshot_id: int | None
    kind: str
    state: str
    done: int
    total: int | None
    message: str | None
    started_at: str
    updated_at: str
    pid: int | None


@dataclass(frozen=True)
class ModelPackRecord:
    name: str
    kind: str
    question_encoder: str | None
    passage_encoder: str | None
    generator: str | None
    generator_kind: str | None
    details: dict[str, Any]
    created_at: str


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


def _sqlite_check(con: sqlite3.Connection, pragma: str) -> str | None:
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


def _translate(exc: BaseException, path: Path) -> Exception:
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


class Catalog:
    """One SQLite file. Every public method is one transaction."""

    def __init__(self, path: Path, busy_timeout_s: float = 15.0) -> None:
        self.path = Path(path)
        # What went wrong with the file and what was done about it, for the front end to
        # show; ``restored`` when it was put back from its backup (snapshots imported since
        # then are to be registered again from their folders: snapshots.recover does that).
        self.problem: str | None = None
        self.restored = False
        # Set when SQLite's own check fails: the backup is then never refreshed from it.
        self.damaged = False
        if self.path.exists() and self.path.stat().st_size == 0:
            self._replace_empty_file()
        if self.path.exists() and self.path.stat().st_size > 0:
            self._check_is_sqlite(busy_timeout_s)
        self.engine: Engine = create_engine(
            f"sqlite:///{self.path}",
            connect_args={"timeout": busy_timeout_s, "check_same_thread": False},
        )
        timeout_ms = int(busy_timeout_s * 1000)

        @event.listens_for(self.engine, "connect")
        def _on_connect(dbapi_conn: sqlite3.Connection, _record: Any) -> None:
            # Manage transactions ourselves so BEGIN IMMEDIATE takes the write lock up front.
            dbapi_conn.isolation_level = None
            cur = dbapi_conn.cursor()
            cur.execute(f"PRAGMA busy_timeout = {timeout_ms}")
            cur.execute("PRAGMA foreign_keys = ON")
            cur.execute("PRAGMA synchronous = NORMAL")
            # WAL lets readers and one writer from several processes share the file.
            cur.execute("PRAGMA journal_mode = WAL")
            cur.close()

        @event.listens_for(self.engine, "begin")
        def _on_begin(conn: Connection) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        try:
            with self.engine.begin() as conn:
                found = migrate(conn)
            if found != SCHEMA_VERSION:
                log.info("catalog %s migrated from v%d to v%d", self.path, found, SCHEMA_VERSION)
        except (DatabaseError, OperationalError, sqlite3.DatabaseError) as exc:
            self.engine.dispose()
            raise _translate(exc, self.path) from exc

        self._stamp = self._file_stamp()
        if not self.backup_path.exists():
            self._write_backup()

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
        the temporary copies (and journals) of writers killed mid-copy can be removed here:
        they stayed for good (issue 17).
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
                    problem = _sqlite_check(dst, "integrity_check")
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
                raise _translate(exc, self.path) from exc
            return  # cannot open or read it now (full disk, permissions): the real open
            # below reports that, with the hint for its cause
        except sqlite3.DatabaseError as exc:
            raise CatalogError(f"The catalog {self.path} is not an SQLite database.") from exc

    def _quick_check(self, con: sqlite3.Connection) -> None:
        """SQLite's quick structural check (milliseconds for a catalog): a damaged file is
        reported, with how to restore its backup, and never copied over that backup."""
        problem = _sqlite_check(con, "quick_check")
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

    def close(self) -> None:
        self.engine.dispose()
        if self._file_stamp() != self._stamp:
            self._write_backup()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except (DatabaseError, OperationalError) as exc:
            raise _translate(exc, self.path) from exc

    def schema_version(self) -> int:
        with self.transaction() as conn:
            return int(conn.execute(text("PRAGMA user_version")).scalar_one())

    # ---- snapshots -------------------------------------------------------------------

    def _variants(self, conn: Connection, snapshot_id: int) -> tuple[IndexVariantRecord, ...]:
        rows = conn.execute(
            text(
                "SELECT variant, file, bytes, bytes_per_passage, recall_at_20, params, created_at"
                " FROM index_variants WHERE snapshot_id = :s ORDER BY id"
            ),
            {"s": snapshot_id},
        ).all()
        return tuple(
            IndexVariantRecord(r[0], r[1], int(r[2]), r[3], r[4], json.loads(r[5] or "{}"), r[6])
            for r in rows
        )

    def _snapshot_from_row(self, conn: Connection, r: Any, active: str | None) -> SnapshotRecord:
        return SnapshotRecord(
            id=r.id, name=r.name, slug=r.slug, folder=r.folder, state=r.state,
            passages=int(r.passages), encoder_id=r.encoder_id, encoder_family=r.encoder_family,
            dim=r.dim, source=r.source, error=r.error, default_pack=r.default_pack,
            created_at=r.created_at, variants=self._variants(conn, r.id),
            active=(r.name == active),
            stage=None if r.state == SnapshotState.READY.value else r.stage,
        )

    def list_snapshots(self) -> list[SnapshotRecord]:
        with self.transaction() as conn:
            active = self._get_state(conn, ACTIVE_KEY)
            rows = conn.execute(text("SELECT * FROM snapshots ORDER BY created_at, id")).all()
            return [self._snapshot_from_row(conn, r, active) for r in rows]

    def find_snapshot(self, name: str) -> SnapshotRecord | None:
        with self.transaction() as conn:
            active = self._get_state(conn, ACTIVE_KEY)
            r = conn.execute(text("SELECT * FROM snapshots WHERE name = :n"), {"n": name}).first()
            return self._snapshot_from_row(conn, r, active) if r is not None else None

    def get_snapshot(self, name: str) -> SnapshotRecord:
        rec = self.find_snapshot(name)
        if rec is None:
            raise NotFoundError(f"There is no snapshot named {name!r}.")
        return rec

    def add_snapshot(
        self,
        name: str,
        folder: str,
        *,
        slug: str | None = None,
        state: SnapshotState = SnapshotState.IMPORTING,
        passages: int = 0,
        encoder_id: str | None = None,
        encoder_family: str | None = None,
        dim: int | None = None,
        source: str | None = None,
        default_pack: str | None = None,
    ) -> SnapshotRecord:
        slug = slug or slugify(name)
        with self.transaction() as conn:
            clash = conn.execute(
                text("SELECT name FROM snapshots WHERE name = :n OR slug = :s"),
                {"n": name, "s": slug},
            ).first()
            if clash is not None:
                raise AlreadyExistsError(f"A snapshot named {clash[0]!r} already exists.")
            conn.execute(
                text(
                    "INSERT INTO snapshots (name, slug, folder, state, passages, encoder_id,"
                    " encoder_family, dim, source, default_pack, created_at) VALUES (:name,"
                    " :slug, :folder, :state, :passages, :enc, :fam, :dim, :source, :pack, :now)"
                ),
                {"name": name, "slug": slug, "folder": folder, "state": state.value,
                 "passages": passages, "enc": encoder_id, "fam": encoder_family, "dim": dim,
                 "source": source, "pack": default_pack, "now": utcnow()},
            )
        return self.get_snapshot(name)

    def update_snapshot(self, name: str, **fields: Any) -> None:
        allowed = {"folder", "state", "passages", "encoder_id", "encoder_family", "dim",
                   "source", "error", "default_pack", "stage"}
        bad = set(fields) - allowed
        if bad:
            raise ValueError(f"unknown snapshot fields: {sorted(bad)}")
        if "state" in fields and isinstance(fields["state"], SnapshotState):
            fields["state"] = fields["state"].value
        sets = ", ".join(f"{k} = :{k}" for k in fields)
        with self.transaction() as conn:
            res = conn.execute(
                text(f"UPDATE snapshots SET {sets} WHERE name = :_name"),
                {**fields, "_name": name},
            )
            if res.rowcount == 0:
                raise NotFoundError(f"There is no snapshot named {name!r}.")

    def remove_snapshot(self, name: str) -> None:
        with self.transaction() as conn:
            res = conn.execute(text("DELETE FROM snapshots WHERE name = :n"), {"n": name})
            if res.rowcount == 0:
                raise NotFoundError(f"There is no snapshot named {name!r}.")
            if self._get_state(conn, ACTIVE_KEY) == name:
                self._set_state(conn, ACTIVE_KEY, None)

    def upsert_variant(
        self,
        snapshot: str,
        variant: str,
        file: str,
        *,
        bytes: int,
        bytes_per_passage: float | None = None,
        recall_at_20: float | None = None,
        params: dict[str, Any] | None = None,
    ) -> None:
        with self.transaction() as conn:
            sid = conn.execute(
                text("SELECT id FROM snapshots WHERE name = :n"), {"n": snapshot}
            ).scalar()
            if sid is None:
                raise NotFoundError(f"There is no snapshot named {snapshot!r}.")
            conn.execute(
                text(
                    "INSERT INTO index_variants (snapshot_id, variant, file, bytes,"
                    " bytes_per_passage, recall_at_20, params, created_at) VALUES (:s, :v, :f,"
                    " :b, :bpp, :r, :p, :now) ON CONFLICT (snapshot_id, variant) DO UPDATE SET"
                    " file = excluded.file, bytes = excluded.bytes,"
                    " bytes_per_passage = excluded.bytes_per_passage,"
                    " recall_at_20 = excluded.recall_at_20, params = excluded.params,"
                    " created_at = excluded.created_at"
                ),
                {"s": sid, "v": variant, "f": file, "b": bytes, "bpp": bytes_per_passage,
                 "r": recall_at_20, "p": json.dumps(params or {}, sort_keys=True),
                 "now": utcnow()},
            )

    def remove_variant(self, snapshot: str, variant: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                text(
                    "DELETE FROM index_variants WHERE variant = :v AND snapshot_id ="
                    " (SELECT id FROM snapshots WHERE name = :n)"
                ),
                {"v": variant, "n": snapshot},
            )

    # ---- active snapshot -------------------------------------------------------------

    @staticmethod
    def _get_state(conn: Connection, key: str) -> str | None:
        v = conn.execute(text("SELECT value FROM app_state WHERE key = :k"), {"k": key}).scalar()
        return None if v is None else str(v)

    @staticmethod
    def _set_state(conn: Connection, key: str, value: str | None) -> None:
        if value is None:
            conn.execute(text("DELETE FROM app_state WHERE key = :k"), {"k": key})
        else:
            conn.execute(
                text(
                    "INSERT INTO app_state (key, value) VALUES (:k, :v)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value"
                ),
                {"k": key, "v": value},
            )

    def active_snapshot(self) -> str | None:
        with self.transaction() as conn:
            return self._get_state(conn, ACTIVE_KEY)

    def set_active(self, name: str | None) -> None:
        with self.transaction() as conn:
            if name is not None:
                row = conn.execute(
                    text("SELECT state, stage FROM snapshots WHERE name = :n"), {"n": name}
                ).first()
                if row is None:
                    raise NotFoundError(f"There is no snapshot named {name!r}.")
                state = row[0]
                if state != SnapshotState.READY.value and row[1] != STAGE_SPARSE:
                    raise CatalogError(
                        f"The snapshot {name!r} is {state}, not ready.",
                        "Only a ready snapshot can be made active; see `ragdesk index list`.",
                    )
            self._set_state(conn, ACTIVE_KEY, name)

    # ---- import jobs -----------------------------------------------------------------

    def create_job(self, kind: str, snapshot: str | None, total: int | None = None,
                   pid: int | None = None) -> int:
        with self.transaction() as conn:
            sid = None
            if snapshot is not None:
                sid = conn.execute(
                    text("SELECT id FROM snapshots WHERE name = :n"), {"n": snapshot}
                ).scalar()
            now = utcnow()
            res = conn.execute(
                text(
                    "INSERT INTO import_jobs (snapshot_id, kind, state, done, total, started_at,"
                    " updated_at, pid) VALUES (:s, :k, 'running', 0, :t, :now, :now, :pid)"
                ),
                {"s": sid, "k": kind, "t": total, "now": now, "pid": pid},
            )
            return int(res.lastrowid)

    def update_job(self, job_id: int, *, done: int | None = None, total: int | None = None,
                   state: str | None = None, message: str | None = None) -> None:
        fields: dict[str, Any] = {"updated_at": utcnow()}
        if done is not None:
            fields["done"] = done
        if total is not None:
            fields["total"] = total
        if state is not None:
            fields["state"] = state
        if message is not None:
            fields["message"] = message
        sets = ", ".join(f"{k} = :{k}" for k in fields)
        with self.transaction() as conn:
            conn.execute(text(f"UPDATE import_jobs SET {sets} WHERE id = :_id"),
                         {**fields, "_id": job_id})

    def list_jobs(self, state: str | None = None) -> list[ImportJobRecord]:
        q = "SELECT * FROM import_jobs" + (" WHERE state = :st" if state else "") + " ORDER BY id"
        with self.transaction() as conn:
            rows = conn.execute(text(q), {"st": state}).all()
        return [ImportJobRecord(r.id, r.snapshot_id, r.kind, r.state, r.done, r.total, r.message,
                                r.started_at, r.updated_at, r.pid) for r in rows]

    # ---- model packs -----------------------------------------------------------------

    def add_model_pack(self, name: str, kind: str, *, question_encoder: str | None,
                       passage_encoder: str | None, generator: str | None,
                       generator_kind: str | None, details: dict[str, Any] | None = None,
                       replace: bool = False) -> None:
        with self.transaction() as conn:
            exists = conn.execute(
                text("SELECT 1 FROM model_packs WHERE name = :n"), {"n": name}
            ).first()
            if exists and not replace:
                raise AlreadyExistsError(f"A model pack named {name!r} already exists.")
            conn.execute(
                text(
                    "INSERT INTO model_packs (name, kind, question_encoder, passage_encoder,"
                    " generator, generator_kind, details, created_at) VALUES (:n, :k, :q, :p,"
                    " :g, :gk, :d, :now) ON CONFLICT (name) DO UPDATE SET kind = excluded.kind,"
                    " question_encoder = excluded.question_encoder,"
                    " passage_encoder = excluded.passage_encoder, generator = excluded.generator,"
                    " generator_kind = excluded.generator_kind, details = excluded.details"
                ),
                {"n": name, "k": kind, "q": question_encoder, "p": passage_encoder,
                 "g": generator, "gk": generator_kind,
                 "d": json.dumps(details or {}, sort_keys=True), "now": utcnow()},
            )

    def list_model_packs(self) -> list[ModelPackRecord]:
        with self.transaction() as conn:
            rows = conn.execute(text("SELECT * FROM model_packs ORDER BY name")).all()
        return [ModelPackRecord(r.name, r.kind, r.question_encoder, r.passage_encoder,
                                r.generator, r.generator_kind, json.loads(r.details or "{}"),
                                r.created_at) for r in rows]

    def remove_model_pack(self, name: str) -> None:
        with self.transaction() as conn:
            res = conn.execute(text("DELETE FROM model_packs WHERE name = :n"), {"n": name})
            if res.rowcount == 0:
                raise NotFoundError(f"There is no imported model pack named {name!r}.")

    # ---- generic state ---------------------------------------------------------------

    def get_state(self, key: str) -> str | None:
        with self.transaction() as conn:
            return self._get_state(conn, key)

    def set_state(self, key: str, value: str | None) -> None:
        with self.transaction() as conn:
            self._set_state(conn, key, value)
