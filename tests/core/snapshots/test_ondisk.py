"""ivf-pq with on-disk inverted lists: the same answers as in memory, from a folder that was
renamed after the build, recorded, verified and removed with its variant."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.snapshots import faiss_variants as fv
from ragdesk.core.snapshots import (
    import_snapshot,
    open_snapshot,
    quantize_snapshot,
    read_manifest,
    remove_variant,
    verify_snapshot,
)
from tests.core.snapshots.util import clustered_vectors, open_data, synthetic_snapshot_files

PARAMS = {"nlist": 64, "m": 8, "nbits": 8}


def queries(vecs: np.ndarray, n: int = 40) -> np.ndarray:
    rng = np.random.default_rng(3)
    q = vecs[rng.choice(len(vecs), n, replace=False)] + 0.2 * rng.standard_normal(
        (n, vecs.shape[1])).astype(np.float32) / np.sqrt(vecs.shape[1])
    vec: np.ndarray = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    return vec


def test_on_disk_lists_answer_as_in_memory_after_a_rename(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(fv, "ONDISK_BLOCK", 3000)  # four blocks merged
    vecs = clustered_vectors(10_000, 32, 40)
    in_memory = fv.build_index("ivf-pq", PARAMS, vecs)
    staging = tmp_path / "staging"
    staging.mkdir()
    built = fv.build_index("ivf-pq", PARAMS, vecs, ondisk=staging / "lists.ivfdata")
    assert fv.ondisk_file(built) == staging / "lists.ivfdata"
    assert fv.ondisk_file(in_memory) is None
    fv.write_index(built, staging / "index.faiss")
    del built
    # The lists are not in the index file, and the index still finds them once moved.
    assert (staging / "index.faiss").stat().st_size < (staging / "lists.ivfdata").stat().st_size
    os.rename(staging, tmp_path / "snapshot")
    opened = fv.read_index(tmp_path / "snapshot" / "index.faiss", ondisk=True)
    assert fv.ondisk_file(opened) == tmp_path / "snapshot" / "lists.ivfdata"
    q = queries(vecs)
    for index in (in_memory, opened):
        fv.set_search_params(index, "ivf-pq", {"nprobe": 8})
    d_mem, i_mem = in_memory.search(q, 20)
    d_disk, i_disk = opened.search(q, 20)
    np.testing.assert_array_equal(i_disk, i_mem)
    np.testing.assert_array_equal(d_disk, d_mem)
    assert capfd.readouterr().out == ""  # FAISS's printf()s about the lists are silenced


def test_quantize_on_disk(tmp_path: Path, dpr_ctx: Any,
                          capfd: pytest.CaptureFixture[str]) -> None:
    src, npy, vecs = synthetic_snapshot_files(tmp_path / "src", 5000, 32, clusters=40)
    data, catalog = open_data(tmp_path / "data")
    import_snapshot(data, catalog, src, name="s", encoder=dpr_ctx, embeddings=npy)
    capfd.readouterr()
    search = {"nprobe": 8, "rerank": 50}
    res = quantize_snapshot(data, catalog, "s", "ivf-pq", params={**PARAMS, **search,
                                                                    "ondisk": 1}, queries=200)
    folder = data.snapshot_dir("s")
    manifest = read_manifest(folder)
    lists = fv.lists_files("ivf-pq", manifest.files)
    assert len(lists) == 1 and (folder / lists[0]).is_file()
    assert res.params["ondisk"] == 1
    assert res.bytes == sum((folder / f).stat().st_size for f in (res.file, lists[0]))
    assert verify_snapshot(data, catalog, "s").ok
    q = queries(vecs)

    # The whole data folder moved (a snapshot renamed from staging is the same case).
    data.root.rename(tmp_path / "moved")
    data, catalog = open_data(tmp_path / "moved")
    index = open_snapshot(data, catalog, "s", "ivf-pq")
    on_disk = index.search_ids(q, 20)
    index.close()
    assert capfd.readouterr().out == ""

    # What an on-disk build killed mid-way leaves goes with the next quantize's temporaries.
    killed = [data.snapshot_dir("s") / f".index.ivf-pq.faiss.ivfdata{part}.tmp-999999"
              for part in ("", ".block-0")]
    for f in killed:
        f.write_bytes(b"x")
    # The same build in memory gives the same answers, and replaces the lists file.
    quantize_snapshot(data, catalog, "s", "ivf-pq", params={**PARAMS, **search}, queries=200)
    assert not fv.lists_files("ivf-pq", os.listdir(data.snapshot_dir("s")))
    assert not any(f.exists() for f in killed)
    index = open_snapshot(data, catalog, "s", "ivf-pq")
    in_memory = index.search_ids(q, 20)
    index.close()
    np.testing.assert_array_equal(on_disk[1], in_memory[1])
    np.testing.assert_allclose(on_disk[0], in_memory[0], rtol=1e-6)

    quantize_snapshot(data, catalog, "s", "ivf-pq", params={**PARAMS, **search, "ondisk": 1},
                      queries=200)
    remove_variant(data, catalog, "s", "ivf-pq")
    left = os.listdir(data.snapshot_dir("s"))
    assert not [f for f in left if f.startswith("index.") or ".ivfdata" in f], left
    assert verify_snapshot(data, catalog, "s").ok
    shutil.rmtree(tmp_path / "moved")
