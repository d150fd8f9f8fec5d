"""release_pages: mapped rows leave the resident set, and no written data is lost."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ragdesk.core.pages import release_pages
from ragdesk.core.snapshots import faiss_variants as fv

STATUS = Path("/proc/self/status")
pytestmark = pytest.mark.skipif(not STATUS.exists(), reason="needs /proc for the RSS")


def rss_file() -> int:
    line = next(ln for ln in STATUS.read_text().splitlines() if ln.startswith("RssFile:"))
    return int(line.split()[1]) << 10


def test_reading_rows_releases_the_mapped_pages(tmp_path: Path) -> None:
    vecs = np.random.default_rng(0).standard_normal((40_000, 384)).astype(np.float16)
    np.save(tmp_path / "e.npy", vecs)
    emb = np.load(tmp_path / "e.npy", mmap_mode="r")
    before = rss_file()
    rows = np.concatenate([fv._rows(emb, s, s + 4096, release=True)
                           for s in range(0, len(emb), 4096)])
    assert rss_file() - before < vecs.nbytes // 10  # 30 MB read, almost none left mapped
    np.testing.assert_array_equal(rows, vecs.astype(np.float32))
    np.asarray(emb).sum()  # the mapping still reads back
    assert rss_file() - before > vecs.nbytes // 2
    release_pages(emb)
    assert rss_file() - before < vecs.nbytes // 10


def test_written_rows_survive_their_release(tmp_path: Path) -> None:
    path = tmp_path / "w.npy"
    np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(20_000, 768))
    mm = np.lib.format.open_memmap(path, mode="r+")
    before = rss_file()
    vecs = np.random.default_rng(1).standard_normal((20_000, 768)).astype(np.float16)
    mm[:] = vecs
    assert rss_file() - before > vecs.nbytes // 2
    release_pages(mm)  # before any flush: the page cache holds the writes
    assert rss_file() - before < vecs.nbytes // 10
    np.testing.assert_array_equal(mm, vecs)
    mm.flush()
    del mm
    np.testing.assert_array_equal(np.load(path), vecs)


def test_a_copy_on_write_map_is_left_alone(tmp_path: Path) -> None:
    np.save(tmp_path / "c.npy", np.zeros((4096, 256), dtype=np.float32))
    cow = np.load(tmp_path / "c.npy", mmap_mode="c")
    cow[:] = 1.0
    release_pages(cow)  # would drop the private changes
    assert float(cow.min()) == 1.0
