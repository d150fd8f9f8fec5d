"""Questions and passages made inert for a generator's tokenizer.

A prompt is rendered as one string and tokenized with the tokenizer's special tokens
recognized, which the prompt's own markers need (``<start_of_turn>``, ``<|im_start|>``). A
passage or question holding the same strings would become the same control tokens: an imported
document could end the prompt with ``<eos>`` or write a chat turn of its own. So in text that
comes from passages and questions, each special token's string is broken by a zero-width space
after its first character: it reads as the characters it shows, never as the control token.
Text without such a string is left exactly as it was, so ordinary prompts tokenize as before.
"""

from __future__ import annotations

import re
from typing import Any

from ragdesk.core.engine.contracts import PassageText

BREAK = "\u200b"  # ZERO WIDTH SPACE: no special token holds it


def special_strings(tokenizer: Any) -> tuple[str, ...]:
    """The strings the tokenizer reads as special tokens, longest first."""
    found = {str(t) for t in (getattr(tokenizer, "all_special_tokens", None) or [])}
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found.update(str(t.content) for t in decoder.values() if getattr(t, "special", False))
    return tuple(sorted((s for s in found if s), key=lambda s: (-len(s), s)))


class InertText:
    """Breaks a tokenizer's special-token strings in untrusted text (see the module)."""

    def __init__(self, tokenizer: Any) -> None:
        self.specials = special_strings(tokenizer)
        self._firsts = frozenset(s[0] for s in self.specials)
        # compiled on first need: Gemma's 6,249 special strings take a tenth of a second,
        # which an answer whose text holds none of their first characters never pays
        self._pattern: re.Pattern[str] | None = None

    def text(self, text: str) -> str:
        if not self.specials or not any(c in text for c in self._firsts):
            return text
        if self._pattern is None:
            self._pattern = re.compile("|".join(map(re.escape, self.specials)))
        return self._pattern.sub(lambda m: m.group(0)[0] + BREAK + m.group(0)[1:], text)

    def passage(self, passage: PassageText) -> PassageText:
        title, text = self.text(passage.title), self.text(passage.text)
        if title == passage.title and text == passage.text:
            return passage
        return PassageText(title, text)
