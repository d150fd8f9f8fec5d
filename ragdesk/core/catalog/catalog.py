"""Catalog access: transactional writes, safe sharing between processes (WAL + busy timeout)."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.exc import DatabaseError, OperationalError

from ragdesk.core.catalog.file_care import CatalogFile, translate
from ragdesk.core.catalog.migrations import SCHEMA_VERSION, migrate
from ragdesk.core.catalog.records import (
    STAGE_SPARSE,
    ImportJobRecord,
    IndexVariantRecord,
    ModelPackRecord,
    SnapshotRecord,
    SnapshotState,
    slugify,
    utcnow,
)
from ragdesk.core.errors import (
    AlreadyExistsError,
    CatalogError,
    NoSuchPackError,
    NoSuchSnapshotError,
)

log = logging.getLogger(__name__)

ACTIVE_KEY = "active_snapshot"


class Catalog(CatalogFile):
    """One SQLite file. Every public method is one transaction."""

    def __init__(self, path: Path, busy_timeout_s: float = 15.0) -> None:
        self.path = Path(path)
        self.problem = None  # see CatalogFile
        self.restored = False
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
        def _on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
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
            raise translate(exc, self.path) from exc

        self._stamp = self._file_stamp()
        if not self.backup_path.exists():
            self._write_backup()

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
            raise translate(exc, self.path) from exc

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
            raise NoSuchSnapshotError(f"There is no snapshot named {name!r}.")
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

    def update_snapshot(self, name: str, **fields: object) -> None:
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
                raise NoSuchSnapshotError(f"There is no snapshot named {name!r}.")

    def remove_snapshot(self, name: str) -> None:
        with self.transaction() as conn:
            res = conn.execute(text("DELETE FROM snapshots WHERE name = :n"), {"n": name})
            if res.rowcount == 0:
                raise NoSuchSnapshotError(f"There is no snapshot named {name!r}.")
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
        params: dict[str, object] | None = None,
    ) -> None:
        with self.transaction() as conn:
            sid = conn.execute(
                text("SELECT id FROM snapshots WHERE name = :n"), {"n": snapshot}
            ).scalar()
            if sid is None:
                raise NoSuchSnapshotError(f"There is no snapshot named {snapshot!r}.")
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
                    raise NoSuchSnapshotError(f"There is no snapshot named {name!r}.")
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
        fields: dict[str, object] = {"updated_at": utcnow()}
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
                       generator_kind: str | None, details: dict[str, object] | None = None,
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
                raise NoSuchPackError(f"There is no imported model pack named {name!r}.")

    # ---- generic state ---------------------------------------------------------------

    def get_state(self, key: str) -> str | None:
        with self.transaction() as conn:
            return self._get_state(conn, key)

    def set_state(self, key: str, value: str | None) -> None:
        with self.transaction() as conn:
            self._set_state(conn, key, value)
