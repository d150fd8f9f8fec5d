"""``import_snapshot``: read a source, encode it in committed batches, rename it into place.

The snapshot is built in ``staging/<slug>/`` (:mod:`.staging_build`, from the checked
:mod:`.import_plan`), in the frame every import runs in (:mod:`.import_job`). A killed import
run again with the same arguments resumes where it stopped. Only a complete folder (manifest
and checksums written) is renamed to ``snapshots/<slug>/``, and only then does the catalog
say ``ready``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from ragdesk.core.atomic import remove_temp_files
from ragdesk.core.catalog import Catalog, SnapshotRecord, SnapshotState
from ragdesk.core.encoders import FLOAT32, TextEncoder
from ragdesk.core.errors import AlreadyExistsError, BadInputError
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.snapshots.import_job import (
    ImportJob,
    install,
    make_active_if_none,
    prepare,
    row_fields,
)
from ragdesk.core.snapshots.import_plan import ImportPlan, make_plan
from ragdesk.core.snapshots.lifecycle import RecoveryReport, mark_ready
from ragdesk.core.snapshots.manifest import read_manifest
from ragdesk.core.snapshots.sources import open_source
from ragdesk.core.snapshots.staged import STATE_FILE
from ragdesk.core.snapshots.staging_build import StagingBuild

log = logging.getLogger(__name__)

AGAIN = "run the same import again"  # how a user resumes one (see import_job.classify_failure)


def import_snapshot(
    data: DataDir,
    catalog: Catalog,
    source: str | os.PathLike[str],
    *,
    name: str,
    encoder: str | os.PathLike[str] | TextEncoder | None,
    fmt: str | None = None,
    limit: int | None = None,
    embeddings: Path | None = None,
    default_pack: str | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    batch_size: int = 64,
    staged: bool = False,
    on_stage: Callable[[str], None] | None = None,
    fast: bool = True,
    precision: str | None = None,
) -> SnapshotRecord:
    """Import a snapshot (see the module docstring); resumes an interrupted import of the
    same name and arguments. ``encoder`` may be None only for the Vital Articles source,
    which then uses the starter pack's all-MiniLM-L6-v2.

    ``staged``: build the BM25 index right after reading the passages, mark the snapshot
    answerable with BM25 (catalog ``stage`` = ``sparse``, see :mod:`.staged`) and call
    ``on_stage(name)``, then encode. ``precision``: "float32" or "bfloat16" for the
    passages and the questions asked of them (see :mod:`ragdesk.core.encoders.precision`;
    None: the encoder's default); ``fast`` False means float32 where none is given."""
    if not fast:
        precision = precision or FLOAT32
    if fmt == "docs" or (fmt is None and Path(source).is_dir()):
        # A folder of documents has its own importer (incremental, resumable per file).
        from ragdesk.core.documents import import_folder

        if limit is not None or embeddings is not None:
            raise BadInputError("--limit and --embeddings do not apply to a folder of documents.")
        return import_folder(data, catalog, source, name=name, encoder=encoder,
                             default_pack=default_pack, progress=progress, cancel=cancel,
                             batch_size=batch_size, precision=precision).record
    report = prepare(data, catalog)
    finished = _finished_by_recovery(data, catalog, report, name, source, fmt, limit)
    if finished is not None:
        return finished
    plan = make_plan(data, catalog, source, name, encoder, fmt, limit, embeddings, default_pack,
                 batch_size, precision)
    plan.staged = staged
    name = plan.name
    job = ImportJob(data, catalog, name, plan.slug, work=data.staging_dir / plan.slug,
                    again=AGAIN)
    with job.locked():
        # Checked again under the lock: another import may have finished since _plan.
        _recheck(catalog, name, plan.slug)
        return _import_locked(job, plan, progress, cancel, on_stage)


def _finished_by_recovery(data: DataDir, catalog: Catalog, report: RecoveryReport, name: str,
                          source: str | os.PathLike[str], fmt: str | None, limit: int | None
                          ) -> SnapshotRecord | None:
    """This import run again after a kill that came once its folder was complete, before
    the catalog said so: the recovery this call ran has just finished it, and running the
    import again is how a user resumes one, so it is done (not "already exists")."""
    name = name.strip()
    if name not in report.completed:
        return None
    rec = catalog.get_snapshot(name)
    made = read_manifest(data.snapshot_dir(rec.slug)).source
    if made.get("label") != open_source(source, fmt).label or made.get("limit") != limit:
        return None  # another import of that name: refused as usual
    log.info("the interrupted import of %s had finished its snapshot; recovered it", name)
    make_active_if_none(catalog, name)
    return rec


def _recheck(catalog: Catalog, name: str, slug: str) -> None:
    existing = catalog.find_snapshot(name)
    if existing is not None and existing.state == SnapshotState.READY.value:
        raise AlreadyExistsError(f"A snapshot named {name!r} already exists.",
                                 f"Pick another name, or remove it first with "
                                 f"`ragdesk index remove {name}`.")
    if existing is None and any(s.slug == slug for s in catalog.list_snapshots()):
        raise AlreadyExistsError(f"The name {name!r} gives the folder name {slug!r}, which "
                                 "another snapshot already uses.")


def _import_locked(job: ImportJob, plan: ImportPlan, progress: ProgressCallback | None,
                   cancel: CancelToken | None,
                   on_stage: Callable[[str], None] | None) -> SnapshotRecord:
    fields = row_fields(plan.encoder.info, plan.source.label, plan.default_pack)
    with job.running(fields):
        manifest = StagingBuild(plan, job, progress, cancel, on_stage).run()
        # a run killed while writing build.json left its temporary file; it must not
        # become part of the snapshot (this import holds the lock: no one else writes here)
        remove_temp_files(job.work)
        final = install(job.data, job.work, plan.slug)
        # Not in the manifest's file list; left behind harmlessly by a crash right here.
        (final / STATE_FILE).unlink(missing_ok=True)
        mark_ready(job.catalog, plan.name, manifest)
        job.done(manifest.passages)
    return job.finish()
