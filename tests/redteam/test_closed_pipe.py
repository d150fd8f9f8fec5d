"""A reader that stops reading (``| head -1``, ``| true``) made ``index list
--json`` exit 1 with a doubled BrokenPipeError traceback, and ``index list`` and ``models
list`` exit 70. They must end quietly with exit 0, as ``ls`` and ``git`` do. JSON to a
pipe is one line, so ``| head -1`` gets the whole document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX pipes")

COMMANDS = [("index", "list", "--json"), ("index", "list"), ("models", "list"),
            ("models", "list", "--json")]


def _argv(data: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "ragdesk", "--data-dir", str(data), *args]


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_a_closed_pipe_ends_quietly(tmp_path: Path, args: tuple[str, ...]) -> None:
    # The read end is closed before ragdesk writes anything: every write gets EPIPE.
    proc = subprocess.Popen(_argv(tmp_path / "data", *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err and "error" not in err, err


def test_head_reads_the_whole_json_document(tmp_path: Path) -> None:
    proc = subprocess.run(f"{' '.join(_argv(tmp_path / 'data', 'models', 'list', '--json'))}"
                          " | head -1", shell=True, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    packs = json.loads(proc.stdout)  # one line holds the whole document
    assert isinstance(packs, list) and packs
    assert proc.stdout.count("\n") == 1
