"""Start-up time: ragdesk's command line and main window against the bare minimum.

Each case runs in a fresh process (start-up cannot be measured twice in one process), started
from this one in alternating rounds so that load from other processes hits all cases alike:

* ``python -c pass``: the interpreter alone, the floor of any Python tool;
* ``ragdesk --version``: what the CLI costs before it does anything (no torch import);
* a bare PySide6 ``QMainWindow`` shown, the first event-loop turn after ``show()``: the
  reference for a Qt desktop app in Python;
* ragdesk's main window shown the same way (``run_app(..., on_shown=...)``), with the data
  directory holding one snapshot and the starter pack; models load in the background
  afterwards and are not part of this time.

The time is from the parent's ``fork`` to the moment the child reports (it prints the clock
and exits at once, so shutdown is not counted). Medians over ``--rounds``.

    python -m bench.startup_bench [--rounds 7] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import REPO, machine, machine_line, md_table, write_results

REPORT = "import os, sys, time; print(time.time(), flush=True); os._exit(0)"

BARE_QT = f"""
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMainWindow
app = QApplication([])
w = QMainWindow(); w.resize(1440, 900); w.show()
def shown():
    {REPORT}
QTimer.singleShot(0, shown)
app.exec()
"""

RAGDESK_GUI = f"""
from ragdesk.core.app import AppContext
from ragdesk.ui.app import run_app
def shown(window):
    {REPORT}
run_app(AppContext(), on_shown=shown)
"""

CASES = {
    "python": ["-c", "pass"],
    "cli_version": ["-m", "ragdesk", "--version"],
    "bare_qt_window": ["-c", BARE_QT],
    "ragdesk_window": ["-c", RAGDESK_GUI],
}


def run_once(args: list[str], env: dict[str, str]) -> float:
    t0 = time.time()
    out = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                         timeout=300, cwd=REPO)
    end = time.time()
    if out.returncode != 0:
        raise SystemExit(f"{args[:2]} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    # Children that report a clock (the window cases) are timed to that report; the
    # others to their exit.
    last = out.stdout.strip().splitlines()[-1:] or [""]
    try:
        reported = float(last[0])
    except ValueError:
        reported = end
    return (reported if reported > t0 else end) - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--data-dir", type=Path, default=None,
                    help="a ragdesk data directory (default: a new empty one)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)

    m = machine()
    with tempfile.TemporaryDirectory(prefix="ragdesk-startup-") as tmp:
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=tmp,
                   RAGDESK_DATA_DIR=str(args.data_dir or Path(tmp) / "data"))
        run_once(CASES["ragdesk_window"], env)  # warm the page cache and .pyc files
        times: dict[str, list[float]] = {k: [] for k in CASES}
        for r in range(args.rounds):
            for name, case in CASES.items():
                times[name].append(run_once(case, env))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in times.items()),
                  file=sys.stderr, flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    result: dict[str, Any] = {
        "machine": m, "rounds": args.rounds,
        "data_dir": "given" if args.data_dir else "empty",
        "seconds": times, "median_s": med,
        "ratios": {
            "cli_version_vs_python": med["cli_version"] / med["python"],
            "ragdesk_window_vs_bare_qt_window": med["ragdesk_window"] / med["bare_qt_window"],
        },
    }
    labels = {
        "python": "`python -c pass` (interpreter floor)",
        "cli_version": "`ragdesk --version`",
        "bare_qt_window": "bare PySide6 QMainWindow shown (reference)",
        "ragdesk_window": "ragdesk main window shown",
    }
    rows = [[labels[k], f"{med[k]:.2f}", f"{min(times[k]):.2f}", f"{max(times[k]):.2f}"]
            for k in CASES]
    md = "\n\n".join([
        "# Start-up time",
        f"Fresh processes, {args.rounds} alternating rounds, medians; time from the parent's "
        "start of the child to the child's report of its first event-loop turn after "
        "`show()` (or to its exit). Qt on the offscreen platform. Data directory: "
        + ("a populated one (snapshots and packs)." if args.data_dir else
           "a new, empty one (the first-run dialog is not shown: it opens after the "
           "first turn)."),
        md_table(["case", "median s", "min s", "max s"], rows),
        f"ragdesk main window / bare Qt window: "
        f"**{result['ratios']['ragdesk_window_vs_bare_qt_window']:.2f}x**; "
        f"`ragdesk --version` / `python -c pass`: "
        f"**{result['ratios']['cli_version_vs_python']:.2f}x**. Models are not loaded before "
        "the window appears: the worker loads them afterwards, with progress in the status "
        "bar.",
        machine_line(m),
    ])
    print(md)
    if not args.no_write:
        write_results("startup", result, md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
