"""One picture of the real window answering questions: the app under Xvfb and openbox, the
questions typed with xdotool, one cited passage opened in the inspector, the whole screen
saved.

    .venv/bin/python scripts/answer_screenshots.py --data-dir DIR --out PNG [--size WxH]
        [--question Q]... [--retriever dense|sparse|hybrid] [--passage TITLE-PART [--page]]

The answers start a new conversation (the one the data directory showed last stays saved);
``settings.json`` is put back as it was afterwards, so the user's layout, theme and last
conversation are kept. ``--passage``: open the last answer's first passage whose title
contains it (else the one the answer owes most); ``--page``: wait until the inspector shows
its file and page (a folder of documents). ``--make-docs FOLDER`` writes the README's
example folder (two PDFs and a Markdown file about made-up things). Needs xvfb, openbox, xdotool.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))


HARBOR_PAGES = [
    ("Northbay Harbor Survey 2026", [
        "This survey describes the harbor works of Northbay in the spring of 2026: the "
        "breakwater, the ferry landing and the lighthouses that guide boats past the reefs.",
        "The harbor board commissioned it after the storms of the previous winter damaged "
        "the outer breakwater and two of the mooring lines."]),
    ("Lighthouses", [
        "The tidal lighthouse at Kelp Point was rebuilt in 1987 by the engineer Mara "
        "Lindqvist, who raised its tower by four metres so that its lamp clears the spray "
        "of winter storms.",
        "Its light flashes green every six seconds and is seen eleven nautical miles out. "
        "The older lighthouse on Gull Rock has been dark since 1952 and is now a museum."]),
    ("Ferry landing", [
        "The ferry landing was lengthened by twenty metres in 2019. Two ferries call at it "
        "each hour in summer and every two hours in winter."]),
]
ORCHARD_PAGES = [
    ("Orchard Handbook", [
        "The orchard grows nine apple varieties on the south slope of Hollow Hill. Each "
        "row is pruned in February, before the buds swell."]),
    ("Varieties", [
        "The Copper Russet ripens in late September and keeps until March in a cool "
        "cellar. The Blue Pearmain is picked in early October and is best eaten at once.",
        "Pollination is by the orchard's own bees, kept in twelve hives by the north "
        "fence."]),
]
TEA_NOTES = """# Tea brewing notes

## Green tea

Brew green tea at 75 degrees for two minutes; boiling water makes it bitter. A second
infusion needs thirty seconds more.

## Black tea

Black tea takes water just off the boil and four minutes. The team's favourite is the
smoky Lapsang from the corner shop.
"""


def make_docs(folder: Path) -> None:
    """A small folder of made-up documents: two PDFs and a Markdown file."""
    import textwrap

    from tests.documents.makers import write_pdf

    folder.mkdir(parents=True, exist_ok=True)
    for name, title, pages in (("harbor-survey.pdf", "Northbay Harbor Survey 2026",
                                HARBOR_PAGES),
                               ("orchard-handbook.pdf", "Orchard Handbook", ORCHARD_PAGES)):
        write_pdf(folder / name, [[head, "", *(line for para in paras
                                               for line in [*textwrap.wrap(para, 80), ""])]
                                  for head, paras in pages], title=title)
    (folder / "tea-notes.md").write_text(TEA_NOTES, encoding="utf-8")


def pick_passage(card: Any, title_part: str | None) -> int:
    """The passage of ``card``'s answer whose title holds ``title_part``, else the one the
    inspector opens on."""
    from ragdesk.ui.inspector import opening_passage

    if title_part:
        for k, doc in enumerate(card.answer.docs):
            if title_part.lower() in doc.title.lower():
                return k
    return opening_passage(card.answer, card.guess_hidden)


def import_folder(w: Any, args: argparse.Namespace) -> Any:
    """The index manager importing a folder of documents, its result in the message line."""
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from ragdesk.ui.import_dialog import ImportSpec

    m = w.open_index_manager()
    yield ("until", (lambda: m.isVisible() and m.snapshots, 60, "the index manager"))
    pack = w.state.pack_info()
    m.start_import(ImportSpec(args.import_folder, args.import_name,
                              pack.passage_encoder if pack else "", "docs", None))
    yield ("until", (lambda: not w.ops.busy() and m.message.text(), 900, "the import"))
    m.select(args.import_name)
    yield ("sleep", 1200)
    r = m.frameGeometry()
    QGuiApplication.primaryScreen().grabWindow(0, r.x(), r.y(), r.width(), r.height()).save(
        args.out)
    print("saved", args.out, m.message.text(), flush=True)
    w.close()
    QApplication.exit(0)


def scenario(w: Any, args: argparse.Namespace) -> Any:
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication
    from screenshots import xdo

    width, height = (int(v) for v in args.size.split("x"))

    def run(*a: str) -> Any:
        proc = xdo(*a)
        yield ("until", (lambda: proc.poll() is not None, 60, f"xdotool {a}"))

    w.showMaximized()
    yield ("until", (lambda: w.isVisible() and w._first_load_done, 120, "snapshots"))
    yield ("sleep", 1500)
    if args.import_folder:
        yield from import_folder(w, args)
        return
    w.new_conversation()
    if args.no_heatmap:
        w.heatmap_dock.hide()  # the chat gets the whole height: every answer in view
    yield from run("windowfocus", "--sync", str(int(w.winId())))
    yield ("until", (lambda: w.isActiveWindow(), 10, "the window to become active"))
    for q in args.question:
        yield from run("key", "--clearmodifiers", "ctrl+l")
        yield from run("type", "--delay", "20", q)
        yield from run("key", "Return")
        yield ("until", (lambda: w.chat.cards and w.chat.cards[-1].state in (
            "done", "failed", "cancelled"), 1200, f"the answer to {q!r}"))
        card = w.chat.cards[-1]
        if card.state != "done":
            raise RuntimeError(f"{q!r} ended as {card.state}: {card.status_label.text()}")
        print(f"{q!r} -> {card.answer.text!r}", flush=True)
        yield ("sleep", 500)
        if args.show_guess and card.answer.abstained:
            card.verdict.guess_button.click()  # the best guess, one click away
            yield ("sleep", 300)
        if args.each:
            yield from shoot(w, args, pick_passage(card, args.passage),
                             args.out.replace(".png", f"-{args.question.index(q) + 1}.png"))
    if args.each:
        w.close()
        QApplication.exit(0)
        return
    k = pick_passage(w.chat.cards[-1], args.passage)
    yield from run("key", "--clearmodifiers", f"ctrl+{k + 1}")
    if args.page:
        yield ("until", (lambda: w.inspector.place() is not None, 30, "the cited page"))
    yield ("sleep", 1200)
    pix = QGuiApplication.primaryScreen().grabWindow(0, 0, 0, width, height)
    pix.save(args.out)
    print("saved", args.out, flush=True)
    w.close()
    QApplication.exit(0)


def shoot(w: Any, args: argparse.Namespace, k: int, out: str) -> Any:
    """Open passage ``k`` of the newest answer and save the screen to ``out``."""
    from PySide6.QtGui import QGuiApplication
    from screenshots import xdo

    proc = xdo("key", "--clearmodifiers", f"ctrl+{k + 1}")
    yield ("until", (lambda: proc.poll() is not None, 60, "xdotool ctrl+N"))
    yield ("sleep", 1200)
    width, height = (int(v) for v in args.size.split("x"))
    QGuiApplication.primaryScreen().grabWindow(0, 0, 0, width, height).save(out)
    print("saved", out, flush=True)


def inside(args: argparse.Namespace) -> int:
    from screenshots import drive_app

    from ragdesk.core.app import AppContext

    ctx = AppContext(Path(args.data_dir))
    values: dict[str, Any] = {"theme": "light", "window_geometry": "", "window_state": ""}
    if args.retriever:
        values["retriever"] = args.retriever
    ctx.settings.update(values)
    return drive_app(ctx, lambda window: scenario(window, args))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--make-docs", metavar="FOLDER",
                    help="write the example folder of documents there and exit")
    ap.add_argument("--data-dir")
    ap.add_argument("--out")
    ap.add_argument("--size", default="1440x900")
    ap.add_argument("--question", action="append", default=[])
    ap.add_argument("--retriever", choices=("dense", "sparse", "hybrid"))
    ap.add_argument("--passage", help="open the passage whose title contains this")
    ap.add_argument("--page", action="store_true",
                    help="wait until the inspector shows the passage's page (documents)")
    ap.add_argument("--no-heatmap", action="store_true", help="hide the heat map dock")
    ap.add_argument("--show-guess", action="store_true",
                    help="click 'Show the guess' on answers that say 'not found'")
    ap.add_argument("--each", action="store_true",
                    help="a picture after each answer: OUT-1.png, OUT-2.png, ...")
    ap.add_argument("--import-folder", metavar="FOLDER",
                    help="instead of asking: the index manager importing FOLDER")
    ap.add_argument("--import-name", default="team-docs")
    ap.add_argument("--display", default=":96")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.make_docs:
        make_docs(Path(args.make_docs))
        return 0
    if not (args.data_dir and args.out and (args.question or args.import_folder)):
        ap.error("--data-dir, --out and --question (or --import-folder) are needed")
    if args.inside:
        return inside(args)
    settings = Path(args.data_dir) / "settings.json"
    kept = settings.read_bytes() if settings.exists() else None
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
        return subprocess.run(cmd, env=env, timeout=3000).returncode
    finally:
        if kept is not None:
            settings.write_bytes(kept)  # the user's layout, theme and last conversation
        wm.terminate()
        xvfb.terminate()
        wm.wait(10)
        xvfb.wait(10)


if __name__ == "__main__":
    sys.exit(main())
