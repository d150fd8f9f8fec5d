"""The composition root: what the CLI, the GUI and ``ragdesk.load_engine`` build an engine from.

A :class:`Session` holds, for one data directory, the one ``SnapshotLibrary`` of the process
(the engine reads it, a switch writes it), resolves which model pack to use, checks that a
pack's questions land in a snapshot's vector space, and loads engines (once per pack for the
GUI). Everything below it (engine, retrieval, snapshots, models) is wired here and nowhere
else, so none of them imports another to build itself.

Which pack answers, when no models are given: the pack asked for, else the one the user
chose (``ragdesk models use``, the GUI's pack menu), else the snapshot's own
(``default_pack``, e.g. the starter snapshot's), else the starter pack; a chosen pack that
cannot query the snapshot gives way to the snapshot's own (:func:`pack_for`, the one
definition of the rule, which the GUI calls with the choice it holds).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from ragdesk.core.app import AppContext
from ragdesk.core.catalog import Catalog
from ragdesk.core.encoders import EncoderInfo, TextEncoder, check_query_space
from ragdesk.core.engine import Engine
from ragdesk.core.errors import RagdeskError
from ragdesk.core.models import PackSpec, check_pack_matches_snapshot, get_pack, loading
from ragdesk.core.models.packs import question_encoder_space
from ragdesk.core.options import PRECISION_KEY, AnswerOptions, RetrieverName
from ragdesk.core.pack_choice import STARTER, chosen_or_none, fallback_note
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, ProgressCallback
from ragdesk.core.retrieval import SearchableSnapshot
from ragdesk.core.snapshots import SnapshotLibrary, open_searchable, open_snapshot
from ragdesk.core.snapshots.index import SnapshotIndex
from ragdesk.core.snapshots.staged import StagedSnapshot, has_dense
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from ragdesk.core.units import plural

log = logging.getLogger(__name__)


def resolve_pack_name(app: AppContext, pack: str | None = None,
                      snapshot: str | None = None) -> str:
    """The pack to use for ``snapshot`` (None: the active one); see the module docstring and
    :func:`pack_for`, given the choice remembered in the settings."""
    if pack:
        return pack
    return pack_for(app, chosen_or_none(app.settings), snapshot)


def pack_for(app: AppContext, chosen: str | None, snapshot: str | None) -> str:
    """The pack that answers from ``snapshot`` (None: the active one) when the user chose
    ``chosen`` (None: never chose). The choice is passed in, not read here, so that the GUI
    can work it out with the choice it has just made, before the settings write lands.

    A choice comes before the snapshot's own pack: the settings keep no default for the
    pack, so "chosen" means the user chose it. A chosen pack whose questions cannot land in
    the snapshot's space (say the paper's DPR pack chosen, then a folder of documents
    encoded with the starter's MiniLM asked) gives way to the snapshot's own pack, which is
    known to fit, instead of failing every question.
    """
    name = snapshot or app.catalog.active_snapshot()
    own = app.catalog.get_snapshot(name).default_pack if name is not None else None
    if chosen and not (own and own != chosen and not _fits(app, chosen, str(name))):
        return chosen
    if chosen:
        log.info("%s", fallback_note(chosen, str(name), own or STARTER))
    return own or STARTER


def _fits(app: AppContext, pack: str, snapshot: str) -> bool:
    """Whether ``pack``'s question encoder can query ``snapshot`` (True when unknown: the
    check before loading names the problem then)."""
    rec = app.catalog.get_snapshot(snapshot)
    try:
        family, dim = question_encoder_space(get_pack(app.catalog, pack, app.data))
    except RagdeskError:
        return True
    if None in (family, dim, rec.encoder_family, rec.dim):
        return True
    return family == rec.encoder_family and dim == rec.dim


# ---- answering from what is ready ----------------------------------------------------------


@dataclass(frozen=True)
class ReadyPlan:
    """How a question is answered from a snapshot as it is now.

    While a staged import still computes a snapshot's dense vectors, only its BM25 index can
    search it: the retriever asked for gives way to ``"sparse"`` instead of failing (the
    setup takes minutes; a question should not wait for it). A snapshot holding fewer
    passages than the K asked for (a folder of two documents) gives all it holds.
    """

    snapshot: str
    retriever: RetrieverName  # the one that will search
    n_docs: int  # the passages that will be read
    asked_retriever: str
    asked_n_docs: int

    @property
    def dense_pending(self) -> bool:
        return self.retriever != self.asked_retriever

    @property
    def fewer_docs(self) -> bool:
        return self.n_docs < self.asked_n_docs

    def notes(self) -> list[str]:
        """What differs from what was asked, in words (empty when nothing does)."""
        out = []
        if self.dense_pending:
            out.append(f"answering with BM25 keyword search: the dense vectors of "
                       f"{self.snapshot!r} are not all computed yet")
        if self.fewer_docs:
            out.append(f"reading all {plural(self.n_docs, 'passage')} of {self.snapshot!r} "
                       f"(K = {self.asked_n_docs} asked)")
        return out


def ready_plan(snapshot: SearchableSnapshot, retriever: str, n_docs: int) -> ReadyPlan:
    """What ``snapshot`` can answer with now, for the ``retriever`` and K asked for."""
    # The name is checked where it is used (get_retriever names the ones there are).
    used = cast(RetrieverName, retriever) if has_dense(snapshot) else "sparse"
    size = int(snapshot.size)
    k = min(n_docs, size) if size > 0 else n_docs  # an empty one fails with its own message
    return ReadyPlan(snapshot=snapshot.name, retriever=used, n_docs=k,
                     asked_retriever=retriever, asked_n_docs=n_docs)


def open_answerable(data: DataDir, catalog: Catalog, name: str | None = None, *,
                    progress: ProgressCallback | None = None
                    ) -> SnapshotIndex | StagedSnapshot:
    """Open ``name`` (None: the active one) to answer from: a ready snapshot (checked against
    its checksums, with ``progress``), else one whose staged import has reached its BM25
    stage; anything else is refused as :func:`open_snapshot` refuses it."""
    name = name if name is not None else catalog.active_snapshot()
    if name is not None and catalog.get_snapshot(name).state != "ready":
        return open_searchable(data, catalog, name)
    return open_snapshot(data, catalog, name, progress=progress)


def answer_from_ready(engine: Engine, question: str, options: AnswerOptions, *,
                      snapshot: SearchableSnapshot | str | None = None,
                      on_token: Callable[[AnswerToken], None] | None = None,
                      cancel: CancelToken | None = None) -> Answer:
    """``engine.ask`` with the retriever and K the snapshot can give now (:func:`ready_plan`);
    the answer's ``retriever`` says which one searched. The snapshot is taken once, so a
    switch meanwhile does not change it."""
    index = engine.snapshot_index(snapshot)
    plan = ready_plan(index, options.retriever, options.n_docs)
    if plan.notes():
        log.info("snapshot %s: %s", plan.snapshot, "; ".join(plan.notes()))
    # BM25 and hybrid: the first question on a snapshot builds its BM25 index (seconds for
    # the starter snapshot), here on the caller's thread.
    answer = engine.ask(question, dataclasses.replace(options, retriever=plan.retriever,
                                                      n_docs=plan.n_docs),
                        snapshot=index, on_token=on_token, cancel=cancel)
    answer.retriever = plan.retriever
    return answer


def retrieve_from_ready(engine: Engine, question: str, n_docs: int,
                        snapshot: SearchableSnapshot | str | None,
                        retriever: str) -> tuple[list[RetrievedDoc], ReadyPlan]:
    """``engine.retrieve`` by the same rule as :func:`answer_from_ready` (for callers that
    generate from the passages themselves, like the server): the passages and the plan,
    whose ``retriever`` is the one that searched."""
    index = engine.snapshot_index(snapshot)
    plan = ready_plan(index, retriever, n_docs)
    return engine.retrieve(question, plan.n_docs, snapshot=index,
                           retriever=plan.retriever), plan


class Session:
    """One data directory's snapshot library, pack resolution and engines (thread-safe).

    ``owns_app``: :meth:`close` closes ``app`` too (what :func:`load_engine` wants).
    """

    def __init__(self, app: AppContext, *, owns_app: bool = False) -> None:
        self.app = app
        self._owns_app = owns_app
        self._library: SnapshotLibrary | None = None
        self._library_lock = threading.Lock()
        self._engine: Engine | None = None
        self._engine_pack: str | None = None
        # Not the library lock: loading models must not block a snapshot switch.
        self._engine_lock = threading.Lock()

    # ---- snapshots ----------------------------------------------------------------------

    @property
    def library(self) -> SnapshotLibrary:
        """The one SnapshotLibrary of this session: engines read it, switches write it."""
        with self._library_lock:
            if self._library is None:
                self._library = SnapshotLibrary(self.app.data, self.app.catalog)
            return self._library

    # ---- packs --------------------------------------------------------------------------

    def pack_name(self, pack: str | None = None, snapshot: str | None = None) -> str:
        return resolve_pack_name(self.app, pack, snapshot)

    def pack(self, pack: str | None = None, snapshot: str | None = None) -> PackSpec:
        """The resolved pack's parts; NotFoundError names the packs there are."""
        return get_pack(self.app.catalog, self.pack_name(pack, snapshot), self.app.data)

    @staticmethod
    def check_fits(pack: PackSpec, snapshot_encoder: EncoderInfo, snapshot: str) -> None:
        """Refuse a pack whose questions land in another space than the snapshot's passages
        (EncoderMismatchError names both), before any model loads."""
        check_pack_matches_snapshot(pack, snapshot_encoder, snapshot)

    def question_encoder_for(self, pack: PackSpec, snapshot_encoder: EncoderInfo,
                             snapshot: str) -> TextEncoder:
        """The pack's question encoder, checked against the snapshot before and after
        loading (the pack's declared space, then the loaded model's)."""
        self.check_fits(pack, snapshot_encoder, snapshot)
        encoder = loading.load_question_encoder(pack.question_encoder, answering=True)
        check_query_space(snapshot, snapshot_encoder, encoder.info)
        return encoder

    # ---- engines ------------------------------------------------------------------------

    def load_engine(self, *, snapshot: str | None = None,
                    question_encoder: str | os.PathLike[str] | None = None,
                    generator: str | os.PathLike[str] | None = None,
                    pack: str | None = None,
                    on_close: Callable[[], None] | None = None) -> Engine:
        """A new engine over this session's library (models given, else the pack's).

        ``snapshot`` pins it to one snapshot (default: whichever is active when each answer
        starts). The generator's precision is the setting's (None: the CPU's default).
        ``on_close`` runs when the engine is closed.
        """
        if snapshot is not None:
            self.app.catalog.get_snapshot(snapshot)  # NotFoundError names the snapshot
        if question_encoder is None or generator is None:
            spec = self.pack(pack, snapshot)
            question_encoder = question_encoder or spec.question_encoder
            generator = generator or spec.generator
        # Through the module: a test that forbids loading (monkeypatch) reaches every caller.
        qenc = loading.load_question_encoder(str(question_encoder), answering=True)
        # a setting of another type is refused by its text, as any unknown precision is
        precision = self.app.settings.get(PRECISION_KEY)
        gen = loading.load_generator(
            str(generator), precision=None if precision is None else str(precision),
            answering=True)
        log.info("engine: question encoder %s, generator %s (%s)", qenc.info.id, gen.name,
                 gen.kind)
        return Engine(qenc, gen, library=self.library, snapshot=snapshot, on_close=on_close)

    def engine(self, pack: str) -> Engine:
        """The engine of ``pack``, loaded once; asking for another pack replaces it."""
        with self._engine_lock:
            if self._engine is not None and self._engine_pack == pack:
                return self._engine
            log.info("loading engine for pack %s", pack)
            self._engine, self._engine_pack = None, None
            engine = self.load_engine(pack=pack)
            self._engine, self._engine_pack = engine, pack
            return engine

    def engine_loaded(self, pack: str) -> bool:
        return self._engine is not None and self._engine_pack == pack

    def close(self) -> None:
        """Close the library (and the app when owned); call once no answer is running."""
        with self._engine_lock:
            self._engine, self._engine_pack = None, None
        with self._library_lock:
            if self._library is not None:
                self._library.close()
                self._library = None
        if self._owns_app:
            self.app.close()


def load_engine(snapshot: str | None = None,
                question_encoder: str | os.PathLike[str] | None = None,
                generator: str | os.PathLike[str] | None = None,
                data_dir: str | os.PathLike[str] | None = None,
                pack: str | None = None) -> Engine:
    """Load a RAG engine.

    ``snapshot``: a snapshot name (default: whichever is active when each answer starts).
    ``question_encoder`` / ``generator``: hub ids in the HF cache, local folders, a RAG
    checkpoint folder or a ``.gguf`` file; without them the models come from ``pack``, else
    from the pack chosen in the settings, else from the snapshot's own pack, else the starter
    pack. ``data_dir``: the ragdesk data directory (default: ``$RAGDESK_DATA_DIR`` or the
    platform's). ``engine.close()`` closes the snapshots and the data directory it opened.
    """
    session = Session(AppContext(data_dir), owns_app=True)
    try:
        return session.load_engine(snapshot=snapshot, question_encoder=question_encoder,
                                   generator=generator, pack=pack, on_close=session.close)
    except BaseException:
        session.close()
        raise


__all__ = ["ReadyPlan", "Session", "answer_from_ready", "load_engine", "open_answerable",
           "pack_for", "ready_plan", "resolve_pack_name", "retrieve_from_ready"]
