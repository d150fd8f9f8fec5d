"""The honest answer card: the confidence in words, "not found in this snapshot" with the
closest passages and the guess one click away, a source bar that says when no passage holds
the answer, and a legend, heat map and inspector that agree on the shown sources."""

from __future__ import annotations

import dataclasses
import html
from typing import Any

from PySide6.QtCore import Qt

from ragdesk.core.confidence import confidence_label, not_found_message, summarize_sources
from ragdesk.core.options import AnswerOptions
from ragdesk.core.types import Answer, AnswerToken, RetrievedDoc
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.heatmap import PosteriorHeatMap
from ragdesk.ui.inspector import PassageInspector
from tests.ui.fakes import make_answer


def finished_card(qtbot: Any, answer: Answer, streamed: Answer | None = None) -> AnswerCard:
    """A card that streamed ``streamed``'s tokens (default: the answer's) and then got
    ``answer``."""
    card = AnswerCard(1, answer.question, AnswerOptions(n_docs=len(answer.docs)),
                      answer.snapshot)
    qtbot.addWidget(card)
    card.resize(640, 400)
    card.show()
    for tok in (streamed or answer).tokens:
        card.append_token(tok)
    card.finish(answer)
    return card


def quoted(answer: Answer, k: int) -> Answer:
    """The answer with every token shown as quoted from passage ``k``."""
    return dataclasses.replace(answer, tokens=[dataclasses.replace(t, quoted_from=k)
                                               for t in answer.tokens])


def mixed_answer() -> Answer:
    """"July 19": "July" from one passage, "19" from another; no passage holds both."""
    docs = [RetrievedDoc(1, "Zorblat festival", "The Zorblat festival is held on the third "
                         "Sunday of May.", 60.0, 0.6, "demo"),
            RetrievedDoc(2, "World War I", "The war began on 28 July 1914.", 58.0, 0.3, "demo"),
            RetrievedDoc(3, "Numbers", "Nineteen is written 19.", 50.0, 0.1, "demo")]
    tokens = [AnswerToken(5, " July", [0.7, 0.2, 0.1], quoted_from=1),
              AnswerToken(6, " 19", [0.8, 0.1, 0.1], quoted_from=2)]
    return Answer(question="when is the zorblat festival held", text="July 19",
                  token_ids=[5, 6], tokens=tokens, docs=docs, logprob=-3.0, mode="token",
                  snapshot="demo", confidence=0.41)


def test_the_card_says_how_far_to_trust_the_answer(qtbot: Any) -> None:
    sure = dataclasses.replace(make_answer(), confidence=0.72)
    card = finished_card(qtbot, sure)
    assert card.verdict.isVisible()
    assert confidence_label(0.72) in card.verdict.confidence.text()
    assert not card.verdict.guess_button.isVisible() and not card.chips_caption.isVisible()
    assert card.text.isVisible() and card.text.toPlainText().strip() == sure.text
    unknown = finished_card(qtbot, make_answer(seed=3))  # no model judged it
    assert confidence_label(None) in unknown.verdict.confidence.text()
    assert unknown.verdict.level == "unknown"


def test_not_found_names_the_snapshot_and_keeps_the_guess_one_click_away(qtbot: Any) -> None:
    guess = dataclasses.replace(make_answer(snapshot="wiki-2016"), confidence=0.04,
                                abstained=True)
    card = finished_card(qtbot, guess)
    assert card.status_label.isVisible()
    assert card.status_label.text() == not_found_message("wiki-2016")
    assert "wiki-2016" in card.status_label.text()
    assert not card.text.isVisible() and not card.legend.isVisible()
    # The passages are the closest ones, not sources.
    assert card.chips_caption.isVisible() and "Closest passages" in card.chips_caption.text()
    assert "not sources" in card.chips_caption.text()
    assert len(card.chip_widgets()) == len(guess.docs)
    button = card.verdict.guess_button
    assert button.isVisible() and button.text() == "Show the guess"
    for _ in range(2):  # never hidden for good
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        assert card.text.isVisible() and card.text.toPlainText().strip() == guess.text
        assert card.legend.isVisible() and card.legend.label().startswith("The guess")
        assert button.text() == "Hide the guess"
        qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
        assert not card.text.isVisible() and button.text() == "Show the guess"


def test_an_answer_no_passage_holds_says_so_instead_of_a_full_bar(qtbot: Any) -> None:
    ans = mixed_answer()
    summary = summarize_sources(ans)
    assert summary.mixed
    card = finished_card(qtbot, ans)
    assert card.legend.isVisible()
    assert card.legend.label() == "From several passages:"
    assert card.legend.texts() == ["[2]", "[3]"]
    assert not any("%" in t for t in card.legend.texts())
    assert "No retrieved passage holds this whole answer" in card.legend.toolTip()
    # Even when every token cites one passage, a mixed answer draws no "100 %".
    one = dataclasses.replace(ans, tokens=[dataclasses.replace(t, quoted_from=1)
                                           for t in ans.tokens])
    card = finished_card(qtbot, one)
    assert card.legend.texts() == ["[2]"] and "100" not in " ".join(card.legend.texts())


def test_legend_heat_map_and_inspector_agree_on_the_shown_source(qtbot: Any) -> None:
    # Quoted from passage 3 (which holds "Charles Darwin ..."), whatever the posterior says.
    ans = quoted(make_answer(k=5, n_tokens=2, seed=1), 1)
    assert ans.text == "Charles Darwin"
    summary = summarize_sources(ans)
    assert not summary.mixed and summary.primary == 1 and summary.shares[1] == 1.0
    card = finished_card(qtbot, ans)
    assert card.legend.texts()[1] == "[2] 100%"
    assert all(card.text.token_color(i) == card.text.token_color(0) for i in range(2))
    hm = PosteriorHeatMap()
    qtbot.addWidget(hm)
    hm.set_data(ans.tokens, ans.docs)
    assert [w.source for w in hm.words] == [1, 1]
    ins = PassageInspector()
    qtbot.addWidget(ins)
    ins.set_answer(ans)
    assert ins.k == 1  # the passage with the largest share, not rank 1
    assert "2 of 2 tokens (100%)" in ins.fact_labels["share"].text()


def test_the_inspector_opens_on_the_largest_share_in_the_window(qtbot: Any,
                                                                window: Any) -> None:
    ans = quoted(make_answer(k=3, n_tokens=2, seed=1, snapshot="wiki-a"), 2)
    ans = dataclasses.replace(ans, docs=[ans.docs[0], ans.docs[2],
                                         dataclasses.replace(ans.docs[1],
                                                             text="Charles Darwin wrote it.")])
    assert summarize_sources(ans).primary == 2
    card = AnswerCard(-7, ans.question, AnswerOptions(n_docs=3), "wiki-a")
    window.wire_card(card)
    window.chat.add_card(card)
    card.finish(ans)
    window.selection.answered(card)
    assert window.inspector.k == 2
    assert window.heatmap.map.words[0].source == 2


def _abstained_in(window: Any, quoted_from: int, op_id: int) -> tuple[AnswerCard, Answer]:
    """A finished answer of 3 passages that abstained, quoted from passage ``quoted_from``,
    shown in the window as the selected card (its guess hidden)."""
    ans = dataclasses.replace(quoted(make_answer(k=3, n_tokens=2, seed=1), quoted_from),
                              abstained=True, confidence=0.02)
    card = AnswerCard(op_id, ans.question, AnswerOptions(n_docs=3), "demo")
    window.wire_card(card)
    window.chat.add_card(card)
    card.finish(ans)
    window.selection.answered(card)
    return card, ans


def test_an_abstained_answer_opens_on_the_closest_passage_and_the_map_says_so(
        qtbot: Any, window: Any) -> None:
    card, ans = _abstained_in(window, 1, -8)
    assert window.inspector.k == 0
    # the guess is hidden on the card: hidden in the heat map and the inspector too
    assert window.heatmap.map.tokens == [] and "Show the guess" in window.heatmap.caption.text()
    assert "guess is hidden" in window.heatmap.map.empty_text
    share = window.inspector.fact_labels["share"].text()
    assert "hidden" in share and "token" not in share
    window.selection.show_passage(1)  # the passage the guess is quoted from
    assert "background-color" not in window.inspector.body.toHtml()  # its words unmarked
    card.verdict.guess_button.click()
    assert len(window.heatmap.map.tokens) == len(ans.tokens)
    assert "best guess" in window.heatmap.caption.text()
    assert "token" in window.inspector.fact_labels["share"].text()
    assert window.inspector.k == 1 and "background-color" in window.inspector.body.toHtml()
    card.verdict.guess_button.click()
    assert window.heatmap.map.tokens == []
    assert "background-color" not in window.inspector.body.toHtml()


def test_showing_the_guess_opens_the_inspector_on_its_source(qtbot: Any, window: Any) -> None:
    """With no passage picked, Show the guess moves the inspector from the closest passage
    to the one the card's source bar now cites, and Hide the guess moves it back."""
    card, ans = _abstained_in(window, 2, -9)
    assert window.inspector.k == 0
    card.verdict.guess_button.click()
    assert window.inspector.k == 2 == summarize_sources(ans).primary
    card.verdict.guess_button.click()
    assert window.inspector.k == 0


def test_the_not_found_setting_reaches_the_engine_and_is_remembered(
        qtbot: Any, window: Any, monkeypatch: Any) -> None:
    from ragdesk.core.engine import Engine

    seen: list[bool] = []
    judge = Engine.judge

    def spy(self: Engine, ans: Answer, abstain: bool = True, *args: Any, **kw: Any) -> None:
        seen.append(abstain)
        judge(self, ans, abstain, *args, **kw)

    monkeypatch.setattr(Engine, "judge", spy)
    c = window.controls
    assert c.abstain.isChecked() and window.params().abstain  # on by default
    assert "Say when the snapshot does not hold the answer" in \
        c.abstain_check.label.text().replace("&", "")
    qtbot.mouseClick(c.abstain_check.label, Qt.MouseButton.LeftButton)  # the words toggle it
    assert not c.abstain.isChecked() and window.params().abstain is False
    qtbot.waitUntil(lambda: window.settings.get("abstain") is False, timeout=5_000)
    window.question.setPlainText("who wrote it?")
    with qtbot.waitSignal(window.conversation.answerFinished, timeout=120_000) as sig:
        window.send()
    assert seen == [False] and not sig.args[1].abstained
    card = window.chat.cards[-1]
    # The tiny pack has no fitted model: the card says so rather than showing a number.
    assert confidence_label(None) in card.verdict.confidence.text()


def test_a_stored_not_found_answer_reopens_as_one(qtbot: Any, window: Any) -> None:
    store = window.backend.conversations
    conv = store.create("old")
    ans = dataclasses.replace(quoted(make_answer(k=3, n_tokens=2, seed=1, snapshot="wiki-a"),
                                     1), abstained=True, confidence=0.03)
    store.add_answer(conv.id, ans, pack="tiny", options={})
    window.history.open(conv.id)
    qtbot.waitUntil(lambda: bool(window.chat.cards) and window.chat.cards[-1].answer
                    is not None, timeout=10_000)
    card = window.chat.cards[-1]
    # the card is added before it is shown: its widgets' visibility means something after
    qtbot.waitUntil(card.isVisible, timeout=10_000)
    assert card.status_label.text() == not_found_message("wiki-a")
    assert not card.text.isVisible() and card.verdict.guess_button.isVisible()
    assert confidence_label(0.03, abstained=True) in card.verdict.confidence.text()
    assert [t.source for t in card.answer.tokens] == [1, 1]  # the shown source, kept


def test_an_answer_from_memory_says_so_and_cites_no_passage(qtbot: Any) -> None:
    from ragdesk.core.confidence import memory_note

    streamed = make_answer(snapshot="wiki-2016")  # what was streamed: the passages' answer
    memory = dataclasses.replace(
        streamed, text="Alexander Fleming", token_ids=[7, 8],
        tokens=[AnswerToken(7, "Alexander", []), AnswerToken(8, " Fleming", [])],
        confidence=0.52, from_memory=True, other_text=streamed.text)
    card = finished_card(qtbot, memory, streamed)
    assert card.text.toPlainText().strip() == "Alexander Fleming"
    assert html.escape(memory_note("wiki-2016")) in card.verdict.confidence.text()
    assert confidence_label(0.52) in card.verdict.confidence.text()
    assert summarize_sources(memory).primary is None  # no passage is its source
    # the streamed passages' answer drew a source bar: the answer kept draws none
    assert card.legend.k == 0 and not card.legend.isVisible()
    assert card.chips_caption.isVisible() and "not sources" in card.chips_caption.text()
    assert not card.verdict.guess_button.isVisible()
