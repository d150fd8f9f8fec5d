"""A small in-memory stand-in for a SnapshotIndex (exact numpy search), for the pure hybrid
logic; tests against real snapshots use ``import_snapshot``."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from ragdesk.core.encoders import EncoderInfo
from ragdesk.core.retrieval.hybrid import ScoredHit
from ragdesk.core.types import Hit, Passage

TOPICS = {
    "moon": "apollo moon landing armstrong rocket nasa crater lunar",
    "rome": "rome empire caesar augustus senate legion byzantine",
    "jazz": "jazz music saxophone improvisation swing bebop orleans",
    "ocean": "ocean pacific atlantic island reef tide whale",
}


class FakeSnapshot:
    """A ``SearchableSnapshot`` (ragdesk.core.retrieval.protocol) with every vector ready."""

    has_dense = True
    temperature = 1.0
    # what its random vectors would have come from; any question encoder is accepted
    encoder = EncoderInfo(id="fake-random-vectors", revision=None,
                          family="sentence-transformers", pooling="mean", normalize=True, dim=16)
    query_precision = "float32"

    def __init__(self, folder: Path, n: int = 120, dim: int = 16, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.path = self.folder = folder
        self.name = "fake"
        self.created = "2024-01-01T00:00:00"
        names = list(TOPICS)
        self.passages: list[Passage] = []
        for i in range(n):
            topic = names[i % len(names)]
            words = TOPICS[topic].split()
            fillers = ["the", "of", "and", "year", "city", "1969", "July", "three", "42",
                       "(born", "Armstrong", "Rome"]
            text = " ".join(rng.choice([*words, *fillers])
                            for _ in range(rng.randint(5, 25)))
            self.passages.append(Passage(id=i, title=f"{topic.title()} {i}", text=text))
        g = np.random.default_rng(seed)
        e = g.standard_normal((n, dim)).astype(np.float32)
        self._emb: np.ndarray = e / np.linalg.norm(e, axis=1, keepdims=True)

    @property
    def size(self) -> int:
        return len(self.passages)

    def embeddings(self) -> np.ndarray:
        return self._emb

    def get_passages(self, ids: Sequence[int]) -> list[Passage]:
        return [self.passages[int(i)] for i in ids]

    def check_query_encoder(self, info: object) -> None:
        pass

    def search_ids(self, q: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        hits = self.search(q, k)
        return (np.asarray([[h.score for h in row] for row in hits], dtype=np.float32),
                np.asarray([[h.id for h in row] for row in hits], dtype=np.int64))

    def search(self, q: np.ndarray, k: int) -> list[list[Hit]]:
        out = []
        for row in np.atleast_2d(q):
            ip = self._emb @ row
            order = np.lexsort((np.arange(len(ip)), -ip))[:k]
            out.append([Hit(int(i), self.passages[i].title, self.passages[i].text,
                            float(ip[i])) for i in order])
        return out


@pytest.fixture()
def fake_snapshot(tmp_path: Path) -> FakeSnapshot:
    folder = tmp_path / "snap"
    folder.mkdir()
    return FakeSnapshot(folder)


def dense_scores(hits: list[Hit]) -> list[float]:
    """The exact inner products that sparse and hybrid retrieval give their ScoredHits."""
    out: list[float] = []
    for h in hits:
        assert isinstance(h, ScoredHit) and h.dense_score is not None
        out.append(h.dense_score)
    return out
