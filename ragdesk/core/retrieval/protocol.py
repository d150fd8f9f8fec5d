"""What retrieval needs of a snapshot, as a type.

``ragdesk.core.snapshots.SnapshotIndex`` (a ready snapshot) and ``StagedSnapshot`` (an import
that answers with BM25 while its vectors are computed) both are one; so is any stand-in a test
builds. Retrievers take this instead of a concrete class so that they sit below the snapshot
library and never import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import numpy as np

from ragdesk.core.sparse.source import PassageSource
from ragdesk.core.types import Hit

if TYPE_CHECKING:
    from ragdesk.core.encoders import EncoderInfo


class SearchableSnapshot(PassageSource, Protocol):
    """A snapshot questions can be asked of."""

    @property
    def encoder(self) -> EncoderInfo:
        """The passage encoder: questions must be encoded in its space."""
        ...

    @property
    def temperature(self) -> float:
        """τ of p(z|x) for this snapshot's encoder (1 for DPR)."""
        ...

    @property
    def query_precision(self) -> str:
        """The precision questions asked of it are encoded in ("float32", "bfloat16")."""
        ...

    def check_query_encoder(self, info: EncoderInfo) -> None:
        """Raise ``EncoderMismatchError`` for a question encoder of another space."""
        ...

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        """Top-``k`` hits per query vector, exact inner-product scores, rank order."""
        ...

    def search_ids(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) [n, k] without fetching texts (ids -1 past the end)."""
        ...
