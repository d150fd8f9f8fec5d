"""Fixtures for the model tests: a tiny GGUF, a private HF cache."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_gguf(tiny_models, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    from tests.core.models.helpers import write_tiny_gguf

    return write_tiny_gguf(tiny_models.causal_lm, tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture()
def gguf_copy(tiny_gguf: Path, tmp_path: Path) -> Path:
    """The tiny GGUF copied into a folder of this test's own (its converted copy goes there)."""
    dst = tmp_path / "gguf" / tiny_gguf.name
    dst.parent.mkdir()
    shutil.copy2(tiny_gguf, dst)
    return dst


@pytest.fixture()
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty, private Hugging Face cache for this test."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache
