"""A BM25 index over a list of passages, built and scored with the ``bm25s`` library.

Scores follow bm25s's "lucene" variant, i.e. for a query Q and passage d:
``sum_{t in Q} idf(t) * tf(t,d) / (tf(t,d) + k1 * (1 - b + b * |d| / avgdl))`` with
``idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))``; a term repeated in the query counts
once per occurrence. Tokens come from :func:`ragdesk.core.sparse.tokenize.bm25_tokens`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragdesk.core.errors import CorruptSnapshotError
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_json import as_float, as_int, as_object
from ragdesk.core.sparse.tokenize import TOKENIZER_VERSION, bm25_tokens

if TYPE_CHECKING:
    import bm25s

log = logging.getLogger(__name__)

META_NAME = "meta.json"
DEFAULT_K1 = 0.9  # Anserini's defaults, tuned for MS MARCO/NQ passages
DEFAULT_B = 0.4


@dataclass(frozen=True)
class BM25Meta:
    tokenizer: str
    k1: float
    b: float
    num_docs: int
    vocab_size: int
    source: dict[str, object]  # what the index was built from (e.g. snapshot name, created)

    def to_json(self) -> dict[str, object]:
        return {"tokenizer": self.tokenizer, "k1": self.k1, "b": self.b,
                "num_docs": self.num_docs, "vocab_size": self.vocab_size, "source": self.source}

    @classmethod
    def from_json(cls, d: dict[str, object]) -> BM25Meta:
        return cls(tokenizer=str(d["tokenizer"]), k1=as_float(d["k1"]), b=as_float(d["b"]),
                   num_docs=as_int(d["num_docs"]), vocab_size=as_int(d["vocab_size"]),
                   source=dict(as_object(d.get("source") or {})))


class BM25Index:
    """Passages are numbered 0..num_docs-1 in the order they were given to :meth:`build`."""

    def __init__(self, model: bm25s.BM25, meta: BM25Meta) -> None:
        self._model = model
        self.meta = meta
        self._vocab: dict[str, int] = model.vocab_dict

    @property
    def num_docs(self) -> int:
        return self.meta.num_docs

    @classmethod
    def build(
        cls,
        texts: Iterable[str],
        *,
        total: int | None = None,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
        source: dict[str, object] | None = None,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> BM25Index:
        import bm25s

        vocab: dict[str, int] = {}
        doc_ids: list[list[int]] = []
        prog = Progress(total, "BM25: tokenizing passages", progress)
        for i, text in enumerate(texts):
            if cancel is not None and i % 1000 == 0:
                cancel.raise_if_cancelled()
            doc_ids.append([vocab.setdefault(t, len(vocab)) for t in bm25_tokens(text)])
            if i % 1000 == 999:
                prog.update(1000)
        prog.set(len(doc_ids), "BM25: building the score matrix")
        if not vocab:
            # bm25s cannot index an empty vocabulary; one unused token keeps the shapes valid.
            vocab[""] = 0
        model = bm25s.BM25(k1=k1, b=b, method="lucene")
        with np.errstate(invalid="ignore", divide="ignore"):  # all-empty corpus: avgdl 0
            model.index((doc_ids, vocab), create_empty_token=False, show_progress=False)
        meta = BM25Meta(tokenizer=TOKENIZER_VERSION, k1=k1, b=b, num_docs=len(doc_ids),
                        vocab_size=len(vocab), source=dict(source or {}))
        return cls(model, meta)

    def save(self, folder: Path) -> None:
        """Write into ``folder`` (the caller makes the folder appear atomically)."""
        folder.mkdir(parents=True, exist_ok=True)
        self._model.save(str(folder), show_progress=False)
        (folder / META_NAME).write_text(json.dumps(self.meta.to_json(), indent=2) + "\n",
                                        encoding="utf-8")

    @classmethod
    def load(cls, folder: Path, mmap: bool = True) -> BM25Index:
        import bm25s

        try:
            meta = BM25Meta.from_json(json.loads((folder / META_NAME).read_text("utf-8")))
            model = bm25s.BM25.load(str(folder), mmap=mmap, show_progress=False)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CorruptSnapshotError(f"The BM25 index in {folder} cannot be read: {exc}",
                                       hint="Delete that folder; ragdesk rebuilds it on next "
                                            "use.") from exc
        model.scores["num_docs"] = meta.num_docs
        return cls(model, meta)

    @property
    def vocab(self) -> dict[str, int]:
        return self._vocab

    def postings(self) -> tuple[np.ndarray, np.ndarray]:
        """(indptr over term ids, sorted passage ids): which passages hold each term."""
        sc = self._model.scores
        return np.asarray(sc["indptr"]), np.asarray(sc["indices"])

    def idf(self, term_ids: Sequence[int]) -> np.ndarray:
        """The BM25 idf of terms: ln(1 + (N - df + 0.5) / (df + 0.5))."""
        indptr = self._model.scores["indptr"]
        ids = np.asarray(term_ids, dtype=np.int64)
        df = (np.asarray(indptr[ids + 1]) - np.asarray(indptr[ids])).astype(np.float64)
        n = float(self.num_docs)
        out: np.ndarray = np.log1p((n - df + 0.5) / (df + 0.5))
        return out

    def query_ids(self, question: str) -> list[int]:
        return [self._vocab[t] for t in bm25_tokens(question) if t in self._vocab]

    def scores(self, question: str) -> np.ndarray:
        """BM25 score of every passage for ``question``: float32 [num_docs]."""
        ids = self.query_ids(question)
        if not ids:
            return np.zeros(self.num_docs, dtype=np.float32)
        out = self._model.get_scores_from_ids(ids)
        return np.asarray(out, dtype=np.float32)

    def search(self, questions: Sequence[str], k: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Top-``k`` (ids int64, scores float32) per question, best first; ties by lower id.

        Passages scoring 0 (no query term) are never returned, so a list may be short.
        """
        out = []
        for q in questions:
            s = self.scores(q)
            out.append(top_k(s, k))
        return out


def top_k(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices and values of the ``k`` largest positive scores, best first, ties by index."""
    n = scores.shape[0]
    k = min(k, n)
    if k <= 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if k < n:
        cand = np.argpartition(-scores, k - 1)[:k]
        # Include every passage tied with the k-th score so the tie-break is by id.
        kth = scores[cand].min()
        cand = np.flatnonzero(scores >= kth) if kth > 0 else np.flatnonzero(scores > 0)
    else:
        cand = np.flatnonzero(scores > 0)
    order = np.lexsort((cand, -scores[cand]))[:k]
    ids = cand[order].astype(np.int64)
    return ids, scores[ids].astype(np.float32)
