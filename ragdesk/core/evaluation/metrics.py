"""Exact match, token F1 and top-k retrieval accuracy (the DPR has-answer convention)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ragdesk.core.evaluation.normalize import answer_tokens, match_tokens, normalize_answer

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


def padded(tokens: Sequence[str]) -> str:
    """Tokens joined with single spaces and padded, so a substring test is a whole-word test."""
    return " " + " ".join(tokens) + " "


def passage_string(title: str, text: str) -> str:
    """What the has-answer test searches: the title and the text of a passage, each
    normalized and padded, joined by a newline that no answer can span.

    The title counts because the generator reads it (``title / text``); DPR's original
    scripts matched the text alone (on the starter snapshot that finds 1,525 instead of 1,554
    answerable NQ-open dev questions)."""
    return padded(match_tokens(title)) + "\n" + padded(match_tokens(text))


class AnswerMatcher:
    """The DPR has-answer test for one question's gold answers.

    A passage contains an answer when the answer's normalized tokens occur as a contiguous
    run of whole tokens in the passage's normalized tokens (its title or its text). Answers
    that normalize to nothing (e.g. "the") can never match.
    """

    def __init__(self, gold: Iterable[str]) -> None:
        toks = [t for t in (match_tokens(g) for g in gold) if t]
        self.token_needles = [tuple(t) for t in toks]
        self.needles = [padded(t) for t in toks]

    def matches(self, passage: str) -> bool:
        """``passage`` is :func:`passage_string` of the passage."""
        return any(n in passage for n in self.needles)


def has_answer(title: str, text: str, gold: Iterable[str]) -> bool:
    return AnswerMatcher(gold).matches(passage_string(title, text))


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
