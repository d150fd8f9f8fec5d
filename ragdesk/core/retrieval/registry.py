"""Retrievers by name, for ``Engine.answer(retriever=...)``.

The three built in (:data:`ragdesk.core.options.RETRIEVERS`) are registered here; a new one
is a function ``(RetrievalRequest) -> list[Hit]`` passed to :func:`register_retriever`.
"""

from __future__ import annotations

from ragdesk.core.errors import BadInputError
from ragdesk.core.retrieval.dense import dense_retrieve
from ragdesk.core.retrieval.hybrid import hybrid_retrieve, sparse_retrieve
from ragdesk.core.retrieval.request import Retriever

_RETRIEVERS: dict[str, Retriever] = {
    "dense": dense_retrieve,
    "sparse": sparse_retrieve,
    "hybrid": hybrid_retrieve,
}


def register_retriever(name: str, fn: Retriever) -> None:
    """Make ``Engine.answer(retriever=name)`` use ``fn``."""
    _RETRIEVERS[name] = fn


def unregister_retriever(name: str) -> None:
    _RETRIEVERS.pop(name, None)


def get_retriever(name: str) -> Retriever:
    try:
        return _RETRIEVERS[name]
    except KeyError:
        raise BadInputError(f"Unknown retriever {name!r}.",
                            hint=f"Choose one of: {', '.join(sorted(_RETRIEVERS))}.") from None
