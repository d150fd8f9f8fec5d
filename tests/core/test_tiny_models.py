"""The tiny models reopen from their folder as they were built (how the tests travel to a
machine without the starter pack, whose vocabulary and articles they are built from)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest


def test_the_tiny_models_reopen_from_a_moved_folder(tiny_models: Any, tmp_path: Path) -> None:
    from ragdesk.core.testing.tiny_models import MODEL_FIELDS, open_tiny_models

    if os.environ.get("RAGDESK_TINY_MODELS"):
        pytest.skip("these tiny models were reopened, not built")
    moved = tmp_path / "moved"
    shutil.copytree(tiny_models.root, moved)
    again = open_tiny_models(moved)
    assert again.corpus == tiny_models.corpus
    assert "bart" in MODEL_FIELDS and "gemma3" in MODEL_FIELDS
    for field in MODEL_FIELDS:
        built = getattr(tiny_models, field)
        if built is None:
            assert getattr(again, field) is None
            continue
        assert getattr(again, field) == moved / Path(built).relative_to(tiny_models.root)
        assert getattr(again, field).is_dir()
