"""The decoding options the decoders take, checked once with messages a user can act on.

The names, allowed values and defaults of every answer option live in
:mod:`ragdesk.core.options`; this is the subset a decoder loop needs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ragdesk.core.engine.generators import Generator, PassageText
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

    def fits(self, generator: Generator) -> DecodeOptions:
        """Refuse an answer longer than the generator's positions reach (BART's learned
        position table ends at 1,024, the tiny one's at 512: past it, an IndexError deep in
        the model), before any work."""
        limit = getattr(generator, "max_positions", None)
        if limit is None:
            return self
        # A seq2seq decoder spends position 0 on its start token; a causal prompt needs
        # at least one.
        room = int(limit) - 1
        if self.max_new_tokens > room:
            raise BadInputError(
                f"max_new_tokens {self.max_new_tokens:,} is more than the generator "
                f"{generator.name!r} can write: its position limit is {limit:,} tokens, so at "
                f"most {room:,} new tokens.",
                hint=f"Ask for at most {room:,} new tokens (--max-new-tokens {room}).")
        return self


def passages_of(docs: Sequence[Hit]) -> list[PassageText]:
    if not docs:
        raise BadInputError("No passages were retrieved for this question.",
                            hint="Check that the snapshot holds passages.")
    return [PassageText(d.title, d.text) for d in docs]
