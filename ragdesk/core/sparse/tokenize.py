"""The tokenizer BM25 uses for passages and questions (both sides must agree).

Lower case, Unicode-aware word runs, accents folded, English stop words dropped (bm25s's
list), then a light plural stemmer (Harman 1991's "S" stemmer: ``-ies``→``-y``,
``-es``→``-e``, ``-s``→``''`` with its exceptions). The S stemmer is chosen over Porter
because it needs no extra dependency and merges only plural forms, which is where questions
and passages differ most ("who won the oscars" / "won an Oscar").

Changing anything here changes every stored BM25 index: bump :data:`TOKENIZER_VERSION`, and
stored indexes with another version are rebuilt on next use.
"""

from __future__ import annotations

import functools
import re
import unicodedata

TOKENIZER_VERSION = "words-nostop-s-1"

_WORD = re.compile(r"\w+")


@functools.cache
def stopwords() -> frozenset[str]:
    # bm25s (and the scipy it loads, a quarter of a second) only once BM25 is used: importing
    # the retrievers for a dense question must not pay for it.
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


def s_stem(word: str) -> str:
    """Harman's S stemmer (Harman, "How effective is suffixing?", JASIS 42(1), 1991)."""
    n = len(word)
    if n > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if n > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if n > 2 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def _fold(text: str) -> str:
    # Drop combining marks so "Beyoncé" and "Beyonce" meet.
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


def bm25_tokens(text: str) -> list[str]:
    stop = stopwords()
    return [s_stem(w) for w in _WORD.findall(_fold(text)) if w not in stop]
