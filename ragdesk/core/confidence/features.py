"""What the confidence model reads: a handful of numbers the engine has for free.

Every feature but four comes from the answer, its tokens' sources and the retrieved
passages' scores; two are the answer read once more without passages (a short pass, see
:mod:`ragdesk.core.engine.closed_book`), and the last two come from reading the answer again
after its passage (:mod:`ragdesk.core.engine.reading_state`, set by the engine): a probe of
the reader's state (:mod:`ragdesk.core.confidence.probe`) and the answer's likelihood there
with no decoding constraint.
They follow selective question answering (Kamath, Jia & Liang 2020): the reader's own
likelihood, the retriever's certainty, and whether the passages hold the answer at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ragdesk.core.matching import AnswerMatcher, answer_tokens, passage_string
from ragdesk.core.posterior import entropy
from ragdesk.core.types import Answer, RetrievedDoc

# The order is the model's: coefficients are stored by name, so adding one keeps old files
# readable (a missing name counts as 0 after standardization, see ConfidenceModel).
FEATURES: tuple[str, ...] = (
    "logprob",            # log p(y|x) of the answer, clipped at -40
    "logprob_per_token",  # the same per answer token
    "log_tokens",         # log(1 + answer tokens)
    "top1_score",         # the best passage's retrieval score d(z)·q(x)
    "score_margin",       # its lead over the second
    "top1_prob",          # the largest p(z|x)
    "retrieval_entropy",  # entropy of p(z|x) over ln K: 0 peaked, 1 flat
    "support_prob",       # p(z|x) summed over the passages that hold the answer
    "support_share",      # share of the passages that hold it
    "quoted_top1",        # the rank-1 passage holds it
    "source_share",       # largest share of the answer's tokens from one passage
    "echo",               # share of the answer's words that are the question's
    "question_overlap",   # share of the question's words in the passage quoted from
    "title_overlap",      # share of that passage's title words that are in the question
    "top1_overlap",       # share of the question's words in the rank-1 passage
    "has_digit",          # the answer holds a digit (dates, numbers)
    "empty",              # no answer text at all
    "best_passage_lp",    # max over z of log p(y|x,z): the one passage that explains it best
    "best_passage_lp_per_token",  # the same per answer token
    "read_posterior_max",  # largest p(z|x,y): how sure the reader is which passage it read
    "read_on_holders",    # p(z|x,y) summed over the passages that hold the answer
    "read_shift",         # p(z|x,y) - p(z|x) of that passage: reading moved the belief
    "token_source_max",   # mean over tokens of the largest p(z|x,y_i,y_<i)
    "closed_book_lp",     # log p(y|x) with an empty passage: the answer from the question alone
    "closed_book_lp_per_token",  # the same per token of the answer's text
    "reading_probe",      # the probe of the reader's middle-layer state (confidence.probe)
    "quoted_passage_lp",  # log p(y|x,z) of z the answer is quoted from, with no constraint
)

_READING = FEATURES[FEATURES.index("best_passage_lp"):FEATURES.index("closed_book_lp")]
# The features of the pass that reads the answer again after its passage
# (ragdesk.core.engine.reading_state), set by the engine.
READING_PROBE = "reading_probe"
QUOTED_PASSAGE_LP = "quoted_passage_lp"
READ_AGAIN: tuple[str, ...] = (READING_PROBE, QUOTED_PASSAGE_LP)
# The features of the closed-book pass, the one that costs a forward of its own.
CLOSED_BOOK: tuple[str, ...] = FEATURES[FEATURES.index("closed_book_lp"):
                                        FEATURES.index(READING_PROBE)]

# Words that say nothing about whether a passage is about the question.
_STOP = frozenset((
    "what", "who", "whom", "whose", "which", "when", "where", "why", "how", "is", "are", "was",
    "were", "be", "been", "do", "does", "did", "of", "in", "on", "at", "to", "for", "from", "by",
    "with", "and", "or", "as", "that", "this", "it", "its", "s", "many", "much", "name", "called",
    "first", "last"))


def holders(answer_text: str, docs: Sequence[RetrievedDoc]) -> list[bool]:
    """Which passages hold the answer as whole words (DPR's has-answer test, as evaluation
    scores it): the one definition of "a passage contains this answer"."""
    matcher = AnswerMatcher([answer_text])
    return [matcher.matches(passage_string(d.title, d.text)) for d in docs]


def source_counts(answer: Answer) -> list[int]:
    """How many of the answer's tokens cite each passage (by shown source): the one count
    behind the source bar, the quoted passage and the features."""
    counts = [0] * len(answer.docs)
    for t in answer.tokens:
        if 0 <= t.source < len(counts):
            counts[t.source] += 1
    return counts


_FLOOR = 1e-12


def _reading(answer: Answer, held: Sequence[bool]) -> dict[str, float]:
    """What the tokens' posteriors say about the passages as read (see :class:`AnswerToken`).

    RAG-Token stores p(z|x,y_i,y_<i) ∝ p(z|x) p(y_i|x,z,y_<i) per token, so the answer's
    likelihood under one passage is recovered exactly: log p(y|x,z) = log p(y|x) +
    Σ_i [log p(z|x,y_i,y_<i) - log p(z|x)]. RAG-Sequence stores the running posterior, whose
    last row is p(z|x,y) itself. An answer with no tokens, or from a mode without per-passage
    rows (read together), read nothing passage by passage: its reading is the prior, the
    same under every passage, so that fitting and answering see the same numbers for it."""
    docs, tokens = answer.docs, answer.tokens
    k = len(docs)
    if not k:
        return dict.fromkeys(_READING, 0.0)
    log_prior = [math.log(max(float(d.prob), _FLOOR)) for d in docs]
    lp = max(-40.0, float(answer.logprob)) if math.isfinite(answer.logprob) else -40.0
    per_row = answer.mode in ("token", "sequence") and \
        all(len(t.posterior) == k for t in tokens)
    rows = (tokens if answer.mode == "token" else tokens[-1:]) if per_row else []
    per_passage = [max(-40.0, min(0.0, lp + sum(math.log(max(t.posterior[z], _FLOOR))
                                                   - log_prior[z] for t in rows)))
                   for z in range(k)]
    joint = [a + b for a, b in zip(log_prior, per_passage, strict=True)]
    top = max(joint)
    weights = [math.exp(j - top) for j in joint]
    total = sum(weights)
    read = [w / total for w in weights]
    best = max(range(k), key=read.__getitem__)
    return {
        "best_passage_lp": max(per_passage),
        "best_passage_lp_per_token": max(per_passage) / max(1, len(tokens)),
        "read_posterior_max": read[best],
        "read_on_holders": sum(r for r, h in zip(read, held, strict=True) if h),
        "read_shift": read[best] - math.exp(log_prior[best]),
        "token_source_max": (sum(max(t.posterior) for t in tokens) / len(tokens)
                             if per_row and tokens else read[best]),
    }


def _share_of(words: Sequence[str], within: set[str]) -> float:
    return sum(1 for w in words if w in within) / len(words) if words else 0.0


def answer_features(answer: Answer, closed_book_lp: float | None,
                    closed_book_tokens: int = 0) -> dict[str, float]:
    """The features of one answer, by name (see :data:`FEATURES`); ``closed_book_lp`` over
    ``closed_book_tokens``: the answer read without passages (0 over 0 for no text). With
    ``closed_book_lp`` None (the pass was not run) the :data:`CLOSED_BOOK` features are
    absent, which a model reads as their mean."""
    docs = answer.docs
    n_tok = len(answer.tokens)
    lp = max(-40.0, float(answer.logprob)) if math.isfinite(answer.logprob) else -40.0
    scores = [float(d.score) for d in docs]
    probs = [float(d.prob) for d in docs]
    held = holders(answer.text, docs) if answer.text.strip() else [False] * len(docs)
    counts = source_counts(answer)
    quoted = max(range(len(docs)), key=counts.__getitem__) if docs and n_tok else None
    q_words = [w for w in answer_tokens(answer.question) if w not in _STOP]
    a_words = answer_tokens(answer.text)
    passage_words = (set(answer_tokens(f"{docs[quoted].title} {docs[quoted].text}"))
                     if quoted is not None else set())
    title_words = answer_tokens(docs[quoted].title) if quoted is not None else []
    top1_words = set(answer_tokens(f"{docs[0].title} {docs[0].text}")) if docs else set()
    k = len(docs)
    return {
        "logprob": lp,
        "logprob_per_token": lp / max(1, n_tok),
        "log_tokens": math.log1p(n_tok),
        "top1_score": scores[0] if scores else 0.0,
        "score_margin": scores[0] - scores[1] if len(scores) > 1 else 0.0,
        "top1_prob": max(probs) if probs else 0.0,
        "retrieval_entropy": entropy(probs) / math.log(k) if k > 1 else 0.0,
        "support_prob": sum(p for p, h in zip(probs, held, strict=True) if h),
        "support_share": sum(held) / k if k else 0.0,
        "quoted_top1": float(bool(held) and held[0]),
        "source_share": max(counts) / n_tok if n_tok and counts else 0.0,
        "echo": _share_of(a_words, set(answer_tokens(answer.question))),
        "question_overlap": _share_of(q_words, passage_words),
        "title_overlap": _share_of(title_words, set(answer_tokens(answer.question))),
        "top1_overlap": _share_of(q_words, top1_words),
        "has_digit": float(any(c.isdigit() for c in answer.text)),
        "empty": float(not a_words),
        **_reading(answer, held),
        **({} if closed_book_lp is None else {
            "closed_book_lp": float(closed_book_lp),
            "closed_book_lp_per_token": float(closed_book_lp) / max(1, closed_book_tokens)}),
    }
