"""ragdesk: Retrieval-Augmented Generation over local Wikipedia index snapshots.

Heavy libraries (torch, transformers, faiss) are imported lazily, so importing this package
is cheap. The public engine API is :func:`load_engine`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragdesk._version import __version__

if TYPE_CHECKING:
    from ragdesk.core.engine.api import Engine

__all__ = ["__version__", "load_engine"]


def load_engine(*args: Any, **kwargs: Any) -> Engine:
    """Load a RAG engine over a snapshot; see ``ragdesk.core.engine.api.load_engine``."""
    from ragdesk.core.engine.api import load_engine as _load_engine

    return _load_engine(*args, **kwargs)
