"""The answer options: their names, their allowed values and their one set of defaults.

The engine (``Engine.answer``), the CLI (argument choices) and the GUI (controls, settings)
all take them from here. Nothing heavy is imported, so the CLI can build its argument
parser without loading the engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast, get_args

from ragdesk.core.errors import BadInputError

# How the generator reads the K passages: one row per passage, marginalized over p(z|x) as the
# paper's RAG-Token and RAG-Sequence, or "together": all K in one prompt (decoder-only
# generators; token sources from the passage the answer is quoted from).
Mode = Literal["token", "sequence", "together"]
MODES: tuple[Mode, ...] = get_args(Mode)
# The modes that marginalize over passages (what training and the paper's checkpoints use).
PER_PASSAGE_MODES: tuple[Mode, ...] = ("token", "sequence")
# What `ragdesk train` optimizes (see ragdesk.core.training.config): "rag", the answer's RAG
# likelihood through the generator; "passages", the question encoder alone.
TRAIN_OBJECTIVES = ("rag", "passages")

# RAG-Sequence only: "thorough" scores every hypothesis under every passage (the paper's),
# "fast" gives p(y|x,z) ≈ 0 where a passage's beam did not produce the hypothesis.
Decoding = Literal["thorough", "fast"]
DECODINGS: tuple[Decoding, ...] = get_args(Decoding)

# "dense": the question encoder over the snapshot index; "sparse": BM25; "hybrid": both,
# re-ranked (see ragdesk.core.retrieval).
RetrieverName = Literal["dense", "sparse", "hybrid"]
RETRIEVERS: tuple[RetrieverName, ...] = get_args(RetrieverName)

# "short": the answer alone (a name, date, number or phrase), what factoid questions want;
# "sentence": a full sentence.
Style = Literal["short", "sentence"]
STYLES: tuple[Style, ...] = get_args(Style)
DEFAULT_STYLE: Style = "short"

# Generator arithmetic for causal generators: "float32" (exact), "bfloat16" (the fast path
# on CPUs that multiply it natively) or "int8".
Precision = Literal["float32", "bfloat16", "int8"]
PRECISIONS: tuple[Precision, ...] = get_args(Precision)
# what a passage and question encoder computes in (see ragdesk.core.encoders.precision)
ENCODER_PRECISIONS: tuple[str, ...] = ("float32", "bfloat16")

# Grounded decoding (answers are spans of the passages): None means "automatic", on for
# causal generators — measured on the starter pack, where it raised exact match (see
# docs/benchmarks.md) — and off for seq2seq RAG checkpoints, which the paper ran free.
GROUNDED_AUTO = None

# The settings keys of the options that are remembered between runs.
PRECISION_KEY = "generator_precision"
# The reading mode the user chose per model pack ({pack: mode}); one pack's choice is not
# another's (the reader pack reads best together, and the starter's confidence model judges
# RAG-Token answers only). The settings' "mode" is for packs with no mode of their own.
PACK_MODES_KEY = "pack_modes"


def resolve_grounded(grounded: bool | None, generator_kind: str) -> bool:
    if grounded is None:
        return generator_kind == "causal"
    return bool(grounded)


def _one_of(name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise BadInputError(f"Unknown {name} {value!r}.",
                            hint="Choose one of: " + ", ".join(allowed) + ".")


def check_mode(mode: str, decoding: str | None = None) -> None:
    _one_of("mode", mode, MODES)
    if decoding is not None:
        _one_of("decoding", decoding, DECODINGS)


def check_style(style: str) -> str:
    _one_of("answer style", style, STYLES)
    return style


def style_or_default(style: str | None) -> Style:
    """An answer's recorded style (None or unknown for answers from older versions) as the
    prompts take it."""
    return next((s for s in STYLES if s == style), DEFAULT_STYLE)


def check_retriever_name(name: str) -> None:
    _one_of("retriever", name, RETRIEVERS)


def check_precision(precision: str) -> str:
    _one_of("generator precision", precision, PRECISIONS)
    return precision


def check_lengths(num_beams: object, max_new_tokens: object, min_new_tokens: object) -> None:
    """Beams and answer lengths, with messages a user can act on."""
    if not isinstance(num_beams, int) or num_beams < 1:
        raise BadInputError(f"The number of beams must be at least 1, not {num_beams!r}.")
    if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise BadInputError(f"max_new_tokens must be at least 1, not {max_new_tokens!r}.")
    if not isinstance(min_new_tokens, int) or not 0 <= min_new_tokens <= max_new_tokens:
        raise BadInputError(
            f"min_new_tokens must be between 0 and max_new_tokens ({max_new_tokens}), "
            f"not {min_new_tokens!r}.")


# The range of the retrieval temperature τ of p(z|x) = softmax(score / τ): a negative τ
# inverts the ranking, 0 and a τ near it divide by zero, an infinite one is uniform.
MIN_TEMPERATURE = 1e-3
MAX_TEMPERATURE = 100.0


def check_temperature_value(temperature: object) -> None:
    """A temperature a question may override the snapshot's with (None: the snapshot's)."""
    if temperature is None:
        return
    if (isinstance(temperature, bool) or not isinstance(temperature, (int, float))
            or not MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE):  # nan fails this too
        raise BadInputError(
            f"The retrieval temperature must be between {MIN_TEMPERATURE:g} and "
            f"{MAX_TEMPERATURE:g}, not {temperature!r}.",
            hint="Leave it out to use the snapshot's own (`ragdesk index calibrate` fits it).")


def check_n_docs_value(n_docs: object) -> None:
    if not isinstance(n_docs, int) or isinstance(n_docs, bool) or n_docs < 1:
        raise BadInputError(f"The number of passages must be at least 1, not {n_docs!r}.",
                            hint="Ask for a whole number of passages, 1 or more (5 by "
                                 "default).")


def _optional_bool(value: object) -> bool | None:
    return None if value is None else bool(value)


@dataclass(frozen=True)
class AnswerOptions:
    """How to answer a question; the defaults here are the only ones.

    ``decoding`` defaults to "fast": what the GUI and the CLI have always used (through the
    settings), and for greedy decoding as exact as "thorough" on the passages' own beams.
    ``precision`` None: bfloat16 where the CPU has it natively, else float32 (decided where
    the generator loads). ``temperature`` None: the snapshot's τ of p(z|x).
    """

    mode: Mode = "token"
    decoding: Decoding = "fast"
    n_docs: int = 5
    num_beams: int = 1
    max_new_tokens: int = 32
    min_new_tokens: int = 0
    retriever: RetrieverName = "dense"
    style: Style = DEFAULT_STYLE
    grounded: bool | None = GROUNDED_AUTO
    precision: Precision | None = None
    temperature: float | None = None
    # Below the confidence model's threshold, say "not found in this snapshot" (the guess
    # stays in the answer, one click away); False: always give the guess as the answer.
    abstain: bool = True

    def check(self) -> AnswerOptions:
        """Raise ``BadInputError`` for a value no answer can use; returns self."""
        check_mode(self.mode, self.decoding)
        check_retriever_name(self.retriever)
        check_style(self.style)
        check_n_docs_value(self.n_docs)
        check_lengths(self.num_beams, self.max_new_tokens, self.min_new_tokens)
        check_temperature_value(self.temperature)
        if self.precision is not None:
            check_precision(self.precision)
        return self

    # Any: the changes go on to dataclasses.replace, which checks each field's type
    def replace(self, **changes: Any) -> AnswerOptions:
        """A copy with ``changes``; None values keep what this one has (unset CLI flags)."""
        given = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **given)

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> AnswerOptions:
        """The options remembered in the settings (missing or null keys: the defaults).
        Values are not checked here: :meth:`check` names a bad one when it is used."""
        d = cls()
        got = {field: values.get(key) for field, key in _SETTINGS_KEYS.items()}
        return cls(
            mode=cast(Mode, str(got["mode"] or d.mode)),
            decoding=cast(Decoding, str(got["decoding"] or d.decoding)),
            n_docs=int(got["n_docs"] or d.n_docs),
            num_beams=int(got["num_beams"] or d.num_beams),
            max_new_tokens=int(got["max_new_tokens"] or d.max_new_tokens),
            min_new_tokens=int(got["min_new_tokens"] or d.min_new_tokens),
            retriever=cast(RetrieverName, str(got["retriever"] or d.retriever)),
            style=cast(Style, str(got["style"] or d.style)),
            grounded=_optional_bool(got["grounded"]),
            precision=cast("Precision | None",
                           None if got["precision"] is None else str(got["precision"])),
            abstain=d.abstain if got["abstain"] is None else bool(got["abstain"]),
        )

    def to_settings(self) -> dict[str, object]:
        """What :meth:`from_settings` reads back (the temperature is per question only)."""
        return {key: getattr(self, field) for field, key in _SETTINGS_KEYS.items()}


# option field -> settings key (the same name, except the precision's older key)
_SETTINGS_KEYS: dict[str, str] = {
    "mode": "mode", "decoding": "decoding", "n_docs": "n_docs", "num_beams": "num_beams",
    "max_new_tokens": "max_new_tokens", "min_new_tokens": "min_new_tokens",
    "retriever": "retriever", "style": "style", "grounded": "grounded",
    "precision": PRECISION_KEY, "abstain": "abstain",
}

DEFAULT_OPTIONS = AnswerOptions()


def pack_mode_choices(value: object) -> dict[str, Mode]:
    """The reading modes the user chose per pack (the settings' ``PACK_MODES_KEY``), their
    valid entries only: a damaged entry is no choice."""
    if not isinstance(value, Mapping):
        return {}
    return {k: cast(Mode, v) for k, v in value.items() if isinstance(k, str) and v in MODES}


def with_pack_mode(options: AnswerOptions, pack_mode: str | None,
                   chosen: str | None) -> AnswerOptions:
    """``options`` read in the mode chosen for this pack (``--mode``, or the pack's entry in
    the settings), else in the pack's own (``PackSpec.default_mode``: what was measured best
    for it), else as they are (the settings' mode, for a pack with no mode of its own)."""
    mode = chosen if chosen in MODES else pack_mode
    if mode is None or mode not in MODES:
        return options
    return dataclasses.replace(options, mode=mode)


def check_question(question: str) -> str:
    if not isinstance(question, str):
        raise BadInputError(f"The question must be text (str), not {type(question).__name__}.",
                            hint="Decode bytes first, e.g. question.decode('utf-8').")
    if not question.strip():
        raise BadInputError("The question is empty.", hint="Type a question to ask.")
    try:
        question.encode("utf-8")
    except UnicodeEncodeError as exc:
        # Lone surrogates: undecodable argv bytes (Python keeps byte 0xNN as U+DCNN), or
        # "\ud800" from JSON or the API. The tokenizers reject them with a TypeError deep
        # inside the model.
        code = ord(question[exc.start])
        what = (f"the byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF
                else f"a lone surrogate U+{code:04X}")
        raise BadInputError(
            f"The question is not valid UTF-8 text: character {exc.start + 1} is {what}.",
            hint="Type the question again as UTF-8 text; check the terminal's or the "
                 "file's encoding.") from None
    return question
