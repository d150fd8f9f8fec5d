"""Answer text as NQ-open scores it: SQuAD normalization and DPR's has-answer test.

Lower case, drop ASCII punctuation, drop the articles a/an/the, collapse white space. The
has-answer check additionally applies Unicode NFD (as DPR's tokenizer does) so that a
precomposed "é" in a passage matches a decomposed one in a gold answer, and splits words at
dashes, as DPR's tokenizer does: "1933" is a whole answer in "a 1933–1938 series", and SQuAD
normalization alone would keep "1933–1938" as one word (and make "1933-1938" into "19331938").

Evaluation scores with these, and the confidence model asks the same question of an answer
("does a retrieved passage hold it?"), so both use this one definition.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Sequence

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
# hyphen-minus, the Unicode hyphens and dashes, and the minus sign
_DASHES = re.compile("[-\u2010-\u2015\u2212]")


def normalize_answer(s: str) -> str:
    """The standard SQuAD ``normalize_answer``: EM and F1 compare these strings."""
    s = s.lower()
    s = s.translate(_PUNCT)
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def answer_tokens(s: str) -> list[str]:
    """Tokens of the normalized form, for token F1 and whole-word matching."""
    return normalize_answer(s).split()


def match_tokens(s: str) -> list[str]:
    """Tokens used by the has-answer check: NFD, words split at dashes, then the standard
    normalization."""
    return normalize_answer(_DASHES.sub(" ", unicodedata.normalize("NFD", s))).split()


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
