"""Explore views that explain RAG: the retrieval map with a draggable query, and a
step-through of generation with the document posterior at each token."""

from ragdesk.ui.explore.install import install
from ragdesk.ui.explore.map_canvas import MapCanvas
from ragdesk.ui.explore.retrieval_map import RetrievalMap
from ragdesk.ui.explore.step_through import AnswerSteps, PosteriorBars, StepThrough

__all__ = ["AnswerSteps", "MapCanvas", "PosteriorBars", "RetrievalMap", "StepThrough",
           "install"]
