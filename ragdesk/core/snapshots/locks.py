"""Which imports are running, here or in another process, and a per-snapshot file lock.

Both are file locks (the ``filelock`` package: ``fcntl.flock`` on POSIX, ``msvcrt.locking``
on Windows), which the operating system drops when the holder exits, however it exits. So a
held import lock *is* a live importer: nobody probes process ids (``os.kill(pid, 0)`` sends
Ctrl-C to a process group on Windows, and a recycled pid looks alive). Lock files are never
deleted: deleting one that a process holds or waits for would let a third process take a
fresh lock beside it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

from ragdesk.core.catalog import Catalog, SnapshotRecord
from ragdesk.core.errors import AlreadyExistsError
from ragdesk.core.paths import DataDir

PROBE_GRACE_S = 2.0


def locks_dir(data: DataDir) -> Path:
    # A folder of their own: lock files stay forever (see above), and staging/ and models/
    # are expected to hold nothing but work in progress and results.
    return data.root / "locks"


def import_lock_path(data: DataDir, slug: str) -> Path:
    return locks_dir(data) / f"import-{slug}.lock"


def import_running(data: DataDir, slug: str) -> bool:
    """Whether an import of the snapshot folder ``slug`` is running, here or elsewhere."""
    path = import_lock_path(data, slug)
    if not path.exists():
        return False
    probe = FileLock(str(path))
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return True
    probe.release()
    return False


def running_imports(data: DataDir) -> list[str]:
    """The folder names (slugs) of the imports running now, here or in another process."""
    folder = locks_dir(data)
    if not folder.is_dir():
        return []
    slugs = sorted(p.name[len("import-"):-len(".lock")] for p in folder.glob("import-*.lock"))
    return [slug for slug in slugs if import_running(data, slug)]


def importer_pid(catalog: Catalog, rec: SnapshotRecord) -> int | None:
    """The process id the catalog records for a running import of ``rec`` (for messages;
    whether it runs is :func:`import_running`'s answer)."""
    pids = [j.pid for j in catalog.list_jobs(state="running")
            if j.snapshot_id == rec.id and j.pid is not None]
    return pids[-1] if pids else None


def busy_message(catalog: Catalog, rec: SnapshotRecord) -> str:
    pid = importer_pid(catalog, rec)
    by = f" by process {pid}" if pid is not None else ""
    return f"The snapshot {rec.name!r} is being imported{by}."


@contextlib.contextmanager
def hold_import(data: DataDir, name: str, slug: str) -> Iterator[None]:
    """Held for the whole of an import of ``slug``; refuses at once when another import
    (in this process or another) holds it."""
    path = import_lock_path(data, slug)
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        # Not 0: import_running() takes the lock for an instant to probe it.
        lock.acquire(timeout=PROBE_GRACE_S)
    except Timeout:
        raise AlreadyExistsError(f"The snapshot {name!r} is already being imported.",
                                 "Wait for that import to finish (or cancel it); run this one "
                                 "again if it did not finish.") from None
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def try_hold_import(data: DataDir, slug: str) -> Iterator[bool]:
    """The import lock of ``slug`` if nobody holds it (True), else nothing (False): for
    recovery, which must never finish what a live import is in the middle of."""
    with try_hold(import_lock_path(data, slug)) as mine:
        yield mine


@contextlib.contextmanager
def try_hold(path: Path) -> Iterator[bool]:
    """The file lock at ``path`` if nobody holds it (True), else nothing (False), without
    waiting: recovery leaves alone whatever a live process holds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


@contextlib.contextmanager
def snapshot_lock(snapshots_dir: Path, slug: str) -> Iterator[None]:
    """Serialise manifest rewrites (quantize, remove variant) across processes."""
    snapshots_dir.mkdir(parents=True, exist_ok=True)
    with FileLock(str(snapshots_dir / f".{slug}.lock")):
        yield
