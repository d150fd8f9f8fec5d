"""A folder re-import killed after the first rename of its swap left the snapshot
folder missing (``ask`` and ``verify`` failed) until the same import was run again.

SIGKILL at each step of the swap (old version out, new version in, the catalog update, the
old version dropped): the next command finds a whole snapshot, the old version or the new,
with a catalog that matches it, and the import run again finishes.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

# The child dies at one chosen point of the swap, as a kill there would leave it.
_CHILD = """
import os, shutil, signal, sys
from pathlib import Path

point = sys.argv[1]
real_rename, real_rmtree = os.rename, shutil.rmtree

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def rename(src, dst, *a, **k):
    real_rename(src, dst, *a, **k)
    s, d = Path(src), Path(dst)
    if point == "after-old-out" and d.name.startswith(".docs-old-"):
        die()
    if point == "after-new-in" and s.name == "build" and d.parent.name == "snapshots":
        die()

def rmtree(path, *a, **k):
    if point == "before-drop-old" and Path(path).name.startswith(".docs-old-") \\
            and Path(path).exists():
        die()
    return real_rmtree(path, *a, **k)

os.rename, shutil.rmtree = rename, rmtree

from ragdesk.core.documents import importer

real_mark_ready = importer.mark_ready

def mark_ready(catalog, name, manifest):
    if point == "in-catalog-update":
        die()
    return real_mark_ready(catalog, name, manifest)

importer.mark_ready = mark_ready
from ragdesk.cli.main import main
sys.exit(main(sys.argv[2:]))
"""

POINTS = ["after-old-out", "after-new-in", "in-catalog-update", "before-drop-old"]
OLD = {"a.md", "b.md"}
NEW = {"a.md", "b.md", "c.md"}


def _folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "a.md").write_text("# A\n\nThe harbour opens at six.\n", encoding="utf-8")
    (root / "b.md").write_text("# B\n\nThe ferry leaves at noon.\n", encoding="utf-8")
    return root


def _files(cli, data_dir: Path) -> set[str]:  # type: ignore[no-untyped-def]
    """The files of the snapshot the next commands see, checked whole."""
    code, out, err = cli("index", "list", "--json")
    assert code == 0, err
    [snap] = json.loads(out)
    assert snap["name"] == "docs" and snap["state"] == "ready", snap
    code, _, err = cli("index", "verify", "docs")
    assert code == 0, err
    from ragdesk.core.documents import read_folder_record

    [folder] = [p.parent for p in (data_dir / "snapshots").glob("*/documents.json")]
    record = read_folder_record(folder)
    assert record is not None
    assert snap["passages"] == sum(f.count for f in record.files.values())
    return set(record.files)


@pytest.mark.parametrize("point", POINTS)
def test_kill_during_the_swap_leaves_a_whole_snapshot(cli, tiny_models: Any, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                      data_dir: Path, point: str) -> None:
    folder = _folder(tmp_path / "docs")
    argv = ["--data-dir", str(data_dir), "index", "import", str(folder), "--format", "docs",
            "--name", "docs", "--encoder", str(tiny_models.st_encoder)]
    code, _, err = cli(*argv[2:])
    assert code == 0, err
    (folder / "c.md").write_text("# C\n\nThe lighthouse is white.\n", encoding="utf-8")

    proc = subprocess.run([sys.executable, "-c", _CHILD, point, *argv], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    if point == "after-old-out":
        assert not any((data_dir / "snapshots").glob("*/manifest.json"))  # the bad moment

    assert _files(cli, data_dir) in (OLD, NEW)  # the next command recovers: old or new, never none
    code, _, err = cli(*argv[2:])  # and the import run again finishes
    assert code == 0, err
    assert _files(cli, data_dir) == NEW
    assert not list((data_dir / "staging").glob(".docs-old-*"))
