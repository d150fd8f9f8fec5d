"""The retrieval map without a mouse: Tab reaches the canvas, the arrow keys move the query
(and retrieve exactly what the lifted vector retrieves), Enter asks from there, Home goes back
to the question, and the passages' table takes the keyboard to pick a passage to read."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QLineEdit, QVBoxLayout, QWidget

from ragdesk.core.projection import ProjectionCache
from ragdesk.ui.explore import RetrievalMap
from ragdesk.ui.explore.keys import MAP_FINE_STEP_PX, MAP_STEP_PX
from tests.ui.explore.helpers import array_snapshot, exact_top_k, lift_by_hand

K = 5


def _window(qtbot: Any) -> tuple[QWidget, QLineEdit, RetrievalMap, np.ndarray, np.ndarray]:
    snap = array_snapshot(seed=3)
    vectors = snap.embeddings()
    q = vectors[17] * 0.9
    top = QWidget()
    before = QLineEdit(top)  # where the focus is before Tab
    w = RetrievalMap(snap, k=K, n_neighbours=150, cache=ProjectionCache(), parent=top)
    lay = QVBoxLayout(top)
    lay.addWidget(before)
    lay.addWidget(w)
    qtbot.addWidget(top)
    top.resize(900, 640)
    top.show()
    qtbot.waitExposed(top)
    with qtbot.waitSignal(w.mapReady, timeout=20_000):
        w.show_question("a question", q)
    return top, before, w, vectors, q


def _handle_px(w: RetrievalMap) -> QPointF:
    pos: QPointF | None = w.canvas.handle_widget_pos()
    assert pos is not None
    return pos


def _searched_from_the_handle(w: RetrievalMap, vectors: np.ndarray) -> None:
    data = w.map_data()
    assert data is not None
    xy = w.canvas.to_data(_handle_px(w))
    lifted = lift_by_hand(data.projection, xy, data.query)
    np.testing.assert_allclose(w.current_query(), lifted, rtol=1e-5, atol=1e-5)
    assert [d.id for d in w.retrieved()] == exact_top_k(vectors, lifted, K)[0]


def test_tab_reaches_the_map_and_the_arrow_keys_move_the_query(qtbot: Any) -> None:
    top, before, w, vectors, q = _window(qtbot)
    top.activateWindow()
    before.setFocus()
    qtbot.waitUntil(before.hasFocus)
    qtbot.keyClick(before, Qt.Key.Key_Tab)
    assert w.canvas.hasFocus()

    start = _handle_px(w)
    moves = [(Qt.Key.Key_Right, Qt.KeyboardModifier.NoModifier, MAP_STEP_PX, 0.0),
             (Qt.Key.Key_Right, Qt.KeyboardModifier.NoModifier, MAP_STEP_PX, 0.0),
             (Qt.Key.Key_Up, Qt.KeyboardModifier.NoModifier, 0.0, -MAP_STEP_PX),
             (Qt.Key.Key_Left, Qt.KeyboardModifier.ShiftModifier, -MAP_FINE_STEP_PX, 0.0)]
    x, y = start.x(), start.y()
    for key, mods, dx, dy in moves:
        qtbot.keyClick(w.canvas, key, mods)
        x, y = x + dx, y + dy
        assert _handle_px(w).x() == pytest.approx(x, abs=1e-6)
        assert _handle_px(w).y() == pytest.approx(y, abs=1e-6)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)
    _searched_from_the_handle(w, vectors)
    assert not np.allclose(w.current_query(), q)

    # Enter asks from there, with exactly the passages listed.
    with qtbot.waitSignal(w.askFromHere, timeout=5_000) as asked:
        qtbot.keyClick(w.canvas, Qt.Key.Key_Return)
    assert [h.id for h in asked.args[2]] == [d.id for d in w.retrieved()]
    np.testing.assert_array_equal(asked.args[1], w.current_query())

    # Home: back to the question.
    qtbot.keyClick(w.canvas, Qt.Key.Key_Home)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=20_000)
    np.testing.assert_allclose(w.current_query(), q, rtol=1e-5, atol=1e-5)
    assert [d.id for d in w.retrieved()] == exact_top_k(vectors, q, K)[0]


def test_the_passages_table_takes_the_keyboard(qtbot: Any) -> None:
    top, _before, w, _vectors, _q = _window(qtbot)
    top.activateWindow()
    assert w.table.focusPolicy() & Qt.FocusPolicy.TabFocus
    w.canvas.setFocus()
    qtbot.waitUntil(w.canvas.hasFocus)
    qtbot.keyClick(w.canvas, Qt.Key.Key_Tab)
    assert w.table.hasFocus()
    docs = w.retrieved()
    for row in range(3):
        if row:
            qtbot.keyClick(w.table, Qt.Key.Key_Down)
        # Tabbing in makes the first row current: its passage shows at once.
        assert w.table.currentRow() == row
        assert [i.row() for i in w.table.selectionModel().selectedRows()] == [row]
        assert docs[row].text in w.preview.toPlainText()
        assert docs[row].title in w.preview.toPlainText()
