"""Smaller findings: the damaged-settings warning printed twice (once by
logging's last resort, once by the CLI), and a catalog held exclusively by another process
blocked a reader for twice its busy timeout (the format check waited, then the open)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragdesk.core.catalog import Catalog
from ragdesk.core.errors import CatalogBusyError


def test_damaged_settings_are_reported_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "settings.json").write_text('{"model_pack": "mine", ', encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "ragdesk", "--data-dir", str(data), "models",
                           "list"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("is damaged") == 1, proc.stderr
    assert "ragdesk: warning:" in proc.stderr


_HOLDER = """
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None)
c.execute("PRAGMA locking_mode = EXCLUSIVE")
c.execute("BEGIN EXCLUSIVE")
c.execute("CREATE TABLE IF NOT EXISTS held (x)")
c.execute("COMMIT")  # the exclusive lock stays: locking_mode = EXCLUSIVE
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX locks")
def test_an_exclusive_lock_is_given_up_on_at_the_busy_timeout(tmp_path: Path) -> None:
    path = tmp_path / "catalog.sqlite"
    Catalog(path).close()
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with pytest.raises(CatalogBusyError):
            Catalog(path, busy_timeout_s=2.0)
        took = time.monotonic() - start
        assert took < 3.5, f"waited {took:.1f} s for a 2 s busy timeout"
    finally:
        holder.kill()
        holder.wait()
