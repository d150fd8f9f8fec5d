"""SIGKILL at random points of `ragdesk index import`, resumed each time.

A seeded loop starts the real CLI import, kills it with SIGKILL at a random point (during
start-up and reading, between and inside batches, or after the last batch while the index,
manifest, rename and catalog rows are written), and starts it again, which resumes. The
snapshot it ends with must equal an uninterrupted import: the same passages in the same order,
the same vectors, `verify` clean, no staging folder or temporary file left, no job "running".
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.errors import Cancelled
from ragdesk.core.progress import CancelToken, ProgressUpdate
from ragdesk.core.snapshots import import_snapshot, open_snapshot, verify_snapshot
from tests.core.snapshots.util import open_data, write_jsonl

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

BATCH = 4
NAME = "killed"
# after the last batch: a kill lands up to this long after "encoded" reached the end
TAIL_S = 1.0


@dataclass
class KillLog:
    delivered: list[str] = field(default_factory=list)  # where each kill landed
    finished_early: bool = False


def _start(root: Path, src: Path, encoder: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "ragdesk", "--data-dir", str(root), "index", "import", str(src),
         "--name", NAME, "--encoder", str(encoder), "--batch-size", str(BATCH)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"})


def _encoded(state_file: Path) -> int | None:
    try:
        return int(json.loads(state_file.read_text()).get("encoded", 0))
    except (OSError, ValueError):
        return None


def _wait_for(proc: subprocess.Popen[bytes], state_file: Path, target: float,
              total: int) -> str | None:
    """Wait until the import reaches ``target`` (a passage count; beyond ``total``: seconds
    after the last batch, scaled); where it is then, or None if it ended first."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return None
        done = _encoded(state_file)
        if target < 0 and state_file.parent.is_dir():
            return "start-up/reading"
        if done is not None and 0 <= target <= done < total:
            return f"encoding {done}/{total}"
        if done is not None and target > total and done >= total:
            time.sleep((target - total) / total * TAIL_S)
            return "after the last batch"
        time.sleep(0.005)
    pytest.fail("the import made no progress in 300 s")


def _kill_loop(root: Path, src: Path, encoder: Path, total: int, kills: int,
               seed: int) -> KillLog:
    rng = random.Random(seed)
    # kill points in "progress" order: before encoding (-1), at a passage count, or after it
    targets = sorted(rng.choice([-1.0, rng.uniform(0, total), rng.uniform(total, 2 * total)])
                     for _ in range(kills))
    state_file = root / "staging" / NAME / "build.json"
    log = KillLog()
    for target in targets:
        if _ready(root):
            log.finished_early = True  # a kill after the last catalog write: nothing to resume
            break
        proc = _start(root, src, encoder)
        try:
            where = _wait_for(proc, state_file, target, total)
            if where is not None:
                time.sleep(rng.uniform(0, 0.03))  # anywhere inside a batch or a commit
                proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=60)
        if proc.returncode != -signal.SIGKILL:
            err = proc.stderr.read().decode() if proc.stderr else ""
            assert proc.returncode == 0, err[-3000:]
            log.finished_early = True  # the kill came after the import had completed
            break
        log.delivered.append(where or "?")
    return log


def _next_start(root: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ragdesk", "--data-dir", str(root), "index", "list", "--json"],
        capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert [s["name"] for s in json.loads(proc.stdout)] == [NAME]


def _ready(root: Path) -> bool:
    if not (root / "catalog.sqlite").exists():
        return False
    rec = open_data(root)[1].find_snapshot(NAME)
    return rec is not None and rec.state == "ready"


def _snapshot(root: Path) -> tuple[list[tuple[str, str]], np.ndarray, Any]:
    data, catalog = open_data(root)
    index = open_snapshot(data, catalog, NAME)
    try:
        passages = [(p.title, p.text) for p in index.get_passages(list(range(index.size)))]
        return passages, np.array(index.embeddings()), index.manifest
    finally:
        index.close()


def _assert_clean(root: Path) -> None:
    data, catalog = open_data(root)
    assert verify_snapshot(data, catalog, NAME).ok
    rec = catalog.get_snapshot(NAME)
    assert rec.state == "ready"
    # every index the manifest lists has its catalog row (a kill between the two catalog
    # writes of mark_ready left "ready" with none)
    with open(data.snapshot_dir(rec.slug) / "manifest.json", encoding="utf-8") as fh:
        listed = set(json.load(fh)["variants"])
    assert {v.variant for v in rec.variants} == listed
    assert [s.name for s in catalog.list_snapshots()] == [NAME]
    assert not [j for j in catalog.list_jobs() if j.state == "running"]
    assert not data.staging_dir.exists() or not any(data.staging_dir.iterdir())
    leftovers = [p for p in data.snapshot_dir(rec.slug).iterdir()
                 if "tmp" in p.name or p.name.startswith(".")]
    assert leftovers == []


def _run(tmp_path: Path, tiny_models: Any, kills: int, seed: int) -> None:
    articles = list(tiny_models.corpus[:240])
    src = write_jsonl(tmp_path / "corpus.jsonl", articles)
    ref_root = tmp_path / "uninterrupted"
    ref_data, ref_catalog = open_data(ref_root)
    rec = import_snapshot(ref_data, ref_catalog, src, name=NAME,
                          encoder=str(tiny_models.ctx_encoder), batch_size=BATCH)
    total = rec.passages
    assert total >= 200  # a few hundred passages: many batches to land in

    root = tmp_path / "killed"
    log = _kill_loop(root, src, tiny_models.ctx_encoder, total, kills, seed)
    assert len(log.delivered) >= min(kills, 3), log
    if not _ready(root):  # the last kill may have come after the import completed
        proc = _start(root, src, tiny_models.ctx_encoder)
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err.decode()[-3000:]
    else:
        # The user's next command tidies what a kill after the catalog's "ready" left (its
        # job still "running"), as the app's start does.
        _next_start(root)

    _assert_clean(root)
    got, want = _snapshot(root), _snapshot(ref_root)
    assert got[0] == want[0]
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-5)
    assert got[2].passages == want[2].passages == total


def test_import_killed_at_5_random_points_resumes_to_the_same_snapshot(
        tmp_path: Path, tiny_models: Any) -> None:
    _run(tmp_path, tiny_models, kills=5, seed=17)


@pytest.mark.slow
def test_import_killed_at_20_random_points_resumes_to_the_same_snapshot(
        tmp_path: Path, tiny_models: Any) -> None:
    _run(tmp_path, tiny_models, kills=20, seed=1717)


def test_a_temporary_file_of_a_killed_state_write_stays_out_of_the_snapshot(
        tmp_path: Path, tiny_models: Any) -> None:
    """Found by the loop: a kill inside build.json's atomic write leaves its temporary file in
    the staging folder, which the resumed import renamed into the snapshot with the rest."""
    src = write_jsonl(tmp_path / "corpus.jsonl", list(tiny_models.corpus[:40]))
    data, catalog = open_data(tmp_path / "data")
    cancel = CancelToken()

    def stop_after_some(update: ProgressUpdate) -> None:
        if update.message.startswith("encoding") and update.done >= 8:
            cancel.cancel()

    with pytest.raises(Cancelled):
        import_snapshot(data, catalog, src, name=NAME, encoder=str(tiny_models.ctx_encoder),
                        batch_size=BATCH, progress=stop_after_some, cancel=cancel)
    staging = data.staging_dir / NAME
    stray = staging / ".build.json.tmp-4242-139937808714624-19"  # what the kill left
    stray.write_text('{"encoded": 4')
    import_snapshot(data, catalog, src, name=NAME, encoder=str(tiny_models.ctx_encoder),
                    batch_size=BATCH)
    _assert_clean(tmp_path / "data")
