"""Fixtures for the model tests: a tiny GGUF, a private HF cache."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_gguf(tiny_models, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    from tests.core.models.helpers import write_tiny_gguf

    return write_tiny_gguf(tiny_models.causal_lm, tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture()
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty, private Hugging Face cache for this test."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache
