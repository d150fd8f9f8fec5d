"""Crash recovery of the data directory, and removal."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragdesk.core.catalog import Catalog, SnapshotState
from ragdesk.core.errors import AlreadyExistsError, CatalogError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots import (
    SnapshotLibrary,
    import_snapshot,
    open_snapshot,
    recover,
    remove_snapshot,
)
from ragdesk.core.snapshots.locks import import_lock_path
from tests.core.snapshots.util import open_data, write_jsonl


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


@pytest.fixture()
def one(tmp_path: Path, dpr_ctx: Any) -> tuple[DataDir, Catalog, Path]:
    data, catalog = open_data(tmp_path / "data")
    src = write_jsonl(tmp_path / "s.jsonl", [(f"t{i}", f"text number {i}") for i in range(12)])
    import_snapshot(data, catalog, src, name="One", encoder=dpr_ctx)
    return data, catalog, src


def test_stale_staging_is_cleaned_on_next_start(one: tuple[DataDir, Catalog, Path]) -> None:
    data, catalog, _ = one
    stale = data.staging_dir / "ghost"
    (stale / "sub").mkdir(parents=True)
    (stale / "embeddings.npy").write_bytes(b"half a file")
    leftover_of_ready = data.staging_dir / "one"  # the ready snapshot's slug
    leftover_of_ready.mkdir()
    SnapshotLibrary(data, catalog).close()  # what the app does when it starts
    assert not stale.exists() and not leftover_of_ready.exists()
    assert catalog.get_snapshot("One").state == "ready"


def test_kill_between_rename_and_catalog_update_completes(one: tuple[DataDir, Catalog, Path]
                                                          ) -> None:
    data, catalog, _ = one
    catalog.update_snapshot("One", state=SnapshotState.IMPORTING)
    catalog.create_job("import", "One", pid=dead_pid())
    report = recover(data, catalog)
    assert report.completed == ["One"]
    rec = catalog.get_snapshot("One")
    assert rec.state == "ready" and rec.passages == 12
    assert [j.state for j in catalog.list_jobs()][-1] == "interrupted"


def test_live_import_is_left_alone(one: tuple[DataDir, Catalog, Path], tmp_path: Path,
                                   dpr_ctx: Any) -> None:
    data, catalog, src = one
    # A live importer is one that holds the import lock (no process probing).
    lock = import_lock_path(data, "busy")
    lock.parent.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from filelock import FileLock; "
         "lock = FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True); "
         "time.sleep(60)",
         str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline().strip() == "held"
        catalog.add_snapshot("Busy", "snapshots/busy", state=SnapshotState.IMPORTING)
        catalog.create_job("import", "Busy", pid=sleeper.pid)
        (data.staging_dir / "busy").mkdir()
        recover(data, catalog)
        assert catalog.get_snapshot("Busy").state == "importing"
        assert (data.staging_dir / "busy").exists()
        with pytest.raises(CatalogError, match=f"process {sleeper.pid}"):
            remove_snapshot(data, catalog, "Busy")
        with pytest.raises(AlreadyExistsError, match="being imported"):
            import_snapshot(data, catalog, src, name="Busy", encoder=dpr_ctx)
    finally:
        sleeper.kill()
        sleeper.wait()
    recover(data, catalog)
    assert catalog.get_snapshot("Busy").state == "failed"


def test_interrupted_removal_is_finished(one: tuple[DataDir, Catalog, Path]) -> None:
    data, catalog, _ = one
    # The removal renamed the folder away, then the process died before the catalog update.
    data.snapshot_dir("one").rename(data.staging_dir / ".remove-one")
    recover(data, catalog)
    assert catalog.find_snapshot("One") is None
    assert catalog.active_snapshot() is None
    assert not any(data.staging_dir.iterdir())


def test_snapshots_survive_a_replaced_catalog(one: tuple[DataDir, Catalog, Path]) -> None:
    data, catalog, _ = one
    catalog.close()
    shutil.move(data.catalog_path, data.root / "catalog.broken")
    fresh = Catalog(data.catalog_path)
    report = recover(data, fresh)
    assert report.adopted == ["One"]
    rec = fresh.get_snapshot("One")
    assert rec.state == "ready" and rec.passages == 12 and rec.encoder_family == "dpr"
    assert [v.variant for v in rec.variants] == ["flat"]
    index = open_snapshot(data, fresh, "One")
    assert index.get_passages([3])[0].text == "text number 3"
    index.close()


def test_remove_deletes_folder_row_and_active(one: tuple[DataDir, Catalog, Path]) -> None:
    data, catalog, _ = one
    assert catalog.active_snapshot() == "One"
    remove_snapshot(data, catalog, "One")
    assert catalog.find_snapshot("One") is None
    assert catalog.active_snapshot() is None
    assert not data.snapshot_dir("one").exists()
    assert list(data.snapshots_dir.iterdir()) == []


def test_no_active_snapshot_says_when_one_is_being_imported(tmp_path: Path) -> None:
    """In the first seconds of the starter's setup (another process) nothing is active yet:
    the error says an import is running instead of sending the user to set up the starter."""
    from ragdesk.core.errors import NoSnapshotError
    from ragdesk.core.snapshots import open_snapshot
    from ragdesk.core.snapshots.index import open_searchable

    data, catalog = open_data(tmp_path)
    with pytest.raises(NoSnapshotError, match=r"^No snapshot is active\.$"):
        open_snapshot(data, catalog)
    lock = import_lock_path(data, "vital-articles")
    lock.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from filelock import FileLock; "
         "lock = FileLock(sys.argv[1]); lock.acquire(); print('held', flush=True); "
         "time.sleep(60)", str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for opener in (open_snapshot, open_searchable):
            with pytest.raises(NoSnapshotError, match="'vital-articles' is being imported") as e:
                opener(data, catalog)
            assert "Ask again in a few seconds" in e.value.hint
            assert "setup-starter" not in e.value.hint
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(NoSnapshotError, match=r"^No snapshot is active\.$"):
        open_snapshot(data, catalog)  # the lock file stays; nobody holds it
