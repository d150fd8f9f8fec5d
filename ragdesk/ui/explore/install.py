"""Puts the explore views in the main window's View ▸ Explore menu.

The window calls :func:`install` with its :class:`~ragdesk.ui.explore_docks.ExploreDocks`,
as it installs every other view. The views get a
:class:`~ragdesk.ui.view_context.ViewContext` and follow its ``state.answerSelected``; the
map encodes questions with the loaded engine's question encoder and opens snapshots from
the backend's library, both on the op runner's reads lane, and follows the catalog's list of
snapshots. The step-through hides what the answer's card hides: the guess of an answer not
found in the snapshot, until "Show the guess" on the card.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # The views (and numpy) load when first opened, not while the main window starts.
    import numpy as np

    from ragdesk.core.projection import VectorSnapshot
    from ragdesk.core.types import Hit
    from ragdesk.ui.explore.retrieval_map import RetrievalMap
    from ragdesk.ui.explore.step_through import StepThrough
    from ragdesk.ui.explore_docks import ExploreDocks
    from ragdesk.ui.view_context import ViewContext

MAP_TITLE = "Retrieval map"
STEPS_TITLE = "Generation step-through"


def install(docks: ExploreDocks) -> None:
    docks.add(MAP_TITLE, retrieval_map_view, "Ctrl+Shift+M")
    docks.add(STEPS_TITLE, step_through_view, "Ctrl+Shift+G")


def retrieval_map_view(ctx: ViewContext) -> RetrievalMap:
    from ragdesk.ui.explore.retrieval_map import RetrievalMap

    backend, state = ctx.backend, ctx.state

    def encode(text: str) -> np.ndarray:
        vec: np.ndarray = backend.engine(state.pack).question_encoder.encode([text])[0]
        return vec

    def resolve(name: str | None) -> VectorSnapshot:
        library = backend.library()
        snapshot: VectorSnapshot = library.get(name) if name else library.current()
        return snapshot

    view = RetrievalMap(encode=encode, resolve_snapshot=resolve, ops=ctx.ops)
    state.answerSelected.connect(view.show_answer)
    if state.snapshots_loaded:
        view.set_catalog([s.name for s in state.snapshots])
    state.snapshotsChanged.connect(lambda infos: view.set_catalog([s.name for s in infos]))
    view.askFromHere.connect(
        lambda question, _vec, hits: _ask_from_here(ctx, view, question, hits))
    return view


def step_through_view(ctx: ViewContext) -> StepThrough:
    from ragdesk.ui.explore.step_through import StepThrough

    view = StepThrough()
    # the selection tells again when the card's "Show the guess" toggles
    ctx.state.answerSelected.connect(
        lambda answer: view.show_answer(answer, guess_hidden=ctx.state.guess_hidden))
    ctx.state.answerCleared.connect(lambda: view.set_answers([]))
    return view


def _ask_from_here(ctx: ViewContext, view: RetrievalMap, question: str,
                   hits: list[Hit]) -> None:
    ctx.ask_from_docs(question, hits, view.snapshot_name())
