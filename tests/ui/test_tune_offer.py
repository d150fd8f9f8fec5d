"""The tune dialog after a job: the tuned pack offered, used and left again with buttons that
say what they do; a run that measured no gain not recommended; the form reached from the
keyboard; the file chooser opening somewhere sensible; the check's status line not lingering.

The job itself is replaced by its result (tests/ui/test_tune_dialog.py runs real ones): what
is tested here is what the dialog does with a result."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QLabel

from ragdesk.core.training.tune import TuneResult
from ragdesk.ui.ops import Lane
from ragdesk.ui.tune_dialog import TuneDialog
from tests.ui.conftest import A_ARTICLES

TIMEOUT_MS = 120_000


def _questions(tmp_path: Path, tiny_models: Any) -> Path:
    titles = [t for t, _ in tiny_models.corpus[A_ARTICLES]][:12]
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps({"question": f"what is {t}?", "answer": ["of"]}) + "\n"
                            for t in titles), encoding="utf-8")
    return path


def _register_tuned(w: Any, tiny_models: Any) -> None:
    """A pack "tiny-tuned" beside "tiny", as a finished job leaves it: the base pack's parts
    and no reading mode of its own."""
    from ragdesk.core import models

    models.register_pack(w.backend.ctx.catalog, models.PackSpec(
        name="tiny-tuned", kind="custom", question_encoder=str(tiny_models.question_encoder),
        passage_encoder=str(tiny_models.ctx_encoder), generator=str(tiny_models.bart),
        generator_kind="seq2seq", description="tiny, tuned", encoder_family="dpr",
        encoder_dim=32))


def _open(qtbot: Any, w: Any) -> TuneDialog:
    w.actions_by_name["tune"].trigger()
    d: TuneDialog | None = w.findChild(TuneDialog)
    assert d is not None
    qtbot.waitUntil(lambda: d.defaults is not None, timeout=30_000)
    return d


def _finished(qtbot: Any, w: Any, tmp_path: Path, tiny_models: Any,
              monkeypatch: pytest.MonkeyPatch, before: float, after: float,
              held_out: int = 6) -> TuneDialog:
    """The tune dialog after a job that measured ``before`` → ``after``."""
    _register_tuned(w, tiny_models)
    result = TuneResult(pack="tiny-tuned", base_pack="tiny", snapshot="wiki-a", k=5,
                        top_k_before=before, top_k_after=after, steps=4, trained_on=10,
                        held_out=held_out, folder=tmp_path / "job")
    monkeypatch.setattr(w.backend, "tune", lambda *_a, **_k: result)
    d = _open(qtbot, w)
    d.choose_file(str(_questions(tmp_path, tiny_models)))
    qtbot.waitUntil(d.start_button.isEnabled, timeout=TIMEOUT_MS)
    qtbot.mouseClick(d.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.job is None and d.outcome is not None, timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: w.controls.pack.findData("tiny-tuned") >= 0, timeout=30_000)
    return d


def _message(d: Any) -> str:
    return str(d.message.text())


def test_use_then_back_follow_the_pack_in_use_and_keep_the_result(
        qtbot: Any, window: Any, tmp_path: Path, tiny_models: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = window
    w.controls.mode.setCurrentIndex(w.controls.mode.findData("sequence"))  # picked for tiny
    d = _finished(qtbot, w, tmp_path, tiny_models, monkeypatch, 0.2, 0.5)
    result_line = "Held-out top-5 (6 questions): 20.0% → 50.0% after 4 steps on 10 questions."
    assert _message(d) == result_line
    assert d.use_tuned.text() == "&Use tiny-tuned" and d.use_tuned.isDefault()
    assert d.keep_base.text() == "&Keep tiny"
    checks: list[str] = []
    w.ops.events(Lane.JOBS).started.connect(lambda op: checks.append(op.title))

    qtbot.mouseClick(d.use_tuned, Qt.MouseButton.LeftButton)
    assert w.state.pack == "tiny-tuned"
    # the tuned pack reads as the base pack was read, not in the settings' RAG-Token
    assert w.controls.params().mode == "sequence"
    assert _message(d) == (f"{result_line}<br>The next questions are answered with "
                           "tiny-tuned, in RAG-Sequence as tiny was.")
    assert not d.use_tuned.isVisible()
    assert d.keep_base.isVisible() and d.keep_base.text() == "&Back to tiny"
    # the next job is still the one that tuned tiny: done, not re-armed on the tuned pack
    assert d.base_pack == "tiny" and "<b>tiny</b>" in d.intro.text()
    qtbot.wait(300)  # fixed, for what must not happen in it: the file is not checked again
    assert checks == [] and d.check is not None
    assert not d.start_button.isEnabled()

    qtbot.mouseClick(d.keep_base, Qt.MouseButton.LeftButton)
    assert w.state.pack == "tiny"
    assert w.controls.params().mode == "sequence"
    assert _message(d) == (f"{result_line}<br>The next questions are answered with tiny; "
                           "tiny-tuned stays in Index ▸ Model packs…")
    assert d.use_tuned.isVisible() and not d.keep_base.isVisible()

    # switched in the controls: the dialog says what answers now
    w.controls.pack.setCurrentIndex(w.controls.pack.findData("tiny-tuned"))
    assert w.state.pack == "tiny-tuned"
    assert "answered with tiny-tuned" in _message(d) and d.keep_base.text() == "&Back to tiny"
    w.controls.pack.setCurrentIndex(w.controls.pack.findData("tiny"))
    assert "answered with tiny;" in _message(d)
    assert checks == [] and not d.start_button.isEnabled()


def test_a_run_without_gain_says_so_and_does_not_recommend_the_tuned_pack(
        qtbot: Any, window: Any, tmp_path: Path, tiny_models: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = window
    d = _finished(qtbot, w, tmp_path, tiny_models, monkeypatch, 0.0, 0.0, held_out=8)
    text = _message(d)
    assert text.startswith("Held-out top-5 (8 questions): 0.0% → 0.0% after 4 steps")
    assert "<b>No gain.</b>" in text and "8 held-out questions" in text
    assert d.use_tuned.text() == "&Use tiny-tuned anyway" and not d.use_tuned.isDefault()
    assert d.keep_base.isVisible() and d.keep_base.isDefault()
    assert w.state.pack == "tiny"

    # a measured loss is no gain either
    monkeypatch.setattr(w.backend, "tune", lambda *_a, **_k: TuneResult(
        pack="tiny-tuned", base_pack="tiny", snapshot="wiki-a", k=5, top_k_before=0.5,
        top_k_after=0.25, steps=4, trained_on=10, held_out=8, folder=tmp_path / "job"))
    d.epochs.setValue(d.epochs.value() + 1)
    qtbot.waitUntil(d.start_button.isEnabled, timeout=30_000)
    qtbot.mouseClick(d.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.job is None and d.outcome is not None
                    and d.outcome.top_k_after == 0.25, timeout=TIMEOUT_MS)
    assert "50.0% → 25.0%" in _message(d) and "<b>No gain.</b>" in _message(d)
    assert "keep using tiny" in _message(d) and d.keep_base.isDefault()


def test_the_form_has_mnemonics_and_the_file_chooser_opens_at_home_then_at_the_file(
        qtbot: Any, window: Any, tmp_path: Path, tiny_models: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    w = window
    d = _open(qtbot, w)
    buddies = {lab.text(): lab.buddy() for lab in d.findChildren(QLabel) if lab.buddy()}
    assert buddies == {"&Questions:": d.path, "&Passes over the questions:": d.epochs,
                       "&Learning rate:": d.lr, "&Held out:": d.held_out}

    d.browse.click()
    chooser = d.findChild(QFileDialog)
    assert chooser is not None and chooser.isVisible()
    assert Path(chooser.directory().absolutePath()) == home  # not the working folder
    chooser.reject()
    chooser.deleteLater()

    other = tmp_path / "elsewhere"
    other.mkdir()
    qs = _questions(other, tiny_models)
    d.choose_file(str(qs))
    d.browse.click()
    chooser = next(c for c in d.findChildren(QFileDialog) if c.isVisible())
    assert Path(chooser.directory().absolutePath()) == qs.parent
    chooser.reject()


def test_the_checks_done_line_leaves_the_status_bar(qtbot: Any, window: Any, tmp_path: Path,
                                                    tiny_models: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    w = window
    w.status.line_ms = 600  # the user's 8 s, shortened; the same timer clears it
    label = w.status.text
    shown: list[tuple[float, str]] = []
    set_text = label.setText

    def timed(text: str) -> None:  # when each line was shown, not when a poll saw it
        shown.append((time.monotonic(), text))
        set_text(text)

    monkeypatch.setattr(label, "setText", timed)
    d = _open(qtbot, w)
    d.choose_file(str(_questions(tmp_path, tiny_models)))
    done = "Checking the questions: done."
    qtbot.waitUntil(lambda: any(t == done for _, t in shown), timeout=TIMEOUT_MS)
    qtbot.waitUntil(lambda: label.fullText() == "Ready", timeout=15_000)
    at = max(i for i, (_, t) in enumerate(shown) if t == done)
    assert [t for _, t in shown[at:]] == [done, "Ready"]
    # Not before the delay (the timer is a precise one; 5% covers the clocks read around it).
    assert shown[at + 1][0] - shown[at][0] >= 0.95 * 0.600
