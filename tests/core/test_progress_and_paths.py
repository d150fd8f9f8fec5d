from __future__ import annotations

import io
from pathlib import Path

import pytest

from ragdesk.core.errors import Cancelled, DataDirError
from ragdesk.core.paths import DataDir, resolve_data_dir
from ragdesk.core.progress import CancelToken, Progress, ProgressUpdate, terminal_printer
from ragdesk.core.settings import Settings


def test_data_dir_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGDESK_DATA_DIR", str(tmp_path / "env"))
    assert resolve_data_dir(tmp_path / "flag") == (tmp_path / "flag").resolve()
    assert resolve_data_dir(None) == (tmp_path / "env").resolve()
    monkeypatch.delenv("RAGDESK_DATA_DIR")
    assert "ragdesk" in str(resolve_data_dir(None))


def test_data_dir_ensure_reports_unusable_folder(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(DataDirError, match="cannot be used"):
        DataDir(tmp_path / "f" / "d").ensure()
    d = DataDir(tmp_path / "ok").ensure()
    assert d.snapshots_dir.is_dir() and d.staging_dir.is_dir() and d.logs_dir.is_dir()


def test_progress_rate_eta_and_resume() -> None:
    seen: list[ProgressUpdate] = []
    p = Progress(100, "encoding", seen.append, start_done=40)
    p.update(10)
    u = seen[-1]
    assert u.done == 50 and u.total == 100 and u.fraction == 0.5
    assert u.rate is not None and u.rate > 0 and u.eta_s is not None
    assert "50/100" in u.describe()


def test_a_step_that_counts_nothing_shows_no_number() -> None:
    """"Loading the models  0" read as if nothing were loaded: no count, no number."""
    assert ProgressUpdate(0, None, "Loading the models", None, None).describe() == (
        "Loading the models")
    assert ProgressUpdate(12, None, "Reading", None, None).describe() == "Reading  12"
    assert ProgressUpdate(0, 5, "Encoding", None, None).describe() == "Encoding  0/5"


def test_terminal_printer_writes_lines() -> None:
    buf = io.StringIO()
    emit = terminal_printer(buf, min_interval=0)
    emit(ProgressUpdate(5, 10, "x", 2.0, 2.5))
    assert "50.0%" in buf.getvalue() and "5/10" in buf.getvalue()


def test_cancel_token() -> None:
    t = CancelToken()
    t.raise_if_cancelled()
    t.cancel()
    with pytest.raises(Cancelled):
        t.raise_if_cancelled()


def test_settings_roundtrip_and_damaged_file(tmp_path: Path) -> None:
    s = Settings(tmp_path / "settings.json")
    assert s.get("mode") == "token"
    s.set("mode", "sequence")
    assert Settings(tmp_path / "settings.json").get("mode") == "sequence"
    (tmp_path / "settings.json").write_text("{not json")
    assert Settings(tmp_path / "settings.json").get("mode") == "token"
