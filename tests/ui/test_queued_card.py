"""A question asked while the starter pack is being set up waits on its card, and the card
shows the setup's progress, a notice of several wrapped lines that changes every second.
In the chat pane of a 1280x720 or a 1440x900 window (about 380 and 400 px wide) the card
kept its earlier, shorter height and the label lost lines at its top and bottom."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import QApplication, QLabel

from tests.ui.settle import settle

# What the card said at the first start under Xvfb: the engine, then the setup's stages as
# its progress line describes them (ui.conversation's queue notice).
NOTICES = (
    "Waiting for the engine…",
    "Waiting for the starter pack — generator: reading the GGUF tokenizer (slow the first "
    "time)  ·  BM25: tokenizing passages. This question runs as soon as the passages are "
    "searchable and the generator is ready.",
    "Waiting for the starter pack — generator: dequantizing the GGUF weights  ·  BM25: "
    "building the score matrix  12,324/12,324  2,854.2/s. This question runs as soon as the "
    "passages are searchable and the generator is ready.",
    "Waiting for the starter pack — encoding passages  3,520/12,324  51.0/s  about 2 min "
    "left. This question runs as soon as the passages are searchable and the generator is "
    "ready.",
)


@pytest.fixture(params=["light", "dark"])
def theme(request: Any, qapp: QApplication) -> Iterator[str]:
    from ragdesk.ui.theme import install_theme

    palette, sheet = qapp.palette(), qapp.styleSheet()
    install_theme(request.param)
    yield request.param
    qapp.setStyleSheet(sheet)
    qapp.setPalette(palette)


def _text_height(label: QLabel) -> int:
    """The height the label's text needs at the label's width, from the font alone."""
    fm = QFontMetrics(label.font())
    width = label.contentsRect().width()
    return fm.boundingRect(QRect(0, 0, width, 0), int(Qt.TextFlag.TextWordWrap),
                           label.text()).height()


@pytest.mark.parametrize("pane_width", [380, 400, 520, 900])
def test_a_queued_cards_notice_is_whole_as_it_changes(qtbot: Any, theme: str,
                                                       pane_width: int) -> None:
    from ragdesk.core.options import AnswerOptions
    from ragdesk.ui.chat.card import AnswerCard
    from ragdesk.ui.chat.view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.resize(pane_width, 330)
    view.show()
    qtbot.waitExposed(view)
    card = view.add_card(AnswerCard(1, "who wrote pride and prejudice", AnswerOptions(),
                                    "vital-articles"))
    label = card.status_label
    for notice in NOTICES:
        card.set_queued(notice)
        settle(qtbot, view)
        need = _text_height(label)
        assert label.height() >= need, (notice[:40], label.height(), need)
        # Inside the card, above the facts line, none of it under the card's border.
        shown = label.geometry()
        assert shown.top() >= card.question_label.geometry().bottom()
        assert shown.bottom() < card.meta_label.geometry().top()
        assert card.meta_label.geometry().bottom() < card.contentsRect().bottom()
    # The card is as tall as what it shows, not stretched to fill the pane.
    assert card.height() == card.heightForWidth(card.width())


def test_a_short_card_does_not_fill_a_tall_pane(qtbot: Any) -> None:
    from ragdesk.core.options import AnswerOptions
    from ragdesk.ui.chat.card import AnswerCard
    from ragdesk.ui.chat.view import ChatView

    view = ChatView()
    qtbot.addWidget(view)
    view.resize(600, 800)
    view.show()
    qtbot.waitExposed(view)
    card = view.add_card(AnswerCard(1, "who wrote hamlet", AnswerOptions(), None))
    settle(qtbot, view)
    # Its last line, the facts, ends a margin above its bottom border.
    layout = card.layout()
    assert layout is not None
    below = card.height() - 1 - card.meta_label.geometry().bottom()
    assert below <= layout.contentsMargins().bottom() + card.frameWidth() + 1, below
