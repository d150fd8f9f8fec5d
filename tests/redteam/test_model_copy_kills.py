"""``models import --copy --replace`` killed just before the pack was registered
left the pack broken ("[not installed]") with the old copy in ``models/.cp.old-*``, which
nothing restored (the next import of that name deleted it).

SIGKILL at each step of the replacement: the next command that reads packs (``models
list``) finds the pack installed, on the old copy or the new one as the catalog says, and
no leftovers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")

_CHILD = """
import os, shutil, signal, sys
from pathlib import Path

point = sys.argv[1]
real_rename, real_replace, real_rmtree = os.rename, os.replace, shutil.rmtree

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def rename(src, dst, *a, **k):
    if point == "old-set-aside" and Path(src).name.startswith(".p.staging-") \\
            and Path(dst).name == "p":
        die()  # the old copy is aside, the new one not yet in place
    return real_rename(src, dst, *a, **k)

def replace(src, dst, *a, **k):
    if point == "old-made" and Path(dst).name.startswith(".p.old-"):
        die()  # the old copy's folder is made (empty), the old copy not yet moved into it
    return real_replace(src, dst, *a, **k)

def rmtree(path, *a, **k):
    if point == "after-register" and Path(path).name.startswith(".p.old-"):
        die()
    return real_rmtree(path, *a, **k)

os.rename, os.replace, shutil.rmtree = rename, replace, rmtree

from ragdesk.core.models import imports

real_register = imports._register

def register(*a, **k):
    if point == "before-register":
        die()
    return real_register(*a, **k)

imports._register = register
from ragdesk.cli.main import main
sys.exit(main(sys.argv[2:]))
"""

# point -> the copy the pack must use afterwards
POINTS = {"old-made": "rag", "old-set-aside": "rag", "before-register": "rag",
          "after-register": "rag2"}


def _packs(cli) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    code, out, err = cli("models", "list", "--json")
    assert code == 0, err
    return {p["name"]: p for p in json.loads(out)}


def _hidden(models: Path) -> list[str]:
    return sorted(p.name for p in models.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("point", sorted(POINTS))
def test_kill_during_copy_replace_keeps_a_working_pack(cli, tiny_models: Any, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                       data_dir: Path, point: str) -> None:
    old_src, new_src = tmp_path / "rag", tmp_path / "rag2"
    shutil.copytree(tiny_models.rag_sequence, old_src)
    shutil.copytree(tiny_models.rag_sequence, new_src)
    code, _, err = cli("models", "import", str(old_src), "--name", "p", "--copy")
    assert code == 0, err
    models = data_dir / "models"

    argv = ["--data-dir", str(data_dir), "models", "import", str(new_src), "--name", "p",
            "--copy", "--replace"]
    proc = subprocess.run([sys.executable, "-c", _CHILD, point, *argv], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert [n for n in _hidden(models) if ".old-" in n]  # the kill left the old copy aside

    pack = _packs(cli)["p"]  # the next command that reads packs puts it right
    want = models / "p" / POINTS[point]
    assert pack["installed"], pack
    assert pack["question_encoder"] == str(want)
    assert (want / "config.json").is_file()
    assert _hidden(models) == []

    code, _, err = cli("models", "import", str(new_src), "--name", "p", "--copy", "--replace")
    assert code == 0, err
    assert _packs(cli)["p"]["question_encoder"] == str(models / "p" / "rag2")
