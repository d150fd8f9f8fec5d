"""An answer asked with the retrieval map's "Ask from here" says so on its card, names no
retriever (none found its passages), and keeps the mark when its conversation is opened
again; an answer to a typed question has no such mark."""

from __future__ import annotations

from typing import Any

from ragdesk.core.options import AnswerOptions
from ragdesk.core.types import Hit
from ragdesk.ui.chat.card import CHOSEN_PASSAGES, AnswerCard
from ragdesk.ui.resources import stylesheet
from tests.ui.fakes import make_answer
from tests.ui.probes import ANSWER_TIMEOUT_MS, ask


def shown_card(qtbot: Any, chosen: bool) -> AnswerCard:
    answer = make_answer(k=3)
    card = AnswerCard(1, answer.question, AnswerOptions(n_docs=3, retriever="hybrid"),
                      answer.snapshot, chosen_passages=chosen)
    qtbot.addWidget(card)
    card.resize(640, 400)
    card.show()
    qtbot.waitExposed(card)
    card.finish(answer)
    return card


def test_the_card_of_an_answer_from_chosen_passages_says_so(qtbot: Any) -> None:
    card = shown_card(qtbot, chosen=True)
    assert card.chosen_label.isVisible() and card.chosen_label.text() == CHOSEN_PASSAGES
    # styled like the card's other secondary lines, and tall enough for its wrapped text
    label = card.chosen_label
    rule = next(line for line in stylesheet().splitlines()
                if f"#{label.objectName()}" in line)
    assert rule.startswith("#ChipsCaption, ")
    assert label.height() >= label.heightForWidth(label.width())
    # the retriever the controls name did not find these passages
    assert "hybrid" not in card.meta_label.text()
    assert "K = 3" in card.meta_label.text().replace("\xa0", " ")


def test_a_typed_questions_card_has_no_mark(qtbot: Any) -> None:
    card = shown_card(qtbot, chosen=False)
    assert not card.chosen_label.isVisible()
    assert "hybrid" in card.meta_label.text()


def test_the_mark_is_stored_with_the_answers_options(qtbot: Any) -> None:
    chosen, typed = shown_card(qtbot, chosen=True), shown_card(qtbot, chosen=False)
    assert AnswerOptions.from_settings(chosen.stored_options()) == chosen.params
    assert chosen.stored_options() != typed.stored_options()
    assert typed.stored_options() == typed.params.to_settings()


def test_ask_from_here_marks_its_card_and_the_mark_comes_back(qtbot: Any, window: Any) -> None:
    with qtbot.waitSignal(window.history.saved, timeout=ANSWER_TIMEOUT_MS):
        typed = ask(qtbot, window, "who wrote the origin of species?")
    hits = [Hit(d.id, d.title, d.text, d.score) for d in typed.docs[:2]]
    with qtbot.waitSignal(window.history.saved, timeout=ANSWER_TIMEOUT_MS) as sig:
        card = window.ask_from_docs(typed.question, hits, snapshot=typed.snapshot)
    assert card is not None
    qtbot.waitUntil(lambda: card.answer is not None, timeout=ANSWER_TIMEOUT_MS)
    first, second = window.chat.cards
    assert not first.chosen_label.isVisible() and second.chosen_label.isVisible()

    cid = int(sig.args[0])
    window.history.new()
    qtbot.waitUntil(lambda: not window.chat.cards, timeout=10_000)
    window.history.open(cid)
    qtbot.waitUntil(lambda: len(window.chat.cards) == 2, timeout=10_000)
    first, second = window.chat.cards
    assert [c.chosen_passages for c in (first, second)] == [False, True]
    qtbot.waitUntil(second.chosen_label.isVisible)  # the chat shows its cards on its next pass
    assert first.isVisible() and not first.chosen_label.isVisible()
