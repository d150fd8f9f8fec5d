"""Fine-tuning with RAG's end-to-end recipe (question encoder + generator, frozen passage
encoder and index) and a retrieval-collapse guard. Heavy libraries load lazily."""

from ragdesk.core.training.config import TrainConfig, TrainEvent, TrainState
from ragdesk.core.training.data import Example, read_examples
from ragdesk.core.training.guard import (
    ACTIONS,
    CollapseThresholds,
    CollapseVerdict,
    RetrievalStats,
    check_collapse,
    retrieval_stats,
)
from ragdesk.core.training.loss import rag_nll, rag_sequence_nll, rag_token_nll
from ragdesk.core.training.run import TrainResult, train_pack
from ragdesk.core.training.trainer import RagTrainer

__all__ = [
    "ACTIONS",
    "CollapseThresholds",
    "CollapseVerdict",
    "Example",
    "RagTrainer",
    "RetrievalStats",
    "TrainConfig",
    "TrainEvent",
    "TrainResult",
    "TrainState",
    "check_collapse",
    "rag_nll",
    "rag_sequence_nll",
    "rag_token_nll",
    "read_examples",
    "retrieval_stats",
    "train_pack",
]
