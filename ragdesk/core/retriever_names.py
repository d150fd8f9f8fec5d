"""What the front ends call each retriever: the key ``"sparse"`` is BM25 to the user.

The GUI's controls and settings, the answer card, the retrieval map and the CLI all name a
retriever from here, so no front end shows "sparse" where another says "BM25". A retriever
registered under another key is shown by its key.
"""

from __future__ import annotations

RETRIEVER_TITLES: dict[str, str] = {"dense": "Dense", "sparse": "BM25", "hybrid": "Hybrid"}


def retriever_title(key: str) -> str:
    """The retriever ``key`` as a choice is labelled: "Dense", "BM25", "Hybrid"."""
    return RETRIEVER_TITLES.get(key, key)


def retriever_in_sentence(key: str) -> str:
    """The retriever ``key`` inside a sentence: "dense", "BM25", "hybrid" (an acronym keeps
    its capitals; a word is written as words are)."""
    title = RETRIEVER_TITLES.get(key)
    if title is None:
        return key
    return title if title.isupper() else title.lower()
