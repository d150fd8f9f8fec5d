"""Puts the explore views in the main window's View ▸ Explore menu.

``ragdesk.ui.app`` calls :func:`install` through ``main_window.explore_views_installer``. The
views follow ``MainWindow.answerSelected``; the map encodes questions with the loaded engine's
question encoder and opens snapshots from the window's library, both in its worker thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # The views (and numpy) load when first opened, not while the main window starts.
    import numpy as np

    from ragdesk.core.types import Hit
    from ragdesk.ui.explore.retrieval_map import RetrievalMap
    from ragdesk.ui.explore.step_through import StepThrough
    from ragdesk.ui.main_window import MainWindow

MAP_TITLE = "Retrieval map"
STEPS_TITLE = "Generation step-through"


def install(window: MainWindow) -> None:
    window.add_explore_view(MAP_TITLE, retrieval_map_view, shortcut="Ctrl+Shift+M")
    window.add_explore_view(STEPS_TITLE, step_through_view, shortcut="Ctrl+Shift+G")


def retrieval_map_view(window: MainWindow) -> RetrievalMap:
    from ragdesk.ui.explore.retrieval_map import RetrievalMap

    backend: Any = window.backend

    def encode(text: str) -> np.ndarray:
        vec: np.ndarray = backend.engine(window.pack).question_encoder.encode([text])[0]
        return vec

    def resolve(name: str | None) -> Any:
        library = backend.library()
        return library.get(name) if name else library.current()

    view = RetrievalMap(encode=encode, resolve_snapshot=resolve)
    window.answerSelected.connect(view.show_answer)
    view.askFromHere.connect(
        lambda question, _vec, hits: _ask_from_here(window, view, question, hits))
    return view


def step_through_view(window: MainWindow) -> StepThrough:
    from ragdesk.ui.explore.step_through import StepThrough

    view = StepThrough()
    window.answerSelected.connect(view.show_answer)
    return view


def _ask_from_here(window: MainWindow, view: RetrievalMap, question: str,
                   hits: list[Hit]) -> None:
    ask = getattr(window, "ask_from_docs", None)
    if not callable(ask):
        view.show_status("This main window cannot answer from given passages yet "
                         "(it has no ask_from_docs).")
        return
    ask(question, hits, snapshot=view.snapshot_name())
