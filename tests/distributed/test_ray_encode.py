"""``ragdesk encode`` on a real (local) Ray cluster: 2 actors encode 200 passages, the job is
killed part-way and resumed, and the shards imported with ``index import --embeddings``
give the vectors and top-20 results of a plain local import of the same source.

One cluster for the module (Ray takes seconds to start), bound to 127.0.0.1; the encode
runs are separate driver processes that join it, as on a real cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.snapshots import open_snapshot
from ragdesk.core.snapshots.chunking import passages
from ragdesk.core.snapshots.sources import open_source
from tests.core.snapshots.util import open_data, write_jsonl

pytestmark = pytest.mark.distributed

PASSAGES = 200
SHARD_ROWS = 4  # 50 shards: Ray's per-shard overhead leaves time to kill the job part-way
ACTORS = 2


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    ray = pytest.importorskip("ray")
    # a short folder: Ray's socket paths must fit in 107 bytes
    temp = tempfile.mkdtemp(prefix="rd-ray-", dir="/tmp")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    # one CPU more than the actors use: the read task needs one too
    ctx = ray.init(address="local", num_cpus=ACTORS + 1, include_dashboard=False,
                   _node_ip_address="127.0.0.1", _temp_dir=temp, logging_level="WARNING")
    try:
        yield str(ctx.address_info["gcs_address"])
    finally:
        ray.shutdown()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="module")
def source(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Articles (some longer than 100 words, so split) that make exactly 200 passages."""
    path = tmp_path_factory.mktemp("src") / "articles.jsonl"
    arts: list[tuple[str, str]] = []
    for title, text in tiny_models.corpus:
        arts.append((title, text))
        n = _count(write_jsonl(path, arts))
        if n >= PASSAGES:
            words = text.split()
            arts[-1] = (title, " ".join(words[:len(words) - 100 * (n - PASSAGES)]))
            break
    write_jsonl(path, arts)
    assert _count(path) == PASSAGES
    return path


def _count(path: Path) -> int:
    return sum(1 for _ in passages(open_source(path).documents()))


def _encode(args: list[str], data: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.Popen([sys.executable, "-m", "ragdesk", "--data-dir", str(data),
                             "encode", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def _finished(out: Path) -> dict[str, int]:
    """Vector files and their inode numbers (a rewritten shard gets a new one)."""
    return {p.name: p.stat().st_ino for p in out.glob("part-*.npy")
            if not p.name.endswith(".ids.npy")}


def _kill_part_way(proc: subprocess.Popen[str], out: Path, total: int) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if out.is_dir() and 1 <= len(_finished(out)) < total:
            proc.send_signal(signal.SIGKILL)
            proc.communicate()
            return
        time.sleep(0.01)
    if proc.poll() is None:
        proc.kill()
    stderr = proc.communicate(timeout=60)[1]
    pytest.fail(f"the job was not caught part-way (exit {proc.returncode}): {stderr[-3000:]}")


def _import(cli: Any, source: Path, encoder: Path, name: str, *extra: str) -> None:
    code, _, err = cli("index", "import", str(source), "--name", name, "--encoder",
                         str(encoder), *extra)
    assert code == 0, err


def test_killed_job_resumes_and_matches_a_local_import(
        ray_address: str, source: Path, tiny_models: Any, tmp_path: Path, data_dir: Path,
        cli: Any) -> None:
    out = tmp_path / "shards"
    encoder = tiny_models.ctx_encoder
    args = [str(source), "--encoder", str(encoder), "--out", str(out), "--ray-address",
            ray_address, "--actors", str(ACTORS), "--shard-size", str(SHARD_ROWS),
            "--batch-size", "3", "--json"]
    total = PASSAGES // SHARD_ROWS
    _kill_part_way(_encode(args, data_dir), out, total)
    before = _finished(out)
    for name in before:  # every vector file that exists is whole, with its ids
        vec = np.load(out / name)
        ids = np.load(out / name.replace(".npy", ".ids.npy"))
        assert vec.shape[0] == len(ids) == SHARD_ROWS

    resumed = _encode(args, data_dir)
    stdout, stderr = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, stderr[-3000:]
    report = json.loads(stdout)
    assert report["skipped"] == len(before)
    assert report["written"] == total - len(before)
    assert report["passages"] == PASSAGES and report["shards"] == total
    after = _finished(out)
    assert len(after) == total
    assert {k: after[k] for k in before} == before  # the finished shards were not redone
    assert not [p for p in out.iterdir() if ".tmp-" in p.name]

    _import(cli, source, encoder, "ray", "--embeddings", str(out))
    _import(cli, source, encoder, "local")
    _compare(data_dir, tiny_models)


def _compare(data_dir: Path, tiny_models: Any) -> None:
    from ragdesk.core.encoders import load_encoder

    data, catalog = open_data(data_dir)
    ray_snap = open_snapshot(data, catalog, "ray")
    local = open_snapshot(data, catalog, "local")
    a = np.asarray(ray_snap.embeddings(), dtype=np.float32)
    b = np.asarray(local.embeddings(), dtype=np.float32)
    assert a.shape == b.shape == (PASSAGES, b.shape[1])
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cos.min() >= 0.9999
    questions = ["who wrote the book", "largest city in the country", "river and mountains",
                 "war in the century", "science of the planet"]
    qenc = load_encoder(tiny_models.question_encoder, role="question")
    q = qenc.encode(questions)
    _, ids_ray = ray_snap.search_ids(q, 20)
    _, ids_local = local.search_ids(q, 20)
    np.testing.assert_array_equal(ids_ray, ids_local)
    ray_snap.close()
    local.close()
