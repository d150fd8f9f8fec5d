"""What the confidence model reads of an answer from memory, beside the passages' answer.

The reader's answer with no passage in the prompt (:mod:`ragdesk.core.engine.memory_answer`)
is judged by a model of its own: its likelihood, whether it agrees with the answer read from
the passages, whether a passage retrieved holds it, how well the retriever matched the question
and how sure the passages' answer is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragdesk.core.confidence.features import holders
from ragdesk.core.matching import normalize_answer
from ragdesk.core.types import Answer

if TYPE_CHECKING:
    from ragdesk.core.confidence.model import ConfidenceModel

MEMORY_FEATURES: tuple[str, ...] = (
    "memory_logprob",            # log p(y|x) of the answer from memory, clipped at -40
    "memory_logprob_per_token",  # the same per answer token
    "memory_log_tokens",         # log(1 + its tokens)
    "memory_agrees",             # it is the passages' answer (normalized)
    "memory_held",               # a passage retrieved holds it
    "top1_score",                # the best passage's retrieval score
    "passage_confidence",        # P(right) of the passages' answer
)


KEPT_FEATURES: tuple[str, ...] = (
    "passage_logit",    # log-odds of the passages' answer's P(right)
    "memory_logit",     # log-odds of the answer from memory's P(right)
    "memory_agrees",    # the two are the same words
    "from_memory",      # the answer kept is the one from memory
    "memory_held",      # a passage retrieved holds the answer from memory
    "top1_score",       # the best passage's retrieval score
    "memory_logprob",   # log p(y|x) of the answer from memory
)


def kept_features(passage_confidence: float, memory_confidence: float,
                  memory: Mapping[str, float], from_memory: bool) -> dict[str, float]:
    """The features of the answer kept of the two (see :data:`KEPT_FEATURES`); ``memory``:
    the answer from memory's :func:`memory_features`. The larger of two estimates
    overstates the answer it picks, and the two agreeing, or a passage holding the answer
    from memory, say more than either estimate alone."""
    return {"passage_logit": _logit(passage_confidence),
            "memory_logit": _logit(memory_confidence),
            "memory_agrees": float(memory["memory_agrees"]),
            "from_memory": float(from_memory),
            "memory_held": float(memory["memory_held"]),
            "top1_score": float(memory["top1_score"]),
            "memory_logprob": float(memory["memory_logprob"])}


def _logit(p: float) -> float:
    q = min(max(float(p), 1e-6), 1 - 1e-6)
    return math.log(q / (1 - q))


def keeps_memory(passage_confidence: float, memory_confidence: float, agrees: bool) -> bool:
    """Whether the answer from memory replaces the passages' one: it is likelier right and
    says something else. The same words from memory only make the passages' answer, quoted
    from a passage, likelier right, so that one stays."""
    return memory_confidence > passage_confidence and not agrees


@dataclass(frozen=True)
class MemoryVerdict:
    """What a model with a memory part says of the two candidates."""

    memory_confidence: float  # P(right) of the answer from memory
    from_memory: bool         # the answer kept is the one from memory
    confidence: float         # P(right) of the answer kept


def judge_memory(model: ConfidenceModel, passage_confidence: float,
                 memory: Mapping[str, float]) -> MemoryVerdict:
    """The engine's rule, for answering and for rescoring evaluation rows alike: ``model``
    (one with a memory part) judges the answer from memory, whose features ``memory`` holds,
    beside the passages' answer of P(right) ``passage_confidence``; the likelier is kept, and
    its confidence is the larger P(right), or the kept part's where the model has one."""
    if model.memory is None:
        raise ValueError("the model has no memory part")
    features = {**memory, "passage_confidence": float(passage_confidence)}
    p = model.memory.predict(features)
    use = keeps_memory(passage_confidence, p, bool(features["memory_agrees"]))
    confidence = (max(passage_confidence, p) if model.kept is None else
                  model.kept.predict(kept_features(passage_confidence, p, features, use)))
    return MemoryVerdict(p, use, confidence)


def memory_features(memory: Answer, passages_text: str,
                    passage_confidence: float) -> dict[str, float]:
    """The features of ``memory`` by name (see :data:`MEMORY_FEATURES`) beside the answer
    read from the passages, ``passages_text``, of P(right) ``passage_confidence``."""
    n_tok = len(memory.tokens)
    lp = max(-40.0, float(memory.logprob)) if math.isfinite(memory.logprob) else -40.0
    text = memory.text.strip()
    agrees = bool(text) and normalize_answer(text) == normalize_answer(passages_text)
    held = bool(text) and bool(memory.docs) and any(holders(text, memory.docs))
    return {
        "memory_logprob": lp,
        "memory_logprob_per_token": lp / max(1, n_tok),
        "memory_log_tokens": math.log1p(n_tok),
        "memory_agrees": float(agrees),
        "memory_held": float(held),
        "top1_score": float(memory.docs[0].score) if memory.docs else 0.0,
        "passage_confidence": float(passage_confidence),
    }
