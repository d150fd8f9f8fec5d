"""Resuming an import with another --batch-size left passages with all-zero vectors
(176 of 12,324 with 64 → 50) and verify said OK: batches are re-sorted by token count inside
windows of batch_size × 16, so another batch size meant other windows, and the rows the
first run had written were not the ones the resume skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ragdesk.core.errors import Cancelled
from ragdesk.core.progress import CancelToken, ProgressUpdate
from ragdesk.core.snapshots import import_snapshot, open_snapshot, verify_snapshot
from tests.core.snapshots.util import open_data, write_jsonl


def _vectors(root: Path, name: str) -> np.ndarray:
    data, catalog = open_data(root)
    index = open_snapshot(data, catalog, name)
    try:
        return np.array(index.embeddings())
    finally:
        index.close()


def _interrupted(root: Path, src: Path, encoder: str, batch_size: int, stop_at: int) -> None:
    data, catalog = open_data(root)
    cancel = CancelToken()

    def stop(update: ProgressUpdate) -> None:
        if update.message.startswith("encoding") and update.done >= stop_at:
            cancel.cancel()

    with pytest.raises(Cancelled):
        import_snapshot(data, catalog, src, name="s", encoder=encoder, batch_size=batch_size,
                        progress=stop, cancel=cancel)


@pytest.mark.parametrize(("first", "then"), [(2, 3), (3, 2), (2, 64)])
def test_resuming_with_another_batch_size_gives_the_same_vectors(
        tmp_path: Path, tiny_models: Any, first: int, then: int) -> None:
    src = write_jsonl(tmp_path / "corpus.jsonl", list(tiny_models.corpus[:80]))
    encoder = str(tiny_models.ctx_encoder)
    ref_data, ref_catalog = open_data(tmp_path / "ref")
    n = import_snapshot(ref_data, ref_catalog, src, name="s", encoder=encoder,
                        batch_size=first).passages
    assert n > first * 16 * 2  # several of the first run's windows

    root = tmp_path / "data"
    _interrupted(root, src, encoder, first, stop_at=first * 16 + 5)  # inside window 2
    data, catalog = open_data(root)
    updates: list[ProgressUpdate] = []
    import_snapshot(data, catalog, src, name="s", encoder=encoder, batch_size=then,
                    progress=updates.append)
    assert any("resumed" in u.message for u in updates)  # the finished batches were kept
    got = _vectors(root, "s")
    assert not (np.abs(got).sum(1) == 0).any()
    np.testing.assert_allclose(got, _vectors(tmp_path / "ref", "s"), rtol=1e-5, atol=1e-5)
    assert verify_snapshot(data, catalog, "s").ok
