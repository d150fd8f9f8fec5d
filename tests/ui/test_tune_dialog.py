"""Index ▸ Tune the retriever…: the file checked before anything trains, the job on the jobs
lane with its steps, Cancel leaving Resume, and the tuned pack offered and used."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt

from ragdesk.core.progress import TrainingUpdate
from ragdesk.ui.ops import Lane
from ragdesk.ui.tune_dialog import CHECK_TITLE, TUNE_TITLE, TuneDialog, open_tune_dialog
from tests.ui.conftest import A_ARTICLES
from tests.ui.probes import answer_packs

TIMEOUT_MS = 120_000


def _questions(tmp_path: Path, tiny_models: Any) -> Path:
    """Questions about the articles of wiki-a: most answered by a word of nearly every
    passage, some by a word of none."""
    titles = [t for t, _ in tiny_models.corpus[A_ARTICLES]][:24]
    rows = [{"question": f"what is {t}?", "answer": ["of"]} for t in titles]
    rows += [{"question": f"who wrote {t}?", "answer": ["zzqxv"]} for t in titles[:4]]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _text(label: Any) -> str:
    return str(label.text())


def _open(qtbot: Any, w: Any) -> TuneDialog:
    act = w.actions_by_name["tune"]
    assert act in w.index_menu.menu.actions()  # reached from the Index menu
    act.trigger()
    d: TuneDialog | None = w.findChild(TuneDialog)
    assert d is not None and d.isVisible()
    qtbot.waitUntil(lambda: d.defaults is not None, timeout=30_000)
    return d


def _expected_check(w: Any, path: Path) -> tuple[int, int]:
    """(the questions the core's check counts, the depth training selects them at: the
    passages objective's, or all of wiki-a when it holds fewer passages)."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import open_snapshot
    from ragdesk.core.training.config import PASSAGES_DEPTH
    from ragdesk.core.training.tune import check_questions

    ctx = AppContext(w.backend.data.root)
    try:
        index = open_snapshot(ctx.data, ctx.catalog, "wiki-a")
        try:
            size = int(index.size)
        finally:
            index.close()
        n = check_questions(ctx.data, ctx.catalog, path, pack="tiny").answerable
        return n, min(PASSAGES_DEPTH, size)
    finally:
        ctx.close()


def test_the_file_is_checked_before_anything_trains(qtbot: Any, window: Any,
                                                    tmp_path: Path, tiny_models: Any) -> None:
    w = window
    d = _open(qtbot, w)
    assert not d.start_button.isEnabled()  # nothing chosen yet
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "who?", "answer": ["a"]}\n{"question": 3}\n')
    titles: list[str] = []
    w.ops.events(Lane.JOBS).started.connect(lambda op: titles.append(op.title))
    d.choose_file(str(bad))
    qtbot.waitUntil(lambda: "line 2" in _text(d.check_label), timeout=TIMEOUT_MS)
    assert "question" in _text(d.check_label) and "Traceback" not in _text(d.check_label)
    assert d.check_label.property("error") is True and not d.start_button.isEnabled()
    assert titles == [CHECK_TITLE]  # on the jobs lane: it loads the question encoder

    good = _questions(tmp_path, tiny_models)
    d.choose_file(str(good))
    qtbot.waitUntil(lambda: d.check is not None, timeout=TIMEOUT_MS)
    n, depth = _expected_check(w, good)
    assert 0 < n <= 24  # the four answers no passage holds are not counted
    assert d.check is not None and d.check.depth == depth > 5  # not K: training's depth
    have = "has" if n == 1 else "have"
    assert _text(d.check_label) == (f"28 questions; {n} {have} a gold answer in the top "
                                    f"{depth} passages of wiki-a and can teach the retriever.")
    assert d.check_label.property("error") is False
    qtbot.waitUntil(d.start_button.isEnabled, timeout=30_000)
    assert d.start_button.text() == "&Start"
    # what happens, in the intro: the passages objective, without the reader
    intro = _text(d.intro)
    assert "hold a gold answer first" in intro and "reader is not even loaded" in intro
    assert "minutes" in intro and "through its reader" not in intro
    # the recipe's choices (the passages objective's), shown with their units
    assert d.epochs.value() == 6 and d.epochs.text() == "6 epochs"
    d.epochs.setValue(1)
    assert d.epochs.text() == "1 epoch"
    assert d.lr.currentText() == "2e-5  (default)" and d.held_out.value() == 20
    assert [d.lr.itemData(i) for i in range(d.lr.count())] == [1e-5, 2e-5, 5e-5, 1e-4]


def _gate_after_first_step(w: Any, monkeypatch: pytest.MonkeyPatch
                           ) -> tuple[threading.Event, threading.Event, list[list[Any]]]:
    """The job pauses once, on its worker, when its first step is done, until ``gate`` opens:
    so Cancel lands between steps whatever the machine's speed. Every run's updates are
    kept."""
    real = w.backend.tune
    reached, gate = threading.Event(), threading.Event()
    runs: list[list[Any]] = []

    def tune(path: str, pack: str, choices: Any, progress: Any, cancel: Any) -> Any:
        seen: list[Any] = []
        runs.append(seen)

        def watched(u: Any) -> None:
            seen.append(u)
            progress(u)
            if isinstance(u, TrainingUpdate) and u.step == 1 and not reached.is_set():
                reached.set()
                gate.wait(60)

        return real(path, pack, choices, watched, cancel)

    monkeypatch.setattr(w.backend, "tune", tune)
    return reached, gate, runs


def test_a_tuning_job_runs_cancels_resumes_and_offers_the_tuned_pack(
        qtbot: Any, window: Any, tmp_path: Path, tiny_models: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = window
    reached, gate, runs = _gate_after_first_step(w, monkeypatch)
    d = _open(qtbot, w)
    d.choose_file(str(_questions(tmp_path, tiny_models)))
    qtbot.waitUntil(d.start_button.isEnabled, timeout=TIMEOUT_MS)
    d.epochs.setValue(2)
    qtbot.mouseClick(d.start_button, Qt.MouseButton.LeftButton)
    assert not d.start_button.isEnabled() and not d.epochs.isEnabled()  # one job at a time
    qtbot.waitUntil(reached.is_set, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: w.ops.current(Lane.JOBS) is not None
                    and w.ops.current(Lane.JOBS).title == TUNE_TITLE, timeout=30_000)
    assert d.job_panel.isVisible() and d.job_panel.cancel_button.isEnabled()
    qtbot.mouseClick(d.job_panel.cancel_button, Qt.MouseButton.LeftButton)
    gate.set()
    qtbot.waitUntil(lambda: d.job is None and d.start_button.text() == "&Resume",
                    timeout=TIMEOUT_MS)
    assert d.resume_step == 1
    assert _text(d.message) == ("Cancelled after 1 step, kept in a checkpoint: Resume "
                                "continues from there.")
    assert "tiny-tuned" not in {p.name for p in w.state.packs}
    first = runs[0]
    stages = [u.stage for u in first]
    assert stages[0] == "Loading the models"
    assert "Training the question encoder" in stages

    qtbot.mouseClick(d.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.job is None and d.outcome is not None, timeout=TIMEOUT_MS)
    r = d.outcome
    assert r is not None and r.pack == "tiny-tuned" and r.base_pack == "tiny"
    assert r.top_k_before is not None and r.top_k_after is not None
    trained = [u for u in runs[1] if u.stage == "Training the question encoder"]
    assert trained[0].done == 1  # resumed from the checkpoint's step
    assert trained[-1].done == trained[-1].total == r.steps == 2 * -(-r.trained_on // 16)
    # the steps line shows what the last update said, in the dialog's words
    assert _text(d.steps).startswith(f"Step {r.steps:,} of {r.steps:,}  ·  loss ")
    assert f"held-out top-5 {r.top_k_after * 100:.1f}%" in _text(d.steps)
    measured = (f"Held-out top-5 (6 questions): {r.top_k_before * 100:.1f}% → "
                f"{r.top_k_after * 100:.1f}% after {r.steps} steps on {r.trained_on} questions.")
    # the tiny random models may well gain nothing; the dialog then says so
    note = r.no_gain_note()
    assert _text(d.message) == (measured if note is None
                                else f"{measured}<br><b>No gain.</b> {note}")
    qtbot.waitUntil(lambda: d.start_button.text() == "&Start", timeout=30_000)  # done
    assert not d.start_button.isEnabled()  # the same job again would only repeat it
    d.epochs.setValue(3)
    assert d.start_button.isEnabled()
    d.epochs.setValue(2)
    assert not d.start_button.isEnabled()

    # the tuned pack beside the one in use; choosing it answers the next question with it
    assert d.use_tuned.isVisible()
    assert d.use_tuned.text() == "&Use tiny-tuned" + ("" if r.gained else " anyway")
    # every text of the end state fits a 1280x720 screen at the dialog's narrowest
    layout = d.layout()
    assert layout is not None
    assert layout.totalHeightForWidth(d.minimumWidth()) <= 720 - 40
    assert d.keep_base.isVisible() and d.keep_base.text() == "&Keep tiny"
    qtbot.waitUntil(lambda: "tiny-tuned" in {p.name for p in w.state.packs}, timeout=30_000)
    asked = answer_packs(w, monkeypatch)
    qtbot.mouseClick(d.use_tuned, Qt.MouseButton.LeftButton)
    assert w.state.pack == "tiny-tuned"
    qtbot.waitUntil(lambda: w.backend.ctx.settings.get("model_pack") == "tiny-tuned",
                    timeout=30_000)
    qtbot.waitUntil(lambda: w.controls.pack.findData("tiny-tuned") >= 0, timeout=30_000)
    w.question.setPlainText("what is the capital of france?")
    w.send()
    qtbot.waitUntil(lambda: bool(asked), timeout=TIMEOUT_MS)
    assert asked == ["tiny-tuned"]


def test_the_dialog_is_one_per_window(qtbot: Any, window: Any) -> None:
    w = window
    d = _open(qtbot, w)
    assert open_tune_dialog(w, w.state, w.ops, w.library, w.backend) is d
