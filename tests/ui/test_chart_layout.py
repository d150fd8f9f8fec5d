"""Layout of the charts: heat map labels, colour bars, legends and the retrieval map stay
whole and apart at every size they meet."""

from __future__ import annotations

from typing import Any

import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFontMetricsF

from ragdesk.core.types import RetrievedDoc
from ragdesk.ui.heatmap import LABEL_FLOOR_PX, PosteriorHeatMap, label_width
from ragdesk.ui.heatmap_panel import HeatMapPanel
from tests.ui.fakes import LONG_TITLES, make_answer
from tests.ui.settle import settle


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
