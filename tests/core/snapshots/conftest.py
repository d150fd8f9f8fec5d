from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture(scope="session")
def dpr_ctx(tiny_models: Any) -> Any:
    """The tiny DPR context encoder, loaded once through ragdesk's loader."""
    from ragdesk.core.encoders import load_encoder

    return load_encoder(tiny_models.ctx_encoder, role="passage")


@pytest.fixture(scope="session")
def small_corpus(tiny_models: Any) -> list[tuple[str, str]]:
    """A dozen real Vital Articles lead sections (some longer than 100 words)."""
    arts = sorted(tiny_models.corpus, key=lambda a: -len(a[1].split()))
    return [arts[i] for i in range(0, 240, 20)]


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    """One torch / FAISS thread during these tests: on a small machine that other processes
    share, OpenMP threads spinning for a busy core make tiny models ~20x slower."""
    import faiss
    import torch

    torch_threads, faiss_threads = torch.get_num_threads(), faiss.omp_get_max_threads()
    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    yield
    torch.set_num_threads(torch_threads)
    faiss.omp_set_num_threads(faiss_threads)
