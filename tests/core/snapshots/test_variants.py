"""Index variants on 20,000 clustered passages: recall@20 against brute-force search, exact
scores, recorded sizes, memory-mapped loading, default and removed variants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import BadInputError, CatalogError, NotFoundError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import faiss_variants as fv
from ragdesk.core.snapshots import (
    import_snapshot,
    open_snapshot,
    quantize_snapshot,
    read_manifest,
    remove_variant,
    verify_snapshot,
)
from ragdesk.core.snapshots import variant_search as vs
from ragdesk.core.snapshots import variant_tuning as vt
from tests.core.snapshots.util import exact_top_k, open_data, synthetic_snapshot_files

N, DIM = 20_000, 32
QUERIES = 300  # tuning queries (the default is 1000)


@pytest.fixture(scope="module")
def syn(tmp_path_factory: pytest.TempPathFactory, dpr_ctx: Any
        ) -> tuple[DataDir, Catalog, np.ndarray]:
    root = tmp_path_factory.mktemp("variants")
    src, npy, vecs = synthetic_snapshot_files(root / "src", N, DIM)
    data, catalog = open_data(root / "data")
    rec = import_snapshot(data, catalog, src, name="syn", encoder=dpr_ctx, embeddings=npy)
    assert rec.passages == N
    return data, catalog, vecs


def unseen_queries(vecs: np.ndarray, n: int = 300, seed: int = 7) -> np.ndarray:
    """Points near stored passages but not stored themselves (like questions near answers)."""
    rng = np.random.default_rng(seed)
    q = vecs[rng.choice(len(vecs), n, replace=False)]
    q = q + 0.3 * rng.standard_normal(q.shape).astype(np.float32) / np.sqrt(DIM)
    vec: np.ndarray = (q / np.linalg.norm(q, axis=1, keepdims=True)).astype(np.float32)
    return vec


def recall(approx: np.ndarray | list[np.ndarray], exact: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(e)) / len(e) for a, e in zip(approx, exact,
                                                                         strict=True)]))


@pytest.mark.parametrize("variant", ["ivf-pq", "hnsw-sq8"])
def test_recall_at_20_against_exact_search(syn: tuple[DataDir, Catalog, np.ndarray],
                                           variant: str) -> None:
    data, catalog, vecs = syn
    res = quantize_snapshot(data, catalog, "syn", variant, target_recall=0.95, queries=QUERIES)
    assert res.recall_at_20 >= 0.95
    assert res.bytes == (data.snapshot_dir("syn") / res.file).stat().st_size
    flat_bpp = DIM * 4
    if variant == "ivf-pq":
        assert res.bytes_per_passage <= flat_bpp / 4  # PQ codes + ids, not the vectors
        assert {"nlist", "m", "nbits", "nprobe", "rerank"} <= set(res.params)
    else:
        assert {"M", "ef_search", "rerank"} <= set(res.params)

    # The recall quantize reports is what a brute-force reference gives on its queries.
    sample = vt.sample_queries(vecs, QUERIES)
    index = open_snapshot(data, catalog, "syn", variant)
    try:
        _, got = index.search_ids(sample, 20)
        _, ref = exact_top_k(vecs, sample, 20)
        assert recall(got, ref) == pytest.approx(res.recall_at_20, abs=0.002)

        # And it carries over to queries that are not stored passages.
        q = unseen_queries(vecs)
        scores, ids = index.search_ids(q, 20)
        _, ref_ids = exact_top_k(vecs, q, 20)
        assert recall(ids, ref_ids) >= 0.93
        # Scores are exact inner products, whatever the variant.
        np.testing.assert_allclose(scores, np.einsum("qkd,qd->qk", vecs[ids], q), rtol=1e-5,
                                   atol=1e-6)
        assert np.all(np.diff(scores, axis=1) <= 1e-6)
        assert index.resident_bytes == res.bytes
    finally:
        index.close()

    rec = catalog.get_snapshot("syn")
    row = next(v for v in rec.variants if v.variant == variant)
    assert row.recall_at_20 == pytest.approx(res.recall_at_20)
    assert row.bytes_per_passage == pytest.approx(res.bytes / N)
    assert verify_snapshot(data, catalog, "syn").ok


def test_probes_and_candidates_drive_recall(syn: tuple[DataDir, Catalog, np.ndarray]) -> None:
    data, catalog, _ = syn
    low = quantize_snapshot(data, catalog, "syn", "ivf-pq", params={"nprobe": 1, "rerank": 20},
                            queries=QUERIES)
    high = quantize_snapshot(data, catalog, "syn", "ivf-pq", queries=QUERIES,
                             params={"nprobe": 32, "rerank": 400, "m": 8})
    assert low.params["nprobe"] == 1 and low.params["rerank"] == 20
    assert high.params["m"] == 8
    assert low.recall_at_20 < 0.9 < high.recall_at_20
    # The tuned variant on disk is the last one built.
    assert read_manifest(data.snapshot_dir("syn")).variants["ivf-pq"].params["nprobe"] == 32


def test_memory_mapped_loading_gives_the_same_answers(
        syn: tuple[DataDir, Catalog, np.ndarray], monkeypatch: pytest.MonkeyPatch) -> None:
    data, catalog, vecs = syn
    quantize_snapshot(data, catalog, "syn", "ivf-pq", params={"nprobe": 8, "rerank": 100},
                      queries=QUERIES)
    q = unseen_queries(vecs, 50, seed=3)
    index = open_snapshot(data, catalog, "syn", "ivf-pq")
    in_memory = index.search_ids(q, 10)
    index.close()
    monkeypatch.setattr(fv, "MMAP_MIN_BYTES", 0)
    index = open_snapshot(data, catalog, "syn", "ivf-pq")
    mapped = index.search_ids(q, 10)
    index.close()
    np.testing.assert_array_equal(in_memory[1], mapped[1])
    np.testing.assert_array_equal(in_memory[0], mapped[0])


def test_default_variant_and_removal(syn: tuple[DataDir, Catalog, np.ndarray]) -> None:
    data, catalog, _ = syn
    quantize_snapshot(data, catalog, "syn", "ivf-pq", params={"nprobe": 4, "rerank": 50},
                      make_default=True, queries=QUERIES)
    index = open_snapshot(data, catalog, "syn")
    assert index.variant == "ivf-pq"
    index.close()
    with pytest.raises(CatalogError):
        remove_variant(data, catalog, "syn", "flat")
    remove_variant(data, catalog, "syn", "ivf-pq")
    assert not (data.snapshot_dir("syn") / "index.ivf-pq.faiss").exists()
    assert "ivf-pq" not in {v.variant for v in catalog.get_snapshot("syn").variants}
    index = open_snapshot(data, catalog, "syn")
    assert index.variant == "flat"
    index.close()
    with pytest.raises(NotFoundError, match="no ivf-pq index") as ei:
        open_snapshot(data, catalog, "syn", "ivf-pq")
    assert "quantize" in ei.value.hint
    assert verify_snapshot(data, catalog, "syn").ok


def test_bad_parameters(syn: tuple[DataDir, Catalog, np.ndarray]) -> None:
    data, catalog, _ = syn
    with pytest.raises(BadInputError, match="divide"):
        quantize_snapshot(data, catalog, "syn", "ivf-pq", params={"m": 5})
    with pytest.raises(BadInputError, match="not an index variant"):
        quantize_snapshot(data, catalog, "syn", "lsh")
    with pytest.raises(BadInputError, match="no parameter"):
        quantize_snapshot(data, catalog, "syn", "hnsw-sq8", params={"nprobe": 3})


def test_exact_search_helpers_match_numpy(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    emb = rng.standard_normal((3000, 16)).astype(np.float32)
    q = rng.standard_normal((9, 16)).astype(np.float32)
    ref_s, ref_i = exact_top_k(emb, q, 15)
    for stored in (emb, emb.astype(np.float16)):
        s, i = fv.exact_search(stored, q, 15)
        ref_s16, ref_i16 = exact_top_k(stored.astype(np.float32), q, 15)
        np.testing.assert_array_equal(i, ref_i16)
        np.testing.assert_allclose(s, ref_s16, rtol=1e-4, atol=1e-4)
    monkeypatched = fv.EXACT_BLOCK
    try:
        fv.EXACT_BLOCK = 700  # several blocks, merged
        s, i = fv.exact_search(emb.astype(np.float16), q, 15)
    finally:
        fv.EXACT_BLOCK = monkeypatched
    np.testing.assert_array_equal(i, exact_top_k(emb.astype(np.float16).astype(np.float32),
                                                 q, 15)[1])
    # Candidates with repeats and padding re-rank to the exact order among them.
    cands = np.concatenate([ref_i[:, ::-1], ref_i[:, :3], -np.ones((9, 2), np.int64)], axis=1)
    s, i = vs.rerank(emb, q, cands, 10)
    np.testing.assert_array_equal(i, ref_i[:, :10])
    np.testing.assert_allclose(s, ref_s[:, :10], rtol=1e-5)
    assert vt.recall_at_k(i, ref_i[:, :10], 10) == 1.0
    assert vt.recall_at_k(np.full_like(i, -1), ref_i[:, :10], 10) == 0.0


def test_disk_full_while_writing_a_variant(syn: tuple[DataDir, Catalog, np.ndarray],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import faiss

    from ragdesk.core.errors import DiskFullError

    data, catalog, _ = syn
    folder = data.snapshot_dir("syn")
    before = (folder / "manifest.json").read_bytes()
    variants_before = catalog.get_snapshot("syn").variants

    def full(index: object, path: str) -> None:
        with open(path, "wb") as fh:
            fh.write(b"partial")
        raise RuntimeError(f"Error: 'ret == (size * 4)' failed: write error in {path}: "
                           "4051 != 3200000 (No space left on device)")

    monkeypatch.setattr(faiss, "write_index", full)
    with pytest.raises(DiskFullError, match="disk is full"):
        quantize_snapshot(data, catalog, "syn", "hnsw-sq8",
                          params={"ef_search": 16, "rerank": 20}, queries=50)
    assert (folder / "manifest.json").read_bytes() == before
    assert catalog.get_snapshot("syn").variants == variants_before
    assert not [p for p in folder.iterdir() if ".tmp-" in p.name]


def test_recall_below_the_target_is_a_warning(syn: tuple[DataDir, Catalog, np.ndarray]) -> None:
    data, catalog, vecs = syn
    low = quantize_snapshot(data, catalog, "syn", "ivf-pq", params={"nprobe": 1, "rerank": 20},
                            target_recall=0.99, queries=QUERIES)
    # The reported recall is the brute-force reference's on the same queries, and short.
    sample = vt.sample_queries(vecs, QUERIES)
    index = open_snapshot(data, catalog, "syn", "ivf-pq")
    try:
        measured = recall(index.search_ids(sample, 20)[1], exact_top_k(vecs, sample, 20)[1])
    finally:
        index.close()
    assert measured == pytest.approx(low.recall_at_20, abs=0.002) and measured < 0.99
    assert f"recall@20 is {low.recall_at_20:.3f}, below the target 0.99" in low.warning
    assert "the given search setting (nprobe=1, rerank=20)" in low.warning
    assert low.to_json()["below_target"] is True and low.to_json()["target_recall"] == 0.99

    # Tuned, an unreachable target says so too (20 candidates ranked by 16-dims-per-byte
    # codes cannot give the exact top 20); a reached one says nothing.
    unreachable = quantize_snapshot(data, catalog, "syn", "ivf-pq", params={"rerank": 20},
                                    target_recall=1.0, queries=QUERIES)
    assert unreachable.recall_at_20 < 1.0
    assert f"the best tried search setting (nprobe={unreachable.params['nprobe']}, " \
        "rerank=20)" in unreachable.warning
    met = quantize_snapshot(data, catalog, "syn", "ivf-pq", target_recall=0.9, queries=QUERIES)
    assert met.recall_at_20 >= 0.9 and met.warning == ""
    assert met.to_json()["below_target"] is False


def test_pq_code_width_prefers_fast_sub_vectors() -> None:
    # 768-d at 1M: at most 180 bytes fit the budget; 96 (8 dims per byte) beats 128 (6).
    assert fv.default_params("ivf-pq", 1_000_000, 768)["m"] == 96
    assert fv.pq_bytes(768, 200) == 192
    # No fast width within budget: the largest divisor, as before (384-d starter: 32).
    assert fv.pq_bytes(384, 40) == 32
    assert fv.pq_bytes(32, 2) == 2


def test_tuning_recall_is_the_recall_after_reranking() -> None:
    from tests.core.snapshots.util import clustered_vectors

    vecs = clustered_vectors(3000, 16, 20, seed=4)
    rng = np.random.default_rng(5)
    q = vecs[rng.choice(len(vecs), 40, replace=False)] + 0.1 * rng.standard_normal((40, 16))
    _, exact = exact_top_k(vecs, q, 20)
    # Candidates ranked by a noisy score, as a compressed index ranks them; -1 pads the end.
    noisy = q @ vecs.T + 0.3 * rng.standard_normal((len(q), len(vecs)))
    cands = np.argsort(-noisy, axis=1)[:, :300]
    cands[:5, 250:] = -1
    found = vt.found_at_depth(cands, exact, 20)
    for depth in (20, 50, 120, 300):
        reranked = []
        for row, c in zip(q, cands[:, :depth], strict=True):
            c = c[c >= 0]
            reranked.append(c[np.argsort(-(vecs[c] @ row), kind="stable")[:20]])
        assert found[depth] == pytest.approx(recall(reranked, exact))
    assert found[20] < found[300]
