"""`ragdesk --self-test`: every check passes in a working install, and a broken piece fails it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragdesk import selftest
from tests import test_platform_check
from tests.test_platform_check import _env_without_display, _free_display

xvfb = test_platform_check.xvfb  # the fixture: a private X server

CHECK_NAMES = [name for name, _check in selftest.CHECKS]
LINE = re.compile(r"^(ok  |FAIL) (\w+): (.*)$")


def _report(stdout: str) -> dict[str, tuple[str, str]]:
    """{check: (status, detail)} from the one-line-per-check report."""
    found = {}
    for line in stdout.splitlines():
        m = LINE.match(line)
        if m:
            found[m.group(2)] = (m.group(1).strip(), m.group(3))
    return found


def test_all_checks_pass_in_a_subprocess(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    data = tmp_path / "data"
    env = {"RAGDESK_DATA_DIR": str(data), "TMPDIR": str(tmp), "QT_QPA_PLATFORM": "offscreen"}
    proc = run_cli("--self-test", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = _report(proc.stdout)
    assert list(report) == CHECK_NAMES
    assert all(status == "ok" for status, _ in report.values()), proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1] == (
        f"self-test passed: all {len(CHECK_NAMES)} checks ok")
    assert "platform offscreen" in report["qt"][1]
    # It works in its own temporary folder, removes it, and leaves the user's data alone.
    # (torch itself may leave an empty torchinductor_<user> cache folder in TMPDIR.)
    assert [p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")] == []
    assert not data.exists()


def test_a_missing_qt_platform_is_a_failed_check_not_a_crash(tmp_path: Path, run_cli) -> None:  # type: ignore[no-untyped-def]
    env = {"RAGDESK_DATA_DIR": str(tmp_path / "data"), "QT_QPA_PLATFORM": "no-such-platform"}
    proc = run_cli("--self-test", env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = _report(proc.stdout)
    assert list(report) == CHECK_NAMES  # the run went on to the end
    assert report["qt"][0] == "FAIL"
    assert "no-such-platform" in report["qt"][1] and "offscreen" in report["qt"][1]
    assert {n for n, (status, _) in report.items() if status == "FAIL"} == {"qt"}
    assert "self-test FAILED: 1 of" in proc.stdout.splitlines()[-1]


def test_a_wrong_faiss_result_fails_the_faiss_check(
    qapp: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The FAISS check compares with numpy; an index that ranks by L2 instead is caught."""
    import faiss

    monkeypatch.setattr(faiss, "IndexFlatIP", faiss.IndexFlatL2)
    monkeypatch.setenv("QT_QPA_PLATFORM", os.environ.get("QT_QPA_PLATFORM") or "offscreen")
    code = selftest.run_self_test()
    out = capsys.readouterr().out
    report = _report(out)
    assert code == 1
    assert report["faiss"][0] == "FAIL"
    assert "numpy" in report["faiss"][1]
    assert {n for n, (status, _) in report.items() if status == "ok"} == set(CHECK_NAMES) - {
        "faiss"}
    assert out.rstrip().splitlines()[-1] == (
        f"self-test FAILED: 1 of {len(CHECK_NAMES)} checks failed (faiss)")


def test_every_check_failing_still_reports_each_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(_tmp: Path) -> str:
        raise ImportError("libfoo.so.1: cannot open shared object file")

    monkeypatch.setattr(selftest, "CHECKS", [(name, broken) for name in CHECK_NAMES])
    assert selftest.run_self_test() == 1
    out = capsys.readouterr().out
    report = _report(out)
    assert list(report) == CHECK_NAMES
    assert all(status == "FAIL" and "ImportError: libfoo.so.1" in detail
               for status, detail in report.values())


def _self_test(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**env, "RAGDESK_DATA_DIR": str(tmp_path / "data")}
    return subprocess.run([sys.executable, "-m", "ragdesk", "--self-test"], capture_output=True,
                          text=True, env=env, timeout=300)


def test_without_a_display_the_qt_check_fails_instead_of_pretending(tmp_path: Path) -> None:
    """The self-test forced offscreen and said "all checks ok" where the app could
    not open a window. Now it checks what the app would use, and Qt never aborts."""
    proc = _self_test(_env_without_display(), tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = _report(proc.stdout)
    assert list(report) == CHECK_NAMES
    assert {n for n, (status, _) in report.items() if status == "FAIL"} == {"qt"}
    assert "no display" in report["qt"][1]
    assert "QT_QPA_PLATFORM=offscreen ragdesk --self-test" in report["qt"][1]


def test_a_dead_x_display_fails_the_qt_check_without_an_abort(tmp_path: Path) -> None:
    proc = _self_test(_env_without_display(DISPLAY=f":{_free_display()}"), tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = _report(proc.stdout)
    assert list(report) == CHECK_NAMES and report["qt"][0] == "FAIL"
    assert ("Cannot connect to the X display" in report["qt"][1]
            or "needs system libraries that are missing" in report["qt"][1])


def test_with_an_x_display_the_qt_check_uses_xcb(tmp_path: Path, xvfb: str) -> None:
    """The real plugin: with DISPLAY set and nothing forced, Qt's xcb plugin draws."""
    from ragdesk.platform_check import check_gui

    env = _env_without_display(DISPLAY=xvfb)
    gui = check_gui(env)
    if gui.reason == "missing-libraries":
        pytest.skip(f"this machine lacks {', '.join(gui.packages)}")
    proc = _self_test(env, tmp_path)
    report = _report(proc.stdout)
    assert report["qt"][0] == "ok", proc.stdout + proc.stderr
    assert "platform xcb" in report["qt"][1]
