"""The public engine: a question encoder and a generator over a snapshot library.

>>> engine = load_engine(snapshot="wiki-2018")                # doctest: +SKIP
>>> ans = engine.answer("who wrote hamlet", mode="token")    # doctest: +SKIP

Models load once per :class:`Engine`. Every answer takes the snapshot once, at its start, and
finishes on it even if another snapshot becomes active meanwhile.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ragdesk.core.engine.attribution import TokenCallback
from ragdesk.core.engine.generators import Generator, check_question, check_style
from ragdesk.core.engine.options import DecodeOptions, check_mode
from ragdesk.core.engine.rag_sequence import rag_sequence_generate
from ragdesk.core.engine.rag_token import rag_token_generate
from ragdesk.core.engine.retrieval import (
    RetrievalRequest,
    doc_log_probs,
    get_retriever,
    retrieved_docs,
)
from ragdesk.core.errors import NotFoundError
from ragdesk.core.options import DEFAULT_STYLE, resolve_grounded
from ragdesk.core.posterior import temperature_of
from ragdesk.core.progress import CancelToken
from ragdesk.core.types import Answer, Hit, RetrievedDoc

if TYPE_CHECKING:
    from ragdesk.core.app import AppContext
    from ragdesk.core.encoders import TextEncoder

log = logging.getLogger(__name__)


class Engine:
    """Answers questions with RAG-Token or RAG-Sequence over a snapshot.

    ``snapshot`` pins the engine to one snapshot name; without it every answer uses the
    snapshot that is active when the answer starts. ``library`` is a
    ``ragdesk.core.snapshots.SnapshotLibrary`` (or anything with ``current()`` and
    ``get(name)``); an engine without one answers only from docs given to
    :meth:`answer_from_docs` or from a ``SnapshotIndex`` passed as ``snapshot=``.
    """

    def __init__(self, question_encoder: TextEncoder, generator: Generator, *,
                 library: Any = None, snapshot: str | None = None,
                 context: AppContext | None = None, owns_library: bool = False) -> None:
        self.question_encoder = question_encoder
        self.generator = generator
        self.library = library
        self.snapshot_name = snapshot
        self._context = context
        self._owns_library = owns_library
        self._lock = threading.Lock()

    # -- snapshots ------------------------------------------------------------------

    def snapshot_index(self, snapshot: Any = None) -> Any:
        """The SnapshotIndex to use now: ``snapshot`` (an index or a name), the pinned one,
        or the active one."""
        if snapshot is not None and not isinstance(snapshot, str):
            return snapshot
        name = snapshot if snapshot is not None else self.snapshot_name
        if self.library is None:
            raise NotFoundError("This engine has no snapshot library to retrieve from.",
                                hint="Load it with ragdesk.load_engine(), or pass a snapshot.")
        return self.library.get(name) if name is not None else self.library.current()

    # -- retrieval ------------------------------------------------------------------

    def retrieve(self, question: str, n_docs: int = 5, snapshot: Any = None,
                 retriever: str = "dense") -> list[RetrievedDoc]:
        """The top ``n_docs`` passages in rank order with their scores and p(z|x)."""
        check_question(question)
        index = self.snapshot_index(snapshot)
        hits = self._search(question, n_docs, index, retriever)
        return retrieved_docs(hits, doc_log_probs(hits, temperature_of(index)),
                              getattr(index, "name", None))

    def _search(self, question: str, n_docs: int, index: Any, retriever: str) -> list[Hit]:
        fn = get_retriever(retriever)
        return fn(RetrievalRequest(question=question, n_docs=n_docs, snapshot=index,
                                   question_encoder=self.question_encoder))

    # -- answering ------------------------------------------------------------------

    def answer(
        self,
        question: str,
        *,
        mode: str = "token",
        decoding: str = "thorough",
        n_docs: int = 5,
        num_beams: int = 1,
        max_new_tokens: int = 32,
        min_new_tokens: int = 0,
        retriever: str = "dense",
        snapshot: Any = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
        style: str = DEFAULT_STYLE,
        grounded: bool | None = None,
        temperature: float | None = None,
    ) -> Answer:
        """Retrieve ``n_docs`` passages and generate the answer, marginalizing over them.

        ``on_token`` receives each :class:`AnswerToken` once it is decided (RAG-Token: as it
        is generated; beam search: when no beam can change it any more; RAG-Sequence fast:
        when every hypothesis that can still win shares it; thorough: when the answer is
        chosen). ``cancel`` is checked between decoding steps; a cancelled answer holds what
        was generated so far and ``cancelled=True``.

        ``style``: "short" (the answer alone) or "sentence", for generators that take
        instructions. ``grounded``: the answer is a span of the passages (None: automatic,
        see :func:`ragdesk.core.options.resolve_grounded`). ``temperature``: τ
        of p(z|x); by default the snapshot's (fitted, measured for its encoder, or 1 for DPR).
        """
        check_question(question)
        check_mode(mode, decoding)
        check_style(style)
        get_retriever(retriever)  # an unknown name fails before any work
        DecodeOptions(num_beams, max_new_tokens, min_new_tokens).check()
        index = self.snapshot_index(snapshot)  # taken once: a switch now does not affect us
        t0 = time.perf_counter()
        hits = self._search(question, n_docs, index, retriever)
        t1 = time.perf_counter()
        ans = self.answer_from_docs(
            question, hits, mode=mode, decoding=decoding, num_beams=num_beams,
            max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens, on_token=on_token,
            cancel=cancel, snapshot_name=getattr(index, "name", None), style=style,
            grounded=grounded,
            temperature=temperature_of(index) if temperature is None else temperature)
        ans.timings["retrieve_s"] = t1 - t0
        ans.timings["total_s"] = time.perf_counter() - t0
        return ans

    def answer_from_docs(
        self,
        question: str,
        docs: Sequence[Hit],
        *,
        mode: str = "token",
        decoding: str = "thorough",
        num_beams: int = 1,
        max_new_tokens: int = 32,
        min_new_tokens: int = 0,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
        snapshot_name: str | None = None,
        style: str = DEFAULT_STYLE,
        grounded: bool | None = None,
        temperature: float | None = None,
    ) -> Answer:
        """Generate from passages retrieved elsewhere (rank order, exact scores).

        ``temperature`` None: the τ of ``snapshot_name`` when this engine can open it, else 1.
        """
        check_question(question)
        check_mode(mode, decoding)
        check_style(style)
        if temperature is None:
            temperature = self._temperature_of(snapshot_name)
        grounded = resolve_grounded(grounded, self.generator.kind)
        with self._lock:
            if mode == "token":
                return rag_token_generate(
                    self.generator, question, docs, num_beams=num_beams,
                    max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                    on_token=on_token, cancel=cancel, snapshot=snapshot_name, style=style,
                    grounded=grounded, temperature=temperature)
            return rag_sequence_generate(
                self.generator, question, docs, decoding=decoding, num_beams=num_beams,
                max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
                on_token=on_token, cancel=cancel, snapshot=snapshot_name, style=style,
                grounded=grounded, temperature=temperature)

    def _temperature_of(self, snapshot_name: str | None) -> float:
        if snapshot_name is None or self.library is None:
            return 1.0
        try:
            return temperature_of(self.library.get(snapshot_name))
        except Exception:  # a removed snapshot: its docs still answer, with τ = 1
            log.warning("no temperature for snapshot %r; using 1", snapshot_name)
            return 1.0

    def close(self) -> None:
        """Close what the engine opened (the snapshot library and data directory of
        :func:`load_engine`); the models stay usable."""
        if self._owns_library and self.library is not None:
            self.library.close()
            self._owns_library = False
        if self._context is not None:
            self._context.close()
            self._context = None


# ---------------------------------------------------------------------- loading --------


def _load_question_encoder(ref: str) -> TextEncoder:
    from ragdesk.core.models import load_question_encoder

    return load_question_encoder(ref)


def _load_generator(ref: str, precision: str | None = None) -> Generator:
    from ragdesk.core.models import load_generator

    gen: Generator = load_generator(ref, precision=precision)
    return gen


def _pack_for(app: AppContext, snapshot: str | None, pack: str | None) -> Any:
    from ragdesk.core.models import chosen_pack, get_pack

    name = pack
    if name is None:
        snap = snapshot or app.catalog.active_snapshot()
        if snap is not None:
            name = app.catalog.get_snapshot(snap).default_pack
    if name is None:
        name = chosen_pack(app.settings)
    return get_pack(app.catalog, name, app.data)


def engine_from_context(app: AppContext, *, snapshot: str | None = None,
                        question_encoder: str | os.PathLike[str] | None = None,
                        generator: str | os.PathLike[str] | None = None,
                        pack: str | None = None) -> Engine:
    """An engine over the snapshots of ``app``'s data directory (the CLI and GUI use this)."""
    from ragdesk.core.snapshots import SnapshotLibrary

    if snapshot is not None:
        app.catalog.get_snapshot(snapshot)  # NotFoundError names the snapshot
    if question_encoder is None or generator is None:
        spec = _pack_for(app, snapshot, pack)
        question_encoder = question_encoder or spec.question_encoder
        generator = generator or spec.generator
    qenc = _load_question_encoder(str(question_encoder))
    # "float32" (exact), "bfloat16" (the fast path of the starter pack's Gemma 3) or "int8",
    # for the GUI and the API as for `ragdesk ask --precision`
    gen = _load_generator(str(generator), app.settings.get("generator_precision"))
    library = SnapshotLibrary(app.data, app.catalog)
    log.info("engine: question encoder %s, generator %s (%s)", qenc.info.id, gen.name, gen.kind)
    return Engine(qenc, gen, library=library, snapshot=snapshot, owns_library=True)


def load_engine(snapshot: str | None = None,
                question_encoder: str | os.PathLike[str] | None = None,
                generator: str | os.PathLike[str] | None = None,
                data_dir: str | os.PathLike[str] | None = None,
                pack: str | None = None) -> Engine:
    """Load a RAG engine.

    ``snapshot``: a snapshot name (default: whichever is active when each answer starts).
    ``question_encoder`` / ``generator``: hub ids in the HF cache, local folders, a RAG
    checkpoint folder or a ``.gguf`` file; without them the models come from ``pack``, else
    from the snapshot's default pack, else from the pack chosen in the settings.
    ``data_dir``: the ragdesk data directory (default: ``$RAGDESK_DATA_DIR`` or the
    platform's).
    """
    from ragdesk.core.app import AppContext

    app = AppContext(data_dir)
    try:
        engine = engine_from_context(app, snapshot=snapshot, question_encoder=question_encoder,
                                     generator=generator, pack=pack)
    except BaseException:
        app.close()
        raise
    engine._context = app
    return engine


__all__ = ["Engine", "engine_from_context", "load_engine"]
