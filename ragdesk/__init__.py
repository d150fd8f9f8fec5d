"""ragdesk: Retrieval-Augmented Generation over local Wikipedia index snapshots.

Heavy libraries (torch, transformers, faiss) are imported lazily, so importing this package
is cheap. The public engine API is :func:`load_engine`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ragdesk._version import __version__

if TYPE_CHECKING:
    from ragdesk.core.engine.api import Engine

__all__ = ["__version__", "load_engine"]


def load_engine(snapshot: str | None = None,
                question_encoder: str | os.PathLike[str] | None = None,
                generator: str | os.PathLike[str] | None = None,
                data_dir: str | os.PathLike[str] | None = None,
                pack: str | None = None) -> Engine:
    """Load a RAG engine over a snapshot; see :func:`ragdesk.core.session.load_engine`."""
    # Imported here so that `import ragdesk` (and `ragdesk --help`) loads no database or
    # model code.
    from ragdesk.core.session import load_engine as _load_engine

    return _load_engine(snapshot=snapshot, question_encoder=question_encoder,
                        generator=generator, data_dir=data_dir, pack=pack)
