"""Damaged state files were handled silently or with the wrong advice.

- a corrupt ``settings.json`` was ignored with only a log line (``ask`` then fell back to
  the starter pack, wrote 1.3 GB and failed with an encoder mismatch);
- a catalog truncated to 0 bytes lost the model packs and the active snapshot, unnoticed;
- on a full disk the catalog error's hint said "Move the file aside".
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest


def test_corrupt_settings_are_reported_and_kept(cli, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli("models", "use", "starter")
    assert code == 0, err
    settings = data_dir / "settings.json"
    settings.write_text('{"model_pack": "mine", ', encoding="utf-8")  # cut short

    code, out, err = cli("models", "list", "--json")
    assert code == 0, err
    json.loads(out)  # stdout stays clean JSON; the warning is on stderr
    assert "warning" in err and str(settings) in err and "damaged" in err
    backups = list(data_dir.glob("settings.json.corrupt-*"))
    assert len(backups) == 1 and str(backups[0]) in err
    assert backups[0].read_text(encoding="utf-8") == '{"model_pack": "mine", '
    assert "repair that copy" in err  # what to do

    code, _, err = cli("models", "list")  # said once: the file was moved aside
    assert code == 0 and "warning" not in err


def test_settings_nested_past_the_stack_are_moved_aside_too(cli, data_dir: Path) -> None:  # type: ignore[no-untyped-def]
    settings = data_dir / "settings.json"
    data_dir.mkdir(parents=True, exist_ok=True)
    settings.write_text('{"a":' * 100_000 + "1" + "}" * 100_000, encoding="utf-8")
    code, out, err = cli("index", "list", "--json")
    assert code == 0, err
    json.loads(out)
    assert "damaged" in err and "Traceback" not in err
    assert len(list(data_dir.glob("settings.json.corrupt-*"))) == 1 and not settings.exists()


def _setup(cli, tiny_models: Any, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    src = tmp_path / "a.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": x}) + "\n"
                           for t, x in tiny_models.corpus[:6]), encoding="utf-8")
    for name in ("first", "second"):
        code, _, err = cli("index", "import", str(src), "--name", name, "--encoder",
                           str(tiny_models.ctx_encoder))
        assert code == 0, err
    code, _, err = cli("index", "switch", "second")
    assert code == 0, err
    code, _, err = cli("models", "import", str(tiny_models.rag_sequence), "--name", "mine")
    assert code == 0, err


def _state(cli) -> tuple[list[tuple[str, str, bool]], list[str]]:  # type: ignore[no-untyped-def]
    code, out, err = cli("index", "list", "--json")
    assert code == 0, err
    snaps = [(s["name"], s["state"], s["active"]) for s in json.loads(out)]
    for name, _, _ in snaps:
        code, _, err = cli("index", "verify", name)
        assert code == 0, err
    code, out, err = cli("models", "list", "--json")
    assert code == 0, err
    return snaps, sorted(p["name"] for p in json.loads(out))


def test_truncated_catalog_is_restored_from_its_backup(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                       data_dir: Path) -> None:
    _setup(cli, tiny_models, tmp_path)
    before = _state(cli)
    assert ("second", "ready", True) in before[0] and "mine" in before[1]
    (data_dir / "catalog.sqlite").write_bytes(b"")

    code, _, err = cli("index", "list", "--json")
    assert code == 0, err
    assert "warning" in err and "was empty (0 bytes)" in err and "restored" in err
    assert _state(cli) == before  # packs and the active snapshot are back


def test_truncated_catalog_without_backup_says_what_to_do(cli, tiny_models, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          data_dir: Path) -> None:
    _setup(cli, tiny_models, tmp_path)
    (data_dir / "catalog.sqlite").write_bytes(b"")
    for p in data_dir.glob("catalog.sqlite.backup*"):
        p.unlink()

    code, _, err = cli("index", "list")
    assert code == 0, err
    assert "was empty (0 bytes)" in err and "no usable backup" in err
    assert "ragdesk index switch NAME" in err and "ragdesk models import" in err
    snaps, _ = _state(cli)
    assert sorted(s[:2] for s in snaps) == [("first", "ready"), ("second", "ready")]


def test_full_disk_catalog_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # type: ignore[no-untyped-def]
                                cli, data_dir: Path) -> None:
    import sqlite3

    from sqlalchemy.exc import OperationalError

    import ragdesk.core.catalog.catalog as catalog_module

    code, _, err = cli("index", "list")
    assert code == 0, err

    def full(conn: Any) -> int:  # what SQLite said on a full tmpfs (see the next test)
        raise OperationalError("PRAGMA synchronous = NORMAL", {},
                               sqlite3.OperationalError("disk I/O error"))

    monkeypatch.setattr(catalog_module, "migrate", full)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage._replace(free=0))
    code, _, err = cli("index", "list")
    assert code == 1, err
    assert "disk is full" in err and "Free some disk space" in err
    assert "Move the file aside" not in err


@pytest.mark.skipif(sys.platform != "linux" or os.geteuid() != 0,
                    reason="needs root to mount a small tmpfs")
def test_full_disk_catalog_hint_on_a_real_full_disk(tmp_path: Path) -> None:
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        root = mnt / "data"
        run = [sys.executable, "-m", "ragdesk", "--data-dir", str(root), "index", "list"]
        assert subprocess.run(run, capture_output=True, timeout=300).returncode == 0
        try:  # fill the disk
            with open(mnt / "fill", "wb") as fh:
                while True:
                    fh.write(b"\0" * 4096)
                    fh.flush()
        except OSError:
            pass
        for side in ("catalog.sqlite-wal", "catalog.sqlite-shm"):
            (root / side).unlink(missing_ok=True)
        proc = subprocess.run(run, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 1, proc.stderr
        assert "disk is full" in proc.stderr and "Free some disk space" in proc.stderr
        assert "Move the file aside" not in proc.stderr
        assert "Traceback" not in proc.stderr and "Logging error" not in proc.stderr
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
