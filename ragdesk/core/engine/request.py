"""The checked request the decoding loops take: a question and its answer options, checked
once at the engine's boundary (:meth:`AnswerRequest.checked`), with what the engine resolved
for them (grounding for this generator, the τ of p(z|x), the snapshot answered from).

Below the boundary nothing is checked again: RAG-Token, RAG-Sequence and reading together
(:mod:`.rag_token`, :mod:`.rag_sequence`, :mod:`.rag_together`) read the typed options.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ragdesk.core.engine.contracts import PassageText
from ragdesk.core.errors import BadInputError
from ragdesk.core.options import (
    AnswerOptions,
    Decoding,
    Mode,
    Style,
    check_lengths,
    check_mode,
    check_question,
    check_style,
    check_temperature_value,
    resolve_grounded,
)
from ragdesk.core.types import Hit


class GeneratorInfo(Protocol):
    """What a request is checked against: the generator's kind (for grounding) and name
    (for messages); a position limit is read where the generator has one."""

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str: ...


@dataclass(frozen=True)
class AnswerRequest:
    """One question to answer and how; build it with :meth:`checked`."""

    question: str
    options: AnswerOptions
    grounded: bool  # the options' grounding resolved for the generator's kind
    temperature: float = 1.0  # τ of p(z|x): the options' own, else the snapshot's
    snapshot: str | None = None  # the snapshot the passages come from, for the answer

    @classmethod
    def checked(cls, question: str, options: AnswerOptions, generator: GeneratorInfo
                ) -> AnswerRequest:
        """Check the question and every option the engine uses (the retriever is looked up
        by name where it runs, since plugins register their own), and that the answer fits
        the generator's positions, before any work."""
        check_question(question)
        check_mode(options.mode, options.decoding)
        check_style(options.style)
        check_lengths(options.num_beams, options.max_new_tokens, options.min_new_tokens)
        check_temperature_value(options.temperature)
        check_fits(generator, options.max_new_tokens)
        check_question_tokens(generator, question)
        return cls(question, options, resolve_grounded(options.grounded, generator.kind),
                   1.0 if options.temperature is None else float(options.temperature))

    def on(self, snapshot: str | None, temperature: float) -> AnswerRequest:
        """This request answered from ``snapshot`` with the τ of p(z|x) in use there."""
        return dataclasses.replace(self, snapshot=snapshot, temperature=temperature)

    @property
    def mode(self) -> Mode:
        return self.options.mode

    @property
    def decoding(self) -> Decoding:
        return self.options.decoding

    @property
    def num_beams(self) -> int:
        return self.options.num_beams

    @property
    def max_new_tokens(self) -> int:
        return self.options.max_new_tokens

    @property
    def min_new_tokens(self) -> int:
        return self.options.min_new_tokens

    @property
    def style(self) -> Style:
        return self.options.style


def check_fits(generator: GeneratorInfo, max_new_tokens: int) -> None:
    """Refuse an answer longer than the generator's positions reach (BART's learned
    position table ends at 1,024, the tiny one's at 512: past it, an IndexError deep in the
    model), before any work."""
    limit = getattr(generator, "max_positions", None)
    if limit is None:
        return
    # A seq2seq decoder spends position 0 on its start token; a causal prompt needs at least
    # one.
    room = int(limit) - 1
    if max_new_tokens > room:
        raise BadInputError(
            f"max_new_tokens {max_new_tokens:,} is more than the generator "
            f"{generator.name!r} can write: its position limit is {limit:,} tokens, so at "
            f"most {room:,} new tokens.",
            hint=f"Ask for at most {room:,} new tokens (--max-new-tokens {room}).")


# Every passage's prompt repeats the question, and attention grows with the square of a
# prompt's length: NQ's questions are under 40 tokens, a pasted paragraph a few hundred. A
# question of thousands (6,000 characters of special-token strings are 3,200) held the
# engine for a minute.
MAX_QUESTION_TOKENS = 512


def check_question_tokens(generator: GeneratorInfo, question: str) -> None:
    """Refuse a question longer than :data:`MAX_QUESTION_TOKENS` as the generator reads
    it, where the generator can count them."""
    count = getattr(generator, "question_tokens", None)
    if count is None:
        return
    n = int(count(question))
    if n > MAX_QUESTION_TOKENS:
        raise BadInputError(
            f"The question is {n} tokens long as the generator {generator.name!r} reads "
            f"it; ragdesk answers questions of at most {MAX_QUESTION_TOKENS} tokens.",
            hint="Ask a shorter question: the passages, not the question, hold what the "
                 "answer is read from.")


def passages_of(docs: Sequence[Hit]) -> list[PassageText]:
    if not docs:
        raise BadInputError("No passages were retrieved for this question.",
                            hint="Check that the snapshot holds passages.")
    return [PassageText(d.title, d.text) for d in docs]


def keyword_request(generator: GeneratorInfo, question: str, mode: str, *, decoding: str = "fast",
                    num_beams: int, max_new_tokens: int, min_new_tokens: int, style: str,
                    grounded: bool, temperature: float, snapshot: str | None
                    ) -> AnswerRequest:
    """The checked request of the keyword functions (``rag_token_generate`` and its
    siblings, for callers that hold no :class:`AnswerOptions`): ``grounded`` is already
    decided and ``temperature`` already the one to use."""
    given: dict[str, Any] = {
        "mode": mode, "decoding": decoding, "num_beams": num_beams,
        "max_new_tokens": max_new_tokens, "min_new_tokens": min_new_tokens, "style": style,
        "grounded": bool(grounded)}
    options = dataclasses.replace(AnswerOptions(), **given)  # checked next
    return AnswerRequest.checked(question, options, generator).on(snapshot, temperature)


__all__ = ["AnswerRequest", "check_fits", "keyword_request", "passages_of"]
