"""What the backend hands to widgets: small frozen value types (snapshots, packs, index
variants, citation places, a folder import's and a verification's outcome) and the tables
the index manager offers. No core subsystem behind them, so any widget may import them
without reaching past :mod:`ragdesk.ui.backend`."""

from __future__ import annotations

from dataclasses import dataclass, field

# ragdesk.core.documents.DOCUMENTS_FILE (a folder snapshot's record); importing that package
# to list the snapshots would cost the first listing a second.
DOCUMENTS_FILE = "documents.json"

IMPORT_FORMATS: dict[str, str] = {
    "jsonl": "JSON lines, one {\"title\", \"text\"} per line (*.jsonl *.json)",
    "dpr-tsv": "DPR passages TSV: id, text, title (*.tsv *.tsv.gz)",
    "parquet": "Parquet passages: text, optional title and id columns (*.parquet)",
    "wiki-xml": "MediaWiki XML dump (*.xml *.xml.bz2)",
    "vital-articles": "Wikipedia Vital Articles from the starter pack (no file needed)",
    "docs": "Folder of documents (PDF, DOCX, Markdown, HTML, text)",
}

VARIANTS: dict[str, str] = {
    "flat": "Exact inner product; 4 bytes per dimension",
    "hnsw-sq8": "HNSW graph over 8-bit scalar-quantized vectors (the paper's layout)",
    "ivf-pq": "Inverted lists + product quantization, re-ranked exactly; smallest",
}


@dataclass(frozen=True)
class VariantInfo:
    variant: str
    bytes: int
    bytes_per_passage: float | None
    recall_at_20: float | None


@dataclass(frozen=True)
class SnapshotInfo:
    name: str
    state: str
    passages: int
    encoder: str | None
    family: str | None
    dim: int | None
    created: str
    source: str | None = None
    error: str | None = None
    active: bool = False
    default_pack: str | None = None
    variants: tuple[VariantInfo, ...] = ()
    # Why the pack that would answer from it (``answer_pack``) cannot query it; None: it can.
    unusable_reason: str | None = None
    stage: str | None = None  # "sparse": not ready, but answers with BM25 meanwhile
    documents: bool = False  # imported from a folder of documents: it can be re-imported
    # The starter setup's snapshot, left unfinished by a setup no process runs any more (the
    # app was quit during it): running the setup again resumes where it stopped.
    interrupted_setup: bool = False
    # The pack the core answers from it with, given the user's choice when it was listed
    # (``ragdesk.core.session.pack_for``); None: not worked out.
    answer_pack: str | None = None

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def searchable(self) -> bool:
        """Questions can be asked of it now (ready, or BM25 while its vectors are computed)."""
        return self.ready or self.stage == "sparse"

    @property
    def keyword_only(self) -> bool:
        """It answers, but with BM25 keyword search only: its dense vectors are not done."""
        return not self.ready and self.stage == "sparse"


@dataclass(frozen=True)
class PackInfo:
    name: str
    kind: str
    installed: bool
    description: str = ""
    size_bytes: int | None = None
    question_encoder: str | None = None
    passage_encoder: str | None = None
    generator: str | None = None
    # The passage encoder as snapshots record it (a packaged folder's hub id), for display.
    passage_encoder_name: str | None = None
    # The reading mode measured best for the pack (None: the user's choice stands).
    default_mode: str | None = None
    # For a pack set up on demand (the reader pack), what a user is told before anything is
    # downloaded: the download's size, and how long an answer takes next to the starter's.
    download_bytes: int | None = None
    converted_bytes: int | None = None  # more on disk once converted for fast loading
    expected_speed: str = ""
    license: str = ""


@dataclass(frozen=True)
class FolderImportSummary:
    """What importing a folder of documents did, file by file (the core's
    ``FolderImportResult`` without the catalog record)."""

    name: str
    passages: int
    encoded: int
    reused: int
    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    other_files: int = 0

    @property
    def text(self) -> str:
        """One paragraph for the index manager's message line."""
        counts = [f"{len(files)} {what}" for what, files in (
            ("added", self.added), ("changed", self.changed), ("removed", self.removed),
            ("unchanged", self.unchanged)) if files]
        files = ", ".join(counts) or "no files"
        out = (f"Imported “{self.name}” from the folder: {files}; "
               f"{self.passages:,} passages, {self.encoded:,} encoded now.")
        if self.warnings:
            out += " Not imported: " + "; ".join(self.warnings)
        return out


@dataclass(frozen=True)
class CitationPlace:
    """Where a cited passage of a folder snapshot sits in its file, and the ``file:`` URI
    that opens the file there (None when the imported folder is unknown)."""

    path: str  # relative to the imported folder
    page: int | None = None
    heading: str | None = None
    uri: str | None = None

    @property
    def file_name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def short(self) -> str:
        """The place within the file: "p. 2", or the heading."""
        if self.page is not None:
            return f"p. {self.page}"
        return self.heading or ""

    @property
    def label(self) -> str:
        """"report.pdf · p. 2", "guide.md · Install" or "notes.txt"."""
        return " · ".join(p for p in (self.file_name, self.short) if p)


@dataclass
class VerifyReport:
    name: str
    ok: bool
    text: str
    extra: dict[str, object] = field(default_factory=dict)
