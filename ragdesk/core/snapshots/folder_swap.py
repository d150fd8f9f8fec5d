"""Where a re-imported folder snapshot's swap keeps its two versions, and rolling a swap a
kill cut short back to one.

A re-import swaps folders with two renames (old out, new in) while the catalog row stays
``ready``. The work lives in ``staging/.docs-<slug>/`` and the old version waits in
``staging/.docs-old-<slug>/`` until the catalog describes the new one: dot-names, which the
data directory's recovery does not delete as staging leftovers. While the old version is
there, the swap is unfinished, and :func:`ragdesk.core.snapshots.lifecycle.recover` (run by
most commands) finishes it; before, the folder stayed missing until the same import ran
again.
"""

from __future__ import annotations

import os
from pathlib import Path

from ragdesk.core.atomic import fsync_dir
from ragdesk.core.paths import DataDir
from ragdesk.core.snapshots.manifest import MANIFEST_FILE

WORK_PREFIX = ".docs-"
OLD_PREFIX = ".docs-old-"
BUILD_DIRNAME = "build"


def work_dir(data: DataDir, slug: str) -> Path:
    return data.staging_dir / f"{WORK_PREFIX}{slug}"


def old_dir(data: DataDir, slug: str) -> Path:
    return data.staging_dir / f"{OLD_PREFIX}{slug}"


def roll_swap(data: DataDir, slug: str) -> bool:
    """Put a complete version in place after a swap cut short between its renames: the new
    one when it was finished, else the old one. Whether a swap was pending (its old version
    is still there, for the caller to drop once the catalog matches the folder)."""
    final, old = data.snapshot_dir(slug), old_dir(data, slug)
    if not old.exists():
        return False
    if not final.exists():
        build = work_dir(data, slug) / BUILD_DIRNAME
        os.rename(build if (build / MANIFEST_FILE).exists() else old, final)
        fsync_dir(data.snapshots_dir)
    return True
