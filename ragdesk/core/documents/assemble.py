"""Writing the snapshot folder of a document import: passages, vectors, the folder record,
the manifest. Everything is re-assembled from the per-file results on each run: copying
rows is cheap next to encoding them."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ragdesk.core.atomic import fsync_dir, write_json_atomic
from ragdesk.core.catalog.records import utcnow
from ragdesk.core.documents.folder import DOCUMENTS_FILE, FileEntry, FolderRecord
from ragdesk.core.documents.model import DocPassage
from ragdesk.core.encoders import EncoderInfo, EncoderPrecision
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.snapshots.checked import update_verified
from ragdesk.core.snapshots.chunking import PassageRow
from ragdesk.core.snapshots.manifest import (
    EMBEDDINGS_FILE,
    FLAT,
    Manifest,
    VariantEntry,
    checksum_files,
    write_manifest,
)
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE, PassageWriter

DOCS_FORMAT = "docs"


@dataclass
class FileUnit:
    """One file's part of the snapshot: fresh passages and vectors, or rows of the previous
    version of the snapshot to copy."""

    rel: str
    sha256: str
    size: int
    title: str
    passages: list[DocPassage] | None = None
    vectors: np.ndarray | None = None
    old_start: int | None = None
    count: int = 0


@dataclass
class SnapshotSpec:
    name: str
    slug: str
    root: Path
    encoder: EncoderInfo
    words: int
    parser_version: int
    precision: EncoderPrecision
    source_bytes: int = 0


def _old_rows(old: Path, start: int, count: int) -> Iterator[PassageRow]:
    uri = (old / PASSAGES_FILE).resolve().as_uri() + "?mode=ro&immutable=1"
    con = sqlite3.connect(uri, uri=True)
    try:
        cur = con.execute("SELECT title, text, source_id FROM passages WHERE id >= ? AND "
                          "id < ? ORDER BY id", (start, start + count))
        for title, text, source_id in cur:
            yield PassageRow(title, text, source_id)
    finally:
        con.close()


def write_snapshot(build: Path, spec: SnapshotSpec, units: Sequence[FileUnit],
                   old: Path | None, progress: ProgressCallback | None = None,
                   cancel: CancelToken | None = None) -> Manifest:
    """Write the complete snapshot into ``build`` (replaced if present)."""
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    n = sum(u.count for u in units)
    emb = np.lib.format.open_memmap(build / EMBEDDINGS_FILE, mode="w+", dtype=np.float32,
                                    shape=(n, spec.encoder.dim))
    old_emb = (np.load(old / EMBEDDINGS_FILE, mmap_mode="r", allow_pickle=False)
               if old is not None else None)
    writer = PassageWriter(build / PASSAGES_FILE)
    files: dict[str, FileEntry] = {}
    try:
        for unit in units:
            if cancel is not None:
                cancel.raise_if_cancelled()
            start = writer.count
            files[unit.rel] = FileEntry(unit.rel, unit.sha256, unit.size, unit.title, start,
                                        unit.count)
            if unit.old_start is not None:
                assert old is not None and old_emb is not None
                writer.add(list(_old_rows(old, unit.old_start, unit.count)))
                emb[start:start + unit.count] = old_emb[unit.old_start:
                                                        unit.old_start + unit.count]
            else:
                assert unit.passages is not None and unit.vectors is not None
                writer.add([PassageRow(p.title, p.text, p.location.to_json())
                            for p in unit.passages])
                emb[start:start + unit.count] = unit.vectors
        if writer.count != n:
            raise RuntimeError(f"wrote {writer.count} passages, expected {n}")
    finally:
        writer.close()
    emb.flush()
    del emb, old_emb
    record = FolderRecord(str(spec.root), spec.encoder.to_json(), spec.parser_version,
                          spec.words, files)
    write_json_atomic(build / DOCUMENTS_FILE, record.to_json())
    return _manifest(build, spec, n, progress, cancel)


def _manifest(build: Path, spec: SnapshotSpec, n: int, progress: ProgressCallback | None,
              cancel: CancelToken | None) -> Manifest:
    names = [PASSAGES_FILE, EMBEDDINGS_FILE, DOCUMENTS_FILE]
    stats: dict[str, os.stat_result] = {}
    files = checksum_files(build, names, "checksumming", progress, cancel, stats)
    source: dict[str, object] = {"label": str(spec.root), "format": DOCS_FORMAT,
                              "size": spec.source_bytes, "limit": None}
    manifest = Manifest(
        name=spec.name, slug=spec.slug, created=utcnow(), source=source, passages=n,
        encoder=spec.encoder, embeddings_dtype="float32", dim=spec.encoder.dim,
        variants={FLAT: VariantEntry(EMBEDDINGS_FILE, n * spec.encoder.dim * 4, {}, 1.0, 0.0)},
        default_variant=FLAT, files=files, precision=spec.precision)
    write_manifest(build, manifest)
    # the checksums just taken count as the files' first check: a first open of a
    # large snapshot does not hash it all again
    update_verified(build, manifest, stats, [])
    fsync_dir(build)
    return manifest
