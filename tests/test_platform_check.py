"""Whether the desktop app can open a window, decided before Qt starts.

Qt aborts the process (exit 134) on a missing system library of its platform plugin or on a
missing display; `ragdesk.platform_check` finds both without importing Qt.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

from ragdesk import platform_check as pc

# What `ldd libqxcb.so` printed on a Debian 12 image without libxcb-icccm4 and libxcb-keysyms1
# (shortened; a library is listed once per library that needs it).
LDD_OUTPUT = """\
\tlinux-vdso.so.1 (0x00007f2233c18000)
\tlibGL.so.1 => /lib/x86_64-linux-gnu/libGL.so.1 (0x00007f2232f79000)
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f2233b2c000)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-icccm.so.4 => not found
\tlibxkbcommon-x11.so.0 => not found
\tlibglib-2.0.so.0 => not found
\t/lib64/ld-linux-x86-64.so.2 (0x00007f2233c1a000)
"""

NO_DISPLAY: dict[str, str] = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}


@pytest.mark.parametrize(("soname", "package"), [
    # The ones a bare Debian/Ubuntu lacks, then the rest of the xcb plugin's list.
    ("libxcb-cursor.so.0", "libxcb-cursor0"),
    ("libxcb-icccm.so.4", "libxcb-icccm4"),
    ("libxcb-keysyms.so.1", "libxcb-keysyms1"),
    ("libxkbcommon-x11.so.0", "libxkbcommon-x11-0"),
    ("libxkbcommon.so.0", "libxkbcommon0"),
    ("libxcb-image.so.0", "libxcb-image0"),
    ("libxcb-render-util.so.0", "libxcb-render-util0"),
    ("libxcb-shape.so.0", "libxcb-shape0"),
    ("libxcb-xinerama.so.0", "libxcb-xinerama0"),
    ("libxcb-randr.so.0", "libxcb-randr0"),
    ("libxcb-util.so.1", "libxcb-util1"),
    ("libxcb.so.1", "libxcb1"),
    ("libX11-xcb.so.1", "libx11-xcb1"),
    ("libX11.so.6", "libx11-6"),
    ("libEGL.so.1", "libegl1"),
    ("libGL.so.1", "libgl1"),
    ("libGLX.so.0", "libglx0"),
    ("libGLdispatch.so.0", "libglvnd0"),
    ("libfontconfig.so.1", "libfontconfig1"),
    ("libfreetype.so.6", "libfreetype6"),
    ("libdbus-1.so.3", "libdbus-1-3"),
    ("libglib-2.0.so.0", "libglib2.0-0"),
    ("libgthread-2.0.so.0", "libglib2.0-0"),
    ("libz.so.1", "zlib1g"),
    ("libpng16.so.16", "libpng16-16"),
    ("libpcre2-8.so.0", "libpcre2-8-0"),
    ("libwayland-client.so.0", "libwayland-client0"),
    ("libbrotlidec.so.1", "libbrotli1"),
    ("libstdc++.so.6", "libstdc++6"),
    ("libgcc_s.so.1", "libgcc-s1"),
    ("ld-linux-x86-64.so.2", None),
    ("linux-vdso.so.1", None),
])
def test_missing_sonames_map_to_debian_packages(soname: str, package: str | None) -> None:
    assert pc.debian_package(soname) == package


def _dpkg_owner(path: str) -> str | None:
    for candidate in (path, path.replace("/lib/", "/usr/lib/", 1)):
        proc = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True,
                              check=False)
        if proc.returncode == 0:
            return proc.stdout.split(":")[0]
    return None


@pytest.mark.skipif(shutil.which("dpkg") is None or shutil.which("ldd") is None,
                    reason="needs a Debian-style system with dpkg and ldd")
def test_the_mapping_agrees_with_dpkg_for_every_library_the_xcb_plugin_loads() -> None:
    """The rule, checked against the package database of this machine: every library that
    the xcb plugin resolves from the system belongs to the package the rule names."""
    plugin = pc.plugin_file("xcb", {})
    assert plugin is not None
    out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True,
                         check=True).stdout
    checked = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith(("/lib", "/usr/lib")):
            owner = _dpkg_owner(parts[2])
            if owner is not None:
                checked[parts[0]] = owner
    assert len(checked) >= 10, out  # the xcb and X11 libraries at least
    wrong = {s: (pc.debian_package(s), owner) for s, owner in checked.items()
             if pc.debian_package(s) != owner}
    assert wrong == {}


def test_ldd_output_gives_each_missing_library_once_in_order() -> None:
    got = pc.missing_libraries(Path("libqxcb.so"), ldd=lambda _p: LDD_OUTPUT)
    assert got == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxkbcommon-x11.so.0",
                   "libglib-2.0.so.0"]
    assert pc.missing_libraries(Path("x"), ldd=lambda _p: None) == []  # no ldd: Qt judges


@pytest.mark.parametrize(("env", "order"), [
    ({}, ["xcb"]),
    ({"DISPLAY": ":0"}, ["xcb"]),
    ({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}, ["wayland", "xcb"]),
    ({"XDG_SESSION_TYPE": "wayland"}, ["wayland", "xcb"]),
    ({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"}, ["offscreen"]),
    ({"QT_QPA_PLATFORM": "wayland;xcb"}, ["wayland", "xcb"]),
    ({"QT_QPA_PLATFORM": "offscreen:fontengine=freetype"}, ["offscreen"]),
])
def test_platform_candidates_follow_qt(env: dict[str, str], order: list[str]) -> None:
    assert pc.platform_candidates(env) == order


def _never(*_args: object) -> NoReturn:
    raise AssertionError("not expected to be called")


def test_no_display_is_reported_before_anything_else() -> None:
    # Missing libraries would not help either: installing them is no answer to "no display".
    for env in (NO_DISPLAY, {**NO_DISPLAY, "QT_QPA_PLATFORM": "xcb"},
                {**NO_DISPLAY, "QT_QPA_PLATFORM": "wayland"}):
        result = pc.check_gui(env, system="linux", ldd=_never, reachable=_never)
        assert not result.ok and result.platform is None
        assert result.reason == "no-display"
        assert "DISPLAY" in result.problem and "ragdesk ask" in result.hint
        assert result.packages == ()


def test_headless_platforms_need_no_display() -> None:
    env = {**NO_DISPLAY, "QT_QPA_PLATFORM": "offscreen"}
    result = pc.check_gui(env, system="linux", ldd=lambda _p: "", reachable=_never)
    assert result.ok and result.platform == "offscreen"


def test_missing_libraries_name_the_packages() -> None:
    env = {**NO_DISPLAY, "DISPLAY": ":0"}
    result = pc.check_gui(env, system="linux", ldd=lambda _p: LDD_OUTPUT, reachable=_never)
    assert result.reason == "missing-libraries" and result.platform is None
    assert result.packages == ("libxcb-icccm4", "libxcb-keysyms1", "libxkbcommon-x11-0",
                               "libglib2.0-0")
    assert "libxcb-icccm.so.4" in result.problem and "xcb" in result.problem


def test_an_x_server_that_does_not_answer_is_reported() -> None:
    env = {**NO_DISPLAY, "DISPLAY": ":0"}
    result = pc.check_gui(env, system="linux", ldd=lambda _p: "",
                          reachable=lambda _n, _e: (False, "libxcb error 1"))
    assert result.reason == "unreachable"
    assert "':0'" in result.problem and "libxcb error 1" in result.problem


def test_qt_falls_back_from_wayland_to_xcb() -> None:
    env = {**NO_DISPLAY, "DISPLAY": ":0", "WAYLAND_DISPLAY": "nowhere"}
    result = pc.check_gui(env, system="linux", ldd=lambda _p: "",
                          reachable=lambda n, _e: (n == "xcb", ""))
    assert result.ok and result.platform == "xcb"


def test_windows_and_macos_are_not_checked() -> None:
    assert pc.check_gui(NO_DISPLAY, system="darwin", ldd=_never, reachable=_never).ok
    assert pc.check_gui(NO_DISPLAY, system="win32", ldd=_never, reachable=_never).ok


def test_require_gui_raises_a_user_error() -> None:
    from ragdesk.core.errors import RagdeskError

    with pytest.raises(RagdeskError) as info:
        pc.require_gui(NO_DISPLAY)
    assert info.value.exit_code == 1
    assert "no display" in info.value.message


def test_the_check_never_imports_qt() -> None:
    code = ("import sys, ragdesk.platform_check as p; p.check_gui(); "
            "assert not [m for m in sys.modules if m.startswith(('PySide6', 'shiboken'))]")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def _free_display() -> int:
    n = 150 + os.getpid() % 500
    while Path(f"/tmp/.X{n}-lock").exists() or Path(f"/tmp/.X11-unix/X{n}").exists():
        n += 1
    return n


def test_an_x_display_without_a_server_does_not_connect() -> None:
    ok, why = pc.display_reachable("xcb", {"DISPLAY": f":{_free_display()}"})
    assert not ok and why


@pytest.fixture()
def xvfb() -> Iterator[str]:
    """A private X server (skips where Xvfb is not installed)."""
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed")
    n = _free_display()
    proc = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "640x480x24", "-nolisten",
                             "tcp"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not Path(f"/tmp/.X11-unix/X{n}").exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.skip("Xvfb did not start")
            time.sleep(0.1)
        # The socket exists slightly before the server accepts connections.
        sock = socket.socket(socket.AF_UNIX)
        while sock.connect_ex(f"/tmp/.X11-unix/X{n}") != 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        sock.close()
        yield f":{n}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_a_running_x_server_connects(xvfb: str) -> None:
    ok, why = pc.display_reachable("xcb", {"DISPLAY": xvfb})
    assert ok, why


def _env_without_display(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM", "XDG_SESSION_TYPE")}
    env.update(extra)
    return env


def test_the_app_without_a_display_says_so_and_exits_1(tmp_path: Path) -> None:
    """`ragdesk` (the GUI start) with no display: a message and exit 1, not Qt's abort."""
    proc = subprocess.run([sys.executable, "-m", "ragdesk", "--data-dir", str(tmp_path / "d")],
                          capture_output=True, text=True, env=_env_without_display(),
                          timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert "ragdesk: error: The window cannot open. There is no display" in proc.stderr
    assert "ragdesk ask" in proc.stderr
    assert "qt.qpa" not in proc.stderr and "Traceback" not in proc.stderr


def test_the_app_with_a_dead_display_says_so_and_exits_1(tmp_path: Path) -> None:
    """DISPLAY names no server: Qt would abort; ragdesk explains (or names the libraries it
    would need first, on a machine without them)."""
    env = _env_without_display(DISPLAY=f":{_free_display()}")
    proc = subprocess.run([sys.executable, "-m", "ragdesk", "--data-dir", str(tmp_path / "d")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert ("Cannot connect to the X display" in proc.stderr
            or "needs system libraries that are missing" in proc.stderr), proc.stderr
    assert "qt.qpa" not in proc.stderr and "Traceback" not in proc.stderr


def test_packages_mode_prints_nothing_without_a_display() -> None:
    """run.sh installs nothing on a headless machine: the app would not open anyway."""
    proc = subprocess.run([sys.executable, "-m", "ragdesk.platform_check", "--packages"],
                          capture_output=True, text=True, env=_env_without_display(),
                          timeout=60, check=True)
    assert proc.stdout.strip() == ""
