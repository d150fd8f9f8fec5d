"""Which passage an answer is shown as coming from, so that the shown source holds it.

The posterior ``p(z | x, y_i, y_<i)`` says which passage made a token likely; it does not say
which passage holds the words. RAG-Token can piece an answer together from several passages
(a grounded "July 19" from "28 July 1914"), and a passage can lead the posterior for a word it
does not contain. A citation must be checkable, so:

- when some retrieved passage holds the whole answer (as whole words), the answer is quoted
  from it: every token cites the holder with the largest share of the tokens' posterior mass;
- otherwise the answer is *mixed*: each token cites, among the passages that hold its word,
  the one its posterior prefers, and front ends say that no single passage holds the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ragdesk.core.confidence.features import holders, source_counts
from ragdesk.core.matching import answer_tokens
from ragdesk.core.types import Answer, AnswerToken


@dataclass(frozen=True)
class SourceSummary:
    shares: list[float]  # each passage's share of the answer's tokens (by shown source)
    primary: int | None  # the passage with the largest share (None: no tokens)
    mixed: bool  # no retrieved passage holds the whole answer
    holders: list[bool]  # which passages hold the whole answer


def _argmax(values: list[float], allowed: list[bool]) -> int | None:
    best: int | None = None
    for k, (v, ok) in enumerate(zip(values, allowed, strict=True)):
        if ok and (best is None or v > values[best]):
            best = k
    return best


def _piece_holders(token: AnswerToken, passages: list[str]) -> list[bool]:
    # a sub-word piece ("Aus" of "Austen") is held where its letters occur
    piece = " ".join(answer_tokens(token.text))
    return [bool(piece) and piece in p for p in passages]


def assign_sources(answer: Answer) -> None:
    """Set each token's shown source (``AnswerToken.quoted_from``) as the module says."""
    docs, toks = answer.docs, answer.tokens
    if not docs or not toks or not answer.text.strip():
        return
    held = holders(answer.text, docs)
    k = len(docs)
    if any(held):
        mass = [sum(t.posterior[z] for t in toks if len(t.posterior) == k) for z in range(k)]
        quoted = _argmax(mass, held)
        answer.tokens = [replace(t, quoted_from=quoted) for t in toks]
        return
    passages = [" ".join(answer_tokens(f"{d.title} {d.text}")) for d in docs]
    out = []
    for t in toks:
        ok = _piece_holders(t, passages)
        pick = _argmax(list(t.posterior), ok) if any(ok) and len(t.posterior) == k else None
        out.append(replace(t, quoted_from=pick))
    answer.tokens = out


def summarize_sources(answer: Answer) -> SourceSummary:
    """Shares, the primary passage and whether the answer is mixed: what the source bar, the
    heat map's header and the inspector all show."""
    k = len(answer.docs)
    counts = source_counts(answer)
    total = sum(counts)
    shares = [c / total for c in counts] if total else [0.0] * k
    primary = max(range(k), key=shares.__getitem__) if total else None
    held = holders(answer.text, answer.docs) if answer.text.strip() else [False] * k
    return SourceSummary(shares=shares, primary=primary,
                         mixed=bool(total) and not any(held), holders=held)
