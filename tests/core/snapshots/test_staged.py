"""Staged imports: BM25 answers before the dense vectors exist, and nothing half-built looks
complete — not while encoding, not after an interruption, not after the resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.catalog import STAGE_SPARSE, Catalog
from ragdesk.core.encoders import load_encoder
from ragdesk.core.errors import Cancelled, DensePendingError, NotFoundError, SnapshotBusyError
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken, ProgressUpdate
from ragdesk.core.retrieval import retrieve
from ragdesk.core.snapshots import (
    SnapshotLibrary,
    import_snapshot,
    open_searchable,
    open_snapshot,
    recover,
)
from ragdesk.core.snapshots.index import SnapshotIndex
from ragdesk.core.snapshots.staged import StagedSnapshot
from ragdesk.core.sparse.store import bm25_folder, ensure_sparse, forget_loaded
from tests.core.snapshots.util import naive_passages, open_data, write_jsonl


@pytest.fixture()
def env(tmp_path: Path) -> Any:
    forget_loaded()
    data, catalog = open_data(tmp_path / "data")
    yield data, catalog
    catalog.close()
    forget_loaded()


def _engine_sparse(snapshot: Any, question: str, encoder: Any, k: int) -> list[Any]:
    """What Engine.answer(retriever="sparse") retrieves."""
    from ragdesk.core.retrieval import RetrievalRequest, get_retriever

    return get_retriever("sparse")(RetrievalRequest(question=question, n_docs=k,
                                                    snapshot=snapshot, question_encoder=encoder))


def test_staged_import_answers_with_bm25_before_any_vector(
        env: tuple[DataDir, Catalog], tiny_models: Any, small_corpus: list[tuple[str, str]],
        tmp_path: Path) -> None:
    data, catalog = env
    src = write_jsonl(tmp_path / "c.jsonl", small_corpus)
    expected = naive_passages(small_corpus)
    enc = load_encoder(tiny_models.st_encoder)
    question = f"{expected[3][0]} {' '.join(expected[3][1].split()[:6])}"
    seen: dict[str, Any] = {}
    updates: list[ProgressUpdate] = []

    def at_stage(name: str) -> None:
        rec = catalog.get_snapshot(name)
        seen["state"], seen["stage"], seen["passages"] = rec.state, rec.stage, rec.passages
        seen["encoded_before"] = [u.done for u in updates if u.message.startswith("encoding")]
        assert not data.snapshot_dir(rec.slug).exists()  # nothing in snapshots/ yet
        catalog.set_active(name)  # a staged snapshot may be the active one
        library = SnapshotLibrary(data, catalog)
        snap = library.current()
        assert isinstance(snap, StagedSnapshot) and snap.size == len(expected)
        with pytest.raises(DensePendingError, match="dense vectors"):
            snap.search(np.zeros((1, enc.dim), np.float32), 3)
        with pytest.raises(DensePendingError):
            retrieve(snap, question, enc.encode([question])[0], 3, "hybrid")
        # The engine's BM25 retriever works, and p(z|x) gets exact inner products.
        hits = _engine_sparse(snap, question, enc, 3)
        assert hits and hits[0].id == 3
        seen["hits"] = [(h.id, h.score) for h in hits]
        # open_snapshot stays strict (it is not ready) and says what to do meanwhile;
        # open_searchable opens the BM25 stage.
        with pytest.raises(DensePendingError, match="dense vectors") as ei:
            open_snapshot(data, catalog, name)
        assert "--retriever sparse" in ei.value.hint and "`" not in ei.value.gui_hint
        staged = open_searchable(data, catalog, name)
        assert isinstance(staged, StagedSnapshot) and staged.size == len(expected)
        staged.close()
        library.close()

    rec = import_snapshot(data, catalog, src, name="staged", encoder=enc, staged=True,
                          on_stage=at_stage, progress=updates.append, batch_size=4)
    assert seen["state"] == "importing" and seen["stage"] == STAGE_SPARSE
    assert seen["passages"] == len(expected) and seen["encoded_before"] == []
    assert rec.state == "ready" and rec.stage is None

    library = SnapshotLibrary(data, catalog)
    index = library.get("staged")
    assert isinstance(index, SnapshotIndex)
    emb = np.asarray(index.embeddings())
    q = enc.encode([question])[0]
    # The scores the staged answer used are the inner products of the finished snapshot.
    for pid, score in seen["hits"]:
        assert score == pytest.approx(float(emb[pid] @ q), abs=1e-4)
    # The BM25 index built in staging moved with the folder and now knows the norms.
    sparse = ensure_sparse(index)
    assert bm25_folder(index).parent == data.snapshot_dir(rec.slug)
    assert sparse.bm25.meta.source["norms"] is True
    assert sparse.bm25.meta.source["created"] is None  # the staged build, not a rebuild
    from ragdesk.core.sparse.features import PASSAGE_COLUMNS

    np.testing.assert_allclose(sparse.passage_features[:, PASSAGE_COLUMNS.index("norm")],
                               np.linalg.norm(emb, axis=1), rtol=1e-5)
    assert retrieve(index, question, q, 3, "hybrid")
    library.close()


def test_interrupted_staged_import_keeps_answering_and_resumes(
        env: tuple[DataDir, Catalog], tiny_models: Any, small_corpus: list[tuple[str, str]],
        tmp_path: Path) -> None:
    data, catalog = env
    src = write_jsonl(tmp_path / "c.jsonl", small_corpus)
    expected = naive_passages(small_corpus)
    enc = load_encoder(tiny_models.st_encoder)
    cancel = CancelToken()

    def stop_after_first_batch(u: ProgressUpdate) -> None:
        if u.message.startswith("encoding") and u.done > 0:
            cancel.cancel()

    with pytest.raises(Cancelled):
        import_snapshot(data, catalog, src, name="s", encoder=enc, staged=True, batch_size=4,
                        progress=stop_after_first_batch, cancel=cancel)
    recover(data, catalog)
    rec = catalog.get_snapshot("s")
    # Interrupted: not ready, never in snapshots/, but its finished BM25 stage still answers.
    assert rec.state == "failed" and rec.stage == STAGE_SPARSE and not rec.active
    assert not data.snapshot_dir(rec.slug).exists()
    library = SnapshotLibrary(data, catalog)
    snap = library.get("s")
    assert isinstance(snap, StagedSnapshot)
    done, total = snap.dense_progress()
    assert 0 < done < total == len(expected)
    assert _engine_sparse(snap, expected[0][0], enc, 2)
    library.close()

    updates: list[ProgressUpdate] = []
    rec = import_snapshot(data, catalog, src, name="s", encoder=enc, staged=True, batch_size=4,
                          progress=updates.append)
    assert rec.state == "ready" and rec.stage is None
    assert not any(u.message.startswith("reading") for u in updates)  # resumed, not redone
    index = open_snapshot(data, catalog, "s")
    emb = np.asarray(index.embeddings())
    index.close()
    texts = [f"{t}. {x}" for t, x in expected]
    np.testing.assert_allclose(emb, enc.encode(texts), atol=1e-5)


def test_a_failed_staged_import_leaves_nothing_to_answer_from(
        env: tuple[DataDir, Catalog], tiny_models: Any, small_corpus: list[tuple[str, str]],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragdesk.core.encoders import TextEncoder

    data, catalog = env
    src = write_jsonl(tmp_path / "c.jsonl", small_corpus)
    enc = load_encoder(tiny_models.st_encoder)

    def broken(self: TextEncoder, rows: Any) -> Any:
        raise ValueError("boom")

    monkeypatch.setattr(TextEncoder, "encode_tokenized", broken)
    with pytest.raises(ValueError):
        import_snapshot(data, catalog, src, name="x", encoder=enc, staged=True)
    rec = catalog.get_snapshot("x")
    # Not resumable (a bug, not an interruption): the staging folder is gone, and so is the
    # stage that pointed at it.
    assert rec.state == "failed" and rec.stage is None and not rec.searchable
    assert not (data.staging_dir / rec.slug).exists()
    with pytest.raises(NotFoundError):
        SnapshotLibrary(data, catalog).get("x")


_STAGED_IMPORT = """
import sys
from pathlib import Path
from ragdesk.core.catalog import Catalog
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import import_snapshot
data = DataDir(Path(sys.argv[1])).ensure()
catalog = Catalog(data.catalog_path)
import_snapshot(data, catalog, sys.argv[2], name="big", encoder=sys.argv[3], staged=True,
                batch_size=2)
"""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_sigkill_after_the_bm25_stage_then_resume(tmp_path: Path, tiny_models: Any) -> None:
    """A real process killed while encoding: nothing looks complete, BM25 still answers from
    what the killed run finished, and running the import again completes it."""
    articles = list(tiny_models.corpus[:300])
    expected = naive_passages(articles)
    src = write_jsonl(tmp_path / "corpus.jsonl", articles)
    root = tmp_path / "data"
    state_file = root / "staging" / "big" / "build.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STAGED_IMPORT, str(root), str(src), str(tiny_models.st_encoder)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail("the import ended before it could be killed: "
                            + proc.stderr.read().decode()[-2000:])  # type: ignore[union-attr]
            try:
                committed = int(json.loads(state_file.read_text()).get("encoded", 0))
            except (OSError, ValueError):
                committed = 0
            if committed >= 20:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the import did not commit any batch in time")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    forget_loaded()
    data, catalog = open_data(root)
    try:
        rec = catalog.get_snapshot("big")
        assert rec.state == "importing" and rec.stage == STAGE_SPARSE  # as the kill left it
        assert not data.snapshot_dir(rec.slug).exists()
        with pytest.raises(DensePendingError):
            open_snapshot(data, catalog, "big")
        library = SnapshotLibrary(data, catalog)  # recovers: the dead import is interrupted
        rec = catalog.get_snapshot("big")
        assert rec.state == "failed" and rec.stage == STAGE_SPARSE
        snap = library.get("big")
        assert isinstance(snap, StagedSnapshot)
        enc = load_encoder(tiny_models.st_encoder)
        title = expected[7][0]
        assert any(h.title == title for h in _engine_sparse(snap, title, enc, 5))
        library.close()

        rec = import_snapshot(data, catalog, src, name="big", encoder=enc, staged=True,
                              batch_size=2)
        assert rec.state == "ready" and rec.stage is None and rec.passages == len(expected)
        index = open_snapshot(data, catalog, "big")
        emb = np.asarray(index.embeddings())
        index.close()
        np.testing.assert_allclose(emb, enc.encode([f"{t}. {x}" for t, x in expected]),
                                   atol=1e-5)
    finally:
        catalog.close()


def test_a_refused_rename_keeps_the_finished_work(
        env: tuple[DataDir, Catalog], tiny_models: Any, small_corpus: list[tuple[str, str]],
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows will not rename a folder with open files (a staged snapshot answering)."""
    data, catalog = env
    src = write_jsonl(tmp_path / "c.jsonl", small_corpus[:4])
    enc = load_encoder(tiny_models.st_encoder)
    real_rename = os.rename

    def refuse(a: Any, b: Any) -> None:
        raise PermissionError(13, "The process cannot access the file")

    monkeypatch.setattr("ragdesk.core.snapshots.builder.os.rename", refuse)
    with pytest.raises(SnapshotBusyError):
        import_snapshot(data, catalog, src, name="w", encoder=enc, staged=True)
    rec = catalog.get_snapshot("w")
    assert rec.state == "failed" and rec.stage == STAGE_SPARSE  # still answers with BM25
    assert (data.staging_dir / rec.slug / "manifest.json").exists()
    monkeypatch.setattr("ragdesk.core.snapshots.builder.os.rename", real_rename)

    def no_encoding(*a: Any, **k: Any) -> None:
        raise AssertionError("encoded again")

    monkeypatch.setattr(type(enc), "encode_tokenized", no_encoding)
    rec = import_snapshot(data, catalog, src, name="w", encoder=enc, staged=True)
    assert rec.state == "ready" and data.snapshot_dir(rec.slug).is_dir()
