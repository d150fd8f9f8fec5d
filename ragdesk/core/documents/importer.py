"""``import_folder``: a folder of PDF, DOCX, Markdown, HTML and text files as a snapshot.

Each file is hashed; a file whose path and content match the previous import of the same
snapshot keeps its passages and vectors, and only new or changed files are parsed and
encoded. Damaged or unreadable files are reported by name (``warnings``) and the rest
imports. Per-file results are kept in ``staging/.docs-<slug>/cache`` as each file finishes,
so an interrupted import run again resumes; the finished snapshot is renamed into place (see
:mod:`.swap`).
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.core.catalog import Catalog, SnapshotRecord, SnapshotState
from ragdesk.core.catalog.records import unique_slug
from ragdesk.core.documents import swap
from ragdesk.core.documents.assemble import (
    FileUnit,
    SnapshotSpec,
    write_snapshot,
)
from ragdesk.core.documents.cache import FileCache
from ragdesk.core.documents.folder import (
    FileEntry,
    FolderRecord,
    cache_key,
    file_sha256,
    inside_folder,
    read_folder_record,
    scan_folder,
)
from ragdesk.core.documents.model import DocPassage, DocumentError
from ragdesk.core.documents.parsers import PARSER_VERSION, SUFFIXES, parse_file
from ragdesk.core.documents.splitting import PASSAGE_WORDS, split_document
from ragdesk.core.encoders import (
    EncoderPrecision,
    TextEncoder,
    as_computed,
    chosen_precision,
    load_encoder,
    passage_inputs,
)
from ragdesk.core.errors import (
    AlreadyExistsError,
    BadInputError,
    NotFoundError,
    RagdeskError,
)
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.snapshots.import_job import ImportJob, install, prepare, row_fields
from ragdesk.core.snapshots.lifecycle import mark_ready, settle_folder_swap
from ragdesk.core.snapshots.manifest import Manifest, read_manifest
from ragdesk.core.snapshots.starter import starter_encoder_path

if TYPE_CHECKING:
    import numpy as np

STARTER_PACK = "starter"
AGAIN = "import the folder again"  # how a user resumes one (see import_job.classify_failure)

log = logging.getLogger(__name__)


@dataclass
class FolderImportResult:
    """What an import did; ``warnings`` name each file that could not be imported."""

    record: SnapshotRecord
    passages: int
    encoded: int  # passages encoded by this run
    reused: int  # passages whose vectors came from the previous import or an interrupted run
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    other_files: int = 0  # files of kinds ragdesk does not read

    def to_json(self) -> dict[str, object]:
        d = {k: v for k, v in self.__dict__.items() if k != "record"}
        d["snapshot"] = self.record.to_json()
        return d


def _check_folder(folder: str | os.PathLike[str]) -> Path:
    path = Path(folder).expanduser()
    if not path.exists():
        raise NotFoundError(f"The folder {path} does not exist.")
    if not path.is_dir():
        raise BadInputError("is not a folder; --format docs imports a folder of documents.",
                            path=path)
    return path.resolve()


def _encoder(encoder: str | os.PathLike[str] | TextEncoder | None) -> TextEncoder:
    """The encoder given, else the starter pack's (installed with ragdesk), so that a folder
    imported without --encoder answers with the offline starter pack."""
    if isinstance(encoder, TextEncoder):
        return encoder
    return load_encoder(encoder if encoder is not None else starter_encoder_path(),
                        role="passage")


def import_folder(data: DataDir, catalog: Catalog, folder: str | os.PathLike[str], *,
                  name: str, encoder: str | os.PathLike[str] | TextEncoder | None,
                  default_pack: str | None = None, progress: ProgressCallback | None = None,
                  cancel: CancelToken | None = None, batch_size: int = 64,
                  precision: str | None = None) -> FolderImportResult:
    """Import (or re-import) the documents under ``folder`` as the snapshot ``name``.

    A ready snapshot of that name imported from a folder is refreshed in place; any other
    snapshot of that name is refused. ``encoder`` None: the starter pack's all-MiniLM-L6-v2,
    and the starter pack as the snapshot's default pack. ``precision``: as
    :func:`ragdesk.core.snapshots.import_snapshot`'s."""
    prepare(data, catalog)
    root = _check_folder(folder)
    name = name.strip()
    if not name:
        raise BadInputError("A snapshot needs a name.", hint="Pass --name NAME.")
    if batch_size < 1:
        raise BadInputError(f"The batch size must be at least 1, not {batch_size}.")
    existing = catalog.find_snapshot(name)
    slug = existing.slug if existing is not None else unique_slug(
        name, {s.slug for s in catalog.list_snapshots()})
    job = ImportJob(data, catalog, name, slug, work=swap.work_dir(data, slug), again=AGAIN)
    with job.locked():
        if existing is not None:
            settle_folder_swap(data, catalog, existing, locked=True)
        previous = _previous(data, catalog, name)
        enc = _encoder(encoder)
        if encoder is None and default_pack is None:
            default_pack = STARTER_PACK  # its question encoder matches these vectors
        chosen = chosen_precision(enc.info, precision)
        enc = enc.at_precision(chosen.passages)
        run = _FolderImport(job, root, enc, previous, progress, cancel, batch_size,
                            default_pack)
        run.precision = as_computed(chosen, enc.precision)
        return run.run()


def _passages_precision(snapshot_folder: Path) -> str | None:
    try:
        made = read_manifest(snapshot_folder).precision
    except RagdeskError:
        return None
    return None if made is None else made.passages


def _previous(data: DataDir, catalog: Catalog, name: str) -> tuple[Path, FolderRecord] | None:
    """The ready snapshot ``name`` and its folder record, if it was imported from a folder."""
    rec = catalog.find_snapshot(name)
    if rec is None or rec.state != SnapshotState.READY.value:
        return None
    path = data.snapshot_dir(rec.slug)
    record = read_folder_record(path)
    if record is None:
        raise AlreadyExistsError(f"A snapshot named {name!r} already exists and was not "
                                 "imported from a folder.",
                                 "Pick another name, or remove it first with "
                                 f"`ragdesk index remove {name}`.")
    mark_ready(catalog, name, read_manifest(path))  # a swap finished by a crash's recovery
    return path, record


class _FolderImport:
    def __init__(self, job: ImportJob, root: Path, encoder: TextEncoder,
                 previous: tuple[Path, FolderRecord] | None, progress: ProgressCallback | None,
                 cancel: CancelToken | None, batch_size: int, default_pack: str | None) -> None:
        self.job, self.data, self.catalog, self.root = job, job.data, job.catalog, root
        self.name, self.slug, self.encoder = job.name, job.slug, encoder
        self.previous = previous
        self.progress, self.cancel, self.batch_size = progress, cancel, batch_size
        self.default_pack = default_pack
        self.work = job.work
        self.cache = FileCache(self.work / "cache")
        self.result_fields: dict[str, list[str]] = {"added": [], "changed": [], "unchanged": [],
                                              "removed": [], "warnings": []}
        self.encoded = self.reused = 0
        self.precision = EncoderPrecision.both(encoder.precision)

    # ---- the run --------------------------------------------------------------------

    def run(self) -> FolderImportResult:
        fresh = self.previous is None
        # a refresh leaves the row alone: its previous version answers until the swap
        fields = row_fields(self.encoder.info, str(self.root), self.default_pack) \
            if fresh else None
        with self.job.running(fields):
            units, other = self._collect()
            if self._nothing_changed(units):
                return self._unchanged_result(units, other)
            manifest = self._write(units)
            self._install(manifest, fresh)
            self.job.done(manifest.passages)
        shutil.rmtree(self.work, ignore_errors=True)
        return FolderImportResult(self.job.finish(), manifest.passages, self.encoded,
                                  self.reused, other_files=other, **self.result_fields)

    def _nothing_changed(self, units: list[FileUnit]) -> bool:
        """The previous version already holds exactly these passages and vectors."""
        if self.previous is None or self.result_fields["removed"]:
            return False
        old = self.previous[1].files
        return len(units) == len(old) and all(
            u.old_start is not None and old[u.rel].start == u.old_start for u in units)

    def _unchanged_result(self, units: list[FileUnit], other: int) -> FolderImportResult:
        n = sum(u.count for u in units)
        self.job.done(n, message="unchanged")
        shutil.rmtree(self.work, ignore_errors=True)
        return FolderImportResult(self.catalog.get_snapshot(self.name), n, 0, n,
                                  other_files=other, **self.result_fields)

    # ---- reading and encoding ---------------------------------------------------------

    def _old_files(self) -> dict[str, FileEntry]:
        if self.previous is None:
            return {}
        _, record = self.previous
        if (not record.reusable_for(self.encoder.info.to_json(), PASSAGE_WORDS)
                or _passages_precision(self.previous[0]) != self.encoder.precision):
            return {}  # another encoder, precision or splitter: every vector is computed again
        return dict(record.files)

    def _collect(self) -> tuple[list[FileUnit], int]:
        rels, other, refused = scan_folder(self.root)
        for warning in refused:
            log.warning("skipping %s", warning)
        self.result_fields["warnings"].extend(refused)
        old = self._old_files()
        if self.previous is not None:
            self.result_fields["removed"] = sorted(set(self.previous[1].files) - set(rels))
        prog = Progress(len(rels), "reading documents", self.progress)
        units: list[FileUnit] = []
        for i, rel in enumerate(rels):
            if self.cancel is not None:
                self.cancel.raise_if_cancelled()
            unit = self._unit(rel, old)
            if unit is not None:
                units.append(unit)
            prog.set(i + 1, f"reading documents: {rel}")
            self.job.progress(i + 1, len(rels), f"reading {rel}", force=i + 1 == len(rels))
        if not units:
            listed = "; ".join(self.result_fields["warnings"][:3])
            raise BadInputError(
                "holds no document ragdesk can read" + (f" ({listed})" if listed else "") + ".",
                path=self.root, hint=f"ragdesk reads {', '.join(SUFFIXES)} files.")
        return units, other

    def _unit(self, rel: str, old: dict[str, FileEntry]) -> FileUnit | None:
        path = self.root / rel
        if not inside_folder(path, self.root):
            self._warn(rel, "became a symbolic link out of the folder while it was imported")
            return None
        try:
            sha, size = file_sha256(path), path.stat().st_size
        except OSError as exc:
            self._warn(rel, f"cannot be read ({exc.strerror or exc})")
            return None
        before = self.previous[1].files.get(rel) if self.previous is not None else None
        kind = ("added" if before is None else
                "unchanged" if before.sha256 == sha else "changed")
        prev = old.get(rel)  # only when its vectors fit this import
        if prev is not None and prev.sha256 == sha:
            self.result_fields[kind].append(rel)
            self.reused += prev.count
            return FileUnit(rel, sha, size, prev.title, old_start=prev.start, count=prev.count)
        key = cache_key(rel, sha)
        cached = self.cache.get(key)
        if cached is None:
            cached = self._encode_file(path, rel)
            if cached is None:
                return None
            self.cache.put(key, *cached)
        else:
            self.reused += len(cached[0])
        self.result_fields[kind].append(rel)
        passages, vectors = cached
        return FileUnit(rel, sha, size, passages[0].title, passages=passages, vectors=vectors,
                        count=len(passages))

    def _encode_file(self, path: Path, rel: str) -> tuple[list[DocPassage], np.ndarray] | None:
        try:
            doc = parse_file(path)
        except DocumentError as exc:
            self._warn(rel, exc.message)
            return None
        passages = split_document(doc, rel)
        inputs = passage_inputs(self.encoder, ((p.title, p.text) for p in passages))
        # Progress per file only where a file takes a while (a long PDF): one line per small
        # file would drown the terminal.
        big = len(inputs) > 4 * self.batch_size
        vectors = self.encoder.encode(inputs, batch_size=self.batch_size,
                                      progress=self.progress if big else None,
                                      cancel=self.cancel)
        self.encoded += len(passages)
        return passages, vectors

    def _warn(self, rel: str, message: str) -> None:
        log.warning("skipping %s: %s", rel, message)
        self.result_fields["warnings"].append(f"{rel}: {message}")

    # ---- writing and installing -------------------------------------------------------

    def _write(self, units: list[FileUnit]) -> Manifest:
        spec = SnapshotSpec(self.name, self.slug, self.root, self.encoder.info, PASSAGE_WORDS,
                            PARSER_VERSION, self.precision,
                            source_bytes=sum(u.size for u in units))
        old = self.previous[0] if self.previous is not None else None
        return write_snapshot(self.work / swap.BUILD_DIRNAME, spec, units, old, self.progress,
                              self.cancel)

    def _install(self, manifest: Manifest, fresh: bool) -> None:
        build = self.work / swap.BUILD_DIRNAME
        if fresh:
            install(self.data, build, self.slug)
            mark_ready(self.catalog, self.name, manifest)
            return

        def record() -> None:
            # Index variants (HNSW, IVF-PQ) were built over the old vectors.
            rec = self.catalog.get_snapshot(self.name)
            for variant in rec.variants:
                if variant.variant not in manifest.variants:
                    self.catalog.remove_variant(self.name, variant.variant)
            mark_ready(self.catalog, self.name, manifest)

        swap.replace(self.data, build, self.slug, record)
