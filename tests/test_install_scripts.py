"""`scripts/install.sh` and `scripts/run.sh`, run for real against fakes.

The scripts run in a copy of the repository whose ``.venv/bin/python`` is a fake that logs
what it was asked to do (pip, the platform check) and hands everything else to this Python,
and on a PATH holding only fake ``apt-get``, ``sudo`` and ``id``. Nothing is installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/usr/bin/env bash
echo "python $* PYTHONWARNINGS=${PYTHONWARNINGS:-}" >> "$FAKE_LOG"
case "$1 $2" in
  "-m pip")
    [ "${FAKE_PIP_FAIL:-}" = 1 ] && exit 1
    exit 0;;
  "-m ragdesk.platform_check")
    # Missing packages until the fake apt-get has installed them.
    if [ -e "$FAKE_STATE/installed" ] && [ "${FAKE_INSTALL_HELPS:-1}" = 1 ]; then
      exit 0
    fi
    if [ "${3:-}" = --packages ]; then echo "$FAKE_MISSING"; exit 0; fi
    echo "Qt's xcb platform plugin needs system libraries that are missing: libfake.so.1."
    exit 1;;
esac
exec "$REAL_PYTHON" "$@"
"""

FAKE_RAGDESK = """#!/usr/bin/env bash
echo "ragdesk $*" >> "$FAKE_LOG"
"""

FAKE_APT = """#!/usr/bin/env bash
echo "apt-get $* uid=$(id -u) DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-}" >> "$FAKE_LOG"
case "$1" in
  update) : > "$FAKE_STATE/updated";;
  install)
    # A fresh image has no package lists: installing fails until an update.
    if [ "${FAKE_NEEDS_UPDATE:-}" = 1 ] && [ ! -e "$FAKE_STATE/updated" ]; then exit 100; fi
    [ "$(id -u)" = 0 ] || exit 100
    : > "$FAKE_STATE/installed";;
esac
"""

FAKE_SUDO = """#!/usr/bin/env bash
echo "sudo $*" >> "$FAKE_LOG"
export FAKE_UID=0
exec "$@"
"""

FAKE_ID = """#!/usr/bin/env bash
echo "${FAKE_UID:-1000}"
"""


@dataclass
class Sandbox:
    root: Path
    bin: Path
    log: Path
    state: Path

    def env(self, **extra: str) -> dict[str, str]:
        env = {"PATH": str(self.bin), "HOME": str(self.root), "FAKE_LOG": str(self.log),
               "FAKE_STATE": str(self.state), "REAL_PYTHON": sys.executable,
               "FAKE_MISSING": "", "LANG": "C.UTF-8"}
        env.update(extra)
        return env

    def run(self, script: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        self.log.write_text("")
        return subprocess.run(["bash", f"scripts/{script}", *args], cwd=self.root,
                              capture_output=True, text=True, env=self.env(**env), timeout=120)

    def calls(self, prefix: str = "") -> list[str]:
        return [line for line in self.log.read_text().splitlines() if line.startswith(prefix)]

    def pip_calls(self) -> list[str]:
        return self.calls("python -m pip")

    def tool(self, name: str, text: str) -> None:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)


@pytest.fixture()
def sandbox(tmp_path: Path) -> Sandbox:
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    for name in ("scripts/install.sh", "scripts/run.sh", "scripts/install_stamp.py",
                 "pyproject.toml"):
        shutil.copy2(REPO / name, root / name)
    venv_bin = root / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("ragdesk", FAKE_RAGDESK)):
        (venv_bin / name).write_text(text)
        (venv_bin / name).chmod(0o755)
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    # Only what the scripts need, so that "no sudo" and "no apt-get" can be arranged.
    for tool in ("bash", "dirname", "env"):
        found = shutil.which(tool)
        assert found is not None
        os.symlink(found, fake_bin / tool)
    state = tmp_path / "state"
    state.mkdir()
    box = Sandbox(root, fake_bin, tmp_path / "log", state)
    box.tool("id", FAKE_ID)
    return box


# ---- install.sh: installs only when something changed -----------------------------------------

def test_the_second_install_is_skipped(sandbox: Sandbox) -> None:
    first = sandbox.run("install.sh")
    assert first.returncode == 0, first.stderr
    pip = sandbox.pip_calls()
    assert len(pip) == 3, pip  # pip itself, torch, ragdesk
    assert "--quiet" not in pip[1] and "--quiet" not in pip[2]  # the progress shows
    assert "torch==2.13.0" in pip[1]
    assert "-e ." in pip[2] and "PYTHONWARNINGS=ignore:Editable installation" in pip[2]
    assert (sandbox.root / ".venv" / ".ragdesk-install-stamp").is_file()

    again = sandbox.run("install.sh")
    assert again.returncode == 0, again.stderr
    assert sandbox.pip_calls() == []
    assert again.stdout == "" and again.stderr == ""


def test_extras_install_once_and_count_as_installed_later(sandbox: Sandbox) -> None:
    assert sandbox.run("install.sh", "test", "bench").returncode == 0
    assert "-e .[test,bench]" in sandbox.pip_calls()[-1]
    # run.sh asks for no extras, test.sh for "test": both already there.
    assert sandbox.run("install.sh").returncode == 0 and sandbox.pip_calls() == []
    assert sandbox.run("install.sh", "test").returncode == 0 and sandbox.pip_calls() == []


def test_a_new_extra_installs(sandbox: Sandbox) -> None:
    assert sandbox.run("install.sh").returncode == 0
    assert sandbox.run("install.sh", "test").returncode == 0
    assert "-e .[test]" in sandbox.pip_calls()[-1]
    assert sandbox.run("install.sh", "test").returncode == 0 and sandbox.pip_calls() == []


@pytest.mark.parametrize("change", ["pyproject.toml", "scripts/install.sh"])
def test_a_changed_input_reinstalls(sandbox: Sandbox, change: str) -> None:
    assert sandbox.run("install.sh").returncode == 0
    path = sandbox.root / change
    path.write_text(path.read_text() + "\n# changed\n")
    assert sandbox.run("install.sh").returncode == 0
    assert len(sandbox.pip_calls()) == 3


def test_another_torch_version_reinstalls(sandbox: Sandbox) -> None:
    assert sandbox.run("install.sh").returncode == 0
    assert sandbox.run("install.sh", RAGDESK_TORCH_VERSION="2.12.0").returncode == 0
    pip = sandbox.pip_calls()
    assert len(pip) == 3 and "torch==2.12.0" in pip[1]


def test_a_failed_install_leaves_no_stamp(sandbox: Sandbox) -> None:
    failed = sandbox.run("install.sh", FAKE_PIP_FAIL="1")
    assert failed.returncode != 0
    assert not (sandbox.root / ".venv" / ".ragdesk-install-stamp").exists()
    assert sandbox.run("install.sh").returncode == 0
    assert len(sandbox.pip_calls()) == 3


def test_the_stamp_logic() -> None:
    """The Python side alone: the key covers the inputs, extras add up."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("install_stamp",
                                                  REPO / "scripts" / "install_stamp.py")
    assert spec is not None and spec.loader is not None
    stamp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stamp)
    assert stamp.install_key("torch==1") == stamp.install_key("torch==1")
    assert stamp.install_key("torch==1") != stamp.install_key("torch==2")


# ---- run.sh: the system libraries Qt needs --------------------------------------------------

def _started(box: Sandbox) -> list[str]:
    return box.calls("ragdesk ")


def test_nothing_missing_starts_the_app_with_the_arguments(sandbox: Sandbox) -> None:
    sandbox.tool("apt-get", FAKE_APT)
    proc = sandbox.run("run.sh", "--data-dir", "/tmp/d")
    assert proc.returncode == 0, proc.stderr
    assert sandbox.calls("apt-get") == []
    assert _started(sandbox) == ["ragdesk --data-dir /tmp/d"]


def test_as_root_the_missing_libraries_are_installed(sandbox: Sandbox) -> None:
    sandbox.tool("apt-get", FAKE_APT)
    proc = sandbox.run("run.sh", FAKE_UID="0", FAKE_MISSING="libxcb-cursor0 libxcb-icccm4")
    assert proc.returncode == 0, proc.stderr
    apt = sandbox.calls("apt-get")
    assert len(apt) == 1
    assert "install -y --no-install-recommends libxcb-cursor0 libxcb-icccm4 uid=0" in apt[0]
    assert "DEBIAN_FRONTEND=noninteractive" in apt[0]
    assert "libfake.so.1" in proc.stderr  # the report says what was missing
    assert _started(sandbox) == ["ragdesk "]


def test_empty_package_lists_are_updated_first(sandbox: Sandbox) -> None:
    sandbox.tool("apt-get", FAKE_APT)
    proc = sandbox.run("run.sh", FAKE_UID="0", FAKE_MISSING="libxcb-cursor0",
                       FAKE_NEEDS_UPDATE="1")
    assert proc.returncode == 0, proc.stderr
    assert [c.split()[1] for c in sandbox.calls("apt-get")] == ["install", "update", "install"]
    assert _started(sandbox) == ["ragdesk "]


def test_a_user_installs_through_sudo(sandbox: Sandbox) -> None:
    sandbox.tool("apt-get", FAKE_APT)
    sandbox.tool("sudo", FAKE_SUDO)
    proc = sandbox.run("run.sh", FAKE_MISSING="libxcb-cursor0")
    assert proc.returncode == 0, proc.stderr
    assert sandbox.calls("sudo") == [
        "sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
        "libxcb-cursor0"]
    assert "uid=0" in sandbox.calls("apt-get")[0]
    assert _started(sandbox) == ["ragdesk "]


def test_without_sudo_the_command_is_printed_and_the_app_not_started(sandbox: Sandbox) -> None:
    sandbox.tool("apt-get", FAKE_APT)
    proc = sandbox.run("run.sh", FAKE_MISSING="libxcb-cursor0 libxcb-icccm4")
    assert proc.returncode == 1
    assert "apt-get update && apt-get install -y libxcb-cursor0 libxcb-icccm4" in proc.stderr
    assert sandbox.calls("apt-get") == [] and _started(sandbox) == []


def test_a_failed_install_prints_the_command(sandbox: Sandbox) -> None:
    sandbox.tool("apt-get", FAKE_APT)
    sandbox.tool("sudo", "#!/usr/bin/env bash\nexit 1\n")  # a wrong password
    proc = sandbox.run("run.sh", FAKE_MISSING="libxcb-cursor0")
    assert proc.returncode == 1
    assert "sudo apt-get update && sudo apt-get install -y libxcb-cursor0" in proc.stderr
    assert _started(sandbox) == []


def test_without_apt_get_the_libraries_are_named(sandbox: Sandbox) -> None:
    proc = sandbox.run("run.sh", FAKE_UID="0", FAKE_MISSING="libxcb-cursor0")
    assert proc.returncode == 1
    assert "libfake.so.1" in proc.stderr and "package manager" in proc.stderr
    assert _started(sandbox) == []


def test_an_install_that_does_not_help_stops_before_qt_would_abort(sandbox: Sandbox) -> None:
    sandbox.tool("apt-get", FAKE_APT)
    proc = sandbox.run("run.sh", FAKE_UID="0", FAKE_MISSING="libxcb-cursor0",
                       FAKE_INSTALL_HELPS="0")
    assert proc.returncode == 1
    assert len(sandbox.calls("apt-get")) == 1 and _started(sandbox) == []
