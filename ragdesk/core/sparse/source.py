"""What a snapshot's sparse (BM25) index is built from, as a type.

Ready snapshots, staged ones (BM25 while the vectors are computed) and test stand-ins all
are one; the sparse index sits below the snapshot library and never imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from ragdesk.core.types import Passage


class PassageSource(Protocol):
    """Passages by id and, when computed, their vectors (what a sparse index is built from)."""

    @property
    def name(self) -> str: ...

    @property
    def folder(self) -> Path: ...

    @property
    def size(self) -> int: ...

    @property
    def created(self) -> str | None:
        """When the snapshot was completed; None while its import is still running."""
        ...

    @property
    def has_dense(self) -> bool:
        """False while the passage vectors are being computed (BM25 answers meanwhile)."""
        ...

    def get_passages(self, ids: Sequence[int]) -> list[Passage]: ...

    def embeddings(self) -> np.ndarray:
        """[size, dim] passage vectors (memory-mapped); raises when ``has_dense`` is False."""
        ...
