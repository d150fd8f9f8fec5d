"""Texts shaped for labels, and the answer's source summary: what the chat, the heat map, the
inspector and the index menu all show, kept here so that none of them imports another's
widgets for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragdesk.core.types import Answer

if TYPE_CHECKING:
    from ragdesk.core.confidence import SourceSummary


def elide(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


# Characters after which Unicode line breaking may wrap inside a term ("p(y|" + "x)",
# "RAG-" + "Token"); a word joiner after each keeps the term on one line.
_BREAK_AFTER = frozenset("-|/‐–—")


def unbroken(text: str) -> str:
    """``text`` that a word-wrapping label never splits: no-break spaces, and word joiners
    after the characters a line may otherwise break after."""
    return "".join(c + "\u2060" if c in _BREAK_AFTER else c
                   for c in text.replace(" ", "\u00a0"))


def summarize(answer: Answer) -> SourceSummary | None:
    """The shares, the passage with the largest share and whether no single passage holds
    the answer: what the legend, the heat map and the inspector all show."""
    if not answer.tokens or not answer.docs:
        return None
    from ragdesk.core.confidence import summarize_sources  # numpy: not at the window's start

    return summarize_sources(answer)
