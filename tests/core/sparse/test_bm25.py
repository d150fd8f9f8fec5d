"""BM25 through bm25s against a naive BM25 loop over a small corpus, plus the tokenizer."""

from __future__ import annotations

import math
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from ragdesk.core.errors import CorruptSnapshotError
from ragdesk.core.sparse.bm25 import BM25Index, top_k
from ragdesk.core.sparse.tokenize import bm25_tokens, s_stem

WORDS = ["moon", "apollo", "landing", "rocket", "nasa", "armstrong", "river", "city", "empire",
         "rome", "byzantine", "fall", "music", "jazz", "guitar", "piano", "king", "queen", "war",
         "treaty", "island", "ocean"]


def _corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        length = rng.randint(3, 40)
        # a Zipf-ish draw so document frequencies vary
        words = [WORDS[min(int(rng.paretovariate(1.2)) - 1, len(WORDS) - 1)]
                 for _ in range(length)]
        if i % 17 == 0:
            words = ["The", "and"]  # only stop words: an empty document
        docs.append(" ".join(words))
    return docs


def naive_bm25(docs: list[str], query: str, k1: float, b: float) -> list[float]:
    """The Lucene BM25 formula, term by term, with no shared code beyond the tokenizer."""
    toks = [bm25_tokens(d) for d in docs]
    n = len(toks)
    avgdl = sum(len(t) for t in toks) / n
    df: Counter[str] = Counter()
    for t in toks:
        df.update(set(t))
    scores = []
    for t in toks:
        tf = Counter(t)
        s = 0.0
        for term in bm25_tokens(query):
            if df[term] == 0:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            f = tf[term]
            s += idf * f / (f + k1 * (1 - b + b * len(t) / avgdl))
        scores.append(s)
    return scores


QUERIES = ["apollo moon landing", "Who was the king of Rome?", "jazz jazz piano",
           "rivers and oceans", "zebra", "the and of"]


@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.5, 0.75)])
def test_scores_match_naive_loop(k1: float, b: float) -> None:
    docs = _corpus(300)
    idx = BM25Index.build(docs, k1=k1, b=b)
    assert idx.num_docs == 300
    for q in QUERIES:
        expected = np.asarray(naive_bm25(docs, q, k1, b), dtype=np.float64)
        got = idx.scores(q)
        assert got.shape == (300,)
        np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-6)


def test_search_ranks_like_the_naive_loop_and_survives_save_load(tmp_path: Path) -> None:
    docs = _corpus(400, seed=1)
    idx = BM25Index.build(docs, source={"name": "toy"})
    idx.save(tmp_path / "bm25")
    loaded = BM25Index.load(tmp_path / "bm25")
    assert loaded.meta == idx.meta and loaded.meta.source == {"name": "toy"}
    for q in QUERIES:
        expected = np.asarray(naive_bm25(docs, q, idx.meta.k1, idx.meta.b))
        positive = int((expected > 0).sum())
        for index in (idx, loaded):
            ((ids, vals),) = index.search([q], 10)
            assert len(ids) == min(10, positive)
            order = sorted(range(len(docs)), key=lambda i: (-expected[i], i))[:len(ids)]
            np.testing.assert_allclose(vals, expected[order], rtol=2e-5)
            # ids agree except where scores tie within float32 noise
            for got_id, want_id in zip(ids, order, strict=True):
                assert got_id == want_id or abs(expected[got_id] - expected[want_id]) < 1e-5


def test_top_k_breaks_ties_by_id_and_drops_zero_scores() -> None:
    s = np.array([0.0, 2.0, 1.0, 2.0, 0.0, 1.0], dtype=np.float32)
    ids, vals = top_k(s, 3)
    assert ids.tolist() == [1, 3, 2] and vals.tolist() == [2.0, 2.0, 1.0]
    ids, _ = top_k(s, 10)
    assert ids.tolist() == [1, 3, 2, 5]
    assert top_k(np.zeros(5, np.float32), 3)[0].size == 0


def test_unreadable_index_is_a_corrupt_snapshot_error(tmp_path: Path) -> None:
    (tmp_path / "bm25").mkdir()
    with pytest.raises(CorruptSnapshotError, match="BM25"):
        BM25Index.load(tmp_path / "bm25")


def test_empty_corpus_and_cancel() -> None:
    idx = BM25Index.build(["the", "and of"])
    assert idx.scores("moon").tolist() == [0.0, 0.0]
    from ragdesk.core.errors import Cancelled
    from ragdesk.core.progress import CancelToken

    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        BM25Index.build(_corpus(10), cancel=tok)


@pytest.mark.parametrize(
    ("word", "stem"),
    [("cities", "city"), ("oscars", "oscar"), ("horses", "horse"), ("bus", "bus"),
     ("glass", "glass"), ("series", "sery"), ("aies", "aie"), ("does", "doe"), ("is", "is")],
)
def test_s_stemmer(word: str, stem: str) -> None:
    assert s_stem(word) == stem


def test_tokenizer_folds_case_accents_and_stop_words() -> None:
    assert bm25_tokens("Who won the Oscars in Beyoncé's year?") == [
        "who", "won", "oscar", "beyonce", "s", "year"]
