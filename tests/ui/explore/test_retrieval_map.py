"""The retrieval map: dragging the query handle retrieves exactly what an exact search with
the mapped-back vector retrieves; the projection is fitted off the GUI thread; stale results
are dropped."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt, QThread
from PySide6.QtWidgets import QApplication

from ragdesk.core import projection as projmod
from ragdesk.core.projection import ArraySnapshot, ProjectionCache
from ragdesk.ui.explore import RetrievalMap
from tests.ui.explore.helpers import (
    GatedSnapshot,
    array_snapshot,
    exact_top_k,
    lift_by_hand,
)

K = 5

# The offscreen platform warns when a top-level widget is shown; nothing to do with us.


def _open_map(qtbot, snapshot, question_vec, **kw) -> RetrievalMap:  # type: ignore[no-untyped-def]
    w = RetrievalMap(snapshot, k=K, n_neighbours=150, cache=ProjectionCache(), **kw)
    qtbot.addWidget(w)
    w.resize(1000, 640)
    w.show()
    qtbot.waitExposed(w)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_question("a question", question_vec)
    return w


def _far_target(w: RetrievalMap) -> QPoint:
    """A pixel on a drawn passage far (in the plane) from the question, inside the canvas."""
    data = w.map_data()
    assert data is not None
    q = np.array(data.query_xy)
    pts = sorted(w.canvas.points(), key=lambda p: -np.hypot(*(np.array(p.xy) - q)))
    for p in pts:
        pix = w.canvas.to_widget(p.xy)
        if 20 < pix.x() < w.canvas.width() - 20 and 20 < pix.y() < w.canvas.height() - 20:
            point: QPoint = pix.toPoint()
            return point
    raise AssertionError("no passage inside the canvas")


def _drag(qtbot, w: RetrievalMap, target: QPoint, steps: int = 6) -> None:  # type: ignore[no-untyped-def]
    start_f = w.canvas.handle_widget_pos()
    assert start_f is not None
    start = start_f.toPoint()
    qtbot.mousePress(w.canvas, Qt.MouseButton.LeftButton, pos=start)
    assert w.canvas.dragging
    for i in range(1, steps + 1):
        t = i / steps
        qtbot.mouseMove(w.canvas, pos=QPoint(round(start.x() + t * (target.x() - start.x())),
                                             round(start.y() + t * (target.y() - start.y()))))
    qtbot.mouseRelease(w.canvas, Qt.MouseButton.LeftButton, pos=target)
    assert not w.canvas.dragging
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)


def _assert_matches_exact_search(w: RetrievalMap, vectors: np.ndarray, release: QPoint) -> None:
    data = w.map_data()
    assert data is not None
    xy = w.canvas.to_data(QPointF(release))
    expected_q = lift_by_hand(data.projection, xy, data.query)
    got_q = w.current_query()
    assert got_q is not None
    np.testing.assert_allclose(got_q, expected_q, rtol=1e-5, atol=1e-5)
    ids, probs = exact_top_k(vectors, expected_q, K)
    assert [d.id for d in w.retrieved()] == ids
    np.testing.assert_allclose([d.prob for d in w.retrieved()], probs, rtol=1e-4, atol=1e-6)
    # The table shows the same passages, in rank order.
    assert [w.table.item(r, 2).text() for r in range(w.table.rowCount())] == [
        d.title for d in w.retrieved()]


def test_drag_retrieves_what_exact_search_with_the_lifted_vector_retrieves(qtbot) -> None:  # type: ignore[no-untyped-def]
    snap = array_snapshot()
    vectors = snap.embeddings()
    q = vectors[11] * 0.8 + 0.05
    w = _open_map(qtbot, snap, q)
    before = [d.id for d in w.retrieved()]
    assert before == exact_top_k(vectors, q, K)[0]

    changes: list[list[int]] = []
    w.retrievalChanged.connect(lambda docs: changes.append([d.id for d in docs]))
    target = _far_target(w)
    _drag(qtbot, w, target)

    _assert_matches_exact_search(w, vectors, target)
    assert [d.id for d in w.retrieved()] != before, "the drag should change the retrieved set"
    assert changes and changes[-1] == [d.id for d in w.retrieved()]
    # Every retrieved passage is drawn (new ones are added to the map).
    drawn = {p.id for p in w.canvas.points()}
    assert {d.id for d in w.retrieved()} <= drawn
    # The handle sits where the mouse let go; the lifted vector projects there.
    data = w.map_data()
    assert data is not None
    np.testing.assert_allclose(data.projection.project(w.current_query()),
                               w.canvas.to_data(QPointF(target)), atol=1e-4)

    # "Back to the question" restores the original retrieval.
    w.reset_button.click()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)
    assert [d.id for d in w.retrieved()] == before


def test_projection_is_fitted_off_the_gui_thread(qtbot, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    seen: list[tuple[bool, bool]] = []
    real = projmod._fit_for_cache

    def watched(vectors, *, cancel):  # type: ignore[no-untyped-def]
        app = QApplication.instance()
        assert app is not None
        seen.append((threading.current_thread() is threading.main_thread(),
                     QThread.currentThread() == app.thread()))
        return real(vectors, cancel=cancel)

    monkeypatch.setattr(projmod, "_fit_for_cache", watched)
    snap = array_snapshot(name="thread-check")
    w = _open_map(qtbot, snap, snap.embeddings()[0])
    assert seen == [(False, False)]
    # A second question on the same snapshot reuses the fitted projection.
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_question("another", snap.embeddings()[5])
    assert len(seen) == 1


def test_encoder_runs_off_the_gui_thread(qtbot) -> None:  # type: ignore[no-untyped-def]
    snap = array_snapshot()
    threads: list[bool] = []

    def encode(text: str) -> np.ndarray:
        threads.append(threading.current_thread() is threading.main_thread())
        vec: np.ndarray = snap.embeddings()[len(text)]
        return vec

    w = RetrievalMap(snap, k=K, encode=encode, cache=ProjectionCache())
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_question("seven c")
    assert threads == [False]
    assert [d.id for d in w.retrieved()] == exact_top_k(snap.embeddings(),
                                                        snap.embeddings()[7], K)[0]


def test_ask_from_here_emits_the_dragged_query_and_its_passages(qtbot) -> None:  # type: ignore[no-untyped-def]
    snap = array_snapshot(seed=4)
    q = snap.embeddings()[3]
    w = _open_map(qtbot, snap, q)
    target = _far_target(w)
    _drag(qtbot, w, target, steps=3)
    with qtbot.waitSignal(w.askFromHere, timeout=5_000) as blocker:
        qtbot.mouseClick(w.ask_button, Qt.MouseButton.LeftButton)
    question, vec, hits = blocker.args
    assert question == "a question"
    np.testing.assert_array_equal(vec, w.current_query())
    assert [h.id for h in hits] == exact_top_k(snap.embeddings(), vec, K)[0]
    ids = [h.id for h in hits]
    np.testing.assert_allclose([h.score for h in hits], snap.embeddings()[ids] @ vec, rtol=1e-5)
    assert [h.id for h in hits] == [d.id for d in w.retrieved()]


def test_hover_names_the_passage(qtbot) -> None:  # type: ignore[no-untyped-def]
    snap = array_snapshot()
    w = _open_map(qtbot, snap, snap.embeddings()[2])
    hovered: list[object] = []
    w.canvas.hoveredChanged.connect(hovered.append)
    # A retrieved passage that is not under the handle.
    handle = w.canvas.handle_widget_pos()
    assert handle is not None
    for doc in w.retrieved():
        pt = next(p for p in w.canvas.points() if p.id == doc.id)
        pix = w.canvas.to_widget(pt.xy)
        if np.hypot(pix.x() - handle.x(), pix.y() - handle.y()) > 20:
            break
    else:
        pytest.skip("every retrieved passage sits under the handle")
    qtbot.mouseMove(w.canvas, pos=pix.toPoint())
    qtbot.waitUntil(lambda: bool(hovered), timeout=5_000)
    got = hovered[-1]
    assert got is not None
    assert w.canvas.point_at(pix) is got
    text = w.canvas._hover_text(got)
    rank = [d.id for d in w.retrieved()].index(got.id)
    assert got.title in text and f"[{rank + 1}]" in text
    # The side panel shows the hovered passage's text.
    assert f"text of passage {got.id}" in w.preview.toPlainText()


def test_stale_search_results_are_dropped(qtbot) -> None:  # type: ignore[no-untyped-def]
    inner = array_snapshot(seed=2)
    snap = GatedSnapshot(inner)
    vectors = inner.embeddings()
    w = _open_map(qtbot, snap, vectors[0])
    data = w.map_data()
    assert data is not None
    snap.gate.clear()  # the next search blocks in the worker
    far = w.canvas.to_data(QPointF(_far_target(w)))
    w.move_query_to(far)
    qtbot.waitUntil(lambda: snap.searches >= 2, timeout=5_000)  # 1 from the map, 1 now
    # Two more moves while the first is in flight: only the newest is searched afterwards.
    w.move_query_to((far[0] * 0.5, far[1] * 0.5))
    w.move_query_to(data.query_xy)
    snap.gate.set()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)
    assert snap.searches == 3
    assert [d.id for d in w.retrieved()] == exact_top_k(vectors, vectors[0], K)[0]

    # A new question while a drag search is in flight: the old search's answer is dropped.
    snap.gate.clear()
    w.move_query_to(far)
    qtbot.waitUntil(lambda: snap.searches >= 4, timeout=5_000)
    w.show_question("new question", vectors[300])
    snap.gate.set()
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)
    assert [d.id for d in w.retrieved()] == exact_top_k(vectors, vectors[300], K)[0]
    np.testing.assert_array_equal(w.current_query(), vectors[300])


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_snapshot_says_the_map_would_be_meaningless(qtbot, n: int) -> None:  # type: ignore[no-untyped-def]
    snap = ArraySnapshot("tiny", np.eye(n, 4, dtype=np.float32), ["a", "b"][:n])
    w = RetrievalMap(snap, k=K, cache=ProjectionCache())
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.failed, timeout=10_000) as blocker:
        w.show_question("q", np.ones(4, dtype=np.float32))
    assert "meaningless" in blocker.args[0]
    assert w.map_data() is None and not w.ask_button.isEnabled()
    assert w.canvas.handle_widget_pos() is None


def test_show_answer_resolves_the_snapshot_by_name_off_the_gui_thread(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.projection import retrieved_docs
    from ragdesk.core.types import Answer

    snaps = {"first": array_snapshot(seed=5, name="first"),
             "second": array_snapshot(seed=6, name="second")}
    calls: list[tuple[str | None, bool]] = []

    def resolve(name: str | None):  # type: ignore[no-untyped-def]
        calls.append((name, threading.current_thread() is threading.main_thread()))
        return snaps[name or "first"]

    def encode(text: str) -> np.ndarray:
        vec: np.ndarray = snaps["second"].embeddings()[int(text.split()[-1])]
        return vec

    w = RetrievalMap(resolve_snapshot=resolve, encode=encode, cache=ProjectionCache())
    qtbot.addWidget(w)
    hits = snaps["second"].search(encode("passage 9")[None, :], 3)[0]
    answer = Answer(question="passage 9", text="", token_ids=[], tokens=[],
                    docs=retrieved_docs(hits, "second"), logprob=0.0, mode="token",
                    snapshot="second")
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_answer(answer)
    assert calls == [("second", False)]
    data = w.map_data()
    assert data is not None and data.snapshot == "second"
    # The map's top K is the answer's passages, with the same p(z|x).
    assert [d.id for d in w.retrieved()] == [d.id for d in answer.docs]
    np.testing.assert_allclose([d.prob for d in w.retrieved()], [d.prob for d in answer.docs],
                               rtol=1e-6)
    # Dragging now searches the resolved snapshot.
    w.move_query_to((data.query_xy[0] + 2.0, data.query_xy[1]))
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)
    want = exact_top_k(snaps["second"].embeddings(), w.current_query(), 3)[0]
    assert [d.id for d in w.retrieved()] == want


def test_an_answer_from_the_dragged_passages_keeps_the_map(qtbot) -> None:  # type: ignore[no-untyped-def]
    from ragdesk.core.types import Answer

    snap = array_snapshot(seed=8)
    q = snap.embeddings()[4]
    w = RetrievalMap(snap, k=K, encode=lambda _text: q, cache=ProjectionCache())
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_question("a question")
    data = w.map_data()
    assert data is not None
    at_question = w.retrieved()
    w.move_query_to((data.query_xy[0] + 2.0, data.query_xy[1] + 1.0))
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)
    dragged = w.current_query()
    assert [d.id for d in w.retrieved()] != [d.id for d in at_question]

    def answer(docs: list) -> Answer:  # type: ignore[type-arg]
        return Answer(question="a question", text="", token_ids=[], tokens=[], docs=docs,
                      logprob=0.0, mode="token", snapshot=snap.name)

    w.show_answer(answer(w.retrieved()))
    assert not w.is_busy()
    np.testing.assert_array_equal(w.current_query(), dragged)
    # An answer from other passages redraws the map at its question (same snapshot object).
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_answer(answer(at_question))
    np.testing.assert_array_equal(w.current_query(), q)
    assert [d.id for d in w.retrieved()] == [d.id for d in at_question]
