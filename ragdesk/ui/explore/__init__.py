"""Explore views that explain RAG: the retrieval map with a draggable query, and a
step-through of generation with the document posterior at each token.

Only :func:`install` loads with the main window; the views load when first used.
"""

from typing import Any

from ragdesk.ui.explore.install import install

_LAZY = {
    "MapCanvas": "ragdesk.ui.explore.map_canvas",
    "RetrievalMap": "ragdesk.ui.explore.retrieval_map",
    "AnswerSteps": "ragdesk.ui.explore.step_through",
    "PosteriorBars": "ragdesk.ui.explore.step_through",
    "StepThrough": "ragdesk.ui.explore.step_through",
}

__all__ = ["AnswerSteps", "MapCanvas", "PosteriorBars", "RetrievalMap", "StepThrough",
           "install"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
