"""Putting a finished folder snapshot in place, first time or over its previous version.

A re-import swaps folders with two renames (old out, new in) while the catalog row stays
``ready``; whoever holds the old ``SnapshotIndex`` keeps reading its open files. The work
lives in ``staging/.docs-<slug>/`` and the old version waits in ``staging/.docs-old-<slug>/``:
dot-names, which the data directory's recovery leaves alone (it would delete a staging
folder of a ready snapshot). A crash between the two renames is finished by the next import
of the folder (:func:`finish_interrupted_swap`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ragdesk.core.atomic import fsync_dir
from ragdesk.core.errors import CatalogError, RagdeskError
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots.manifest import MANIFEST_FILE

WORK_PREFIX = ".docs-"
OLD_PREFIX = ".docs-old-"
BUILD_DIRNAME = "build"


class SnapshotInUseError(RagdeskError):
    """Windows refuses to rename a folder with open files; the finished work is kept."""


def work_dir(data: DataDir, slug: str) -> Path:
    return data.staging_dir / f"{WORK_PREFIX}{slug}"


def old_dir(data: DataDir, slug: str) -> Path:
    return data.staging_dir / f"{OLD_PREFIX}{slug}"


def finish_interrupted_swap(data: DataDir, slug: str) -> None:
    """Roll a swap cut short between its renames forward (the new version is complete) or
    back (it is not), and drop an old version left after a completed swap."""
    final, old = data.snapshot_dir(slug), old_dir(data, slug)
    if not old.exists():
        return
    if not final.exists():
        build = work_dir(data, slug) / BUILD_DIRNAME
        os.rename(build if (build / MANIFEST_FILE).exists() else old, final)
        fsync_dir(data.snapshots_dir)
    shutil.rmtree(old, ignore_errors=True)


def _rename(src: Path, dst: Path) -> None:
    try:
        os.rename(src, dst)
    except PermissionError as exc:
        raise SnapshotInUseError(
            f"The snapshot folder could not be replaced ({exc}).",
            "Close what reads the snapshot and import the folder again; the finished work is "
            "kept, so it only swaps the folders.") from exc


def install_new(data: DataDir, build: Path, slug: str) -> None:
    final = data.snapshot_dir(slug)
    if final.exists():
        raise CatalogError(f"The folder {final} already exists but the catalog does not list a "
                           "ready snapshot there.",
                           "Move it aside (or remove the snapshot) and import again.")
    data.snapshots_dir.mkdir(parents=True, exist_ok=True)
    _rename(build, final)
    fsync_dir(data.snapshots_dir)


def replace(data: DataDir, build: Path, slug: str) -> None:
    final, old = data.snapshot_dir(slug), old_dir(data, slug)
    shutil.rmtree(old, ignore_errors=True)
    _rename(final, old)
    try:
        _rename(build, final)
    except BaseException:
        os.rename(old, final)  # put the previous version back; it is still complete
        raise
    fsync_dir(data.snapshots_dir)
    fsync_dir(data.staging_dir)
    shutil.rmtree(old, ignore_errors=True)
