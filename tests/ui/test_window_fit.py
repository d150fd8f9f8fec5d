"""The default window on a small screen: the heat map shows every row of a K = 5 answer at
1280x720, the window narrows to about half of a 1920 screen with the default docks shown,
and the card's heat-map button shows the map however its dock was left."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from ragdesk.core.options import AnswerOptions
from ragdesk.core.types import Answer, RetrievedDoc
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.window_settings import first_layout
from tests.ui.fakes import make_answer
from tests.ui.settle import settle

# Titles as long as the starter snapshot's: "[2] William Shakespeare" was shortened to
# "[2] William Shake…" at 1280x720.
TITLES = ["Pride and Prejudice", "William Shakespeare", "Shakespeare's sonnets",
          "Jane Austen", "Sense and Sensibility"]


def _answer(n_tokens: int = 2) -> Answer:
    answer = make_answer("who wrote the novel pride and prejudice", k=5, n_tokens=n_tokens)
    answer.docs[:] = [RetrievedDoc(id=d.id, title=t, text=d.text, score=d.score, prob=d.prob,
                                   snapshot=d.snapshot)
                      for d, t in zip(answer.docs, TITLES, strict=True)]
    return answer


def _show_answer(window: Any, answer: Answer) -> AnswerCard:
    card = AnswerCard(1, answer.question, AnswerOptions(n_docs=5), answer.snapshot)
    window.chat.add_card(card)
    window.wire_card(card)
    for tok in answer.tokens:
        card.append_token(tok)
    card.finish(answer)
    window.selection.select(card, force=True)
    return card


@pytest.mark.parametrize("size", [(1280, 720), (1264, 680)])  # the window, and its first size
def test_the_heat_map_shows_all_five_rows_at_1280x720(qtbot: Any, window: Any,
                                                      size: tuple[int, int]) -> None:
    window.resize(*size)
    settle(qtbot, window)
    first_layout(window)
    _show_answer(window, _answer())
    settle(qtbot, window)
    panel, hm = window.heatmap, window.heatmap.map
    view = panel.scroller.viewport()
    assert hm.k == 5
    # every row, with the bottom padding, within the view: nothing to scroll to
    assert hm.grid_rect().bottom() <= view.height(), (hm.grid_rect(), view.size())
    assert not panel.scroller.verticalScrollBar().isVisible()
    assert not panel.scroller.horizontalScrollBar().isVisible()  # two words: no sideways scroll
    assert [hm.row_label_text(k) for k in range(5)] == [f"[{k + 1}] {t}"
                                                       for k, t in enumerate(TITLES)]
    assert panel.caption.height() <= 2 * panel.caption.fontMetrics().height()  # one line


def test_with_the_default_docks_the_window_narrows_to_1000_px(qtbot: Any, window: Any) -> None:
    # An answer in every dock (its longest passage title in the inspector's list), as the
    # window is while it is used: the inspector's numbers widened it to 1204 px.
    answer = _answer(n_tokens=6)
    answer.docs[2] = RetrievedDoc(
        id=7, title="List of Byzantine emperors and the dynasties that ruled Constantinople",
        text="x", score=1.0, prob=answer.docs[2].prob, snapshot="demo")
    _show_answer(window, answer)
    window.selection.show_passage(2)
    settle(qtbot, window)
    assert all(d.isVisible() and not d.isFloating() for d in window.docks())
    assert window.minimumSizeHint().width() <= 1000, window.minimumSizeHint()
    window.resize(960, 700)  # half of a 1920 screen
    settle(qtbot, window)
    assert window.width() <= 1000
    assert window.centralWidget().width() >= 380  # the conversation keeps its room
    ins = window.inspector
    assert ins.picker.shown_text().endswith("…")  # the long title shortened, not cut
    bar = ins.tabs.tabBar()  # both tabs in view (shortened), none scrolled out of it
    assert bar.isVisible() and bar.count() == 2
    assert all(bar.tabRect(i).left() >= 0 and bar.tabRect(i).right() <= bar.width()
               for i in range(bar.count()))
    for value in ins.fact_labels.values():  # every fact whole within the inspector
        name = ins.facts.labelForField(value)
        assert value.isVisible() and value.geometry().right() <= ins.width()
        assert value.width() >= value.minimumSizeHint().width()  # its longest word
        assert value.heightForWidth(value.width()) <= value.height()  # all its lines
        assert name is not None and name.width() >= name.sizeHint().width(), name.text()


@pytest.mark.parametrize("floating", [False, True])
def test_the_cards_heat_map_button_shows_and_focuses_the_map(qtbot: Any, window: Any,
                                                             floating: bool) -> None:
    card = _show_answer(window, _answer())
    dock = window.heatmap_dock
    window.activateWindow()
    window.question.setFocus()
    qtbot.waitUntil(lambda: window.question.hasFocus(), timeout=2_000)
    dock.setFloating(floating)
    settle(qtbot, window, dock)
    assert dock.isVisible()  # already shown: before, the button then did nothing visible
    qtbot.mouseClick(card.heat_button, Qt.MouseButton.LeftButton)
    hm = window.heatmap.map
    qtbot.waitUntil(lambda: QApplication.focusWidget() is hm, timeout=2_000)
    assert dock.isVisible() and dock.isFloating() == floating
    assert hm.cursor_cell == (0, 0)  # the keyboard's cell is marked
    # Closed, the button brings it back as well.
    dock.close()
    qtbot.mouseClick(card.heat_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(dock.isVisible, timeout=2_000)
