"""p(z|x) over the retrieved passages, and the docs an answer cites.

``p(z|x) = softmax_z(d(z)·q(x) / τ)`` over the K retrieved passages, computed in float32 from
the exact inner products the snapshot returns, as ``RagTokenForGeneration`` does from its
``doc_scores`` (τ = 1 there; see :mod:`ragdesk.core.posterior` for τ).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragdesk.core.posterior import log_probs
from ragdesk.core.types import Hit, RetrievedDoc

if TYPE_CHECKING:
    import torch


def doc_log_probs(docs: Sequence[Hit], temperature: float = 1.0) -> torch.Tensor:
    """log p(z|x) [K] in float32."""
    import torch  # here, not at the top: importing the retrievers must not load torch

    scores = torch.tensor([float(d.score) for d in docs], dtype=torch.float32)
    return log_probs(scores, temperature)


def retrieved_docs(docs: Sequence[Hit], doc_lp: torch.Tensor,
                   snapshot: str | None) -> list[RetrievedDoc]:
    probs = doc_lp.exp().tolist()
    return [RetrievedDoc(id=d.id, title=d.title, text=d.text, score=float(d.score),
                         prob=float(p), snapshot=snapshot)
            for d, p in zip(docs, probs, strict=True)]
