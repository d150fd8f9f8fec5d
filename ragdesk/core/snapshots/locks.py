"""Which imports are running, here or in another process, and a per-snapshot file lock."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from ragdesk.core.catalog import Catalog, SnapshotRecord

_active_here: set[str] = set()  # snapshot names this process is importing
_active_lock = threading.Lock()


def claim(name: str) -> bool:
    with _active_lock:
        if name in _active_here:
            return False
        _active_here.add(name)
        return True


def release(name: str) -> None:
    with _active_lock:
        _active_here.discard(name)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    except OSError:
        return False
    return True


def running_import_pid(catalog: Catalog, rec: SnapshotRecord) -> int | None:
    """The pid of a live process importing ``rec``, or None when nobody is."""
    if rec.state != "importing":
        return None
    for job in catalog.list_jobs(state="running"):
        if job.snapshot_id != rec.id or job.pid is None:
            continue
        if job.pid == os.getpid():
            with _active_lock:
                if rec.name in _active_here:
                    return job.pid
            continue
        if pid_alive(job.pid):
            return job.pid
    return None


@contextlib.contextmanager
def snapshot_lock(snapshots_dir: Path, slug: str) -> Iterator[None]:
    """Serialise manifest rewrites (quantize, remove variant) across processes."""
    snapshots_dir.mkdir(parents=True, exist_ok=True)
    path = snapshots_dir / f".{slug}.lock"
    with open(path, "a+b") as fh:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks here; rewrites stay atomic.
            yield
            return
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
