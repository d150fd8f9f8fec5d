"""Answer tokens as a reader sees them: sub-word pieces merged into words.

Generators write in sub-word pieces: Gemma spells "1914" as " ", "1", "9", "1", "4" and BART
splits rare names. Shown piece by piece, the heat map and the step-through had a bare "␣"
column and one column per digit. A word here is a run of pieces in which only the first
begins with white space (a piece of white space alone starts a word that the next pieces
join; at the end of the answer it stays with the last word). The pieces stay with the word,
so a view can show them one click away.

What a word's numbers are: RAG-Token draws each piece from its own mixture, so a word's
distribution over passages is the mean of its pieces' p(z | x, yᵢ, y<ᵢ) (each passage's share
of the word); RAG-Sequence's running posterior after the word is the one after its last piece.
Its source is the one most of its pieces show (their ``AnswerToken.source``, the passage the
chat colours them with), so the views agree with the chat.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ragdesk.core.types import AnswerToken


@dataclass(frozen=True)
class Word:
    text: str  # the pieces joined, white space and all
    pieces: tuple[int, ...]  # indices into the answer's tokens
    posterior: tuple[float, ...]  # over the K passages (see the module docstring)
    source: int  # the passage the word is drawn from, as the chat colours it

    @property
    def label(self) -> str:
        """The word without its surrounding white space; a mark for white space alone."""
        shown = self.text.strip()
        if shown:
            return shown
        return "↵" if "\n" in self.text else "␣"


def word_spans(tokens: Sequence[AnswerToken]) -> list[tuple[int, ...]]:
    """The token indices of each word, in order."""
    spans: list[list[int]] = []
    for i, tok in enumerate(tokens):
        starts = not spans or (tok.text[:1].isspace()
                               and any(not tokens[j].text.isspace() for j in spans[-1]))
        if starts:
            spans.append([i])
        else:
            spans[-1].append(i)
    # White space at the end ("July", " ") is no word a reader sees: it stays with the last
    # word (while streaming, the next piece may still make it the start of one).
    if len(spans) > 1 and all(tokens[j].text.isspace() for j in spans[-1]):
        spans[-2].extend(spans.pop())
    return [tuple(s) for s in spans]


def _source(tokens: Sequence[AnswerToken], span: tuple[int, ...],
            posterior: Sequence[float]) -> int:
    votes = Counter(tokens[i].source for i in span if tokens[i].posterior)
    if not votes:
        return 0
    best = max(votes.values())
    tied = [k for k, n in votes.items() if n == best]
    return max(tied, key=lambda k: posterior[k] if k < len(posterior) else 0.0)


def merge_pieces(tokens: Sequence[AnswerToken], mode: str = "token") -> list[Word]:
    """The answer's words (see the module docstring for their numbers)."""
    out = []
    for span in word_spans(tokens):
        posts = [tokens[i].posterior for i in span if tokens[i].posterior]
        if not posts:
            post: tuple[float, ...] = ()
        elif mode == "sequence":
            post = tuple(posts[-1])
        else:
            post = tuple(sum(p[k] for p in posts) / len(posts) for k in range(len(posts[0])))
        out.append(Word(text="".join(tokens[i].text for i in span), pieces=span,
                        posterior=post, source=_source(tokens, span, post)))
    return out


def as_words(tokens: Sequence[AnswerToken], mode: str, pieces: bool) -> list[Word]:
    """Words, or each piece as a word of its own (``pieces``: the per-piece view)."""
    if not pieces:
        return merge_pieces(tokens, mode)
    return [Word(text=t.text, pieces=(i,), posterior=tuple(t.posterior),
                 source=t.source if t.posterior else 0) for i, t in enumerate(tokens)]


def piece_label(text: str) -> str:
    """One piece with its white space made visible ("␣1", "9")."""
    return text.replace(" ", "␣").replace("\n", "↵") or "∅"


def quoted_source(tokens: Sequence[AnswerToken], pieces: Sequence[int]) -> int | None:
    """The passage a word's pieces are quoted from, as most of them say; None when none is
    (ties go to the better-ranked passage)."""
    quoted = [q for i in pieces if i < len(tokens) and (q := tokens[i].quoted_from) is not None]
    votes = Counter(quoted)
    if not votes:
        return None
    best = max(votes.values())
    return min(k for k, n in votes.items() if n == best)
