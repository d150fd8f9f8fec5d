"""The folders ``models import --copy`` leaves between its steps, and putting them right.

A copy is staged in ``models/.NAME.staging-*``; with ``--replace`` the old copy is set
aside in ``models/.NAME.old-TOKEN``, the new one renamed into ``models/NAME``, and the pack
registered with ``copy_token: TOKEN`` in its details, in one catalog transaction. So after a
kill at any point, the folders and the catalog say which copy the registration uses: the
token registered means the new copy (the old one is dropped); any other registration means
the old copy, which is put back. Every command that reads packs settles these (under the
pack's lock, never while an import of that name runs); before, only a later import of the
same name looked, and it deleted the old copy the registration still used.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ragdesk.core.catalog import Catalog
    from ragdesk.core.paths import DataDir

log = logging.getLogger(__name__)

OLD = "old"
STAGING = "staging"


def leftovers(models_dir: Path, name: str, kind: str) -> list[Path]:
    return sorted(models_dir.glob(f".{name}.{kind}-*"))


def token_of(old: Path, name: str) -> str:
    return old.name.removeprefix(f".{name}.{OLD}-")


def pack_lock_path(data: DataDir, name: str) -> Path:
    lock_dir = data.root / "locks"  # beside the import locks (core.snapshots.locks)
    lock_dir.mkdir(parents=True, exist_ok=True)
    return lock_dir / f"pack-{name}.lock"


def _registered_token(catalog: Catalog, name: str) -> str | None:
    for rec in catalog.list_model_packs():
        if rec.name == name:
            token = (rec.details or {}).get("copy_token")
            return None if token is None else str(token)
    return None


def put_back(models_dir: Path, name: str, old: Path) -> None:
    """The old copy back in ``models/NAME``; the new one (if in place) goes aside first, as
    a staging leftover, so that a kill in between still leaves a copy to restore. An old
    folder that is still empty was made but never given the old copy (the import stopped
    between the two), which is still in ``models/NAME``: only the empty folder goes."""
    dest = models_dir / name
    if not any(old.iterdir()):
        old.rmdir()
        return
    if dest.exists():
        os.rename(dest, tempfile.mkdtemp(prefix=f".{name}.{STAGING}-", dir=models_dir))
    os.rename(old, dest)
    log.warning("put back the copy %s of the pack %s after an interrupted import", dest, name)


def settle(data: DataDir, catalog: Catalog, name: str) -> None:
    """Finish what a killed ``--copy`` of ``name`` left; the caller holds the pack's lock."""
    models_dir = data.models_dir
    aside = leftovers(models_dir, name, OLD)
    if aside:
        old = aside.pop()
        if _registered_token(catalog, name) != token_of(old, name) \
                or not (models_dir / name).exists():
            put_back(models_dir, name, old)
        else:
            aside.append(old)  # the new copy is registered: the old one is not used
    for d in (*leftovers(models_dir, name, STAGING), *aside):
        shutil.rmtree(d, ignore_errors=True)


def settle_all(data: DataDir, catalog: Catalog) -> None:
    """:func:`settle` every pack with leftovers whose import is not running (cheap when
    there are none: one directory listing)."""
    from ragdesk.core.snapshots.locks import try_hold

    models_dir = data.models_dir
    if not models_dir.is_dir():
        return
    names = {p.name[1:].rsplit(f".{kind}-", 1)[0] for kind in (OLD, STAGING)
             for p in models_dir.glob(f".*.{kind}-*")}
    for name in sorted(names):
        with try_hold(pack_lock_path(data, name)) as mine:
            if mine:
                try:
                    settle(data, catalog, name)
                except OSError as exc:
                    log.warning("could not tidy the copies of the pack %s: %s", name, exc)
