"""The GUI's size limits: the window stays a shell and no function grows past what
a reader takes in at once. Counted as the issue counts them: lines from ``def`` to the end of
the body."""

from __future__ import annotations

import ast
from pathlib import Path

import ragdesk.ui

UI = Path(ragdesk.ui.__file__).parent
MAX_FUNCTION_LINES = 60
MAX_WINDOW_LINES = 400


def test_no_gui_function_is_longer_than_60_lines() -> None:
    long = []
    for path in sorted(UI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(UI)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "split these into named parts: " + ", ".join(long)


def test_the_main_window_stays_a_shell() -> None:
    lines = (UI / "main_window.py").read_text(encoding="utf-8").count("\n")
    assert lines < MAX_WINDOW_LINES, f"main_window.py has {lines} lines; move a part out"
