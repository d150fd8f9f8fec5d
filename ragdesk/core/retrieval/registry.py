"""Retrieval for the engine: p(z|x) over the top-K and the retriever hook.

``p(z|x) = softmax_z(d(z)·q(x) / τ)`` over the K retrieved passages, computed in float32 from
the exact inner products the snapshot returns, as ``RagTokenForGeneration`` does from its
``doc_scores`` (τ = 1 there; see :mod:`ragdesk.core.posterior` for τ).

Retrievers are looked up by name: ``"dense"`` (question encoder + snapshot index) is built in;
other ones (``"sparse"``, ``"hybrid"``) are plugged in with :func:`register_retriever` by the
code that owns them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ragdesk.core.errors import BadInputError
from ragdesk.core.types import Hit, RetrievedDoc

if TYPE_CHECKING:
    import torch

    from ragdesk.core.encoders import TextEncoder


@dataclass(frozen=True)
class RetrievalRequest:
    """Everything a retriever may need; ``snapshot`` is the SnapshotIndex the answer uses."""

    question: str
    n_docs: int
    snapshot: Any
    question_encoder: TextEncoder


Retriever = Callable[[RetrievalRequest], list[Hit]]


def check_n_docs(n_docs: int, snapshot: Any) -> None:
    if not isinstance(n_docs, int) or n_docs < 1:
        raise BadInputError(f"The number of passages must be at least 1, not {n_docs!r}.")
    size = getattr(snapshot, "size", None)
    if isinstance(size, int) and n_docs > size:
        raise BadInputError(
            f"Asked for {n_docs} passages, but the snapshot {getattr(snapshot, 'name', '')!r} "
            f"holds only {size}.",
            hint=f"Use --docs {size} or fewer, or import a larger snapshot.")


def dense_retrieve(req: RetrievalRequest) -> list[Hit]:
    """DPR-style retrieval: encode the question, exact inner-product search in the snapshot."""
    check_n_docs(req.n_docs, req.snapshot)
    check = getattr(req.snapshot, "check_query_encoder", None)
    if check is not None:
        check(req.question_encoder.info)
    q = req.question_encoder.encode([req.question])
    hits: list[Hit] = req.snapshot.search(q, req.n_docs)[0]
    return hits


_RETRIEVERS: dict[str, Retriever] = {"dense": dense_retrieve}


def register_retriever(name: str, fn: Retriever) -> None:
    """Make ``Engine.answer(retriever=name)`` use ``fn``."""
    _RETRIEVERS[name] = fn


SPARSE_RETRIEVERS = ("sparse", "hybrid")


def get_retriever(name: str) -> Retriever:
    if name in SPARSE_RETRIEVERS and name not in _RETRIEVERS:
        # BM25 and hybrid live in ragdesk.core.sparse, which builds on this module; they
        # register themselves on first use so every caller (API, CLI, GUI) gets them.
        from ragdesk.core.sparse.hybrid import register_engine_retrievers

        register_engine_retrievers()
    try:
        return _RETRIEVERS[name]
    except KeyError:
        # The sparse ones register lazily: list them even when they have not been yet.
        known = ", ".join(sorted({*_RETRIEVERS, *SPARSE_RETRIEVERS}))
        raise BadInputError(f"Unknown retriever {name!r}.",
                            hint=f"Choose one of: {known}.") from None


def available_retrievers() -> list[str]:
    return sorted(_RETRIEVERS)


def doc_log_probs(docs: Sequence[Hit], temperature: float = 1.0) -> torch.Tensor:
    """log p(z|x) [K] in float32 (see :mod:`ragdesk.core.posterior`)."""
    import torch

    from ragdesk.core.posterior import log_probs

    scores = torch.tensor([float(d.score) for d in docs], dtype=torch.float32)
    return log_probs(scores, temperature)


def retrieved_docs(docs: Sequence[Hit], doc_lp: torch.Tensor,
                   snapshot: str | None) -> list[RetrievedDoc]:
    probs = doc_lp.exp().tolist()
    return [RetrievedDoc(id=d.id, title=d.title, text=d.text, score=float(d.score),
                         prob=float(p), snapshot=snapshot)
            for d, p in zip(docs, probs, strict=True)]
