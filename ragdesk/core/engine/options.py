"""The decoding options the decoders take, checked once with messages a user can act on.

The names, allowed values and defaults of every answer option live in
:mod:`ragdesk.core.options`; this is the subset a decoder loop needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragdesk.core.engine.generators import PassageText
from ragdesk.core.errors import BadInputError
from ragdesk.core.options import DEFAULT_OPTIONS, check_lengths
from ragdesk.core.types import Hit


@dataclass(frozen=True)
class DecodeOptions:
    num_beams: int = DEFAULT_OPTIONS.num_beams
    max_new_tokens: int = DEFAULT_OPTIONS.max_new_tokens
    min_new_tokens: int = DEFAULT_OPTIONS.min_new_tokens

    def check(self) -> DecodeOptions:
        check_lengths(self.num_beams, self.max_new_tokens, self.min_new_tokens)
        return self


def passages_of(docs: Sequence[Hit]) -> list[PassageText]:
    if not docs:
        raise BadInputError("No passages were retrieved for this question.",
                            hint="Check that the snapshot holds passages.")
    return [PassageText(d.title, d.text) for d in docs]
