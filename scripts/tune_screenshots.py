"""Pictures of Index ▸ Tune the retriever…, run inside an X server (``xshot`` starts one):
the file checked, the job's progress, the dialog after Cancel (Resume offered) and the end
(held-out top-5 before and after, the tuned pack offered).

    ../shared/tools/xshot -s 1440x900 -w 240 -- .venv/bin/python scripts/tune_screenshots.py \\
        --data-dir /tmp/tune-shots/data --out-dir docs/screenshots --size 1440x900

Saves ``tune-check-WxH.png``, ``tune-progress-WxH.png``, ``tune-cancelled-WxH.png`` and
``tune-result-WxH.png``. The models are the tests' tiny random ones (scripts/screenshots.py
--tiny's data folder), so the pictures check the layout, not the accuracy; each step is
slowed to a quarter second so that the progress can be seen.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

STEP_DELAY_S = 0.25


def write_questions(path: Path) -> Path:
    """Questions about the tiny snapshot's articles: most answered by a word of nearly every
    passage, some by a word of none (so the check has something to leave out)."""
    from ragdesk.core.testing.tiny_models import sample_articles

    titles = [t for t, _ in sample_articles(300)[:200]][:60]
    rows = [{"question": f"what is {t} known for?", "answer": ["of"]} for t in titles[:48]]
    rows += [{"question": f"who first described {t}?", "answer": ["zzqxv"]}
             for t in titles[48:]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def slow_steps(backend: Any) -> threading.Event:
    """Each training step shown for a moment; the returned event pauses the job (on its
    worker) while it is clear, so a picture catches it mid-way."""
    from ragdesk.core.progress import TrainingUpdate

    real = backend.tune
    running = threading.Event()
    running.set()

    def tune(path: str, pack: str, choices: Any, progress: Any, cancel: Any) -> Any:
        def shown(u: Any) -> None:
            progress(u)
            if isinstance(u, TrainingUpdate) and u.stage.startswith("Training") and u.step:
                time.sleep(STEP_DELAY_S)
                running.wait(60)

        return real(path, pack, choices, shown, cancel)

    backend.tune = tune
    return running


def scenario(w: Any, args: argparse.Namespace, questions: Path) -> Any:
    from PySide6.QtGui import QGuiApplication
    from PySide6.QtWidgets import QApplication

    from ragdesk.ui.tune_dialog import TuneDialog

    width, height = (int(v) for v in args.size.split("x"))
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)

    def shoot(step: str) -> None:
        path = out / f"tune-{step}-{args.size}.png"
        QGuiApplication.primaryScreen().grabWindow(0, 0, 0, width, height).save(str(path))
        print("saved", path, flush=True)

    running = slow_steps(w.backend)
    w.showMaximized()
    yield ("until", (lambda: w.isVisible() and w._first_load_done, 120, "snapshots"))
    yield ("sleep", 1000)
    w.actions_by_name["tune"].trigger()
    d = w.findChild(TuneDialog)
    yield ("until", (lambda: d.defaults is not None, 30, "the defaults"))
    d.choose_file(str(questions))
    yield ("until", (lambda: d.check is not None and d.start_button.isEnabled(), 120,
                     "the check"))
    d.epochs.setValue(3)
    yield ("sleep", 800)
    shoot("check")
    d.start_button.click()
    yield ("until", (lambda: d.steps.text().startswith("Step ")
                     and int(d.steps.text().split()[1]) >= 4, 300, "a few steps"))
    running.clear()  # hold the job still for the picture
    yield ("sleep", 800)
    shoot("progress")
    d.job_panel.cancel_button.click()
    running.set()
    yield ("until", (lambda: d.job is None and d.start_button.text() == "&Resume", 120,
                     "the cancel"))
    yield ("sleep", 800)
    shoot("cancelled")
    d.start_button.click()
    yield ("until", (lambda: d.job is None and d.outcome is not None, 600, "the end"))
    yield ("sleep", 800)
    shoot("result")
    print("message:", d.message.text(), flush=True)
    w.close()
    QApplication.exit(0)


def inside(args: argparse.Namespace) -> int:
    from screenshots import drive_app, prepare_tiny

    from ragdesk.core.app import AppContext

    data = Path(args.data_dir)
    prepare_tiny(data)
    questions = write_questions(data.parent / "tune-questions.jsonl")
    ctx = AppContext(data)
    ctx.settings.update({"theme": "light", "window_geometry": "", "window_state": ""})
    return drive_app(ctx, lambda window: scenario(window, args, questions))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--out-dir", required=True)
    ap.add_argument("--size", default="1440x900")
    return inside(ap.parse_args())


if __name__ == "__main__":
    sys.exit(main())
