"""Layout and wording: counts with the right noun, durations and sizes, the window
title, and texts that shorten with "…" or wrap instead of being cut at an edge."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PySide6.QtCore import QEvent, QRectF
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
from ragdesk.ui.heatmap import LABEL_FLOOR_PX, PosteriorHeatMap, label_width
from ragdesk.ui.heatmap_panel import HeatMapPanel
from ragdesk.ui.resources import stylesheet
from ragdesk.ui.texts import unbroken
from tests.ui.fakes import make_answer
from tests.ui.settle import settle

REPO = Path(__file__).resolve().parents[2]


# ---- words and numbers --------------------------------------------------------------------


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


# ---- wrapping and eliding -------------------------------------------------------------------


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


LONG_TITLES = ["List of Byzantine emperors and the dynasties that ruled Constantinople",
               "Roman Empire", "Fall of the Western Roman Empire in the fifth century",
               "Edward Gibbon", "The History of the Decline and Fall of the Roman Empire"]


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


# ---- the heat map -----------------------------------------------------------------------------


def test_label_width_uses_the_room_beside_the_grid() -> None:
    assert label_width(200, 300, 800) == 200  # fits: the whole label
    assert label_width(200, 500, 800) == 200
    assert label_width(200, 700, 800) == LABEL_FLOOR_PX  # the grid needs the room: shorten
    assert label_width(200, 650, 800) == LABEL_FLOOR_PX
    assert label_width(200, 620, 800) == 180  # what is left, above the floor
    assert label_width(90, 2000, 800) == 90  # narrower than the floor: never shortened
    assert label_width(200, 5000, None) == 200
    assert label_width(200, 5000, 300) == 120  # a narrow pane: 40% of it for the labels


def test_heat_map_labels_are_whole_while_streaming_and_with_room(qtbot: Any) -> None:
    answer = make_answer(k=5, n_tokens=6, seed=5)
    docs = [RetrievedDoc(id=d.id, title=t, text=d.text, score=d.score, prob=d.prob,
                         snapshot=d.snapshot) for d, t in zip(answer.docs, LONG_TITLES,
                                                              strict=True)]
    hm = PosteriorHeatMap()
    qtbot.addWidget(hm)
    hm.set_available_width(1600)
    hm.set_data([], None)
    for tok in answer.tokens:  # streaming: the passages are not known yet
        hm.append_token(tok)
    assert [hm.row_label_text(k) for k in range(5)] == [f"[{k + 1}]" for k in range(5)]
    hm.set_data(answer.tokens, docs)
    for k in range(5):
        assert hm.row_label_text(k) == f"[{k + 1}] {LONG_TITLES[k]}"
        hm.set_selected_passage(k)  # the selected row is bold, and still whole
        assert hm.row_label_text(k) == f"[{k + 1}] {LONG_TITLES[k]}"
    # A narrow view: the long labels shorten so that the grid fits beside them, and to the
    # floor and no further.
    hm.set_available_width(500)
    short = [hm.row_label_text(k) for k in range(5)]
    assert short[1] == "[2] Roman Empire"
    assert short[0].endswith("…") and short[0] != f"[1] {LONG_TITLES[0]}"
    assert hm.sizeHint().width() <= 500
    fm = QFontMetricsF(hm.font())
    assert all(fm.horizontalAdvance(s) <= hm._label_w + 1 for s in short)
    for tok in make_answer(k=5, n_tokens=40, seed=6).tokens:  # a long answer: the floor
        hm.append_token(tok)
    hm._relayout()
    assert abs(hm._label_w - LABEL_FLOOR_PX) < 1
    assert hm.grid_rect().x() > LABEL_FLOOR_PX


def test_colour_bar_stays_whole_in_a_narrow_pane(qtbot: Any) -> None:
    answer = make_answer(k=5, n_tokens=12, seed=5)
    panel = HeatMapPanel()
    qtbot.addWidget(panel)
    panel.map.set_data(answer.tokens, answer.docs)
    panel.resize(330, 260)
    panel.show()
    qtbot.waitExposed(panel)
    settle(qtbot, panel)
    bar = panel.colour_bar
    assert bar.isVisible() and bar.geometry().right() < panel.width()
    rect = bar.bar_rect()
    fm = QFontMetricsF(panel.map._small_font())
    widest = max(fm.horizontalAdvance(t) for t in bar.labels())
    assert rect.right() + 4 + widest <= bar.width()
    assert rect.top() - fm.ascent() / 2 >= 0
    assert rect.bottom() + fm.height() / 2 <= bar.height()
    # The map scrolls under a narrow pane; the scale does not scroll with it.
    assert panel.map.width() > panel.scroller.viewport().width()
    assert QRectF(bar.geometry()).intersects(QRectF(panel.scroller.geometry())) is False


# ---- dialogs -----------------------------------------------------------------------------------


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


def test_legend_wraps_instead_of_dropping_passages(qtbot: Any) -> None:
    from ragdesk.ui.chat.legend import Legend

    legend = Legend()
    qtbot.addWidget(legend)
    legend.set_counts(10, [3, 1, 0, 0, 2, 0, 0, 1, 0, 5])
    label, rects = legend.layout_rects(260)
    assert len(rects) == 10 and all(r.right() <= 260 for r in rects)
    assert legend.heightForWidth(260) > legend.heightForWidth(2000)
    boxes = [label, *rects]
    assert not any(a.intersects(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert legend.minimumSizeHint().width() <= 260


# ---- the retrieval map -------------------------------------------------------------------------


def test_place_label_keeps_labels_on_the_canvas_and_apart() -> None:
    from PySide6.QtCore import QPointF

    from ragdesk.ui.explore.map_canvas import place_label

    bounds = QRectF(20, 4, 300, 200)
    taken: list[QRectF] = []
    # Marks in a corner, at an edge and in a tight bunch: the first places on the right
    # would run off the canvas or cover each other.
    for c in [QPointF(315, 10), QPointF(318, 120), QPointF(25, 200), QPointF(150, 100),
              QPointF(156, 104), QPointF(160, 98), QPointF(152, 110)]:
        box = place_label(c, 8, 64, 18, taken, bounds)
        assert bounds.contains(box), (c, box)
        assert not any(box.intersects(t) for t in taken), (c, box)
        taken.append(box)


@pytest.mark.parametrize("size", [(420, 820), (1000, 600)])
def test_map_fills_its_canvas_and_labels_do_not_collide(qtbot: Any,
                                                        size: tuple[int, int]) -> None:
    from ragdesk.core.projection import ProjectionCache
    from ragdesk.ui.explore import RetrievalMap
    from tests.ui.explore.helpers import array_snapshot

    snap = array_snapshot()
    w = RetrievalMap(snap, k=5, n_neighbours=150, cache=ProjectionCache())
    qtbot.addWidget(w)
    w.resize(*size)
    w.show()
    qtbot.waitExposed(w)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_question("a question", snap.embeddings()[3] * 0.9)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)
    canvas = w.canvas
    # A tall view (a side dock) puts the passages under the map, not beside it.
    tall = size[0] < size[1]
    assert (canvas.width() > w.width() * 0.9) == tall
    canvas.grab()  # paints, which places the labels
    boxes = canvas.label_boxes()
    assert len(boxes) == 6  # five ranks and the query
    bounds = canvas.label_bounds()
    assert all(bounds.contains(b) for b in boxes)
    overlaps = sum(a.intersects(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    assert overlaps == 0
    # The passages span most of the canvas along the side that limits the scale.
    xs = [canvas.to_widget(p.xy).x() for p in canvas.points()]
    ys = [canvas.to_widget(p.xy).y() for p in canvas.points()]
    fill = max((max(xs) - min(xs)) / canvas.width(), (max(ys) - min(ys)) / canvas.height())
    assert fill > 0.75
    # The hint is text that wraps and scrolls, not a one-line placeholder.
    assert "Drag the ★" in w.preview.toPlainText()


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


def test_colour_bar_sits_next_to_a_short_answers_grid(qtbot: Any) -> None:
    answer = make_answer(k=5, n_tokens=3, seed=5)
    panel = HeatMapPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 300)
    panel.show()
    qtbot.waitExposed(panel)
    panel.map.set_data(answer.tokens, answer.docs)
    settle(qtbot, panel)
    grid_right = panel.scroller.x() + panel.map.grid_rect().right()
    assert 0 < panel.colour_bar.x() - grid_right < 60
    for k in range(5):  # room to spare: every label whole
        assert panel.map.row_label_text(k).endswith(answer.docs[k].title)


def test_max_length_of_one_is_one_token(qtbot: Any) -> None:
    from ragdesk.ui.controls import ControlsPanel

    panel = ControlsPanel(AnswerOptions(), "tiny")
    qtbot.addWidget(panel)
    panel.max_len.setValue(1)
    assert panel.max_len.text() == "1 token"
    panel.max_len.setValue(2)
    assert panel.max_len.text() == "2 tokens"


def test_menus_come_from_the_action_table(window: Any) -> None:
    from ragdesk.ui.window_actions import ACTIONS, MENUS

    bar = window.menuBar()
    titles = [a.text() for a in bar.actions()]
    assert titles == list(MENUS)

    def entries(menu: Any) -> set[str]:
        out: set[str] = set()
        for a in menu.actions():
            out.add(a.text())
            if a.menu() is not None:
                out |= {f"{a.text()}/{t}" for t in entries(a.menu())}
        return out

    menus = {a.text(): a.menu() for a in bar.actions()}
    for spec in ACTIONS:
        if spec.menu is not None:
            top, _, sub = spec.menu.partition("/")
            want = f"{sub}/{spec.text}" if sub else spec.text
            assert want in entries(menus[top]), spec.name
        act = window.actions_by_name[spec.name]
        assert act in window.actions()  # its shortcut works with the menu bar hidden


def test_every_menu_entry_has_its_own_mnemonic(window: Any) -> None:
    """Alt+letter reaches every entry of every menu, submenus too, and no two entries of one
    menu share a letter. Not the Index menu's snapshots: their names are the user's."""
    from ragdesk.ui.actions import mnemonic

    snapshots = set(window.index_menu.group.actions())

    def check(menu: Any, path: str) -> None:
        entries = [a for a in menu.actions() if not a.isSeparator() and a not in snapshots
                   and a.text() != "Active snapshot"]  # the snapshots' heading
        letters = [mnemonic(a.text()) for a in entries]
        assert None not in letters, (path, [a.text() for a in entries])
        assert len(set(letters)) == len(letters), (path, [a.text() for a in entries])
        for a in entries:
            if a.menu() is not None:
                check(a.menu(), f"{path}/{a.text()}")

    menus = list(window.menuBar().actions())
    assert len({mnemonic(a.text()) for a in menus}) == len(menus)
    for a in menus:
        check(a.menu(), a.text())
    view = next(a.menu() for a in menus if a.text() == "&View")
    docks = [d.toggleViewAction().text() for d in window.docks()]
    assert docks == ["&Controls", "&Passage", "Posterior &heat map", "C&onversations"]
    assert {d.toggleViewAction() for d in window.docks()} <= set(view.actions())


def test_a_doubled_ampersand_is_no_mnemonic() -> None:
    from ragdesk.ui.actions import mnemonic

    assert mnemonic("R&&D notes") is None
    assert mnemonic("R&&D &notes") == "n"
    assert mnemonic("S&top") == "t"
