"""Putting a re-imported folder snapshot in place over its previous version.

A first import is renamed into place as any snapshot is
(:func:`ragdesk.core.snapshots.import_job.install`). A re-import swaps folders with two
renames (old out, new in) while the catalog row stays ``ready``; whoever holds the old
``SnapshotIndex`` keeps reading its open files. Where the two versions wait, and how a swap
a kill cut short is finished, is :mod:`ragdesk.core.snapshots.folder_swap` (the data
directory's recovery does it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ragdesk.core.atomic import fsync_dir
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots.folder_swap import (
    BUILD_DIRNAME,
    OLD_PREFIX,
    WORK_PREFIX,
    old_dir,
    roll_swap,
    work_dir,
)
from ragdesk.core.snapshots.import_job import rename_folder

__all__ = ["BUILD_DIRNAME", "OLD_PREFIX", "WORK_PREFIX", "finish_interrupted_swap", "old_dir",
           "replace", "work_dir"]


def finish_interrupted_swap(data: DataDir, slug: str) -> None:
    """Roll a swap cut short between its renames forward (the new version is complete) or
    back (it is not), and drop an old version left after a completed swap (the folders
    only: ``recover`` also brings the catalog in line)."""
    if roll_swap(data, slug):
        shutil.rmtree(old_dir(data, slug), ignore_errors=True)


def replace(data: DataDir, build: Path, slug: str,
            record: Callable[[], None] | None = None) -> None:
    """Swap ``build`` in for the snapshot's folder; ``record`` (the catalog update for the
    new version) runs before the old version is dropped, so that a kill anywhere leaves an
    old version behind for ``recover`` until the catalog describes the new one."""
    final, old = data.snapshot_dir(slug), old_dir(data, slug)
    shutil.rmtree(old, ignore_errors=True)
    rename_folder(final, old)
    try:
        rename_folder(build, final)
    except BaseException:
        os.rename(old, final)  # put the previous version back; it is still complete
        raise
    fsync_dir(data.snapshots_dir)
    fsync_dir(data.staging_dir)
    if record is not None:
        record()
    shutil.rmtree(old, ignore_errors=True)
