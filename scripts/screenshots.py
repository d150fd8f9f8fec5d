"""Screenshots of the desktop app for README and docs, taken from the real app under Xvfb.

    .venv/bin/python scripts/screenshots.py [--data-dir DIR] [--out docs/screenshots] [--tiny]

1. Prepares a data directory (kept between runs, so the slow part happens once) for the
   offline starter pack (all-MiniLM-L6-v2 retriever, Gemma 3 270M generator): a snapshot of
   300 Wikipedia Vital Articles that includes the ones the questions are about (``--full``:
   the whole 10,000-article starter snapshot), a smaller second snapshot without the
   "Mount Everest" article for the compare view, and a JSONL file for the index manager's
   import. ``--tiny`` uses tiny random models instead (quick, but the answers are gibberish).
2. Starts Xvfb and runs the app's own ``run_app()`` on it with the xcb platform.
3. Types the questions with xdotool (real X key events: Ctrl+L, the text, Enter), picks a
   passage with Ctrl+<n>, hovers a token, opens the index manager (Ctrl+I) while an import
   runs, the compare dialog (Ctrl+Shift+K) and the first-run dialog, switches to the dark
   theme, and quits with Ctrl+Q.
4. Saves each picture from the X server's pixels (QScreen.grabWindow) to ``--out``.

Needs ``apt-get install xvfb xdotool``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUESTIONS = ("What is the Mona Lisa?", "What is the highest mountain on Earth?")
COMPARE_QUESTION = "What is the highest mountain on Earth?"
SCREEN = (1440, 900)


# ---- phase 1: the data directory ------------------------------------------------------------


def _printer() -> Any:
    from ragdesk.core.progress import terminal_printer

    return terminal_printer()


# Articles the pictures' questions are about; the rest of the sample is random.
TOPICS = ("Mona Lisa", "Leonardo da Vinci", "Jupiter", "Solar System", "Saturn", "Planet",
          "Mount Everest", "Himalayas", "K2", "Mountain", "Moon", "Australia", "Paris")
COMPARE_DROPS = ("Mount Everest",)  # what the second snapshot does not know


def _vital_rows() -> dict[str, str]:
    from ragdesk.core.snapshots import vital_articles_path

    data = json.loads(Path(vital_articles_path()).read_text(encoding="utf-8"))
    return {v["title"]: v["extract"] for v in data.values() if v.get("extract")}


def prepare_starter(data_dir: Path, articles: int, full: bool) -> None:
    """The starter pack's models over Vital Articles: the whole starter snapshot with
    ``full`` (10,000 articles; tens of minutes on a busy 2-core machine), else a sample of
    ``articles`` articles that includes the ones the questions are about."""
    import random

    from ragdesk.core import models
    from ragdesk.core.app import AppContext
    from ragdesk.core.models.starter import encoder_path
    from ragdesk.core.snapshots import import_snapshot

    ctx = AppContext(data_dir)
    ctx.data.ensure()
    try:
        ready = {s.name for s in ctx.catalog.list_snapshots() if s.state == "ready"}
        if full and not ready:
            print("building the starter snapshot (Vital Articles, all-MiniLM-L6-v2)…")
            models.ensure_starter_snapshot(ctx.data, ctx.catalog, progress=_printer())
        rows = _vital_rows()
        rng = random.Random(0)
        others = sorted(set(rows) - set(TOPICS))
        rng.shuffle(others)
        sample = [t for t in TOPICS if t in rows] + others[:max(0, articles - len(TOPICS))]
        wanted = [] if full else [("vital-sample", sample)]
        wanted.append(("vital-sample-small",
                       [t for t in sample[: len(TOPICS) + 60] if t not in COMPARE_DROPS]))
        for name, titles in wanted:
            if name in ready:
                continue
            path = data_dir.parent / f"{name}.jsonl"
            path.write_text("".join(json.dumps({"title": t, "text": rows[t]}) + "\n"
                                    for t in titles), encoding="utf-8")
            print(f"importing {name} ({len(titles)} articles)…")
            import_snapshot(ctx.data, ctx.catalog, path, name=name, encoder=str(encoder_path()),
                            default_pack="starter", progress=_printer())
        big = "vital-articles" if full else "vital-sample"
        if ctx.catalog.find_snapshot(big) is not None:
            ctx.catalog.set_active(big)
        ctx.settings.update({"model_pack": "starter"})
    finally:
        ctx.close()


def prepare_tiny(data_dir: Path) -> None:
    from ragdesk.core import models
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import import_snapshot
    from ragdesk.core.testing.tiny_models import TinyModels, build_tiny_models, sample_articles

    ctx = AppContext(data_dir)
    ctx.data.ensure()
    try:
        tiny_root = ctx.data.models_dir / "tiny"
        if not (tiny_root / "bart").exists():
            build_tiny_models(tiny_root)
        tiny = TinyModels(  # the folders build_tiny_models saved on an earlier run
            root=tiny_root, question_encoder=tiny_root / "dpr-question",
            ctx_encoder=tiny_root / "dpr-ctx", st_encoder=tiny_root / "st-encoder",
            bart=tiny_root / "bart", causal_lm=tiny_root / "causal-lm",
            rag_sequence=tiny_root / "rag-sequence", rag_token=tiny_root / "rag-token",
            corpus=())
        names = {s.name for s in ctx.catalog.list_snapshots()}
        arts = sample_articles(300)
        for name, rows in (("wiki-a", arts[:200]), ("wiki-b", arts[100:])):
            if name in names:
                continue
            path = data_dir / f"{name}.jsonl"
            path.write_text("".join(json.dumps({"title": t, "text": x}) + "\n"
                                    for t, x in rows), encoding="utf-8")
            import_snapshot(ctx.data, ctx.catalog, path, name=name,
                            encoder=str(tiny.ctx_encoder), progress=_printer())
        if ctx.catalog.active_snapshot() is None:
            ctx.catalog.set_active("wiki-a")
        if not any(p.name == "tiny" for p in ctx.catalog.list_model_packs()):
            models.register_pack(ctx.catalog, models.PackSpec(
                name="tiny", kind="custom", question_encoder=str(tiny.question_encoder),
                passage_encoder=str(tiny.ctx_encoder), generator=str(tiny.bart),
                generator_kind="seq2seq", description="Tiny random models (screenshots check)",
                encoder_family="dpr", encoder_dim=32))
        ctx.settings.update({"model_pack": "tiny"})
    finally:
        ctx.close()


def write_import_file(path: Path, n: int = 3000) -> None:
    """Passages the index manager imports while its picture is taken."""
    if path.exists():
        return
    from ragdesk.core.testing.tiny_models import sample_articles

    with path.open("w", encoding="utf-8") as fh:
        for title, text in sample_articles(n, seed=7):
            fh.write(json.dumps({"title": title, "text": text}) + "\n")


# ---- phase 2: inside the app ------------------------------------------------------------------

Step = Generator[tuple[str, Any], Any, None]


class Runner:
    """Runs a generator of steps without blocking the event loop.

    Steps: ``("sleep", ms)`` and ``("until", (predicate, timeout_s, what))``.
    """

    def __init__(self, steps: Step, on_error: Callable[[BaseException], None]) -> None:
        self.steps = steps
        self.on_error = on_error
        self._advance(None)

    def _advance(self, value: Any) -> None:
        from PySide6.QtCore import QTimer

        try:
            kind, arg = self.steps.send(value)
        except StopIteration:
            return
        except BaseException as exc:  # report and quit rather than hang
            self.on_error(exc)
            return
        if kind == "sleep":
            QTimer.singleShot(int(arg), lambda: self._advance(None))
        elif kind == "until":
            predicate, timeout, what = arg
            deadline = time.monotonic() + timeout

            def poll() -> None:
                try:
                    done = predicate()
                except BaseException as exc:
                    self.on_error(exc)
                    return
                if done:
                    self._advance(None)
                elif time.monotonic() > deadline:
                    self.on_error(TimeoutError(f"timed out waiting for {what}"))
                else:
                    QTimer.singleShot(100, poll)

            poll()



def drive_app(ctx: Any, scenario: Callable[[Any], Step], label: str = "drive") -> int:
    """Run the app on ``ctx`` with ``scenario(window)`` stepping through it once the window is
    shown; a step that raises is reported on stderr and quits with 2 instead of leaving the
    app open."""
    from PySide6.QtWidgets import QApplication

    from ragdesk.ui.app import run_app

    failures: list[BaseException] = []

    def on_error(exc: BaseException) -> None:
        failures.append(exc)
        print(f"{label}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        QApplication.exit(2)

    def on_shown(window: Any) -> None:
        window._drive = Runner(scenario(window), on_error)

    code = run_app(ctx, on_shown=on_shown)
    return 2 if failures else code

def xdo(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["xdotool", *args])


def scenario(window: Any, out: Path, import_file: Path, tiny: bool) -> Step:
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication, QWidget

    from ragdesk.ui.import_dialog import ImportSpec
    from ragdesk.ui.ops import Lane

    screen = QGuiApplication.primaryScreen()

    def save(name: str, rect: QRect) -> None:
        pix = screen.grabWindow(0, rect.x(), rect.y(), rect.width(), rect.height())
        pix.save(str(out / name))
        print(f"saved {out / name} ({rect.width()}x{rect.height()})", flush=True)

    def global_rect(w: QWidget) -> QRect:
        return QRect(w.mapToGlobal(QPoint(0, 0)), w.size())

    def focus(target: QWidget) -> Step:
        yield from run("windowfocus", "--sync", str(int(target.winId())))
        yield ("until", (lambda: target.isActiveWindow(), 10, "the window to become active"))

    def run(*args: str) -> Step:
        print("xdotool", *args, flush=True)
        proc = xdo(*args)
        yield ("until", (lambda: proc.poll() is not None, 60, f"xdotool {args}"))

    w = window
    w.setGeometry(0, 0, *SCREEN)
    yield ("until", (lambda: w.isVisible() and w._first_load_done, 60, "the snapshot list"))
    # Without a window manager nobody gives the window the keyboard: take it (XSetInputFocus).
    yield from focus(w)
    yield ("sleep", 500)

    for q in QUESTIONS:
        yield from run("key", "--clearmodifiers", "ctrl+l")
        yield from run("type", "--delay", "25", q)
        yield from run("key", "Return")
        yield ("until", (lambda: w.chat.cards and w.chat.cards[-1].state in ("done", "failed",
                                                                          "cancelled"),
                         900, f"the answer to {q!r}"))
        if w.chat.cards[-1].state != "done":
            raise RuntimeError(f"answering {q!r} ended as {w.chat.cards[-1].state}: "
                               f"{w.chat.cards[-1].status_label.text()}")
        yield ("sleep", 400)

    # Pick the passage that the answer owes most, as a user would with Ctrl+<n>.
    card = w.chat.cards[-1]
    answer = card.answer
    shares = [0] * len(answer.docs)
    for t in answer.tokens:
        shares[t.source] += 1
    k = max(range(len(shares)), key=shares.__getitem__)
    yield from run("key", "--clearmodifiers", f"ctrl+{k + 1}")
    yield ("sleep", 600)
    save("main-window.png", w.frameGeometry())
    save("passage-inspector.png", global_rect(w.inspector_dock))
    save("heatmap.png", global_rect(w.heatmap_dock))

    # Hover a token to show its distribution over the passages.
    i = max(range(len(card.tokens)), key=lambda j: max(card.tokens[j].posterior))
    r = card.text.token_rect(i)
    p = card.text.viewport().mapToGlobal(r.center().toPoint())
    yield from run("mousemove", str(p.x()), str(p.y()))
    yield ("sleep", 1500)
    area = global_rect(card).adjusted(-10, -10, 330, 240).intersected(w.frameGeometry())
    save("token-tooltip.png", area)
    yield from run("mousemove", "5", str(SCREEN[1] - 5))
    yield ("sleep", 300)

    # The index manager while an import runs.
    yield from focus(w)
    yield from run("key", "--clearmodifiers", "ctrl+i")
    yield ("until", (lambda: w.index_manager is not None and w.index_manager.isVisible(), 20,
                     "the index manager"))
    m = w.index_manager
    encoder = next((pk.passage_encoder for pk in w.state.packs if pk.name == w.state.pack), None)
    m.start_import(ImportSpec(str(import_file), "more-articles", encoder or "", "jsonl", None))
    yield ("until", (lambda: m.job_panel.last_update is not None
                     and "encod" in m.job_panel.last_update.message
                     and m.job_panel.last_update.rate is not None
                     and m.job_panel.last_update.done > 0, 600, "encoding progress"))
    yield ("sleep", 1500 if not tiny else 300)
    yield ("until", (lambda: m.job_panel.last_update is not None, 5, "progress"))
    save("index-manager.png", m.frameGeometry())
    w.ops.cancel(Lane.JOBS)
    yield ("until", (lambda: not w.ops.busy(Lane.JOBS), 300, "the import to stop"))
    yield from run("key", "Escape")
    yield ("sleep", 300)

    # Compare two snapshots.
    usable = [s for s in w.state.snapshots if s.ready and not s.unusable_reason]
    if len(usable) >= 2:
        yield from focus(w)
        yield from run("key", "--clearmodifiers", "ctrl+shift+k")
        yield ("until", (lambda: w.compare_dialog is not None and w.compare_dialog.isVisible(),
                         20, "the compare dialog"))
        d = w.compare_dialog
        d.setGeometry(40, 40, 1280, 460)
        d.question.clear()
        big = max(usable, key=lambda s: s.passages)
        small = min(usable, key=lambda s: s.passages)
        d.set_pair(big.name, small.name)
        yield from focus(d)
        d.question.setFocus()
        yield from run("type", "--delay", "25", COMPARE_QUESTION)
        yield from run("key", "Return")
        yield ("until", (lambda: all(c is not None and c.state in ("done", "failed")
                                     for c in d.cards), 900, "both compare answers"))
        yield ("sleep", 500)
        save("compare.png", d.frameGeometry())
        d.close()

    # Dark theme: the heat map and the whole window.
    w.apply_theme("dark")
    yield ("sleep", 800)
    save("main-window-dark.png", w.frameGeometry())
    save("heatmap-dark.png", global_rect(w.heatmap_dock))
    w.apply_theme("light")
    yield ("sleep", 300)

    # The first-run dialog as a new user sees it.
    fr = w.open_first_run()
    yield ("until", (lambda: fr.isVisible(), 10, "the first-run dialog"))
    yield ("sleep", 500)
    save("first-run.png", fr.frameGeometry())
    fr.reject()
    yield ("sleep", 200)

    yield from focus(w)
    yield from run("key", "--clearmodifiers", "ctrl+q")
    yield ("sleep", 3000)
    QApplication.exit(3)  # Ctrl+Q did not close the window: a failure


def inside(args: argparse.Namespace) -> int:

    from ragdesk.core.app import AppContext
    from ragdesk.core.logging_setup import setup_logging

    ctx = AppContext(args.data_dir)
    setup_logging(ctx.data.logs_dir, 1)
    # A fixed window and the light theme for every run; the user's layout is not restored.
    ctx.settings.update({"theme": "light", "window_geometry": "", "window_state": "",
                         "mode": "token", "n_docs": 5, "num_beams": 1,
                         "max_new_tokens": 24})
    return drive_app(ctx, lambda window: scenario(window, Path(args.out),
                                                  Path(args.import_file), args.tiny),
                     "screenshots")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default="/tmp/ragdesk-screenshots/data")
    ap.add_argument("--out", default=str(REPO / "docs" / "screenshots"))
    ap.add_argument("--tiny", action="store_true", help="tiny random models (fast check)")
    ap.add_argument("--display", default=":91")
    ap.add_argument("--size", default="1440x900",
                    help="screen and window size, WxH (the README's pictures: 1440x900)")
    ap.add_argument("--articles", type=int, default=300,
                    help="Vital Articles in the sample snapshot (default 300)")
    ap.add_argument("--full", action="store_true",
                    help="build the whole starter snapshot instead of a sample")
    ap.add_argument("--import-file", default="")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    global SCREEN
    width, height = (int(v) for v in args.size.lower().split("x"))
    SCREEN = (width, height)
    data_dir = Path(args.data_dir)
    if args.tiny and args.data_dir == ap.get_default("data_dir"):
        data_dir = Path("/tmp/ragdesk-screenshots/tiny-data")
        args.data_dir = str(data_dir)
    if not args.import_file:
        args.import_file = str(data_dir.parent / "import-sample.jsonl")
    if args.inside:
        return inside(args)

    for tool in ("Xvfb", "xdotool"):
        if shutil.which(tool) is None:
            print(f"{tool} is missing: apt-get install xvfb xdotool", file=sys.stderr)
            return 1
    os.environ["HF_HUB_OFFLINE"] = "1"
    data_dir.mkdir(parents=True, exist_ok=True)
    if args.tiny:
        prepare_tiny(data_dir)
    else:
        prepare_starter(data_dir, args.articles, args.full)
    write_import_file(Path(args.import_file))
    Path(args.out).mkdir(parents=True, exist_ok=True)

    xvfb = subprocess.Popen(["Xvfb", args.display, "-screen", "0",
                             f"{SCREEN[0]}x{SCREEN[1]}x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(1.5)
        env = dict(os.environ, DISPLAY=args.display, QT_QPA_PLATFORM="xcb",
                   QT_SCALE_FACTOR="1", QT_AUTO_SCREEN_SCALE_FACTOR="0")
        cmd = [sys.executable, __file__, "--inside", "--data-dir", str(data_dir),
               "--out", args.out, "--import-file", args.import_file,
               "--display", args.display, "--size", args.size] + (["--tiny"] if args.tiny else [])
        proc = subprocess.run(cmd, env=env, timeout=3600)
        return proc.returncode
    finally:
        xvfb.terminate()
        xvfb.wait(10)


if __name__ == "__main__":
    sys.exit(main())
