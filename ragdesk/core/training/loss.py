"""The two RAG training objectives (Lewis et al. 2020, section 2.1 and 2.4), and the
retriever's own (:func:`passages_nll`).

Both take the retrieval scores ``d(z)·q(x)`` of the top-K passages and the teacher-forced
log-probabilities ``log p(y_i | x, z, y_<i)`` of the answer tokens under every passage, so
that the loss reaches the question encoder through ``p(z|x) = softmax_z(d(z)·q(x))`` and the
generator through the token log-probabilities.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ragdesk.core.options import MODES
from ragdesk.core.posterior import log_probs

if TYPE_CHECKING:
    import torch


def doc_log_probs(doc_scores: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log p(z|x) over the K retrieved passages; ``doc_scores`` is [B, K]."""
    return log_probs(doc_scores, temperature)


def rag_sequence_nll(doc_scores: torch.Tensor, token_logprobs: torch.Tensor,
                     mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """-log Σ_z p(z|x) Π_i p(y_i | x, z, y_<i), one value per question.

    ``doc_scores`` [B, K]; ``token_logprobs`` [B, K, T]; ``mask`` [B, T] is 1 on real answer
    tokens and 0 on padding (answers of different lengths in one batch).
    """
    import torch

    seq = (token_logprobs.float() * mask[:, None, :].float()).sum(-1)  # [B, K]
    return -torch.logsumexp(doc_log_probs(doc_scores, temperature) + seq, dim=-1)


def rag_token_nll(doc_scores: torch.Tensor, token_logprobs: torch.Tensor,
                  mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """-Σ_i log Σ_z p(z|x) p(y_i | x, z, y_<i), one value per question (shapes as above)."""
    import torch

    per_token = torch.logsumexp(
        doc_log_probs(doc_scores, temperature)[:, :, None] + token_logprobs.float(),
        dim=1)  # [B, T]
    return -(per_token * mask.float()).sum(-1)


def rag_nll(mode: str, doc_scores: torch.Tensor, token_logprobs: torch.Tensor,
            mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """The objective of ``mode``; ``temperature`` is the snapshot's τ of p(z|x), so that
    training optimizes the distribution the engine answers with."""
    if mode == "sequence":
        return rag_sequence_nll(doc_scores, token_logprobs, mask, temperature)
    if mode == "token":
        return rag_token_nll(doc_scores, token_logprobs, mask, temperature)
    raise ValueError(f"mode must be one of {MODES}, not {mode!r}")


def passages_nll(scores: torch.Tensor, holds: Sequence[bool],
                 temperature: float) -> torch.Tensor:
    """-log Σ_{z holds the answer} softmax_z(d(z)·q(x) / temperature) over the retrieved
    passages ``scores`` [K]; 0 (no gradient) when none of them holds it."""
    import torch

    pos = torch.tensor(list(holds), dtype=torch.bool, device=scores.device)
    if not bool(pos.any()):
        return scores.sum() * 0.0
    logits = scores.float() / temperature
    return torch.logsumexp(logits, dim=0) - torch.logsumexp(logits[pos], dim=0)
