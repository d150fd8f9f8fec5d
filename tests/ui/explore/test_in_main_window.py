"""The explore views installed in the real main window (tiny DPR + BART over the GUI tests'
snapshots): they follow the selected answer, the map shows exactly the answer's passages,
and "Ask from here" asks the window for an answer from the dragged query's passages."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtCore import Qt

from ragdesk.ui.explore import RetrievalMap, StepThrough
from ragdesk.ui.explore.install import MAP_TITLE, STEPS_TITLE
from tests.ui.explore.helpers import exact_top_k
from tests.ui.probes import ANSWER_TIMEOUT_MS, ask

TIMEOUT_MS = ANSWER_TIMEOUT_MS


def _open(window: Any, title: str) -> Any:
    act = next(a for a in window.explore_menu.actions() if a.text() == f"&{title}")
    act.setChecked(True)
    dock = window.explore_dock(title)
    assert dock is not None and dock.isVisible()
    return dock.widget()


def test_views_follow_the_selected_answer(qtbot, window) -> None:  # type: ignore[no-untyped-def]
    assert {a.text() for a in window.explore_menu.actions()} >= {f"&{MAP_TITLE}", f"&{STEPS_TITLE}"}
    answer = ask(qtbot, window, "who wrote the origin of species?")
    assert answer.tokens

    steps = _open(window, STEPS_TITLE)
    assert isinstance(steps, StepThrough)
    # Opening a view replays the selected answer to it.
    qtbot.waitUntil(lambda: steps.answers() == [answer], timeout=10_000)
    for step in range(steps.step_count + 1):
        steps.set_step(step)
        want = ([d.prob for d in answer.docs] if step == 0
                else answer.tokens[step - 1].posterior)
        assert steps.panels[0].bars.values() == want

    view = _open(window, MAP_TITLE)
    assert isinstance(view, RetrievalMap)
    qtbot.waitUntil(lambda: view.map_data() is not None and not view.is_busy(),
                    timeout=TIMEOUT_MS)
    assert view.snapshot_name() == answer.snapshot
    # The map's top K are the answer's passages with the same p(z|x).
    assert [d.id for d in view.retrieved()] == [d.id for d in answer.docs]
    np.testing.assert_allclose([d.prob for d in view.retrieved()],
                               [d.prob for d in answer.docs], rtol=1e-5)

    # Drag and ask from there.
    data = view.map_data()
    assert data is not None
    view.move_query_to((data.query_xy[0] + 3.0, data.query_xy[1] - 3.0))
    qtbot.waitUntil(lambda: not view.is_busy(), timeout=TIMEOUT_MS)
    dragged = view.current_query()
    library = window.backend.library()
    vectors = np.asarray(library.get(answer.snapshot).embeddings(), dtype=np.float32)
    hits_ids = exact_top_k(vectors, view.current_query(), len(answer.docs))[0]
    assert [d.id for d in view.retrieved()] == hits_ids

    if not callable(getattr(window, "ask_from_docs", None)):
        qtbot.mouseClick(view.ask_button, Qt.MouseButton.LeftButton)
        assert "ask_from_docs" in view.status_label.text()
        return
    with qtbot.waitSignal(window.conversation.answerFinished, timeout=TIMEOUT_MS) as sig:
        qtbot.mouseClick(view.ask_button, Qt.MouseButton.LeftButton)
    from_here = sig.args[1]
    assert [d.id for d in from_here.docs] == hits_ids
    assert from_here.question == answer.question
    # Selecting that answer keeps the map where the user dragged it: looked at once the map
    # has heard of it and drawn whatever it would (a redraw would be busy until applied).
    qtbot.waitUntil(lambda: window.state.selected_answer is from_here and not view.is_busy(),
                    timeout=TIMEOUT_MS)
    np.testing.assert_array_equal(view.current_query(), dragged)
