"""Features of (question, candidate passage) pairs for the hybrid re-ranker.

Per passage, computed once when the sparse index is built (``passage_features.npy``):
whether it opens its article, its length, counts of years, months, numbers and number words,
the share of capitalized words, a biography marker, its title's term count and its embedding
norm. Per question: its type (when / how many / who / where), from plain patterns.

Per candidate (:func:`candidate_features`), in :data:`FEATURE_NAMES` order:

- ``dense_cos``: d(z)·q(x) / (|d(z)| |q(x)|) — the exact inner product for normalized
  encoders such as all-MiniLM-L6-v2, and scale-free for the others;
- ``dense_z``, ``dense_logrank``: the inner product standardized over the candidates, and
  log(1 + its rank among them);
- ``bm25_z``, ``bm25_max``, ``bm25_logrank``: the BM25 score standardized, divided by the best
  candidate's, and log(1 + its rank);
- ``coverage``: the idf-weighted share of the question's terms found in the passage (title
  and text); ``title_coverage``: the same in its title; ``title_in_question``: every term of
  the title occurs in the question;
- ``first``, ``log_length``, ``bio``: passage properties;
- answer-type matches: ``when_years``, ``when_months``, ``how_many_numbers``,
  ``how_many_number_words``, ``who_capitals``, ``where_capitals``, ``who_bio``.

All of them are computed from the question, the passage text and the two retrievers'
scores; none looks at a gold answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

import numpy as np

# Columns of passage_features.npy.
PASSAGE_COLUMNS = ("first", "log_length", "years", "months", "numbers", "number_words",
                   "capitals", "bio", "title_terms", "norm")
_P = {name: i for i, name in enumerate(PASSAGE_COLUMNS)}

FEATURE_NAMES = (
    "dense_cos", "dense_z", "dense_logrank", "bm25_z", "bm25_max", "bm25_logrank",
    "coverage", "title_coverage", "title_in_question", "first", "log_length",
    "when_years", "when_months", "how_many_numbers", "how_many_number_words",
    "who_capitals", "where_capitals", "who_bio", "bio",
)

_YEAR = re.compile(r"\b(?:1[0-9]{3}|20[0-9]{2})\b")
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)?\b")
_MONTH = re.compile(r"\b(?:January|February|March|April|May|June|July|August|September|"
                    r"October|November|December)\b")
_NUMBER_WORD = re.compile(r"\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|"
                          r"twelve|hundred|thousand|million|billion)\b", re.IGNORECASE)
# "(born 1950", "(c. 1340 –", "(1564 – 1616)": how a biography's lead sentence starts.
_BIO = re.compile(r"\((?:born|c\.|\d{3,4}\s*[–-])")

YEAR_CAP, MONTH_CAP, NUMBER_CAP = 3, 3, 5


def passage_row(title_terms: int, text: str, first: bool) -> list[float]:
    """One row of passage_features.npy (the norm is filled in from the embeddings)."""
    words = text.split()
    capitals = sum(1 for w in words[1:] if w[:1].isupper()) / max(1, len(words))
    return [float(first), math.log(max(1, len(words))), float(len(_YEAR.findall(text))),
            float(len(_MONTH.findall(text))), float(len(_NUMBER.findall(text))),
            float(len(_NUMBER_WORD.findall(text))), capitals,
            float(bool(_BIO.search(text[:300]))), float(title_terms), 0.0]


def question_type(question: str) -> tuple[bool, bool, bool, bool]:
    """(when, how many, who, where) — what kind of answer the question wants."""
    q = f" {question.lower().strip()} "
    when = " when " in q or " what year " in q or " what date " in q
    how_many = any(p in q for p in (" how many ", " how much ", " how long ", " how old "))
    who = " who " in q or " whom " in q
    where = " where " in q
    return when, how_many, who, where


class Postings:
    """Term -> sorted passage ids, in CSR form (``indptr`` over term ids)."""

    def __init__(self, indptr: np.ndarray, indices: np.ndarray) -> None:
        self.indptr = indptr
        self.indices = indices

    @classmethod
    def build(cls, docs_terms: Sequence[Iterable[int]], n_terms: int) -> Postings:
        terms: list[int] = []
        docs: list[int] = []
        for d, ts in enumerate(docs_terms):
            for t in set(ts):
                terms.append(t)
                docs.append(d)
        t_arr = np.asarray(terms, dtype=np.int64)
        d_arr = np.asarray(docs, dtype=np.int64)
        order = np.lexsort((d_arr, t_arr))
        counts = np.bincount(t_arr, minlength=n_terms) if t_arr.size else \
            np.zeros(n_terms, dtype=np.int64)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, d_arr[order].astype(np.int32))

    def contains(self, term: int, ids: np.ndarray) -> np.ndarray:
        """Whether each passage in ``ids`` holds ``term``."""
        if term < 0 or term + 1 >= self.indptr.shape[0]:
            return np.zeros(ids.shape[0], dtype=bool)
        col = self.indices[int(self.indptr[term]):int(self.indptr[term + 1])]
        if col.shape[0] == 0:
            return np.zeros(ids.shape[0], dtype=bool)
        pos = np.searchsorted(col, ids)
        pos = np.minimum(pos, col.shape[0] - 1)
        return np.asarray(col[pos] == ids)


def _standardize(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


def _logrank(x: np.ndarray, ids: np.ndarray) -> np.ndarray:
    order = np.lexsort((ids, -x))
    rank = np.empty(x.shape[0], dtype=np.float64)
    rank[order] = np.arange(x.shape[0], dtype=np.float64)
    return np.log1p(rank)


def candidate_features(
    *,
    question: str,
    ids: np.ndarray,
    dense: np.ndarray,
    bm25: np.ndarray,
    q_norm: float,
    query_terms: Sequence[int],
    term_idf: Sequence[float],
    text_postings: Postings,
    title_postings: Postings,
    passage_features: np.ndarray,
) -> np.ndarray:
    """float64 [len(ids), len(FEATURE_NAMES)] for one question's candidates.

    ``query_terms`` are the question's distinct BM25 term ids and ``term_idf`` their idf;
    ``text_postings`` cover titles and texts (what BM25 indexes), ``title_postings`` titles.
    """
    m = ids.shape[0]
    d = dense.astype(np.float64)
    b = bm25.astype(np.float64)
    pf = np.asarray(passage_features[ids], dtype=np.float64).reshape(m, len(PASSAGE_COLUMNS))
    norms = pf[:, _P["norm"]] * max(q_norm, 1e-12)
    cos = np.divide(d, norms, out=np.zeros_like(d), where=norms > 0)
    top = b.max() if m else 0.0
    bmax = b / top if top > 0 else np.zeros_like(b)

    total_idf = float(sum(term_idf))
    coverage = np.zeros(m)
    title_cov = np.zeros(m)
    title_hits = np.zeros(m)
    for t, w in zip(query_terms, term_idf, strict=True):
        coverage += w * text_postings.contains(t, ids)
        in_title = title_postings.contains(t, ids)
        title_cov += w * in_title
        title_hits += in_title
    if total_idf > 0:
        coverage /= total_idf
        title_cov /= total_idf
    title_terms = pf[:, _P["title_terms"]]
    title_in_q = ((title_terms > 0) & (title_hits >= title_terms)).astype(np.float64)

    when, how_many, who, where = (float(v) for v in question_type(question))
    caps = pf[:, _P["capitals"]]
    bio = pf[:, _P["bio"]]
    cols = [
        cos, _standardize(d), _logrank(d, ids), _standardize(b), bmax, _logrank(b, ids),
        coverage, title_cov, title_in_q, pf[:, _P["first"]], pf[:, _P["log_length"]],
        when * np.minimum(pf[:, _P["years"]], YEAR_CAP),
        when * np.minimum(pf[:, _P["months"]], MONTH_CAP),
        how_many * np.minimum(pf[:, _P["numbers"]], NUMBER_CAP),
        how_many * np.minimum(pf[:, _P["number_words"]], NUMBER_CAP),
        who * caps, where * caps, who * bio, bio,
    ]
    return np.stack(cols, axis=1) if m else np.zeros((0, len(FEATURE_NAMES)))
