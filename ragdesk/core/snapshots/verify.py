"""``verify_snapshot``: every checksum, then that every variant answers correctly."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragdesk.core.catalog import Catalog, SnapshotRecord
from ragdesk.core.errors import CorruptSnapshotError, RagdeskError, UnfinishedImportError
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_json import as_int
from ragdesk.core.snapshots.checked import file_problem, update_verified
from ragdesk.core.snapshots.index import SnapshotIndex
from ragdesk.core.snapshots.lifecycle import record_variants
from ragdesk.core.snapshots.locks import import_running
from ragdesk.core.snapshots.manifest import (
    EMBEDDINGS_FILE,
    Manifest,
    read_manifest,
)
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE

log = logging.getLogger(__name__)

PROBES = 5  # passages used as queries to check each variant
ZERO_CHUNK = 65536  # embedding rows read at a time when looking for unwritten ones


@dataclass
class VerifyReport:
    name: str
    folder: str
    checked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "folder": self.folder, "ok": self.ok,
                "checked": self.checked, "problems": self.problems}


def _check_answers(index: SnapshotIndex, report: VerifyReport) -> None:
    """Search with stored passage vectors: scores must be the exact inner products, and each
    passage must come back for its own vector (always for exact search; for most probes
    from a compressed index, whose candidates are approximate)."""
    emb = index.embeddings()
    n = index.size
    rows = np.unique(np.linspace(0, n - 1, num=min(PROBES, n)).astype(np.int64))
    queries = np.asarray(emb[rows], dtype=np.float32)
    k = min(10, n)
    scores, ids = index.search_ids(queries, k)
    label = f"index {index.variant}"
    found = 0
    for q, row, srow, irow in zip(queries, rows, scores, ids, strict=True):
        valid = irow >= 0
        if not valid.any():
            report.problems.append(f"{label}: returned no passage for passage {row}'s vector.")
            return
        if (irow[valid] >= n).any():
            report.problems.append(f"{label}: returned ids outside the {n:,} passages.")
            return
        exact = np.asarray(emb[irow[valid]], dtype=np.float32) @ q
        if not np.allclose(exact, srow[valid], rtol=1e-3, atol=1e-3):
            report.problems.append(f"{label}: scores differ from the exact inner products.")
            return
        self_score = float(q @ q)
        tol = 1e-3 * max(1.0, abs(self_score))
        if row in irow or srow[0] >= self_score - tol:
            found += 1
    needed = len(rows) if index.variant == "flat" else (len(rows) + 1) // 2
    if found < needed:
        report.problems.append(
            f"{label}: finds only {found} of {len(rows)} passages by their own vectors; the "
            "index does not match the embeddings.")
        return
    index.get_passages([int(i) for i in ids[ids >= 0][:k]])
    report.checked.append(f"{label} answers")


def verify_snapshot(data: DataDir, catalog: Catalog, name: str, *,
                    progress: ProgressCallback | None = None,
                    cancel: CancelToken | None = None,
                    raise_on_error: bool = True) -> VerifyReport:
    """Check a snapshot; raises :class:`CorruptSnapshotError` listing every problem found
    (or, with ``raise_on_error=False``, returns them in the report)."""
    rec = catalog.get_snapshot(name)
    folder = data.snapshot_dir(rec.slug)
    report = VerifyReport(name, str(folder))
    staging = data.staging_dir / rec.slug
    if rec.state != "ready" and not folder.is_dir() and staging.is_dir():
        # An interrupted import keeps its staging folder to be resumed: unfinished, not
        # damaged, and "remove it" would throw away the work done so far.
        return _unfinished(data, rec, report, raise_on_error)
    if rec.state != "ready":
        report.problems.append(f"the catalog marks it {rec.state}"
                               + (f": {rec.error}" if rec.error else "."))
    if not folder.is_dir():
        report.problems.append(f"its folder {folder} is missing.")
        return _finish(report, raise_on_error)
    try:
        manifest = read_manifest(folder)
    except RagdeskError as exc:
        report.problems.append(exc.message)
        return _finish(report, raise_on_error)
    report.checked.append("manifest.json")

    _check_files(folder, manifest, report, progress, cancel)
    if rec.passages != manifest.passages:
        report.problems.append(f"the catalog lists {rec.passages:,} passages, the manifest "
                               f"{manifest.passages:,}.")
    if rec.dim is not None and rec.dim != manifest.dim:
        report.problems.append(f"the catalog says {rec.dim}-d vectors, the manifest "
                               f"{manifest.dim}-d.")
    if not report.problems:
        _check_rows_written(folder, manifest, report, cancel)
    if report.problems:
        return _finish(report, raise_on_error)
    for variant in sorted(manifest.variants):
        if cancel is not None:
            cancel.raise_if_cancelled()
        _check_variant(name, folder, manifest, variant, report)
    if not report.problems and rec.state == "ready":
        _check_variant_rows(catalog, rec, manifest, report)
    return _finish(report, raise_on_error)


def _check_rows_written(folder: Path, manifest: Manifest, report: VerifyReport,
                        cancel: CancelToken | None) -> None:
    """No passage has an all-zero vector: the file is made full of zeros and every batch
    fills its rows, so a zero row is one that no batch wrote; its checksum, taken after,
    cannot tell (a resume with another batch size can leave such rows)."""
    emb = np.load(folder / EMBEDDINGS_FILE, mmap_mode="r")
    zero: list[int] = []
    for start in range(0, emb.shape[0], ZERO_CHUNK):
        if cancel is not None:
            cancel.raise_if_cancelled()
        block = np.asarray(emb[start:start + ZERO_CHUNK])
        zero += (np.flatnonzero(~block.any(axis=1)) + start).tolist()
    if zero:
        shown = ", ".join(str(i) for i in zero[:5]) + (", …" if len(zero) > 5 else "")
        report.problems.append(
            f"{EMBEDDINGS_FILE}: {len(zero):,} passages (ids {shown}) have all-zero vectors: "
            "they were never written, and no search can find them. Import the snapshot again.")
    else:
        report.checked.append("every passage has a vector")


def _check_variant_rows(catalog: Catalog, rec: SnapshotRecord, manifest: Manifest,
                        report: VerifyReport) -> None:
    """The catalog has a row for each index the manifest lists (and no other). A kill inside
    an older ragdesk's last catalog writes left "ready" with none; the manifest was just
    checked, so the rows are set from it."""
    extra = sorted({v.variant for v in rec.variants} - set(manifest.variants))
    for variant in extra:  # a removal killed between the manifest and the catalog
        catalog.remove_variant(rec.name, variant)
    if extra:
        report.checked.append(f"catalog rows of index {', '.join(extra)}, which the manifest "
                              "does not list, removed")
    restored = record_variants(catalog, rec.name, manifest)
    if restored:
        report.checked.append(f"catalog rows of index {', '.join(restored)} restored from "
                              "the manifest")


def _check_files(folder: Path, manifest: Manifest, report: VerifyReport,
                 progress: ProgressCallback | None, cancel: CancelToken | None) -> None:
    """Every file the snapshot needs is listed, present, of its size and checksum. The
    stamps that let an open skip hashing are refreshed: those of the files that match are
    recorded, those of the others dropped, so rot that kept every stamp is refused by the
    next open too."""
    needed = {PASSAGES_FILE, EMBEDDINGS_FILE} | {v.file for v in manifest.variants.values()}
    for f in sorted(needed - set(manifest.files)):
        report.problems.append(f"{f}: not listed in the manifest's checksums.")
    total = sum(as_int(m.get("size", 0)) for m in manifest.files.values())
    prog = Progress(total, "verifying checksums", progress, unit="bytes")
    passed: dict[str, os.stat_result] = {}
    failed: list[str] = []
    for fname, meta in sorted(manifest.files.items()):
        try:
            st = (folder / fname).stat()  # before hashing: a write during it shows later
        except OSError:
            st = None
        problem = file_problem(folder, fname, meta, prog, cancel)
        if problem is not None:
            report.problems.append(problem)
            failed.append(fname)
        else:
            report.checked.append(f"{fname} checksum")
            if st is not None:
                passed[fname] = st
    update_verified(folder, manifest, passed, failed)


def _check_variant(name: str, folder: Path, manifest: Manifest, variant: str,
                   report: VerifyReport) -> None:
    """The variant opens, holds the manifest's passages and answers searches."""
    try:
        index = SnapshotIndex(name, folder, manifest, variant)
    except RagdeskError as exc:
        report.problems.append(f"index {variant}: {exc.message}")
        return
    try:
        if index._passages.count() != manifest.passages:
            report.problems.append(f"{PASSAGES_FILE}: holds a different number of passages "
                                   f"than the manifest's {manifest.passages:,}.")
        _check_answers(index, report)
    except RagdeskError as exc:
        report.problems.append(f"index {variant}: {exc.message}")
    except Exception as exc:  # a damaged index can fail in any way; report it
        log.debug("verify %s/%s", name, variant, exc_info=True)
        report.problems.append(f"index {variant}: search failed ({exc}).")
    finally:
        index.close()


def _unfinished(data: DataDir, rec: SnapshotRecord, report: VerifyReport,
                raise_on_error: bool) -> VerifyReport:
    if import_running(data, rec.slug):
        problem = "its import is still running."
        hint = "Wait for the import to finish, then verify it."
    else:
        problem = ("its import was interrupted" + (f" ({rec.error})" if rec.error else "")
                   + "; it can be resumed.")
        source = f" {rec.source}" if rec.source else ""
        hint = (f"Run the same `ragdesk index import{source} --name {rec.name} ...` command "
                "again to resume it from its last committed batch (or remove it with "
                f"`ragdesk index remove {rec.name}`).")
    report.problems.append(f"not finished: {problem}")
    if raise_on_error:
        raise UnfinishedImportError(f"The snapshot {rec.name!r} is not finished: {problem}",
                                    hint)
    return report


def _finish(report: VerifyReport, raise_on_error: bool) -> VerifyReport:
    if report.problems and raise_on_error:
        listing = "\n  - ".join(report.problems)
        raise CorruptSnapshotError(
            f"The snapshot {report.name!r} is damaged:\n  - {listing}",
            f"Remove it with `ragdesk index remove {report.name}` and import it again (a "
            "damaged index variant alone can be rebuilt with `ragdesk index quantize`).")
    return report
