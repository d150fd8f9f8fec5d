"""Layout and wording: counts with the right noun, durations and sizes, the window
title, and texts that shorten with "…" or wrap instead of being cut at an edge."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PySide6.QtCore import QEvent
from PySide6.QtGui import QFont, QFontMetrics, QFontMetricsF, QTextLayout
from PySide6.QtWidgets import QApplication, QPushButton, QWidget

from ragdesk.core.options import AnswerOptions
from ragdesk.core.progress import ProgressUpdate
from ragdesk.core.types import RetrievedDoc
from ragdesk.core.units import fmt_seconds, human_bytes, percent, plural
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.chat.empty_state import EmptyState
from ragdesk.ui.dialogs import describe_progress
from ragdesk.ui.elided import ElidedLabel
from ragdesk.ui.resources import stylesheet
from ragdesk.ui.texts import unbroken
from tests.ui.fakes import LONG_TITLES, make_answer
from tests.ui.settle import settle

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("n", "noun", "want"), [
    (1, "token", "1 token"), (2, "token", "2 tokens"), (0, "token", "0 tokens"),
    (1, "passage", "1 passage"), (12324, "passage", "12,324 passages"),
    (1, "entry", "1 entry"), (3, "entry", "3 entries")])
def test_counts_take_the_right_noun(n: int, noun: str, want: str) -> None:
    assert plural(n, noun) == want


@pytest.mark.parametrize(("s", "want", "short"), [
    (0, "0 s", "0s"), (45.4, "45 s", "45s"), (60, "1 min", "1m"), (65, "1 min 05 s", "1m05s"),
    (2760, "46 min", "46m"), (2761, "46 min 01 s", "46m01s"), (3600, "1 h", "1h"),
    (3900, "1 h 05 min", "1h05m"), (3959, "1 h 05 min", "1h05m"), (-3, "0 s", "0s")])
def test_durations_have_no_zero_tails(s: float, want: str, short: str) -> None:
    assert fmt_seconds(s) == want
    assert fmt_seconds(s, compact=True) == short


def test_sizes_use_decimal_units() -> None:
    assert human_bytes(512) == "512 B"
    assert human_bytes(198_380) == "198.4 KB"
    assert human_bytes(7_080_562.8) == "7.1 MB"
    assert human_bytes(1_117_320_768) == "1.1 GB"  # the reader's GGUF, as pip says it
    assert human_bytes(999_960) == "1.0 MB"
    assert human_bytes(None) == "–"


def test_each_formatter_is_defined_once() -> None:
    """The CLI and the GUI share one copy of each (there were two of each)."""
    for name in ("fmt_seconds", "human_bytes", "plural"):
        defs = [p for p in (REPO / "ragdesk").rglob("*.py")
                if re.search(rf"^def _?{name}\(", p.read_text(encoding="utf-8"), re.M)]
        assert [p.relative_to(REPO).as_posix() for p in defs] == ["ragdesk/core/units.py"]


def test_reading_progress_is_shown_in_bytes() -> None:
    u = ProgressUpdate(198_380, 198_380, "reading x.jsonl", 7_080_562.8, 0.0, "bytes")
    text = describe_progress(u)
    assert text.startswith("198.4 KB of 198.4 KB") and "7.1 MB/s" in text
    assert "7,080,562" not in text and "198,380" not in text
    assert "7.1 MB/s" in u.describe()
    counted = ProgressUpdate(4_032, 12_324, "encoding passages", 51.0, 2760.0)
    assert describe_progress(counted) == "4,032 of 12,324  ·  51.0/s  ·  about 46 min left"
    assert describe_progress(counted, compact=True) == "33%  ·  about 46 min left"
    # a finished or uncounted step: no "about 0 s left"
    for done_step in (ProgressUpdate(12_324, 12_324, "dequantizing", 2854.2, 0.0),
                      ProgressUpdate(1, None, "loading", None, 0.0)):
        assert "left" not in describe_progress(done_step)
        assert "left" not in describe_progress(done_step, compact=True)


def test_window_title_names_the_app_once(window: Any) -> None:
    window.state.set_active_snapshot("wiki-a")
    window.update_status()
    # The app's display name is "ragdesk" (ui/app.py), which Qt appends to every title on
    # Linux and Windows: "wiki-a — ragdesk".
    assert window.windowTitle() == "wiki-a"
    window.state.set_active_snapshot(None)
    window.update_status()
    assert window.windowTitle() == "ragdesk"


def test_one_token_is_singular_on_the_card_and_in_the_status_bar(qtbot: Any,
                                                                 window: Any) -> None:
    one = make_answer(n_tokens=1, seed=2)
    card = AnswerCard(7, one.question, AnswerOptions(), "demo")
    qtbot.addWidget(card)
    card.append_token(one.tokens[0])
    card.finish(one)
    meta = card.meta_label.text().replace("\u00a0", " ").replace("\u2060", "")
    assert "1 token " in meta + " " and "1 tokens" not in meta
    streaming = AnswerCard(8, one.question, AnswerOptions(), "demo")
    qtbot.addWidget(streaming)
    window.conversation.on_token(streaming, one.tokens[0])
    assert window.status.text.fullText().endswith(" 1 token")


def _lines(text: str, width: float, font: QFont) -> list[str]:
    layout = QTextLayout(text, font)
    layout.beginLayout()
    out = []
    while True:
        line = layout.createLine()
        if not line.isValid():
            break
        line.setLineWidth(width)
        out.append(text[line.textStart(): line.textStart() + line.textLength()])
    layout.endLayout()
    return out


def test_card_facts_wrap_between_facts_never_inside_one(qtbot: Any) -> None:
    answer = make_answer(n_tokens=4, seed=1)
    card = AnswerCard(1, answer.question, AnswerOptions(mode="sequence", num_beams=4), "demo")
    qtbot.addWidget(card)
    card.finish(answer)
    text = card.meta_label.text()
    facts = [f.strip() for f in text.split("·")]
    assert any("log" in f and "p(answer)" in f for f in facts)
    font = card.meta_label.font()
    widest = max(QFontMetricsF(font).horizontalAdvance(f) for f in facts)
    wrapped = 0
    for width in range(int(widest) + 2, 900, 9):
        lines = _lines(text, width, font)
        wrapped += len(lines) > 1
        for line in lines:
            # Every line holds whole facts: it starts and ends at a separator or an end.
            for part in line.split("·"):
                part = part.strip()
                assert not part or part in facts, (width, lines)
    assert wrapped > 5  # narrow widths did wrap, so the check above was exercised
    # Without the no-break spaces the same text breaks inside "log p(answer) = -0.39".
    plain = text.replace("\u2060", "").replace("\u00a0", " ")
    assert any(any(line.rstrip().endswith(("log", "p(answer)", "=")) for line in
                   _lines(plain, w, font)) for w in range(40, 400, 3))
    assert unbroken("log p(y|x)") == "log\u00a0p(y|\u2060x)"


def _plain_button_width(like: QPushButton) -> int:
    """What a plain QPushButton with the same name and text asks for under the app's style
    sheet: the width at which its text is not cut."""
    b = QPushButton(like.text())
    b.setObjectName(like.objectName())
    b.setFont(like.font())
    b.ensurePolished()
    w = b.sizeHint().width()
    b.deleteLater()
    return w


@pytest.mark.parametrize("width", [300, 420, 700])
def test_citation_chips_fit_the_card(qtbot: Any, width: int) -> None:
    QApplication.instance().setStyleSheet(stylesheet())  # type: ignore[union-attr]
    answer = make_answer(n_tokens=6, seed=3)
    docs = [RetrievedDoc(id=d.id, title=t, text=d.text, score=d.score, prob=d.prob,
                         snapshot=d.snapshot) for d, t in zip(answer.docs, LONG_TITLES,
                                                              strict=True)]
    answer.docs[:] = docs
    card = AnswerCard(1, answer.question, AnswerOptions(), "demo")
    qtbot.addWidget(card)
    card.resize(width, 400)
    card.show()
    qtbot.waitExposed(card)
    card.finish(answer)
    settle(qtbot, card)
    box = card.chips_box
    assert box.width() <= width
    elided = 0
    for chip in card.chip_widgets():
        assert chip.geometry().left() >= 0 and chip.geometry().right() < box.width()
        assert _plain_button_width(chip) <= chip.width(), chip.text()
        assert chip.text().startswith(f"[{chip.k + 1}]")
        # the rank and p(z|x) stay, named
        assert chip.text().endswith(f"retrieval {percent(chip.doc.prob)}")
        elided += chip.text() != chip.full_text()
    assert (elided > 0) == (width < 700)  # the widest chip needs about 500 px


@pytest.mark.parametrize("width", [330, 520, 900])
def test_suggestions_wrap_instead_of_overflowing(qtbot: Any, width: int) -> None:
    QApplication.instance().setStyleSheet(stylesheet())  # type: ignore[union-attr]
    host = QWidget()
    qtbot.addWidget(host)
    empty = EmptyState(host)
    host.resize(width, 500)
    empty.resize(width, 500)
    host.show()
    qtbot.waitExposed(host)
    assert empty.minimumSizeHint().width() <= width
    for b in empty.buttons:
        parent = b.parentWidget()
        assert parent is not None
        g = b.geometry().translated(parent.mapTo(empty, parent.rect().topLeft()))
        assert g.left() >= 0 and g.right() < width
        assert b.text() in empty.EXAMPLES  # whole: there is room for each on its own line
        assert _plain_button_width(b) <= b.width()
    rows = {b.y() for b in empty.buttons}
    assert len(rows) == (1 if width >= 900 else len(rows))
    assert width >= 900 or len(rows) > 1


def test_elided_label_ends_in_an_ellipsis_not_a_cut_letter(qtbot: Any) -> None:
    label = ElidedLabel("Building the starter snapshot — encoding passages")
    qtbot.addWidget(label)
    label.resize(label.sizeHint())
    label.show()
    assert label.text() == label.fullText() and not label.toolTip()
    label.resize(90, label.height())
    fm = QFontMetrics(label.font())
    assert label.text().endswith("…") and fm.horizontalAdvance(label.text()) <= 90
    assert label.toolTip() == label.fullText()
    assert label.minimumSizeHint().width() < label.sizeHint().width()


def test_status_bar_shows_the_jobs_phase_whole(qtbot: Any, window: Any) -> None:
    window.resize(1280, 720)
    settle(qtbot, window)
    job = SimpleNamespace(id=1, title="Building the starter snapshot", cancellable=True)
    window.status.job.start(job)
    window.status.job.update_progress(
        job, ProgressUpdate(4_032, 12_324, "encoding passages", 51.0, 165.0))
    settle(qtbot, window)
    title = window.status.job.title
    assert title.text() == "encoding passages"
    assert QFontMetrics(title.font()).horizontalAdvance(title.text()) <= title.width()
    assert "Building the starter snapshot — encoding passages" in title.toolTip()
    assert window.status.job.detail.text() == "33%  ·  about 2 min 45 s left"


def test_first_run_dialog_grows_when_the_progress_panel_appears(qtbot: Any,
                                                                window: Any) -> None:
    from PySide6.QtWidgets import QLabel

    from ragdesk.ui.first_run import FirstRunDialog

    d = FirstRunDialog(window, window.state, window.library, window.backend, lambda: None)
    qtbot.addWidget(d)
    d.show()
    qtbot.waitExposed(d)
    settle(qtbot, d)
    # Shown at the height its texts need, not the default 480 px with the rest spread out.
    layout = d.layout()
    assert layout is not None
    need = layout.totalHeightForWidth(d.width())
    assert need <= d.height() <= need + 4
    job = SimpleNamespace(id=9, title="Building the starter snapshot", cancellable=True)
    d.job_panel.start(job)
    d.job_panel.update_progress(job, ProgressUpdate(4_032, 12_324, "encoding passages",
                                                    51.0, 165.0))
    QApplication.sendPostedEvents(d, QEvent.Type.LayoutRequest)
    settle(qtbot, d)
    wrapped = [lab for lab in d.findChildren(QLabel) if lab.wordWrap() and lab.text()]
    assert len(wrapped) >= 4
    for lab in wrapped:
        assert lab.height() >= lab.heightForWidth(lab.width()), lab.text()[:40]


def test_an_empty_answer_says_why_and_what_to_try(qtbot: Any) -> None:
    answer = make_answer(n_tokens=0, seed=1)
    card = AnswerCard(1, answer.question, AnswerOptions(), "demo")
    qtbot.addWidget(card)
    card.finish(answer)
    text = card.status_label.text()
    assert text.startswith("The model produced an empty answer")
    assert "passages" in text and "Try" in text


def test_empty_state_is_read_from_its_top_in_a_short_pane(qtbot: Any) -> None:
    from ragdesk.ui.chat.view import ChatView

    QApplication.instance().setStyleSheet(stylesheet())  # type: ignore[union-attr]
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(300, 160)  # shorter than the empty state: it scrolls
    view.show()
    qtbot.waitExposed(view)
    settle(qtbot, view)
    bar = view.verticalScrollBar()
    assert bar.maximum() > 0 and bar.value() == 0


def test_a_card_taller_than_the_pane_keeps_its_question_in_view(qtbot: Any) -> None:
    from ragdesk.ui.chat.view import ChatView

    QApplication.instance().setStyleSheet(stylesheet())  # type: ignore[union-attr]
    view = ChatView()
    qtbot.addWidget(view)
    view.resize(420, 220)  # 1280x720 with the heat map docked below: a short pane
    view.show()
    qtbot.waitExposed(view)
    for i in range(2):
        card = view.add_card(AnswerCard(i + 1, f"question {i}", AnswerOptions(), None))
        card.finish(make_answer(k=5, n_tokens=3, seed=i))
        settle(qtbot, view)
    last, bar = view.cards[-1], view.verticalScrollBar()
    assert last.height() > view.viewport().height()
    # Followed down to the newest card's top (its question and answer), not past it.
    assert bar.value() <= last.y() <= bar.value() + 30 and bar.value() < bar.maximum()


def test_docks_leave_the_conversation_room(qtbot: Any, window: Any) -> None:
    from PySide6.QtCore import Qt

    window.resize(1280, 720)
    settle(qtbot, window)
    window.resizeDocks([window.inspector_dock], [1000], Qt.Orientation.Horizontal)
    settle(qtbot, window)
    assert window.centralWidget().width() >= 380
    empty = window.chat.empty
    assert empty.width() <= window.chat.viewport().width()
    assert all(b.text() in empty.EXAMPLES for b in empty.buttons)  # room for each, whole


def test_max_length_of_one_is_one_token(qtbot: Any) -> None:
    from ragdesk.ui.controls import ControlsPanel

    panel = ControlsPanel(AnswerOptions(), "tiny")
    qtbot.addWidget(panel)
    panel.max_len.setValue(1)
    assert panel.max_len.text() == "1 token"
    panel.max_len.setValue(2)
    assert panel.max_len.text() == "2 tokens"
