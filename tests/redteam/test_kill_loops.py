"""SIGKILL at random points of `index quantize` and `index remove` (seeded).

After every kill, what the next command sees (``recover`` runs first in each) must be whole:
the snapshot is there and verifies, or (remove) it is gone from both the catalog and the disk;
never half. The kill points are drawn over the command's measured running time, weighted
towards its end, where the work is (the start is Python importing its modules).
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.snapshots import import_snapshot, read_manifest, recover, verify_snapshot
from tests.core.snapshots.util import open_data, synthetic_snapshot_files

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

NAME = "syn"


def _cli(root: Path, *argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "ragdesk", "--data-dir", str(root), *argv],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})


def _timed(root: Path, *argv: str) -> float:
    start = time.monotonic()
    proc = _cli(root, *argv)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-3000:]
    return time.monotonic() - start


def _killed(root: Path, delay: float, *argv: str) -> bool:
    """Run, SIGKILL after ``delay`` seconds; whether the kill came before the end."""
    return _kill_after(root, delay, *argv)[0]


def _kill_after(root: Path, delay: float, *argv: str) -> tuple[bool, float]:
    """Run, SIGKILL after ``delay`` seconds: (whether the kill came before the end, how long
    the run took when it ended by itself)."""
    start = time.monotonic()
    proc = _cli(root, *argv)
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, -signal.SIGKILL), err.decode()[-3000:]
    return proc.returncode == -signal.SIGKILL, time.monotonic() - start


def _make(root: Path, src: Path, npy: Path, encoder: str) -> None:
    data, catalog = open_data(root)
    try:
        import_snapshot(data, catalog, src, name=NAME, encoder=encoder, embeddings=npy)
    finally:
        catalog.close()


def _assert_whole(root: Path, may_be_gone: bool = False) -> bool:
    """Whole after recovery; whether the snapshot is there."""
    data, catalog = open_data(root)
    try:
        return _check_whole(data, catalog, may_be_gone)
    finally:
        catalog.close()


def _check_whole(data: Any, catalog: Any, may_be_gone: bool) -> bool:
    recover(data, catalog)
    rec = catalog.find_snapshot(NAME)
    folder = data.snapshot_dir(NAME)
    if rec is None:
        assert may_be_gone and not folder.exists()
        return False
    assert rec.state == "ready"
    assert verify_snapshot(data, catalog, NAME).ok
    listed = set(read_manifest(folder).variants)
    assert {v.variant for v in rec.variants} == listed
    return True


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".tmp-" in p.name]


def _setup(tmp_path: Path, tiny_models: Any) -> tuple[Path, Path, Path, str]:
    src, npy, _ = synthetic_snapshot_files(tmp_path / "src", 20_000, 32)
    root = tmp_path / "data"
    encoder = str(tiny_models.ctx_encoder)
    _make(root, src, npy, encoder)
    return root, src, npy, encoder


QUANTIZE = ("index", "quantize", NAME, "--variant", "hnsw-sq8", "--queries", "50")


def _quantize_loop(tmp_path: Path, tiny_models: Any, kills: int, seed: int) -> None:
    root, *_ = _setup(tmp_path, tiny_models)
    took = _timed(root, *QUANTIZE)
    rng = random.Random(seed)
    delivered = runs = 0
    # Kill times are drawn from the run's duration, which the machine's load changes from
    # one run to the next: a run that ends before its kill sets the duration for the next
    # draws, and runs go on (up to 3x) until ``kills`` kills landed.
    while delivered < kills and runs < 3 * kills:
        landed, ran = _kill_after(root, rng.uniform(0.6, 1.05) * took, *QUANTIZE)
        runs += 1
        delivered += landed
        if not landed:
            took = min(took, ran)
        _assert_whole(root)
    assert delivered >= kills // 2, (delivered, runs)
    _timed(root, *QUANTIZE)  # the user's next run
    assert _assert_whole(root)
    assert _temp_files(root) == []


def _remove_loop(tmp_path: Path, tiny_models: Any, kills: int, seed: int) -> None:
    root, src, npy, encoder = _setup(tmp_path, tiny_models)
    remove = ("index", "remove", NAME)
    took = _timed(root, *remove)
    rng = random.Random(seed)
    for _ in range(kills):
        if not _assert_whole(root, may_be_gone=True):
            _make(root, src, npy, encoder)
        _killed(root, rng.uniform(0.6, 1.05) * took, *remove)
    if _assert_whole(root, may_be_gone=True):
        _timed(root, *remove)
    assert not _assert_whole(root, may_be_gone=True)
    data = open_data(root)[0]
    assert [p.name for p in data.staging_dir.iterdir()] == []


def test_quantize_killed_at_5_random_points(tmp_path: Path, tiny_models: Any) -> None:
    _quantize_loop(tmp_path, tiny_models, kills=5, seed=17)


def test_remove_killed_at_5_random_points(tmp_path: Path, tiny_models: Any) -> None:
    _remove_loop(tmp_path, tiny_models, kills=5, seed=17)


@pytest.mark.slow
def test_quantize_killed_at_20_random_points(tmp_path: Path, tiny_models: Any) -> None:
    _quantize_loop(tmp_path, tiny_models, kills=20, seed=1717)


@pytest.mark.slow
def test_remove_killed_at_20_random_points(tmp_path: Path, tiny_models: Any) -> None:
    _remove_loop(tmp_path, tiny_models, kills=20, seed=1717)


def _pack(root: Path) -> dict[str, Any]:
    """The pack as `ragdesk models list --json` shows it next (its context recovers first), read
    in this process: a process per check was most of this test's time."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.models import list_packs

    app = AppContext(root)
    try:
        app.data.ensure()
        packs = {s.name: s.to_json() for s in list_packs(app.catalog, app.data)}
    finally:
        app.close()
    return dict(packs["p"])


def _models_loop(tmp_path: Path, tiny_models: Any, kills: int, seed: int) -> None:
    src = tmp_path / "rag"
    shutil.copytree(tiny_models.rag_sequence, src)
    root = tmp_path / "data"
    copy = ("models", "import", str(src), "--name", "p", "--copy")
    _timed(root, *copy)
    took = _timed(root, *copy, "--replace")
    rng = random.Random(seed)
    for _ in range(kills):
        _killed(root, rng.uniform(0.6, 1.05) * took, *copy, "--replace")
        pack = _pack(root)  # the old copy or the new one, never half of one
        assert pack["installed"], pack
        assert (Path(pack["question_encoder"]) / "config.json").is_file()
    _timed(root, *copy, "--replace")
    assert _pack(root)["installed"]
    models = root / "models"
    assert sorted(p.name for p in models.iterdir()
                  if p.name.startswith(".") and not p.name.endswith(".lock")) == []


def test_models_copy_killed_at_5_random_points(tmp_path: Path, tiny_models: Any) -> None:
    _models_loop(tmp_path, tiny_models, kills=5, seed=17)


@pytest.mark.slow
def test_models_copy_killed_at_20_random_points(tmp_path: Path, tiny_models: Any) -> None:
    _models_loop(tmp_path, tiny_models, kills=20, seed=1717)
