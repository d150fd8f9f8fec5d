"""Exact match, token F1 and top-k retrieval accuracy (the DPR has-answer convention)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

# The has-answer test is defined in ragdesk.core.matching (the confidence model uses it too)
# and re-exported here, where evaluation code has always found it.
from ragdesk.core.matching import (
    AnswerMatcher,
    answer_tokens,
    has_answer,
    normalize_answer,
    padded,
    passage_string,
)

DEFAULT_KS = (1, 5, 20, 100)


def exact_match(prediction: str, gold: Iterable[str]) -> float:
    """1.0 when the normalized prediction equals the normalized form of any gold answer."""
    pred = normalize_answer(prediction)
    return 1.0 if any(pred == normalize_answer(g) for g in gold) else 0.0


def _f1_one(pred_toks: list[str], gold_toks: list[str]) -> float:
    if not pred_toks or not gold_toks:
        # SQuAD v2 convention: two empty answers agree, one empty answer scores 0.
        return float(pred_toks == gold_toks)
    common = Counter(pred_toks) & Counter(gold_toks)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_toks)
    recall = same / len(gold_toks)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, gold: Iterable[str]) -> float:
    """SQuAD token F1 against the best-matching gold answer."""
    pred = answer_tokens(prediction)
    return max((_f1_one(pred, answer_tokens(g)) for g in gold), default=0.0)


def first_hit_rank(hit_flags: Sequence[bool]) -> int | None:
    """0-based rank of the first passage that contains an answer, or None."""
    for i, flag in enumerate(hit_flags):
        if flag:
            return i
    return None


def top_k_accuracy(first_ranks: Sequence[int | None],
                   ks: Sequence[int] = DEFAULT_KS) -> dict[str, float | None]:
    """Fraction of questions whose first answer-bearing passage is within the top k.

    ``None`` for every k when there are no questions (an honest "no data", not 0).
    """
    n = len(first_ranks)
    out: dict[str, float | None] = {}
    for k in ks:
        out[str(k)] = (sum(1 for r in first_ranks if r is not None and r < k) / n) if n else None
    return out


__all__ = [
    "DEFAULT_KS",
    "AnswerMatcher",
    "exact_match",
    "first_hit_rank",
    "has_answer",
    "padded",
    "passage_string",
    "token_f1",
    "top_k_accuracy",
]
