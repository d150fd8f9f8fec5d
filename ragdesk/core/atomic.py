"""Writes that are either complete or absent after a crash."""

from __future__ import annotations

import itertools
import json
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from ragdesk.core.errors import DiskFullError, disk_full_message, is_disk_full


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_name(path: Path) -> Path:
    """A name beside ``path`` that no other writer uses: process, thread and a counter.

    A name by process id alone let two threads of one process write the same temporary
    file and rename it away under each other, losing settings writes.
    """
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{threading.get_ident()}-"
                          f"{next(_counter)}")


_counter = itertools.count()
# temp_name's pattern, and the older ".NAME.tmp-PID" one
_TEMP = re.compile(r"^\.(.+)\.tmp-\d+(-\d+-\d+)?$")


def remove_temp_files(folder: Path, of: Callable[[str], bool] | None = None, *,
                      min_age_s: float = 0.0) -> list[Path]:
    """Delete the temporary files that writers killed mid-write left in ``folder`` (their
    rename never came), or only those of the files ``of(name)`` accepts; the ones removed.

    Only for files nobody else is writing now (the caller holds their lock): a live writer's
    temporary file looks the same. Without a lock, ``min_age_s`` spares the files modified
    more recently than that (a live writer's is seconds old at most).
    """
    removed: list[Path] = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP.match(entry.name)
        if match and (of is None or of(match.group(1))) and entry.is_file() and (
                min_age_s <= 0 or _age_s(entry) >= min_age_s):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write to a temporary file beside ``path``, fsync, and rename over it."""
    write_atomic(path, lambda fh: fh.write(data))


def write_atomic(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """:func:`write_bytes_atomic` of what ``write`` writes to the file it is given (a large
    file need not be in memory at once)."""
    tmp = temp_name(path)
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if is_disk_full(exc):
            raise DiskFullError(disk_full_message(path)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_json_atomic(path: Path, obj: object) -> None:
    write_bytes_atomic(path, (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode("utf-8"))
