"""The engine: a question encoder and a generator over a snapshot library.

>>> engine = ragdesk.load_engine(snapshot="wiki-2018")       # doctest: +SKIP
>>> ans = engine.answer("who wrote hamlet", mode="token")    # doctest: +SKIP

Models load once per :class:`Engine` (:mod:`ragdesk.core.session` loads them). Every answer
takes the snapshot once, at its start, and finishes on it even if another snapshot becomes
active meanwhile.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ragdesk.core.confidence import (
    CLOSED_BOOK,
    QUOTED_PASSAGE_LP,
    READING_PROBE,
    ConfidenceModel,
    answer_features,
    assign_sources,
    confidence_model,
    summarize_sources,
)
from ragdesk.core.confidence.memory import judge_memory, memory_features
from ragdesk.core.engine.attribution import TokenCallback
from ragdesk.core.engine.closed_book import closed_book
from ragdesk.core.engine.contracts import PassageText
from ragdesk.core.engine.generators import Generator
from ragdesk.core.engine.memory_answer import memory_answer
from ragdesk.core.engine.rag_sequence import rag_sequence
from ragdesk.core.engine.rag_together import read_together
from ragdesk.core.engine.rag_token import rag_token
from ragdesk.core.engine.reading_state import read_again
from ragdesk.core.engine.request import AnswerRequest
from ragdesk.core.errors import NotFoundError
from ragdesk.core.free_cores import fit_threads
from ragdesk.core.options import DEFAULT_OPTIONS, AnswerOptions, check_question
from ragdesk.core.posterior import temperature_of
from ragdesk.core.progress import CancelToken
from ragdesk.core.retrieval import (
    RetrievalRequest,
    SearchableSnapshot,
    doc_log_probs,
    get_retriever,
    retrieved_docs,
)
from ragdesk.core.types import Answer, Hit, RetrievedDoc

if TYPE_CHECKING:
    from ragdesk.core.encoders import TextEncoder

log = logging.getLogger(__name__)


class SnapshotSource(Protocol):
    """Where an engine finds snapshots by name (``ragdesk.core.snapshots.SnapshotLibrary``)."""

    def current(self) -> SearchableSnapshot: ...

    def get(self, name: str) -> SearchableSnapshot: ...

    def close(self) -> None: ...


class Engine:
    """Answers questions with RAG-Token or RAG-Sequence over a snapshot.

    ``snapshot`` pins the engine to one snapshot name; without it every answer uses the
    snapshot that is active when the answer starts. ``library`` finds snapshots by name (the
    session's one ``SnapshotLibrary``); an engine without one answers only from docs given to
    :meth:`answer_from_docs` or from a snapshot passed as ``snapshot=``. ``on_close`` runs once
    in :meth:`close` (what the session opened for this engine alone); ``owns_library=True``
    is the same as ``on_close=library.close``.
    """

    def __init__(self, question_encoder: TextEncoder, generator: Generator, *,
                 library: SnapshotSource | None = None, snapshot: str | None = None,
                 on_close: Callable[[], None] | None = None,
                 owns_library: bool = False, every_feature: bool = False,
                 read_memory: bool = False) -> None:
        self.question_encoder = question_encoder
        # Run the closed-book pass even when no confidence model reads it: an evaluation's
        # rows are what a model is fitted on. Answering alone skips a pass nobody reads.
        self.every_feature = every_feature
        # Read every answer from memory too, whether or not a model judges those: the rows
        # a memory part is fitted on (see ragdesk.core.evaluation.confidence_fit).
        self.read_memory = read_memory
        self.generator = generator
        self.library = library
        self.snapshot_name = snapshot
        if owns_library and library is not None and on_close is None:
            on_close = library.close
        self._on_close = on_close
        self._lock = threading.Lock()

    # -- snapshots ------------------------------------------------------------------

    def snapshot_index(self, snapshot: SearchableSnapshot | str | None = None
                       ) -> SearchableSnapshot:
        """The snapshot to use now: ``snapshot`` (an opened one or a name), the pinned one,
        or the active one."""
        if snapshot is not None and not isinstance(snapshot, str):
            return snapshot
        name = snapshot if snapshot is not None else self.snapshot_name
        if self.library is None:
            raise NotFoundError("This engine has no snapshot library to retrieve from.",
                                hint="Load it with ragdesk.load_engine(), or pass a snapshot.")
        return self.library.get(name) if name is not None else self.library.current()

    # -- retrieval ------------------------------------------------------------------

    def retrieve(self, question: str, n_docs: int = DEFAULT_OPTIONS.n_docs,
                 snapshot: SearchableSnapshot | str | None = None,
                 retriever: str = DEFAULT_OPTIONS.retriever) -> list[RetrievedDoc]:
        """The top ``n_docs`` passages in rank order with their scores and p(z|x)."""
        check_question(question)
        index = self.snapshot_index(snapshot)
        hits = self._search(question, n_docs, index, retriever)
        return retrieved_docs(hits, doc_log_probs(hits, temperature_of(index)), index.name)

    def _search(self, question: str, n_docs: int, index: SearchableSnapshot,
                retriever: str) -> list[Hit]:
        fn = get_retriever(retriever)
        return fn(RetrievalRequest(question=question, n_docs=n_docs, snapshot=index,
                                   question_encoder=self.question_encoder))

    # -- answering ------------------------------------------------------------------

    def ask(self, question: str, options: AnswerOptions = DEFAULT_OPTIONS, *,
            snapshot: SearchableSnapshot | str | None = None,
            on_token: TokenCallback | None = None,
            cancel: CancelToken | None = None) -> Answer:
        """Retrieve ``options.n_docs`` passages and generate the answer, marginalizing over
        them. The question and the options are checked once, here, before any work, and go
        down as one :class:`.request.AnswerRequest`.

        ``on_token`` receives each :class:`AnswerToken` once it is decided (RAG-Token: as it
        is generated; beam search: when no beam can change it any more; RAG-Sequence fast:
        when every hypothesis that can still win shares it; thorough: when the answer is
        chosen). ``cancel`` is checked between decoding steps; a cancelled answer holds what
        was generated so far and ``cancelled=True``. What each option means:
        :class:`ragdesk.core.options.AnswerOptions`; its ``temperature`` None is the
        snapshot's τ (fitted, measured for its encoder, or 1 for DPR), and an answer whose
        confidence is below the model's threshold is marked ``abstained`` when
        ``options.abstain`` (see :mod:`ragdesk.core.confidence`).
        """
        req = AnswerRequest.checked(question, options, self.generator)
        # a retriever registered under another name than the built-in ones is looked up
        # (and refused if unknown) before any work too
        get_retriever(options.retriever)
        index = self.snapshot_index(snapshot)  # taken once: a switch now does not affect us
        t0 = time.perf_counter()
        hits = self._search(question, options.n_docs, index, options.retriever)
        t1 = time.perf_counter()
        temperature = (temperature_of(index) if options.temperature is None
                       else req.temperature)
        req = req.on(index.name, temperature)
        ans = self._generate(req, hits, on_token, cancel)
        model = self.judge(ans, options.abstain, index)
        ans = self._or_from_memory(ans, req, hits, options.abstain, model, cancel)
        ans.timings["retrieve_s"] = t1 - t0
        ans.timings["total_s"] = time.perf_counter() - t0
        return ans

    def answer(
        self,
        question: str,
        *,
        mode: str = DEFAULT_OPTIONS.mode,
        decoding: str = DEFAULT_OPTIONS.decoding,
        n_docs: int = DEFAULT_OPTIONS.n_docs,
        num_beams: int = DEFAULT_OPTIONS.num_beams,
        max_new_tokens: int = DEFAULT_OPTIONS.max_new_tokens,
        min_new_tokens: int = DEFAULT_OPTIONS.min_new_tokens,
        retriever: str = DEFAULT_OPTIONS.retriever,
        snapshot: SearchableSnapshot | str | None = None,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
        style: str = DEFAULT_OPTIONS.style,
        grounded: bool | None = DEFAULT_OPTIONS.grounded,
        temperature: float | None = DEFAULT_OPTIONS.temperature,
        abstain: bool = DEFAULT_OPTIONS.abstain,
    ) -> Answer:
        """:meth:`ask` with the options as keywords (their defaults are
        :class:`ragdesk.core.options.AnswerOptions`')."""
        options = _keyword_options(
            mode=mode, decoding=decoding, n_docs=n_docs, num_beams=num_beams,
            max_new_tokens=max_new_tokens, min_new_tokens=min_new_tokens,
            retriever=retriever, style=style, grounded=grounded, temperature=temperature,
            abstain=abstain)
        return self.ask(question, options, snapshot=snapshot, on_token=on_token,
                        cancel=cancel)

    def ask_from_docs(self, question: str, docs: Sequence[Hit],
                      options: AnswerOptions = DEFAULT_OPTIONS, *,
                      snapshot_name: str | None = None,
                      on_token: TokenCallback | None = None,
                      cancel: CancelToken | None = None) -> Answer:
        """Generate from passages retrieved elsewhere (rank order, exact scores); the
        options' ``n_docs`` and ``retriever`` do not apply.

        ``temperature`` None: the τ of ``snapshot_name`` when this engine can open it, else 1.
        The answer's shown sources and confidence are set as :meth:`judge` says.
        """
        req = AnswerRequest.checked(question, options, self.generator)
        temperature = (self._temperature_of(snapshot_name) if options.temperature is None
                       else req.temperature)
        req = req.on(snapshot_name, temperature)
        ans = self._generate(req, docs, on_token, cancel)
        model = self.judge(ans, options.abstain, self._index_named(snapshot_name))
        return self._or_from_memory(ans, req, docs, options.abstain, model, cancel)

    def answer_from_docs(
        self,
        question: str,
        docs: Sequence[Hit],
        *,
        mode: str = DEFAULT_OPTIONS.mode,
        decoding: str = DEFAULT_OPTIONS.decoding,
        num_beams: int = DEFAULT_OPTIONS.num_beams,
        max_new_tokens: int = DEFAULT_OPTIONS.max_new_tokens,
        min_new_tokens: int = DEFAULT_OPTIONS.min_new_tokens,
        on_token: TokenCallback | None = None,
        cancel: CancelToken | None = None,
        snapshot_name: str | None = None,
        style: str = DEFAULT_OPTIONS.style,
        grounded: bool | None = DEFAULT_OPTIONS.grounded,
        temperature: float | None = DEFAULT_OPTIONS.temperature,
        abstain: bool = DEFAULT_OPTIONS.abstain,
    ) -> Answer:
        """:meth:`ask_from_docs` with the options as keywords."""
        options = _keyword_options(
            mode=mode, decoding=decoding, num_beams=num_beams, max_new_tokens=max_new_tokens,
            min_new_tokens=min_new_tokens, style=style, grounded=grounded,
            temperature=temperature, abstain=abstain)
        return self.ask_from_docs(question, docs, options, snapshot_name=snapshot_name,
                                  on_token=on_token, cancel=cancel)

    def _generate(self, req: AnswerRequest, docs: Sequence[Hit],
                  on_token: TokenCallback | None, cancel: CancelToken | None) -> Answer:
        generate = {"token": rag_token, "together": read_together}.get(req.mode, rag_sequence)
        with self._lock:
            fit_threads()
            return generate(self.generator, req, docs, on_token=on_token, cancel=cancel)

    def judge(self, ans: Answer, abstain: bool = DEFAULT_OPTIONS.abstain,
              index: object | None = None) -> ConfidenceModel | None:
        """Give a finished answer sources that hold it, its features and its confidence
        (the model for ``index``, the snapshot answered from), and mark it abstained when
        the confidence is below the model's threshold; returns that model (None: none
        judged it)."""
        if ans.cancelled:
            return None
        assign_sources(ans)
        model = self._confidence_model(index, ans.mode)
        if self.every_feature or (model is not None and model.reads_any(CLOSED_BOOK)):
            t0 = time.perf_counter()
            with self._lock:
                prior = closed_book(self.generator, ans.question, ans.text, ans.style)
            ans.timings["closed_book_s"] = time.perf_counter() - t0
            ans.features = answer_features(ans, prior.logprob, prior.tokens)
        else:
            ans.features = answer_features(ans, None)
        probe = model.probe if model is not None else None
        if self.every_feature or probe is not None or (
                model is not None and model.reads_any((QUOTED_PASSAGE_LP,))):
            t0 = time.perf_counter()
            with self._lock:
                reading = read_again(
                    self.generator, ans.question, [PassageText(d.title, d.text) for d in ans.docs],
                    summarize_sources(ans).primary, ans.text, ans.mode, ans.style,
                    probe.layer if probe is not None else None)
            ans.timings["reading_state_s"] = time.perf_counter() - t0
            if reading is not None:
                ans.reading_state = reading.state
                ans.features[QUOTED_PASSAGE_LP] = reading.logprob
            state = ans.reading_state
            if probe is not None and state is not None:
                if probe.reads(state):
                    ans.features[READING_PROBE] = probe.score(state.values)
                else:  # a model file made for another generator: judged without the probe
                    log.warning("the confidence model's probe reads %d numbers; %s gives %d",
                                len(probe.weights), self.generator.name, len(state.values))
        if model is not None:
            ans.confidence = model.predict(ans.features)
            ans.abstained = bool(abstain) and model.abstains(ans.confidence)
        return model

    def _or_from_memory(self, ans: Answer, req: AnswerRequest, docs: Sequence[Hit],
                        abstain: bool, model: ConfidenceModel | None,
                        cancel: CancelToken | None) -> Answer:
        """The judged answer, or the reader's answer from memory (no passage in the prompt)
        where ``model``, the one that judged it, has a part for those and finds it likelier
        right. Both candidates' texts and the memory features stay on the answer returned."""
        part = model.memory if model is not None else None
        if (ans.cancelled or self.generator.kind != "causal"
                or not (self.read_memory or (part is not None and ans.confidence is not None))):
            return ans
        t0 = time.perf_counter()
        with self._lock:
            mem = memory_answer(self.generator, req, docs, cancel=cancel)
        spent = time.perf_counter() - t0
        if mem.cancelled:  # the passages' answer is whole: it stands
            return ans
        passage_p = ans.confidence
        features = memory_features(mem, ans.text, 0.0 if passage_p is None else passage_p)
        ans.features.update(features)
        ans.timings["memory_s"] = spent
        ans.other_text = mem.text
        if model is None or part is None or passage_p is None:
            return ans  # read for fitting a memory part: the passages' answer stands
        verdict = judge_memory(model, passage_p, features)
        ans.features["memory_confidence"] = verdict.memory_confidence
        if verdict.from_memory:
            mem.features, mem.other_text = dict(ans.features), ans.text
            mem.retriever = ans.retriever
            mem.timings = {**ans.timings, "memory_decode_s": mem.timings.get("decode_s", 0.0)}
            ans = mem
        ans.confidence = verdict.confidence
        ans.abstained = bool(abstain) and model.abstains(verdict.confidence)
        return ans

    def _index_named(self, snapshot_name: str | None) -> object | None:
        if snapshot_name is None or self.library is None:
            return None
        try:
            return self.library.get(snapshot_name)
        except Exception:  # a removed snapshot: its docs still answer, judged without it
            log.warning("snapshot %r is gone; judging its answer without it", snapshot_name)
            return None

    def _confidence_model(self, index: object | None, mode: str) -> ConfidenceModel | None:
        folder = getattr(index, "folder", None)
        encoder = getattr(getattr(index, "encoder", None), "id", None)
        if encoder is None:
            encoder = getattr(getattr(self.question_encoder, "info", None), "id", None)
        model, _ = confidence_model(folder, self.generator.name, encoder, mode)
        return model

    def _temperature_of(self, snapshot_name: str | None) -> float:
        if snapshot_name is None or self.library is None:
            return 1.0
        try:
            return temperature_of(self.library.get(snapshot_name))
        except Exception:  # a removed snapshot: its docs still answer, with τ = 1
            log.warning("no temperature for snapshot %r; using 1", snapshot_name)
            return 1.0

    def warm_up(self, options: AnswerOptions = DEFAULT_OPTIONS, *,
                cancel: CancelToken | None = None) -> float:
        """Answer a made-up question once and drop it, so that the first real one finds the
        prompt openings and first-touch costs paid (:mod:`.warm_up`); returns seconds."""
        from ragdesk.core.engine.warm_up import warm_up

        return warm_up(self, options, cancel=cancel)

    def close(self) -> None:
        """Close what was opened for this engine alone (by :func:`ragdesk.load_engine`: its
        snapshot library and data directory); the models stay usable."""
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


def _keyword_options(**given: Any) -> AnswerOptions:
    """The options of the keyword methods, unchecked (the request checks them): None
    grounding and temperature keep their meaning (automatic, the snapshot's)."""
    return dataclasses.replace(DEFAULT_OPTIONS, **given)


__all__ = ["Engine", "SnapshotSource"]
