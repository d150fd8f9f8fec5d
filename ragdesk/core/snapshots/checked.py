"""``verified.json``: which files of a snapshot matched the manifest's checksums, and the stat
stamp each had then.

Hashing every file at every open would make each ``ask`` of a 65 GB snapshot take minutes;
never hashing let flipped bytes in ``embeddings.npy`` or ``passages.sqlite`` answer silently
until ``index verify``. So the first open (in any process) hashes the files it
reads once and records, for each that matched, its size, mtime, ctime and inode; later opens
compare those (one ``stat`` per file) and hash again only the files whose stamp changed. A
write through the file system changes mtime and ctime, a copy or a replacement the inode, so
such damage is refused at the next open. Bytes that rot below the file system with every
stamp kept are found only by ``ragdesk index verify``, which hashes every file and refreshes
the stamps (dropping those of the files that fail).

It sits beside the manifest, like ``calibration.json``, and is not among its checksummed
files: it says what was checked, not what the snapshot holds. A folder that cannot be written
(read-only media) is hashed at every open instead.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path

from ragdesk.core.atomic import remove_temp_files, write_json_atomic
from ragdesk.core.errors import CorruptSnapshotError, RagdeskError
from ragdesk.core.progress import CancelToken, Progress, ProgressCallback
from ragdesk.core.safe_json import as_int
from ragdesk.core.snapshots.manifest import EMBEDDINGS_FILE, Manifest, sha256_file
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE

log = logging.getLogger(__name__)

VERIFIED_FILE = "verified.json"
# A file modified this recently could be written again within the same timestamp tick
# without its stamp changing (git's "racily clean" entries), so it gets no stamp yet.
RACY_NS = 2_000_000_000
# A temporary verified.json this old belongs to a writer that was killed: a live one
# renames it within milliseconds.
STALE_TEMP_S = 3600.0
CHECKING = "checking the snapshot's checksums (first use)"


def stamp_of(st: os.stat_result) -> dict[str, int]:
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns,
            "ino": st.st_ino}


def read_verified(folder: Path) -> dict[str, dict[str, object]]:
    """The stamps recorded in ``folder`` (none when the file is missing or damaged: a
    damaged record only costs hashing again)."""
    try:
        d = json.loads((folder / VERIFIED_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.info("ignoring %s (%s)", folder / VERIFIED_FILE, exc)
        return {}
    files = d.get("files") if isinstance(d, dict) else None
    if not isinstance(files, dict):
        return {}
    return {str(k): dict(v) for k, v in files.items() if isinstance(v, dict)}


def update_verified(folder: Path, manifest: Manifest, passed: Mapping[str, os.stat_result],
                    failed: list[str]) -> None:
    """Record the files that matched (with the stamp taken before hashing them, so a write
    during the hash shows as a change) and forget the ones that did not."""
    seen = read_verified(folder)
    before = dict(seen)
    now = time.time_ns()
    for name, st in passed.items():
        if now - st.st_mtime_ns >= RACY_NS:
            seen[name] = {**stamp_of(st), "sha256": manifest.files[name]["sha256"]}
    for name in failed:
        seen.pop(name, None)
    if seen == before:
        return
    remove_temp_files(folder, lambda n: n == VERIFIED_FILE, min_age_s=STALE_TEMP_S)
    try:
        write_json_atomic(folder / VERIFIED_FILE, {"files": seen})
    except (OSError, RagdeskError) as exc:
        log.warning("could not record the checked checksums in %s (%s); they will be "
                    "checked again at the next open", folder, exc)


def unchanged(stamp: dict[str, object] | None, st: os.stat_result,
              meta: Mapping[str, object]) -> bool:
    """Whether a file with stat ``st`` is the one that matched ``meta``'s checksum."""
    return stamp is not None and stamp.get("sha256") == meta.get("sha256") and all(
        stamp.get(k) == v for k, v in stamp_of(st).items())


def file_problem(folder: Path, name: str, meta: Mapping[str, object], progress: Progress | None,
                 cancel: CancelToken | None) -> str | None:
    """What is wrong with the manifest's file ``name`` (None: its size and checksum match)."""
    path = folder / name
    if not path.is_file():
        return f"{name}: missing."
    size = path.stat().st_size
    if size != as_int(meta["size"]):
        if progress is not None:
            progress.update(as_int(meta["size"]))
        return f"{name}: {size:,} bytes, the manifest says {as_int(meta['size']):,}."
    digest = sha256_file(path, progress, cancel)
    if digest != meta["sha256"]:
        return (f"{name}: checksum mismatch (expected {str(meta['sha256'])[:12]}…, found "
                f"{digest[:12]}…); the file is corrupt.")
    return None


def files_read(manifest: Manifest, variant: str) -> list[str]:
    """The manifest's files that opening ``variant`` reads."""
    entry = manifest.variants.get(variant)
    wanted = {PASSAGES_FILE, EMBEDDINGS_FILE} | ({entry.file} if entry is not None else set())
    return sorted(wanted & set(manifest.files))


def check_on_open(name: str, folder: Path, manifest: Manifest, variant: str, *,
                  progress: ProgressCallback | None = None,
                  cancel: CancelToken | None = None) -> None:
    """Refuse (:class:`CorruptSnapshotError`) a snapshot whose files that ``variant`` reads
    differ from the manifest's checksums; hashes only those not seen unchanged since they
    last matched."""
    seen = read_verified(folder)
    stale: dict[str, os.stat_result] = {}
    # A missing file is damage like any other: opening it anyway ended in a raw
    # FileNotFoundError (a deleted index variant, exit 70).
    problems: dict[str, str] = {}
    for fname in files_read(manifest, variant):
        try:
            st = (folder / fname).stat()
        except OSError:
            problems[fname] = f"{fname}: missing."
            continue
        if not unchanged(seen.get(fname), st, manifest.files[fname]):
            stale[fname] = st
    if not stale and not problems:
        return
    total = sum(as_int(manifest.files[f]["size"]) for f in stale)
    prog = Progress(total, CHECKING, progress, unit="bytes")
    passed: dict[str, os.stat_result] = {}
    for fname, st in stale.items():
        problem = file_problem(folder, fname, manifest.files[fname], prog, cancel)
        if problem is not None:
            problems[fname] = problem
        else:
            passed[fname] = st
    update_verified(folder, manifest, passed, list(problems))
    if problems:
        listing = "\n  - ".join(problems.values())
        raise CorruptSnapshotError(
            f"The snapshot {name!r} is damaged:\n  - {listing}",
            f"Run `ragdesk index verify {name}` to check all of it; remove it with `ragdesk "
            f"index remove {name}` and import it again (a damaged index variant alone can be "
            "rebuilt with `ragdesk index quantize`).")
