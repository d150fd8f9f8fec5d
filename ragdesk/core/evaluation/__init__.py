"""Evaluation: answer normalization, EM / F1, top-k retrieval accuracy, the NQ-open reader and
the evaluation loop behind ``ragdesk eval``."""

from ragdesk.core.evaluation.metrics import (
    DEFAULT_KS,
    AnswerMatcher,
    exact_match,
    has_answer,
    token_f1,
    top_k_accuracy,
)
from ragdesk.core.evaluation.questions import Question, read_questions
from ragdesk.core.matching import normalize_answer

__all__ = [
    "DEFAULT_KS",
    "AnswerMatcher",
    "Question",
    "exact_match",
    "has_answer",
    "normalize_answer",
    "read_questions",
    "token_f1",
    "top_k_accuracy",
]
