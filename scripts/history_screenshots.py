"""Screenshots in the real app: the conversations sidebar holding a few
conversations (and a search in it), the inspector's whole-article tab and the settings
dialog, under Xvfb and openbox.

    .venv/bin/python scripts/history_screenshots.py --data-dir /work/ragdata \
        --size 1440x900 --out docs/screenshots

The data folder is not changed: its catalog, settings and snapshots are copied to a
temporary folder (the models are linked), and the questions are asked there. Needs xvfb,
openbox; answering takes a few seconds per question with the starter pack on a CPU.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

# Three conversations: the first with two questions, so that search finds an older answer;
# the last one's article (Chernobyl disaster) is one of the snapshot's longer ones.
CONVERSATIONS = (("Who painted the Mona Lisa?", "When did the Roman Empire fall?"),
                 ("What is photosynthesis?",),
                 ("What happened in the Chernobyl disaster?",))
SEARCH = "roman"


def copy_data(src: Path, dest: Path) -> Path:
    """A scratch data folder: catalog, settings and snapshots copied, the models linked."""
    dest.mkdir(parents=True)
    for name in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm",
                 "settings.json"):
        if (src / name).exists():
            shutil.copy2(src / name, dest / name)
    shutil.copytree(src / "snapshots", dest / "snapshots", symlinks=True)
    (dest / "models").symlink_to((src / "models").resolve())
    _undo_draft_schema(dest / "catalog.sqlite")
    return dest


def _undo_draft_schema(catalog: Path) -> None:
    """A catalog migrated by a development draft of schema 4 (its answers table lacks
    token_ids, and holds nothing) goes back to 3 in the copy, so the released step runs."""
    import sqlite3

    con = sqlite3.connect(catalog)
    try:
        cols = [r[1] for r in con.execute("PRAGMA table_info(answers)")]
        if not cols or "token_ids" in cols:
            return
        if con.execute("SELECT COUNT(*) FROM answers").fetchone()[0]:
            raise SystemExit(f"{catalog}: a draft conversations schema with answers in it")
        for table in ("answers_fts", "answer_passages", "answers", "conversations"):
            con.execute(f"DROP TABLE IF EXISTS {table}")
        con.execute("PRAGMA user_version = 3")
        con.commit()
        print("the copy's draft conversation tables were dropped (schema 3 again)")
    finally:
        con.close()


def ask_all(w: Any) -> Iterator[Any]:
    """Ask :data:`CONVERSATIONS`, each after "New conversation"."""
    for i, questions in enumerate(CONVERSATIONS):
        if i:
            w.new_conversation()
            yield ("sleep", 800)
        for q in questions:
            w.question.setPlainText(q)
            w.send()
            yield ("until", (lambda: w.chat.cards and w.chat.cards[-1].state in
                             ("done", "failed", "cancelled"), 900, f"the answer to {q}"))
            yield ("sleep", 1500)  # the save and the sidebar's refresh


def scenario(w: Any, out: Path, size: str) -> Generator[tuple[str, Any], Any, None]:
    from PySide6.QtCore import QRect, Qt
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    screen = QGuiApplication.primaryScreen()
    width, height = (int(v) for v in size.split("x"))

    def save(name: str, widget: Any = None) -> None:
        r = QRect(0, 0, width, height) if widget is None else widget.frameGeometry()
        path = out / f"{name}-{size}.png"
        screen.grabWindow(0, r.x(), r.y(), r.width(), r.height()).save(str(path))
        print("saved", path, flush=True)

    w.showMaximized()
    yield ("until", (lambda: w.isVisible() and w._first_load_done, 120, "snapshots"))
    yield ("sleep", 1500)
    yield from ask_all(w)
    sidebar = w.history.sidebar
    yield ("until", (lambda: len(sidebar.conversations()) >= len(CONVERSATIONS), 60,
                     "the sidebar"))
    yield ("sleep", 800)
    save("history-sidebar")

    # The whole article of the first passage of the last answer.
    w.selection.show_passage(0)
    view = w.inspector.article_view
    w.inspector.show_article()
    yield ("until", (lambda: view.article() is not None and not view.note.isVisible(), 120,
                     "the article"))
    yield ("sleep", 1200)
    save("history-article")

    # A search that finds the older answer of the first conversation, opened.
    sidebar.search(SEARCH)
    yield ("until", (lambda: bool(sidebar.hits()), 60, "search hits"))
    yield ("sleep", 800)
    item = next(sidebar.list.item(i) for i in range(sidebar.list.count())
                if sidebar.list.item(i).data(Qt.ItemDataRole.UserRole + 1) is not None)
    sidebar.list.itemActivated.emit(item)
    yield ("until", (lambda: w.selection.card is not None and "Roman"
                     in w.selection.card.question, 60, "the found answer"))
    w.inspector.tabs.setCurrentIndex(0)
    yield ("sleep", 1500)
    save("history-search")

    d = w.actions_by_name["settings"]
    d.trigger()
    from ragdesk.ui.settings_dialog import SettingsDialog

    dialog = w.findChild(SettingsDialog)
    yield ("until", (lambda: dialog is not None and dialog.isVisible(), 10, "settings"))
    yield ("sleep", 1200)
    save("settings-dialog", dialog)
    save("settings-window")
    dialog.reject()
    yield ("sleep", 300)
    w.close()
    yield ("sleep", 2000)
    QApplication.exit(0)  # static: the running application's event loop


def inside(args: argparse.Namespace) -> int:
    from screenshots import drive_app

    from ragdesk.core.app import AppContext

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    ctx = AppContext(Path(args.data_dir))
    ctx.settings.update({"theme": "light", "window_geometry": "", "window_state": "",
                         "mode": "token", "n_docs": 5, "num_beams": 1, "max_new_tokens": 24})
    return drive_app(ctx, lambda window: scenario(window, out, args.size))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="1440x900")
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--display", default=":96")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inside:
        return inside(args)
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
        with tempfile.TemporaryDirectory(prefix="ragdesk-shots-") as tmp:
            # The settings dialog shows this folder: a name that reads well in the README.
            data = copy_data(Path(args.data_dir), Path(tmp) / "ragdesk-demo")
            argv = ["--size", args.size, "--out", str(Path(args.out).resolve()),
                    "--data-dir", str(data), "--inside"]
            return subprocess.run([sys.executable, __file__, *argv], env=env,
                                  timeout=3000).returncode
    finally:
        wm.terminate()
        xvfb.terminate()
        wm.wait(10)
        xvfb.wait(10)


if __name__ == "__main__":
    sys.exit(main())
