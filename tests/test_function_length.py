"""No function in the package is longer than 60 lines (from its ``def`` line to the end of its
body, docstring included): a longer one does several things and wants splitting. There are
no exceptions (the limit only goes down)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ragdesk"
MAX_LINES = 60

def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, length in lines) of every function, methods and nested ones too."""
    out: list[tuple[str, int]] = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            assert node.end_lineno is not None
            out.append((name, node.end_lineno - node.lineno + 1))
            out += _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            out += _functions(node, f"{prefix}{node.name}.")
        else:
            out += _functions(node, prefix)
    return out


def _long_functions(package: Path = PACKAGE) -> dict[str, int]:
    found: dict[str, int] = {}
    for py in sorted(package.rglob("*.py")):
        rel = py.relative_to(package).as_posix()
        for name, lines in _functions(ast.parse(py.read_text(encoding="utf-8"))):
            if lines > MAX_LINES:
                found[f"{rel}::{name}"] = lines
    return found


def test_no_function_is_longer_than_60_lines() -> None:
    too_long = _long_functions()
    assert too_long == {}, "split these functions: " + ", ".join(
        f"{k} ({v} lines)" for k, v in sorted(too_long.items()))


def test_the_scan_finds_a_long_function_anywhere_in_a_package(tmp_path: Path) -> None:
    def function(name: str, lines: int, indent: str = "") -> str:
        body = "".join(f"{indent}    x{i} = {i}\n" for i in range(lines - 1))
        return f"{indent}def {name}():\n{body}"

    (tmp_path / "sub").mkdir()
    (tmp_path / "top.py").write_text(function("fits", 60) + function("over", 61))
    (tmp_path / "sub" / "deep.py").write_text(
        "class C:\n" + function("method", 61, "    ") + function("short", 3, "    "))
    assert _long_functions(tmp_path) == {"top.py::over": 61, "sub/deep.py::C.method": 61}


def test_the_measure_counts_from_def_to_the_end_of_the_body() -> None:
    body = "".join(f"        x{i} = {i}\n" for i in range(60))
    tree = ast.parse(f"class C:\n    def f(self):\n{body}        return 0\n")
    assert _functions(tree) == [("C.f", 62)]
