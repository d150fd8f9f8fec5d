"""The GUI names a retriever as the CLI does (tests/test_retriever_names.py): the card's line
of facts and the retrieval map's note say "BM25" and "hybrid" inside their sentences."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ragdesk.core.options import AnswerOptions, RetrieverName
from ragdesk.ui.chat.card import AnswerCard
from ragdesk.ui.explore.map_card import differs_text
from tests.ui.fakes import make_answer


@pytest.mark.parametrize(("asked", "used", "said"), [
    ("hybrid", "hybrid", "hybrid"), ("sparse", "sparse", "BM25"),
    ("dense", "sparse", "BM25 (dense index not ready yet)")])
def test_the_card_names_the_retriever_that_searched(qtbot: Any, asked: RetrieverName,
                                                    used: str, said: str) -> None:
    answer = dataclasses.replace(make_answer(k=3), retriever=used)
    card = AnswerCard(1, answer.question, AnswerOptions(n_docs=3, retriever=asked),
                      answer.snapshot)
    qtbot.addWidget(card)
    card.finish(answer)
    facts = card.meta_label.text().replace("\xa0", " ").split("  ·  ")
    assert said in facts and "sparse" not in card.meta_label.text()


@pytest.mark.parametrize(("key", "said"), [("sparse", "from BM25 retrieval"),
                                           ("hybrid", "from hybrid retrieval")])
def test_the_maps_note_names_the_retriever_inside_its_sentence(key: str, said: str) -> None:
    assert said in differs_text(key, 5)


def test_the_maps_note_names_no_retriever_for_passages_found_otherwise() -> None:
    assert differs_text(None, 5).startswith("This answer read other passages")
    assert differs_text("custom", 5).startswith("This answer read other passages")
