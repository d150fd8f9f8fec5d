"""A real `ragdesk index import` process killed with SIGKILL mid-encoding, then resumed."""

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

from ragdesk.core.errors import NotFoundError
from ragdesk.core.progress import ProgressUpdate
from ragdesk.core.snapshots import import_snapshot, open_snapshot, recover, verify_snapshot
from tests.core.snapshots.util import naive_passages, open_data, reference_dpr_ctx, write_jsonl

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")


@pytest.mark.slow
def test_sigkill_mid_encoding_then_resume(tmp_path: Path, tiny_models: Any) -> None:
    articles = list(tiny_models.corpus[:400])
    expected = naive_passages(articles)
    src = write_jsonl(tmp_path / "corpus.jsonl", articles)
    root = tmp_path / "data"
    state_file = root / "staging" / "big" / "build.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ragdesk", "--data-dir", str(root), "index", "import", str(src),
         "--name", "big", "--encoder", str(tiny_models.ctx_encoder), "--batch-size", "2"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    committed = 0
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail("the import ended before it could be killed: "
                            + proc.stderr.read().decode()[-2000:])  # type: ignore[union-attr]
            try:
                committed = int(json.loads(state_file.read_text()).get("encoded", 0))
            except (OSError, ValueError):
                committed = 0
            if committed >= 40:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the import did not commit any batch in time")
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL

    data, catalog = open_data(root)
    state = json.loads(state_file.read_text())
    assert 0 < state["encoded"] < state["passages"] == len(expected)
    # Killed: no snapshot is visible, and the catalog only knows an unfinished import.
    assert catalog.get_snapshot("big").state == "importing"
    assert not data.snapshot_dir("big").exists()
    with pytest.raises(NotFoundError):
        open_snapshot(data, catalog, "big")
    # The next start marks it interrupted and keeps its staging folder for the resume.
    report = recover(data, catalog)
    assert report.marked_failed == ["big"]
    assert state_file.exists()

    updates: list[ProgressUpdate] = []
    rec = import_snapshot(data, catalog, src, name="big", encoder=str(tiny_models.ctx_encoder),
                          batch_size=2, progress=updates.append)
    encoding = [u for u in updates if u.message.startswith("encoding")]
    assert encoding[0].done == state["encoded"]  # resumed from the last committed batch
    assert "resumed" in encoding[0].message
    assert not any(u.message.startswith("reading") for u in updates)
    assert rec.state == "ready" and rec.passages == len(expected)

    index = open_snapshot(data, catalog, "big")
    emb = np.asarray(index.embeddings())
    got = index.get_passages(list(range(len(expected))))
    index.close()
    assert [(p.title, p.text) for p in got] == expected
    # Rows from before and after the kill are what transformers computes.
    ref = reference_dpr_ctx(tiny_models.ctx_encoder, expected)
    np.testing.assert_allclose(emb, ref, rtol=1e-4, atol=1e-4)
    assert verify_snapshot(data, catalog, "big").ok
    assert not any(data.staging_dir.iterdir())
