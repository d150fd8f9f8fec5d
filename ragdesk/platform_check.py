"""Can the desktop app open a window here? Answered without importing Qt.

Qt aborts the whole process (SIGABRT, exit 134, a core dump) when it cannot load a platform
plugin: when a system library of the xcb plugin is missing (a bare Debian or Ubuntu lacks
``libxcb-cursor0``, ``libxcb-icccm4``, ``libxcb-keysyms1`` and, on minimal images, more), or
when there is no display to connect to. Neither can be caught once Qt has started, so the app,
``--self-test`` and ``scripts/run.sh`` ask this module first:

* which platform plugin Qt will pick (the same rules as ``QGuiApplication``),
* whether that plugin's shared libraries are all present (``ldd`` on the plugin lists every
  library it would load, transitively; each missing one is mapped to its Debian package),
* whether the display it needs is reachable (an X connection through ``libxcb``, a Wayland
  socket).

``python -m ragdesk.platform_check`` prints a report (exit 1 when the window cannot open);
``--packages`` prints only the Debian packages to install, for ``scripts/run.sh``.

Lives outside ``ragdesk.core`` because it is about the GUI; it imports neither Qt nor anything
heavy, so the check costs a few milliseconds and one ``ldd`` run.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ragdesk.core.errors import RagdeskError

log = logging.getLogger(__name__)

#: Platform plugins that draw without a display server (nothing to connect to).
HEADLESS_PLATFORMS = frozenset({
    "offscreen", "minimal", "minimalegl", "vnc", "eglfs", "linuxfb", "vkkhrdisplay"})

# Debian/Ubuntu packages whose names do not follow from the library's soname by the policy
# rule in `debian_package` (libfoo.so.N -> libfooN, libfoo2.so.N -> libfoo2-N).
_DEBIAN_EXCEPTIONS: dict[str, str] = {
    "libz.so.1": "zlib1g",
    "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0",
    "libgobject-2.0.so.0": "libglib2.0-0",
    "libgio-2.0.so.0": "libglib2.0-0",
    "libGLdispatch.so.0": "libglvnd0",
    "libbrotlidec.so.1": "libbrotli1",
    "libbrotlicommon.so.1": "libbrotli1",
    "libgcc_s.so.1": "libgcc-s1",
    "libstdc++.so.6": "libstdc++6",
    "libc.so.6": "libc6",
    "libm.so.6": "libc6",
    "libdl.so.2": "libc6",
    "libpthread.so.0": "libc6",
    "librt.so.1": "libc6",
    "libxcb-util.so.1": "libxcb-util1",
    "libxcb-util.so.0": "libxcb-util0",
}

_NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found\s*$")
_SONAME = re.compile(r"^(lib.+?)\.so\.(\d+)(?:\.[\d.]+)?$")


def debian_package(soname: str) -> str | None:
    """The Debian/Ubuntu package that ships ``soname`` (``libxcb-icccm.so.4`` -> ``libxcb-icccm4``).

    Debian names a shared-library package after the library and its soname version, with a
    hyphen when the library's name ends in a digit (policy 8.1); the few that differ are
    listed. ``None`` for names that are not ``libNAME.so.N``.
    """
    if soname in _DEBIAN_EXCEPTIONS:
        return _DEBIAN_EXCEPTIONS[soname]
    m = _SONAME.match(soname)
    if m is None:
        return None
    base, version = m.group(1).lower().replace("_", "-"), m.group(2)
    return f"{base}-{version}" if base[-1].isdigit() else f"{base}{version}"


def platform_candidates(env: Mapping[str, str]) -> list[str]:
    """The platform plugins Qt tries, in order, on Linux and the BSDs.

    ``QT_QPA_PLATFORM`` wins ("wayland;xcb" lists fallbacks, "offscreen:opt=1" carries
    options). Otherwise Qt 6 (``QGuiApplicationPrivate::createPlatformIntegration``) puts
    wayland first when ``WAYLAND_DISPLAY`` is set or the session type is wayland, then xcb
    when ``DISPLAY`` is set, then its built-in default, xcb.
    """
    requested = env.get("QT_QPA_PLATFORM", "")
    if requested:
        return [p.split(":")[0] for p in requested.split(";") if p.split(":")[0]]
    order: list[str] = []
    if "WAYLAND_DISPLAY" in env or env.get("XDG_SESSION_TYPE") == "wayland":
        order.append("wayland")
    order.append("xcb")
    return order


def has_display(name: str, env: Mapping[str, str]) -> bool:
    """Whether the environment names a display for platform ``name`` (not yet whether it
    answers)."""
    if name in HEADLESS_PLATFORMS:
        return True
    if name == "xcb":
        return "DISPLAY" in env
    if name.startswith("wayland"):
        return "WAYLAND_DISPLAY" in env or env.get("XDG_SESSION_TYPE") == "wayland"
    return True  # a plugin we know nothing about: let Qt judge


def plugin_file(name: str, env: Mapping[str, str]) -> Path | None:
    """The file of platform plugin ``name`` that Qt will load, found without importing Qt."""
    dirs: list[Path] = []
    if env.get("QT_QPA_PLATFORM_PLUGIN_PATH"):
        dirs.append(Path(env["QT_QPA_PLATFORM_PLUGIN_PATH"]))
    for p in env.get("QT_PLUGIN_PATH", "").split(os.pathsep):
        if p:
            dirs.append(Path(p) / "platforms")
    try:
        spec = importlib.util.find_spec("PySide6")  # finds the package without running it
    except (ImportError, ValueError):
        spec = None
    for location in (spec.submodule_search_locations or []) if spec else []:
        dirs.append(Path(location) / "Qt" / "plugins" / "platforms")
    for d in dirs:
        for candidate in (d / f"libq{name}.so", d / f"libq{name}.dylib", d / f"q{name}.dll"):
            if candidate.is_file():
                return candidate
    return None


def _ldd(path: Path) -> str | None:
    ldd = shutil.which("ldd")
    if ldd is None:
        return None
    try:
        proc = subprocess.run([ldd, str(path)], capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        log.info("ldd %s failed: %s", path, exc)
        return None
    return proc.stdout


def missing_libraries(plugin: Path, ldd: Callable[[Path], str | None] = _ldd) -> list[str]:
    """Sonames that ``plugin`` needs, directly or through the Qt libraries it links, and that
    the dynamic loader cannot find. Empty when all are there or when ``ldd`` is unavailable
    (then Qt itself is the judge)."""
    out = ldd(plugin)
    if not out:
        return []
    found: list[str] = []
    for line in out.splitlines():
        m = _NOT_FOUND.match(line)
        if m and m.group(1) not in found:
            found.append(m.group(1))
    return found


def _xcb_connects(display: str) -> tuple[bool, str]:
    """Whether an X server answers on ``display``, asked through libxcb as Qt would ask."""
    try:
        xcb = ctypes.CDLL("libxcb.so.1")
    except OSError as exc:
        return False, str(exc)
    xcb.xcb_connect.restype = ctypes.c_void_p
    xcb.xcb_connect.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    xcb.xcb_connection_has_error.restype = ctypes.c_int
    xcb.xcb_connection_has_error.argtypes = [ctypes.c_void_p]
    xcb.xcb_disconnect.restype = None
    xcb.xcb_disconnect.argtypes = [ctypes.c_void_p]
    conn = xcb.xcb_connect(display.encode(errors="surrogateescape"), None)
    try:
        error = xcb.xcb_connection_has_error(conn) if conn else -1
    finally:
        if conn:
            xcb.xcb_disconnect(conn)  # also frees the error object libxcb returns
    return error == 0, f"libxcb error {error}" if error else ""


def _wayland_socket(env: Mapping[str, str]) -> Path:
    name = env.get("WAYLAND_DISPLAY") or "wayland-0"
    if os.path.isabs(name):
        return Path(name)
    return Path(env.get("XDG_RUNTIME_DIR", "")) / name


def display_reachable(name: str, env: Mapping[str, str]) -> tuple[bool, str]:
    """Whether the display server of platform ``name`` answers; (ok, why not)."""
    if name == "xcb":
        return _xcb_connects(env.get("DISPLAY", ""))
    if name.startswith("wayland"):
        sock = _wayland_socket(env)
        return (True, "") if sock.exists() else (False, f"no Wayland socket at {sock}")
    return True, ""


@dataclass(frozen=True)
class GuiCheck:
    """Where the desktop app would get its window, or why it would not."""

    platform: str | None  #: the plugin Qt will use; None when the window cannot open
    #: why not: "no-display", "missing-libraries" or "unreachable"; "" when it can open
    reason: str = ""
    problem: str = ""
    hint: str = ""
    missing: tuple[str, ...] = ()  #: sonames the plugin lacks
    packages: tuple[str, ...] = field(default=())  #: Debian packages that provide them

    @property
    def ok(self) -> bool:
        return self.platform is not None


def install_command(packages: Sequence[str], *, root: bool | None = None) -> str:
    """The one command that installs ``packages`` on Debian/Ubuntu."""
    if root is None:
        root = hasattr(os, "geteuid") and os.geteuid() == 0
    return ("" if root else "sudo ") + "apt-get install -y " + " ".join(packages)


def check_gui(env: Mapping[str, str] | None = None, *, system: str | None = None,
              ldd: Callable[[Path], str | None] = _ldd,
              reachable: Callable[[str, Mapping[str, str]], tuple[bool, str]]
              = display_reachable) -> GuiCheck:
    """Whether Qt can open the app's window here, and with which platform plugin.

    Follows Qt's order of candidates; the first one with a display, its libraries and a
    reachable server wins. Otherwise the most useful problem is reported: no display at all
    before missing libraries (installing them would not help), missing libraries before an
    unreachable server.
    """
    env = os.environ if env is None else env
    system = sys.platform if system is None else system
    if system in ("win32", "cygwin", "darwin"):
        return GuiCheck(platform="windows" if system != "darwin" else "cocoa")
    candidates = platform_candidates(env)
    with_display = [c for c in candidates if has_display(c, env)]
    if not with_display:
        return GuiCheck(
            platform=None, reason="no-display",
            problem="There is no display to open the window on (DISPLAY and WAYLAND_DISPLAY "
                    "are not set).",
            hint="Start ragdesk from a desktop session (or through `ssh -X`), or use it from "
                 "the command line: `ragdesk ask \"QUESTION\"`, `ragdesk index list`; "
                 "`ragdesk --help` lists every command.")
    missing_by: dict[str, list[str]] = {}
    unreachable: list[str] = []
    for name in with_display:
        plugin = plugin_file(name, env)
        if plugin is None:
            # Not a PySide6 plugin we can find (a custom path, a frozen layout we do not
            # know): Qt's own error is the best we have.
            return GuiCheck(platform=name)
        missing = missing_libraries(plugin, ldd)
        if missing:
            missing_by[name] = missing
            continue
        ok, why = (True, "") if name in HEADLESS_PLATFORMS else reachable(name, env)
        if ok:
            return GuiCheck(platform=name)
        unreachable.append(f"{name}: {why}" if why else name)
    if missing_by:
        name, missing = next(iter(missing_by.items()))
        packages = tuple(dict.fromkeys(p for p in map(debian_package, missing) if p))
        hint = (f"Install them with `{install_command(packages)}` (bash scripts/run.sh does "
                "this for you)." if packages and shutil.which("apt-get") else
                "Install the packages that provide them with the system's package manager.")
        return GuiCheck(
            platform=None, reason="missing-libraries",
            problem=f"Qt's {name} platform plugin needs system libraries that are missing: "
                    f"{', '.join(missing)}.",
            hint=hint, missing=tuple(missing), packages=packages)
    where = ", ".join(
        f"X display {env.get('DISPLAY', '')!r}" if n == "xcb" else f"Wayland display "
        f"{env.get('WAYLAND_DISPLAY', 'wayland-0')!r}" for n in with_display)
    return GuiCheck(
        platform=None, reason="unreachable",
        problem=f"Cannot connect to the {where} ({'; '.join(unreachable)}).",
        hint="Check that the display server is running and that DISPLAY / WAYLAND_DISPLAY "
             "name it (and, through ssh, that X forwarding is on).")


class DisplayError(RagdeskError):
    """The desktop app cannot open its window here."""


def require_gui(env: Mapping[str, str] | None = None) -> str:
    """The platform plugin the app will use; raises :class:`DisplayError` instead of letting
    Qt abort the process."""
    result = check_gui(env)
    if result.platform is None:
        raise DisplayError(f"The window cannot open. {result.problem}", result.hint)
    log.debug("Qt platform: %s", result.platform)
    return result.platform


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ragdesk.platform_check",
        description="Check, without starting Qt, whether the desktop app can open a window.")
    parser.add_argument("--packages", action="store_true",
                        help="print only the Debian packages to install (nothing when none "
                             "would help), for scripts/run.sh")
    args = parser.parse_args(argv)
    result = check_gui()
    if args.packages:
        print(" ".join(result.packages))
        return 0
    if result.ok:
        print(f"ok: Qt will use the {result.platform} platform plugin")
        return 0
    print(result.problem)
    if result.hint:
        print(result.hint)
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
