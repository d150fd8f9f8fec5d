"""The retrieval map tells the truth about whose passages it shows: the card's [n] and colours
only for the card's passages; for an answer that used BM25 it says the map is dense retrieval,
names its own passages d1…, and marks the card's where they lie. A map of a snapshot the
catalog no longer holds says so and asks nothing. Numbers read like the chips'; label colours
read on both themes."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import Qt

from ragdesk.core.projection import ArraySnapshot, ProjectionCache, retrieved_docs
from ragdesk.core.types import Answer, Hit, RetrievedDoc
from ragdesk.core.units import percent, prior_text
from ragdesk.ui.explore import RetrievalMap
from ragdesk.ui.explore.palette import QUERY_COLOUR, rank_colour
from tests.ui.explore.helpers import array_snapshot, exact_top_k

K = 5
QUESTION = "passage 9"


def _answer(snap: ArraySnapshot, docs: list[RetrievedDoc], retriever: str | None) -> Answer:
    return Answer(question=QUESTION, text="", token_ids=[], tokens=[], docs=docs,
                  logprob=0.0, mode="token", snapshot=snap.name, retriever=retriever)


def _map(qtbot: Any, snap: ArraySnapshot, q: np.ndarray) -> RetrievalMap:
    w = RetrievalMap(resolve_snapshot=lambda _name: snap, encode=lambda _text: q,
                     cache=ProjectionCache(), n_neighbours=120)
    qtbot.addWidget(w)
    w.resize(520, 900)  # a side dock
    w.show()
    qtbot.waitExposed(w)
    return w


def _bm25_docs(snap: ArraySnapshot, q: np.ndarray) -> list[RetrievedDoc]:
    """Five passages that are not the dense top five, as BM25 might return them."""
    dense = set(exact_top_k(snap.embeddings(), q, 50)[0])
    ids = [i for i in (500, 42, 7, 300, 150, 451, 77) if i not in dense][:K]
    hits = [Hit(i, f"Passage {i}", f"text of passage {i}", 10.0 - n)
            for n, i in enumerate(ids)]
    return retrieved_docs(hits, snap.name)


def _table(w: RetrievalMap, col: int) -> list[str]:
    return [w.table.item(r, col).text() for r in range(w.table.rowCount())]


def test_a_bm25_answer_map_says_it_is_dense_and_keeps_the_card_numbers_for_the_card(
        qtbot: Any) -> None:
    snap = array_snapshot(seed=5, name="wiki")
    q = snap.embeddings()[9]
    card_docs = _bm25_docs(snap, q)
    w = _map(qtbot, snap, q)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_answer(_answer(snap, card_docs, "sparse"))
    dense_ids, dense_probs = exact_top_k(snap.embeddings(), q, K)
    assert [d.id for d in w.retrieved()] == dense_ids

    # It says so, plainly, above the map.
    assert w.notice.isVisible()
    text = w.notice.text()
    assert "BM25" in text and "dense" in text and "d1–d5" in text and "[1]–[5]" in text
    assert not w.numbered_like_the_card()
    # The dense passages are d1…d5, never the card's [n], in the table and on the map.
    assert _table(w, 0) == [f"d{i}" for i in range(1, K + 1)]
    assert _table(w, 2) == [f"Passage {i}" for i in dense_ids]
    assert "Dense retrieval (not the card's passages)" in w.side.title.text()
    for r, prob in enumerate(dense_probs):
        assert w.canvas.label_text(r, prob) == f"d{r + 1} {percent(prob)}"
        assert w.canvas.dot_colour(r).rgb() not in {rank_colour(i).rgb() for i in range(10)}
    # The card's passages are marked under the card's numbers, where their vectors project.
    assert w.canvas.card_marks() == {d.id: r for r, d in enumerate(card_docs)}
    data = w.map_data()
    assert data is not None
    points = {p.id: p for p in w.canvas.points()}
    for d in card_docs:
        np.testing.assert_allclose(points[d.id].xy,
                                   data.projection.project(snap.embeddings()[d.id]),
                                   atol=1e-5)
    hover = w.canvas._hover_text(points[card_docs[1].id])
    assert hover == f"the card's [2] Passage {card_docs[1].id}"
    w.canvas.grab()
    assert len(w.canvas.label_boxes()) == 1 + K + K  # the query, d1…d5, [1]…[5]


def test_a_dense_answer_map_numbers_its_passages_like_the_card(qtbot: Any) -> None:
    snap = array_snapshot(seed=5, name="wiki")
    q = snap.embeddings()[9]
    docs = retrieved_docs(snap.search(q[None, :], K)[0], snap.name)
    w = _map(qtbot, snap, q)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_answer(_answer(snap, docs, "dense"))
    assert [d.id for d in w.retrieved()] == [d.id for d in docs]
    assert w.numbered_like_the_card() and not w.notice.isVisible()
    assert _table(w, 0) == [f"[{i}]" for i in range(1, K + 1)]
    assert w.canvas.card_marks() == {}
    assert w.canvas.dot_colour(0).rgb() == rank_colour(0).rgb()
    # Then a BM25 answer to the same question on the same snapshot: the map says so.
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_answer(_answer(snap, _bm25_docs(snap, q), "sparse"))
    assert not w.numbered_like_the_card() and w.notice.isVisible()
    assert _table(w, 0)[0] == "d1"


def test_asking_from_the_dense_passages_makes_them_the_cards(qtbot: Any) -> None:
    snap = array_snapshot(seed=5, name="wiki")
    q = snap.embeddings()[9]
    w = _map(qtbot, snap, q)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_answer(_answer(snap, _bm25_docs(snap, q), "sparse"))
    # The answer "Ask from here" gives reads the map's passages: they are its card's now.
    w.show_answer(_answer(snap, w.retrieved(), None))
    assert not w.is_busy()
    assert w.numbered_like_the_card() and not w.notice.isVisible()
    assert _table(w, 0)[0] == "[1]" and w.canvas.card_marks() == {}


def test_a_map_of_a_removed_snapshot_says_so_and_asks_nothing(qtbot: Any) -> None:
    snap = array_snapshot(seed=5, name="wiki")
    q = snap.embeddings()[9]
    docs = retrieved_docs(snap.search(q[None, :], K)[0], snap.name)
    w = _map(qtbot, snap, q)
    w.set_catalog(["wiki", "other"])
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_answer(_answer(snap, docs, "dense"))
    assert w.ask_button.isEnabled() and not w.notice.isVisible()
    w.set_catalog(["other"])  # `ragdesk index remove wiki`
    assert w.removed()
    assert w.notice.isVisible() and "wiki has been removed" in w.notice.text()
    assert not w.ask_button.isEnabled()
    asked: list[object] = []
    w.askFromHere.connect(lambda *args: asked.append(args))
    w.ask_button.click()
    w.canvas.askRequested.emit()  # Enter on the map
    assert asked == []
    w.set_catalog(["wiki", "other"])  # imported again under the name
    assert w.ask_button.isEnabled() and not w.notice.isVisible()


def test_numbers_read_as_percentages_like_the_chips(qtbot: Any) -> None:
    snap = array_snapshot(seed=5, name="wiki")
    q = snap.embeddings()[9]
    w = _map(qtbot, snap, q)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_question(QUESTION)
    docs = w.retrieved()
    assert _table(w, 1) == [percent(d.prob) for d in docs]
    assert w.table.horizontalHeaderItem(1).text() == "Retrieval"
    for r, d in enumerate(docs):
        assert re.fullmatch(r"\[\d\] \d{1,3}%", w.canvas.label_text(r, d.prob))
        point = next(p for p in w.canvas.points() if p.id == d.id)
        assert w.canvas._hover_text(point).endswith(prior_text(d.prob))
    w.table.setCurrentCell(0, 2)
    assert prior_text(docs[0].prob) in w.preview.toPlainText()
    assert "0." not in w.status_label.text()


# WCAG 2.x, written out here rather than taken from the palette module it checks.
def _linear(c: int) -> float:
    v = c / 255
    return v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4


def _wcag(a: Any, b: Any) -> float:
    la, lb = (0.2126 * _linear(c.red()) + 0.7152 * _linear(c.green())
              + 0.0722 * _linear(c.blue()) for c in (a, b))
    hi, lo = max(la, lb), min(la, lb)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("theme", ["light", "dark"])
@pytest.mark.usefixtures("no_app_style_sheet")
def test_map_label_colours_reach_4_5_to_1_on_the_canvas(qtbot: Any, theme: str) -> None:
    from ragdesk.ui.explore.palette import background, query_label_colour
    from ragdesk.ui.theme import dark_palette, light_palette

    pal = light_palette() if theme == "light" else dark_palette()
    other = dark_palette() if theme == "light" else light_palette()
    snap = array_snapshot(seed=5, name="wiki")
    w = _map(qtbot, snap, snap.embeddings()[9])
    w.setPalette(other)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_question(QUESTION)
    w.setPalette(pal)  # the theme switched with the map on the screen
    bg = background(w.canvas.palette())
    assert bg.rgb() == background(pal).rgb()
    for rank in range(10):
        assert _wcag(w.canvas.label_colour(rank), bg) >= 4.5, (theme, rank)
    assert _wcag(query_label_colour(bg), bg) >= 4.5
    # The identity colours themselves stay for the dots; a few of them did not read as text.
    assert min(_wcag(rank_colour(r), bg) for r in range(10)) < 4.5
    assert _wcag(QUERY_COLOUR, bg) < 4.5 or theme == "light"
    # The table's [n] too, on the table's background.
    table_bg = w.table.palette().color(w.table.palette().ColorRole.Base)
    for row in range(w.table.rowCount()):
        assert _wcag(w.table.item(row, 0).foreground().color(), table_bg) >= 4.5
    # Names that are not the card's take the theme's text colour, whatever the theme was.
    card = retrieved_docs(snap.search(snap.embeddings()[400][None, :], K)[0], snap.name)
    w.setPalette(other)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_answer(_answer(snap, card, "sparse"))
    w.setPalette(pal)
    assert w.table.item(0, 0).text() == "d1"
    assert w.table.item(0, 0).data(Qt.ItemDataRole.ForegroundRole) is None
    assert _wcag(w.side.name_colour(0), table_bg) >= 4.5
    assert _wcag(w.canvas.label_colour(0), bg) >= 4.5


def test_the_notice_counts_the_cards_passages_in_the_right_number() -> None:
    from ragdesk.ui.explore.map_card import differs_text

    assert differs_text("sparse", 5).endswith("The card's [1]–[5] are the squares.")
    assert "(d1–d5)" in differs_text("sparse", 5)
    one = differs_text("sparse", 1)
    assert one.endswith("The card's [1] is the square.") and "(d1)" in one
