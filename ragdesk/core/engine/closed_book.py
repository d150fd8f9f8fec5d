"""The answer read without passages: how likely the generator finds it from the question
alone, the one input the confidence model gets from a pass of its own.

An answer the generator would also give with no passage in front of it agrees with what it
learned in training; one it gives only because a passage put the words there is more often
a piece of a passage about something else. The pass is short: the prompt's worked examples
are the opening the decoder keeps from the answer just read, so only the question and the
answer's tokens are new.
"""

from __future__ import annotations

from dataclasses import dataclass

from ragdesk.core.engine.contracts import PassageText
from ragdesk.core.engine.generators import Generator
from ragdesk.core.options import style_or_default

_NO_PASSAGE = PassageText("", "")


@dataclass(frozen=True)
class ClosedBook:
    """log p(answer | question, an empty passage) and the answer's token count."""

    logprob: float
    tokens: int


NOTHING = ClosedBook(0.0, 0)  # an answer with no text reads nothing


def closed_book(generator: Generator, question: str, text: str,
                style: str | None = None) -> ClosedBook:
    """The answer's text, tokenized as written, teacher-forced after the prompt with an empty
    passage. The text (not the ids the search chose) is what is read, so that answers kept
    as text (an evaluation's ``--out`` rows) give the same number as answers just made."""
    if not text.strip():
        return NOTHING
    ids = generator.tokenizer(generator.inert.text(text), add_special_tokens=False)["input_ids"]
    if not ids:
        return NOTHING
    import torch

    ctx = generator.prepare(question, [_NO_PASSAGE], style_or_default(style))
    lp = ctx.score(0, torch.tensor([ids], dtype=torch.long))[0]
    return ClosedBook(float(lp.sum()), len(ids))
