"""The frame every snapshot import runs in, whatever it reads.

A passage source (:mod:`.builder`) and a folder of documents
(:mod:`ragdesk.core.documents.importer`) are read, encoded and written differently, but both
run the same way: the data directory's recovery first, the import lock for the whole run,
the snapshot's catalog row and an import job, one rename of the finished folder into place,
and one rule for what a failure leaves behind. That rule is :func:`classify_failure`: work
that running the same import again can resume (cancelled, interrupted, the disk full, the
finished folder refused its rename) is kept; anything else may have left the work folder
half-written, so it is removed and the next run starts afresh.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from ragdesk.core.atomic import fsync_dir
from ragdesk.core.catalog import Catalog, SnapshotRecord, SnapshotState
from ragdesk.core.encoders import EncoderInfo
from ragdesk.core.errors import (
    Cancelled,
    CatalogError,
    DiskFullError,
    RagdeskError,
    SnapshotBusyError,
    is_disk_full,
)
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import locks
from ragdesk.core.snapshots.lifecycle import RecoveryReport, recover

log = logging.getLogger(__name__)

JOB_KIND = "import"
JOB_UPDATE_INTERVAL_S = 1.0  # one catalog write a second, not one per batch or file


def prepare(data: DataDir, catalog: Catalog) -> RecoveryReport:
    """The data directory made and what crashed imports left behind settled, so that this
    import sees the catalog as the last finished run left it."""
    data.ensure()
    return recover(data, catalog)


class RowFields(TypedDict):
    """The catalog columns an import writes when it starts (``Catalog.add_snapshot``'s)."""

    encoder_id: str
    encoder_family: str
    dim: int
    source: str
    default_pack: str | None


def row_fields(info: EncoderInfo, source: str, default_pack: str | None) -> RowFields:
    """The catalog columns an import writes when it starts."""
    return {"encoder_id": info.id, "encoder_family": info.family, "dim": info.dim,
            "source": source, "default_pack": default_pack}


@dataclass(frozen=True)
class Failure:
    """What a failed import records: the message, the job's state, and whether its work is
    kept for the next run to resume."""

    message: str
    job_state: str
    resumable: bool


def classify_failure(exc: BaseException, again: str) -> Failure:
    """The one rule for both importers. ``again`` says how the user resumes this import
    ("run the same import again"), for the messages that tell them to."""
    if isinstance(exc, OSError) and is_disk_full(exc):
        exc = DiskFullError(str(exc))
    if isinstance(exc, (Cancelled, KeyboardInterrupt)):
        return Failure(f"Cancelled; {again} to resume.", "cancelled", True)
    if isinstance(exc, DiskFullError):
        return Failure(f"{exc.message} Free some space and {again} to resume.", "failed", True)
    if isinstance(exc, SnapshotBusyError):
        return Failure(exc.message, "failed", True)
    if isinstance(exc, RagdeskError):
        return Failure(exc.message, "failed", False)
    return Failure(f"{type(exc).__name__}: {exc}", "failed", False)


def rename_folder(src: Path, dst: Path) -> None:
    """``os.rename``, with Windows' refusal to move a folder whose files are open (a staged
    snapshot answering holds its passages and BM25 index open) as a resumable error: the
    folder is complete, so a rerun must only rename it."""
    try:
        os.rename(src, dst)
    except PermissionError as exc:
        raise SnapshotBusyError(
            f"The finished snapshot could not be moved into place ({exc}).") from exc


def install(data: DataDir, finished: Path, slug: str) -> Path:
    """Rename the complete folder ``finished`` to the snapshot folder ``slug``, which must not
    exist yet; returns that folder."""
    final = data.snapshot_dir(slug)
    if final.exists():
        raise CatalogError(f"The folder {final} already exists but the catalog does not list a "
                           "ready snapshot there.",
                           "Move it aside (or remove the snapshot) and import again.")
    data.snapshots_dir.mkdir(parents=True, exist_ok=True)
    rename_folder(finished, final)
    fsync_dir(data.snapshots_dir)
    fsync_dir(data.staging_dir)
    return final


def make_active_if_none(catalog: Catalog, name: str) -> None:
    """The first snapshot a data directory gets is the one it answers from."""
    if catalog.active_snapshot() is None:
        catalog.set_active(name)


class ImportJob:
    """One run of an import of the snapshot ``name`` (folder ``slug``), whose work lives in
    ``work``; ``again`` is how the user resumes it (see :func:`classify_failure`)."""

    def __init__(self, data: DataDir, catalog: Catalog, name: str, slug: str, *, work: Path,
                 again: str) -> None:
        self.data, self.catalog = data, catalog
        self.name, self.slug, self.work, self.again = name, slug, work, again
        self.job_id = 0
        self._job_t = 0.0

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Held until the import ends: two imports of one name started together would
        otherwise share one work folder and catalog row."""
        with locks.hold_import(self.data, self.name, self.slug):
            yield

    @contextlib.contextmanager
    def running(self, fields: RowFields | None) -> Iterator[int]:
        """The import job (its id), with the snapshot's row marked importing with ``fields``;
        None leaves the row alone (a refresh of a ready snapshot, which keeps answering with
        its previous version whatever happens). A failure inside is recorded, and the work
        folder removed unless the failure is resumable, before it propagates."""
        owns_row = fields is not None
        if fields is not None:
            self._start_row(fields)
        self.job_id = self.catalog.create_job(JOB_KIND, self.name, pid=os.getpid())
        try:
            yield self.job_id
        except BaseException as exc:
            self._fail(exc, owns_row)
            raise

    def progress(self, done: int, total: int | None, message: str, force: bool = False) -> None:
        """The job's progress in the catalog (other processes list it), at most once per
        :data:`JOB_UPDATE_INTERVAL_S` unless ``force``."""
        now = time.monotonic()
        if force or now - self._job_t >= JOB_UPDATE_INTERVAL_S:
            self._job_t = now
            self.catalog.update_job(self.job_id, done=done, total=total, message=message)

    def done(self, passages: int, message: str = "done") -> None:
        self.catalog.update_job(self.job_id, state="done", done=passages, total=passages,
                                message=message)

    def finish(self) -> SnapshotRecord:
        """The snapshot's row after a successful run (made active if none is)."""
        make_active_if_none(self.catalog, self.name)
        return self.catalog.get_snapshot(self.name)

    def _start_row(self, fields: RowFields) -> None:
        if self.catalog.find_snapshot(self.name) is None:
            self.catalog.add_snapshot(self.name, f"snapshots/{self.slug}", slug=self.slug,
                                      state=SnapshotState.IMPORTING, **fields)
        else:
            # A failed or interrupted import that this run resumes; the stage is set again
            # once this run has checked (or rebuilt) its BM25 index.
            self.catalog.update_snapshot(self.name, state=SnapshotState.IMPORTING, error=None,
                                         passages=0, stage=None, **fields)

    def _fail(self, exc: BaseException, owns_row: bool) -> None:
        failure = classify_failure(exc, self.again)
        fields: dict[str, object] = {}
        if not failure.resumable:
            shutil.rmtree(self.work, ignore_errors=True)
            fields["stage"] = None  # nothing staged is left to answer from
        try:
            if owns_row:
                self.catalog.update_snapshot(self.name, state=SnapshotState.FAILED,
                                             error=failure.message, **fields)
            self.catalog.update_job(self.job_id, state=failure.job_state,
                                    message=failure.message)
        except RagdeskError:
            log.warning("could not record the failed import of %s", self.name, exc_info=True)
