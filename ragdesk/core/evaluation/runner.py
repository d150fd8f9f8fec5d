"""The evaluation loop behind ``ragdesk eval``.

Retrieval is always measured, in batches: questions are encoded ``batch_size`` at a time and
searched as one matrix, and a question counts as a hit at k when one of its top-k passages
contains a normalized gold answer (DPR's convention, see :mod:`.metrics`). Unless
``retrieval_only``, every question then goes through the engine for an answer, scored with EM
and token F1.

"Answerable" questions are those with a gold answer somewhere in the snapshot (one pass over
all passages); on a small snapshot the figures over that subset are the honest ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import numpy as np

from ragdesk.core.confidence.probe import state_json
from ragdesk.core.confidence.sources import summarize_sources
from ragdesk.core.evaluation.metrics import (
    DEFAULT_KS,
    AnswerMatcher,
    exact_match,
    passage_string,
    token_f1,
    top_k_accuracy,
)
from ragdesk.core.evaluation.questions import Question
from ragdesk.core.evaluation.selective import selective_summary
from ragdesk.core.posterior import entropy
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.types import Hit, Passage, ReadingState, RetrievedDoc

PASSAGE_CHUNK = 2000


class QuestionEncoder(Protocol):
    def encode(self, texts: list[str], batch_size: int = ...,
               progress: ProgressCallback | None = ...,
               cancel: CancelToken | None = ...) -> np.ndarray: ...


class PassageSource(Protocol):
    """What the answerable scan needs from a snapshot."""

    @property
    def size(self) -> int: ...

    def get_passages(self, ids: Sequence[int]) -> list[Passage]: ...


# (questions, question vectors [n, dim], k) -> top-k hits per question, best first.
BatchRetriever = Callable[[Sequence[str], np.ndarray, int], list[list[Hit]]]
# question -> the engine's Answer (anything with .text, .docs and .timings).
Answerer = Callable[[str], object]
T = TypeVar("T")


@dataclass
class QuestionResult:
    line: int
    question: str
    answers: list[str]
    answerable: bool | None
    first_hit_rank: int | None  # 0-based rank of the first passage with an answer
    docs: list[dict[str, object]]  # the passages cited in --out
    prediction: str | None = None
    em: float | None = None
    f1: float | None = None
    timings: dict[str, float] = field(default_factory=dict)
    top1_prob: float | None = None  # the largest p(z|x) among the passages read
    token_entropy: float | None = None  # mean entropy (nats) of the answer tokens' sources
    # P(right) of the answer and whether it said "not found"; ``prediction`` is the best
    # guess either way, so that it can be scored
    confidence: float | None = None
    abstained: bool = False
    features: dict[str, float] = field(default_factory=dict)
    source: int | None = None  # the passage the answer is shown as quoted from (rank)
    # the prediction is the reader's answer from memory; ``other``: the candidate not kept
    from_memory: bool = False
    other: str | None = None
    reading_state: ReadingState | None = None  # what the confidence model's probe reads

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "line": self.line, "question": self.question, "answers": self.answers,
            "prediction": self.prediction, "em": self.em, "f1": self.f1,
            "confidence": self.confidence, "abstained": self.abstained,
            "answerable": self.answerable, "first_hit_rank": self.first_hit_rank,
            "source": self.source, "from_memory": self.from_memory, "other": self.other,
            "docs": self.docs, "timings": self.timings,
            "top1_prob": self.top1_prob, "token_entropy": self.token_entropy,
            "features": self.features}
        if self.reading_state is not None:
            out["reading_state"] = state_json(self.reading_state)
        return out


@dataclass
class EvalReport:
    results: list[QuestionResult]
    ks: tuple[int, ...]
    retrieval_only: bool
    timings: dict[str, float]
    config: dict[str, object]
    abstain: bool = True  # whether the answers were allowed to say "not found"

    def _summary(self, rows: list[QuestionResult]) -> dict[str, object]:
        def mean(vals: list[float]) -> float | None:
            return float(np.mean(vals)) if vals else None

        # rows left unanswered (answerable_only) make EM over these rows unknown, not 0
        answered = not self.retrieval_only and all(r.em is not None for r in rows)
        return {
            "n": len(rows),
            "em": mean([r.em or 0.0 for r in rows]) if answered else None,
            "f1": mean([r.f1 or 0.0 for r in rows]) if answered else None,
            "top_k_accuracy": top_k_accuracy([r.first_hit_rank for r in rows], self.ks),
            "mean_top1_prob": mean([r.top1_prob for r in rows if r.top1_prob is not None]),
            "mean_token_entropy": mean([r.token_entropy for r in rows
                                        if r.token_entropy is not None]),
            "from_memory": sum(r.from_memory for r in rows),
            "confidence": selective_summary(
                [r.confidence for r in rows], [bool(r.em) for r in rows],
                [r.answerable for r in rows],
                [r.abstained for r in rows] if self.abstain else None) if answered else None,
        }

    def to_json(self) -> dict[str, object]:
        out = self._summary(self.results)
        known = [r for r in self.results if r.answerable is not None]
        if len(known) == len(self.results):
            out["answerable"] = self._summary([r for r in self.results if r.answerable])
        else:
            out["answerable"] = None
        out["timings"] = self.timings
        out["config"] = self.config
        return out


def _batches(items: Sequence[T], size: int) -> Iterator[tuple[int, Sequence[T]]]:
    for start in range(0, len(items), size):
        yield start, items[start:start + size]


class _PassageStringCache:
    """:func:`passage_string` per passage id, so a passage retrieved for many questions is
    normalized once."""

    def __init__(self) -> None:
        self._cache: dict[int, str] = {}

    def get(self, hit: Hit | RetrievedDoc) -> str:
        s = self._cache.get(hit.id)
        if s is None:
            s = passage_string(hit.title, hit.text)
            self._cache[hit.id] = s
        return s


def answerable_flags(
    source: PassageSource,
    questions: Sequence[Question],
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    chunk: int = PASSAGE_CHUNK,
) -> list[bool]:
    """Whether any passage of ``source`` contains a gold answer of each question.

    Passages are read and normalized a chunk at a time; within a chunk, a word -> passages
    map narrows each answer to the passages holding its rarest word before the exact
    whole-word test, and questions already found answerable are not searched again.
    """
    matchers = [AnswerMatcher(q.answers) for q in questions]
    found = [False] * len(questions)
    pending = [i for i, m in enumerate(matchers) if m.needles]
    total = source.size
    prog = Progress(total, "finding answerable questions", progress)
    for start in range(0, total, chunk):
        if cancel is not None:
            cancel.raise_if_cancelled()
        ids = list(range(start, min(total, start + chunk)))
        strings = [passage_string(p.title, p.text) for p in source.get_passages(ids)]
        postings: dict[str, list[int]] = {}
        for j, s in enumerate(strings):
            for tok in set(s.split()):
                postings.setdefault(tok, []).append(j)
        still = []
        for i in pending:
            if _any_match(matchers[i], strings, postings):
                found[i] = True
            else:
                still.append(i)
        pending = still
        prog.update(len(ids))
    return found


def _any_match(m: AnswerMatcher, strings: list[str], postings: dict[str, list[int]]) -> bool:
    for toks, needle in zip(m.token_needles, m.needles, strict=True):
        lists = [postings.get(t) for t in set(toks)]
        if any(lst is None for lst in lists):
            continue
        shortest = min((lst for lst in lists if lst is not None), key=len)
        if any(needle in strings[j] for j in shortest):
            return True
    return False


def evaluate(
    questions: Sequence[Question],
    *,
    encoder: QuestionEncoder,
    retrieve_batch: BatchRetriever,
    passages: PassageSource | None = None,
    answer: Answerer | None = None,
    ks: Iterable[int] = DEFAULT_KS,
    cite: int = 5,
    batch_size: int = 64,
    config: dict[str, object] | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelToken | None = None,
    answerable_only: bool = False,
    abstain: bool = True,
    on_answered: Callable[[QuestionResult], None] | None = None,
) -> EvalReport:
    """Run retrieval for every question (and generation when ``answer`` is given).

    ``passages`` (the snapshot) enables the answerable subset; ``cite`` passages per question
    go into the per-question results. ``answerable_only`` (needs ``passages``): generate only
    for the answerable questions, whose figures are then the ones reported. ``on_answered``
    gets each question's result as soon as it is answered (a long run's partial output).
    """
    if answerable_only and passages is None:
        raise ValueError("answerable_only needs the passages to find the answerable questions")
    ks_t = tuple(sorted(set(ks)))
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    flags: list[bool] | None = None
    if passages is not None:
        t0 = time.perf_counter()
        flags = answerable_flags(passages, questions, progress, cancel)
        timings["answerable_scan_s"] = time.perf_counter() - t0
    run = _Run(questions, flags, cite, progress, cancel)
    run.retrieve(encoder, retrieve_batch, max(max(ks_t), cite), batch_size, timings)
    if answer is not None:
        todo = [i for i in range(len(questions))
                if not answerable_only or (flags is not None and flags[i])]
        run.answer(answer, todo, timings, on_answered)
    timings["total_s"] = time.perf_counter() - t_start
    return EvalReport(results=run.results, ks=ks_t, retrieval_only=answer is None,
                      timings=timings, config=dict(config or {}), abstain=abstain)


class _Run:
    """One evaluation's per-question results, filled by retrieval and then by answering."""

    def __init__(self, questions: Sequence[Question], flags: list[bool] | None, cite: int,
                 progress: ProgressCallback | None, cancel: CancelToken | None) -> None:
        self.questions = questions
        self.flags = flags
        self.cite = cite
        self.progress = progress
        self.cancel = cancel
        self.matchers = [AnswerMatcher(q.answers) for q in questions]
        self.cache = _PassageStringCache()
        self.results: list[QuestionResult] = []

    def _check_cancel(self) -> None:
        if self.cancel is not None:
            self.cancel.raise_if_cancelled()

    def retrieve(self, encoder: QuestionEncoder, retrieve_batch: BatchRetriever, depth: int,
                 batch_size: int, timings: dict[str, float]) -> None:
        encode_s = search_s = 0.0
        prog = Progress(len(self.questions), "retrieving", self.progress)
        texts = [q.question for q in self.questions]
        for start, batch in _batches(texts, batch_size):
            self._check_cancel()
            t0 = time.perf_counter()
            vecs = encoder.encode(list(batch), batch_size=batch_size)
            t1 = time.perf_counter()
            hit_lists = retrieve_batch(batch, vecs, depth)
            t2 = time.perf_counter()
            encode_s += t1 - t0
            search_s += t2 - t1
            for j, hits in enumerate(hit_lists):
                self.results.append(self._retrieved(start + j, hits))
            prog.update(len(batch))
        timings["question_encoding_s"] = encode_s
        timings["search_s"] = search_s
        timings["retrieval_per_question_ms"] = (
            1000.0 * (encode_s + search_s) / max(1, len(self.questions)))

    def _retrieved(self, i: int, hits: Sequence[Hit]) -> QuestionResult:
        q, matcher = self.questions[i], self.matchers[i]
        first = next((r for r, h in enumerate(hits) if matcher.matches(self.cache.get(h))),
                     None)
        docs = [_doc_json(r, h, matcher.matches(self.cache.get(h)))
                for r, h in enumerate(hits[:self.cite])]
        return QuestionResult(line=q.line, question=q.question, answers=list(q.answers),
                              answerable=None if self.flags is None else self.flags[i],
                              first_hit_rank=first, docs=docs)

    def answer(self, answer: Answerer, todo: list[int], timings: dict[str, float],
               on_answered: Callable[[QuestionResult], None] | None = None) -> None:
        gen_s = 0.0
        prog = Progress(len(todo), "answering", self.progress)
        for i in todo:
            self._check_cancel()
            t0 = time.perf_counter()
            ans = answer(self.questions[i].question)
            dt = time.perf_counter() - t0
            gen_s += dt
            self._record(i, ans, dt)
            if on_answered is not None:
                on_answered(self.results[i])
            prog.update(1)
        timings["generation_s"] = gen_s
        timings["answer_per_question_ms"] = 1000.0 * gen_s / max(1, len(todo))

    def _record(self, i: int, ans: Any, seconds: float) -> None:
        q, r, matcher = self.questions[i], self.results[i], self.matchers[i]
        r.prediction = str(ans.text)
        r.em = exact_match(r.prediction, q.answers)
        r.f1 = token_f1(r.prediction, q.answers)
        r.timings = {"answer_s": seconds,
                     **{k: float(v) for k, v in (getattr(ans, "timings", {}) or {}).items()}}
        # Cite what the generator actually read, which --out readers want to inspect.
        used = list(getattr(ans, "docs", []) or [])
        if used:
            r.docs = [_doc_json(rank, d, matcher.matches(self.cache.get(d)))
                      for rank, d in enumerate(used)]
            probs = [getattr(d, "prob", None) for d in used]
            if all(isinstance(p, float) for p in probs):
                r.top1_prob = max(p for p in probs if p is not None)
        toks = list(getattr(ans, "tokens", []) or [])
        posts = [t.posterior for t in toks if t.posterior]  # memory's tokens read no passage
        if posts:
            r.token_entropy = float(np.mean([entropy(p) for p in posts]))
        conf = getattr(ans, "confidence", None)
        r.confidence = float(conf) if conf is not None else None
        r.abstained = bool(getattr(ans, "abstained", False))
        r.from_memory = bool(getattr(ans, "from_memory", False))
        other = getattr(ans, "other_text", None)
        r.other = other if isinstance(other, str) else None
        r.features = {k: float(v) for k, v in (getattr(ans, "features", {}) or {}).items()}
        state = getattr(ans, "reading_state", None)
        r.reading_state = state if isinstance(state, ReadingState) else None
        if toks and used:
            r.source = summarize_sources(ans).primary


def _doc_json(rank: int, hit: Any, contains_answer: bool) -> dict[str, object]:
    d: dict[str, object] = {"rank": rank, "id": int(hit.id), "title": hit.title,
                         "text": hit.text, "score": float(hit.score),
                         "has_answer": contains_answer}
    prob = getattr(hit, "prob", None)
    if prob is not None:
        d["prob"] = float(prob)
    return d
