"""``ragdesk encode``'s pieces that need no Ray: the shard plan, the reader (passage i is the
import's passage i), the atomic shard writer, resume detection and the actor's encoding."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from ragdesk.core.distributed.actor import PassageEncoder
from ragdesk.core.distributed.plan import (
    JOB_FILE,
    ShardPlan,
    claim_folder,
    finished_shards,
    job_record,
    recorded_passages,
)
from ragdesk.core.distributed.reader import count_passages, unfinished_shards
from ragdesk.core.distributed.writer import write_returned, write_shard
from ragdesk.core.errors import BadInputError
from ragdesk.core.snapshots.shards import check_ids, open_shards
from tests.core.snapshots.util import naive_passages, write_jsonl

DIM = 8


def articles(n: int) -> list[tuple[str, str]]:
    """Articles of 30 to 250 words, so that some split into several passages."""
    return [(f"Title {i}", " ".join(f"w{i}x{j}" for j in range(30 + (i * 37) % 220)))
            for i in range(n)]


def test_plan_bounds_names_and_count() -> None:
    plan = ShardPlan(passages=25, shard_rows=10)
    assert plan.count == 3
    assert [plan.bounds(i) for i in range(3)] == [(0, 10), (10, 20), (20, 25)]
    assert [plan.rows(i) for i in range(3)] == [10, 10, 5]
    assert plan.name(2) == "part-00002"
    assert ShardPlan(5, 5).count == 1
    wide = ShardPlan(200_000, 1)
    assert wide.name(0) == "part-000000" and wide.name(199_999) == "part-199999"
    with pytest.raises(BadInputError, match="shard-size"):
        ShardPlan(10, 0)


def test_shards_hold_the_passages_the_import_stores_at_those_positions(tmp_path: Path
                                                                      ) -> None:
    arts = articles(40)
    src = write_jsonl(tmp_path / "a.jsonl", arts)
    expected = naive_passages(arts)  # the split, as plainly as it can be written
    n = count_passages(str(src), None, None)
    assert n == len(expected)
    plan = ShardPlan(n, 7)
    got = list(unfinished_shards(src, None, plan, skip=()))
    assert [s.index for s in got] == list(range(plan.count))
    flat = [(t, x) for s in got for t, x in zip(s.titles, s.texts, strict=True)]
    assert flat == expected
    assert all(s.start == plan.bounds(s.index)[0] for s in got)
    # a resume reads the skipped shards' passages to place the others, but yields only these
    skip = {0, 2, plan.count - 1}
    rest = list(unfinished_shards(src, None, plan, skip=skip))
    assert [s.index for s in rest] == [i for i in range(plan.count) if i not in skip]
    for s in rest:
        start, stop = plan.bounds(s.index)
        assert list(zip(s.titles, s.texts, strict=True)) == expected[start:stop]


def test_written_shards_are_what_index_import_reads(tmp_path: Path) -> None:
    plan = ShardPlan(23, 10)
    vecs = np.random.default_rng(0).standard_normal((23, DIM)).astype(np.float32)
    out = tmp_path / "out"
    out.mkdir()
    for i in (2, 0, 1):  # any order
        start, stop = plan.bounds(i)
        write_shard(out, plan, i, vecs[start:stop])
    assert sorted(p.name for p in out.iterdir()) == [
        "part-00000.ids.npy", "part-00000.npy", "part-00001.ids.npy", "part-00001.npy",
        "part-00002.ids.npy", "part-00002.npy"]  # no temporary file left behind
    emb = open_shards(out, DIM)
    check_ids(emb, 23, limited=False)
    got = np.zeros_like(vecs)
    for shard in emb.shards:
        for ids, block in emb.blocks(shard):
            got[ids] = block
    np.testing.assert_array_equal(got, vecs)
    assert finished_shards(out, plan, DIM, "float32") == {0, 1, 2}
    assert finished_shards(out, plan, DIM, "float16") == set()


def test_unfinished_shards_are_not_counted_as_finished(tmp_path: Path) -> None:
    plan = ShardPlan(30, 10)
    vecs = np.ones((10, DIM), dtype=np.float32)
    write_shard(tmp_path, plan, 0, vecs)
    write_shard(tmp_path, plan, 1, vecs)
    write_shard(tmp_path, plan, 2, vecs)
    # killed between the ids and the vectors: a lone ids file, which the import ignores
    (tmp_path / "part-00001.npy").unlink()
    # a shard of another plan's shape
    np.save(tmp_path / "part-00002.npy", np.ones((9, DIM), dtype=np.float32))
    assert finished_shards(tmp_path, plan, DIM, "float32") == {0}
    with pytest.raises(RuntimeError, match="9 vectors"):
        write_shard(tmp_path, plan, 2, vecs[:9])


def test_write_returned_drops_the_padding(tmp_path: Path) -> None:
    plan = ShardPlan(13, 5)
    padded = np.zeros((2, 5, DIM), dtype=np.float16)
    padded[0, :] = 1
    padded[1, :3] = 2
    batch = {"shard": np.array([0, 2]), "start": np.array([0, 10]),
             "rows": np.array([5, 3]), "vectors": padded}
    assert write_returned(tmp_path, plan, batch) == 8
    last = np.load(tmp_path / "part-00002.npy")
    assert last.shape == (3, DIM) and last.dtype == np.float16 and (last == 2).all()
    np.testing.assert_array_equal(np.load(tmp_path / "part-00002.ids.npy"), [10, 11, 12])


def test_a_folder_holds_one_job(tmp_path: Path) -> None:
    source = {"path": "/x.jsonl", "format": "jsonl", "size": 10, "mtime_ns": 1}
    enc: dict[str, Any] = {"id": "e", "dim": DIM}
    record = job_record(source, enc, ShardPlan(30, 10), "float32")
    claim_folder(tmp_path, record)
    claim_folder(tmp_path, record)  # the same job again: a resume
    assert json.loads((tmp_path / JOB_FILE).read_text())["passages"] == 30
    assert recorded_passages(tmp_path, source) == 30
    assert recorded_passages(tmp_path, {**source, "size": 11}) is None
    other = job_record(source, enc, ShardPlan(30, 5), "float16")
    with pytest.raises(BadInputError, match="dtype, shard_rows"):
        claim_folder(tmp_path, other)
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    np.save(foreign / "vectors.npy", np.zeros((2, 2)))
    with pytest.raises(BadInputError, match="no ragdesk encode job wrote"):
        claim_folder(foreign, record)


def test_the_actor_encodes_as_the_import_does(tiny_models: Any) -> None:
    """The actor class, called without Ray, gives the import's vectors for the same passages
    (``passage_input`` pairs for DPR, length-sorted batches)."""
    from ragdesk.core.encoders import load_encoder, passage_input

    pairs = naive_passages(list(tiny_models.corpus[:6]))
    actor = PassageEncoder(str(tiny_models.ctx_encoder), "cpu", "float32", batch_size=4,
                           shard_rows=len(pairs) + 3)
    out = actor({"shard": np.array([0]), "start": np.array([0]),
                 "titles": np.array([[t for t, _ in pairs]], dtype=object),
                 "texts": np.array([[x for _, x in pairs]], dtype=object)})
    assert out["rows"].tolist() == [len(pairs)]
    vecs = out["vectors"][0]
    assert vecs.shape == (len(pairs) + 3, actor.encoder.dim)
    assert not vecs[len(pairs):].any()
    enc = load_encoder(tiny_models.ctx_encoder, role="passage")
    # the DPR context encoder takes (title, text) pairs
    ref = np.stack([enc.encode_batch([cast(tuple[str, str], passage_input(enc, t, x))])[0]
                    for t, x in pairs])
    cos = (vecs[:len(pairs)] * ref).sum(1) / (np.linalg.norm(vecs[:len(pairs)], axis=1)
                                               * np.linalg.norm(ref, axis=1))
    assert cos.min() >= 0.9999


def test_encode_without_ray_says_how_to_install_it(cli: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    src = write_jsonl(tmp_path / "a.jsonl", articles(3))
    code, _, err = cli("encode", str(src), "--encoder", "x", "--out", str(tmp_path / "o"))
    assert code == 1
    assert 'pip install "ragdesk[distributed]"' in err
    assert not (tmp_path / "o").exists()
