"""Layout check: the real app under Xvfb and a window manager (openbox), screenshots at the
moments the layout defects showed, to look at by eye.

    .venv/bin/python scripts/layout_screenshots.py --size 1440x900 --data-dir DIR --out DIR

DIR holds a copy of a data directory with a ready snapshot and the starter pack (its layout
settings are reset; an import is started and removed). Pictures, in order: the empty state,
with the right dock widened; an answer streaming and finished; the retrieval map docked and
wide; a narrow centre pane; an import's reading and encoding phases and the status bar; the
first-run dialog without and with its progress panel; Compare, and an empty answer in it.
``--restart`` instead widens the right dock, quits, starts again (the saved layout) and
opens the step-through dock. Needs xvfb, openbox, xdotool.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

QUESTION = "When did the Roman Empire fall?"


def inside(args: argparse.Namespace) -> int:
    from PySide6.QtCore import QPoint, QRect, Qt
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication
    from screenshots import drive_app, xdo

    from ragdesk.core.app import AppContext
    from ragdesk.core.logging_setup import setup_logging
    from ragdesk.core.progress import ProgressUpdate
    from ragdesk.ui.ops import Lane

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = AppContext(Path(args.data_dir))
    setup_logging(ctx.data.logs_dir, 1)
    ctx.settings.update({"theme": "light", "window_geometry": "", "window_state": "",
                         "mode": "token", "n_docs": 5, "num_beams": 1, "max_new_tokens": 24})
    W, H = (int(v) for v in args.size.split("x"))
    def scenario(w: Any) -> Any:
        screen = QGuiApplication.primaryScreen()

        def save(name: str, rect: QRect | None = None) -> None:
            r = rect or QRect(0, 0, W, H)
            pix = screen.grabWindow(0, r.x(), r.y(), r.width(), r.height())
            pix.save(str(out / f"{name}.png"))
            print("saved", out / f"{name}.png", flush=True)

        def run(*a: str) -> Any:
            proc = xdo(*a)
            yield ("until", (lambda: proc.poll() is not None, 60, f"xdotool {a}"))

        def focus(t: Any) -> Any:
            yield from run("windowfocus", "--sync", str(int(t.winId())))
            yield ("until", (lambda: t.isActiveWindow(), 10, "active"))

        w.showMaximized()
        yield ("until", (lambda: w.isVisible() and w._first_load_done, 60, "snapshots"))
        yield ("sleep", 1500)
        yield from focus(w)
        print("title:", w.windowTitle(), flush=True)
        subprocess.run(["xprop", "-id", str(int(w.winId())), "WM_NAME", "_NET_WM_NAME"])
        save("01-empty")
        # Widen the right dock, as the user did.
        w.resizeDocks([w.inspector_dock], [int(W * 0.45)], Qt.Orientation.Horizontal)
        yield ("sleep", 800)
        save("02-empty-wide-dock")
        w.resizeDocks([w.inspector_dock], [400], Qt.Orientation.Horizontal)
        yield ("sleep", 500)

        yield from run("key", "--clearmodifiers", "ctrl+l")
        yield from run("type", "--delay", "20", QUESTION)
        yield from run("key", "Return")
        yield ("until", (lambda: w.chat.cards and len(w.chat.cards[-1].tokens) >= 3, 900,
                         "streaming"))
        save("03-streaming")
        yield ("until", (lambda: w.chat.cards[-1].state in ("done", "failed", "cancelled"),
                         900, "the answer"))
        yield ("sleep", 800)
        save("04-answer")
        yield from run("key", "--clearmodifiers", "ctrl+1")
        yield ("sleep", 600)
        save("05-answer-passage")

        # The retrieval map in its dock.
        yield from run("key", "--clearmodifiers", "ctrl+shift+m")
        yield ("until", (lambda: w.explore_dock("Retrieval map") is not None, 30, "map dock"))
        view = w.explore_dock("Retrieval map").widget()
        yield ("until", (lambda: view.map_data() is not None and not view.is_busy(), 300,
                         "the map"))
        yield ("sleep", 1000)
        save("06-map")
        save("06b-map-dock", QRect(w.explore_dock("Retrieval map").mapToGlobal(QPoint(0, 0)),
                                  w.explore_dock("Retrieval map").size()))
        w.resizeDocks([w.explore_dock("Retrieval map")], [int(W * 0.55)],
                      Qt.Orientation.Horizontal)
        yield ("sleep", 1000)
        save("07-map-wide-narrow-centre")
        w.explore_dock("Retrieval map").hide()
        w.inspector_dock.raise_()
        yield ("sleep", 800)
        save("08-narrow-centre")
        w.resizeDocks([w.inspector_dock], [400], Qt.Orientation.Horizontal)
        yield ("sleep", 500)

        # Progress in the status bar and the index manager: an import's reading phase.
        src = Path(args.import_file)
        m = w.open_index_manager()
        yield ("sleep", 500)
        from ragdesk.ui.import_dialog import ImportSpec

        enc = next((pk.passage_encoder for pk in w.state.packs if pk.name == w.state.pack), None)
        name = f"layout-check-{int(time.time())}"
        m.start_import(ImportSpec(str(src), name, enc or "", "jsonl", None))
        yield ("until", (lambda: m.job_panel.last_update is not None
                         and m.job_panel.last_update.unit == "bytes"
                         and m.job_panel.last_update.rate, 300, "reading progress"))
        yield ("sleep", 300)
        save("09-import-reading")
        yield ("until", (lambda: m.job_panel.last_update is not None
                         and "encod" in m.job_panel.last_update.message
                         and m.job_panel.last_update.eta_s is not None, 600, "encoding"))
        yield ("sleep", 1500)
        save("10-import-encoding")
        m.hide()
        yield ("sleep", 500)
        save("11-status-bar-job")
        w.ops.cancel(Lane.JOBS)
        yield ("until", (lambda: not w.ops.busy(Lane.JOBS), 300, "the import to stop"))
        w.library.remove_snapshot(name)

        # First-run dialog, with its progress panel shown as a running setup shows it.
        fr = w.open_first_run()
        yield ("until", (lambda: fr.isVisible(), 10, "first run"))
        yield ("sleep", 500)
        save("12-first-run")
        from types import SimpleNamespace

        job = SimpleNamespace(id=999, title="Building the starter snapshot", cancellable=True)
        fr.job = job
        fr.job_panel.start(job)
        fr._job_progress(job, ProgressUpdate(4032, 12324, "encoding passages", 51.0, 2760.0))
        fr.later.setText("Continue in the &background")
        yield ("sleep", 800)
        save("13-first-run-progress")
        fr.job = None
        fr.reject()
        yield ("sleep", 300)

        # Compare (with the small snapshot when there is one).
        usable = [s for s in w.state.snapshots if s.ready and not s.unusable_reason]
        if len(usable) >= 2:
            d = w.open_compare()
            d.question.clear()
            big = max(usable, key=lambda s: s.passages)
            small = min(usable, key=lambda s: s.passages)
            d.set_pair(big.name, small.name)
            yield from focus(d)
            d.question.setFocus()
            yield from run("type", "--delay", "20", args.compare_question)
            yield from run("key", "Return")
            yield ("until", (lambda: all(c is not None and c.state in ("done", "failed")
                                         for c in d.cards), 900, "compare"))
            yield ("sleep", 600)
            save("14-compare")
            import dataclasses

            right = d.cards[1]
            if right is not None and right.answer is not None:
                right.finish(dataclasses.replace(right.answer, tokens=[], token_ids=[],
                                                 text=""))
                yield ("sleep", 600)
                save("15-compare-empty-answer")
            d.close()
        yield from focus(w)
        yield from run("key", "--clearmodifiers", "ctrl+q")
        yield ("sleep", 3000)
        QApplication.exit(0)

    return drive_app(ctx, scenario)


def restart_inside(args: argparse.Namespace) -> int:
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication
    from screenshots import drive_app

    from ragdesk.core.app import AppContext

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = AppContext(Path(args.data_dir))
    W, H = (int(v) for v in args.size.split("x"))
    if args.phase == "1":
        ctx.settings.update({"theme": "light", "window_geometry": "", "window_state": ""})

    def scenario(w: Any) -> Any:
        screen = QGuiApplication.primaryScreen()

        def save(name: str) -> None:
            screen.grabWindow(0, 0, 0, W, H).save(str(out / f"{name}.png"))
            print("saved", name, flush=True)

        if args.phase == "1":
            w.showMaximized()
        yield ("until", (lambda: w.isVisible() and w._first_load_done, 60, "snapshots"))
        yield ("sleep", 1500)
        if args.phase == "1":
            w.resizeDocks([w.inspector_dock], [int(W * 0.62)], Qt.Orientation.Horizontal)
            yield ("sleep", 800)
            save("r1-widened")
            w.close()
            return
        save("r2-after-restart")
        act = next(a for a in w.explore_menu.actions() if "step" in a.text().lower())
        act.trigger()
        yield ("sleep", 500)
        w.question.setPlainText("Who painted the Mona Lisa?")
        w.send()
        yield ("until", (lambda: w.chat.cards[-1].state in ("done", "failed"), 900, "answer"))
        yield ("sleep", 1500)
        save("r3-step-through-dock")
        w.close()

    return drive_app(ctx, scenario)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1440x900")
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--import-file", default="/tmp/ragdesk-layout-import.jsonl")
    ap.add_argument("--compare-question", default="What is the highest mountain on Earth?")
    ap.add_argument("--display", default=":97")
    ap.add_argument("--restart", action="store_true",
                    help="the saved-layout check: widen, quit, start again")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--phase", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        return restart_inside(args) if args.restart else inside(args)
    src = Path(args.import_file)
    if not src.exists():
        from ragdesk.core.snapshots import vital_articles_path

        data = json.loads(Path(vital_articles_path()).read_text(encoding="utf-8"))
        rows = [json.dumps({"title": v["title"], "text": v["extract"]}) + "\n"
                for v in data.values() if v.get("extract")]
        with src.open("w", encoding="utf-8") as fh:
            for _ in range(4):
                fh.writelines(rows)
    xvfb = subprocess.Popen(["Xvfb", args.display, "-screen", "0", f"{args.size}x24",
                             "-nolisten", "tcp"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    env = dict(os.environ, DISPLAY=args.display, QT_QPA_PLATFORM="xcb", QT_SCALE_FACTOR="1",
               HF_HUB_OFFLINE="1")
    wm = subprocess.Popen(["openbox"], env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    try:
        cmd = [sys.executable, __file__, "--inside", *sys.argv[1:]]
        if not args.restart:
            return subprocess.run(cmd, env=env, timeout=3000).returncode
        for phase in ("1", "2"):
            rc = subprocess.run([*cmd, "--phase", phase], env=env, timeout=3000).returncode
            if rc:
                return rc
        return 0
    finally:
        wm.terminate()
        xvfb.terminate()
        wm.wait(10)
        xvfb.wait(10)


if __name__ == "__main__":
    sys.exit(main())
