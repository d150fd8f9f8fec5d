"""Compare snapshots: Esc and Stop end both answers, the two sides start on different
snapshots, a card never sits under a snapshot it did not answer from, and Tab stops only
where something shows focus."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QImage, QPalette
from PySide6.QtWidgets import QWidget

from ragdesk.ui.card_state import CardState
from ragdesk.ui.chat.card import AnswerCard
from tests.ui.probes import action

ANSWER_TIMEOUT_MS = 120_000


def _open(window: Any) -> Any:
    action(window, "compare").trigger()
    d = window.compare_dialog
    assert d is not None and d.isVisible()
    return d


def _cards_shown(d: Any, col: int) -> list[AnswerCard]:
    holder = d.columns[col].parentWidget()
    return [c for c in holder.findChildren(AnswerCard) if not c.isHidden()]


def _compare(qtbot: Any, window: Any, d: Any, question: str) -> None:
    done: list[Any] = []
    for signal in (window.conversation.answerFinished, window.conversation.answerFailed):
        signal.connect(lambda _rid, x: done.append(x))
    d.question.setText(question)
    qtbot.mouseClick(d.go, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: len(done) == 2, timeout=ANSWER_TIMEOUT_MS)


def _names(d: Any) -> list[str | None]:
    return [c.currentData() for c in d.pickers]


def _cancel_midway(qtbot: Any, w: Any, d: Any, press: Callable[[], None]) -> None:
    """Compare, and ``press`` while the first answer is writing: both end cancelled."""
    gate = threading.Event()
    w.backend.gate = gate  # each answer waits after its first token
    ended: list[Any] = []
    for signal in (w.conversation.answerFinished, w.conversation.answerFailed):
        signal.connect(lambda _rid, x: ended.append(x))
    d.question.setText("where is the eiffel tower?")
    qtbot.mouseClick(d.go, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: d.cards[0] is not None and bool(d.cards[0].tokens),
                    timeout=ANSWER_TIMEOUT_MS)
    assert d.running()
    press()
    gate.set()
    qtbot.waitUntil(lambda: len(ended) == 2, timeout=ANSWER_TIMEOUT_MS)
    w.backend.gate = None
    assert [c.state for c in d.cards] == [CardState.CANCELLED, CardState.CANCELLED]
    assert w.status.text.fullText().startswith("Stopped")  # not "Answered in … s"


def test_esc_cancels_both_answers(qtbot: Any, window: Any) -> None:
    d = _open(window)
    _cancel_midway(qtbot, window, d, lambda: qtbot.keyClick(d.question, Qt.Key.Key_Escape))
    assert not d.isVisible()  # Esc still closes the dialog


def test_stop_shows_while_comparing_and_cancels_both(qtbot: Any, window: Any) -> None:
    d = _open(window)
    assert not d.stop.isVisible()

    def press() -> None:
        assert d.stop.isVisible() and not d.go.isEnabled()
        qtbot.mouseClick(d.stop, Qt.MouseButton.LeftButton)

    _cancel_midway(qtbot, window, d, press)
    assert d.isVisible() and not d.stop.isVisible() and d.go.isEnabled()


def test_the_sides_start_on_different_snapshots(qtbot: Any, window: Any) -> None:
    w = window
    d = _open(w)
    everything = w.state.snapshots
    only_a = [s for s in everything if s.name == "wiki-a"]
    d.set_snapshots(only_a)  # one snapshot: nothing to compare
    assert _names(d) == ["wiki-a", "wiki-a"] and not d.go.isEnabled()
    assert "needs two snapshots" in d.note.text()
    d.set_snapshots(everything)  # a second one imported meanwhile
    assert _names(d) == ["wiki-a", "wiki-b"] and d.go.isEnabled()
    # chosen the same by hand: Compare waits for two different ones
    d.set_pair("wiki-b", "wiki-b")
    assert not d.go.isEnabled() and "two different snapshots" in d.note.text()
    d.set_pair("wiki-b", "wiki-a")
    assert d.go.isEnabled() and d.note.text() == ""


def test_a_removed_snapshots_card_goes_with_it(qtbot: Any, window: Any) -> None:
    w = window
    d = _open(w)
    assert _names(d) == ["wiki-a", "wiki-b"]
    _compare(qtbot, w, d, "where is the eiffel tower?")
    left, right = d.cards
    assert left is not None and right is not None
    assert right.answer is not None and right.answer.snapshot == "wiki-b"
    assert _cards_shown(d, 1) == [right]
    d.set_snapshots([s for s in w.state.snapshots if s.name != "wiki-b"])  # removed
    assert _names(d) == ["wiki-a", "wiki-a"]
    assert d.cards[1] is None and _cards_shown(d, 1) == []  # not shown as wiki-a's answer
    assert d.cards[0] is left and _cards_shown(d, 0) == [left]  # still its own snapshot's
    assert "needs two snapshots" in d.note.text() and not d.go.isEnabled()

    # changed by hand after comparing: the card of the other snapshot goes too
    d.set_snapshots(w.state.snapshots)
    d.set_pair("wiki-b", "wiki-a")
    assert d.cards == [None, None]


def test_every_tab_stop_shows_something(qtbot: Any, window: Any) -> None:
    d = _open(window)
    stops: list[QWidget] = []
    widget = d.question.nextInFocusChain()
    while widget is not d.question:
        if (widget.focusPolicy() & Qt.FocusPolicy.TabFocus and widget.isVisibleTo(d)
                and widget.isEnabled() and widget.window() is d):
            stops.append(widget)
        widget = widget.nextInFocusChain()
    assert stops == [d.go, d.pickers[0], d.pickers[1]]


def test_the_buttons_icons_follow_the_theme(qtbot: Any, window: Any) -> None:
    d = _open(window)
    _compare(qtbot, window, d, "where is the eiffel tower?")

    def inked_with(button: Any, text: QColor) -> bool:
        """The icon's most opaque pixel is ``text`` (give or take its rounding)."""
        image: QImage = button.icon().pixmap(16, 16).toImage()
        pixels = [image.pixelColor(x, y) for x in range(image.width())
                  for y in range(image.height())]
        c = max(pixels, key=lambda p: p.alpha())
        return max(abs(c.red() - text.red()), abs(c.green() - text.green()),
                   abs(c.blue() - text.blue())) <= 2

    try:
        for theme in ("dark", "light"):
            window.apply_theme(theme)
            text = window.palette().color(QPalette.ColorRole.WindowText)
            assert inked_with(d.go, text) and inked_with(d.stop, text), theme
            assert all(inked_with(c.copy_button, text) for c in d.cards), theme
    finally:
        window.apply_theme("light")
