from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _one_torch_thread() -> Iterator[None]:
    """Tiny models train many times faster on one thread when the CPUs are shared."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def synth_data(tiny_models, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    """A data dir with the synthetic passages imported with the tiny sentence-transformers
    encoder (snapshot ``synth``, active)."""
    from tests.core.training.synthetic import build_snapshot

    root = tmp_path_factory.mktemp("train-data") / "data"
    build_snapshot(root, tiny_models.st_encoder)
    return root


@pytest.fixture()
def index(synth_data: Path) -> Iterator[object]:
    """The synthetic snapshot, opened."""
    from tests.core.training.helpers import open_index

    ctx, idx = open_index(synth_data)
    yield idx
    idx.close()
    ctx.close()
