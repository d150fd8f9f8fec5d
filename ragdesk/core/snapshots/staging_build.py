"""The resumable work of an import of a passage source, inside its staging folder.

``build.json`` there records the phase and the number of passages whose embeddings are
committed; a killed import run again with the same arguments resumes from that point. The
folder ends complete (manifest and checksums written) and is renamed into place by
:mod:`.builder`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ragdesk.core.atomic import fsync_dir, write_json_atomic
from ragdesk.core.catalog.records import utcnow
from ragdesk.core.encoders import as_computed, passage_inputs, token_length_order
from ragdesk.core.errors import (
    BadInputError,
    Cancelled,
    DiskFullError,
    RagdeskError,
    disk_full_message,
    is_disk_full,
)
from ragdesk.core.pages import release_pages
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.snapshots.checked import update_verified
from ragdesk.core.snapshots.chunking import PassageRow, passages
from ragdesk.core.snapshots.import_job import ImportJob
from ragdesk.core.snapshots.import_plan import ImportPlan
from ragdesk.core.snapshots.manifest import (
    EMBEDDINGS_FILE,
    FLAT,
    MANIFEST_FILE,
    Manifest,
    VariantEntry,
    checksum_files,
    read_manifest,
    write_manifest,
)
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE, PassageWriter
from ragdesk.core.snapshots.shards import check_ids, copy_shards
from ragdesk.core.snapshots.staged import STATE_FILE
from ragdesk.core.units import plural

log = logging.getLogger(__name__)

PHASE_PASSAGES = "passages"
PHASE_EMBEDDINGS = "embeddings"
PASSAGE_BATCH = 2000
ENCODE_WINDOW = 16  # batches re-sorted together by token count
COPY_ROWS = 65536
PRECOMPUTED = "precomputed"  # the passages' precision when the vectors came with the import


def _disk_full(exc: OSError, path: Path) -> RagdeskError | OSError:
    if is_disk_full(exc):
        return DiskFullError(disk_full_message(path))
    return exc


def _preallocate(path: Path, nbytes: int) -> None:
    """Reserve the embeddings' blocks now: a memory-mapped write to a sparse file on a full
    disk kills the process with SIGBUS instead of raising an error."""
    fd = os.open(path, os.O_RDWR)
    try:
        if hasattr(os, "posix_fallocate"):
            os.posix_fallocate(fd, 0, nbytes)
    except OSError as exc:
        raise _disk_full(exc, path) from exc
    finally:
        os.close(fd)


class StagingBuild:
    """The resumable work inside the staging folder."""

    def __init__(self, plan: ImportPlan, job: ImportJob, progress: ProgressCallback | None,
                 cancel: CancelToken | None,
                 on_stage: Callable[[str], None] | None = None) -> None:
        self.plan = plan
        self.on_stage = on_stage
        self.staging = job.work
        self.catalog = job.catalog
        self.job = job
        self.progress = progress
        self.cancel = cancel
        self.state: dict[str, Any] = {}

    # ---- state -----------------------------------------------------------------------

    def _save_state(self) -> None:
        write_json_atomic(self.staging / STATE_FILE, self.state)

    def _earlier_state(self) -> dict[str, Any] | None:
        """The state of an earlier attempt with the same arguments, if there is one."""
        try:
            state = json.loads((self.staging / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if isinstance(state, dict) and state.get("fingerprint") == self.plan.fingerprint():
            return state
        return None

    def _load_or_reset(self) -> None:
        """Resume a matching earlier attempt; anything else in the way is discarded."""
        state = self._earlier_state()
        if state is not None:
            self.state = state
            return
        if self.staging.exists():
            log.info("discarding staging folder %s from a different import", self.staging)
            shutil.rmtree(self.staging)
        try:
            self.staging.mkdir(parents=True)
        except OSError as exc:
            raise _disk_full(exc, self.staging) from exc
        self.state = {"fingerprint": self.plan.fingerprint(), "phase": PHASE_PASSAGES}
        self._save_state()

    def _check_cancel(self) -> None:
        if self.cancel is not None:
            self.cancel.raise_if_cancelled()

    # ---- phases ----------------------------------------------------------------------

    def run(self) -> Manifest:
        if (self.staging / MANIFEST_FILE).exists():
            if self._earlier_state() is not None:
                try:
                    return read_manifest(self.staging)  # complete; only the rename was missing
                except RagdeskError:
                    pass
            (self.staging / MANIFEST_FILE).unlink()
        self._load_or_reset()
        if self.state["phase"] == PHASE_PASSAGES:
            self._read_passages()
        n = int(self.state["passages"])
        writer = PassageWriter(self.staging / PASSAGES_FILE)
        try:
            if writer.count != n:
                raise RuntimeError(f"staging holds {writer.count} passages, expected {n}")
            if self.plan.shards is not None:
                self._copy_shards(n)
            elif self.plan.precomputed is not None:
                self._copy_embeddings(n)
            else:
                if self.plan.staged:
                    self._stage_sparse()
                self._encode(writer, n)
        finally:
            writer.close()
        if self.plan.staged and not self.plan.has_vectors:
            self._refresh_sparse(n)
        return self._write_manifest(n)

    def _stage_sparse(self) -> None:
        """Make the passages answerable with BM25 before any vector is computed.

        The BM25 index is built (or, on a resume, found) in ``staging/<slug>/bm25`` by the
        sparse store, which renames it into place only when complete; only after that does
        the catalog's ``stage`` say ``sparse``. It moves with the folder at the end.
        """
        from ragdesk.core.catalog import STAGE_SPARSE
        from ragdesk.core.snapshots.staged import StagedSnapshot
        from ragdesk.core.sparse.store import ensure_sparse

        snap = StagedSnapshot(self.plan.name, self.staging)
        try:
            ensure_sparse(snap, progress=self.progress, cancel=self.cancel)
        finally:
            snap.close()
        self.catalog.update_snapshot(self.plan.name, stage=STAGE_SPARSE, passages=snap.size)
        if self.on_stage is not None:
            self.on_stage(self.plan.name)

    def _refresh_sparse(self, n: int) -> None:
        """Give the staged BM25 index the passage norms the hybrid re-ranker reads."""
        from ragdesk.core.sparse.store import BM25_DIRNAME, refresh_norms

        folder = self.staging / BM25_DIRNAME
        if not folder.is_dir():
            return
        try:
            emb = np.load(self.staging / EMBEDDINGS_FILE, mmap_mode="r", allow_pickle=False)
            refresh_norms(folder, emb)
        except (OSError, ValueError, RagdeskError) as exc:
            # Not fatal: the sparse store rebuilds an index without norms on first use.
            log.warning("could not refresh the BM25 norms in %s: %s", folder, exc)

    def _read_passages(self) -> None:
        """Stream the source into passages.sqlite; restarted from scratch if interrupted."""
        db = self.staging / PASSAGES_FILE
        for leftover in (db, db.with_name(db.name + "-journal"), self.staging / EMBEDDINGS_FILE):
            leftover.unlink(missing_ok=True)
        src, limit = self.plan.source, self.plan.limit
        writer = PassageWriter(db)
        prog = Progress(src.size, f"reading {src.path.name}", self.progress, unit="bytes")
        batch: list[PassageRow] = []
        n = 0

        shown = [time.monotonic()]

        def reading() -> None:
            self._check_cancel()
            if time.monotonic() - shown[0] >= 0.25:  # lines without passages come fast
                shown[0] = time.monotonic()
                prog.set(src.bytes_read, f"reading {src.path.name}: {plural(n, 'passage')}")

        src.on_read = reading
        try:
            for row in passages(src.documents()):
                if limit is not None and n >= limit:
                    break
                batch.append(row)
                n += 1
                if len(batch) >= PASSAGE_BATCH:
                    self._check_cancel()
                    writer.add(batch)
                    batch = []
                    msg = f"reading {src.path.name}: {plural(n, 'passage')}"
                    prog.set(src.bytes_read, msg)
                    self.job.progress(n, None, msg)
            if batch:
                writer.add(batch)
        finally:
            src.on_read = None
            writer.close()
        if n == 0:
            raise BadInputError("contains no passages: no article text was found in it.",
                                path=src.path)
        prog.set(src.size, f"read {plural(n, 'passage')} from {src.path.name}")
        self.state.update(phase=PHASE_EMBEDDINGS, passages=n, encoded=0)
        self._save_state()

    def _open_embeddings(self, n: int, dim: int) -> np.ndarray:
        path = self.staging / EMBEDDINGS_FILE
        dtype = self.plan.dtype
        if int(self.state.get("encoded", 0)) == 0 or not path.exists():
            try:
                mm = np.lib.format.open_memmap(path, mode="w+", dtype=dtype, shape=(n, dim))
                del mm
            except OSError as exc:
                raise _disk_full(exc, path) from exc
            _preallocate(path, path.stat().st_size)
            self.state["encoded"] = 0
        try:
            mm = np.lib.format.open_memmap(path, mode="r+")
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"cannot reopen {path}: {exc}") from exc
        if mm.shape != (n, dim) or mm.dtype != dtype:
            raise RuntimeError(f"{path} has shape {mm.shape}, expected {(n, dim)}")
        return mm

    def _commit(self, mm: np.ndarray, done: int, total: int, msg: str) -> None:
        """Make the rows written so far durable, then record how far they go."""
        try:
            mm.flush()  # type: ignore[attr-defined]
        except OSError as exc:
            raise _disk_full(exc, self.staging / EMBEDDINGS_FILE) from exc
        release_pages(mm)  # written back: out of the RSS, or it grows with the corpus
        self.state["encoded"] = done
        self._save_state()
        self.job.progress(done, total, msg, force=done >= total)

    def _resume_point(self) -> tuple[int, int]:
        """Rows already encoded, and the batch size to go on with: the one the build started
        with, whatever this run was given. Batches are re-sorted by tokens within windows of
        batch_size × ENCODE_WINDOW, so under another size the rows written before would not
        be the ones skipped now, and the skipped ones would stay zero."""
        done = int(self.state.get("encoded", 0))
        started = int(self.state.get("batch_size") or 0)
        if done and started < 1:
            log.info("restarting the encoding: the interrupted run did not record its batch size")
            done = 0
        bs = started if done else self.plan.batch_size
        if bs != self.plan.batch_size:
            log.info("resuming with batch size %d, the one this import started with (not %d)",
                     bs, self.plan.batch_size)
        self.state["batch_size"] = bs
        return done, bs

    def _encode(self, writer: PassageWriter, n: int) -> None:
        enc = self.plan.encoder.at_precision(self.plan.precision.passages)
        self.state["precision"] = enc.precision  # what runs: float32 where bf16 cannot
        mm = self._open_embeddings(n, enc.info.dim)
        # Longest first, ties by id: the same order (and batch boundaries) on every run,
        # so a resumed import computes exactly what an uninterrupted one would.
        lengths = writer.lengths()
        order = np.lexsort((np.arange(n), -lengths))
        done, bs = self._resume_point()
        msg = "encoding passages" if done == 0 else f"encoding passages (resumed at {done:,})"
        prog = Progress(n, msg, self.progress, start_done=done)
        prog.set(done)
        written = done
        try:
            # Every batch is committed (msync + state file): a few milliseconds against the
            # hundreds a real encoder spends per batch.
            # Within a window of ENCODE_WINDOW batches (fixed boundaries, so a resume sees
            # the same batches), passages are re-sorted by token count: characters only
            # approximate it, and padding is what a batch wastes.
            window = bs * ENCODE_WINDOW
            for w_start in range(done - done % window, n, window):
                self._check_cancel()
                w_ids = order[w_start:w_start + window]
                rows = writer.fetch(w_ids.tolist())
                tokens = enc.tokenize(passage_inputs(enc, rows))
                by_tokens = token_length_order(tokens)
                for b in range(0, len(w_ids), bs):
                    if w_start + b < done:
                        continue  # encoded before the interruption
                    self._check_cancel()
                    sel = by_tokens[b:b + bs]
                    mm[w_ids[sel]] = enc.encode_tokenized([tokens[i] for i in sel])
                    written = w_start + b + len(sel)
                    self._commit(mm, written, n, msg)
                    prog.set(written)
        except (Cancelled, KeyboardInterrupt):
            if written > int(self.state.get("encoded", 0)):
                self._commit(mm, written, n, msg)  # keep every finished batch for the resume
            raise
        del mm

    def _copy_embeddings(self, n: int) -> None:
        src = self.plan.precomputed
        assert src is not None
        path = self.plan.precomputed_path
        limited = self.plan.limit is not None and n == self.plan.limit
        if src.shape[0] != n and not (limited and src.shape[0] >= n):
            raise BadInputError(
                f"has {src.shape[0]:,} rows, but the source gives {n:,} passages; row i must "
                "be the vector of passage i.", path=path,
                hint="Passages are the source's articles split into 100-word blocks (DPR TSV "
                "rows are used as they are).")
        mm = self._open_embeddings(n, src.shape[1])
        done = int(self.state.get("encoded", 0))
        prog = Progress(n, "copying embeddings", self.progress, start_done=done)
        for start in range(done, n, COPY_ROWS):
            self._check_cancel()
            stop = min(n, start + COPY_ROWS)
            block = np.asarray(src[start:stop])
            if not np.isfinite(block).all():
                bad = start + int(np.argwhere(~np.isfinite(block))[0][0])
                raise BadInputError(f"row {bad} holds a NaN or infinite value.", path=path)
            mm[start:stop] = block.astype(mm.dtype, copy=False)
            self._commit(mm, stop, n, "copying embeddings")
            prog.set(stop)
        del mm

    def _copy_shards(self, n: int) -> None:
        shards = self.plan.shards
        assert shards is not None
        limited = self.plan.limit is not None and n == self.plan.limit
        # nothing committed yet means a fresh embeddings file (see _open_embeddings)
        start = int(self.state.get("shards_done", 0)) if self.state.get("encoded") else 0
        if start == 0:
            # the ids are checked before any vector is copied: a gap or a duplicate found
            # after an hour of copying would waste it
            self.job.progress(0, n, "checking the embedding shards' ids", force=True)
            check_ids(shards, n, limited, self.cancel)
        mm = self._open_embeddings(n, shards.dim)
        prog = Progress(n, "copying embedding shards", self.progress,
                        start_done=int(self.state.get("encoded", 0)))

        def committed(shards_done: int, rows: int) -> None:
            self.state["shards_done"] = shards_done
            self._commit(mm, rows, n, "copying embedding shards")
            prog.set(rows)

        copy_shards(shards, mm, n, limited, start, committed, self.cancel)

    def _write_manifest(self, n: int) -> Manifest:
        info = self.plan.encoder.info
        stats: dict[str, os.stat_result] = {}
        files = checksum_files(self.staging, [PASSAGES_FILE, EMBEDDINGS_FILE], "checksumming",
                               self.progress, self.cancel, stats)
        emb_bytes = n * info.dim * self.plan.dtype.itemsize
        src = self.plan.source
        source: dict[str, object] = {"label": src.label, "format": src.fmt, "size": src.size,
                                  "limit": self.plan.limit}
        if src.site:
            source["site"] = src.site  # where citations of a MediaWiki dump link to
        passages = PRECOMPUTED if self.plan.has_vectors else str(
            self.state.get("precision", self.plan.precision.passages))
        if self.plan.precomputed_path is not None:
            source["embeddings"] = str(self.plan.precomputed_path)
        manifest = Manifest(
            name=self.plan.name, slug=self.plan.slug, created=utcnow(), source=source,
            passages=n, encoder=info, embeddings_dtype=self.plan.dtype.name, dim=info.dim,
            variants={FLAT: VariantEntry(EMBEDDINGS_FILE, emb_bytes, {}, 1.0, 0.0)},
            default_variant=FLAT, files=files,
            precision=as_computed(self.plan.precision, passages),
        )
        write_manifest(self.staging, manifest)
        # the checksums just taken count as the files' first check: a first open of a
        # large snapshot does not hash it all again
        update_verified(self.staging, manifest, stats, [])
        fsync_dir(self.staging)
        return manifest


