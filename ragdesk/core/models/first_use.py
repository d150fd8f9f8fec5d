"""Model files a pack makes on their first use, behind the one generic loader.

The loader knows no pack by name. A pack whose file is assembled when first asked for (the
starter pack's GGUF, from the chunks its PyPI packages ship) registers a preparer here when
its module is imported (``ragdesk.core.models`` imports every such module), and the loader
hands every generator reference to :func:`prepare` before it resolves it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ragdesk.core.progress import ProgressCallback

# Makes the file at the path if it is one of its pack's and is missing; else does nothing.
Preparer = Callable[[Path, ProgressCallback | None], None]

_PREPARERS: list[Preparer] = []


def register_preparer(preparer: Preparer) -> None:
    if preparer not in _PREPARERS:
        _PREPARERS.append(preparer)


def prepare(ref: Path, progress: ProgressCallback | None = None) -> None:
    """Make ``ref`` if a registered pack makes it on first use."""
    for preparer in _PREPARERS:
        preparer(ref, progress)
