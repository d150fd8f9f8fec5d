"""verify: one flipped byte anywhere, a missing file or a broken manifest is reported."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import CorruptSnapshotError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import import_snapshot, quantize_snapshot, verify_snapshot
from tests.core.snapshots.util import flip_byte, open_data, synthetic_snapshot_files


@pytest.fixture()
def snap(tmp_path: Path, dpr_ctx: Any) -> tuple[DataDir, Catalog, Path]:
    data, catalog = open_data(tmp_path / "data")
    src, npy, _ = synthetic_snapshot_files(tmp_path / "src", 2000, 32, clusters=20)
    import_snapshot(data, catalog, src, name="v", encoder=dpr_ctx, embeddings=npy)
    quantize_snapshot(data, catalog, "v", "ivf-pq", params={"nprobe": 4, "rerank": 50},
                      queries=100)
    return data, catalog, data.snapshot_dir("v")


def test_a_fresh_snapshot_verifies(snap: tuple[DataDir, Catalog, Path]) -> None:
    data, catalog, _ = snap
    report = verify_snapshot(data, catalog, "v")
    assert report.ok
    for f in ("passages.sqlite", "embeddings.npy", "index.ivf-pq.faiss"):
        assert f"{f} checksum" in report.checked
    assert {"index flat answers", "index ivf-pq answers"} <= set(report.checked)


@pytest.mark.parametrize("fname", ["passages.sqlite", "embeddings.npy", "index.ivf-pq.faiss"])
def test_flipped_byte_is_caught(snap: tuple[DataDir, Catalog, Path], fname: str) -> None:
    data, catalog, folder = snap
    flip_byte(folder / fname)
    with pytest.raises(CorruptSnapshotError) as ei:
        verify_snapshot(data, catalog, "v")
    assert f"{fname}: checksum mismatch" in ei.value.message
    assert "remove" in ei.value.hint
    report = verify_snapshot(data, catalog, "v", raise_on_error=False)
    assert not report.ok and len(report.problems) == 1


def test_missing_and_truncated_files(snap: tuple[DataDir, Catalog, Path]) -> None:
    data, catalog, folder = snap
    (folder / "index.ivf-pq.faiss").unlink()
    raw = (folder / "passages.sqlite").read_bytes()
    (folder / "passages.sqlite").write_bytes(raw[:-100])
    report = verify_snapshot(data, catalog, "v", raise_on_error=False)
    assert "index.ivf-pq.faiss: missing." in report.problems
    assert any(p.startswith("passages.sqlite:") and "bytes" in p for p in report.problems)


def test_broken_manifest_and_missing_folder(snap: tuple[DataDir, Catalog, Path]) -> None:
    data, catalog, folder = snap
    (folder / "manifest.json").write_text("{ not json")
    with pytest.raises(CorruptSnapshotError, match="manifest"):
        verify_snapshot(data, catalog, "v")
    folder.rename(folder.with_name("elsewhere"))
    with pytest.raises(CorruptSnapshotError, match=r"folder .* is missing"):
        verify_snapshot(data, catalog, "v")


def test_wrong_vectors_with_right_checksums_are_caught(snap: tuple[DataDir, Catalog, Path]
                                                       ) -> None:
    """A consistent manifest over data that does not answer (e.g. an index built from other
    vectors) fails the functional check."""
    import hashlib

    data, catalog, folder = snap
    emb = np.load(folder / "embeddings.npy")
    np.save(folder / "embeddings.npy", -emb)  # every passage now far from its own vector
    manifest = json.loads((folder / "manifest.json").read_text())
    raw = (folder / "embeddings.npy").read_bytes()
    manifest["files"]["embeddings.npy"] = {"size": len(raw),
                                           "sha256": hashlib.sha256(raw).hexdigest()}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    report = verify_snapshot(data, catalog, "v", raise_on_error=False)
    assert report.problems and all("ivf-pq" in p for p in report.problems)
