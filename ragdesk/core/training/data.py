"""Training examples from NQ-open style JSONL (``{"question": ..., "answer": [...]}``).

The file format and its error messages are the evaluation reader's; training uses the first
gold answer of each question as the target, as the RAG paper's NQ fine-tuning did.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ragdesk.core.evaluation.questions import read_questions


@dataclass(frozen=True)
class Example:
    question: str
    answers: tuple[str, ...]

    @property
    def target(self) -> str:
        return self.answers[0]


def read_examples(path: str | os.PathLike[str], limit: int | None = None) -> list[Example]:
    return [Example(q.question, q.answers) for q in read_questions(path, limit=limit)]
