"""Sparse and hybrid retrieval on a real snapshot (imported from JSONL with the tiny
sentence-transformers encoder) agree with the same code run on its arrays held in memory."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.encoders import EncoderInfo
from ragdesk.core.retrieval.hybrid import ScoredHit, retrieve_batch
from ragdesk.core.snapshots import import_snapshot, open_snapshot
from ragdesk.core.sparse.store import bm25_folder, forget_loaded
from ragdesk.core.types import Hit, Passage

from .conftest import dense_scores


class InMemory:
    """A ``SearchableSnapshot`` over a real snapshot's passages and vectors."""

    has_dense = True
    temperature = 1.0
    query_precision = "float32"

    def __init__(self, passages: list[Passage], emb: np.ndarray, folder: Path,
                 encoder: EncoderInfo) -> None:
        self.passages, self._emb, self.folder = passages, emb, folder
        self.name, self.created = "copy", "now"
        self.encoder = encoder

    @property
    def size(self) -> int:
        return len(self.passages)

    def embeddings(self) -> np.ndarray:
        return self._emb

    def get_passages(self, ids: Sequence[int]) -> list[Passage]:
        return [self.passages[i] for i in ids]

    def check_query_encoder(self, info: EncoderInfo) -> None:
        pass

    def search_ids(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        hits = self.search(q, k)
        return (np.asarray([[h.score for h in row] for row in hits], dtype=np.float32),
                np.asarray([[h.id for h in row] for row in hits], dtype=np.int64))

    def search(self, q: np.ndarray, k: int) -> list[list[Hit]]:
        out = []
        for row in q:
            ip = self._emb @ row
            order = np.lexsort((np.arange(len(ip)), -ip))[:k]
            out.append([Hit(int(i), self.passages[i].title, self.passages[i].text,
                            float(ip[i])) for i in order])
        return out


@pytest.fixture(scope="module")
def real_snapshot(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from ragdesk.core.app import AppContext

    root = tmp_path_factory.mktemp("sparse-real")
    src = root / "a.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": x}) + "\n"
                           for t, x in tiny_models.corpus[:40]), encoding="utf-8")
    ctx = AppContext(root / "data")
    import_snapshot(ctx.data, ctx.catalog, src, name="t", encoder=tiny_models.st_encoder,
                    fmt="jsonl")
    return open_snapshot(ctx.data, ctx.catalog, "t")


def test_sparse_and_hybrid_on_a_real_snapshot(real_snapshot: Any, tmp_path: Path) -> None:
    forget_loaded()
    snap = real_snapshot
    passages = snap.get_passages(list(range(snap.size)))
    copy = InMemory(passages, np.asarray(snap.embeddings(), dtype=np.float32), tmp_path,
                    snap.encoder)
    words = [p.title.split()[0] for p in passages[:6]]
    questions = [f"who was {w}?" for w in words] + ["when did it happen in the year"]
    rng = np.random.default_rng(0)
    qv = rng.standard_normal((len(questions), snap.manifest.dim)).astype(np.float32)
    for mode in ("sparse", "hybrid"):
        got = retrieve_batch(snap, questions, qv, 10, mode)
        want = retrieve_batch(copy, questions, qv, 10, mode)
        for g, w in zip(got, want, strict=True):
            assert [h.id for h in g] == [h.id for h in w]
            assert all(isinstance(h, ScoredHit) for h in g)
            np.testing.assert_allclose([h.score for h in g], [h.score for h in w], rtol=1e-5,
                                       atol=1e-6)
            np.testing.assert_allclose(dense_scores(g), dense_scores(w), rtol=1e-5, atol=1e-6)
    # the snapshot's own index lives inside its folder, the copy's in tmp_path
    assert bm25_folder(snap) == snap.folder / "bm25" and bm25_folder(snap).is_dir()
    assert not list(snap.folder.glob(".bm25-*"))
