"""``index import --embeddings DIR``: a folder of .npy and parquet shards, rows placed by id,
every id exactly once."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import BadInputError, Cancelled
from ragdesk.core.paths import DataDir
from ragdesk.core.progress import CancelToken
from ragdesk.core.snapshots import import_snapshot, open_snapshot
from ragdesk.core.snapshots import shards as shards_mod
from tests.core.snapshots.util import open_data, write_jsonl

N, DIM = 50, 32


@pytest.fixture()
def env(tmp_path: Path) -> tuple[DataDir, Catalog]:
    return open_data(tmp_path / "data")


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "p.jsonl", [(f"T{i}", f"passage {i}") for i in range(N)])


def vectors(dtype: Any = np.float32, n: int = N) -> np.ndarray:
    return np.random.default_rng(0).standard_normal((n, DIM)).astype(dtype)


def write_parquet(path: Path, ids: np.ndarray, vecs: np.ndarray, fixed: bool = False,
                  row_group: int = 7) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    values = pa.array(vecs.reshape(-1))
    emb = (pa.FixedSizeListArray.from_arrays(values, vecs.shape[1]) if fixed else
           pa.ListArray.from_arrays(pa.array(np.arange(0, vecs.size + 1, vecs.shape[1],
                                                       dtype=np.int32)), values))
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "embedding": emb}), path,
                   row_group_size=row_group)


def shuffled_shards(folder: Path, vecs: np.ndarray, fmt: str) -> None:
    """Four shards of ids in random order; .npy shards carry them in NAME.ids.npy."""
    folder.mkdir()
    order = np.random.default_rng(1).permutation(len(vecs))
    for k, part in enumerate(np.array_split(order, 4)):
        if fmt == "parquet":
            write_parquet(folder / f"part-{k}.parquet", part, vecs[part], fixed=k % 2 == 0)
        else:
            np.save(folder / f"part-{k}.npy", vecs[part])
            np.save(folder / f"part-{k}.ids.npy", part.astype(np.int64))


@pytest.mark.parametrize("fmt", ["npy", "parquet"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_shuffled_shards_are_placed_by_id(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                          source: Path, tmp_path: Path, fmt: str,
                                          dtype: Any) -> None:
    data, catalog = env
    vecs = vectors(dtype)
    shuffled_shards(tmp_path / "emb", vecs, fmt)
    (tmp_path / "emb" / "_SUCCESS").write_text("")  # what a job leaves: ignored
    rec = import_snapshot(data, catalog, source, name="sh", encoder=dpr_ctx,
                          embeddings=tmp_path / "emb")
    index = open_snapshot(data, catalog, "sh")
    assert index.embeddings().dtype == np.dtype(dtype)  # float16 stays float16
    np.testing.assert_array_equal(index.embeddings(), vecs)
    assert index.manifest.source["embeddings"] == str((tmp_path / "emb").resolve())
    index.close()
    assert rec.passages == N


def test_npy_shards_without_ids_follow_on_in_name_order(
        env: tuple[DataDir, Catalog], dpr_ctx: Any, source: Path, tmp_path: Path) -> None:
    data, catalog = env
    vecs = vectors()
    folder = tmp_path / "emb"
    folder.mkdir()
    bounds = [0, 5, 10, 30, 50]  # part-2 must come before part-10 (not "part-10" < "part-2")
    for name, (a, b) in zip(["part-1", "part-2", "part-10", "part-11"],
                            itertools.pairwise(bounds), strict=True):
        np.save(folder / f"{name}.npy", vecs[a:b])
    import_snapshot(data, catalog, source, name="seq", encoder=dpr_ctx, embeddings=folder)
    index = open_snapshot(data, catalog, "seq")
    np.testing.assert_array_equal(index.embeddings(), vecs)
    index.close()


def test_mixed_dtypes_and_formats_make_float32(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                               source: Path, tmp_path: Path) -> None:
    data, catalog = env
    vecs = vectors(np.float16)
    folder = tmp_path / "emb"
    folder.mkdir()
    write_parquet(folder / "a.parquet", np.arange(20), vecs[:20].astype(np.float32))
    np.save(folder / "b.npy", vecs[20:])
    np.save(folder / "b.ids.npy", np.arange(20, N))
    import_snapshot(data, catalog, source, name="mix", encoder=dpr_ctx, embeddings=folder)
    index = open_snapshot(data, catalog, "mix")
    assert index.embeddings().dtype == np.float32
    np.testing.assert_array_equal(index.embeddings(), vecs.astype(np.float32))
    index.close()


def test_limit_takes_the_first_ids(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                   source: Path, tmp_path: Path) -> None:
    data, catalog = env
    vecs = vectors()
    shuffled_shards(tmp_path / "emb", vecs, "parquet")
    import_snapshot(data, catalog, source, name="lim", encoder=dpr_ctx, limit=20,
                    embeddings=tmp_path / "emb")
    index = open_snapshot(data, catalog, "lim")
    np.testing.assert_array_equal(index.embeddings(), vecs[:20])
    index.close()


@pytest.mark.parametrize("fmt", ["npy", "parquet"])
def test_a_duplicate_id_names_both_shards(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                          source: Path, tmp_path: Path, fmt: str) -> None:
    data, catalog = env
    vecs = vectors()
    folder = tmp_path / "emb"
    folder.mkdir()
    ids_a, ids_b = np.arange(0, 30), np.arange(29, N)  # 29 twice, nothing missing
    for name, ids in (("a", ids_a), ("b", ids_b)):
        if fmt == "parquet":
            write_parquet(folder / f"{name}.parquet", ids, vecs[ids])
        else:
            np.save(folder / f"{name}.npy", vecs[ids])
            np.save(folder / f"{name}.ids.npy", ids)
    with pytest.raises(BadInputError, match=rf"b\.{fmt}: has the id 29, which a\.{fmt} has"):
        import_snapshot(data, catalog, source, name="dup", encoder=dpr_ctx, embeddings=folder)
    assert not (data.staging_dir / "dup").exists()


def test_a_duplicate_inside_one_shard(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                      source: Path, tmp_path: Path) -> None:
    data, catalog = env
    folder = tmp_path / "emb"
    folder.mkdir()
    ids = np.r_[np.arange(N), 7]
    write_parquet(folder / "one.parquet", ids, vectors(n=N + 1))
    with pytest.raises(BadInputError, match=r"one\.parquet: has the id 7 twice"):
        import_snapshot(data, catalog, source, name="dup1", encoder=dpr_ctx,
                        embeddings=folder)


def test_a_gap_is_named_with_the_shards_around_it(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                                  source: Path, tmp_path: Path) -> None:
    data, catalog = env
    vecs = vectors()
    folder = tmp_path / "emb"
    folder.mkdir()
    write_parquet(folder / "low.parquet", np.arange(0, 17), vecs[:17])
    write_parquet(folder / "high.parquet", np.arange(18, N), vecs[18:])
    with pytest.raises(BadInputError, match=r"no vector for 1 of the source's 50 passages: "
                                            r"ids 17 \(the ids next to it are in "
                                            r"high\.parquet and low\.parquet\)"):
        import_snapshot(data, catalog, source, name="gap", encoder=dpr_ctx,
                        embeddings=folder)


def test_bad_shards_are_refused_by_name(env: tuple[DataDir, Catalog], dpr_ctx: Any,
                                        source: Path, tmp_path: Path) -> None:
    data, catalog = env
    cases: dict[str, tuple[Any, str]] = {
        "wide": (lambda f: np.save(f / "w.npy", np.zeros((N, 16), np.float32)),
                 r"w\.npy: holds 16-dimensional"),
        "ints": (lambda f: np.save(f / "i.npy", np.zeros((N, DIM), np.int32)),
                 r"i\.npy: holds int32 vectors"),
        "out": (lambda f: write_parquet(f / "o.parquet", np.arange(1, N + 1), vectors()),
                r"o\.parquet: has the id 50, outside"),
        "empty": (lambda f: (f / "notes.txt").write_text("x"), r"holds no \.npy or \.parquet"),
        "nan": (lambda f: np.save(f / "n.npy", np.full((N, DIM), np.nan, np.float32)),
                r"n\.npy: the vector of id 0 holds a NaN"),
    }
    for name, (make, pattern) in cases.items():
        folder = tmp_path / name
        folder.mkdir()
        make(folder)
        with pytest.raises(BadInputError, match=pattern):
            import_snapshot(data, catalog, source, name=name, encoder=dpr_ctx,
                            embeddings=folder)


def test_a_cancelled_copy_resumes_after_its_last_shard(
        env: tuple[DataDir, Catalog], dpr_ctx: Any, source: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    data, catalog = env
    vecs = vectors()
    shuffled_shards(tmp_path / "emb", vecs, "npy")
    cancel = CancelToken()
    read: list[str] = []
    real_blocks = shards_mod.EmbeddingShards.blocks

    def blocks(self: Any, shard: Any, vectors: bool = True) -> Any:
        if vectors:
            read.append(shard.path.name)
            if len(read) == 3:
                cancel.cancel()  # during the third shard
        return real_blocks(self, shard, vectors)

    monkeypatch.setattr(shards_mod.EmbeddingShards, "blocks", blocks)
    with pytest.raises(Cancelled):
        import_snapshot(data, catalog, source, name="res", encoder=dpr_ctx,
                        embeddings=tmp_path / "emb", cancel=cancel)
    read.clear()
    import_snapshot(data, catalog, source, name="res", encoder=dpr_ctx,
                    embeddings=tmp_path / "emb")
    assert read == ["part-2.npy", "part-3.npy"]  # the two committed shards are not read again
    index = open_snapshot(data, catalog, "res")
    np.testing.assert_array_equal(index.embeddings(), vecs)
    index.close()


def test_memory_is_bounded_by_a_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Vectors are read a block at a time, never a whole shard."""
    monkeypatch.setattr(shards_mod, "BLOCK_ROWS", 8)
    folder = tmp_path / "emb"
    shuffled_shards(folder, vectors(), "parquet")
    np.save(folder / "extra.npy", vectors(n=20))
    emb = shards_mod.open_shards(folder, DIM)
    sizes = [len(ids) for s in emb.shards for ids, _ in emb.blocks(s)]
    assert max(sizes) <= 8 and sum(sizes) == N + 20


def test_cli_imports_a_folder_of_shards(cli: Any, tiny_models: Any, source: Path,
                                        tmp_path: Path) -> None:
    vecs = vectors(np.float16)
    shuffled_shards(tmp_path / "emb", vecs, "parquet")
    code, _, err = cli("index", "import", str(source), "--name", "cli-shards", "--encoder",
                         str(tiny_models.ctx_encoder), "--embeddings", str(tmp_path / "emb"))
    assert code == 0, err
    (tmp_path / "emb" / "part-0.parquet").unlink()
    code, _, err = cli("index", "import", str(source), "--name", "cli-gap", "--encoder",
                         str(tiny_models.ctx_encoder), "--embeddings", str(tmp_path / "emb"))
    assert code == 2 and "has no vector for 13 of the source's 50 passages" in err
