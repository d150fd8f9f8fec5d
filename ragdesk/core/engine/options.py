"""Decoding options, checked once with messages a user can act on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragdesk.core.engine.generators import PassageText
from ragdesk.core.errors import BadInputError
from ragdesk.core.types import Hit

MODES = ("token", "sequence")
DECODINGS = ("thorough", "fast")


@dataclass(frozen=True)
class DecodeOptions:
    num_beams: int = 1
    max_new_tokens: int = 32
    min_new_tokens: int = 0

    def check(self) -> DecodeOptions:
        if not isinstance(self.num_beams, int) or self.num_beams < 1:
            raise BadInputError(f"The number of beams must be at least 1, not {self.num_beams!r}.")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise BadInputError(
                f"max_new_tokens must be at least 1, not {self.max_new_tokens!r}.")
        if not isinstance(self.min_new_tokens, int) or not (
                0 <= self.min_new_tokens <= self.max_new_tokens):
            raise BadInputError(
                f"min_new_tokens must be between 0 and max_new_tokens ({self.max_new_tokens}), "
                f"not {self.min_new_tokens!r}.")
        return self


def check_mode(mode: str, decoding: str | None) -> None:
    if mode not in MODES:
        raise BadInputError(f"Unknown mode {mode!r}.", hint="Use 'token' or 'sequence'.")
    if decoding is not None and decoding not in DECODINGS:
        raise BadInputError(f"Unknown decoding {decoding!r}.", hint="Use 'thorough' or 'fast'.")


def passages_of(docs: Sequence[Hit]) -> list[PassageText]:
    if not docs:
        raise BadInputError("No passages were retrieved for this question.",
                            hint="Check that the snapshot holds passages.")
    return [PassageText(d.title, d.text) for d in docs]
