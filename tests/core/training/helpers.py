"""Helpers shared by the training tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.core.training import synthetic


def open_index(data_root: Path) -> tuple[Any, Any]:
    """(AppContext, SnapshotIndex) of the synthetic snapshot."""
    from ragdesk.core.app import AppContext
    from ragdesk.core.snapshots import open_snapshot

    ctx = AppContext(data_root)
    return ctx, open_snapshot(ctx.data, ctx.catalog, "synth")


def examples() -> list[Any]:
    from ragdesk.core.training.data import Example

    return [Example(q["question"], tuple(q["answer"])) for q in synthetic.questions()]


def make_trainer(tiny_models: Any, index: Any, generator: Any = None, **cfg: Any) -> Any:
    """A CPU trainer: tiny sentence-transformers question encoder, tiny BART (by default)."""
    from ragdesk.core.models import load_generator, load_question_encoder
    from ragdesk.core.training.config import TrainConfig
    from ragdesk.core.training.trainer import RagTrainer

    enc = load_question_encoder(tiny_models.st_encoder)
    gen = generator or load_generator(tiny_models.bart)
    base: dict[str, Any] = {"n_docs": 4, "batch_size": 4, "eval_ks": (1, 2)}
    base.update(cfg)
    return RagTrainer(enc, gen, index, TrainConfig(**base), device="cpu")
