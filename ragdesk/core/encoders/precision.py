"""The precision an encoder computes in, chosen per snapshot: its passages' vectors and the
questions asked of it.

``float32`` is the model's own transformers forward, the exact reference; ``bfloat16`` is the
fused kernel (:mod:`ragdesk.core.kernels.bert`) with bfloat16 weights and activations. A
snapshot's manifest records what its passages were computed in and what its questions are
computed in; questions asked of it follow that record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ragdesk.core.cpu import cpu_has_native_bf16
from ragdesk.core.encoders.identity import DPR_FAMILY, EncoderInfo
from ragdesk.core.errors import BadInputError
from ragdesk.core.options import ENCODER_PRECISIONS

FLOAT32, BFLOAT16 = ENCODER_PRECISIONS
EXACT = FLOAT32
# "float32" there keeps the exact forward wherever a precision is not given explicitly
FAST_ENV = "RAGDESK_ENCODE_PRECISION"


def check_encoder_precision(precision: str) -> str:
    if precision not in ENCODER_PRECISIONS:
        raise BadInputError(f"The encoder precision must be one of "
                            f"{', '.join(ENCODER_PRECISIONS)}, not {precision!r}.")
    return precision


@dataclass(frozen=True)
class EncoderPrecision:
    """What a snapshot's passage vectors were computed in, and what its questions are."""

    passages: str
    questions: str

    def to_json(self) -> dict[str, str]:
        return {"passages": self.passages, "questions": self.questions}

    @classmethod
    def from_json(cls, d: object) -> EncoderPrecision:
        if not isinstance(d, dict):
            raise ValueError(f"the encoder precision is not an object: {d!r}")
        return cls(passages=str(d["passages"]), questions=str(d["questions"]))

    @classmethod
    def both(cls, precision: str) -> EncoderPrecision:
        return cls(passages=precision, questions=precision)

    def label(self) -> str:
        """One word where both agree, else both named."""
        if self.passages == self.questions:
            return self.passages
        return f"{self.passages} (questions {self.questions})"


def _exact_by_env() -> bool:
    return os.environ.get(FAST_ENV, "").strip().lower() in (EXACT, "fp32", "exact")


def default_precision(info: EncoderInfo) -> EncoderPrecision:
    """The precision an import uses when none is asked for, per encoder family.

    - DPR: float32 throughout. A DPR snapshot is how the RAG paper's retrieval is
      reproduced, and bfloat16 passage vectors moved its scores off the reference's q·d by
      more than 1e-3 (relative) on every question tried.
    - sentence-transformers: passages in bfloat16 where the CPU multiplies it natively (on
      the starter snapshot the same top-20 accuracy as float32 vectors, 0.459 against 0.458,
      at 3x the passages per second: docs/benchmarks.md), questions in float32, which costs
      nothing at one question per answer. float32 passages elsewhere: emulated bfloat16 is
      slower than float32.

    ``RAGDESK_ENCODE_PRECISION=float32`` makes the default float32 throughout.
    """
    if info.family == DPR_FAMILY or _exact_by_env() or not cpu_has_native_bf16():
        return EncoderPrecision.both(FLOAT32)
    return EncoderPrecision(passages=BFLOAT16, questions=FLOAT32)


def chosen_precision(info: EncoderInfo, precision: str | None) -> EncoderPrecision:
    """``precision`` for passages and questions alike, or the encoder's default (None)."""
    if precision is None:
        return default_precision(info)
    return EncoderPrecision.both(check_encoder_precision(precision))


def as_computed(chosen: EncoderPrecision, passages_ran: str) -> EncoderPrecision:
    """What a snapshot records: its passages' precision as they were computed, and the
    questions' as chosen, except where bfloat16 was chosen and the passages fell back to
    float32 (the fused kernel does not run this model on this CPU): the questions would fall
    back just the same, so the record says float32 for them too."""
    if chosen.passages == BFLOAT16 and passages_ran == FLOAT32:
        return EncoderPrecision.both(FLOAT32)
    return EncoderPrecision(passages_ran, chosen.questions)
