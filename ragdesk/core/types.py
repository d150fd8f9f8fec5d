"""Plain data types shared by retrieval, the engine, evaluation and the GUI."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace


@dataclass(frozen=True)
class Passage:
    id: int
    title: str
    text: str


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: ``score`` is the exact inner product d(z)·q(x)."""

    id: int
    title: str
    text: str
    score: float


@dataclass(frozen=True)
class RetrievedDoc:
    """A passage as the engine used it: rank order, score and p(z|x)."""

    id: int
    title: str
    text: str
    score: float
    prob: float
    snapshot: str | None = None


@dataclass(frozen=True)
class AnswerToken:
    """One generated token and its source attribution (K floats summing to 1).

    RAG-Token: p(z | x, y_i, y_<i). RAG-Sequence: the running posterior p(z | x, y_<=i).
    """

    id: int
    text: str
    posterior: list[float]
    # The passage shown as this token's source when the posterior's argmax is not one that
    # holds it: a grounded answer quoted from a passage cites that passage for every token
    # (see ragdesk.core.confidence.sources). None: the argmax of the posterior.
    quoted_from: int | None = None

    @property
    def source(self) -> int:
        """The shown source's rank; -1 for a token read from no passage (an answer from
        memory, see ragdesk.core.engine.memory_answer)."""
        if self.quoted_from is not None:
            return self.quoted_from
        if not self.posterior:
            return -1
        return max(range(len(self.posterior)), key=self.posterior.__getitem__)


@dataclass(frozen=True)
class ReadingState:
    """The generator's residual stream after ``layer`` (0-based), averaged over the answer's
    tokens as read after the prompt they were quoted from (the confidence model's probe
    reads it; see ragdesk.core.engine.reading_state)."""

    layer: int
    values: list[float]


@dataclass
class Answer:
    question: str
    text: str
    token_ids: list[int]
    tokens: list[AnswerToken]
    docs: list[RetrievedDoc]
    logprob: float
    mode: str
    decoding: str | None = None
    snapshot: str | None = None
    timings: dict[str, float] = field(default_factory=dict)
    cancelled: bool = False
    temperature: float = 1.0  # τ of p(z|x) = softmax(score / τ)
    style: str | None = None  # the answer style the prompt asked for
    grounded: bool = False  # whether the answer was constrained to passage spans
    # Which retriever found the passages ("dense", "sparse" = BM25, "hybrid"), when the
    # caller knows: a snapshot whose vectors are still being computed answers with BM25.
    retriever: str | None = None
    # P(the answer is right), from a model fitted on held-out questions
    # (ragdesk.core.confidence); None when no model fits this snapshot and generator.
    confidence: float | None = None
    # The confidence is below the threshold: front ends say "not found in this snapshot"
    # and keep ``text`` (the best guess) one click away.
    abstained: bool = False
    # The confidence model's inputs, kept for evaluation and the inspector.
    features: dict[str, float] = field(default_factory=dict)
    # The text comes from the reader's memory (the question alone, no passage in the prompt),
    # kept because the confidence model found it likelier right than the passages' answer.
    from_memory: bool = False
    # The other candidate's text when both were read: the memory answer of an answer from the
    # passages, or the passages' answer of one from memory (for evaluation and the inspector).
    other_text: str | None = None
    # For evaluation (fitting the probe) only: hundreds of numbers, so never in to_json().
    reading_state: ReadingState | None = field(default=None, repr=False)

    def to_json(self) -> dict[str, object]:
        d = asdict(replace(self, reading_state=None))  # not deep-copied only to be dropped
        del d["reading_state"]
        for t, tok in zip(d["tokens"], self.tokens, strict=True):
            t["source"] = tok.source
        return d
