"""The per-snapshot BM25 index on disk: built once, renamed into place, rebuilt when stale."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragdesk.core.errors import Cancelled
from ragdesk.core.progress import CancelToken, ProgressUpdate
from ragdesk.core.sparse import store
from ragdesk.core.sparse.bm25 import BM25Index
from ragdesk.core.sparse.store import (
    SparseIndex,
    bm25_folder,
    build_sparse,
    ensure_sparse,
    forget_loaded,
)

from .conftest import FakeSnapshot


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_built_lazily_once_then_loaded_from_disk(fake_snapshot: FakeSnapshot) -> None:
    forget_loaded()
    updates: list[ProgressUpdate] = []
    idx = ensure_sparse(fake_snapshot, progress=updates.append)
    target = bm25_folder(fake_snapshot)
    assert target == fake_snapshot.path / "bm25" and target.is_dir()
    assert _files(fake_snapshot.path) == ["bm25"]  # no staging folder left behind
    assert updates and updates[-1].done == fake_snapshot.size
    meta = json.loads((target / "meta.json").read_text())
    assert meta["num_docs"] == fake_snapshot.size
    assert meta["source"]["snapshot"] == "fake"
    stamp = (target / "meta.json").stat().st_mtime_ns

    assert ensure_sparse(fake_snapshot) is idx  # the process cache
    forget_loaded()
    again = ensure_sparse(fake_snapshot)  # from disk, not rebuilt
    assert again is not idx
    assert (target / "meta.json").stat().st_mtime_ns == stamp
    q = "apollo moon landing"
    np.testing.assert_array_equal(again.bm25.scores(q), idx.bm25.scores(q))
    reference = BM25Index.build([f"{p.title} {p.text}" for p in fake_snapshot.passages])
    np.testing.assert_allclose(again.bm25.scores(q), reference.scores(q), rtol=1e-6)
    np.testing.assert_array_equal(again.passage_features, idx.passage_features)


def test_passage_features_and_title_postings(fake_snapshot: FakeSnapshot) -> None:
    from ragdesk.core.sparse.features import PASSAGE_COLUMNS, passage_row
    from ragdesk.core.sparse.tokenize import bm25_tokens

    forget_loaded()
    idx = ensure_sparse(fake_snapshot)
    ps = fake_snapshot.passages
    norms = np.linalg.norm(fake_snapshot.embeddings(), axis=1)
    for i in (0, 1, 17, len(ps) - 1):
        row = passage_row(len(set(bm25_tokens(ps[i].title))), ps[i].text,
                          i == 0 or ps[i - 1].title != ps[i].title)
        row[PASSAGE_COLUMNS.index("norm")] = float(norms[i])
        np.testing.assert_allclose(idx.passage_features[i], row, rtol=1e-6)
    vocab = idx.bm25.vocab
    ids = np.arange(len(ps))
    for term in ("moon", "rome", "jazz", "ocean"):
        want = np.array([term in bm25_tokens(p.title) for p in ps])
        np.testing.assert_array_equal(idx.title_postings.contains(vocab[term], ids), want)
        want = np.array([term in bm25_tokens(f"{p.title} {p.text}") for p in ps])
        np.testing.assert_array_equal(idx.text_postings().contains(vocab[term], ids), want)


def test_stale_or_corrupt_index_is_rebuilt(fake_snapshot: FakeSnapshot) -> None:
    forget_loaded()
    ensure_sparse(fake_snapshot)
    target = bm25_folder(fake_snapshot)
    meta_path = target / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta["tokenizer"] = "an-older-tokenizer"
    meta_path.write_text(json.dumps(meta))
    forget_loaded()
    idx = ensure_sparse(fake_snapshot)
    assert idx.bm25.meta.tokenizer != "an-older-tokenizer"
    assert json.loads(meta_path.read_text())["tokenizer"] == idx.bm25.meta.tokenizer
    assert _files(fake_snapshot.path) == ["bm25"]

    (target / "vocab.index.json").write_text("{not json")
    forget_loaded()
    idx = ensure_sparse(fake_snapshot)
    assert idx.bm25.scores("jazz").max() > 0

    (target / "passage_features.npy").write_bytes(b"truncated")
    forget_loaded()
    idx = ensure_sparse(fake_snapshot)
    assert idx.bm25.scores("jazz").max() > 0


def test_cancelled_or_failed_build_leaves_nothing(fake_snapshot: FakeSnapshot,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    forget_loaded()
    tok = CancelToken()
    tok.cancel()
    with pytest.raises(Cancelled):
        ensure_sparse(fake_snapshot, cancel=tok)
    assert _files(fake_snapshot.path) == []

    def broken_save(self: SparseIndex, folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "half-written.npy").write_bytes(b"\0")
        raise OSError("simulated failure while writing")

    monkeypatch.setattr(SparseIndex, "save", broken_save)
    with pytest.raises(OSError, match="simulated"):
        build_sparse(fake_snapshot)
    assert _files(fake_snapshot.path) == []


def test_a_new_snapshot_size_means_a_new_index(tmp_path: Path) -> None:
    forget_loaded()
    folder = tmp_path / "snap"
    folder.mkdir()
    small = FakeSnapshot(folder, n=40)
    assert ensure_sparse(small).num_docs == 40
    bigger = FakeSnapshot(folder, n=60)  # the same folder holding other passages
    assert ensure_sparse(bigger).num_docs == 60
    assert store.bm25_folder(bigger) == folder / store.BM25_DIRNAME
