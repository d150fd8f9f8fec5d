"""No import cycle between ragdesk's own modules, counting every import: module-level ones,
imports inside functions and imports under ``TYPE_CHECKING``.

A function-level import hides a cycle from Python (it runs after both modules are loaded)
and a ``TYPE_CHECKING`` one from the interpreter altogether, but either still ties the two
modules together: neither can be read, tested or moved without the other. import-linter's
layers contract sees these imports too, but only between the layers it names; this test
covers every pair of modules.

Modules are nodes; ``import a.b`` and ``from a.b import c`` are an edge to ``a.b.c`` when that
is a module, else to ``a.b`` (a package means its ``__init__``). Importing a submodule runs
its parent package's ``__init__`` too, but that is not counted: every module would then sit
in a cycle with the package that holds it.

``ALLOWED`` names the edges still allowed to close a cycle, each with its reason; it only
ever shrinks (an entry that no longer exists, or no longer closes a cycle, fails the test).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "ragdesk"

# (importer, imported): imports allowed to close a cycle, with the reason each still does.
ALLOWED: dict[tuple[str, str], str] = {}


def module_files(root: Path, package: str) -> dict[str, Path]:
    """Every module of ``package`` under ``root``: dotted name -> file."""
    out: dict[str, Path] = {}
    for py in sorted((root / package).rglob("*.py")):
        parts = list(py.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = py
    return out


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of a relative import's ``from`` part."""
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def imports_of(module: str, path: Path, modules: Iterable[str]) -> set[str]:
    """The package's modules that ``module`` imports anywhere in its file."""
    known = set(modules)
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(module, is_package, node.level, node.module)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # `import a.b.c` of a name inside a.b.c
                t = t.rpartition(".")[0]
            if t and t != module:
                found.add(t)
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    files = module_files(root, package)
    return {m: imports_of(m, p, files) for m, p in files.items()}


def _reachable(graph: Mapping[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The components of modules that reach each other (more than one module), each sorted,
    in sorted order. Quadratic, which a few hundred modules afford."""
    reach = {v: _reachable(graph, v) for v in graph}
    out: set[tuple[str, ...]] = set()
    for v in graph:
        comp = {v} | {w for w in reach[v] if v in reach.get(w, ())}
        if len(comp) > 1:
            out.add(tuple(sorted(comp)))
    return sorted(list(c) for c in out)


def cycle_path(graph: Mapping[str, set[str]], component: list[str]) -> list[str]:
    """One shortest cycle through the component's first module: a -> b -> ... -> a."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:
                    path = [v]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if w not in previous:
                    previous[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{component} is not a cycle")


def _without(graph: Mapping[str, set[str]], edges: Iterable[tuple[str, str]]
             ) -> dict[str, set[str]]:
    cut = set(edges)
    return {a: {b for b in bs if (a, b) not in cut} for a, bs in graph.items()}


def test_no_import_cycle_between_ragdesk_modules() -> None:
    graph = _without(import_graph(), ALLOWED)
    cycles = [" -> ".join(cycle_path(graph, c)) for c in strongly_connected(graph)]
    assert cycles == [], "import cycles (counting imports in functions and under "\
        "TYPE_CHECKING): " + "; ".join(cycles)


def test_every_allowed_import_exists_and_still_closes_a_cycle() -> None:
    graph = import_graph()
    for edge in ALLOWED:
        a, b = edge
        assert b in graph.get(a, set()), f"{a} no longer imports {b}: drop it from ALLOWED"
        others = _without(graph, [e for e in ALLOWED if e != edge])
        assert any(a in c and b in c for c in strongly_connected(others)), (
            f"{a} -> {b} closes no cycle any more: drop it from ALLOWED")


def test_the_scan_sees_imports_in_functions_and_under_type_checking(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .c import C\n")
    (pkg / "a.py").write_text("def f():\n    from pkg import b\n")
    (pkg / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.c import C\n")
    (pkg / "sub" / "c.py").write_text("import pkg.a.f\nclass C: ...\n")
    (pkg / "d.py").write_text("from pkg.sub import C\nimport os\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": set(), "pkg.sub": {"pkg.sub.c"}, "pkg.a": {"pkg.b"},
                     "pkg.b": {"pkg.sub.c"}, "pkg.sub.c": {"pkg.a"}, "pkg.d": {"pkg.sub"}}
    assert strongly_connected(graph) == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    assert cycle_path(graph, ["pkg.a", "pkg.b", "pkg.sub.c"]) == [
        "pkg.a", "pkg.b", "pkg.sub.c", "pkg.a"]
