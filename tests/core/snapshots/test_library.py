"""Switching snapshots under readers, encoder checks, and opening what is not there."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.encoders import EncoderInfo, load_encoder
from ragdesk.core.errors import CorruptSnapshotError, EncoderMismatchError, NotFoundError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import (
    SnapshotLibrary,
    import_snapshot,
    open_snapshot,
    remove_snapshot,
)
from tests.core.snapshots.util import exact_top_k, open_data, write_jsonl


@pytest.fixture()
def two(tmp_path: Path, dpr_ctx: Any) -> tuple[DataDir, Catalog, dict[str, np.ndarray]]:
    """Two snapshots with different passages and precomputed vectors; "a" is active."""
    data, catalog = open_data(tmp_path / "data")
    vecs = {}
    for name, seed in (("a", 1), ("b", 2)):
        v = np.random.default_rng(seed).standard_normal((300, 32)).astype(np.float32)
        np.save(tmp_path / f"{name}.npy", v)
        src = write_jsonl(tmp_path / f"{name}.jsonl",
                          [(f"{name}-{i}", f"passage {i} of {name}") for i in range(300)])
        import_snapshot(data, catalog, src, name=name, encoder=dpr_ctx,
                        embeddings=tmp_path / f"{name}.npy")
        vecs[name] = v
    assert catalog.active_snapshot() == "a"  # the first import became active; "b" did not
    return data, catalog, vecs


def test_switch_is_atomic_for_readers(two: tuple[DataDir, Catalog, dict[str, np.ndarray]]
                                      ) -> None:
    data, catalog, vecs = two
    lib = SnapshotLibrary(data, catalog)
    held = lib.current()
    assert held.name == "a"
    q = np.random.default_rng(5).standard_normal((4, 32)).astype(np.float32)

    errors: list[BaseException] = []
    seen: set[str] = set()
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                index = lib.current()  # what a new question would pick up
                hits = index.search(q, 5)
                prefix = {h.title.split("-")[0] for row in hits for h in row}
                assert prefix == {index.name}, (prefix, index.name)  # never a mixture
                _, ref = exact_top_k(vecs[index.name], q, 5)
                assert [[h.id for h in row] for row in hits] == ref.tolist()
                seen.add(index.name)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(20):
            lib.switch("b" if i % 2 == 0 else "a")
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    lib.switch("b")
    assert catalog.active_snapshot() == "b" and lib.current().name == "b"
    # The index held from before the switches still answers from "a" ...
    assert {h.title.split("-")[0] for h in held.search(q, 3)[0]} == {"a"}
    # ... even after "a" is removed from disk.
    remove_snapshot(data, catalog, "a")
    assert not data.snapshot_dir("a").exists()
    hits = held.search(q, 3)
    _, ref = exact_top_k(vecs["a"], q, 3)
    assert [[h.id for h in row] for row in hits] == ref.tolist()
    with pytest.raises(NotFoundError):
        lib.get("a")
    lib.close()


def test_a_broken_snapshot_never_becomes_active(
        two: tuple[DataDir, Catalog, dict[str, np.ndarray]]) -> None:
    data, catalog, _ = two
    (data.snapshot_dir("b") / "embeddings.npy").unlink()
    lib = SnapshotLibrary(data, catalog)
    with pytest.raises(CorruptSnapshotError, match=r"embeddings\.npy: missing"):
        lib.switch("b")
    assert catalog.active_snapshot() == "a"
    lib.close()


def test_query_encoder_must_match(two: tuple[DataDir, Catalog, dict[str, np.ndarray]],
                                  tiny_models: Any) -> None:
    data, catalog, _ = two
    index = open_snapshot(data, catalog, "a")
    question = load_encoder(tiny_models.question_encoder, role="question")
    index.check_query_encoder(question.info)  # DPR question encoder, 32-d: fine
    st = load_encoder(tiny_models.st_encoder, role="question")
    with pytest.raises(EncoderMismatchError) as ei:
        index.check_query_encoder(st.info)
    msg = ei.value.message
    assert str(tiny_models.ctx_encoder) in msg and str(tiny_models.st_encoder) in msg
    assert "24-d" in msg and "32-d" in msg
    other_dim = EncoderInfo("x/dpr-768", None, "dpr", "cls-pooler", False, 768)
    with pytest.raises(EncoderMismatchError, match="x/dpr-768"):
        index.check_query_encoder(other_dim)
    with pytest.raises(EncoderMismatchError, match="32-d"):
        index.search(np.zeros((1, 24), np.float32), 3)
    index.close()


def test_open_without_an_active_snapshot(tmp_path: Path) -> None:
    data, catalog = open_data(tmp_path / "d")
    with pytest.raises(NotFoundError, match="No snapshot is active") as ei:
        open_snapshot(data, catalog)
    # Each front end is told its own way: a command for the CLI, where to click for the GUI.
    assert "ragdesk models setup-starter" in ei.value.hint
    assert "`" not in ei.value.gui_hint and "ragdesk " not in ei.value.gui_hint
    assert "Get started" in ei.value.gui_hint and ei.value.action == "first-run"
    with pytest.raises(NotFoundError):
        SnapshotLibrary(data, catalog).current()
    with pytest.raises(NotFoundError):
        open_snapshot(data, catalog, "nope")


def test_search_edge_cases(two: tuple[DataDir, Catalog, dict[str, np.ndarray]]) -> None:
    data, catalog, vecs = two
    index = open_snapshot(data, catalog, "a")
    hits = index.search(vecs["a"][7], 1000)  # one query as a 1-d vector, k beyond the size
    assert len(hits) == 1 and len(hits[0]) == 300 and hits[0][0].id == 7
    with pytest.raises(KeyError):
        index.get_passages([300])
    index.close()
    with pytest.raises(RuntimeError, match="closed"):
        index.search(vecs["a"][:1], 1)
