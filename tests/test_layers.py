"""The core never imports Qt, the GUI or the CLI (also enforced by import-linter)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "ragdesk" / "core"
FORBIDDEN = ("PySide6", "PyQt5", "PyQt6", "shiboken6", "ragdesk.ui", "ragdesk.cli")


def test_core_sources_import_no_qt() -> None:
    offenders = []
    for py in CORE.rglob("*.py"):
        tree = ast.parse(py.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                if n.startswith(FORBIDDEN):
                    offenders.append(f"{py.relative_to(CORE)}: {n}")
    assert offenders == []


def test_importing_the_core_loads_no_qt_module() -> None:
    code = (
        "import sys, pkgutil, importlib, ragdesk.core as c\n"
        "for m in pkgutil.walk_packages(c.__path__, 'ragdesk.core.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = [m for m in sys.modules if m.startswith(('PySide6', 'shiboken6'))]\n"
        "print(bad); raise SystemExit(1 if bad else 0)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


def test_wiring_an_engine_loads_no_ml_library_until_it_is_used() -> None:
    """The session, the engine and the retrievers import cheaply: torch, transformers, faiss
    and bm25s (with scipy) load only when a model, an index or BM25 is used, so `ragdesk
    --help` and the window's first paint never wait for them."""
    code = (
        "import sys\n"
        "import ragdesk.core.session, ragdesk.core.engine, ragdesk.core.retrieval\n"
        "heavy = ('torch', 'transformers', 'faiss', 'bm25s', 'scipy')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, check=True)
    assert res.stdout.strip() == "[]", res.stdout + res.stderr


def test_every_core_module_sits_in_a_layer() -> None:
    """A core package or module that is in no layer of the layers contract is checked by no
    contract at all: it may import anything, and anything may import it."""
    import tomllib

    config = tomllib.loads((CORE.parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    layered = [c for c in config["tool"]["importlinter"]["contracts"]
               if c["type"] == "layers" and c["containers"] == ["ragdesk.core"]]
    assert len(layered) == 1
    named = {name.strip() for layer in layered[0]["layers"] for name in layer.split("|")}
    present = {p.stem for p in CORE.glob("*.py") if p.stem != "__init__"}
    present |= {p.parent.name for p in CORE.glob("*/__init__.py")}
    assert sorted(present - named) == []
    assert sorted(named - present) == []  # a layer that names a module that is gone
