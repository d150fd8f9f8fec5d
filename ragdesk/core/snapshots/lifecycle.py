"""Bringing the data directory back to a consistent state, and removing snapshots.

Every step that moves a snapshot is a single rename, and the catalog is updated after it;
``recover`` finishes or undoes whatever a crash interrupted between the two:

- an import whose process is gone: ``ready`` if its folder was already renamed into place
  (complete manifest), otherwise ``failed`` with its staging folder kept for resuming
  (a ``failed`` row whose folder is in place is completed the same way);
- staging folders that no import can resume (no catalog row, or the row is ready): deleted;
- ``staging/.remove-<slug>`` (a removal that was cut short): catalog row dropped, folder deleted;
- a complete snapshot folder the catalog does not know (e.g. after the catalog was replaced):
  registered again, so moving a broken catalog aside never loses snapshots;
- a folder re-import's swap cut short (its old version still in staging): a complete
  version put in place and the catalog brought in line with it (:func:`settle_folder_swap`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ragdesk.core.atomic import fsync_dir
from ragdesk.core.catalog import STAGE_SPARSE, Catalog, SnapshotRecord, SnapshotState
from ragdesk.core.errors import CatalogError, DensePendingError, NotFoundError, RagdeskError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import locks
from ragdesk.core.snapshots.faiss_variants import lists_files
from ragdesk.core.snapshots.folder_swap import old_dir, roll_swap
from ragdesk.core.snapshots.manifest import (
    FLAT,
    MANIFEST_FILE,
    Manifest,
    read_manifest,
    write_manifest,
)

log = logging.getLogger(__name__)

REMOVE_PREFIX = ".remove-"


@dataclass
class RecoveryReport:
    removed_staging: list[str] = field(default_factory=list)
    marked_failed: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)


def mark_ready(catalog: Catalog, name: str, manifest: Manifest) -> None:
    """Catalog entries for a snapshot whose complete folder is in place: its index variants
    first, then "ready". A kill between them leaves a row not ready yet, which the next
    ``recover`` completes; the other order left "ready" with no variant rows."""
    record_variants(catalog, name, manifest)
    info = manifest.encoder
    catalog.update_snapshot(name, state=SnapshotState.READY, passages=manifest.passages,
                            encoder_id=info.id, encoder_family=info.family, dim=info.dim,
                            error=None, stage=None)


def record_variants(catalog: Catalog, name: str, manifest: Manifest) -> list[str]:
    """Catalog rows for the manifest's index variants that lack one; their names."""
    have = {v.variant for v in catalog.get_snapshot(name).variants}
    missing = sorted(set(manifest.variants) - have)
    for variant in missing:
        entry = manifest.variants[variant]
        catalog.upsert_variant(
            name, variant, entry.file, bytes=entry.bytes,
            bytes_per_passage=entry.bytes / manifest.passages if manifest.passages else None,
            recall_at_20=entry.recall_at_20, params=entry.params)
    return missing


def _rmtree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _row_for_slug(catalog: Catalog, slug: str) -> SnapshotRecord | None:
    return next((r for r in catalog.list_snapshots() if r.slug == slug), None)


def recover(data: DataDir, catalog: Catalog) -> RecoveryReport:
    """Finish what crashed imports and removals left behind (cheap when nothing did)."""
    report = RecoveryReport()
    data.staging_dir.mkdir(parents=True, exist_ok=True)
    data.snapshots_dir.mkdir(parents=True, exist_ok=True)
    by_slug = {r.slug: r for r in catalog.list_snapshots()}
    _finish_removals(data, catalog, by_slug, report)
    for slug, rec in list(by_slug.items()):
        if settle_folder_swap(data, catalog, rec):
            report.completed.append(rec.name)
        _settle_unfinished(data, catalog, slug, rec, report)
    _close_finished_jobs(data, catalog, by_slug)
    # Folders are looked at first and the catalog read after: an import adds its catalog row
    # before it creates its staging folder, so a folder seen here has its row already.
    for d in sorted(data.staging_dir.iterdir()):
        if d.name.startswith("."):
            continue
        row = _row_for_slug(catalog, d.name)
        if row is None or row.state == SnapshotState.READY.value:
            _rmtree(d) if d.is_dir() else d.unlink(missing_ok=True)
            report.removed_staging.append(d.name)
    for d in sorted(data.snapshots_dir.iterdir()):
        _adopt(catalog, d, report)
    if any((report.removed_staging, report.marked_failed, report.completed, report.adopted)):
        log.info("recovered data directory %s: %s", data.root, report)
    return report


def settle_folder_swap(data: DataDir, catalog: Catalog, rec: SnapshotRecord, *,
                       locked: bool = False) -> bool:
    """Finish a folder re-import's swap that a kill cut short: a complete version (the new
    one if it was finished) in the snapshot's folder, the catalog's variant rows and counts
    made to match its manifest, and only then the old version dropped. Never while an
    import of it runs (``locked``: the caller holds that import's lock). Whether one was
    pending."""
    if not old_dir(data, rec.slug).exists():
        return False
    with contextlib.ExitStack() as stack:
        if not locked and not stack.enter_context(locks.try_hold_import(data, rec.slug)):
            return False
        if not roll_swap(data, rec.slug):
            return False  # finished by someone else meanwhile
        manifest = read_manifest(data.snapshot_dir(rec.slug))
        # Variants were built over the old vectors: the catalog keeps the folder's only.
        for v in catalog.get_snapshot(rec.name).variants:
            if v.variant not in manifest.variants:
                catalog.remove_variant(rec.name, v.variant)
        mark_ready(catalog, rec.name, manifest)
        _rmtree(old_dir(data, rec.slug))
        log.info("finished the interrupted folder swap of %s", rec.name)
    return True


def _finish_removals(data: DataDir, catalog: Catalog, by_slug: dict[str, SnapshotRecord],
                     report: RecoveryReport) -> None:
    """Removals that crashed after renaming the folder aside: drop the row and the folder."""
    for trash in sorted(data.staging_dir.glob(REMOVE_PREFIX + "*")):
        slug = trash.name[len(REMOVE_PREFIX):]
        rec = by_slug.pop(slug, None)
        if rec is not None and not data.snapshot_dir(slug).exists():
            with contextlib.suppress(NotFoundError):  # another process got there first
                catalog.remove_snapshot(rec.name)
        _rmtree(trash)
        report.removed_staging.append(trash.name)


def _close_finished_jobs(data: DataDir, catalog: Catalog,
                         by_slug: dict[str, SnapshotRecord]) -> None:
    """Import jobs still "running" for a snapshot that is ready and that no process imports:
    killed after the catalog rows, before the job's "done" (else shown as running forever)."""
    ready = {r.id: r for r in by_slug.values() if r.state == SnapshotState.READY.value}
    for job in catalog.list_jobs(state="running"):
        rec = ready.get(job.snapshot_id) if job.snapshot_id is not None else None
        if job.kind == "import" and rec is not None and not locks.import_running(data,
                                                                                 rec.slug):
            catalog.update_job(job.id, state="done", done=rec.passages, total=rec.passages,
                               message="done")


def _settle_unfinished(data: DataDir, catalog: Catalog, slug: str, rec: SnapshotRecord,
                       report: RecoveryReport) -> None:
    """A snapshot not marked ready: ready after all (its folder is complete), or an import
    no process runs any more (failed, resumable)."""
    if rec.state == SnapshotState.READY.value:
        return
    importing = rec.state == SnapshotState.IMPORTING.value
    if importing:
        if locks.import_running(data, rec.slug):
            return
        for job in catalog.list_jobs(state="running"):
            if job.snapshot_id == rec.id:
                catalog.update_job(job.id, state="interrupted", message="process ended")
    final = data.snapshot_dir(slug)
    if (final / MANIFEST_FILE).exists():
        # Only a complete staging folder is ever renamed here: the import got that far.
        try:
            mark_ready(catalog, rec.name, read_manifest(final))
            report.completed.append(rec.name)
            return
        except RagdeskError:
            log.warning("snapshot folder %s has an unreadable manifest", final)
    if not importing:
        return
    # A staged snapshot keeps its stage: its passages and BM25 index in the staging
    # folder are complete and still answer; the resume encodes the rest.
    catalog.update_snapshot(
        rec.name, state=SnapshotState.FAILED,
        error="The import was interrupted; run the same import again to resume it.")
    report.marked_failed.append(rec.name)


def _adopt(catalog: Catalog, d: Path, report: RecoveryReport) -> None:
    """A complete snapshot folder the catalog does not know (a restored catalog): add it."""
    if d.name.startswith(".") or not d.is_dir() or not (d / MANIFEST_FILE).exists():
        return
    if _row_for_slug(catalog, d.name) is not None:
        return
    try:
        manifest = read_manifest(d)
    except RagdeskError:
        log.warning("ignoring %s: its manifest cannot be read", d)
        return
    if manifest.slug != d.name or catalog.find_snapshot(manifest.name) is not None:
        log.warning("ignoring %s: it does not match the catalog", d)
        return
    catalog.add_snapshot(manifest.name, f"snapshots/{d.name}", slug=d.name,
                         state=SnapshotState.IMPORTING,
                         source=str(manifest.source.get("label") or ""))
    mark_ready(catalog, manifest.name, manifest)
    report.adopted.append(manifest.name)


def remove_snapshot(data: DataDir, catalog: Catalog, name: str) -> None:
    """Remove a snapshot: folder, staging leftovers and catalog entry.

    Whoever holds an open ``SnapshotIndex`` of it keeps searching it until they close it
    (open files outlive their directory entries).
    """
    rec = catalog.get_snapshot(name)
    if locks.import_running(data, rec.slug):
        raise CatalogError(locks.busy_message(catalog, rec), "Cancel that import first.")
    data.staging_dir.mkdir(parents=True, exist_ok=True)
    final = data.snapshot_dir(rec.slug)
    trash = data.staging_dir / (REMOVE_PREFIX + rec.slug)
    if trash.exists():
        _rmtree(trash)
    if final.exists():
        os.rename(final, trash)  # one atomic step: from here on the snapshot is gone
        fsync_dir(data.snapshots_dir)
    with contextlib.suppress(NotFoundError):  # a concurrent recovery may have finished it
        catalog.remove_snapshot(name)
    _rmtree(trash)
    _rmtree(data.staging_dir / rec.slug)
    (data.snapshots_dir / f".{rec.slug}.lock").unlink(missing_ok=True)


def snapshot_folder(data: DataDir, catalog: Catalog, name: str) -> tuple[Path, str]:
    """The folder of a ready snapshot, and its slug."""
    rec = catalog.get_snapshot(name)
    if rec.state != SnapshotState.READY.value and rec.stage == STAGE_SPARSE:
        raise DensePendingError(
            f"The snapshot {name!r} is still computing its dense vectors; until they are done "
            "it answers only with BM25.",
            "Ask with `--retriever sparse` meanwhile, or run its import (`ragdesk models "
            "setup-starter` for the starter pack) to finish it.")
    if rec.state != SnapshotState.READY.value:
        detail = f" ({rec.error})" if rec.error else ""
        raise NotFoundError(f"The snapshot {name!r} is {rec.state}, not ready{detail}.",
                            "See `ragdesk index list`; run its import again to finish it.")
    return data.snapshot_dir(rec.slug), rec.slug


def remove_variant(data: DataDir, catalog: Catalog, name: str, variant: str) -> None:
    """Drop one index variant (never ``flat``: it is the embeddings themselves)."""
    if variant == FLAT:
        raise CatalogError("The flat variant is the snapshot's embeddings and cannot be "
                           "removed on its own.", "Remove the whole snapshot instead.")
    folder, slug = snapshot_folder(data, catalog, name)
    with locks.snapshot_lock(data.snapshots_dir, slug):
        manifest = read_manifest(folder)
        entry = manifest.variants.pop(variant, None)
        if entry is None:
            raise NotFoundError(f"The snapshot {name!r} has no {variant} variant.")
        files = [entry.file, *lists_files(variant, manifest.files)]
        for f in files:
            manifest.files.pop(f, None)
        if manifest.default_variant == variant:
            manifest.default_variant = FLAT
        write_manifest(folder, manifest)
        catalog.remove_variant(name, variant)
        for f in files:
            (folder / f).unlink(missing_ok=True)


def set_default_variant(data: DataDir, catalog: Catalog, name: str, variant: str) -> None:
    """The variant ``open_snapshot`` uses for this snapshot when none is asked for."""
    folder, slug = snapshot_folder(data, catalog, name)
    with locks.snapshot_lock(data.snapshots_dir, slug):
        manifest = read_manifest(folder)
        if variant not in manifest.variants:
            have = ", ".join(sorted(manifest.variants))
            raise NotFoundError(f"The snapshot {name!r} has no {variant} variant (it has "
                                f"{have}).", f"Build it with `ragdesk index quantize {name} "
                                f"--variant {variant}`.")
        if manifest.default_variant != variant:
            manifest.default_variant = variant
            write_manifest(folder, manifest)
