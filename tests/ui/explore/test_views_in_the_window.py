"""The explore views in the main window: they never widen it, hide what the answer card hides,
come forward (and take the keyboard) from their shortcuts, keep the right-hand dock's width,
say when their snapshot is gone, and are listed in Help ▸ Keyboard shortcuts."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QDockWidget, QTabBar, QTableWidget

from ragdesk.core.options import AnswerOptions
from ragdesk.core.types import Answer
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.explore import RetrievalMap, StepThrough
from ragdesk.ui.explore.install import MAP_TITLE, STEPS_TITLE
from ragdesk.ui.explore.step_through import TOGETHER_CAPTION
from ragdesk.ui.selection import GUESS_HIDDEN_TEXT
from tests.ui.explore.helpers import synthetic_answer
from tests.ui.fakes import make_answer
from tests.ui.probes import ANSWER_TIMEOUT_MS, ask
from tests.ui.settle import settle

TIMEOUT_MS = ANSWER_TIMEOUT_MS
LONG_WORD = " Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch-railway-station"


def in_front(dock: QDockWidget) -> bool:
    """Shown and not behind another tab: Qt moves the docks behind a tab off the window."""
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def _action(window: Any, title: str) -> Any:
    return next(a for a in window.explore_menu.actions() if a.text() == f"&{title}")


def _open(qtbot: Any, window: Any, title: str) -> Any:
    _action(window, title).setChecked(True)
    dock = window.explore_dock(title)
    assert dock is not None
    qtbot.waitUntil(lambda: in_front(dock))
    return dock


def _long_answer(mode: str) -> Answer:
    """Twelve words, one of them longer than any dock is wide."""
    ans = synthetic_answer(mode, 12, seed=4)
    tokens = list(ans.tokens)
    tokens[3] = dataclasses.replace(tokens[3], text=LONG_WORD)
    return dataclasses.replace(ans, tokens=tokens, text="".join(t.text for t in tokens),
                               snapshot="wiki-a")


@pytest.mark.parametrize("mode", ["together", "token", "sequence"])
def test_stepping_through_an_answer_keeps_the_window_width(qtbot: Any, window: Any,
                                                           mode: str) -> None:
    window.resize(1280, 720)
    dock = _open(qtbot, window, STEPS_TITLE)
    steps = dock.widget()
    assert isinstance(steps, StepThrough)
    settle(qtbot, window)
    width, dock_width = window.width(), dock.width()
    answer = _long_answer(mode)
    window.state.select_answer(answer)
    assert steps.answers() == [answer]
    steps.setFocus()
    keys = [Qt.Key.Key_Right] * 5 + [Qt.Key.Key_End, Qt.Key.Key_Home, Qt.Key.Key_End]
    for key in keys:
        qtbot.keyClick(steps, key)
        settle(qtbot, window)
        assert (window.width(), dock.width()) == (width, dock_width), (mode, key)
    assert steps.step() == steps.step_count >= 10
    panel = steps.panels[0]
    if mode == "together":
        assert panel.caption.text() == TOGETHER_CAPTION
    # Long text wraps inside the dock instead of running past it.
    for label in (panel.caption, panel.token_label, panel.text_label):
        assert label.wordWrap() and label.width() <= dock.width()


def _abstained_card(window: Any) -> tuple[AnswerCard, Answer]:
    ans = dataclasses.replace(make_answer(snapshot="wiki-a", n_tokens=5), confidence=0.03,
                              abstained=True)
    card = AnswerCard(-7, ans.question, AnswerOptions(n_docs=len(ans.docs)), "wiki-a")
    window.wire_card(card)
    window.chat.add_card(card)
    for tok in ans.tokens:
        card.append_token(tok)
    card.finish(ans)
    window.selection.answered(card)
    return card, ans


def _shown_text(steps: StepThrough) -> str:
    return " ".join(w.text() for w in steps.findChildren(type(steps.empty_label))
                    if w.isVisible())


def test_the_step_through_hides_the_guess_its_card_hides(qtbot: Any, window: Any) -> None:
    card, ans = _abstained_card(window)
    assert card.guess_hidden
    steps = _open(qtbot, window, STEPS_TITLE).widget()
    assert isinstance(steps, StepThrough)
    assert steps.answers() == [] and steps.step_count == 0
    assert steps.empty_label.isVisible() and steps.empty_label.text() == GUESS_HIDDEN_TEXT
    assert steps.question_label.text() == ans.question
    qtbot.keyClick(steps, Qt.Key.Key_End)
    assert steps.step() == 0
    assert ans.text.startswith("Charles Darwin") and "Darwin" not in _shown_text(steps)

    button = card.verdict.guess_button
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)  # Show the guess
    assert not card.guess_hidden
    assert steps.answers() == [ans] and steps.step_count == len(ans.tokens)
    steps.set_step(2)
    assert ans.tokens[1].text.strip() in steps.panels[0].token_label.text()
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)  # Hide the guess
    assert steps.answers() == [] and steps.empty_label.text() == GUESS_HIDDEN_TEXT


def _press(qtbot: Any, window: Any, key: Qt.Key) -> None:
    """The view shortcut as a user presses it, with the focus in the question box."""
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window)
    window.question.setFocus()
    mods = Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier
    qtbot.keyClick(window.question, key, mods)


def test_a_view_shortcut_brings_a_view_behind_a_tab_forward(qtbot: Any, window: Any) -> None:
    map_dock = _open(qtbot, window, MAP_TITLE)
    steps_dock = _open(qtbot, window, STEPS_TITLE)
    assert map_dock in window.tabifiedDockWidgets(steps_dock)
    assert in_front(steps_dock) and not in_front(map_dock) and not map_dock.isHidden()
    act = _action(window, MAP_TITLE)
    assert act.isChecked()
    _press(qtbot, window, Qt.Key.Key_M)  # Ctrl+Shift+M: the map is behind: forward
    assert in_front(map_dock) and not in_front(steps_dock)
    assert act.isChecked() and not map_dock.isHidden()
    _press(qtbot, window, Qt.Key.Key_M)  # now in front: hidden
    assert map_dock.isHidden() and not act.isChecked()
    _press(qtbot, window, Qt.Key.Key_M)  # and shown again, in front
    assert in_front(map_dock) and act.isChecked()
    # The same for the step-through, now behind the map.
    assert not in_front(steps_dock) and not steps_dock.isHidden()
    _press(qtbot, window, Qt.Key.Key_G)
    assert in_front(steps_dock) and _action(window, STEPS_TITLE).isChecked()


def test_the_step_through_takes_the_keys_when_its_shortcut_shows_it(qtbot: Any,
                                                                   window: Any) -> None:
    window.state.select_answer(_long_answer("token"))
    _press(qtbot, window, Qt.Key.Key_G)  # built and shown by the shortcut
    dock = window.explore_dock(STEPS_TITLE)
    steps = dock.widget()
    qtbot.waitUntil(steps.hasFocus)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Right)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Right)
    assert steps.step() == 2
    # Shown again after the passage inspector came in front of it: the keys follow.
    window.inspector_dock.raise_()
    window.question.setFocus()
    assert not in_front(dock)
    _press(qtbot, window, Qt.Key.Key_G)
    qtbot.waitUntil(steps.hasFocus)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_End)
    assert steps.step() == steps.step_count
    # A click on its tab gives it the keys too.
    window.inspector_dock.raise_()
    window.question.setFocus()
    bar, index = _tab_of(window, STEPS_TITLE)
    qtbot.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(index).center())
    assert in_front(dock)
    qtbot.waitUntil(steps.hasFocus)
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key.Key_Home)
    assert steps.step() == 0


def _tab_of(window: Any, title: str) -> tuple[QTabBar, int]:
    for bar in window.findChildren(QTabBar):
        for i in range(bar.count()):
            if bar.tabText(i) == title and bar.isVisible():
                return bar, i
    raise AssertionError(f"no tab {title!r}")


@pytest.mark.parametrize("size", [(1280, 720), (1440, 900)])
def test_the_second_view_keeps_the_docks_width_and_the_map_hint_shows_whole(
        qtbot: Any, window: Any, size: tuple[int, int]) -> None:
    window.resize(*size)
    ask(qtbot, window, "who wrote the origin of species?")
    settle(qtbot, window)
    width, right = window.width(), window.inspector_dock.width()
    central = window.centralWidget().width()
    map_dock = _open(qtbot, window, MAP_TITLE)
    view = map_dock.widget()
    assert isinstance(view, RetrievalMap)
    qtbot.waitUntil(lambda: view.map_data() is not None and not view.is_busy(),
                    timeout=TIMEOUT_MS)
    settle(qtbot, window)
    assert (map_dock.width(), window.width()) == (right, width)
    steps_dock = _open(qtbot, window, STEPS_TITLE)
    settle(qtbot, window)
    assert (steps_dock.width(), window.width()) == (right, width)
    assert window.centralWidget().width() == central
    assert map_dock in window.tabifiedDockWidgets(steps_dock)

    # The hint under the map shows whole: no part of it scrolled out of the preview.
    map_dock.raise_()
    settle(qtbot, window)
    preview = view.preview
    assert "Drag the ★" in preview.toPlainText()
    assert preview.verticalScrollBar().maximum() == 0
    assert preview.document().size().height() <= preview.viewport().height() + 1
    assert window.size().toTuple() == size


def test_a_map_of_a_snapshot_removed_from_the_catalog_says_so(qtbot: Any,
                                                              window: Any) -> None:
    ask(qtbot, window, "who wrote the origin of species?")
    view = _open(qtbot, window, MAP_TITLE).widget()
    assert isinstance(view, RetrievalMap)
    qtbot.waitUntil(lambda: view.map_data() is not None and not view.is_busy(),
                    timeout=TIMEOUT_MS)
    assert view.snapshot_name() == "wiki-a" and view.ask_button.isEnabled()
    everything = window.state.snapshots
    # What the catalog watch hands the state after `ragdesk index remove wiki-a`.
    window.state.set_snapshots([s for s in everything if s.name != "wiki-a"])
    assert view.notice.isVisible() and "wiki-a has been removed" in view.notice.text()
    assert not view.ask_button.isEnabled()
    asked: list[object] = []
    view.askFromHere.connect(lambda *args: asked.append(args))
    view.canvas.setFocus()
    qtbot.keyClick(view.canvas, Qt.Key.Key_Return)
    assert asked == []
    window.state.set_snapshots(everything)
    assert view.ask_button.isEnabled() and not view.notice.isVisible()


def test_keyboard_shortcuts_list_the_explore_views_and_their_keys(qtbot: Any,
                                                                 window: Any) -> None:
    dialog = window.show_shortcuts()
    table = dialog.findChild(QTableWidget)
    rows = {table.item(r, 0).text(): table.item(r, 1).text() for r in range(table.rowCount())}
    assert rows["Show or hide Retrieval map"] == "Ctrl+Shift+M"
    assert rows["Show or hide Generation step-through"] == "Ctrl+Shift+G"
    assert "Retrieval map" not in rows  # named like the other docks' rows
    assert rows["Step-through: previous or next word"].startswith("Left / Right")
    assert rows["Step-through: before the first word, or the last"] == "Home / End"
    assert rows["Retrieval map: move the query (Tab to the map first)"] == "Arrow keys"
    assert rows["Retrieval map: Ask from here"] == "Enter"
    dialog.close()

