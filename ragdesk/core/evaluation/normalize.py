"""Answer normalization as in the SQuAD v1.1 evaluation script, which NQ-open, DPR and RAG use.

Lower case, drop ASCII punctuation, drop the articles a/an/the, collapse white space. The
has-answer check additionally applies Unicode NFD (as DPR's tokenizer does) so that a
precomposed "é" in a passage matches a decomposed one in a gold answer.
"""

from __future__ import annotations

import re
import string
import unicodedata

_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


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
    """Tokens used by the has-answer check: NFD first, then the standard normalization."""
    return normalize_answer(unicodedata.normalize("NFD", s)).split()
