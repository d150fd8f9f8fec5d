"""The next-token score processors that ``generate`` builds from a generation config.

Operation for operation transformers' ``RepetitionPenaltyLogitsProcessor``,
``NoRepeatNGramLogitsProcessor``, ``MinLengthLogitsProcessor``,
``MinNewTokensLengthLogitsProcessor``, ``ForcedBOSTokenLogitsProcessor`` and
``ForcedEOSTokenLogitsProcessor`` (transformers 5, Apache-2.0), on 2-D scores [rows, V], so that
the searches in :mod:`.decoding` pick the tokens ``generate`` picks without importing
transformers: its package import alone was a second of a one-shot ``ragdesk ask``.
tests/core/engine/test_score_processors.py holds each against transformers' own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch


class ScoreProcessor(Protocol):
    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor: ...


class ProcessorList(list[ScoreProcessor]):
    """Processors applied in order, as ``LogitsProcessorList`` applies them."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        for processor in self:
            scores = processor(input_ids, scores)
        return scores


def _eos_mask(scores: torch.Tensor, eos: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.isin(torch.arange(scores.shape[-1], device=scores.device), eos)


class RepetitionPenalty:
    """Scores of tokens already in the row divided by the penalty (multiplied when < 0)."""

    def __init__(self, penalty: float) -> None:
        if not penalty > 0:
            raise ValueError(f"the repetition penalty must be positive, not {penalty}")
        self.penalty = penalty

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        vocab = scores.shape[-1]
        # ids past the output vocabulary land in one padded column that is dropped after
        ids = input_ids.clamp(max=vocab)
        padded = torch.nn.functional.pad(scores, (0, 1))
        score = torch.gather(padded, 1, ids)
        score = torch.where(score < 0, score * self.penalty, score / self.penalty)
        return padded.scatter(1, ids, score)[..., :vocab]


class NoRepeatNGram:
    """No n-gram twice in a row: the tokens that would repeat one get -inf."""

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError(f"the n-gram size must be positive, not {size}")
        self.size = size

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        cur_len = input_ids.shape[-1]
        if cur_len < self.size:
            return scores
        import torch

        prefix = input_ids[:, cur_len + 1 - self.size:]
        windows = input_ids.unfold(dimension=1, size=self.size, step=1)
        matches = (windows[..., :-1] == prefix.unsqueeze(1)).all(dim=-1)
        vocab = scores.shape[-1]
        banned = scores.new_zeros((scores.shape[0], vocab + 1), dtype=torch.bool)
        banned.scatter_(1, torch.where(matches, windows[..., -1].clamp(max=vocab), vocab), True)
        return scores.masked_fill(banned[:, :vocab], -float("inf"))


class MinLength:
    """EOS is impossible while the rows (counting everything in them) are shorter than
    ``min_length``; with ``skip``, only the tokens after the first ``skip`` count."""

    def __init__(self, min_length: int, eos_token_ids: Sequence[int], skip: int = 0) -> None:
        import torch

        if min_length < 0 or skip < 0:
            raise ValueError(f"lengths must not be negative: {min_length}, {skip}")
        self.min_length, self.skip = min_length, skip
        self.eos = torch.tensor(list(eos_token_ids))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        if input_ids.shape[-1] - self.skip < self.min_length:
            return torch.where(_eos_mask(scores, self.eos), -math.inf, scores)
        return scores.clone()


class ForcedFirst:
    """The first generated token is ``token_id`` (BART's forced BOS)."""

    def __init__(self, token_id: int) -> None:
        self.token_id = token_id

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        if input_ids.shape[-1] != 1:
            return scores
        out = torch.full_like(scores, -math.inf)
        out[:, self.token_id] = 0
        return out


class ForcedLast:
    """The token that reaches ``max_length`` is an EOS."""

    def __init__(self, max_length: int, eos_token_ids: Sequence[int]) -> None:
        import torch

        if any(i < 0 for i in eos_token_ids):
            raise ValueError(f"EOS ids must not be negative: {list(eos_token_ids)}")
        self.max_length = max_length
        self.eos = torch.tensor(list(eos_token_ids))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        import torch

        if input_ids.shape[-1] != self.max_length - 1:
            return scores
        out = torch.full_like(scores, -math.inf)
        out[:, self.eos] = 0
        return out


__all__ = ["ForcedFirst", "ForcedLast", "MinLength", "NoRepeatNGram", "ProcessorList",
           "RepetitionPenalty", "ScoreProcessor"]
