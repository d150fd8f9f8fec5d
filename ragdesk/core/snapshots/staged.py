"""A snapshot that answers before its import has finished: passages and BM25, no vectors yet.

A staged import (``import_snapshot(..., staged=True)``; the starter pack uses it) reads its
passages, builds their BM25 index inside the staging folder and only then sets the catalog's
``stage`` to ``sparse``; the dense vectors are encoded after that. Until the folder is renamed
into ``snapshots/`` (the normal, complete snapshot), :class:`StagedSnapshot` opens it read-only
from ``staging/<slug>/`` for BM25 answers. Nothing here can make the unfinished snapshot look
complete: the catalog still says ``importing`` (or ``failed`` after a crash, which a rerun of
the same import resumes), dense search raises :class:`DensePendingError`, and the staging
folder is never a valid ``snapshots/`` folder (it has no manifest until the very end).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ragdesk.core.encoders import FLOAT32, EncoderInfo, EncoderPrecision, check_query_space
from ragdesk.core.errors import CorruptSnapshotError, DensePendingError
from ragdesk.core.safe_json import as_int, as_object
from ragdesk.core.snapshots.calibration import snapshot_temperature
from ragdesk.core.snapshots.passage_store import PASSAGES_FILE, PassageReader
from ragdesk.core.types import Hit, Passage
from ragdesk.core.units import plural

log = logging.getLogger(__name__)

STATE_FILE = "build.json"  # the importer's resumable state (see staging_build.py)


def read_build_state(folder: Path) -> dict[str, object]:
    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptSnapshotError(f"The unfinished import in {folder} has no readable "
                                   f"{STATE_FILE} ({exc}).") from exc
    if not isinstance(state, dict):
        raise CorruptSnapshotError(f"{folder / STATE_FILE} does not hold a JSON object.")
    return state


class StagedSnapshot:
    """The BM25-only view of an unfinished import (duck-types :class:`SnapshotIndex` for the
    sparse retriever and the passage lookups; dense search says what is pending)."""

    has_dense = False
    manifest = None
    variant = None
    created: str | None = None  # no manifest yet: it is written when the import completes

    def __init__(self, name: str, folder: Path) -> None:
        self.name = name
        self.folder = folder
        state = read_build_state(folder)
        try:
            self.size = as_int(state["passages"])
            fingerprint = as_object(state["fingerprint"])
            self.encoder = EncoderInfo.from_json(as_object(fingerprint["encoder"]))
            made = fingerprint.get("precision")
            # the import's choice (before it was recorded there: float32 questions)
            self.query_precision = (EncoderPrecision.from_json(made).questions
                                    if made is not None else FLOAT32)
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptSnapshotError(f"{folder / STATE_FILE} is incomplete ({exc}).") from exc
        self._passages = PassageReader(folder / PASSAGES_FILE)
        self._closed = False
        self._lock = threading.Lock()
        self.temperature, self.temperature_source = snapshot_temperature(folder, self.encoder)

    def __repr__(self) -> str:
        return f"StagedSnapshot({self.name!r}, passages={self.size}, dense pending)"

    def dense_progress(self) -> tuple[int, int]:
        """(passages encoded so far, passages) as the importer last committed them."""
        try:
            state = read_build_state(self.folder)
        except CorruptSnapshotError:
            return 0, self.size  # renamed into place meanwhile, or being rewritten
        return as_int(state.get("encoded", 0)), self.size

    def _pending(self) -> DensePendingError:
        done, total = self.dense_progress()
        return DensePendingError(
            f"The snapshot {self.name!r} is still computing its dense vectors ({done:,} of "
            f"{plural(total, 'passage')}); until then it answers with BM25.")

    def check_query_encoder(self, info: EncoderInfo) -> None:
        check_query_space(self.name, self.encoder, info, built="is being built")

    def search_ids(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        raise self._pending()

    def search(self, queries: np.ndarray, k: int) -> list[list[Hit]]:
        raise self._pending()

    def embeddings(self) -> np.ndarray:
        raise self._pending()

    def get_passages(self, ids: Sequence[int]) -> list[Passage]:
        bad = [int(i) for i in ids if not 0 <= int(i) < self.size]
        if bad:
            raise KeyError(f"passage id {bad[0]} is outside 0..{self.size - 1}")
        return self._passages.get(ids)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._passages.close()


def has_dense(snapshot: object) -> bool:
    """Whether ``snapshot`` can search by vector (False for a :class:`StagedSnapshot`)."""
    return bool(getattr(snapshot, "has_dense", True))
