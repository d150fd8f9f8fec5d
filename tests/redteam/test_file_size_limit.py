"""A file-size limit during an import (``ulimit -f``, SIGXFSZ ignored, as Python
does) ended in exit 70 "disk I/O error": SQLite reports the limit that way. It is the
disk-full error, with a message that names the limit."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragdesk.core.errors import is_disk_full

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")


def _limited(limit: int) -> None:
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_import_past_the_file_size_limit(tiny_models, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "big.jsonl"
    with open(src, "w", encoding="utf-8") as fh:
        for i in range(3000):
            fh.write(json.dumps({"title": f"t{i}", "text": " ".join(f"w{i}x{j}" for j in
                                                                    range(120))}) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "ragdesk", "--data-dir", str(tmp_path / "data"), "index",
         "import", str(src), "--name", "big", "--encoder", str(tiny_models.st_encoder)],
        capture_output=True, text=True, timeout=300, preexec_fn=lambda: _limited(2 << 20))
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "internal error" not in proc.stderr and "disk I/O error" not in proc.stderr
    assert "ran out of room" in proc.stderr and "ulimit -f" in proc.stderr, proc.stderr


def test_efbig_is_a_full_disk() -> None:
    assert is_disk_full(OSError(errno.EFBIG, "File too large"))
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert not is_disk_full(OSError(errno.EIO, "Input/output error"))
