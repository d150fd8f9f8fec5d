"""The evaluation loop with an in-memory snapshot and stand-in encoder / answerer, checked
against a naive recomputation of every figure."""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from ragdesk.core.errors import Cancelled
from ragdesk.core.evaluation.metrics import exact_match, has_answer, token_f1
from ragdesk.core.evaluation.questions import Question
from ragdesk.core.evaluation.runner import answerable_flags, evaluate
from ragdesk.core.progress import CancelToken, ProgressUpdate
from ragdesk.core.types import Hit, Passage, RetrievedDoc

WORDS = ["apollo", "moon", "rome", "jazz", "piano", "river", "king", "queen", "war", "island",
         "1969", "1453", "blue", "red"]


class Corpus:
    def __init__(self, n: int = 300, dim: int = 8, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.passages = [Passage(i, f"Title {rng.choice(WORDS)}",
                                 " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))))
                         for i in range(n)]
        e = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
        self.emb = e
        self.searches = 0

    @property
    def size(self) -> int:
        return len(self.passages)

    def get_passages(self, ids: Sequence[int]) -> list[Passage]:
        return [self.passages[i] for i in ids]

    def search(self, q: np.ndarray, k: int) -> list[list[Hit]]:
        self.searches += 1
        out = []
        for row in q:
            ip = self.emb @ row
            order = np.lexsort((np.arange(len(ip)), -ip))[:k]
            out.append([Hit(int(i), self.passages[i].title, self.passages[i].text, float(ip[i]))
                        for i in order])
        return out


class Encoder:
    """Deterministic vectors from the question text."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts: list[str], batch_size: int = 64, progress: object = None,
               cancel: object = None) -> np.ndarray:
        self.calls.append(len(texts))
        return np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(8)
                         for t in texts]).astype(np.float32)


@dataclass
class FakeAnswer:
    text: str
    docs: list[RetrievedDoc]
    timings: dict[str, float]


def _questions(n: int = 40) -> list[Question]:
    rng = random.Random(5)
    qs = []
    for i in range(n):
        ans = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 2)))]
        if i % 7 == 0:
            ans = ["zebra crossing"]  # in no passage
        elif i % 5 == 0:
            ans.append("zebra crossing")
        qs.append(Question(f"question {i} about {ans[0]}?", tuple(ans), line=2 * i + 1))
    return qs


def test_retrieval_figures_match_a_naive_recomputation() -> None:
    corpus, enc, qs = Corpus(), Encoder(), _questions()
    updates: list[ProgressUpdate] = []
    report = evaluate(qs, encoder=enc, retrieve_batch=lambda t, v, k: corpus.search(v, k),
                      passages=corpus, batch_size=16, cite=3, progress=updates.append,
                      ks=(1, 5, 20, 100))
    assert enc.calls == [16, 16, 8]  # encoded in batches
    assert corpus.searches == 3  # searched in batches
    s: dict[str, Any] = report.to_json()
    assert set(s) >= {"n", "em", "f1", "top_k_accuracy", "answerable", "timings"}
    assert s["em"] is None and s["f1"] is None and s["answerable"]["em"] is None

    vecs = np.concatenate([enc.encode([q.question]) for q in qs])
    firsts, answerable = [], []
    for q, v in zip(qs, vecs, strict=True):
        hits = corpus.search(v[None], 100)[0]
        flags = [has_answer(h.title, h.text, q.answers) for h in hits]
        firsts.append(flags.index(True) if any(flags) else None)
        answerable.append(any(has_answer(p.title, p.text, q.answers) for p in corpus.passages))
    assert [r.first_hit_rank for r in report.results] == firsts
    assert [r.answerable for r in report.results] == answerable
    for k in (1, 5, 20, 100):
        expected = sum(f is not None and f < k for f in firsts) / len(qs)
        assert s["top_k_accuracy"][str(k)] == pytest.approx(expected)
        sub = [f for f, a in zip(firsts, answerable, strict=True) if a]
        assert s["answerable"]["top_k_accuracy"][str(k)] == pytest.approx(
            sum(f is not None and f < k for f in sub) / len(sub))
    assert s["answerable"]["n"] == sum(answerable) < len(qs)
    assert 0 < s["top_k_accuracy"]["100"] <= 1
    r0: dict[str, Any] = report.results[0].to_json()
    assert [d["rank"] for d in r0["docs"]] == [0, 1, 2]
    assert r0["line"] == 1 and r0["prediction"] is None
    assert updates and updates[-1].done == len(qs)
    assert s["timings"]["retrieval_per_question_ms"] > 0


def test_end_to_end_em_and_f1() -> None:
    corpus, enc, qs = Corpus(), Encoder(), _questions(12)

    def answer(question: str) -> FakeAnswer:
        i = int(question.split()[1])
        text = qs[i].answers[0] if i % 3 == 0 else f"{qs[i].answers[0]} maybe"
        docs = [RetrievedDoc(p.id, p.title, p.text, score=1.0, prob=0.5)
                for p in corpus.passages[:2]]
        return FakeAnswer(text, docs, {"generate_s": 0.01})

    report = evaluate(qs, encoder=enc, retrieve_batch=lambda t, v, k: corpus.search(v, k),
                      passages=corpus, answer=answer, cite=5)
    s: dict[str, Any] = report.to_json()
    preds = [answer(q.question).text for q in qs]
    em = [exact_match(p, q.answers) for p, q in zip(preds, qs, strict=True)]
    f1 = [token_f1(p, q.answers) for p, q in zip(preds, qs, strict=True)]
    assert s["em"] == pytest.approx(np.mean(em))
    assert s["f1"] == pytest.approx(np.mean(f1))
    assert 0 < s["em"] < s["f1"] < 1
    ans_mask = [r.answerable for r in report.results]
    assert s["answerable"]["em"] == pytest.approx(np.mean([e for e, a in zip(em, ans_mask,
                                                                           strict=True) if a]))
    r = report.results[0]
    assert r.prediction == preds[0] and [d["id"] for d in r.docs] == [0, 1]  # what was read
    assert [d["prob"] for d in r.docs] == [0.5, 0.5]
    assert "answer_s" in r.timings and r.timings["generate_s"] == 0.01
    assert s["timings"]["answer_per_question_ms"] >= 0


def test_answerable_flags_chunking_and_cancel() -> None:
    corpus, qs = Corpus(n=250), _questions(30)
    naive = [any(has_answer(p.title, p.text, q.answers) for p in corpus.passages) for q in qs]
    assert answerable_flags(corpus, qs, chunk=7) == naive
    assert answerable_flags(corpus, qs, chunk=1000) == naive
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        answerable_flags(corpus, qs, cancel=tok)
    with pytest.raises(Cancelled):
        evaluate(qs, encoder=Encoder(), retrieve_batch=lambda t, v, k: corpus.search(v, k),
                 cancel=tok)


def test_without_a_passage_source_answerable_is_null() -> None:
    corpus = Corpus()
    report = evaluate(_questions(5), encoder=Encoder(),
                      retrieve_batch=lambda t, v, k: corpus.search(v, k))
    assert report.to_json()["answerable"] is None


def test_rows_and_summary_say_which_answers_came_from_memory() -> None:
    corpus, enc, qs = Corpus(), Encoder(), _questions(9)

    def answer(question: str) -> FakeAnswer:
        i = int(question.split()[1])
        out = FakeAnswer(qs[i].answers[0], [], {})
        out.from_memory = i % 3 == 0  # type: ignore[attr-defined]
        out.other_text = f"other {i}"  # type: ignore[attr-defined]
        return out

    report = evaluate(qs, encoder=enc, retrieve_batch=lambda t, v, k: corpus.search(v, k),
                      passages=corpus, answer=answer, cite=5)
    rows = [r.to_json() for r in report.results]
    assert [r["from_memory"] for r in rows] == [i % 3 == 0 for i in range(9)]
    assert [r["other"] for r in rows] == [f"other {i}" for i in range(9)]
    assert report.to_json()["from_memory"] == 3
