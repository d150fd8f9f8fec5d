"""Per-token sources and the tokens the user sees, built as decoding decides them.

RAG-Token: ``p(z | x, y_i, y_<i) ∝ p(z|x) · p(y_i | x, z, y_<i)``.
RAG-Sequence: ``p(z | x, y_<=i) ∝ p(z|x) · Π_{j<=i} p(y_j | x, z, y_<j)``.
Both come from per-passage log-probabilities the decoder already computed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ragdesk.core.types import AnswerToken

if TYPE_CHECKING:
    import torch

    from ragdesk.core.engine.generators import Generator

TokenCallback = Callable[[AnswerToken], None]


def token_posteriors(joint: torch.Tensor) -> torch.Tensor:
    """RAG-Token: softmax over passages of ``log p(z|x) + log p(y_i|x,z,y_<i)`` [T, K]."""
    import torch

    return torch.softmax(joint, dim=-1)


def running_posteriors(doc_lp: torch.Tensor, token_lp: torch.Tensor,
                       scored: torch.Tensor) -> torch.Tensor:
    """RAG-Sequence: ``p(z | x, y_<=i)`` [T, K] from per-passage token log-probs [T, K].

    ``scored`` [T] says which tokens count (padding and an excluded BOS do not). A passage
    whose log-probs are -inf (it did not produce this prefix, in fast decoding) gets 0.
    """
    import torch

    lp = torch.where(scored[:, None], token_lp, torch.zeros_like(token_lp))
    cum = doc_lp[None, :] + lp.cumsum(dim=0)
    return torch.softmax(cum, dim=-1)


class TokenEmitter:
    """Turns generated ids into :class:`AnswerToken` (special tokens dropped) and streams them.

    Text is decoded incrementally so that a character split over several byte-level tokens
    appears, whole, with the token that completes it.
    """

    def __init__(self, generator: Generator, on_token: TokenCallback | None) -> None:
        self.generator = generator
        self.on_token = on_token
        self.tokens: list[AnswerToken] = []
        self.ids: list[int] = []
        self.consumed = 0  # generated positions handled (special tokens included)
        self._text = ""

    def _piece(self, token_id: int) -> str:
        text = self.generator.decode([*self.ids, token_id])
        if text.endswith("\ufffd"):
            return ""  # an incomplete character: wait for the token that completes it
        piece = text[len(self._text):] if text.startswith(self._text) else (
            self.generator.decode([token_id]))
        self._text = text
        return piece

    def emit(self, token_ids: Sequence[int], posteriors: torch.Tensor) -> None:
        """Emit generated positions ``consumed..len(token_ids)-1``; ``posteriors`` [T, K]
        covers the same positions as ``token_ids``."""
        for i in range(self.consumed, len(token_ids)):
            tid = int(token_ids[i])
            if self.generator.is_special(tid):
                continue
            tok = AnswerToken(id=tid, text=self._piece(tid),
                              posterior=[float(p) for p in posteriors[i].tolist()])
            self.ids.append(tid)
            self.tokens.append(tok)
            if self.on_token is not None:
                self.on_token(tok)
        self.consumed = max(self.consumed, len(token_ids))

    def text(self) -> str:
        return self.generator.decode(self.ids).strip()

    def keep(self, n: int) -> None:
        """Keep only the first ``n`` answer tokens (the answer ends there after all)."""
        del self.ids[n:]
        del self.tokens[n:]
        self._text = self.generator.decode(self.ids)
