"""One retrieval request and the checks every retriever makes before searching."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ragdesk.core.errors import BadInputError
from ragdesk.core.options import check_n_docs_value
from ragdesk.core.retrieval.protocol import SearchableSnapshot
from ragdesk.core.types import Hit

if TYPE_CHECKING:
    from ragdesk.core.encoders import TextEncoder


@dataclass(frozen=True)
class RetrievalRequest:
    """Everything a retriever may need; ``snapshot`` is the one the answer uses."""

    question: str
    n_docs: int
    snapshot: SearchableSnapshot
    question_encoder: TextEncoder


# A retriever returns the top ``n_docs`` hits, best first, with ``Hit.score`` the exact
# inner product d(z)·q(x): p(z|x) is a softmax of it (see ragdesk.core.retrieval.scores).
Retriever = Callable[[RetrievalRequest], list[Hit]]


def check_n_docs(n_docs: int, snapshot: SearchableSnapshot) -> None:
    check_n_docs_value(n_docs)
    if n_docs > snapshot.size:
        raise BadInputError(
            f"Asked for {n_docs} passages, but the snapshot {snapshot.name!r} holds only "
            f"{snapshot.size}.",
            hint=f"Use --docs {snapshot.size} or fewer, or import a larger snapshot.")


def encode_question(req: RetrievalRequest) -> np.ndarray:
    """The question's vector [1, dim], after checking the encoder fits the snapshot."""
    check_n_docs(req.n_docs, req.snapshot)
    req.snapshot.check_query_encoder(req.question_encoder.info)
    encoder = req.question_encoder.at_precision(req.snapshot.query_precision)
    return encoder.encode([req.question])
