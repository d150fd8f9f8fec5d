"""The explore views on a real snapshot (imported from JSONL with the tiny DPR encoders) and a
real engine: dragging matches an exact FAISS search over the snapshot's embeddings file,
"Ask from here" answers from exactly the dragged passages, and the step-through of those
answers shows the posteriors the engine stored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PySide6.QtCore import QPoint, QPointF, Qt

from ragdesk.core.projection import ProjectionCache, snapshot_key
from ragdesk.core.snapshots import import_snapshot, open_snapshot
from ragdesk.ui.explore import RetrievalMap, StepThrough
from tests.ui.explore.helpers import exact_top_k, lift_by_hand

K = 4
QUESTION = "what is the capital of france?"


@pytest.fixture(scope="module")
def snapshot_setup(tiny_models: Any, tmp_path_factory: pytest.TempPathFactory
                   ) -> dict[str, Any]:
    from ragdesk.core.app import AppContext

    root = tmp_path_factory.mktemp("explore-snapshot")
    src = root / "articles.jsonl"
    src.write_text("".join(json.dumps({"title": t, "text": x}) + "\n"
                           for t, x in tiny_models.corpus[:120]), encoding="utf-8")
    ctx = AppContext(root / "data")
    import_snapshot(ctx.data, ctx.catalog, src, name="explore", encoder=tiny_models.ctx_encoder,
                    fmt="jsonl")
    ctx.close()
    return {"data_dir": root / "data"}


@pytest.fixture()
def index(snapshot_setup: dict[str, Any]) -> Any:
    from ragdesk.core.app import AppContext

    ctx = AppContext(snapshot_setup["data_dir"])
    idx = open_snapshot(ctx.data, ctx.catalog, "explore")
    yield idx
    idx.close()
    ctx.close()


@pytest.fixture(scope="module")
def engine(tiny_parts: tuple[Any, Any]) -> Any:
    """The tiny DPR question encoder and BART (loaded once by tests/ui/conftest.py)."""
    from ragdesk.core.engine import Engine

    return Engine(*tiny_parts)


def _embeddings_file(index: Any) -> np.ndarray:
    """The snapshot's vectors read straight from its .npy file, not through SnapshotIndex."""
    vec: np.ndarray = np.load(Path(index.folder) / "embeddings.npy").astype(np.float32)
    return vec


def test_drag_on_a_real_snapshot_matches_exact_search(qtbot, index: Any, engine: Any) -> None:  # type: ignore[no-untyped-def]
    vectors = _embeddings_file(index)
    assert vectors.shape[0] == index.size >= 120
    encode = engine.question_encoder.encode
    w = RetrievalMap(index, k=K, n_neighbours=80, cache=ProjectionCache(),
                     encode=lambda text: encode([text])[0])
    qtbot.addWidget(w)
    w.resize(1000, 640)
    w.show()
    qtbot.waitExposed(w)
    with qtbot.waitSignal(w.mapReady, timeout=30_000):
        w.show_question(QUESTION)
    q = encode([QUESTION])[0]
    data = w.map_data()
    assert data is not None
    np.testing.assert_allclose(data.query, q, rtol=1e-5, atol=1e-6)
    assert [d.id for d in w.retrieved()] == exact_top_k(vectors, q, K)[0]
    # The engine retrieves the same passages for the question.
    assert [d.id for d in engine.retrieve(QUESTION, K, snapshot=index)] == \
        [d.id for d in w.retrieved()]

    # Drag towards the drawn passage farthest from the question in the plane.
    qxy = np.array(data.query_xy)
    far = max(w.canvas.points(), key=lambda p: float(np.hypot(*(np.array(p.xy) - qxy))))
    end = w.canvas.to_widget(tuple(qxy + 0.9 * (np.array(far.xy) - qxy))).toPoint()
    start_f = w.canvas.handle_widget_pos()
    assert start_f is not None
    start = start_f.toPoint()
    qtbot.mousePress(w.canvas, Qt.MouseButton.LeftButton, pos=start)
    for i in range(1, 5):
        qtbot.mouseMove(w.canvas, pos=QPoint(start.x() + i * (end.x() - start.x()) // 4,
                                             start.y() + i * (end.y() - start.y()) // 4))
    qtbot.mouseRelease(w.canvas, Qt.MouseButton.LeftButton, pos=end)
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=30_000)

    lifted = lift_by_hand(data.projection, w.canvas.to_data(QPointF(end)), data.query)
    np.testing.assert_allclose(w.current_query(), lifted, rtol=1e-5, atol=1e-5)
    ids, probs = exact_top_k(vectors, lifted, K)
    assert [d.id for d in w.retrieved()] == ids
    assert ids != exact_top_k(vectors, q, K)[0], "the drag should change the retrieved set"
    np.testing.assert_allclose([d.prob for d in w.retrieved()], probs, rtol=1e-4, atol=1e-6)
    # Titles and texts are the snapshot's.
    assert [d.title for d in w.retrieved()] == [p.title for p in index.get_passages(ids)]


def test_ask_from_here_then_step_through(qtbot, index: Any, engine: Any) -> None:  # type: ignore[no-untyped-def]
    encode = engine.question_encoder.encode
    w = RetrievalMap(index, k=K, n_neighbours=60, cache=ProjectionCache())
    qtbot.addWidget(w)
    with qtbot.waitSignal(w.mapReady, timeout=30_000):
        w.show_question(QUESTION, encode([QUESTION])[0])
    data = w.map_data()
    assert data is not None
    w.move_query_to((data.query_xy[0] + 1.0, data.query_xy[1] - 1.0))
    qtbot.waitUntil(lambda: not w.is_busy(), timeout=30_000)

    answers: list[Any] = []

    # What the main window does with the signal (on a worker there; inline here).
    def answer(question: str, _vec: np.ndarray, hits: list[Any]) -> None:
        for mode in ("token", "sequence"):
            answers.append(engine.answer_from_docs(question, hits, mode=mode,
                                                   max_new_tokens=8, snapshot_name=index.name))

    w.askFromHere.connect(answer)
    qtbot.mouseClick(w.ask_button, Qt.MouseButton.LeftButton)
    assert [a.mode for a in answers] == ["token", "sequence"]
    for a in answers:
        assert [d.id for d in a.docs] == [d.id for d in w.retrieved()]
        np.testing.assert_allclose([d.prob for d in a.docs], [d.prob for d in w.retrieved()],
                                   rtol=1e-5)
        assert a.tokens, "the tiny generator should produce tokens"

    view = StepThrough(answers)
    qtbot.addWidget(view)
    view.show()
    assert view.step_count == max(len(a.tokens) for a in answers)
    for step in range(view.step_count + 1):
        view.set_step(step)
        for panel, a in zip(view.panels, answers, strict=True):
            s = min(step, len(a.tokens))
            want = [d.prob for d in a.docs] if s == 0 else a.tokens[s - 1].posterior
            assert panel.bars.values() == want
            assert abs(sum(want) - 1.0) < 1e-4


def test_projection_cache_key_follows_the_snapshot(index: Any) -> None:
    key = snapshot_key(index)
    assert key == ("explore", index.size, str(index.manifest.created))
